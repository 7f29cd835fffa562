//! One upstream MCP session per app, shared byte for byte by the gateway's own rmcp client and
//! any number of client sessions (*ports*), over any [`Link`].
//!
//! - [`Connection::open`] starts the *hub* over a link: a task that owns the router and the
//!   link, through which every message passes. It finds out which era the server speaks
//!   (a `server/discover` probe, unless told to use `initialize` at once) and performs the
//!   handshake through rmcp, whose messages reach the hub whole through channels.
//! - [`Port`] is one client session's share: request ids and progress tokens are rewritten
//!   upstream and restored on the way back; notifications reach every port; server requests
//!   reach the port that caused them; a port of either era works on an upstream of either era
//!   ([`Era`](mcpapp_manifest::Era)). Every request is bounded by the request timeout and
//!   cancelled upstream when it runs out or its caller goes away.
//! - [`RawMessage`] is a JSON-RPC message kept as the text it arrived as, read and edited in
//!   place, so what is not rewritten reaches the other side byte for byte.
//! - [`Link`] is what the hub needs of a transport; a [`SessionObserver`] is told how every
//!   `tools/call` ends; an [`Elicitor`] answers elicitations the gateway's own calls cause.
//!
//! This crate starts no process and opens no connection: the links to processes and endpoints
//! are the supervisor's (`mcpapp-supervisor`), which also keeps the app's meters.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use mcpapp_session::{
//!     Causes, Connection, EraChoice, GatewayClient, Link, LinkEvent, PortReply, RawMessage,
//!     SessionObserver,
//! };
//! use tokio::sync::mpsc;
//!
//! /// Shares the session behind `link` with one client, and lists its tools through it.
//! async fn share(
//!     link: Arc<dyn Link>,
//!     events: mpsc::UnboundedReceiver<LinkEvent>,
//!     observer: Arc<dyn SessionObserver>,
//! ) -> Result<(), Box<dyn std::error::Error>> {
//!     let (notices, _list_changes) = mpsc::unbounded_channel();
//!     let client = GatewayClient::new("my-app".to_owned(), notices, Causes::default(), None);
//!     let timeout = Duration::from_secs(30);
//!     let connection = Connection::open(
//!         "my-app", link, events, client, timeout, EraChoice::Auto, observer,
//!     )
//!     .await?;
//!     let connection = Arc::new(connection);
//!
//!     let initialize = RawMessage::parse(
//!         r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
//!     )?;
//!     let (port, _answer) = connection.open_port(&initialize).await?;
//!     let list = RawMessage::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)?;
//!     if let PortReply::Stream(mut stream) = port.send(list).await? {
//!         while let Some(message) = stream.next().await {
//!             println!("{}", message.as_str());
//!         }
//!     }
//!     connection.shutdown(Duration::from_secs(2)).await;
//!     Ok(())
//! }
//! ```
#![warn(missing_docs)]

mod client;
mod connection;
mod dual;
mod elicit;
mod era;
mod hub;
mod link;
mod observe;
mod pipe;
mod port;
mod raw;
mod router;
mod stats;
mod trace_context;

pub use client::{GatewayClient, Notice};
pub use connection::{
    Connection, EraChoice, HandshakeError, PORT_PROTOCOL_VERSIONS, closed_reason,
};
pub use dual::LinkOpener;
pub use elicit::{Causes, ElicitFuture, ElicitationRequest, Elicitor};
pub use era::{MODERN_PROTOCOL_VERSION, request_protocol_version};
pub use link::{CloseFuture, Link, LinkEvent, LinkEvents, Origin, RequestKey};
pub use observe::{CallOutcome, CallPath, SessionObserver, ToolObserver};
pub use port::{Port, PortError, PortReply, ResponseStream};
pub use raw::{MessageKind, RawError, RawMessage, raw_string};
pub use stats::SessionStats;
pub use trace_context::inject_trace_context;
