//! Serving over Streamable HTTP, with a middleware in front of `/mcp` for the behaviours that
//! live at the HTTP level: `--require-header`, `--crash-after-calls`, `--never-initialize`, the
//! `freeze` tool, the `tools/list` vendor fields, `--strict-lifecycle`,
//! `--stateless-get-status`, `--server-requests-on-get` (`reroute.rs`) and
//! `--resumable-after-ms` (`resume.rs`), `--json-lines`. Event streams are rewritten one whole event at a time
//! (`sse.rs`). `--era modern` configures rmcp's service as a 2026-only server.

use std::collections::HashSet;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::{StreamExt as _, TryStreamExt as _};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::reroute::Reroute;
use crate::resume::{self, Resumable};
use crate::server::{FixtureServer, HttpCounters, Shared};
use crate::sse::{self, EventStream};
use crate::stdio::CRASH_STATUS;
use crate::vendor::{add_vendor_fields, rewrite_event};

/// Largest request body the crash counter reads to find the method.
const MAX_INSPECTED_BODY: usize = 16 * 1024 * 1024;
/// How long the process lives on after the crashing response has been handed to the server,
/// so the response bytes reach the socket before the exit.
const CRASH_GRACE: Duration = Duration::from_millis(100);
/// How long `--strict-lifecycle` takes to process `notifications/initialized` before it
/// answers it and counts the session as initialized.
const STRICT_SETUP: Duration = Duration::from_millis(100);
const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_HEADER: &str = "last-event-id";
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// HTTP-level options.
#[derive(Debug, Clone)]
pub(crate) struct HttpOptions {
    pub(crate) bind: String,
    pub(crate) require_header: Option<(HeaderName, HeaderValue)>,
    pub(crate) crash_after_calls: Option<u64>,
    pub(crate) never_initialize: bool,
    pub(crate) server_requests_on_get: bool,
    pub(crate) resumable_after: Option<Duration>,
    pub(crate) stateless_get_status: Option<StatusCode>,
    pub(crate) strict_lifecycle: bool,
    /// Leave Nagle's algorithm on (no `TCP_NODELAY`), as a plain `axum::serve` does.
    pub(crate) nagle: bool,
    /// Answer 2026-07-28 event streams as newline-delimited JSON (`--json-lines`).
    pub(crate) json_lines: bool,
}

#[derive(Debug)]
struct Guard {
    shared: Arc<Shared>,
    options: HttpOptions,
    calls_seen: AtomicU64,
    reroute: Option<Arc<Reroute>>,
    resumable: Option<Arc<Resumable>>,
    /// Sessions that have sent `notifications/initialized` (`--strict-lifecycle`).
    initialized: Mutex<HashSet<String>>,
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
    match *request.method() {
        Method::POST => post(&g, request, next).await,
        Method::GET => get(&g, request, next).await,
        _ => next.run(request).await,
    }
}

fn session_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

async fn get(g: &Guard, request: Request, next: Next) -> Response {
    if let Some(status) = g.options.stateless_get_status {
        HttpCounters::count(&g.shared.http.gets_refused);
        return (
            status,
            "this server offers no standalone event stream (--stateless-get-status)",
        )
            .into_response();
    }
    let session = session_of(request.headers());
    let last_event = request
        .headers()
        .get(LAST_EVENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let (Some(resumable), Some(session), Some(last)) = (&g.resumable, &session, &last_event)
        && let Some(events) = resumable.resume(session, last)
    {
        return Response::builder()
            .status(StatusCode::OK)
            .header(CONTENT_TYPE, "text/event-stream")
            .header(CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(events))
            .unwrap_or_else(|e| {
                (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
            });
    }
    let response = next.run(request).await;
    // Moved requests go on the standalone stream: a GET without `Last-Event-ID`, or one that
    // resumes the standalone stream (its ids name no request stream).
    let standalone = last_event.as_deref().is_none_or(|id| !id.contains('/'));
    match (&g.reroute, session) {
        (Some(reroute), Some(session))
            if standalone
                && response.status().is_success()
                && is_event_stream(response.headers()) =>
        {
            let (parts, body) = response.into_parts();
            let events = reroute.merge(session, sse::events(body));
            Response::from_parts(parts, Body::from_stream(events))
        }
        _ => response,
    }
}

fn initialized_sessions(g: &Guard) -> std::sync::MutexGuard<'_, HashSet<String>> {
    // A set insert cannot be seen half-done, so a poisoned lock is still consistent.
    g.initialized.lock().unwrap_or_else(|e| e.into_inner())
}

/// True if rmcp serves this request at 2026-07-28 or later, which has no lifecycle to be
/// strict about: its `_meta` or its `MCP-Protocol-Version` header names such a version.
/// ISO dates compare as strings.
fn is_modern(headers: &HeaderMap, message: &Value) -> bool {
    let modern = |v: &str| v >= "2026-07-28";
    let in_meta = message
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
        .is_some_and(modern);
    let in_header = headers
        .get(PROTOCOL_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(modern);
    in_meta || in_header
}

/// `--strict-lifecycle`: the refusal of a request that came before its session's
/// `notifications/initialized` was processed, or `None` if it may go on. Requests served at
/// 2026-07-28 have no lifecycle and always go on.
fn strict_refusal(
    g: &Guard,
    headers: &HeaderMap,
    session: Option<&str>,
    message: &Value,
) -> Option<Response> {
    let method = message.get("method").and_then(Value::as_str)?;
    let id = message.get("id")?;
    if matches!(method, "initialize" | "ping")
        || is_modern(headers, message)
        || session.is_some_and(|s| initialized_sessions(g).contains(s))
    {
        return None;
    }
    Some(
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32600,
                    "message": format!("{method} received before notifications/initialized"),
                },
            })),
        )
            .into_response(),
    )
}

async fn post(g: &Guard, request: Request, next: Next) -> Response {
    let started = tokio::time::Instant::now();
    let (mut parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_INSPECTED_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("unreadable body: {e}")).into_response();
        }
    };
    let message = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str);
    if method == Some("subscriptions/listen") {
        // See notify.rs: changes after this point reach the stream.
        parts.extensions.insert(g.shared.notifier.mark());
    }
    let session = session_of(&parts.headers);
    let request_headers = parts.headers.clone();
    if g.options.strict_lifecycle
        && let Some(refusal) = strict_refusal(g, &parts.headers, session.as_deref(), &message)
    {
        return refusal;
    }
    let crash = method == Some("tools/call")
        && g.options
            .crash_after_calls
            .is_some_and(|limit| g.calls_seen.fetch_add(1, Ordering::SeqCst) + 1 == limit);
    let strict_initialized =
        g.options.strict_lifecycle && method == Some("notifications/initialized");
    if strict_initialized {
        // Setting the session up takes a while, as with a server that does its setup here;
        // a client that does not wait for the answer sends its next requests meanwhile.
        tokio::time::sleep(STRICT_SETUP).await;
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    // Like a server whose handler of the notification sets the session's state, the session
    // counts as initialized once the notification has been processed, not when it arrives.
    if strict_initialized
        && response.status().is_success()
        && let Some(session) = &session
    {
        initialized_sessions(g).insert(session.clone());
    }
    let (mut parts, body) = response.into_parts();
    let sse = is_event_stream(&parts.headers);
    if sse && g.options.json_lines && is_modern(&request_headers, &message) {
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        return Response::from_parts(parts, Body::from_stream(json_lines(body)));
    }
    if method == Some("tools/list") && !sse {
        return with_vendor_fields_json(parts, body).await;
    }
    let reroute = g.reroute.as_ref().zip(session.clone()).filter(|_| sse);
    let resumable = g
        .resumable
        .as_ref()
        .zip(session)
        .zip(message.get("id").cloned())
        .filter(|_| sse && method == Some("tools/call"));
    let vendor = sse && method == Some("tools/list");
    if !crash && reroute.is_none() && resumable.is_none() && !vendor {
        return Response::from_parts(parts, body);
    }
    let mut events: EventStream = if sse {
        sse::events(body)
    } else {
        body.into_data_stream().boxed()
    };
    if vendor {
        events = events.map_ok(|event| rewrite_event(&event)).boxed();
    }
    if let Some((reroute, session)) = reroute {
        events = reroute.divert(session, events);
    }
    if let Some(((resumable, session), id)) = resumable {
        events = resumable.hold(session, id, started, events);
    }
    if crash {
        events = events.chain(crash_after_the_body()).boxed();
    }
    Response::from_parts(parts, Body::from_stream(events))
}

/// An event stream's messages as newline-delimited JSON (`--json-lines`), each written as its
/// event arrives; events without data (priming, comments) are left out.
fn json_lines(body: Body) -> EventStream {
    sse::events(body)
        .filter_map(|event| async move {
            match event {
                Ok(event) => sse::message(&event)
                    .map(|message| Ok(axum::body::Bytes::from(format!("{message}\n")))),
                Err(e) => Some(Err(e)),
            }
        })
        .boxed()
}

/// An empty tail for a response body that, once reached, exits the process shortly after
/// (`--crash-after-calls`): the whole response has been produced by then. A client that
/// closes the stream as soon as it has the response may never let the body be polled to its
/// end, so dropping the tail unreached crashes the same way.
fn crash_after_the_body() -> EventStream {
    struct Tail {
        armed: bool,
    }
    impl Tail {
        fn fire(&mut self) {
            if std::mem::take(&mut self.armed) {
                tokio::spawn(
                    async {
                        tokio::time::sleep(CRASH_GRACE).await;
                        eprintln!(
                            "fixture-app: crashing after the configured number of tool calls"
                        );
                        let _ = std::io::stderr().flush();
                        std::process::exit(CRASH_STATUS);
                    }
                    .in_current_span(),
                );
            }
        }
    }
    impl Drop for Tail {
        fn drop(&mut self) {
            self.fire();
        }
    }
    let mut tail = Tail { armed: true };
    futures::stream::poll_fn(move |_| {
        tail.fire();
        Poll::Ready(None)
    })
    .boxed()
}

/// Adds the vendor fields to a `tools/list` response that is a single JSON body (an event
/// stream is rewritten event by event as it flows).
async fn with_vendor_fields_json(mut parts: axum::http::response::Parts, body: Body) -> Response {
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
    Response::from_parts(parts, Body::from(message.to_string()))
}

/// Binds, prints the `listening on` line and serves until the process is stopped.
pub(crate) async fn serve(shared: Arc<Shared>, options: HttpOptions) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(&options.bind)
        .await
        .with_context(|| format!("cannot listen on {}", options.bind))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let factory_shared = shared.clone();
    let mut sessions = LocalSessionManager::default();
    let mut config = StreamableHttpServerConfig::default();
    if options.resumable_after.is_some() {
        // rmcp's priming events carry the stream's first event id and this retry hint.
        sessions.session_config.sse_retry = Some(resume::RETRY);
        config = config.with_sse_retry(Some(resume::RETRY));
    }
    if options.stateless_get_status.is_some() {
        // rmcp's stateless mode: no `Mcp-Session-Id`, every request served on its own.
        config = config.with_legacy_session_mode(false);
    }
    if shared.era.is_modern_only() {
        // A faithful 2026-only server: no session is ever minted (a legacy `initialize` gets
        // a JSON `-32022`), GET and DELETE get 405, and a request without the protocol
        // header and `_meta` version is refused instead of being served as 2025-03-26.
        config = config
            .with_legacy_session_mode(false)
            .with_stateless_protocol_metadata_required(true);
    }
    let mcp = StreamableHttpService::new(
        move || Ok(FixtureServer::new(factory_shared.clone())),
        sessions.into(),
        config,
    );
    let nagle = options.nagle;
    let accepted = shared.clone();
    let guard_state = Arc::new(Guard {
        reroute: options
            .server_requests_on_get
            .then(|| Arc::new(Reroute::new(shared.clone()))),
        resumable: options
            .resumable_after
            .map(|after| Arc::new(Resumable::new(after, shared.clone()))),
        shared,
        options,
        calls_seen: AtomicU64::new(0),
        initialized: Mutex::default(),
    });
    let app = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(guard_state, guard));
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}/mcp").context("writing to stdout")?;
    stdout.flush().context("flushing stdout")?;
    drop(stdout);
    let listener = axum::serve::ListenerExt::tap_io(listener, move |tcp| {
        HttpCounters::count(&accepted.http.connections_accepted);
        if !nagle && let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on a connection: {err}");
        }
    });
    axum::serve(listener, app)
        .await
        .context("HTTP server failed")
}
