//! Request bodies: read whole, up to `MaxBodyBytes`, before any route sees them, so that every
//! route has the same limit and a body over it gets an answer in the route's own language
//! (a JSON-RPC error on the MCP endpoints, a JSON error elsewhere) instead of plain text.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::HostConfig;
use crate::streamable_http::rpc_error;

/// Whether `path` is one of the MCP endpoints, which answer in JSON-RPC.
fn speaks_json_rpc(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/") || path.starts_with("/apps/mcp/")
}

fn refuse(path: &str, status: StatusCode, message: &str) -> Response {
    if speaks_json_rpc(path) {
        rpc_error(status, None, -32600, message)
    } else {
        (status, axum::Json(json!({ "error": message }))).into_response()
    }
}

/// Reads the body up to the limit and hands the request on with it.
pub(crate) async fn read_body(
    State(config): State<Arc<HostConfig>>,
    request: Request,
    next: Next,
) -> Response {
    let max = config.max_body_bytes;
    let path = request.uri().path().to_owned();
    let too_large = || {
        refuse(
            &path,
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is larger than the gateway's limit of {max} bytes (Gateway.MaxBodyBytes)"
            ),
        )
    };
    // A declared length over the limit is refused before anything is read.
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, max).await {
        Ok(bytes) => bytes,
        Err(err) => {
            let over = std::error::Error::source(&err)
                .is_some_and(|cause| cause.is::<http_body_util::LengthLimitError>());
            return if over {
                too_large()
            } else {
                refuse(
                    &path,
                    StatusCode::BAD_REQUEST,
                    &format!("the request body could not be read: {err}"),
                )
            };
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
