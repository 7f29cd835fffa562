//! What the model knows of the session's parties: the client sessions (ports) and their
//! requests (*exchanges*), the server, and the gateway's rmcp client. The router is checked
//! against it; nothing here looks inside the router.

use std::collections::{BTreeMap, BTreeSet};

use mcpapp_manifest::Era;

use crate::router::ids::{Key, PortId};
use crate::router::ports::PortCapabilities;

/// A client session's port, as its client sees it.
#[derive(Debug, Clone)]
pub(super) struct PortModel {
    pub(super) era: Era,
    pub(super) caps: PortCapabilities,
    /// The URIs the router counts this port as subscribed to.
    pub(super) subs: BTreeSet<String>,
    /// The log level it set.
    pub(super) level: Option<u8>,
    /// A modern port carries one request (the host opens one per request).
    pub(super) used: bool,
    next_id: u64,
}

impl PortModel {
    pub(super) fn new(era: Era, caps: PortCapabilities) -> Self {
        Self {
            era,
            caps,
            subs: BTreeSet::new(),
            level: None,
            used: false,
            next_id: 0,
        }
    }

    /// A fresh request id of this client, as JSON text: numbers and strings, the same ones
    /// on every port (so only the router's rewriting keeps them apart).
    pub(super) fn next_id(&mut self) -> String {
        self.next_id += 1;
        if self.next_id % 2 == 1 {
            self.next_id.to_string()
        } else {
            format!("\"r{}\"", self.next_id)
        }
    }
}

/// A `subscriptions/listen` served by the router (modern port, legacy upstream).
#[derive(Debug, Clone)]
pub(super) struct ListenHere {
    pub(super) tools: bool,
    pub(super) uris: Vec<String>,
}

/// One client request the router took or answered.
#[derive(Debug, Clone)]
pub(super) struct Exchange {
    /// The upstream session it belongs to (restarts so far).
    pub(super) generation: u32,
    pub(super) port: PortId,
    pub(super) modern: bool,
    /// The client's id and progress token, as JSON text.
    pub(super) id: String,
    pub(super) token: Option<String>,
    pub(super) method: String,
    pub(super) uri: Option<String>,
    pub(super) stream: Key,
    pub(super) bounded: bool,
    /// The hub still holds its response stream.
    pub(super) hub_open: bool,
    /// Its client still waits for the answer.
    pub(super) waiting: bool,
    /// Final answers it got (the router's, or the hub's timeout and connection-lost errors).
    pub(super) finals: u32,
    pub(super) listen_here: Option<ListenHere>,
}

/// A request the server received and has neither answered nor been told to stop.
#[derive(Debug, Clone)]
pub(super) struct Upstream {
    /// The exchange it serves (none: rmcp's or the gateway's own).
    pub(super) exchange: Option<usize>,
    pub(super) method: String,
    /// Its upstream progress token, as JSON text.
    pub(super) token: Option<String>,
    pub(super) uri: Option<String>,
}

/// A server-to-client request the server made.
#[derive(Debug, Clone)]
pub(super) struct Ask {
    /// The request on whose response stream it was sent.
    pub(super) cause: Option<Key>,
    pub(super) answered: bool,
}

/// The app's server.
#[derive(Debug, Default)]
pub(super) struct Server {
    pub(super) pending: BTreeMap<Key, Upstream>,
    pub(super) asks: BTreeMap<Key, Ask>,
    pub(super) next_ask: u64,
    /// What a legacy server is subscribed to.
    pub(super) subs: BTreeSet<String>,
}

/// A server request a port received on one of its exchanges (the server's, or one the router
/// made up for an input round).
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) generation: u32,
    pub(super) port: PortId,
    pub(super) id: Key,
    pub(super) answered: bool,
}

/// A call held for a modern client's retry.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) generation: u32,
    pub(super) stream: Key,
    /// The exchange that got the input-required answer.
    pub(super) exchange: usize,
    pub(super) handle: String,
    pub(super) method: String,
    pub(super) caps: PortCapabilities,
    pub(super) resolved: bool,
}

/// The gateway's own rmcp client.
#[derive(Debug, Default)]
pub(super) struct Rmcp {
    pub(super) in_flight: BTreeSet<Key>,
    pub(super) next: u64,
    /// Server requests handed to it: (id, answered).
    pub(super) asks: Vec<(Key, bool)>,
}

/// Two JSON texts that mean the same value.
pub(super) fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The port number in an upstream id `"gw:{port}:{n}"`.
pub(super) fn port_of(key: &str) -> Option<PortId> {
    key.strip_prefix("\"gw:")?.split(':').next()?.parse().ok()
}
