//! How one `/mcp` request reaches an app: a legacy client through its session's port to the
//! app, a 2026-07-28 client through a port of the request's own (opened with the request, so
//! the app's router reads the client's capabilities from it, and dropped with the exchange).

use std::sync::Arc;

use mcpapp_manifest::Era;
use mcpapp_session::{CallPath, Port, PortError, PortReply, RawMessage};
use mcpapp_supervisor::AppHandle;
use serde_json::value::RawValue;

use super::client_session::{ClientSession, UI_EXTENSION, request};

/// The client a request comes from.
#[derive(Clone)]
pub(crate) enum Link {
    /// A legacy client's session.
    Session(Arc<ClientSession>),
    /// A 2026-07-28 request, which carries everything about its client.
    Request(Arc<RawMessage>),
}

/// A way to send to one app for one request.
pub(crate) enum Channel {
    Session(Arc<ClientSession>, AppHandle),
    Own(Port),
}

impl Channel {
    pub(crate) async fn send(&self, message: RawMessage) -> Result<PortReply, PortError> {
        match self {
            Self::Session(session, app) => session.send(app, message).await,
            Self::Own(port) => port.send(message).await,
        }
    }
}

impl Link {
    pub(crate) fn era(&self) -> Era {
        match self {
            Self::Session(_) => Era::Legacy,
            Self::Request(_) => Era::Modern,
        }
    }

    /// Whether the client declared the MCP Apps extension.
    pub(crate) fn ui(&self) -> bool {
        match self {
            Self::Session(session) => session.ui(),
            Self::Request(request) => request
                .path(&[
                    "params",
                    "_meta",
                    "io.modelcontextprotocol/clientCapabilities",
                    "extensions",
                    UI_EXTENSION,
                ])
                .is_some(),
        }
    }

    /// A channel to `app` for this request.
    pub(crate) fn open(&self, app: &AppHandle) -> Result<Channel, PortError> {
        match self {
            Self::Session(session) => Ok(Channel::Session(session.clone(), app.clone())),
            Self::Request(request) => {
                let port = app.open_modern_port(request)?;
                port.set_call_path(CallPath::Mcp);
                Ok(Channel::Own(port))
            }
        }
    }

    /// The session, for a legacy client.
    pub(crate) fn session(&self) -> Option<&Arc<ClientSession>> {
        match self {
            Self::Session(session) => Some(session),
            Self::Request(_) => None,
        }
    }
}

/// An id for a request the gateway makes on a client's behalf.
fn internal_id(link: &Link, n: usize) -> Box<RawValue> {
    match link {
        Link::Session(session) => session.internal_id(),
        // A request's own port carries nothing else.
        Link::Request(_) => mcpapp_session::raw_string(&format!("io.mcpapp/{n}")),
    }
}

/// Asks one app `method` with `params` on the client's behalf and waits for the answer:
/// its result, or the JSON-RPC error as text.
pub(crate) async fn ask(
    link: &Link,
    channel: &Channel,
    n: usize,
    method: &str,
    params: &RawValue,
) -> Result<Box<RawValue>, String> {
    let message = request(&internal_id(link, n), method, Some(params));
    let response = match channel.send(message).await.map_err(|e| e.to_string())? {
        PortReply::Response(response) => response,
        PortReply::Stream(mut stream) => loop {
            match stream.next().await {
                Some(message) if message.is_response() => break message,
                // A listing that asks the client something is not worth waiting for.
                Some(_) => {}
                None => return Err("the app closed the request without an answer".to_owned()),
            }
        },
        PortReply::Accepted => {
            return Err("the app accepted a request as a notification".to_owned());
        }
    };
    match response.member("result") {
        Some(result) => Ok(result.to_owned()),
        None => Err(response
            .path(&["error", "message"])
            .and_then(|m| serde_json::from_str::<String>(m.get()).ok())
            .unwrap_or_else(|| "an error without a message".to_owned())),
    }
}
