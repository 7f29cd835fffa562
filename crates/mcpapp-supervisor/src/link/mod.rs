//! Byte-level connections to an app's upstream MCP session: a child process's stdio, or a
//! Streamable HTTP session. Both speak whole JSON-RPC messages and tag what they receive with
//! where it arrived, so one router serves both.

use tokio::sync::mpsc;

use crate::raw::RawMessage;
use crate::router::{Key, Origin};

mod connector;
pub(crate) mod http;
pub(crate) mod stdio;

/// Something that happened on a link.
#[derive(Debug)]
pub(crate) enum LinkEvent {
    /// A message from the server.
    Message { message: RawMessage, origin: Origin },
    /// A line or event that is not a JSON-RPC message; kept for error reports.
    Garbage(String),
    /// The link is gone for good; the reason is for people.
    Closed(String),
}

/// Where a link reports what it receives.
pub(crate) type LinkEvents = mpsc::UnboundedSender<LinkEvent>;

/// An open link.
#[derive(Debug)]
pub(crate) enum Link {
    Stdio(stdio::StdioLink),
    Http(http::HttpLink),
}

impl Link {
    /// Sends one message; `request` is its upstream id when it is a request.
    pub(crate) fn send(&self, message: RawMessage, request: Option<Key>) {
        match self {
            Self::Stdio(link) => link.send(message),
            Self::Http(link) => link.send(message, request),
        }
    }

    /// Ends the session politely, then forcefully: closes stdin, terminates the process group
    /// and kills it after `grace`; or ends the HTTP session with a DELETE.
    pub(crate) async fn close(&self, grace: std::time::Duration) {
        match self {
            Self::Stdio(link) => link.close(grace).await,
            Self::Http(link) => link.close().await,
        }
    }

    /// Says which era the upstream speaks. A modern HTTP session has no session id and no GET
    /// stream, carries the era's headers on every POST, and cancels by closing a request's
    /// response stream.
    pub(crate) fn set_era(&self, era: mcpapp_manifest::Era) {
        if let Self::Http(link) = self {
            link.set_era(era);
        }
    }

    /// The process id, for stdio links.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Self::Stdio(link) => Some(link.pid()),
            Self::Http(_) => None,
        }
    }
}
