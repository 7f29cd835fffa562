//! Routing for one shared upstream session: who gets each message.
//!
//! Three kinds of party share an app's single upstream MCP session: the gateway's own rmcp
//! client, and any number of *ports* (client sessions of `/apps/mcp/{appId}`). The router is
//! a plain state machine: it is told about every message that crosses the session and answers
//! with [`Delivery`]s; the hub task (see `hub.rs`) carries them out. Keeping it free of
//! I/O makes every routing rule testable on its own.
//!
//! Rules:
//! - Port requests get a fresh upstream id `"gw:{port}:{n}"` (rmcp only uses numbers, so ids
//!   never collide) and a progress token `"gwpt:{n}"` when they carry one; both are restored
//!   on the way back, and a port only ever sees its own responses.
//! - Progress goes to the request it belongs to. `notifications/message` that arrives on one
//!   request's HTTP response stream goes to that request; list changes go to every port and
//!   to rmcp.
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
//!
//! Eras (docs/protocol.md): the upstream speaks one era and each port its own.
//! - A *modern* port on a legacy upstream: its requests lose the modern `_meta` keys on the
//!   way up and its results gain `resultType` (and cache hints); a server request its call
//!   causes becomes an input-required answer, the upstream call is held, and the client's
//!   retry (which echoes the opaque `requestState`) answers the server and resumes the call;
//!   `subscriptions/listen` is served here from the session's notifications.
//! - A *legacy* port on a modern upstream: its requests gain the modern `_meta` (its own
//!   capabilities and identity, its log level); an input-required result becomes server
//!   requests to the port, whose answers go back upstream as the retry; `logging/setLevel` is
//!   answered here, and a resource subscription becomes a `subscriptions/listen` upstream.
//! - Notifications tied to a `subscriptions/listen` request go to that request's stream, with
//!   the client's own id restored in their `_meta`.

use std::collections::{BTreeSet, HashMap, HashSet};

use mcpapp_manifest::Era;
use serde_json::value::RawValue;

use crate::era::{self, META_SUBSCRIPTION_ID};
pub(crate) use crate::link::{Origin, RequestKey as Key};
use crate::raw::{MessageKind, RawMessage, raw_json, raw_string};

/// Identifies a port within one upstream session.
pub(crate) type PortId = u64;

/// Capabilities a port declared: in its `initialize` (legacy) or in its request (modern).
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
    /// Reads a `ClientCapabilities` object.
    pub(crate) fn from_json(capabilities: Option<&RawValue>) -> Self {
        let value: serde_json::Value = capabilities
            .and_then(|c| serde_json::from_str(c.get()).ok())
            .unwrap_or_default();
        let declared = |name: &str| value.get(name).is_some_and(|v| !v.is_null());
        Self {
            elicitation: declared("elicitation"),
            sampling: declared("sampling"),
            roots: declared("roots"),
        }
    }

    fn allows(self, method: &str) -> bool {
        match method {
            "elicitation/create" => self.elicitation,
            "sampling/createMessage" => self.sampling,
            "roots/list" => self.roots,
            _ => false,
        }
    }
}

/// Who a port is: its era, and for a legacy port what its `initialize` declared (sent on its
/// behalf to a modern upstream).
#[derive(Debug, Clone, Default)]
pub(crate) struct PortSpec {
    pub(crate) era: Era,
    pub(crate) capabilities: PortCapabilities,
    pub(crate) client_capabilities: Option<Box<RawValue>>,
    pub(crate) client_info: Option<Box<RawValue>>,
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
    /// The answer to a request the hub made itself (the era probe).
    Gateway { key: Key, message: RawMessage },
    /// Nobody wants it; the reason is logged.
    Drop { reason: String },
}

/// A port request the router took.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// The key of the request's stream (what its answers are delivered under).
    pub(crate) stream: Key,
    pub(crate) deliveries: Vec<Delivery>,
    /// Whether the request timeout applies (not to `subscriptions/listen`, which lasts).
    pub(crate) bounded: bool,
}

impl Accepted {
    #[cfg(test)]
    fn into_parts(self) -> (Key, Vec<Delivery>) {
        (self.stream, self.deliveries)
    }
}

#[derive(Debug)]
struct PendingRequest {
    port: PortId,
    /// The stream its answers go to; the upstream id changes on an input-required retry.
    stream: Key,
    original_id: Box<RawValue>,
    token: Option<Key>,
    /// A subscription recorded when the request was sent, undone if the server refuses it.
    subscribes: Option<String>,
    method: String,
    /// Whether the client speaks the modern era (its results are completed for it).
    modern_client: bool,
    /// For a modern client: the log level its request asked for (none: no log messages).
    log_level: Option<usize>,
    /// The request as sent upstream, kept for an input-required retry (modern upstream).
    sent: Option<RawMessage>,
    /// A call held for a modern client's retry: the server request it must answer.
    held: Option<Key>,
}

/// An input-required round of a modern upstream, answered by a legacy port.
#[derive(Debug)]
struct Round {
    /// The upstream id of the attempt that asked.
    upstream: Key,
    awaiting: BTreeSet<String>,
    responses: serde_json::Map<String, serde_json::Value>,
    request_state: Option<Box<RawValue>>,
    rounds: u32,
}

/// Rounds a modern upstream may ask for in one call (as rmcp's client allows).
const MAX_ROUNDS: u32 = 10;

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
    /// A port answers it directly (legacy port, legacy upstream).
    Port {
        port: PortId,
        request: Key,
    },
    /// A legacy port answers one input of a modern upstream's round.
    Round {
        port: PortId,
        stream: Key,
        input: String,
    },
    /// A modern client's retry answers it (legacy upstream).
    Held {
        stream: Key,
    },
}

/// A `subscriptions/listen` served here for a modern port on a legacy upstream.
#[derive(Debug)]
struct Listen {
    port: PortId,
    original_id: Box<RawValue>,
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
}

#[derive(Debug, Default)]
struct PortEntry {
    spec: PortSpec,
    /// Upstream keys of requests in flight, oldest first.
    in_flight: Vec<Key>,
    /// The log level this port asked for (`logging/setLevel`), as a rank in [`LEVELS`].
    level: Option<usize>,
}

/// The routing tables of one upstream session.
#[derive(Debug, Default)]
pub(crate) struct Router {
    upstream_era: Era,
    ports: HashMap<PortId, PortEntry>,
    requests: HashMap<Key, PendingRequest>,
    /// Stream key → current upstream id, where they differ (after a retry).
    aliases: HashMap<Key, Key>,
    rounds: HashMap<Key, Round>,
    /// `requestState` handle → held stream, for modern clients' retries.
    held: HashMap<String, Key>,
    listens: HashMap<Key, Listen>,
    /// Upstream listens standing in for resource subscriptions (modern upstream), by URI.
    gateway_listens: HashMap<String, Key>,
    tokens: HashMap<Key, (Key, Box<RawValue>)>,
    rmcp_in_flight: HashSet<Key>,
    rmcp_handshake: Option<Key>,
    handshake_result: Option<Box<RawValue>>,
    probes: HashSet<Key>,
    server_requests: HashMap<Key, Owner>,
    subscriptions: HashMap<String, BTreeSet<Party>>,
    /// The level last asked of the server, as a rank in [`LEVELS`].
    upstream_level: Option<usize>,
    /// The server requests of held calls (`(method, params)`), to ask again.
    held_requests: HashMap<Key, (String, Option<Box<RawValue>>)>,
    /// Input-required rounds already run, per stream.
    rounds_done: HashMap<Key, u32>,
    /// Deliveries made while answering a port at once (see [`Router::take_pending`]).
    pending_out: Vec<Delivery>,
    /// Makes `requestState` handles unguessable (the hub seeds it).
    secret: [u64; 2],
    next: u64,
}

pub(crate) fn key_of(value: &RawValue) -> Key {
    value.get().trim().to_owned()
}

fn string_at(message: &RawMessage, path: &[&str]) -> Option<String> {
    message
        .path(path)
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

impl Router {
    /// A router whose `requestState` handles are derived from `secret`.
    pub(crate) fn with_secret(secret: [u64; 2]) -> Self {
        Self {
            secret,
            ..Self::default()
        }
    }

    /// Says which era the upstream speaks (known once the session is open).
    pub(crate) fn set_upstream_era(&mut self, era: Era) {
        self.upstream_era = era;
    }

    pub(crate) fn upstream_era(&self) -> Era {
        self.upstream_era
    }

    /// The upstream's raw `InitializeResult` (legacy) or `server/discover` result (modern),
    /// once the gateway's own handshake has been seen.
    pub(crate) fn handshake_result(&self) -> Option<&RawValue> {
        self.handshake_result.as_deref()
    }

    /// A `server/discover` the hub sends itself, to learn the upstream's era; its answer
    /// comes back as [`Delivery::Gateway`].
    pub(crate) fn probe(
        &mut self,
        client_info: &serde_json::Value,
        capabilities: &serde_json::Value,
    ) -> (Key, Delivery) {
        self.next += 1;
        let id = raw_string(&format!("gw:0:{}", self.next));
        let key = key_of(&id);
        self.probes.insert(key.clone());
        let message = era::probe_request(&id, client_info, capabilities);
        (
            key.clone(),
            Delivery::Upstream {
                message,
                request: Some(key),
            },
        )
    }

    /// Registers a port.
    pub(crate) fn open_port(&mut self, port: PortId, spec: PortSpec) {
        self.ports.insert(
            port,
            PortEntry {
                spec,
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
                if let Some(pending) = self.forget_request(&key) {
                    out.extend(self.end_stream_state(&pending.stream));
                }
                out.push(cancelled(&key, reason));
            }
        }
        let owed: Vec<Key> = self
            .server_requests
            .iter()
            .filter(|(_, owner)| {
                matches!(owner, Owner::Port { port: p, .. } | Owner::Round { port: p, .. } if *p == port)
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in owed {
            if let Some(Owner::Port { .. }) = self.server_requests.remove(&key) {
                out.push(Delivery::Upstream {
                    message: RawMessage::error_response(
                        Some(&raw_json(key.clone())),
                        -32603,
                        &format!("the client that was asked has gone: {reason}"),
                    ),
                    request: None,
                });
            }
        }
        let listens: Vec<Key> = self
            .listens
            .iter()
            .filter(|(_, l)| l.port == port)
            .map(|(k, _)| k.clone())
            .collect();
        for stream in listens {
            self.listens.remove(&stream);
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
            out.extend(self.unsubscribe_upstream(&uri));
        }
        // A less verbose level may do now (a modern upstream has no session level).
        if self.upstream_era == Era::Legacy
            && let Some(rank) = self.wanted_level()
            && Some(rank) != self.upstream_level
        {
            self.upstream_level = Some(rank);
            let params = serde_json::json!({ "level": LEVELS[rank] }).to_string();
            out.push(self.gateway_request("logging/setLevel", &params).1);
        }
        out
    }

    /// Undoes per-stream state when a request ends for good (rounds, emulated listens).
    fn end_stream_state(&mut self, stream: &Key) -> Vec<Delivery> {
        self.rounds.remove(stream);
        self.aliases.remove(stream);
        self.server_requests
            .retain(|_, owner| !matches!(owner, Owner::Round { stream: s, .. } if s == stream));
        Vec::new()
    }

    /// A request the gateway makes on its own behalf (keeping shared state right); nobody
    /// waits for its answer, which is dropped when it comes. A modern upstream gets the
    /// gateway's own request `_meta`.
    fn gateway_request(&mut self, method: &str, params: &str) -> (Key, Delivery) {
        self.next += 1;
        let id = raw_string(&format!("gw:0:{}", self.next));
        let key = key_of(&id);
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":{},"params":{params}}}"#,
            id.get(),
            raw_string(method).get()
        );
        let delivery = match RawMessage::parse(text) {
            Ok(mut message) => {
                if self.upstream_era == Era::Modern {
                    let info = raw_json(crate::client::gateway_info_json().to_string());
                    era::inject_request_meta(&mut message, None, Some(&info), None);
                }
                Delivery::Upstream {
                    message,
                    request: Some(key.clone()),
                }
            }
            Err(err) => Delivery::Drop {
                reason: format!("could not build {method}: {err}"),
            },
        };
        (key, delivery)
    }

    /// Ends the gateway's own upstream interest in `uri`.
    fn unsubscribe_upstream(&mut self, uri: &str) -> Vec<Delivery> {
        match self.upstream_era {
            Era::Legacy => {
                let params = serde_json::json!({ "uri": uri }).to_string();
                vec![self.gateway_request("resources/unsubscribe", &params).1]
            }
            Era::Modern => match self.gateway_listens.remove(uri) {
                Some(key) => vec![cancelled(&key, "no client is subscribed any more")],
                None => Vec::new(),
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
        let modern_upstream = self.upstream_era == Era::Modern;
        match method {
            "resources/subscribe" => {
                let Some(uri) = string_at(message, &["params", "uri"]) else {
                    return Ok(None);
                };
                let parties = self.subscriptions.entry(uri.clone()).or_default();
                let first = parties.is_empty();
                parties.insert(Party::Port(port));
                if !first {
                    return Err(empty());
                }
                if modern_upstream {
                    // A modern server has no subscribe; a listen for this URI stands in.
                    let params = serde_json::json!({
                        "notifications": { "resourceSubscriptions": [uri] }
                    })
                    .to_string();
                    let (key, delivery) = self.gateway_request("subscriptions/listen", &params);
                    self.gateway_listens.insert(uri, key);
                    return Err(self.answer_now(empty(), delivery));
                }
                Ok(Some(uri))
            }
            "resources/unsubscribe" => {
                let Some(uri) = string_at(message, &["params", "uri"]) else {
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
                if !last {
                    return Err(empty());
                }
                if modern_upstream {
                    let deliveries = self.unsubscribe_upstream(&uri);
                    return Err(deliveries
                        .into_iter()
                        .fold(empty(), |answer, d| self.answer_now(answer, d)));
                }
                Ok(None)
            }
            "logging/setLevel" => {
                let Some(rank) = string_at(message, &["params", "level"])
                    .as_deref()
                    .and_then(level_rank)
                else {
                    // Unknown levels go upstream, which answers them as it sees fit.
                    return Ok(None);
                };
                if let Some(entry) = self.ports.get_mut(&port) {
                    entry.level = Some(rank);
                }
                if modern_upstream {
                    // Sent with each of the port's requests from now on.
                    return Err(empty());
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

    /// Queues a delivery that must go out along with an answer given at once.
    fn answer_now(&mut self, answer: RawMessage, delivery: Delivery) -> RawMessage {
        self.pending_out.push(delivery);
        answer
    }

    /// Deliveries made while answering a port at once, for the hub to carry out.
    pub(crate) fn take_pending(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.pending_out)
    }

    /// A fresh upstream id for a port request.
    fn new_key(&mut self, port: PortId) -> (Key, Box<RawValue>, u64) {
        self.next += 1;
        let n = self.next;
        let value = raw_string(&format!("gw:{port}:{n}"));
        (key_of(&value), value, n)
    }

    /// A request from a port. Returns what was accepted, or a response to hand straight back
    /// (a malformed message, an unknown port, or something answered here).
    pub(crate) fn port_request(
        &mut self,
        port: PortId,
        mut message: RawMessage,
    ) -> Result<Accepted, RawMessage> {
        let Some(original_id) = message.id().map(ToOwned::to_owned) else {
            return Err(RawMessage::error_response(
                None,
                -32600,
                "a request needs an id",
            ));
        };
        let Some(entry) = self.ports.get(&port) else {
            return Err(RawMessage::error_response(
                Some(&original_id),
                -32603,
                "this session is closed",
            ));
        };
        let port_era = entry.spec.era;
        let method = message.method().unwrap_or_default();
        if port_era == Era::Modern && self.upstream_era == Era::Legacy {
            if let Some(handle) = string_at(&message, &["params", "requestState"])
                && let Some(accepted) = self.resume_held(port, &handle, &message, &original_id)?
            {
                return Ok(accepted);
            }
            if method == "subscriptions/listen" {
                return Ok(self.listen_here(port, &message, original_id));
            }
        }
        let subscribes = self.shared_state(port, &method, &message, &original_id)?;
        let (key, key_value, n) = self.new_key(port);
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
        let log_level = if port_era == Era::Modern {
            era::request_log_level(&message)
                .as_deref()
                .and_then(level_rank)
        } else {
            None
        };
        match (port_era, self.upstream_era) {
            (Era::Modern, Era::Legacy) => era::strip_request_meta(&mut message),
            (Era::Legacy, Era::Modern) => {
                let entry = self.ports.get(&port);
                let level = entry.and_then(|e| e.level).map(|rank| LEVELS[rank]);
                let spec = entry.map(|e| &e.spec);
                era::inject_request_meta(
                    &mut message,
                    spec.and_then(|s| s.client_capabilities.as_deref()),
                    spec.and_then(|s| s.client_info.as_deref()),
                    level,
                );
            }
            _ => {}
        }
        let keep = self.upstream_era == Era::Modern && port_era == Era::Legacy;
        self.requests.insert(
            key.clone(),
            PendingRequest {
                port,
                stream: key.clone(),
                original_id,
                token: token_key,
                subscribes,
                method: method.clone(),
                modern_client: port_era == Era::Modern,
                log_level,
                sent: keep.then(|| message.clone()),
                held: None,
            },
        );
        if let Some(entry) = self.ports.get_mut(&port) {
            entry.in_flight.push(key.clone());
        }
        let mut deliveries = self.take_pending();
        deliveries.push(Delivery::Upstream {
            message,
            request: Some(key.clone()),
        });
        Ok(Accepted {
            stream: key,
            deliveries,
            bounded: method != "subscriptions/listen",
        })
    }

    /// A modern client's `subscriptions/listen` on a legacy upstream, served here from the
    /// session's notifications: acknowledged with what the app's capabilities allow.
    fn listen_here(
        &mut self,
        port: PortId,
        message: &RawMessage,
        original_id: Box<RawValue>,
    ) -> Accepted {
        let wanted = |name: &str| {
            message
                .path(&["params", "notifications", name])
                .is_some_and(|v| v.get() == "true")
        };
        let capabilities: serde_json::Value = self
            .handshake_result
            .as_deref()
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
            .map(|r| r["capabilities"].clone())
            .unwrap_or_default();
        let offers = |list: &str, flag: &str| capabilities[list][flag].as_bool() == Some(true);
        let tools = wanted("toolsListChanged") && offers("tools", "listChanged");
        let prompts = wanted("promptsListChanged") && offers("prompts", "listChanged");
        let resources = wanted("resourcesListChanged") && offers("resources", "listChanged");
        let uris: Vec<String> = if offers("resources", "subscribe") {
            message
                .path(&["params", "notifications", "resourceSubscriptions"])
                .and_then(|v| serde_json::from_str(v.get()).ok())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let (stream, _, _) = self.new_key(port);
        let mut deliveries = Vec::new();
        for uri in &uris {
            let parties = self.subscriptions.entry(uri.clone()).or_default();
            let first = parties.is_empty();
            parties.insert(Party::Port(port));
            if first {
                let params = serde_json::json!({ "uri": uri }).to_string();
                deliveries.push(self.gateway_request("resources/subscribe", &params).1);
            }
        }
        let mut accepted = serde_json::Map::new();
        for (name, on) in [
            ("toolsListChanged", tools),
            ("promptsListChanged", prompts),
            ("resourcesListChanged", resources),
        ] {
            if on {
                accepted.insert(name.to_owned(), serde_json::Value::Bool(true));
            }
        }
        if !uris.is_empty() {
            accepted.insert("resourceSubscriptions".to_owned(), serde_json::json!(uris));
        }
        let id: serde_json::Value = serde_json::from_str(original_id.get()).unwrap_or_default();
        let ack = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": { "_meta": { META_SUBSCRIPTION_ID: id }, "notifications": accepted },
        });
        if let Ok(ack) = RawMessage::from_value(&ack) {
            deliveries.push(Delivery::Request {
                request: stream.clone(),
                message: ack,
                last: false,
            });
        }
        self.listens.insert(
            stream.clone(),
            Listen {
                port,
                original_id,
                tools,
                prompts,
                resources,
                uris,
            },
        );
        Accepted {
            stream,
            deliveries,
            bounded: false,
        }
    }

    /// A modern client's retry of a call held for its input (legacy upstream): its answer goes
    /// to the server request waiting for it, and the call carries on on the retry's stream.
    fn resume_held(
        &mut self,
        port: PortId,
        handle: &str,
        message: &RawMessage,
        retry_id: &RawValue,
    ) -> Result<Option<Accepted>, RawMessage> {
        let Some(stream) = self.held.get(handle).cloned() else {
            return Err(RawMessage::error_response(
                Some(retry_id),
                -32602,
                "requestState names no call waiting for input here (it ended, timed out or belongs to another gateway)",
            ));
        };
        let method = message.method().unwrap_or_default();
        let Some(pending) = self.requests.get(&stream) else {
            self.held.remove(handle);
            return Err(RawMessage::error_response(
                Some(retry_id),
                -32602,
                "the call this requestState belonged to has ended",
            ));
        };
        if pending.method != method {
            return Err(RawMessage::error_response(
                Some(retry_id),
                -32602,
                "requestState belongs to another request",
            ));
        }
        let Some(server_request) = pending.held.clone() else {
            return Ok(None);
        };
        let Some(answer) = message.path(&["params", "inputResponses", "input"]) else {
            // Nothing for the input yet: ask again, as the spec suggests.
            let asked = self.reask(&stream, handle, retry_id);
            return Err(asked);
        };
        self.held.remove(handle);
        self.server_requests.remove(&server_request);
        let pending = self.requests.get_mut(&stream).ok_or_else(|| {
            RawMessage::error_response(Some(retry_id), -32603, "the held call vanished")
        })?;
        pending.port = port;
        pending.original_id = retry_id.to_owned();
        pending.held = None;
        if let Some(entry) = self.ports.get_mut(&port) {
            entry.in_flight.push(stream.clone());
        }
        let reply = RawMessage::response(&raw_json(server_request.clone()), answer);
        Ok(Some(Accepted {
            stream,
            deliveries: vec![Delivery::Upstream {
                message: reply,
                request: None,
            }],
            bounded: false,
        }))
    }

    /// The same input request again, for a retry that did not answer it.
    fn reask(&mut self, stream: &Key, handle: &str, retry_id: &RawValue) -> RawMessage {
        let asked = self
            .requests
            .get(stream)
            .and_then(|p| p.held.clone())
            .and_then(|s| self.held_requests.get(&s).cloned());
        match asked {
            Some((method, params)) => RawMessage::response(
                retry_id,
                &era::input_required("input", &method, params.as_deref(), handle),
            ),
            None => RawMessage::error_response(Some(retry_id), -32603, "the held call vanished"),
        }
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
                let Some(original) = message.path(&["params", "requestId"]) else {
                    return Vec::new();
                };
                let original = key_of(original);
                let key = self.ports.get(&port).and_then(|entry| {
                    entry.in_flight.iter().find(|k| {
                        self.requests
                            .get(*k)
                            .is_some_and(|r| key_of(&r.original_id) == original)
                    })
                });
                match key.cloned() {
                    Some(key) => {
                        let reason = message
                            .path(&["params", "reason"])
                            .and_then(|r| serde_json::from_str::<String>(r.get()).ok())
                            .unwrap_or_else(|| "cancelled by the client".to_owned());
                        let stream = self.requests.get(&key).map(|p| p.stream.clone());
                        stream.map_or_else(Vec::new, |s| self.abandon(&s, &reason))
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
        match self.server_requests.get(&id).cloned() {
            Some(Owner::Port { port: owner, .. }) if owner == port => {
                self.server_requests.remove(&id);
                vec![Delivery::Upstream {
                    message,
                    request: None,
                }]
            }
            Some(Owner::Round {
                port: owner,
                stream,
                input,
            }) if owner == port => {
                self.server_requests.remove(&id);
                self.answer_round(&stream, &input, &message)
            }
            _ => vec![Delivery::Drop {
                reason: format!("port {port} answered server request {id}, which is not its own"),
            }],
        }
    }

    /// One answer of a legacy port to a modern upstream's input request; when all are in, the
    /// request goes upstream again with them.
    fn answer_round(&mut self, stream: &Key, input: &str, message: &RawMessage) -> Vec<Delivery> {
        let Some(round) = self.rounds.get_mut(stream) else {
            return Vec::new();
        };
        round.awaiting.remove(input);
        match message.member("result") {
            Some(result) => {
                let value = serde_json::from_str(result.get()).unwrap_or_default();
                round.responses.insert(input.to_owned(), value);
            }
            None => {
                // Input responses cannot carry errors: the call fails with the client's.
                let error = message.member("error").map(ToOwned::to_owned);
                let id = self
                    .requests
                    .get(&round.upstream)
                    .map(|p| p.original_id.clone());
                let upstream = round.upstream.clone();
                self.rounds.remove(stream);
                let _ = self.forget_request(&upstream);
                let answer = match (id, error) {
                    (Some(id), Some(error)) => RawMessage::parse(format!(
                        r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
                        id.get(),
                        error.get()
                    ))
                    .unwrap_or_else(|_| {
                        RawMessage::error_response(
                            None,
                            -32603,
                            "the client refused the app's request",
                        )
                    }),
                    _ => RawMessage::error_response(
                        None,
                        -32603,
                        "the client refused the app's request",
                    ),
                };
                return vec![Delivery::Request {
                    request: stream.clone(),
                    message: answer,
                    last: true,
                }];
            }
        }
        if !round.awaiting.is_empty() {
            return Vec::new();
        }
        let Some(round) = self.rounds.remove(stream) else {
            return Vec::new();
        };
        self.retry_upstream(stream, round)
    }

    /// Sends the request of `stream` upstream again with the round's answers, under a new id.
    fn retry_upstream(&mut self, stream: &Key, round: Round) -> Vec<Delivery> {
        let Some(mut pending) = self.requests.remove(&round.upstream) else {
            return Vec::new();
        };
        let Some(mut message) = pending.sent.clone() else {
            return Vec::new();
        };
        let (key, key_value, _) = self.new_key(pending.port);
        message.set_id(&key_value);
        let responses = serde_json::Value::Object(round.responses);
        let _ = message.set_path(
            &["params", "inputResponses"],
            &raw_json(responses.to_string()),
        );
        match &round.request_state {
            Some(state) => {
                let _ = message.set_path(&["params", "requestState"], state);
            }
            None => {
                message.remove_path(&["params", "requestState"]);
            }
        }
        pending.sent = Some(message.clone());
        if let Some(entry) = self.ports.get_mut(&pending.port) {
            for k in &mut entry.in_flight {
                if *k == round.upstream {
                    k.clone_from(&key);
                }
            }
        }
        if let Some(token) = &pending.token
            && let Some((request, _)) = self.tokens.get_mut(token)
        {
            request.clone_from(&key);
        }
        self.aliases.insert(stream.clone(), key.clone());
        self.requests.insert(key.clone(), pending);
        self.rounds_done.insert(stream.clone(), round.rounds);
        vec![Delivery::Upstream {
            message,
            request: Some(key),
        }]
    }

    /// A port's request was given up (timeout, or its client went away): forget it and tell
    /// the server. `stream` is the request's stream key.
    pub(crate) fn abandon(&mut self, stream: &Key, reason: &str) -> Vec<Delivery> {
        if let Some(listen) = self.listens.remove(stream) {
            let mut out = Vec::new();
            for uri in listen.uris {
                if let Some(parties) = self.subscriptions.get_mut(&uri) {
                    parties.remove(&Party::Port(listen.port));
                    if parties.is_empty() {
                        self.subscriptions.remove(&uri);
                        out.extend(self.unsubscribe_upstream(&uri));
                    }
                }
            }
            return out;
        }
        let current = self.current(stream);
        let Some(pending) = self.forget_request(&current) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(server_request) = &pending.held {
            // The server is still waiting for the modern client's input: it will not come.
            self.held.retain(|_, s| s != stream);
            self.held_requests.remove(server_request);
            self.server_requests.remove(server_request);
            out.push(Delivery::Upstream {
                message: RawMessage::error_response(
                    Some(&raw_json(server_request.clone())),
                    -32603,
                    &format!("the client did not answer: {reason}"),
                ),
                request: None,
            });
        }
        out.extend(self.end_stream_state(stream));
        self.rounds_done.remove(stream);
        out.push(cancelled(&current, reason));
        out
    }

    /// The upstream id a stream's request currently has.
    fn current(&self, stream: &Key) -> Key {
        self.aliases.get(stream).unwrap_or(stream).clone()
    }

    /// The original id of a port request (by its stream key), to build responses the port
    /// understands.
    pub(crate) fn original_id(&self, stream: &Key) -> Option<&RawValue> {
        self.requests
            .get(&self.current(stream))
            .map(|r| r.original_id.as_ref())
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
                    if matches!(method.as_deref(), Some("initialize" | "server/discover"))
                        && self.handshake_result.is_none()
                    {
                        self.rmcp_handshake = Some(key.clone());
                    }
                    if let Some(subscription) = method
                        .as_deref()
                        .filter(|m| matches!(*m, "resources/subscribe" | "resources/unsubscribe"))
                        && let Some(uri) = string_at(&message, &["params", "uri"])
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
                    && let Some(id) = message.path(&["params", "requestId"])
                {
                    self.rmcp_in_flight.remove(&key_of(id));
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
        if self.probes.remove(&key) {
            return vec![Delivery::Gateway { key, message }];
        }
        if self.upstream_era == Era::Modern
            && let Some(pending) = self.requests.get(&key)
            && !pending.modern_client
            && message.member("result").is_some_and(era::is_input_required)
        {
            return self.start_round(&key, &message);
        }
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
            if pending.modern_client && self.upstream_era == Era::Legacy {
                era::complete_result(&mut message, &pending.method);
            }
            self.restore_subscription_id(&mut message, &["result", "_meta"]);
            let stream = pending.stream.clone();
            let mut out = self.end_stream_state(&stream);
            self.rounds_done.remove(&stream);
            out.push(Delivery::Request {
                request: stream,
                message,
                last: true,
            });
            return out;
        }
        if self.rmcp_in_flight.remove(&key) {
            if self.rmcp_handshake.as_ref() == Some(&key)
                && let Some(result) = message.member("result")
            {
                self.handshake_result = Some(result.to_owned());
            }
            return vec![Delivery::Rmcp(message)];
        }
        vec![Delivery::Drop {
            reason: format!("a response to {key}, which nobody is waiting for"),
        }]
    }

    /// A modern upstream asked a legacy port's request for input: each input becomes a server
    /// request to the port on that request's stream.
    fn start_round(&mut self, key: &Key, message: &RawMessage) -> Vec<Delivery> {
        let Some(pending) = self.requests.get(key) else {
            return Vec::new();
        };
        let stream = pending.stream.clone();
        let port = pending.port;
        let result = message.member("result").map(ToOwned::to_owned);
        let Some(result) = result else {
            return Vec::new();
        };
        let done = self.rounds_done.get(&stream).copied().unwrap_or(0);
        let original_id = pending.original_id.clone();
        if done >= MAX_ROUNDS {
            let _ = self.forget_request(key);
            return vec![Delivery::Request {
                request: stream,
                message: RawMessage::error_response(
                    Some(&original_id),
                    -32603,
                    &format!("the app asked for input more than {MAX_ROUNDS} times in one call"),
                ),
                last: true,
            }];
        }
        let inputs = era::input_requests(&result);
        let state = serde_json::from_str::<serde_json::Value>(result.get())
            .ok()
            .and_then(|r| r.get("requestState").cloned())
            .map(|s| raw_json(s.to_string()));
        let capabilities = self
            .ports
            .get(&port)
            .map(|e| e.spec.capabilities)
            .unwrap_or_default();
        let mut out = Vec::new();
        let mut awaiting = BTreeSet::new();
        for (input, method, params) in inputs {
            if !capabilities.allows(&method) {
                let _ = self.forget_request(key);
                return vec![Delivery::Request {
                    request: stream,
                    message: RawMessage::error_response(
                        Some(&original_id),
                        -32603,
                        &format!(
                            "the app needs {method}, which this client session did not declare"
                        ),
                    ),
                    last: true,
                }];
            }
            self.next += 1;
            let id = format!("\"gwsr:{}\"", self.next);
            let mut request = serde_json::json!({"jsonrpc": "2.0", "id": serde_json::from_str::<serde_json::Value>(&id).unwrap_or_default(), "method": method});
            if let Some(params) = params {
                request["params"] = params;
            }
            let Ok(request) = RawMessage::from_value(&request) else {
                continue;
            };
            self.server_requests.insert(
                id.clone(),
                Owner::Round {
                    port,
                    stream: stream.clone(),
                    input: input.clone(),
                },
            );
            awaiting.insert(input);
            out.push(Delivery::Request {
                request: stream.clone(),
                message: request,
                last: false,
            });
        }
        let round = Round {
            upstream: key.clone(),
            awaiting,
            responses: serde_json::Map::new(),
            request_state: state,
            rounds: done + 1,
        };
        if round.awaiting.is_empty() {
            // Only a requestState: retry at once with it.
            out.extend(self.retry_upstream(&stream, round));
        } else {
            self.rounds.insert(stream, round);
        }
        out
    }

    /// Puts a port's own listen id back into a `subscriptionId` at `path` (a notification's
    /// `params._meta`, or a final listen result's `result._meta`).
    fn restore_subscription_id(&self, message: &mut RawMessage, path: &[&str]) -> Option<Key> {
        let mut full: Vec<&str> = path.to_vec();
        full.push(META_SUBSCRIPTION_ID);
        let id = message.path(&full).map(key_of)?;
        let pending = self.requests.get(&id)?;
        let original = pending.original_id.clone();
        let stream = pending.stream.clone();
        let _ = message.set_path(&full, &original);
        Some(stream)
    }

    fn upstream_notification(&mut self, mut message: RawMessage, origin: &Origin) -> Vec<Delivery> {
        let method = message.method().unwrap_or_default();
        // A notification of a port's `subscriptions/listen` (modern on modern).
        if let Some(stream) = self.restore_subscription_id(&mut message, &["params", "_meta"]) {
            return vec![Delivery::Request {
                request: stream,
                message,
                last: false,
            }];
        }
        match method.as_str() {
            "notifications/progress" => {
                let token = message.path(&["params", "progressToken"]).map(key_of);
                match token.and_then(|t| self.tokens.get(&t).cloned()) {
                    Some((request, original)) => {
                        if message
                            .set_path(&["params", "progressToken"], &original)
                            .is_err()
                        {
                            return Vec::new();
                        }
                        let stream = self
                            .requests
                            .get(&request)
                            .map_or(request, |p| p.stream.clone());
                        vec![Delivery::Request {
                            request: stream,
                            message,
                            last: false,
                        }]
                    }
                    None => vec![Delivery::Rmcp(message)],
                }
            }
            "notifications/cancelled" => {
                let id = message.path(&["params", "requestId"]).map(key_of);
                match id.and_then(|id| self.server_requests.remove(&id)) {
                    Some(Owner::Port { request, .. }) => {
                        let stream = self
                            .requests
                            .get(&request)
                            .map_or(request, |p| p.stream.clone());
                        vec![Delivery::Request {
                            request: stream,
                            message,
                            last: false,
                        }]
                    }
                    _ => vec![Delivery::Rmcp(message)],
                }
            }
            "notifications/message" => match origin {
                Origin::Post(key) if self.requests.contains_key(key) => {
                    let Some(pending) = self.requests.get(key) else {
                        return Vec::new();
                    };
                    // A modern client hears its request's log messages only at the level it
                    // asked for (a legacy upstream does not know that level).
                    if pending.modern_client && self.upstream_era == Era::Legacy {
                        let rank = string_at(&message, &["params", "level"])
                            .as_deref()
                            .and_then(level_rank);
                        let wanted = match (pending.log_level, rank) {
                            (Some(wanted), Some(rank)) => rank >= wanted,
                            (Some(_), None) => true,
                            (None, _) => false,
                        };
                        if !wanted {
                            return vec![Delivery::Drop {
                                reason: "a log message the client did not ask for".to_owned(),
                            }];
                        }
                    }
                    vec![Delivery::Request {
                        request: pending.stream.clone(),
                        message,
                        last: false,
                    }]
                }
                Origin::Post(key) if self.rmcp_in_flight.contains(key) => {
                    vec![Delivery::Rmcp(message)]
                }
                _ => {
                    let rank = string_at(&message, &["params", "level"])
                        .as_deref()
                        .and_then(level_rank);
                    self.broadcast_to(message, |entry| match (entry.level, rank) {
                        (Some(wanted), Some(rank)) => rank >= wanted,
                        _ => true,
                    })
                }
            },
            "notifications/resources/updated" => self.resource_updated(message),
            _ => {
                let mut out = self.to_listens(&message, &method);
                out.extend(self.broadcast(message));
                out
            }
        }
    }

    /// `resources/updated`: to the subscribers of its URI (ports, emulated listens, rmcp).
    fn resource_updated(&mut self, message: RawMessage) -> Vec<Delivery> {
        let Some(uri) = string_at(&message, &["params", "uri"]) else {
            return vec![Delivery::Rmcp(message)];
        };
        let Some(parties) = self.subscriptions.get(&uri) else {
            // Nobody here subscribed: only rmcp hears it (and ignores it).
            return vec![Delivery::Rmcp(message)];
        };
        let mut out = Vec::new();
        let mut rmcp = false;
        for party in parties {
            match party {
                Party::Rmcp => rmcp = true,
                Party::Port(port) => {
                    let listening: Vec<Key> = self
                        .listens
                        .iter()
                        .filter(|(_, l)| l.port == *port && l.uris.contains(&uri))
                        .map(|(k, _)| k.clone())
                        .collect();
                    if listening.is_empty() {
                        out.push(Delivery::Port {
                            port: *port,
                            message: message.clone(),
                        });
                    }
                    for stream in listening {
                        out.extend(self.listen_delivery(&stream, &message));
                    }
                }
            }
        }
        if rmcp {
            out.push(Delivery::Rmcp(message));
        }
        out
    }

    /// A list change to every emulated listen that asked for it.
    fn to_listens(&self, message: &RawMessage, method: &str) -> Vec<Delivery> {
        let streams: Vec<Key> = self
            .listens
            .iter()
            .filter(|(_, l)| match method {
                "notifications/tools/list_changed" => l.tools,
                "notifications/prompts/list_changed" => l.prompts,
                "notifications/resources/list_changed" => l.resources,
                _ => false,
            })
            .map(|(k, _)| k.clone())
            .collect();
        streams
            .iter()
            .flat_map(|s| self.listen_delivery(s, message))
            .collect()
    }

    /// `message` on an emulated listen's stream, tagged with its subscription id.
    fn listen_delivery(&self, stream: &Key, message: &RawMessage) -> Vec<Delivery> {
        let Some(listen) = self.listens.get(stream) else {
            return Vec::new();
        };
        let mut tagged = message.clone();
        if tagged
            .set_path(
                &["params", "_meta", META_SUBSCRIPTION_ID],
                &listen.original_id,
            )
            .is_err()
        {
            return Vec::new();
        }
        vec![Delivery::Request {
            request: stream.clone(),
            message: tagged,
            last: false,
        }]
    }

    fn broadcast(&self, message: RawMessage) -> Vec<Delivery> {
        self.broadcast_to(message, |_| true)
    }

    /// Every legacy port `wants` (in port order), then rmcp. Modern ports have no session
    /// stream; they hear what they listen for.
    fn broadcast_to(
        &self,
        message: RawMessage,
        wants: impl Fn(&PortEntry) -> bool,
    ) -> Vec<Delivery> {
        let mut ports: Vec<PortId> = self
            .ports
            .iter()
            .filter(|(_, entry)| entry.spec.era == Era::Legacy && wants(entry))
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
        // What rmcp answers, it answers for the request that caused it, when that is known.
        let rmcp_cause = match origin {
            Origin::Post(key) if self.rmcp_in_flight.contains(key) => Some(key.clone()),
            Origin::Stdio | Origin::Get if self.rmcp_in_flight.len() == 1 => {
                self.rmcp_in_flight.iter().next().cloned()
            }
            _ => None,
        };
        let mut message = message;
        if routed.is_err()
            && let Some(cause) = &rmcp_cause
        {
            let _ = message.set_path(
                &["params", "_meta", crate::elicit::CAUSE_META],
                &raw_string(cause),
            );
        }
        match routed {
            Ok((port, request)) if self.port_era(port) == Era::Modern => {
                self.hold_for_input(port, &request, id, &method, &message)
            }
            Ok((port, request)) => {
                let stream = self
                    .requests
                    .get(&request)
                    .map_or_else(|| request.clone(), |p| p.stream.clone());
                self.server_requests
                    .insert(id, Owner::Port { port, request });
                vec![Delivery::Request {
                    request: stream,
                    message,
                    last: false,
                }]
            }
            Err(None) => {
                self.server_requests.insert(id, Owner::Rmcp);
                vec![Delivery::Rmcp(message)]
            }
            // The gateway's own client answers pings and methods it may know better, and
            // anything while its own requests are in flight (they may be the cause).
            // `roots/list` is answered by it too: the gateway exposes no roots.
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

    fn port_era(&self, port: PortId) -> Era {
        self.ports.get(&port).map_or(Era::Legacy, |e| e.spec.era)
    }

    /// A legacy server asks a modern client's call for input: the call is held, and the client
    /// gets an input-required answer whose `requestState` names the held call.
    fn hold_for_input(
        &mut self,
        port: PortId,
        request: &Key,
        server_request: Key,
        method: &str,
        message: &RawMessage,
    ) -> Vec<Delivery> {
        let Some(pending) = self.requests.get_mut(request) else {
            return Vec::new();
        };
        let stream = pending.stream.clone();
        let original_id = pending.original_id.clone();
        pending.held = Some(server_request.clone());
        self.next += 1;
        let handle = handle(self.secret, self.next);
        self.held.insert(handle.clone(), stream.clone());
        let params = message.member("params").map(ToOwned::to_owned);
        self.held_requests
            .insert(server_request.clone(), (method.to_owned(), params.clone()));
        self.server_requests.insert(
            server_request,
            Owner::Held {
                stream: stream.clone(),
            },
        );
        // The client's exchange ends here; the held call belongs to no port until the retry.
        if let Some(entry) = self.ports.get_mut(&port) {
            entry.in_flight.retain(|k| k != request);
        }
        let answer = RawMessage::response(
            &original_id,
            &era::input_required("input", method, params.as_deref(), &handle),
        );
        vec![Delivery::Request {
            request: stream,
            message: answer,
            last: true,
        }]
    }

    fn allows(&self, port: PortId, method: &str) -> bool {
        self.ports
            .get(&port)
            .is_some_and(|entry| entry.spec.capabilities.allows(method))
    }

    /// Where the wire does not say what caused a server request: the one port with requests in
    /// flight that declared the capability (its newest request); none or several cannot be
    /// told apart.
    fn sole_capable_port(&self, method: &str) -> Result<(PortId, Key), String> {
        let mut candidates = self.ports.iter().filter(|(_, entry)| {
            !entry.in_flight.is_empty() && entry.spec.capabilities.allows(method)
        });
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

/// An unguessable handle for a held call (SipHash, keyed by the router's secret).
fn handle(secret: [u64; 2], n: u64) -> String {
    use std::hash::Hasher;
    let mut parts = [0u64; 2];
    for (i, part) in parts.iter_mut().enumerate() {
        #[allow(deprecated)]
        let mut hasher = std::hash::SipHasher::new_with_keys(secret[0], secret[1] ^ i as u64);
        hasher.write_u64(n);
        *part = hasher.finish();
    }
    format!("gw{:016x}{:016x}", parts[0], parts[1])
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

    fn legacy(capabilities: PortCapabilities) -> PortSpec {
        PortSpec {
            capabilities,
            ..PortSpec::default()
        }
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
        r.open_port(1, legacy(all_caps()));
        r.open_port(2, legacy(all_caps()));
        let (k1, d1) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":"same","method":"tools/call","params":{"_meta":{"progressToken":"tokA"}}}"#))
            .map(Accepted::into_parts).unwrap();
        let (k2, _) = r
            .port_request(
                2,
                msg(r#"{"jsonrpc":"2.0","id":"same","method":"tools/call"}"#),
            )
            .map(Accepted::into_parts)
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
            r.handshake_result().unwrap().get(),
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
        r.open_port(1, legacy(PortCapabilities::default()));
        r.open_port(2, legacy(PortCapabilities::default()));
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
        r.open_port(1, legacy(PortCapabilities::default()));
        r.open_port(2, legacy(PortCapabilities::default()));
        let (k, _) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call"}"#))
            .map(Accepted::into_parts)
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
        r.open_port(1, legacy(all_caps()));
        r.open_port(2, legacy(PortCapabilities::default()));
        let (k1, _) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .map(Accepted::into_parts)
            .unwrap();
        let (k2, _) = r
            .port_request(2, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .map(Accepted::into_parts)
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
            r.open_port(1, legacy(all_caps()));
            r.open_port(2, legacy(PortCapabilities::default()));
            let elicit = r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}"#;
            // Nobody busy: the gateway answers with the reason.
            let d = r.upstream(msg(elicit), &origin);
            assert!(
                upstream_text(&d)[0].contains("has a request in flight"),
                "{d:?}"
            );
            let (k1, _) = r
                .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
                .map(Accepted::into_parts)
                .unwrap();
            // A busy port that cannot answer does not count, and neither does rmcp being busy.
            r.port_request(2, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
                .map(Accepted::into_parts)
                .unwrap();
            r.rmcp_outgoing(msg(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#));
            let d = r.upstream(msg(&elicit.replace("7", "8")), &origin);
            assert!(
                matches!(&d[..], [Delivery::Request { request, .. }] if *request == k1),
                "{d:?}"
            );
            // Two capable busy ports cannot be told apart; rmcp, busy, answers.
            r.open_port(3, legacy(all_caps()));
            r.port_request(3, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
                .map(Accepted::into_parts)
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
            r.open_port(port, legacy(PortCapabilities::default()));
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
        let (_, d) = r
            .port_request(1, sub("a"))
            .map(Accepted::into_parts)
            .unwrap();
        assert_eq!(upstream_text(&d).len(), 1);
        let answered = r.port_request(2, sub("a")).unwrap_err();
        assert_eq!(answered.as_str(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        // Port 3 never subscribed and hears nothing.
        assert_eq!(ports_of(&r.upstream(updated.clone(), &Origin::Get)), [1, 2]);
        // One port leaving does not end the other's subscription.
        assert!(r.port_request(1, unsub("a")).is_err());
        assert_eq!(ports_of(&r.upstream(updated.clone(), &Origin::Get)), [2]);
        // The last one does, upstream.
        let (_, d) = r
            .port_request(2, unsub("a"))
            .map(Accepted::into_parts)
            .unwrap();
        assert!(upstream_text(&d)[0].contains("resources/unsubscribe"));
        assert!(ports_of(&r.upstream(updated, &Origin::Get)).is_empty());
        // A refused subscription is not counted.
        let (k, _) = r
            .port_request(3, sub("b"))
            .map(Accepted::into_parts)
            .unwrap();
        r.upstream(
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{k},"error":{{"code":-32602,"message":"no"}}}}"#
            )),
            &Origin::Stdio,
        );
        let (_, d) = r
            .port_request(1, sub("b"))
            .map(Accepted::into_parts)
            .unwrap();
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
        r.open_port(1, legacy(PortCapabilities::default()));
        r.open_port(2, legacy(PortCapabilities::default()));
        r.open_port(3, legacy(PortCapabilities::default()));
        let set = |level: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{{"level":"{level}"}}}}"#
            ))
        };
        // Port 1 wants errors: upstream is asked for errors.
        let (_, d) = r
            .port_request(1, set("error"))
            .map(Accepted::into_parts)
            .unwrap();
        assert!(upstream_text(&d)[0].contains(r#""level":"error""#));
        // Port 2 wants debug: more verbose, upstream again.
        let (_, d) = r
            .port_request(2, set("debug"))
            .map(Accepted::into_parts)
            .unwrap();
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
        r.open_port(1, legacy(all_caps()));
        let (k, _) = r
            .port_request(
                1,
                msg(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call"}"#),
            )
            .map(Accepted::into_parts)
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
            .map(Accepted::into_parts)
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
        r.open_port(1, legacy(all_caps()));
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
        r.open_port(1, legacy(all_caps()));
        let (k, d) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .map(Accepted::into_parts)
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

    fn modern_port(caps: PortCapabilities) -> PortSpec {
        PortSpec {
            era: Era::Modern,
            capabilities: caps,
            ..PortSpec::default()
        }
    }

    fn legacy_upstream_with_caps() -> Router {
        let mut r = Router::with_secret([1, 2]);
        r.rmcp_outgoing(msg(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
        ));
        r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}}"#),
            &Origin::Stdio,
        );
        r
    }

    fn last_request(d: &[Delivery]) -> (&Key, &RawMessage, bool) {
        d.iter()
            .find_map(|d| match d {
                Delivery::Request {
                    request,
                    message,
                    last,
                } => Some((request, message, *last)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no request delivery in {d:?}"))
    }

    #[test]
    fn a_modern_client_on_a_legacy_upstream_loses_its_meta_and_gets_complete_results() {
        let mut r = legacy_upstream_with_caps();
        r.open_port(1, modern_port(PortCapabilities::default()));
        let (k, d) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":"m1","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"x":1}}}"#))
            .map(Accepted::into_parts)
            .unwrap();
        assert_eq!(
            upstream_text(&d),
            [format!(
                r#"{{"jsonrpc":"2.0","id":{k},"method":"tools/list","params":{{"_meta":{{"x":1}}}}}}"#
            )]
        );
        let d = r.upstream(
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{k},"result":{{"tools":[]}}}}"#
            )),
            &Origin::Stdio,
        );
        let (_, message, last) = last_request(&d);
        assert!(last);
        assert_eq!(
            message.as_str(),
            r#"{"jsonrpc":"2.0","id":"m1","result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}}"#
        );
    }

    #[test]
    fn a_legacy_servers_request_becomes_an_input_required_round_for_a_modern_client() {
        let mut r = legacy_upstream_with_caps();
        r.open_port(1, modern_port(all_caps()));
        let (k, _) = r
            .port_request(
                1,
                msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}"#),
            )
            .map(Accepted::into_parts)
            .unwrap();
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":50,"method":"elicitation/create","params":{"mode":"form","message":"name?","requestedSchema":{}}}"#),
            &Origin::Post(k.clone()),
        );
        let (stream, answer, last) = last_request(&d);
        assert_eq!(stream, &k);
        assert!(last, "the client's exchange ends with the input request");
        let answer: serde_json::Value = serde_json::from_str(answer.as_str()).unwrap();
        assert_eq!(answer["id"], 1);
        assert_eq!(answer["result"]["resultType"], "input_required");
        assert_eq!(
            answer["result"]["inputRequests"]["input"]["method"],
            "elicitation/create"
        );
        let state = answer["result"]["requestState"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(state.len() >= 32, "an unguessable handle: {state}");
        // The client's port goes with its exchange; the held call is not cancelled.
        let d = r.close_port(1, "exchange over");
        assert!(upstream_text(&d).is_empty(), "{d:?}");
        // A retry with a wrong state is refused; the right one answers the server.
        r.open_port(2, modern_port(all_caps()));
        let wrong = r
            .port_request(2, msg(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","requestState":"forged"}}"#))
            .unwrap_err();
        assert!(
            wrong.as_str().contains("requestState names no call"),
            "{}",
            wrong.as_str()
        );
        let retry = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"ask","requestState":"{state}","inputResponses":{{"input":{{"action":"accept","content":{{"n":1}}}}}}}}}}"#
        );
        let (stream2, d) = r
            .port_request(2, msg(&retry))
            .map(Accepted::into_parts)
            .unwrap();
        assert_eq!(stream2, k);
        assert_eq!(
            upstream_text(&d),
            [r#"{"jsonrpc":"2.0","id":50,"result":{"action":"accept","content":{"n":1}}}"#]
        );
        // The call's final answer goes to the retry, under its id.
        let d = r.upstream(
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{k},"result":{{"content":[]}}}}"#
            )),
            &Origin::Stdio,
        );
        let (stream, message, last) = last_request(&d);
        assert_eq!(stream, &k);
        assert!(last);
        assert!(
            message.as_str().starts_with(r#"{"jsonrpc":"2.0","id":3,"#),
            "{}",
            message.as_str()
        );
        // The state is spent.
        assert!(r.port_request(2, msg(&retry)).is_err());
    }

    #[test]
    fn listens_of_modern_clients_on_a_legacy_upstream_are_served_from_the_session() {
        let mut r = legacy_upstream_with_caps();
        r.open_port(1, modern_port(PortCapabilities::default()));
        let taken = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["a://x"]}}}"#))
            .unwrap();
        assert!(!taken.bounded, "a listen lasts");
        let stream = taken.stream.clone();
        let ack = taken
            .deliveries
            .iter()
            .find_map(|d| match d {
                Delivery::Request { message, .. } => Some(message.as_str().to_owned()),
                _ => None,
            })
            .unwrap();
        // Prompts cannot change on this app: the ack leaves them out.
        assert!(
            ack.contains(
                r#""notifications":{"toolsListChanged":true,"resourceSubscriptions":["a://x"]}"#
            ),
            "{ack}"
        );
        assert!(
            ack.contains(r#""io.modelcontextprotocol/subscriptionId":"L""#),
            "{ack}"
        );
        assert!(upstream_text(&taken.deliveries)[0].contains("resources/subscribe"));
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            &Origin::Stdio,
        );
        let (to, message, last) = last_request(&d);
        assert_eq!(to, &stream);
        assert!(!last);
        assert!(
            message
                .as_str()
                .contains(r#""io.modelcontextprotocol/subscriptionId":"L""#)
        );
        let d = r.upstream(msg(r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://x"}}"#), &Origin::Stdio);
        assert_eq!(last_request(&d).0, &stream);
        // The client closes its stream: the subscription ends upstream too.
        let d = r.abandon(&stream, "gone");
        assert!(
            upstream_text(&d)[0].contains("resources/unsubscribe"),
            "{d:?}"
        );
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            &Origin::Stdio,
        );
        assert!(d.iter().all(|d| !matches!(d, Delivery::Request { .. })));
    }

    #[test]
    fn a_legacy_client_on_a_modern_upstream_speaks_for_itself_and_answers_input_rounds() {
        let mut r = Router::with_secret([3, 4]);
        r.set_upstream_era(Era::Modern);
        r.open_port(
            1,
            PortSpec {
                era: Era::Legacy,
                capabilities: all_caps(),
                client_capabilities: Some(raw_json(r#"{"elicitation":{}}"#.to_owned())),
                client_info: Some(raw_json(r#"{"name":"b","version":"1"}"#.to_owned())),
            },
        );
        // setLevel is kept here and sent with every later request.
        let answered = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":9,"method":"logging/setLevel","params":{"level":"info"}}"#))
            .unwrap_err();
        assert_eq!(answered.as_str(), r#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
        let (k, d) = r
            .port_request(
                1,
                msg(r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"ask"}}"#),
            )
            .map(Accepted::into_parts)
            .unwrap();
        let sent: serde_json::Value = serde_json::from_str(&upstream_text(&d)[0]).unwrap();
        let meta = &sent["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            serde_json::json!({"elicitation": {}})
        );
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "b");
        assert_eq!(meta["io.modelcontextprotocol/logLevel"], "info");
        // The app asks for input: the port gets a server request on its call's stream.
        let d = r.upstream(
            msg(&format!(r#"{{"jsonrpc":"2.0","id":{k},"result":{{"resultType":"input_required","inputRequests":{{"f":{{"method":"elicitation/create","params":{{"message":"m"}}}}}},"requestState":"s1"}}}}"#)),
            &Origin::Stdio,
        );
        let (stream, asked, last) = last_request(&d);
        assert_eq!(stream, &k);
        assert!(!last);
        let asked: serde_json::Value = serde_json::from_str(asked.as_str()).unwrap();
        assert_eq!(asked["method"], "elicitation/create");
        let asked_id = asked["id"].to_string();
        // Its answer goes back up as the retry, under a new id, with the state.
        let d = r.port_response(
            1,
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{asked_id},"result":{{"action":"accept"}}}}"#
            )),
        );
        let retry: serde_json::Value = serde_json::from_str(&upstream_text(&d)[0]).unwrap();
        assert_ne!(retry["id"].to_string(), k);
        assert_eq!(
            retry["params"]["inputResponses"],
            serde_json::json!({"f": {"action": "accept"}})
        );
        assert_eq!(retry["params"]["requestState"], "s1");
        assert_eq!(retry["params"]["name"], "ask");
        let retry_id = retry["id"].to_string();
        let d = r.upstream(
            msg(&format!(r#"{{"jsonrpc":"2.0","id":{retry_id},"result":{{"resultType":"complete","content":[]}}}}"#)),
            &Origin::Stdio,
        );
        let (stream, message, last) = last_request(&d);
        assert_eq!(
            stream, &k,
            "the answer reaches the original request's stream"
        );
        assert!(last);
        assert!(
            message
                .as_str()
                .starts_with(r#"{"jsonrpc":"2.0","id":"c","#),
            "{}",
            message.as_str()
        );
    }

    #[test]
    fn a_legacy_clients_subscription_becomes_a_listen_on_a_modern_upstream() {
        let mut r = Router::with_secret([5, 6]);
        r.set_upstream_era(Era::Modern);
        r.open_port(1, legacy(PortCapabilities::default()));
        let answered = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"a://x"}}"#))
            .unwrap_err();
        assert_eq!(answered.as_str(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        let pending = r.take_pending();
        let listen = upstream_text(&pending);
        assert!(
            listen[0].contains(r#""method":"subscriptions/listen""#) && listen[0].contains("a://x"),
            "{listen:?}"
        );
        assert!(
            listen[0].contains("io.modelcontextprotocol/protocolVersion"),
            "{listen:?}"
        );
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://x"}}"#),
            &Origin::Stdio,
        );
        assert!(matches!(&d[..], [Delivery::Port { port: 1, .. }]), "{d:?}");
        r.port_request(1, msg(r#"{"jsonrpc":"2.0","id":2,"method":"resources/unsubscribe","params":{"uri":"a://x"}}"#))
            .unwrap_err();
        let cancel = upstream_text(&r.take_pending());
        assert!(cancel[0].contains("notifications/cancelled"), "{cancel:?}");
    }

    #[test]
    fn listen_notifications_of_a_modern_upstream_reach_their_listener_with_its_id() {
        let mut r = Router::with_secret([7, 8]);
        r.set_upstream_era(Era::Modern);
        r.open_port(1, modern_port(PortCapabilities::default()));
        let taken = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":"mine","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#))
            .unwrap();
        assert!(!taken.bounded);
        let k = taken.stream;
        let d = r.upstream(
            msg(&format!(r#"{{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":{k}}}}}}}"#)),
            &Origin::Post(k.clone()),
        );
        let (to, message, _) = last_request(&d);
        assert_eq!(to, &k);
        assert!(
            message
                .as_str()
                .contains(r#""io.modelcontextprotocol/subscriptionId":"mine""#),
            "{}",
            message.as_str()
        );
    }
}
