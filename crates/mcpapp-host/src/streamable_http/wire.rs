//! The transport's vocabulary, used by every other part of it: its header names, reading a
//! header, and JSON-RPC messages as HTTP responses.

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpapp_session::RawMessage;
use serde_json::value::RawValue;

/// The session header.
pub(crate) const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// The negotiated protocol version, sent by clients on every request after `initialize`.
pub(crate) const PROTOCOL_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// The SSE header a reconnecting client names its last event with.
pub(crate) const LAST_EVENT_ID_HEADER: HeaderName = HeaderName::from_static("last-event-id");
/// The protocol version a client that sends no `MCP-Protocol-Version` is taken to speak.
pub(super) const VERSION_WITHOUT_HEADER: &str = "2025-03-26";

/// A JSON-RPC error as an HTTP response.
pub(crate) fn rpc_error(
    status: StatusCode,
    id: Option<&RawValue>,
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

/// A JSON-RPC message as a 200 `application/json` response, with the session header when
/// one is given.
pub(crate) fn json_reply(message: RawMessage, session: Option<&str>) -> Response {
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

/// Whether `Accept` lists every media type in `wanted` (or `*/*`).
pub(super) fn accepts(headers: &HeaderMap, wanted: &[&str]) -> bool {
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

/// The value of a header, when it is there and readable.
pub(crate) fn header_text<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
