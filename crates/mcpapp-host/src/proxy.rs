//! `/apps/mcp/{appId}`: a Streamable HTTP MCP endpoint for browser views whose sessions are
//! ports on the app's one upstream session.
//!
//! Written by hand rather than with rmcp's server, because rmcp's server decodes every message
//! into its typed model (losing unknown fields) and answers `initialize` itself; here every
//! message passes through as bytes. `initialize` is answered with the upstream's own
//! `InitializeResult`; everything else is forwarded (tools, resources, templates, prompts,
//! completion, subscriptions, ping), `tools/list` raw with app-only tools and no prefix. With
//! `?sessionId=X`, `tools/call` and `resources/read` carry `_meta.sessionId = X`, the agent's
//! session id. A view may call only tools whose visibility includes `"app"`.
//!
//! Sessions are bounded: at most `max_proxy_sessions_per_app` per app (a new one evicts the
//! least recently used *idle* session of that app, or is refused with 503 when every one is
//! busy), and an idle session is closed after `proxy_session_idle` by a periodic sweep. Idle
//! means no request in flight (its reply stream included) and no open GET stream.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, StreamExt};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{
    AppHandle, MessageKind, Port, PortCapabilities, PortError, PortReply, RawMessage,
    ResponseStream, raw_string,
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info};

use crate::chat::KEEP_ALIVE;
use crate::state::AppState;

/// The session header of Streamable HTTP.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// Protocol versions a client may name in `MCP-Protocol-Version`.
const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// How long a response may take before the reply switches from JSON to an event stream.
const JSON_WINDOW: Duration = Duration::from_secs(1);

/// One browser session of `/apps/mcp/{appId}`.
struct ProxySession {
    app_id: String,
    port: Port,
    stream_open: AtomicBool,
    activity: Arc<Activity>,
}

/// What decides whether a session is idle, shared with the requests and streams that keep it
/// busy (they must not keep the session, and so its port, alive themselves).
struct Activity {
    /// Requests in flight (until their reply, event stream included, has ended) plus the
    /// open GET stream.
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            busy: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        })
    }

    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
}

/// Keeps a session busy while held: neither evicted nor expired.
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.busy.fetch_add(1, Ordering::AcqRel);
        activity.touch();
        Self(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // Touch first: a sweep that sees the session idle also sees it freshly used.
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a new session could not be added.
struct SessionsFull {
    /// The session that was refused; dropping it closes its port.
    _refused: ProxySession,
    max: usize,
}

/// Open browser sessions by `Mcp-Session-Id`, at most `max_per_app` per app; idle ones are
/// closed after `idle` by a sweep task that ends when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct ProxySessions {
    inner: Arc<SessionsInner>,
}

struct SessionsInner {
    sessions: Mutex<HashMap<String, Arc<ProxySession>>>,
    max_per_app: usize,
    idle: Duration,
    sweeper_started: AtomicBool,
    /// Cancelled on drop, which ends the sweep task at once.
    stop: CancellationToken,
}

impl Drop for SessionsInner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ProxySessions {
    pub(crate) fn new(max_per_app: usize, idle: Duration) -> Self {
        Self {
            inner: Arc::new(SessionsInner {
                sessions: Mutex::new(HashMap::new()),
                max_per_app,
                idle,
                sweeper_started: AtomicBool::new(false),
                stop: CancellationToken::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ProxySession>>> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a session. At the app's cap, the least recently used idle session of that app
    /// makes room; when every one is busy the new session is refused.
    fn insert(&self, id: String, session: ProxySession) -> Result<(), SessionsFull> {
        self.start_sweeper();
        let max = self.inner.max_per_app;
        let evicted = {
            let mut sessions = self.lock();
            let of_app = sessions
                .values()
                .filter(|s| s.app_id == session.app_id)
                .count();
            let evicted = if of_app >= max {
                let victim = sessions
                    .iter()
                    .filter(|(_, s)| s.app_id == session.app_id && s.activity.is_idle())
                    .min_by_key(|(_, s)| s.activity.last_used())
                    .map(|(key, _)| key.clone());
                let Some(victim) = victim else {
                    return Err(SessionsFull {
                        _refused: session,
                        max,
                    });
                };
                sessions.remove(&victim)
            } else {
                None
            };
            sessions.insert(id, Arc::new(session));
            evicted
        };
        // Dropped outside the lock: dropping the session closes its port.
        if let Some(evicted) = evicted {
            info!(
                app = %evicted.app_id,
                port = evicted.port.id(),
                "closed the least recently used idle browser session to stay within {max} for the app"
            );
        }
        Ok(())
    }

    /// The session `id` of `app_id`, kept busy while the returned guard lives (taken under
    /// the lock, so an eviction cannot slip in between).
    fn get(&self, id: &str, app_id: &str) -> Option<(Arc<ProxySession>, Busy)> {
        let sessions = self.lock();
        let session = sessions.get(id).filter(|s| s.app_id == app_id).cloned()?;
        let busy = Busy::new(&session.activity);
        Some((session, busy))
    }

    fn remove(&self, id: &str) -> bool {
        // The lock is released at the end of this statement, before the session (and its
        // port) is dropped.
        let removed = self.lock().remove(id);
        removed.is_some()
    }

    /// The number of open sessions of `app_id`.
    pub(crate) fn count(&self, app_id: &str) -> usize {
        self.lock().values().filter(|s| s.app_id == app_id).count()
    }

    /// Closes the sessions idle for at least the idle time.
    fn expire(&self) {
        let idle = self.inner.idle;
        let expired: Vec<Arc<ProxySession>> = {
            let mut sessions = self.lock();
            let keys: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.activity.is_idle() && s.activity.last_used().elapsed() >= idle)
                .map(|(key, _)| key.clone())
                .collect();
            keys.iter().filter_map(|key| sessions.remove(key)).collect()
        };
        for session in &expired {
            info!(
                app = %session.app_id,
                port = session.port.id(),
                "closed a browser session idle for {} s",
                idle.as_secs()
            );
        }
    }

    /// Starts the sweep task once, from the first insert (so it runs on the runtime that
    /// serves the routes). It holds only a weak reference and ends when the sessions are
    /// dropped with the host and its routers.
    fn start_sweeper(&self) {
        if self.inner.sweeper_started.swap(true, Ordering::AcqRel) {
            return;
        }
        // Sessions expire between `idle` and a quarter of it later.
        let period =
            (self.inner.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
        let weak = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        let sweep = async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let Some(inner) = weak.upgrade() else { break };
                let sessions = ProxySessions { inner };
                sessions.expire();
            }
            debug!("the browser session sweep ended");
        };
        tokio::spawn(sweep.instrument(tracing::debug_span!("proxy_session_sweep")));
    }
}

/// Query parameters of `/apps/mcp/{appId}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProxyQuery {
    /// The agent session to attribute view calls to (`_meta.sessionId`).
    session_id: Option<String>,
}

/// A JSON-RPC error as an HTTP response.
fn rpc_error(
    status: StatusCode,
    id: Option<&serde_json::value::RawValue>,
    code: i64,
    message: &str,
) -> Response {
    let body = RawMessage::error_response(id, code, message);
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.into_string(),
    )
        .into_response()
}

fn json_reply(message: RawMessage, session: Option<&str>) -> Response {
    let mut response = (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        message.into_string(),
    )
        .into_response();
    if let Some(value) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

fn accepts(headers: &HeaderMap, wanted: &[&str]) -> bool {
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",")
        .to_ascii_lowercase();
    wanted
        .iter()
        .all(|w| accept.contains(w) || accept.contains("*/*"))
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn find_app(state: &AppState, app_id: &str) -> Result<AppHandle, Box<Response>> {
    state.parts.supervisor.get(app_id).ok_or_else(|| {
        Box::new(rpc_error(
            StatusCode::NOT_FOUND,
            None,
            -32001,
            &format!("there is no app '{app_id}' on this gateway"),
        ))
    })
}

fn not_running(app: &AppHandle, id: Option<&serde_json::value::RawValue>) -> Option<Response> {
    let state = app.snapshot().state.lifecycle;
    (state != Lifecycle::Running).then(|| {
        rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            id,
            -32002,
            &format!("app '{}' is not running (it is {state})", app.id()),
        )
    })
}

/// `POST /apps/mcp/{appId}`.
pub(crate) async fn post(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    Query(query): Query<ProxyQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let app = match find_app(&state, &app_id) {
        Ok(app) => app,
        Err(response) => return *response,
    };
    if !accepts(&headers, &["application/json", "text/event-stream"]) {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "the Accept header must list application/json and text/event-stream",
        );
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !content_type.starts_with("application/json") {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            -32600,
            "the body must be application/json",
        );
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let mut message = match RawMessage::parse(text) {
        Ok(message) => message,
        Err(err) => return rpc_error(StatusCode::BAD_REQUEST, None, -32700, &err.to_string()),
    };
    let id = message.id().map(ToOwned::to_owned);

    if message.kind() == MessageKind::Request && message.method().as_deref() == Some("initialize") {
        if let Some(response) = not_running(&app, id.as_deref()) {
            return response;
        }
        // The port reads the client's capabilities from this initialize as it answers it.
        let port = match app.open_port(PortCapabilities::default()).await {
            Ok(port) => port,
            Err(err) => {
                return rpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    id.as_deref(),
                    -32002,
                    &err.to_string(),
                );
            }
        };
        let reply = port.send(message).await;
        let session = uuid::Uuid::new_v4().simple().to_string();
        return match reply {
            Ok(PortReply::Response(response)) => {
                let port_id = port.id();
                let added = state.sessions.insert(
                    session.clone(),
                    ProxySession {
                        app_id: app_id.clone(),
                        port,
                        stream_open: AtomicBool::new(false),
                        activity: Activity::new(),
                    },
                );
                match added {
                    Ok(()) => {
                        info!(app = %app_id, port = port_id, "a browser session started");
                        json_reply(response, Some(&session))
                    }
                    Err(full) => {
                        debug!(app = %app_id, "refused a browser session: every one is busy");
                        rpc_error(
                            StatusCode::SERVICE_UNAVAILABLE,
                            id.as_deref(),
                            -32002,
                            &format!(
                                "app '{app_id}' already has {} browser sessions, all busy (a request in flight or an event stream open): close one or try again later",
                                full.max
                            ),
                        )
                    }
                }
            }
            Ok(_) => rpc_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                id.as_deref(),
                -32603,
                "initialize was not answered",
            ),
            Err(err) => rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id.as_deref(),
                -32002,
                &err.to_string(),
            ),
        };
    }

    let Some(session_key) = session_id(&headers) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            id.as_deref(),
            -32600,
            "missing Mcp-Session-Id: send initialize first",
        );
    };
    if let Some(version) = headers.get(PROTOCOL_HEADER).and_then(|v| v.to_str().ok())
        && !KNOWN_VERSIONS.contains(&version)
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            id.as_deref(),
            -32600,
            &format!("unsupported MCP-Protocol-Version '{version}'"),
        );
    }
    if let Some(response) = not_running(&app, id.as_deref()) {
        return response;
    }
    let Some((session, busy)) = state.sessions.get(&session_key, &app_id) else {
        return rpc_error(
            StatusCode::NOT_FOUND,
            id.as_deref(),
            -32001,
            "unknown or expired session: send initialize again",
        );
    };

    if message.kind() == MessageKind::Request {
        let method = message.method().unwrap_or_default();
        if method == "tools/call" && state.config.enforce_app_visibility {
            let name = message
                .get_path(&["params", "name"])
                .and_then(|n| serde_json::from_str::<String>(n.get()).ok())
                .unwrap_or_default();
            if let Some(tool) = app.descriptors().tool(&name)
                && !tool.visibility.app
            {
                debug!(app = %app_id, tool = %name, "refused a view's call of a tool that is not visible to apps");
                let why = if tool.visibility.malformed {
                    "its visibility metadata is malformed".to_owned()
                } else {
                    "its visibility does not include \"app\"".to_owned()
                };
                return json_reply(
                    RawMessage::error_response(
                        id.as_deref(),
                        -32602,
                        &format!("tool '{name}' cannot be called from an app view: {why}"),
                    ),
                    None,
                );
            }
        }
        if let Some(agent_session) = query.session_id.as_deref().filter(|s| !s.is_empty())
            && matches!(method.as_str(), "tools/call" | "resources/read")
            && let Err(err) = message.set_path(
                &["params", "_meta", "sessionId"],
                &raw_string(agent_session),
            )
        {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                id.as_deref(),
                -32602,
                &err.to_string(),
            );
        }
    }

    match session.port.send(message).await {
        Ok(PortReply::Accepted) => StatusCode::ACCEPTED.into_response(),
        Ok(PortReply::Response(response)) => json_reply(response, None),
        Ok(PortReply::Stream(stream)) => stream_reply(stream, busy).await,
        Err(PortError::SessionGone) => {
            state.sessions.remove(&session_key);
            rpc_error(
                StatusCode::NOT_FOUND,
                id.as_deref(),
                -32001,
                "the app restarted and this session ended: send initialize again",
            )
        }
        Err(err) => rpc_error(
            StatusCode::BAD_REQUEST,
            id.as_deref(),
            -32600,
            &err.to_string(),
        ),
    }
}

/// Replies with JSON when the response comes quickly and alone; otherwise with an event
/// stream that carries progress, server requests and finally the response, and keeps the
/// session busy until it ends.
async fn stream_reply(mut stream: ResponseStream, busy: Busy) -> Response {
    let first = match tokio::time::timeout(JSON_WINDOW, stream.next()).await {
        Ok(Some(message)) if message.is_response() => return json_reply(message, None),
        Ok(Some(message)) => Some(message),
        Ok(None) => {
            return rpc_error(
                StatusCode::BAD_GATEWAY,
                None,
                -32603,
                "the app closed the request without an answer",
            );
        }
        Err(_) => None,
    };
    let rest = stream::unfold((stream, busy), |(mut stream, busy)| async move {
        stream.next().await.map(|message| (message, (stream, busy)))
    });
    let events = stream::iter(first)
        .chain(rest)
        .map(|message| Ok::<_, Infallible>(Event::default().data(message.into_string())));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// The session a GET or DELETE names (busy while the guard lives), or the error response to
/// give instead.
fn named_session(
    state: &AppState,
    app_id: &str,
    headers: &HeaderMap,
) -> Result<(String, Arc<ProxySession>, Busy), Box<Response>> {
    find_app(state, app_id)?;
    let Some(session_key) = session_id(headers) else {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32600,
            "missing Mcp-Session-Id",
        )));
    };
    match state.sessions.get(&session_key, app_id) {
        Some((session, busy)) => Ok((session_key, session, busy)),
        None => Err(Box::new(rpc_error(
            StatusCode::NOT_FOUND,
            None,
            -32001,
            "unknown or expired session",
        ))),
    }
}

/// `GET /apps/mcp/{appId}`: the session's stream of server notifications.
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = find_app(&state, &app_id) {
        return *response;
    }
    if !accepts(&headers, &["text/event-stream"]) {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "the Accept header must list text/event-stream",
        );
    }
    let (session, busy) = match named_session(&state, &app_id, &headers) {
        Ok((_, session, busy)) => (session, busy),
        Err(response) => return *response,
    };
    if session.stream_open.swap(true, Ordering::SeqCst) {
        return rpc_error(
            StatusCode::CONFLICT,
            None,
            -32600,
            "this session already has an open event stream",
        );
    }
    let Some(notifications) = session.port.take_notifications() else {
        return rpc_error(
            StatusCode::CONFLICT,
            None,
            -32600,
            "this session already has an open event stream",
        );
    };
    // The stream keeps the session busy (not idle) for as long as the client listens.
    let events = tokio_stream::wrappers::ReceiverStream::new(notifications).map(move |message| {
        let _busy = &busy;
        Ok::<_, Infallible>(Event::default().data(message.into_string()))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// `DELETE /apps/mcp/{appId}`: ends the session; its in-flight requests are cancelled.
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match named_session(&state, &app_id, &headers) {
        Ok((session_key, _, _)) => {
            state.sessions.remove(&session_key);
            info!(app = %app_id, "a browser session ended");
            StatusCode::OK.into_response()
        }
        Err(response) => *response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_sweep_starts_once_and_ends_with_the_sessions() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let before = metrics.num_alive_tasks();
        let sessions = ProxySessions::new(4, Duration::from_secs(3600));
        sessions.start_sweeper();
        sessions.clone().start_sweeper();
        assert_eq!(metrics.num_alive_tasks(), before + 1);
        drop(sessions);
        let deadline = Instant::now() + Duration::from_secs(60);
        while metrics.num_alive_tasks() > before {
            assert!(Instant::now() < deadline, "the sweep outlived its sessions");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
