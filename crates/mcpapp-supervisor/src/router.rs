//! Routing for one shared upstream session: who gets each message.
//!
//! Three kinds of party share an app's single upstream MCP session: the gateway's own rmcp
//! client, and any number of *ports* (browser sessions of `/apps/mcp/{appId}`). The router is
//! a plain state machine: it is told about every message that crosses the session and answers
//! with [`Delivery`]s; the hub task (see `session.rs`) carries them out. Keeping it free of
//! I/O makes every routing rule testable on its own.
//!
//! Rules:
//! - Port requests get a fresh upstream id `"gw:{port}:{n}"` (rmcp only uses numbers, so ids
//!   never collide) and a progress token `"gwpt:{n}"` when they carry one; both are restored
//!   on the way back, and a port only ever sees its own responses.
//! - Progress goes to the request it belongs to. `notifications/message` that arrives on one
//!   request's HTTP response stream goes to that request; everything else that is
//!   session-wide (list changes, `resources/updated`, logging on the shared stream) goes to
//!   every port and to rmcp.
//! - A server-to-client request (elicitation, sampling, roots) goes to the session that caused
//!   it. On an HTTP response stream the cause is that stream's request. Where the wire says
//!   nothing (stdio, the standalone GET stream), the request goes to the one port that has
//!   requests in flight and declared the capability, to its newest request. The gateway's rmcp
//!   client answers what its own requests caused, and what nobody can answer while it is busy;
//!   otherwise the router answers with an error that says why no session could.
//! - A port may answer only the server requests routed to it.
//! - Session-wide state is kept per port on the one upstream session. Resource subscriptions
//!   are reference-counted: the first port to subscribe to a URI subscribes upstream, the last
//!   to leave unsubscribes, the others are answered here; `resources/updated` reaches only the
//!   subscribers of its URI. `logging/setLevel` is kept per port: upstream the level is the most
//!   verbose any port asked for, and each port receives session-wide log messages at its own
//!   level or above (a port that never set one receives what the server sends).

use std::collections::{HashMap, HashSet};

use serde_json::value::RawValue;

use crate::raw::{MessageKind, RawMessage, raw_json, raw_string};

/// Identifies a port within one upstream session.
pub(crate) type PortId = u64;

/// A request id as its raw JSON text (`7` and `"7"` differ).
pub(crate) type Key = String;

/// Where an upstream message arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The child's stdout: no association with any request.
    Stdio,
    /// The HTTP session's standalone GET stream.
    Get,
    /// The HTTP response stream of the request with this upstream id.
    Post(Key),
}

/// Capabilities a port declared in its own `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PortCapabilities {
    /// The port can answer `elicitation/create`.
    pub(crate) elicitation: bool,
    /// The port can answer `sampling/createMessage`.
    pub(crate) sampling: bool,
    /// The port can answer `roots/list`.
    pub(crate) roots: bool,
}

impl PortCapabilities {
    fn allows(self, method: &str) -> bool {
        match method {
            "elicitation/create" => self.elicitation,
            "sampling/createMessage" => self.sampling,
            "roots/list" => self.roots,
            _ => false,
        }
    }
}

/// What to do with a message.
#[derive(Debug)]
pub(crate) enum Delivery {
    /// Send to the server. `request` is the upstream id when the message is a request (HTTP
    /// uses it to tag what comes back on that request's response stream).
    Upstream {
        message: RawMessage,
        request: Option<Key>,
    },
    /// Give to the gateway's rmcp client.
    Rmcp(RawMessage),
    /// Give to the stream of a port's in-flight request; `last` ends that stream.
    Request {
        request: Key,
        message: RawMessage,
        last: bool,
    },
    /// Give to a port's stream of session notifications.
    Port { port: PortId, message: RawMessage },
    /// Nobody wants it; the reason is logged.
    Drop { reason: String },
}

#[derive(Debug)]
struct PendingRequest {
    port: PortId,
    original_id: Box<RawValue>,
    token: Option<Key>,
    /// A subscription recorded when the request was sent, undone if the server refuses it.
    subscribes: Option<String>,
}

/// Who holds a resource subscription on the shared session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Party {
    Rmcp,
    Port(PortId),
}

/// MCP log levels, least severe first (RFC 5424 severities).
const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn level_rank(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Rmcp,
    Port { port: PortId, request: Key },
}

#[derive(Debug, Default)]
struct PortEntry {
    capabilities: PortCapabilities,
    /// Upstream keys of requests in flight, oldest first.
    in_flight: Vec<Key>,
    /// The log level this port asked for (`logging/setLevel`), as a rank in [`LEVELS`].
    level: Option<usize>,
}

/// The routing tables of one upstream session.
#[derive(Debug, Default)]
pub(crate) struct Router {
    ports: HashMap<PortId, PortEntry>,
    requests: HashMap<Key, PendingRequest>,
    tokens: HashMap<Key, (Key, Box<RawValue>)>,
    rmcp_in_flight: HashSet<Key>,
    rmcp_initialize: Option<Key>,
    initialize_result: Option<Box<RawValue>>,
    server_requests: HashMap<Key, Owner>,
    subscriptions: HashMap<String, std::collections::BTreeSet<Party>>,
    /// The level last asked of the server, as a rank in [`LEVELS`].
    upstream_level: Option<usize>,
    next: u64,
}

fn key_of(value: &RawValue) -> Key {
    value.get().trim().to_owned()
}

impl Router {
    /// The upstream's raw `InitializeResult`, once the handshake has been seen.
    pub(crate) fn initialize_result(&self) -> Option<&RawValue> {
        self.initialize_result.as_deref()
    }

    /// Registers a port.
    pub(crate) fn open_port(&mut self, port: PortId, capabilities: PortCapabilities) {
        self.ports.insert(
            port,
            PortEntry {
                capabilities,
                in_flight: Vec::new(),
                level: None,
            },
        );
    }

    /// Removes a port: its in-flight requests are cancelled upstream and the server requests
    /// it still owes are answered with an error, so the server is not left waiting.
    pub(crate) fn close_port(&mut self, port: PortId, reason: &str) -> Vec<Delivery> {
        let mut out = Vec::new();
        if let Some(entry) = self.ports.remove(&port) {
            for key in entry.in_flight {
                self.forget_request(&key);
                out.push(cancelled(&key, reason));
            }
        }
        let owed: Vec<Key> = self
            .server_requests
            .iter()
            .filter(|(_, owner)| matches!(owner, Owner::Port { port: p, .. } if *p == port))
            .map(|(key, _)| key.clone())
            .collect();
        for key in owed {
            self.server_requests.remove(&key);
            out.push(Delivery::Upstream {
                message: RawMessage::error_response(
                    Some(&raw_json(key.clone())),
                    -32603,
                    &format!("the client that was asked has gone: {reason}"),
                ),
                request: None,
            });
        }
        // Subscriptions only this port held end upstream too.
        let mut emptied: Vec<String> = Vec::new();
        self.subscriptions.retain(|uri, parties| {
            let held = parties.remove(&Party::Port(port));
            if held && parties.is_empty() {
                emptied.push(uri.clone());
            }
            !parties.is_empty()
        });
        emptied.sort();
        for uri in emptied {
            let params = serde_json::json!({ "uri": uri }).to_string();
            out.push(self.gateway_request("resources/unsubscribe", &params));
        }
        // A less verbose level may do now.
        if let Some(rank) = self.wanted_level()
            && Some(rank) != self.upstream_level
        {
            self.upstream_level = Some(rank);
            let params = serde_json::json!({ "level": LEVELS[rank] }).to_string();
            out.push(self.gateway_request("logging/setLevel", &params));
        }
        out
    }

    /// A request the gateway makes on its own behalf (keeping shared state right); nobody
    /// waits for its answer, which is dropped when it comes.
    fn gateway_request(&mut self, method: &str, params: &str) -> Delivery {
        self.next += 1;
        let id = raw_string(&format!("gw:0:{}", self.next));
        let key = key_of(&id);
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":{},"params":{params}}}"#,
            id.get(),
            raw_string(method).get()
        );
        match RawMessage::parse(text) {
            Ok(message) => Delivery::Upstream {
                message,
                request: Some(key),
            },
            Err(err) => Delivery::Drop {
                reason: format!("could not build {method}: {err}"),
            },
        }
    }

    /// The most verbose level any port asked for.
    fn wanted_level(&self) -> Option<usize> {
        self.ports.values().filter_map(|entry| entry.level).min()
    }

    /// Shared-state requests a port makes that may be answered here rather than upstream:
    /// returns the answer, or `None` to send the request upstream (with the subscription to
    /// record, if any).
    fn shared_state(
        &mut self,
        port: PortId,
        method: &str,
        message: &RawMessage,
        id: &RawValue,
    ) -> Result<Option<String>, RawMessage> {
        let empty = || RawMessage::response(id, &raw_json("{}".to_owned()));
        let string_param = |name: &str| {
            message
                .get_path(&["params", name])
                .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
        };
        match method {
            "resources/subscribe" => {
                let Some(uri) = string_param("uri") else {
                    return Ok(None);
                };
                let parties = self.subscriptions.entry(uri.clone()).or_default();
                let first = parties.is_empty();
                parties.insert(Party::Port(port));
                if first { Ok(Some(uri)) } else { Err(empty()) }
            }
            "resources/unsubscribe" => {
                let Some(uri) = string_param("uri") else {
                    return Ok(None);
                };
                let Some(parties) = self.subscriptions.get_mut(&uri) else {
                    return Err(empty());
                };
                let held = parties.remove(&Party::Port(port));
                if parties.is_empty() {
                    self.subscriptions.remove(&uri);
                }
                let last = held && !self.subscriptions.contains_key(&uri);
                if last { Ok(None) } else { Err(empty()) }
            }
            "logging/setLevel" => {
                let Some(rank) = string_param("level").as_deref().and_then(level_rank) else {
                    // Unknown levels go upstream, which answers them as it sees fit.
                    return Ok(None);
                };
                if let Some(entry) = self.ports.get_mut(&port) {
                    entry.level = Some(rank);
                }
                let wanted = self.wanted_level();
                if wanted == self.upstream_level {
                    return Err(empty());
                }
                self.upstream_level = wanted;
                if wanted == Some(rank) {
                    Ok(None)
                } else {
                    // Another port wants more; the server already sends enough.
                    Err(empty())
                }
            }
            _ => Ok(None),
        }
    }

    /// A request from a port. Returns the upstream key it was given, or a response to hand
    /// straight back (a malformed message, an unknown port, or shared state answered here).
    pub(crate) fn port_request(
        &mut self,
        port: PortId,
        mut message: RawMessage,
    ) -> Result<(Key, Vec<Delivery>), RawMessage> {
        let Some(original_id) = message.id().map(ToOwned::to_owned) else {
            return Err(RawMessage::error_response(
                None,
                -32600,
                "a request needs an id",
            ));
        };
        if !self.ports.contains_key(&port) {
            return Err(RawMessage::error_response(
                Some(&original_id),
                -32603,
                "this session is closed",
            ));
        }
        let method = message.method().unwrap_or_default();
        let subscribes = self.shared_state(port, &method, &message, &original_id)?;
        self.next += 1;
        let n = self.next;
        let key_value = raw_string(&format!("gw:{port}:{n}"));
        let key = key_of(&key_value);
        message.set_id(&key_value);
        let mut token_key = None;
        if let Some(original_token) = message.get_path(&["params", "_meta", "progressToken"]) {
            let upstream_token = raw_string(&format!("gwpt:{n}"));
            if message
                .set_path(&["params", "_meta", "progressToken"], &upstream_token)
                .is_ok()
            {
                let token = key_of(&upstream_token);
                self.tokens
                    .insert(token.clone(), (key.clone(), original_token));
                token_key = Some(token);
            }
        }
        self.requests.insert(
            key.clone(),
            PendingRequest {
                port,
                original_id,
                token: token_key,
                subscribes,
            },
        );
        if let Some(entry) = self.ports.get_mut(&port) {
            entry.in_flight.push(key.clone());
        }
        let delivery = Delivery::Upstream {
            message,
            request: Some(key.clone()),
        };
        Ok((key, vec![delivery]))
    }

    /// A notification from a port.
    pub(crate) fn port_notification(&mut self, port: PortId, message: RawMessage) -> Vec<Delivery> {
        match message.method().as_deref() {
            // The port's handshake is answered by the gateway; the upstream session already
            // completed its own.
            Some("notifications/initialized") => Vec::new(),
            // The upstream's roots are the gateway's, not this port's.
            Some("notifications/roots/list_changed") => Vec::new(),
            Some("notifications/cancelled") => {
                let Some(original) = message.get_path(&["params", "requestId"]) else {
                    return Vec::new();
                };
                let original = key_of(&original);
                let key = self.ports.get(&port).and_then(|entry| {
                    entry.in_flight.iter().find(|k| {
                        self.requests
                            .get(*k)
                            .is_some_and(|r| key_of(&r.original_id) == original)
                    })
                });
                match key.cloned() {
                    Some(key) => {
                        self.forget_request(&key);
                        let reason = message
                            .get_path(&["params", "reason"])
                            .and_then(|r| serde_json::from_str::<String>(r.get()).ok())
                            .unwrap_or_else(|| "cancelled by the client".to_owned());
                        vec![cancelled(&key, &reason)]
                    }
                    None => Vec::new(),
                }
            }
            _ => vec![Delivery::Upstream {
                message,
                request: None,
            }],
        }
    }

    /// A response from a port, to a server request.
    pub(crate) fn port_response(&mut self, port: PortId, message: RawMessage) -> Vec<Delivery> {
        let Some(id) = message.id().map(key_of) else {
            return vec![Delivery::Drop {
                reason: "a response without an id".to_owned(),
            }];
        };
        match self.server_requests.get(&id) {
            Some(Owner::Port { port: owner, .. }) if *owner == port => {
                self.server_requests.remove(&id);
                vec![Delivery::Upstream {
                    message,
                    request: None,
                }]
            }
            _ => vec![Delivery::Drop {
                reason: format!("port {port} answered server request {id}, which is not its own"),
            }],
        }
    }

    /// A port's request was given up (timeout): forget it and tell the server.
    pub(crate) fn abandon(&mut self, key: &Key, reason: &str) -> Vec<Delivery> {
        if self.forget_request(key).is_some() {
            vec![cancelled(key, reason)]
        } else {
            Vec::new()
        }
    }

    /// The original id of a port request, to build responses the port understands.
    pub(crate) fn original_id(&self, key: &Key) -> Option<&RawValue> {
        self.requests.get(key).map(|r| r.original_id.as_ref())
    }

    fn forget_request(&mut self, key: &Key) -> Option<PendingRequest> {
        let pending = self.requests.remove(key)?;
        if let Some(token) = &pending.token {
            self.tokens.remove(token);
        }
        if let Some(entry) = self.ports.get_mut(&pending.port) {
            entry.in_flight.retain(|k| k != key);
        }
        Some(pending)
    }

    /// A message the gateway's rmcp client sends.
    pub(crate) fn rmcp_outgoing(&mut self, message: RawMessage) -> Vec<Delivery> {
        let mut request = None;
        match message.kind() {
            MessageKind::Request => {
                if let Some(id) = message.id() {
                    let key = key_of(id);
                    let method = message.method();
                    if method.as_deref() == Some("initialize") {
                        self.rmcp_initialize = Some(key.clone());
                    }
                    if let Some(subscription) = method
                        .as_deref()
                        .filter(|m| matches!(*m, "resources/subscribe" | "resources/unsubscribe"))
                        && let Some(uri) = message
                            .get_path(&["params", "uri"])
                            .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
                    {
                        let parties = self.subscriptions.entry(uri.clone()).or_default();
                        if subscription == "resources/subscribe" {
                            parties.insert(Party::Rmcp);
                        } else {
                            parties.remove(&Party::Rmcp);
                            if parties.is_empty() {
                                self.subscriptions.remove(&uri);
                            }
                        }
                    }
                    self.rmcp_in_flight.insert(key.clone());
                    request = Some(key);
                }
            }
            MessageKind::Response | MessageKind::Error => {
                if let Some(id) = message.id() {
                    self.server_requests.remove(&key_of(id));
                }
            }
            MessageKind::Notification => {
                if message.method().as_deref() == Some("notifications/cancelled")
                    && let Some(id) = message.get_path(&["params", "requestId"])
                {
                    self.rmcp_in_flight.remove(&key_of(&id));
                }
            }
        }
        vec![Delivery::Upstream { message, request }]
    }

    /// A message from the server.
    pub(crate) fn upstream(&mut self, message: RawMessage, origin: &Origin) -> Vec<Delivery> {
        match message.kind() {
            MessageKind::Response | MessageKind::Error => self.upstream_response(message),
            MessageKind::Notification => self.upstream_notification(message, origin),
            MessageKind::Request => self.upstream_request(message, origin),
        }
    }

    fn upstream_response(&mut self, mut message: RawMessage) -> Vec<Delivery> {
        let Some(key) = message.id().map(key_of) else {
            return vec![Delivery::Drop {
                reason: "a response without an id".to_owned(),
            }];
        };
        if let Some(pending) = self.forget_request(&key) {
            if message.kind() == MessageKind::Error
                && let Some(uri) = &pending.subscribes
                && let Some(parties) = self.subscriptions.get_mut(uri)
            {
                // The server refused it: the port holds no subscription after all.
                parties.remove(&Party::Port(pending.port));
                if parties.is_empty() {
                    self.subscriptions.remove(uri);
                }
            }
            message.set_id(&pending.original_id);
            return vec![Delivery::Request {
                request: key,
                message,
                last: true,
            }];
        }
        if self.rmcp_in_flight.remove(&key) {
            if self.rmcp_initialize.as_ref() == Some(&key)
                && let Some(result) = message.member("result")
            {
                self.initialize_result = Some(result.to_owned());
            }
            return vec![Delivery::Rmcp(message)];
        }
        vec![Delivery::Drop {
            reason: format!("a response to {key}, which nobody is waiting for"),
        }]
    }

    fn upstream_notification(&mut self, mut message: RawMessage, origin: &Origin) -> Vec<Delivery> {
        let method = message.method().unwrap_or_default();
        match method.as_str() {
            "notifications/progress" => {
                let token = message
                    .get_path(&["params", "progressToken"])
                    .map(|t| key_of(&t));
                match token.and_then(|t| self.tokens.get(&t).cloned()) {
                    Some((request, original)) => {
                        if message
                            .set_path(&["params", "progressToken"], &original)
                            .is_err()
                        {
                            return Vec::new();
                        }
                        vec![Delivery::Request {
                            request,
                            message,
                            last: false,
                        }]
                    }
                    None => vec![Delivery::Rmcp(message)],
                }
            }
            "notifications/cancelled" => {
                let id = message
                    .get_path(&["params", "requestId"])
                    .map(|id| key_of(&id));
                match id.and_then(|id| self.server_requests.remove(&id)) {
                    Some(Owner::Port { request, .. }) => vec![Delivery::Request {
                        request,
                        message,
                        last: false,
                    }],
                    _ => vec![Delivery::Rmcp(message)],
                }
            }
            "notifications/message" => match origin {
                Origin::Post(key) if self.requests.contains_key(key) => {
                    vec![Delivery::Request {
                        request: key.clone(),
                        message,
                        last: false,
                    }]
                }
                Origin::Post(key) if self.rmcp_in_flight.contains(key) => {
                    vec![Delivery::Rmcp(message)]
                }
                _ => {
                    let rank = message
                        .get_path(&["params", "level"])
                        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
                        .as_deref()
                        .and_then(level_rank);
                    self.broadcast_to(message, |entry| match (entry.level, rank) {
                        (Some(wanted), Some(rank)) => rank >= wanted,
                        _ => true,
                    })
                }
            },
            "notifications/resources/updated" => {
                let uri = message
                    .get_path(&["params", "uri"])
                    .and_then(|v| serde_json::from_str::<String>(v.get()).ok());
                let parties = uri.and_then(|uri| self.subscriptions.get(&uri));
                let Some(parties) = parties else {
                    // Nobody here subscribed: only rmcp hears it (and ignores it).
                    return vec![Delivery::Rmcp(message)];
                };
                let mut out: Vec<Delivery> = parties
                    .iter()
                    .filter_map(|party| match party {
                        Party::Port(port) => Some(Delivery::Port {
                            port: *port,
                            message: message.clone(),
                        }),
                        Party::Rmcp => None,
                    })
                    .collect();
                if parties.contains(&Party::Rmcp) {
                    out.push(Delivery::Rmcp(message));
                }
                out
            }
            _ => self.broadcast(message),
        }
    }

    fn broadcast(&self, message: RawMessage) -> Vec<Delivery> {
        self.broadcast_to(message, |_| true)
    }

    /// Every port `wants` (in port order), then rmcp.
    fn broadcast_to(
        &self,
        message: RawMessage,
        wants: impl Fn(&PortEntry) -> bool,
    ) -> Vec<Delivery> {
        let mut ports: Vec<PortId> = self
            .ports
            .iter()
            .filter(|(_, entry)| wants(entry))
            .map(|(port, _)| *port)
            .collect();
        ports.sort_unstable();
        let mut out: Vec<Delivery> = ports
            .into_iter()
            .map(|port| Delivery::Port {
                port,
                message: message.clone(),
            })
            .collect();
        out.push(Delivery::Rmcp(message));
        out
    }

    fn upstream_request(&mut self, message: RawMessage, origin: &Origin) -> Vec<Delivery> {
        let Some(id) = message.id().map(key_of) else {
            return vec![Delivery::Drop {
                reason: "a request without an id".to_owned(),
            }];
        };
        let method = message.method().unwrap_or_default();
        let routed = match origin {
            Origin::Post(key) => match self.requests.get(key) {
                Some(pending) => {
                    let port = pending.port;
                    if self.allows(port, &method) {
                        Ok((port, key.clone()))
                    } else {
                        Err(Some(
                            "the client session whose request caused it did not declare the capability"
                                .to_owned(),
                        ))
                    }
                }
                // One of rmcp's requests caused it (or one nobody waits for any more).
                None => Err(None),
            },
            Origin::Stdio | Origin::Get => self.sole_capable_port(&method).map_err(Some),
        };
        match routed {
            Ok((port, request)) => {
                self.server_requests.insert(
                    id,
                    Owner::Port {
                        port,
                        request: request.clone(),
                    },
                );
                vec![Delivery::Request {
                    request,
                    message,
                    last: false,
                }]
            }
            // The gateway's own client answers what it caused, pings and methods it may know
            // better, and anything while its own requests are in flight (they may be the
            // cause). `roots/list` is answered by it too: the gateway exposes no roots.
            Err(None) => {
                self.server_requests.insert(id, Owner::Rmcp);
                vec![Delivery::Rmcp(message)]
            }
            Err(Some(_))
                if !is_client_capability(&method)
                    || method == "roots/list"
                    || !self.rmcp_in_flight.is_empty() =>
            {
                self.server_requests.insert(id, Owner::Rmcp);
                vec![Delivery::Rmcp(message)]
            }
            Err(Some(why)) => vec![Delivery::Upstream {
                message: RawMessage::error_response(
                    message.id(),
                    -32603,
                    &format!("no client connected through the gateway can answer {method}: {why}"),
                ),
                request: None,
            }],
        }
    }

    fn allows(&self, port: PortId, method: &str) -> bool {
        self.ports
            .get(&port)
            .is_some_and(|entry| entry.capabilities.allows(method))
    }

    /// Where the wire does not say what caused a server request: the one port with requests in
    /// flight that declared the capability (its newest request); none or several cannot be
    /// told apart.
    fn sole_capable_port(&self, method: &str) -> Result<(PortId, Key), String> {
        let mut candidates = self
            .ports
            .iter()
            .filter(|(_, entry)| !entry.in_flight.is_empty() && entry.capabilities.allows(method));
        let Some((port, entry)) = candidates.next() else {
            return Err(
                "no client session that declared the capability for it has a request in flight"
                    .to_owned(),
            );
        };
        if candidates.next().is_some() {
            return Err(
                "several client sessions that declared the capability have requests in flight, and the server did not say which one it is for"
                    .to_owned(),
            );
        }
        entry
            .in_flight
            .last()
            .map(|key| (*port, key.clone()))
            .ok_or_else(|| "the session's request has ended".to_owned())
    }
}

/// Methods a server may call only on clients that declared a capability for them.
fn is_client_capability(method: &str) -> bool {
    matches!(
        method,
        "elicitation/create" | "sampling/createMessage" | "roots/list"
    )
}

fn cancelled(key: &Key, reason: &str) -> Delivery {
    let params = serde_json::json!({ "requestId": serde_json::from_str::<serde_json::Value>(key).unwrap_or_default(), "reason": reason });
    Delivery::Upstream {
        message: RawMessage::notification(
            "notifications/cancelled",
            Some(&raw_json(params.to_string())),
        ),
        request: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> RawMessage {
        RawMessage::parse(text).unwrap()
    }

    fn all_caps() -> PortCapabilities {
        PortCapabilities {
            elicitation: true,
            sampling: true,
            roots: true,
        }
    }

    fn upstream_text(d: &[Delivery]) -> Vec<String> {
        d.iter()
            .filter_map(|d| match d {
                Delivery::Upstream { message, .. } => Some(message.as_str().to_owned()),
                _ => None,
            })
            .collect()
    }

    fn request_key(d: &[Delivery]) -> Key {
        match &d[0] {
            Delivery::Upstream {
                request: Some(k), ..
            } => k.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn port_requests_get_fresh_ids_and_tokens_that_are_restored() {
        let mut r = Router::default();
        r.open_port(1, all_caps());
        r.open_port(2, all_caps());
        let (k1, d1) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":"same","method":"tools/call","params":{"_meta":{"progressToken":"tokA"}}}"#))
            .unwrap();
        let (k2, _) = r
            .port_request(
                2,
                msg(r#"{"jsonrpc":"2.0","id":"same","method":"tools/call"}"#),
            )
            .unwrap();
        assert_ne!(k1, k2);
        assert_eq!(
            upstream_text(&d1),
            [
                r#"{"jsonrpc":"2.0","id":"gw:1:1","method":"tools/call","params":{"_meta":{"progressToken":"gwpt:1"}}}"#
            ]
        );
        // Progress with the upstream token reaches port 1's request, token restored.
        let progress = r.upstream(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gwpt:1","progress":1}}"#),
            &Origin::Stdio,
        );
        match &progress[..] {
            [
                Delivery::Request {
                    request,
                    message,
                    last: false,
                },
            ] => {
                assert_eq!(request, &k1);
                assert_eq!(
                    message.as_str(),
                    r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tokA","progress":1}}"#
                );
            }
            other => panic!("{other:?}"),
        }
        // The response goes back with the original id, only to its request.
        let done = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":"gw:1:1","result":{"x-r":1}}"#),
            &Origin::Stdio,
        );
        match &done[..] {
            [
                Delivery::Request {
                    request,
                    message,
                    last: true,
                },
            ] => {
                assert_eq!(request, &k1);
                assert_eq!(
                    message.as_str(),
                    r#"{"jsonrpc":"2.0","id":"same","result":{"x-r":1}}"#
                );
            }
            other => panic!("{other:?}"),
        }
        // Late progress for a finished request goes to rmcp, which ignores unknown tokens.
        let late = r.upstream(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gwpt:1","progress":2}}"#),
            &Origin::Stdio,
        );
        assert!(matches!(&late[..], [Delivery::Rmcp(_)]));
    }

    #[test]
    fn rmcp_traffic_is_separate_and_the_initialize_result_is_kept() {
        let mut r = Router::default();
        r.rmcp_outgoing(msg(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
        ));
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","x-extra":true}}"#),
            &Origin::Stdio,
        );
        assert!(matches!(&d[..], [Delivery::Rmcp(_)]));
        assert_eq!(
            r.initialize_result().unwrap().get(),
            r#"{"protocolVersion":"2025-11-25","x-extra":true}"#
        );
        let unknown = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":99,"result":{}}"#),
            &Origin::Stdio,
        );
        assert!(matches!(&unknown[..], [Delivery::Drop { .. }]));
    }

    #[test]
    fn session_notifications_reach_every_port_and_rmcp() {
        let mut r = Router::default();
        r.open_port(1, PortCapabilities::default());
        r.open_port(2, PortCapabilities::default());
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            &Origin::Post("1".into()),
        );
        let ports: Vec<PortId> = d
            .iter()
            .filter_map(|d| match d {
                Delivery::Port { port, .. } => Some(*port),
                _ => None,
            })
            .collect();
        assert_eq!(ports, [1, 2]);
        assert!(matches!(d.last(), Some(Delivery::Rmcp(_))));
    }

    #[test]
    fn logging_on_a_request_stream_stays_with_that_request() {
        let mut r = Router::default();
        r.open_port(1, PortCapabilities::default());
        r.open_port(2, PortCapabilities::default());
        let (k, _) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call"}"#))
            .unwrap();
        let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;
        let d = r.upstream(msg(log), &Origin::Post(k.clone()));
        assert!(
            matches!(&d[..], [Delivery::Request { request, last: false, .. }] if *request == k)
        );
        let d = r.upstream(msg(log), &Origin::Get);
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn server_requests_follow_their_cause_over_http() {
        let mut r = Router::default();
        r.open_port(1, all_caps());
        r.open_port(2, PortCapabilities::default());
        let (k1, _) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .unwrap();
        let (k2, _) = r
            .port_request(2, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .unwrap();
        let elicit = r#"{"jsonrpc":"2.0","id":40,"method":"elicitation/create","params":{}}"#;
        let d = r.upstream(msg(elicit), &Origin::Post(k1.clone()));
        assert!(matches!(&d[..], [Delivery::Request { request, .. }] if *request == k1));
        // Only port 1 may answer it.
        let answer = r#"{"jsonrpc":"2.0","id":40,"result":{"action":"accept"}}"#;
        assert!(matches!(
            &r.port_response(2, msg(answer))[..],
            [Delivery::Drop { .. }]
        ));
        assert_eq!(upstream_text(&r.port_response(1, msg(answer))), [answer]);
        // Port 2 did not declare elicitation: the gateway answers, saying why.
        let d = r.upstream(msg(elicit.replace("40", "41").as_str()), &Origin::Post(k2));
        let answer = upstream_text(&d);
        assert!(
            answer[0].contains(r#""id":41"#)
                && answer[0].contains("did not declare the capability"),
            "{answer:?}"
        );
        // What rmcp's own request caused goes to rmcp's handler.
        r.rmcp_outgoing(msg(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#));
        let d = r.upstream(
            msg(elicit.replace("40", "42").as_str()),
            &Origin::Post("3".into()),
        );
        assert!(matches!(&d[..], [Delivery::Rmcp(_)]));
    }

    #[test]
    fn without_a_cause_on_the_wire_server_requests_go_to_the_one_capable_busy_port() {
        for origin in [Origin::Stdio, Origin::Get] {
            let mut r = Router::default();
            r.open_port(1, all_caps());
            r.open_port(2, PortCapabilities::default());
            let elicit = r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}"#;
            // Nobody busy: the gateway answers with the reason.
            let d = r.upstream(msg(elicit), &origin);
            assert!(
                upstream_text(&d)[0].contains("has a request in flight"),
                "{d:?}"
            );
            let (k1, _) = r
                .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
                .unwrap();
            // A busy port that cannot answer does not count, and neither does rmcp being busy.
            r.port_request(2, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
                .unwrap();
            r.rmcp_outgoing(msg(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#));
            let d = r.upstream(msg(&elicit.replace("7", "8")), &origin);
            assert!(
                matches!(&d[..], [Delivery::Request { request, .. }] if *request == k1),
                "{d:?}"
            );
            // Two capable busy ports cannot be told apart; rmcp, busy, answers.
            r.open_port(3, all_caps());
            r.port_request(3, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
                .unwrap();
            let d = r.upstream(msg(&elicit.replace("7", "9")), &origin);
            assert!(matches!(&d[..], [Delivery::Rmcp(_)]), "{d:?}");
            // With rmcp idle, the gateway says why.
            r.upstream(msg(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#), &origin);
            let d = r.upstream(msg(&elicit.replace("7", "10")), &origin);
            assert!(
                upstream_text(&d)[0].contains("several client sessions"),
                "{d:?}"
            );
            // Pings are rmcp's.
            let d = r.upstream(msg(r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#), &origin);
            assert!(matches!(&d[..], [Delivery::Rmcp(_)]));
        }
    }

    #[test]
    fn subscriptions_are_counted_per_port_and_updates_reach_subscribers_only() {
        let mut r = Router::default();
        for port in 1..=3 {
            r.open_port(port, PortCapabilities::default());
        }
        let sub = |uri: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{{"uri":"{uri}"}}}}"#
            ))
        };
        let unsub = |uri: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"resources/unsubscribe","params":{{"uri":"{uri}"}}}}"#
            ))
        };
        let updated = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a"}}"#,
        );
        let ports_of = |d: &[Delivery]| -> Vec<PortId> {
            d.iter()
                .filter_map(|d| match d {
                    Delivery::Port { port, .. } => Some(*port),
                    _ => None,
                })
                .collect()
        };
        // The first subscriber goes upstream; the second is answered here.
        let (_, d) = r.port_request(1, sub("a")).unwrap();
        assert_eq!(upstream_text(&d).len(), 1);
        let answered = r.port_request(2, sub("a")).unwrap_err();
        assert_eq!(answered.as_str(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        // Port 3 never subscribed and hears nothing.
        assert_eq!(ports_of(&r.upstream(updated.clone(), &Origin::Get)), [1, 2]);
        // One port leaving does not end the other's subscription.
        assert!(r.port_request(1, unsub("a")).is_err());
        assert_eq!(ports_of(&r.upstream(updated.clone(), &Origin::Get)), [2]);
        // The last one does, upstream.
        let (_, d) = r.port_request(2, unsub("a")).unwrap();
        assert!(upstream_text(&d)[0].contains("resources/unsubscribe"));
        assert!(ports_of(&r.upstream(updated, &Origin::Get)).is_empty());
        // A refused subscription is not counted.
        let (k, _) = r.port_request(3, sub("b")).unwrap();
        r.upstream(
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{k},"error":{{"code":-32602,"message":"no"}}}}"#
            )),
            &Origin::Stdio,
        );
        let (_, d) = r.port_request(1, sub("b")).unwrap();
        assert_eq!(
            upstream_text(&d).len(),
            1,
            "the first real subscriber goes upstream"
        );
        // A closing port's last subscription ends upstream.
        let d = r.close_port(1, "gone");
        assert!(
            upstream_text(&d)
                .iter()
                .any(|t| t.contains("resources/unsubscribe") && t.contains(r#""uri":"b""#)),
            "{d:?}"
        );
    }

    #[test]
    fn log_levels_are_kept_per_port() {
        let mut r = Router::default();
        r.open_port(1, PortCapabilities::default());
        r.open_port(2, PortCapabilities::default());
        r.open_port(3, PortCapabilities::default());
        let set = |level: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{{"level":"{level}"}}}}"#
            ))
        };
        // Port 1 wants errors: upstream is asked for errors.
        let (_, d) = r.port_request(1, set("error")).unwrap();
        assert!(upstream_text(&d)[0].contains(r#""level":"error""#));
        // Port 2 wants debug: more verbose, upstream again.
        let (_, d) = r.port_request(2, set("debug")).unwrap();
        assert!(upstream_text(&d)[0].contains(r#""level":"debug""#));
        // Port 1 again, warnings: upstream already sends more, answered here.
        assert!(r.port_request(1, set("warning")).is_err());
        let log = |level: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"{level}","data":"x"}}}}"#
            ))
        };
        let ports_of = |d: Vec<Delivery>| -> Vec<PortId> {
            d.iter()
                .filter_map(|d| match d {
                    Delivery::Port { port, .. } => Some(*port),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(ports_of(r.upstream(log("info"), &Origin::Get)), [2, 3]);
        assert_eq!(ports_of(r.upstream(log("error"), &Origin::Get)), [1, 2, 3]);
        // The verbose port leaves: upstream goes back to what the rest want.
        let d = r.close_port(2, "gone");
        assert!(
            upstream_text(&d)
                .iter()
                .any(|t| t.contains("logging/setLevel") && t.contains("warning")),
            "{d:?}"
        );
    }

    #[test]
    fn cancellation_and_closing_clean_up_upstream() {
        let mut r = Router::default();
        r.open_port(1, all_caps());
        let (k, _) = r
            .port_request(
                1,
                msg(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call"}"#),
            )
            .unwrap();
        let d = r.port_notification(
            1,
            msg(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"user"}}"#),
        );
        assert_eq!(
            upstream_text(&d),
            [format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{k},"reason":"user"}}}}"#
            )]
        );
        assert!(r.original_id(&k).is_none());

        let (k2, _) = r
            .port_request(
                1,
                msg(r#"{"jsonrpc":"2.0","id":"b","method":"tools/call"}"#),
            )
            .unwrap();
        r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{}}"#),
            &Origin::Post(k2.clone()),
        );
        let d = r.close_port(1, "session deleted");
        let texts = upstream_text(&d);
        assert_eq!(texts.len(), 2);
        assert!(texts[0].contains("notifications/cancelled") && texts[0].contains(&k2));
        assert!(texts[1].contains(r#""id":9"#) && texts[1].contains("error"));
        assert!(
            r.port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#))
                .is_err()
        );
    }

    #[test]
    fn initialized_and_roots_changes_from_ports_are_swallowed() {
        let mut r = Router::default();
        r.open_port(1, all_caps());
        assert!(
            r.port_notification(
                1,
                msg(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            )
            .is_empty()
        );
        assert!(
            r.port_notification(
                1,
                msg(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#)
            )
            .is_empty()
        );
        let d = r.port_notification(
            1,
            msg(r#"{"jsonrpc":"2.0","method":"notifications/custom","params":{"x":1}}"#),
        );
        assert_eq!(upstream_text(&d).len(), 1);
    }

    #[test]
    fn timed_out_requests_are_cancelled_upstream_once() {
        let mut r = Router::default();
        r.open_port(1, all_caps());
        let (k, d) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .unwrap();
        assert_eq!(request_key(&d), k);
        assert_eq!(r.abandon(&k, "timed out").len(), 1);
        assert!(r.abandon(&k, "timed out").is_empty());
        let late = r.upstream(
            msg(&format!(r#"{{"jsonrpc":"2.0","id":{k},"result":{{}}}}"#)),
            &Origin::Stdio,
        );
        assert!(matches!(&late[..], [Delivery::Drop { .. }]));
    }
}
