//! What a link is: the byte-level connection under one upstream session, seen from the hub.
//!
//! A link carries whole JSON-RPC messages both ways. Whatever it receives it reports as a
//! [`LinkEvent`], each message tagged with where it arrived ([`Origin`]), which is what lets
//! one router serve every transport: on stdio nothing ties a message to a request, while a
//! Streamable HTTP client knows the request whose response stream carried it. The links
//! themselves (a child process's stdio, a Streamable HTTP session) live with whoever starts
//! processes and opens connections; this crate only asks what the trait says.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use mcpapp_manifest::Era;
use tokio::sync::mpsc;

use crate::raw::RawMessage;

/// An upstream request id as its raw JSON text (`7` and `"7"` differ): how the hub names the
/// request a message belongs to, and how a link tags the messages of that request's stream.
pub type RequestKey = String;

/// Where an upstream message arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A stream with no association with any request (stdio's stdout).
    Stdio,
    /// The HTTP session's standalone GET stream.
    Get,
    /// The HTTP response stream of the request with this upstream id.
    Post(RequestKey),
}

/// Something that happened on a link.
#[derive(Debug)]
pub enum LinkEvent {
    /// A message from the server.
    Message {
        /// The message, as the server wrote it.
        message: RawMessage,
        /// Where it arrived.
        origin: Origin,
    },
    /// A line or event that is not a JSON-RPC message; kept for error reports.
    Garbage(String),
    /// The link is gone for good; the reason is for people.
    Closed(String),
}

/// Where a link reports what it receives; the hub reads the other end.
pub type LinkEvents = mpsc::UnboundedSender<LinkEvent>;

/// The future [`Link::close`] returns.
pub type CloseFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A connection that carries whole messages to an app's server and reports what comes back
/// on its [`LinkEvents`].
///
/// This is the extension point for transports: implement it for a new way of reaching a
/// server, and [`Connection::open`](crate::Connection::open) runs a shared session over it.
pub trait Link: fmt::Debug + Send + Sync + 'static {
    /// Sends one message; `request` is its upstream id when it is a request (a link whose
    /// answers can be told apart by request tags them with [`Origin::Post`]). Never blocks:
    /// a link queues what it cannot send at once, and reports failures as events.
    fn send(&self, message: RawMessage, request: Option<RequestKey>);

    /// Ends the session politely, then forcefully after `grace` where that means something
    /// (a process); it reports [`LinkEvent::Closed`] when it is gone.
    fn close(&self, grace: Duration) -> CloseFuture<'_>;

    /// Says which era the upstream speaks, once the handshake has found out. A link whose
    /// transport differs between eras (a modern HTTP session has no session id and no GET
    /// stream) changes its ways; the default does nothing.
    fn set_era(&self, era: Era) {
        let _ = era;
    }
}
