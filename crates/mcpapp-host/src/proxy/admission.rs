//! What a request of `/apps/mcp/{appId}` must pass before it reaches the app, in either era:
//! the app is running, and a view calls only tools whose visibility includes `"app"`; with
//! `?sessionId=X`, its `tools/call` and `resources/read` carry `_meta.sessionId = X`, the
//! agent session the view belongs to.

// The helpers below return the HTTP response to send instead as their error; it is built once
// per refused request, so its size on the stack does not matter.
#![allow(clippy::result_large_err)]

use axum::http::StatusCode;
use axum::response::Response;
use mcpapp_manifest::Lifecycle;
use mcpapp_session::{MessageKind, RawMessage, raw_string};
use mcpapp_supervisor::AppHandle;
use serde::Deserialize;
use serde_json::value::RawValue;
use tracing::debug;

use crate::streamable_http::{json_reply, rpc_error};

/// Query parameters of `/apps/mcp/{appId}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProxyQuery {
    /// The agent session to attribute view calls to (`_meta.sessionId`).
    session_id: Option<String>,
}

/// A request needs the app running; else 503 naming its state.
pub(super) fn running(app: &AppHandle, id: Option<&RawValue>) -> Result<(), Response> {
    let state = app.lifecycle();
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

/// What this session may send: a view may call only tools visible to apps; view calls carry
/// the agent session they belong to.
pub(super) fn authorize(
    enforce_app_visibility: bool,
    app: &AppHandle,
    query: &ProxyQuery,
    mut message: RawMessage,
) -> Result<RawMessage, Response> {
    if message.kind() != MessageKind::Request {
        return Ok(message);
    }
    let id = message.id().map(ToOwned::to_owned);
    let method = message.method().unwrap_or_default();
    if method == "tools/call" && enforce_app_visibility {
        let name = message
            .path(&["params", "name"])
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
