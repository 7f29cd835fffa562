//! `/apps/mcp/{appId}`: a Streamable HTTP MCP endpoint for browser views whose sessions are
//! ports on the app's one upstream session.
//!
//! Written by hand rather than with rmcp's server, because rmcp's server decodes every message
//! into its typed model (losing unknown fields) and answers `initialize` itself; here every
//! message passes through as bytes. `initialize` opens a port and is answered with the
//! upstream's own `InitializeResult` in the protocol version agreed with this client;
//! everything else is forwarded (tools, resources, templates, prompts, completion,
//! subscriptions, logging, ping). With `?sessionId=X`, `tools/call` and `resources/read` carry
//! `_meta.sessionId = X`, the agent's session id. A view may call only tools whose visibility
//! includes `"app"`.
//!
//! A POST is handled in three steps: [`initialize`] (a new session), [`authorize`] (what this
//! session may send, and the agent session it speaks for) and [`forward`] (the port, and the
//! reply as JSON or an event stream). A request whose client goes away is cancelled upstream
//! at once (dropping its reply stream does it). The GET stream is reopenable and resumes after
//! `Last-Event-ID` (see `events.rs`); its first event primes clients of 2025-11-25 and later
//! with an id and a `retry` interval. Sessions are bounded (see `sessions.rs`).

// The helpers below return the HTTP response to send instead as their error; it is built once
// per refused request, so its size on the stack does not matter.
#![allow(clippy::result_large_err)]

mod events;
mod modern;
mod sessions;

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, StreamExt};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{
    AppHandle, MessageKind, PORT_PROTOCOL_VERSIONS, PortError, PortReply, RawMessage,
    ResponseStream, raw_string,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use tracing::{debug, info};

use self::events::Resume;
pub(crate) use self::sessions::ProxySessions;
use self::sessions::{Busy, ProxySession};
use crate::chat::KEEP_ALIVE;
use crate::state::AppState;
use crate::streamable::{
    LAST_EVENT_ID_HEADER, PROTOCOL_HEADER, SESSION_HEADER, VERSION_WITHOUT_HEADER, accepts,
    header_text, json_reply, rpc_error,
};

/// Which era a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
}

/// How long a response may take before the reply switches from JSON to an event stream.
const JSON_WINDOW: Duration = Duration::from_secs(1);
/// The reconnection interval the GET stream's priming event suggests.
const RETRY: Duration = Duration::from_secs(1);
/// The first protocol version whose clients expect a priming event.
const PRIMING_SINCE: &str = "2025-11-25";

/// The app a request of `/apps/mcp/{appId}` names; unknown ids are 404 (never a fall-through
/// to the gateway's own tools).
pub(crate) struct ProxyApp(AppHandle);

impl FromRequestParts<AppState> for ProxyApp {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Path(app_id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        state
            .parts
            .supervisor
            .get(&app_id)
            .map(Self)
            .ok_or_else(|| {
                rpc_error(
                    StatusCode::NOT_FOUND,
                    None,
                    -32001,
                    &format!("there is no app '{app_id}' on this gateway"),
                )
            })
    }
}

/// Query parameters of `/apps/mcp/{appId}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProxyQuery {
    /// The agent session to attribute view calls to (`_meta.sessionId`).
    session_id: Option<String>,
}

fn running(app: &AppHandle, id: Option<&RawValue>) -> Result<(), Response> {
    let state = app.snapshot().state.lifecycle;
    if state == Lifecycle::Running {
        Ok(())
    } else {
        Err(rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            id,
            -32002,
            &format!("app '{}' is not running (it is {state})", app.id()),
        ))
    }
}

/// Reads a POST: the media types, then one JSON-RPC message in UTF-8.
fn read_message(headers: &HeaderMap, body: &Bytes) -> Result<RawMessage, Response> {
    if !accepts(headers, &["application/json", "text/event-stream"]) {
        return Err(rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "the Accept header must list application/json and text/event-stream",
        ));
    }
    let content_type = header_text(headers, &header::CONTENT_TYPE)
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !content_type.starts_with("application/json") {
        return Err(rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            -32600,
            "the body must be application/json",
        ));
    }
    // Replacing bad bytes would forward something the client never sent.
    let text = std::str::from_utf8(body).map_err(|err| {
        rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32700,
            &format!(
                "the body is not valid UTF-8 (at byte {})",
                err.valid_up_to()
            ),
        )
    })?;
    RawMessage::parse(text)
        .map_err(|err| rpc_error(StatusCode::BAD_REQUEST, None, -32700, &err.to_string()))
}

/// `POST /apps/mcp/{appId}`. Each POST is a trace of its own (`mcp_proxy_request`, not a
/// child of the long-lived connection's span); the upstream leg is its child.
#[tracing::instrument(
    name = "mcp_proxy_request",
    parent = None,
    skip_all,
    fields(app = %app.id(), method = tracing::field::Empty)
)]
pub(crate) async fn post(
    State(state): State<AppState>,
    ProxyApp(app): ProxyApp,
    Query(query): Query<ProxyQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let message = match read_message(&headers, &body) {
        Ok(message) => message,
        Err(response) => return response,
    };
    if let Some(method) = message.method() {
        tracing::Span::current().record("method", method.as_str());
    }
    if message.kind() == MessageKind::Request && message.method().as_deref() == Some("initialize") {
        return initialize(&state, &app, &message).await;
    }
    if modern::is_modern(&headers, &message) {
        return modern::post(&state, &app, &query, &headers, message).await;
    }
    let id = message.id().map(ToOwned::to_owned);
    let (session_key, session, busy) = match session_of(&state, &app, &headers, id.as_deref()) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Err(response) = check_version(&headers, &session, id.as_deref()) {
        return response;
    }
    let message = match authorize(&state, &app, &query, message) {
        Ok(message) => message,
        Err(response) => return response,
    };
    forward(&state, &session_key, &session, busy, message).await
}

/// A new session: a port on the app's upstream session, answered with the upstream's own
/// `InitializeResult` in the version agreed with this client.
async fn initialize(state: &AppState, app: &AppHandle, message: &RawMessage) -> Response {
    let id = message.id();
    if let Err(response) = running(app, id) {
        return response;
    }
    let (port, answer) = match app.open_port(message).await {
        Ok(opened) => opened,
        Err(err) => {
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                -32002,
                &err.to_string(),
            );
        }
    };
    let session_key = uuid::Uuid::new_v4().simple().to_string();
    let port_id = port.id();
    let version = port.protocol_version().to_owned();
    match state.sessions.insert(
        session_key.clone(),
        ProxySession::new(app.id().to_owned(), port),
    ) {
        Ok(()) => {
            info!(app = %app.id(), port = port_id, %version, "a browser session started");
            json_reply(answer, Some(&session_key))
        }
        Err(full) => {
            debug!(app = %app.id(), "refused a browser session: every one is busy");
            rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                -32002,
                &format!(
                    "app '{}' already has {} browser sessions, all busy (a request in flight or an event stream open): close one or try again later",
                    app.id(),
                    full.max
                ),
            )
        }
    }
}

/// The session a request names, kept busy while the guard lives, or why there is none.
fn session_of(
    state: &AppState,
    app: &AppHandle,
    headers: &HeaderMap,
    id: Option<&RawValue>,
) -> Result<(String, std::sync::Arc<ProxySession>, Busy), Response> {
    let Some(session_key) = header_text(headers, &SESSION_HEADER).map(str::to_owned) else {
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            "missing Mcp-Session-Id: send initialize first",
        ));
    };
    running(app, id)?;
    match state.sessions.get(&session_key, app.id()) {
        Some((session, busy)) => Ok((session_key, session, busy)),
        None => Err(rpc_error(
            StatusCode::NOT_FOUND,
            id,
            -32001,
            "unknown or expired session: send initialize again",
        )),
    }
}

/// `MCP-Protocol-Version` must name a version the gateway serves; without it the client is
/// taken to speak 2025-03-26, as the specification says. Like the official SDKs' servers, a
/// known version other than the one agreed is accepted (the conformance suite itself sends
/// 2025-03-26 on a 2025-11-25 session); an unknown one is refused.
fn check_version(
    headers: &HeaderMap,
    session: &ProxySession,
    id: Option<&RawValue>,
) -> Result<(), Response> {
    match header_text(headers, &PROTOCOL_HEADER) {
        None => Ok(()),
        Some(version) if PORT_PROTOCOL_VERSIONS.contains(&version) => Ok(()),
        Some(version) => Err(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            &format!(
                "unsupported MCP-Protocol-Version '{version}': this session speaks {} (the gateway serves {}; without the header, {VERSION_WITHOUT_HEADER} is assumed)",
                session.port.protocol_version(),
                PORT_PROTOCOL_VERSIONS.join(", ")
            ),
        )),
    }
}

/// What this session may send: a view may call only tools visible to apps; view calls carry
/// the agent session they belong to.
fn authorize(
    state: &AppState,
    app: &AppHandle,
    query: &ProxyQuery,
    mut message: RawMessage,
) -> Result<RawMessage, Response> {
    if message.kind() != MessageKind::Request {
        return Ok(message);
    }
    let id = message.id().map(ToOwned::to_owned);
    let method = message.method().unwrap_or_default();
    if method == "tools/call" && state.config.enforce_app_visibility {
        let name = message
            .get_path(&["params", "name"])
            .and_then(|n| serde_json::from_str::<String>(n.get()).ok())
            .unwrap_or_default();
        if let Some(tool) = app.descriptors().tool(&name)
            && !tool.visibility.app
        {
            debug!(app = %app.id(), tool = %name, "refused a view's call of a tool that is not visible to apps");
            let why = if tool.visibility.malformed {
                "its visibility metadata is malformed"
            } else {
                "its visibility does not include \"app\""
            };
            return Err(json_reply(
                RawMessage::error_response(
                    id.as_deref(),
                    -32602,
                    &format!("tool '{name}' cannot be called from an app view: {why}"),
                ),
                None,
            ));
        }
    }
    if let Some(agent_session) = query.session_id.as_deref().filter(|s| !s.is_empty())
        && matches!(method.as_str(), "tools/call" | "resources/read")
        && let Err(err) = message.set_path(
            &["params", "_meta", "sessionId"],
            &raw_string(agent_session),
        )
    {
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            id.as_deref(),
            -32602,
            &err.to_string(),
        ));
    }
    Ok(message)
}

/// Sends the message through the session's port and replies.
async fn forward(
    state: &AppState,
    session_key: &str,
    session: &ProxySession,
    busy: Busy,
    message: RawMessage,
) -> Response {
    let id = message.id().map(ToOwned::to_owned);
    match session.port.send(message).await {
        Ok(PortReply::Accepted) => StatusCode::ACCEPTED.into_response(),
        Ok(PortReply::Response(response)) => json_reply(response, None),
        Ok(PortReply::Stream(stream)) => stream_reply(stream, busy, Era::Legacy).await,
        Err(PortError::SessionGone) => {
            state.sessions.remove(session_key);
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
/// session busy until it ends. If the client goes away first, dropping the stream cancels the
/// request upstream.
async fn stream_reply(mut stream: ResponseStream, busy: impl Send + 'static, era: Era) -> Response {
    let first = match tokio::time::timeout(JSON_WINDOW, stream.next()).await {
        Ok(Some(message)) if message.is_response() => {
            let status = match era {
                Era::Modern => modern::status_of(&message),
                Era::Legacy => StatusCode::OK,
            };
            let mut reply = json_reply(message, None);
            *reply.status_mut() = status;
            return reply;
        }
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
    // The request's span lasts as long as its event stream.
    let span = tracing::Span::current();
    let rest = stream::unfold(
        (stream, busy, span),
        |(mut stream, busy, span)| async move {
            stream
                .next()
                .await
                .map(|message| (message, (stream, busy, span)))
        },
    );
    let events = stream::iter(first)
        .chain(rest)
        .map(|message| Ok::<_, Infallible>(Event::default().data(message.into_string())));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// `GET /apps/mcp/{appId}`: the session's stream of server notifications, one at a time;
/// reopenable, and resumed after `Last-Event-ID`.
pub(crate) async fn get(
    State(state): State<AppState>,
    ProxyApp(app): ProxyApp,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = modern::refuse_get_or_delete(&headers) {
        return refused;
    }
    if !accepts(&headers, &["text/event-stream"]) {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "the Accept header must list text/event-stream",
        );
    }
    let (_, session, busy) = match session_of(&state, &app, &headers, None) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Err(response) = check_version(&headers, &session, None) {
        return response;
    }
    let Ok(log) = session.events.clone().try_lock_owned() else {
        return rpc_error(
            StatusCode::CONFLICT,
            None,
            -32600,
            "this session already has an open event stream",
        );
    };
    let replay = match header_text(&headers, &LAST_EVENT_ID_HEADER) {
        None => Vec::new(),
        Some(last) => match log.resume(last) {
            Resume::Replay(events) => events,
            Resume::Gap(events) => {
                debug!(app = %app.id(), "a reconnecting client missed events older than the replay record");
                events
            }
            Resume::Unknown => {
                debug!(app = %app.id(), last, "Last-Event-ID names no event of this stream; nothing to replay");
                Vec::new()
            }
        },
    };
    let priming = (session.port.protocol_version() >= PRIMING_SINCE).then(|| {
        Event::default()
            .id(log.last_id().to_string())
            .retry(RETRY)
            .data("")
    });
    let event =
        |(id, data): (u64, std::sync::Arc<str>)| Event::default().id(id.to_string()).data(&*data);
    // The stream holds the log (so one GET at a time) and keeps the session busy while the
    // client listens; dropping it, when the client leaves, frees both.
    let live = stream::unfold((log, busy), |(mut log, busy)| async move {
        let next = log.next().await?;
        Some((next, (log, busy)))
    });
    let events = stream::iter(priming)
        .chain(stream::iter(replay).map(event))
        .chain(live.map(event))
        .map(Ok::<_, Infallible>);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// `DELETE /apps/mcp/{appId}`: ends the session; its in-flight requests are cancelled.
pub(crate) async fn delete(
    State(state): State<AppState>,
    ProxyApp(app): ProxyApp,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = modern::refuse_get_or_delete(&headers) {
        return refused;
    }
    let Some(session_key) = header_text(&headers, &SESSION_HEADER) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32600,
            "missing Mcp-Session-Id",
        );
    };
    match state.sessions.get(session_key, app.id()) {
        Some((_session, busy)) => {
            drop(busy);
            state.sessions.remove(session_key);
            info!(app = %app.id(), "a browser session ended");
            StatusCode::OK.into_response()
        }
        None => rpc_error(
            StatusCode::NOT_FOUND,
            None,
            -32001,
            "unknown or expired session",
        ),
    }
}
