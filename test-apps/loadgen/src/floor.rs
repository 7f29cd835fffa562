//! `loadgen floor`: the cheapest Streamable HTTP endpoint an MCP client can talk to, so the
//! benchmark can show what the HTTP hop itself costs rmcp's client on this machine.
//!
//! It answers every POST with one canned JSON body, written on hyper's HTTP/1.1 server with
//! nothing else around it: no session, no event stream, no routing, no tool dispatch,
//! `initialize`, `tools/list`, `tools/call` (echoing `arguments.message`) and `ping` only.
//! A row against it is the floor under every HTTP row: the client building and sending its
//! request on a new connection (rmcp's client does not reuse connections), the kernel's
//! loopback, and reading the answer. Whatever a proxied call costs above this floor is the
//! gateway's and the app's.

use std::convert::Infallible;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// Serves until the process is stopped; prints `listening on URL` first, like the test apps.
pub(crate) async fn serve(bind: &str) -> anyhow::Result<()> {
    let listener = TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding {bind}"))?;
    let address = listener.local_addr()?;
    {
        use std::io::Write as _;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "listening on http://{address}/mcp")?;
        stdout.flush()?;
    }
    loop {
        let (stream, _) = listener.accept().await.context("accepting")?;
        // Answers are one small write; nothing should wait for an ACK.
        stream.set_nodelay(true)?;
        tokio::spawn(async move {
            // A client that goes away mid-request is not this server's problem.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(answer))
                .await;
        });
    }
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() != Method::POST {
        // No standalone stream and no session to end: what a stateless server says.
        return Ok(empty(StatusCode::METHOD_NOT_ALLOWED));
    }
    let Ok(body) = request.into_body().collect().await else {
        return Ok(empty(StatusCode::BAD_REQUEST));
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
        return Ok(empty(StatusCode::BAD_REQUEST));
    };
    let Some(id) = message
        .get("id")
        .filter(|_| message.get("method").is_some())
    else {
        // Notifications and responses are accepted without a body.
        return Ok(empty(StatusCode::ACCEPTED));
    };
    let params = &message["params"];
    let outcome = match message["method"].as_str().unwrap_or_default() {
        "initialize" => Ok(json!({
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "loadgen-floor", "version": env!("CARGO_PKG_VERSION")},
        })),
        "tools/list" => Ok(json!({"tools": [{
            "name": "echo",
            "description": "Returns its message.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
        }]})),
        "tools/call" => Ok(json!({"content": [{
            "type": "text",
            "text": params["arguments"]["message"].as_str().unwrap_or_default(),
        }]})),
        "ping" => Ok(json!({})),
        other => Err(json!({"code": -32601, "message": format!("method not found: {other}")})),
    };
    let reply = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}
