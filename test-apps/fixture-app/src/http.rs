//! Serving over Streamable HTTP, with a middleware in front of `/mcp` for the behaviours that
//! live at the HTTP level: `--require-header`, `--crash-after-calls`, `--never-initialize`, the
//! `freeze` tool and the `tools/list` vendor fields.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::server::{FixtureServer, Shared};
use crate::stdio::CRASH_STATUS;
use crate::vendor::{add_vendor_fields, rewrite_sse_line};

/// Largest request body the crash counter reads to find the method.
const MAX_INSPECTED_BODY: usize = 16 * 1024 * 1024;
/// How long the process lives on after the crashing response has been handed to the server,
/// so the response bytes reach the socket before the exit.
const CRASH_GRACE: Duration = Duration::from_millis(100);

/// HTTP-level options.
#[derive(Debug, Clone)]
pub(crate) struct HttpOptions {
    pub(crate) bind: String,
    pub(crate) require_header: Option<(HeaderName, HeaderValue)>,
    pub(crate) crash_after_calls: Option<u64>,
    pub(crate) never_initialize: bool,
    /// Leave Nagle's algorithm on (no `TCP_NODELAY`), as a plain `axum::serve` does.
    pub(crate) nagle: bool,
}

#[derive(Debug)]
struct Guard {
    shared: Arc<Shared>,
    options: HttpOptions,
    calls_seen: AtomicU64,
}

async fn guard(State(g): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    if let Some((name, expected)) = &g.options.require_header
        && request.headers().get(name) != Some(expected)
    {
        // The expected value is a secret: name the header, never the value.
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({
                "error": "unauthorized",
                "message": format!("this server requires the {name} header with the configured value"),
            })),
        )
            .into_response();
    }
    if g.options.never_initialize {
        // Read the request so the client is not blocked on sending it, then never answer.
        let _ = axum::body::to_bytes(request.into_body(), MAX_INSPECTED_BODY).await;
        return std::future::pending().await;
    }
    if g.shared.frozen.is_cancelled() {
        return std::future::pending().await;
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_INSPECTED_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("unreadable body: {e}")).into_response();
        }
    };
    let method = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_owned));
    let crash = method.as_deref() == Some("tools/call")
        && g.options
            .crash_after_calls
            .is_some_and(|limit| g.calls_seen.fetch_add(1, Ordering::SeqCst) + 1 == limit);
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if method.as_deref() == Some("tools/list") {
        return with_vendor_fields(response).await;
    }
    if !crash {
        return response;
    }
    // Exit once the whole response body (the SSE stream of this call) has been produced.
    let (parts, body) = response.into_parts();
    let mut armed = true;
    let tail = futures::stream::poll_fn(move |_| {
        if armed {
            armed = false;
            tokio::spawn(
                async {
                    tokio::time::sleep(CRASH_GRACE).await;
                    eprintln!("fixture-app: crashing after the configured number of tool calls");
                    let _ = std::io::stderr().flush();
                    std::process::exit(CRASH_STATUS);
                }
                .in_current_span(),
            );
        }
        Poll::Ready(None)
    });
    Response::from_parts(
        parts,
        Body::from_stream(body.into_data_stream().chain(tail)),
    )
}

/// Adds the vendor fields to a `tools/list` response, whether it is an SSE stream (rewritten
/// line by line as it flows) or a single JSON body.
async fn with_vendor_fields(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if content_type.starts_with("application/json") {
        let Ok(bytes) = axum::body::to_bytes(body, MAX_INSPECTED_BODY).await else {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "unreadable tools/list body",
            )
                .into_response();
        };
        let mut message: Value = match serde_json::from_slice(&bytes) {
            Ok(message) => message,
            Err(_) => return Response::from_parts(parts, Body::from(bytes)),
        };
        if let Some(result) = message.get_mut("result") {
            add_vendor_fields(result);
        }
        parts.headers.remove(CONTENT_LENGTH);
        return Response::from_parts(parts, Body::from(message.to_string()));
    }
    let lines = futures::stream::unfold(
        (body.into_data_stream(), Vec::<u8>::new(), false),
        |(mut inner, mut buffer, done)| async move {
            if done {
                return None;
            }
            loop {
                match inner.next().await {
                    Some(Ok(chunk)) => {
                        buffer.extend_from_slice(&chunk);
                        if let Some(end) = buffer.iter().rposition(|b| *b == b'\n') {
                            let complete: Vec<u8> = buffer.drain(..=end).collect();
                            let rewritten: Vec<u8> = complete
                                .split_inclusive(|b| *b == b'\n')
                                .flat_map(rewrite_sse_line)
                                .collect();
                            return Some((Ok(Bytes::from(rewritten)), (inner, buffer, false)));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), (inner, buffer, true))),
                    None if buffer.is_empty() => return None,
                    None => {
                        let rest = Bytes::from(std::mem::take(&mut buffer));
                        return Some((Ok(rest), (inner, buffer, true)));
                    }
                }
            }
        },
    );
    Response::from_parts(parts, Body::from_stream(lines))
}

/// Binds, prints the `listening on` line and serves until the process is stopped.
pub(crate) async fn serve(shared: Arc<Shared>, options: HttpOptions) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(&options.bind)
        .await
        .with_context(|| format!("cannot listen on {}", options.bind))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let factory_shared = shared.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(FixtureServer::new(factory_shared.clone())),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let nagle = options.nagle;
    let guard_state = Arc::new(Guard {
        shared,
        options,
        calls_seen: AtomicU64::new(0),
    });
    let app = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(guard_state, guard));
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}/mcp").context("writing to stdout")?;
    stdout.flush().context("flushing stdout")?;
    drop(stdout);
    let listener = axum::serve::ListenerExt::tap_io(listener, move |tcp| {
        if !nagle && let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on a connection: {err}");
        }
    });
    axum::serve(listener, app)
        .await
        .context("HTTP server failed")
}
