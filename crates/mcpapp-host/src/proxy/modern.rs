//! 2026-07-28 clients on `/apps/mcp/{appId}`: no `initialize` and no session (the checks
//! every such POST must pass are in `streamable_http::modern`). Each request travels through a
//! port of its own on the app's one upstream session, which lives as long as the request's
//! exchange; `server/discover` is answered by the gateway from the app's handshake.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mcpapp_manifest::Era;
use mcpapp_session::{MessageKind, PortError, PortReply, RawMessage};
use mcpapp_supervisor::AppHandle;

use super::admission::{ProxyQuery, authorize, running};
use crate::streamable_http::modern::check;
use crate::streamable_http::{final_reply, rpc_error, stream_reply};

/// A modern client's POST.
pub(super) async fn post(
    enforce_app_visibility: bool,
    app: &AppHandle,
    query: &ProxyQuery,
    headers: &HeaderMap,
    message: RawMessage,
) -> Response {
    if let Err(response) = check(headers, &message) {
        return response;
    }
    if message.kind() != MessageKind::Request {
        // The 2026-07-28 transport defines no client notifications or responses.
        return StatusCode::ACCEPTED.into_response();
    }
    let id = message.id().map(ToOwned::to_owned);
    if let Err(response) = running(app, id.as_deref()) {
        return response;
    }
    let message = match authorize(enforce_app_visibility, app, query, message) {
        Ok(message) => message,
        Err(response) => return response,
    };
    let port = match app.open_modern_port(&message) {
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
    match port.send(message).await {
        Ok(PortReply::Response(response)) => final_reply(response, Era::Modern),
        // The port lives as long as the exchange; the call may go on after an input-required
        // answer, held by the gateway for the client's retry.
        Ok(PortReply::Stream(stream)) => stream_reply(stream, port, Era::Modern).await,
        Ok(PortReply::Accepted) => StatusCode::ACCEPTED.into_response(),
        Err(PortError::SessionGone) => rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            id.as_deref(),
            -32002,
            "the app restarted: send the request again",
        ),
        Err(err) => rpc_error(
            StatusCode::BAD_REQUEST,
            id.as_deref(),
            -32600,
            &err.to_string(),
        ),
    }
}
