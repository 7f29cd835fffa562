//! The per-app proxy behaves like a direct session: versions per session, a reopenable GET
//! stream that resumes after `Last-Event-ID`, requests cancelled when their client leaves,
//! and bodies read as written, up to the configured limit.

use std::time::{Duration, Instant};

use futures::StreamExt;
use mcpapp_testkit::{AppsDir, bin};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Gateway, PATIENCE};

async fn stdio_gateway(
    id: &str,
    extra: &str,
    tweak: impl FnOnce(&mut mcpapp_host::HostConfig) + Send + 'static,
) -> Gateway {
    let apps = AppsDir::new();
    apps.stdio_app(id, &bin("fixture-app"), &["stdio"], extra);
    Gateway::start(apps, tweak).await
}

/// POSTs `body` (bytes as given) to the app's endpoint; returns status, headers and body.
async fn post_raw(
    gateway: &Gateway,
    app: &str,
    session: Option<&str>,
    version: Option<&str>,
    body: Vec<u8>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/apps/mcp/{app}", gateway.url))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body);
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    if let Some(version) = version {
        request = request.header("MCP-Protocol-Version", version);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

async fn initialize(gateway: &Gateway, app: &str, version: &str) -> (String, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, headers, text) =
        post_raw(gateway, app, None, None, body.to_string().into_bytes()).await;
    assert_eq!(status, 200, "{text}");
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    (session, serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn a_2025_03_26_client_connects_and_unknown_version_headers_are_refused() {
    let gateway = stdio_gateway("versions", "{}", |_| {}).await;
    let (old, init) = initialize(&gateway, "versions", "2025-03-26").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26", "{init}");
    let (new, init) = initialize(&gateway, "versions", "2025-11-25").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        .to_string()
        .into_bytes();
    // Each session with its own version, or without the header (2025-03-26 assumed).
    for (session, version) in [
        (&old, Some("2025-03-26")),
        (&new, Some("2025-11-25")),
        (&old, None),
    ] {
        let (status, _, text) =
            post_raw(&gateway, "versions", Some(session), version, list.clone()).await;
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("\"tools\""), "{text}");
    }
    // Another known version is taken, as the official SDKs' servers do; an unknown one is
    // refused, naming what the session speaks.
    let (status, _, _) = post_raw(
        &gateway,
        "versions",
        Some(&new),
        Some("2025-03-26"),
        list.clone(),
    )
    .await;
    assert_eq!(status, 200);
    // (A 2026-07-28 header makes it a 2026 request, which is checked as such: see eras.rs.)
    for version in ["1999-01-01", "2024-11-05"] {
        let (status, _, text) = post_raw(
            &gateway,
            "versions",
            Some(&new),
            Some(version),
            list.clone(),
        )
        .await;
        assert_eq!(status, 400, "{version}: {text}");
        assert!(text.contains("this session speaks 2025-11-25"), "{text}");
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn invalid_utf8_is_a_parse_error_and_not_forwarded() {
    let gateway = stdio_gateway("bytes", "{}", |_| {}).await;
    let (session, _) = initialize(&gateway, "bytes", "2025-11-25").await;
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":""#.to_vec();
    body.extend_from_slice(&[0xff, 0xfe]);
    body.extend_from_slice(br#""}}}"#);
    let (status, _, text) = post_raw(&gateway, "bytes", Some(&session), None, body).await;
    assert_eq!(status, 400, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("UTF-8")
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_body_limit_is_the_configured_one_and_answers_in_json_rpc() {
    let gateway = stdio_gateway("big", "{}", |config| {
        config.max_body_bytes = 16 * 1024 * 1024
    })
    .await;
    let (session, _) = initialize(&gateway, "big", "2025-11-25").await;
    let call = |bytes: usize| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "a".repeat(bytes)}}})
        .to_string()
        .into_bytes()
    };
    // 3 MiB passes (axum's own default limit is 2 MiB) and comes back whole.
    let (status, headers, text) =
        post_raw(&gateway, "big", Some(&session), None, call(3 << 20)).await;
    assert_eq!(status, 200);
    let reply = answer_of(&headers, &text);
    assert_eq!(
        reply["result"]["structuredContent"]["message"]
            .as_str()
            .map(str::len),
        Some(3 << 20)
    );
    // 17 MiB is refused, as JSON-RPC.
    let (status, _, text) = post_raw(&gateway, "big", Some(&session), None, call(17 << 20)).await;
    assert_eq!(status, 413);
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["jsonrpc"], "2.0");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("16777216 bytes"),
        "{error}"
    );
    gateway.shutdown().await;
}

/// The JSON-RPC answer of a POST, whichever form the proxy chose: a JSON body, or an event
/// stream (the proxy switches to one when the answer is slow, as a 3 MiB echo can be on a
/// busy machine) whose last data event is the answer.
fn answer_of(headers: &reqwest::header::HeaderMap, text: &str) -> Value {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !content_type.starts_with("text/event-stream") {
        return serde_json::from_str(text).unwrap();
    }
    let data = text
        .split("\n\n")
        .map(|event| {
            event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|l| l.strip_prefix(' ').unwrap_or(l))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|data| !data.is_empty())
        .last()
        .expect("the event stream carries the answer");
    serde_json::from_str(&data).unwrap()
}

/// Reads SSE events from `body` until `count` events with data have arrived; returns
/// `(id, data)` pairs.
async fn events(
    body: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    count: usize,
) -> Vec<(String, String)> {
    let mut text = String::new();
    let mut out = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while out.len() < count {
            let chunk = body.next().await.unwrap().unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let event: String = text.drain(..end + 2).collect();
                let id = event
                    .lines()
                    .find_map(|l| l.strip_prefix("id:"))
                    .map(|v| v.trim().to_owned());
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if let (Some(id), false) = (id, data.is_empty()) {
                    out.push((id, data));
                }
            }
        }
    })
    .await
    .unwrap();
    out
}

async fn open_get(
    gateway: &Gateway,
    session: &str,
    last_event: Option<&str>,
) -> (u16, reqwest::Response) {
    let mut request = reqwest::Client::new()
        .get(format!("{}/apps/mcp/stream", gateway.url))
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", session);
    if let Some(last) = last_event {
        request = request.header("Last-Event-ID", last);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response)
}

#[tokio::test]
async fn the_get_stream_reopens_and_resumes_after_the_last_event_id() {
    let gateway = stdio_gateway("stream", "{}", |_| {}).await;
    let (session, _) = initialize(&gateway, "stream", "2025-11-25").await;
    let app = gateway.supervisor.get("stream").unwrap();
    let change = || async {
        // Each call adds a tool and announces it to every session.
        app.call_tool("notify_tools_changed", None, None)
            .await
            .unwrap();
    };
    let (status, first) = open_get(&gateway, &session, None).await;
    assert_eq!(status, 200);
    // One GET at a time.
    let (status, _) = open_get(&gateway, &session, None).await;
    assert_eq!(status, 409);
    let mut first = first.bytes_stream();
    change().await;
    change().await;
    let seen = events(&mut first, 2).await;
    assert!(
        seen.iter()
            .all(|(_, data)| data.contains("notifications/tools/list_changed"))
    );
    assert_eq!(seen[0].0, "1");
    assert_eq!(seen[1].0, "2");
    // The stream drops (the client only took in the first event), more happens meanwhile.
    drop(first);
    change().await;
    // Reopened with the last id it saw: event 2 again, then 3, with their ids.
    let reopened = tokio::time::timeout(PATIENCE, async {
        loop {
            let (status, response) = open_get(&gateway, &session, Some("1")).await;
            if status == 200 {
                return response;
            }
            // The old stream's end reaches the gateway a moment after the client drops it.
            assert_eq!(status, 409);
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    let mut reopened = reopened.bytes_stream();
    let seen = events(&mut reopened, 2).await;
    assert_eq!(
        seen.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["2", "3"]
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_call_whose_client_goes_away_is_cancelled_upstream_at_once() {
    let gateway = stdio_gateway("leaver", "{}", |_| {}).await;
    let (session, _) = initialize(&gateway, "leaver", "2025-11-25").await;
    let app = gateway.supervisor.get("leaver").unwrap();
    let authority = gateway.url.strip_prefix("http://").unwrap().to_owned();
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang"}})
            .to_string();
    let request = format!(
        "POST /apps/mcp/leaver HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    // The reply turns into an event stream when no answer comes quickly: by then the call is
    // running upstream.
    let mut head = [0u8; 64];
    let read = tokio::time::timeout(PATIENCE, stream.read(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&head[..read]).starts_with("HTTP/1.1 200"));
    let left = Instant::now();
    drop(stream);
    let seen = app
        .call_tool(
            "cancellations",
            Some(json!({"waitMs": 30_000}).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap();
    let took = left.elapsed();
    assert_eq!(seen.structured_content.unwrap()["count"], 1);
    eprintln!("the app heard of the cancellation {took:?} after the client left");
    // Far below any timeout that could otherwise explain it (the request timeout is 30 s).
    assert!(took < Duration::from_secs(5), "{took:?}");
    gateway.shutdown().await;
}
