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
//! A POST is handled in three steps: [`initialize`] (a new session), [`authorize`] (in
//! `admission.rs`: what this session may send, and the agent session it speaks for) and
//! [`forward`] (the port, and the reply as JSON or an event stream); a 2026-07-28 client's
//! POST goes through `modern.rs` instead, and a session is a `browser_session.rs`. A request whose client goes away is cancelled upstream
//! at once (dropping its reply stream does it). The GET stream is reopenable and resumes after
//! `Last-Event-ID` (see `streamable_http/replay.rs`); its first event primes clients of
//! 2025-11-25 and later with an id and a `retry` interval. Sessions are bounded (see
//! `streamable_http/session_store.rs`).

// The helpers below return the HTTP response to send instead as their error; it is built once
// per refused request, so its size on the stack does not matter.
#![allow(clippy::result_large_err)]

mod admission;
mod browser_session;
mod modern;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mcpapp_manifest::Era;
use mcpapp_session::{MessageKind, PortError, PortReply, RawMessage};
use mcpapp_supervisor::{AppHandle, Supervisor};
use serde_json::value::RawValue;
use tracing::{debug, info};

use self::admission::{ProxyQuery, authorize, running};
use self::browser_session::ProxySession;
pub(crate) use self::browser_session::ProxySessions;
use crate::streamable_http::modern::{is_modern, refuse_get_or_delete};
use crate::streamable_http::session_store::{Busy, Session};
use crate::streamable_http::{
    SESSION_HEADER, check_version, event_stream, final_reply, header_text, json_reply,
    read_message, require_event_stream, rpc_error, stream_reply,
};

/// What `/apps/mcp/{appId}` works with.
#[derive(Clone)]
pub(crate) struct ProxyState {
    pub(crate) supervisor: Supervisor,
    /// The browser sessions of every app.
    pub(crate) sessions: ProxySessions,
    /// Whether views may only call tools whose visibility includes `"app"`.
    pub(crate) enforce_app_visibility: bool,
}

/// The app a request of `/apps/mcp/{appId}` names; unknown ids are 404 (never a fall-through
/// to the gateway's own tools).
pub(crate) struct ProxyApp(AppHandle);

impl FromRequestParts<ProxyState> for ProxyApp {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &ProxyState) -> Result<Self, Response> {
        let Path(app_id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        state.supervisor.get(&app_id).map(Self).ok_or_else(|| {
            rpc_error(
                StatusCode::NOT_FOUND,
                None,
                -32001,
                &format!("there is no app '{app_id}' on this gateway"),
            )
        })
    }
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
    State(state): State<ProxyState>,
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
    // The era first: a 2026-07-28 request is modern whatever its method (its `initialize`
    // is a removed method, not a session).
    if is_modern(&headers, &message) {
        return modern::post(
            state.enforce_app_visibility,
            &app,
            &query,
            &headers,
            message,
        )
        .await;
    }
    if message.kind() == MessageKind::Request && message.method().as_deref() == Some("initialize") {
        return initialize(&state, &app, &message).await;
    }
    let id = message.id().map(ToOwned::to_owned);
    let (session_key, session, busy) = match session_of(&state, &app, &headers, id.as_deref()) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Err(response) = check_version(&headers, session.port.protocol_version(), id.as_deref()) {
        return response;
    }
    let message = match authorize(state.enforce_app_visibility, &app, &query, message) {
        Ok(message) => message,
        Err(response) => return response,
    };
    forward(&state, &session_key, &session, busy, message).await
}

/// A new session: a port on the app's upstream session, answered with the upstream's own
/// `InitializeResult` in the version agreed with this client.
async fn initialize(state: &ProxyState, app: &AppHandle, message: &RawMessage) -> Response {
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
        Arc::new(ProxySession::new(app.id().to_owned(), port)),
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
    state: &ProxyState,
    app: &AppHandle,
    headers: &HeaderMap,
    id: Option<&RawValue>,
) -> Result<(String, Arc<ProxySession>, Busy), Response> {
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

/// Sends the message through the session's port and replies.
async fn forward(
    state: &ProxyState,
    session_key: &str,
    session: &ProxySession,
    busy: Busy,
    message: RawMessage,
) -> Response {
    let id = message.id().map(ToOwned::to_owned);
    match session.port.send(message).await {
        Ok(PortReply::Accepted) => StatusCode::ACCEPTED.into_response(),
        Ok(PortReply::Response(response)) => final_reply(response, Era::Legacy),
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

/// `GET /apps/mcp/{appId}`: the session's stream of server notifications, one at a time;
/// reopenable, and resumed after `Last-Event-ID`.
pub(crate) async fn get(
    State(state): State<ProxyState>,
    ProxyApp(app): ProxyApp,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse_get_or_delete(&headers) {
        return refused;
    }
    if let Err(response) = require_event_stream(&headers) {
        return response;
    }
    let (_, session, busy) = match session_of(&state, &app, &headers, None) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Err(response) = check_version(&headers, session.port.protocol_version(), None) {
        return response;
    }
    event_stream(
        &headers,
        &session.events,
        session.port.protocol_version(),
        busy,
        &session.describe(),
    )
}

/// `DELETE /apps/mcp/{appId}`: ends the session; its in-flight requests are cancelled.
pub(crate) async fn delete(
    State(state): State<ProxyState>,
    ProxyApp(app): ProxyApp,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse_get_or_delete(&headers) {
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
