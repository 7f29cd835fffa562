//! The router driven as the hub drives it, with every delivery checked against the model as
//! it is carried out. A broken promise is an `Err` naming the property it breaks:
//! - *once*: a client request gets at most one final answer;
//! - *isolation*: what belongs to one request or session reaches no other;
//! - *progress*: progress goes to its token's owner, with the client's token;
//! - *server requests*: every server-to-client request is answered at most once, by a party
//!   that may;
//! - *orphan*: no request stays pending upstream once nobody waits for it;
//! - *forgotten*: a closed port's requests are forgotten at once;
//! - *completeness*: what a party is owed (an update, a list change) reaches it;
//! - *well-formed*: a final answer is a JSON-RPC response (a result or an error);
//! - *eras*: a legacy server never sees the modern `_meta`, a modern one always does;
//! - *settled* (checked at the end): tables empty, nothing pending anywhere.

use std::collections::{BTreeMap, HashMap};

use mcpapp_manifest::Era;

use super::model::{Exchange, Held, PortModel, Rmcp, Seen, Server, Upstream, port_of, same_json};
use crate::raw::{MessageKind, RawMessage};
use crate::router::ids::{Key, PortId, key_of};
use crate::router::{Delivery, Router};

pub(super) type Outcome = Result<(), String>;

/// The session under test and everything the model knows about it.
#[derive(Debug)]
pub(super) struct World {
    pub(super) router: Router,
    /// Restarts so far: stream keys and ports are per upstream session.
    pub(super) generation: u32,
    pub(super) era: Era,
    pub(super) ports: BTreeMap<PortId, PortModel>,
    pub(super) next_port: PortId,
    pub(super) exchanges: Vec<Exchange>,
    /// Stream key → the exchange using it now (a held call's retry takes its stream over).
    pub(super) streams: HashMap<(u32, Key), usize>,
    /// Upstream id → the exchange it serves.
    pub(super) owners: HashMap<(u32, Key), usize>,
    pub(super) server: Server,
    pub(super) seen: Vec<Seen>,
    pub(super) held: Vec<Held>,
    pub(super) rmcp: Rmcp,
    /// Deliveries to legacy ports during the current step.
    pub(super) port_deliveries: Vec<(PortId, RawMessage)>,
    /// Exchanges that got something non-final during the current step.
    pub(super) stream_deliveries: Vec<(usize, RawMessage)>,
}

fn text_at(message: &RawMessage, path: &[&str]) -> Option<String> {
    message.path(path).map(|v| v.get().to_owned())
}

fn string_at(message: &RawMessage, path: &[&str]) -> Option<String> {
    message
        .path(path)
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

impl World {
    pub(super) fn new(modern: bool) -> Result<Self, String> {
        let mut world = Self {
            router: Router::default(),
            generation: 0,
            era: Era::Legacy,
            ports: BTreeMap::new(),
            next_port: 1,
            exchanges: Vec::new(),
            streams: HashMap::new(),
            owners: HashMap::new(),
            server: Server::default(),
            seen: Vec::new(),
            held: Vec::new(),
            rmcp: Rmcp::default(),
            port_deliveries: Vec::new(),
            stream_deliveries: Vec::new(),
        };
        world.start_session(modern)?;
        Ok(world)
    }

    /// A new upstream session: a fresh router, server and rmcp client, and the handshake.
    pub(super) fn start_session(&mut self, modern: bool) -> Outcome {
        let secret = u64::from(self.generation);
        self.router = Router::with_secret([secret, 7]);
        self.era = if modern { Era::Modern } else { Era::Legacy };
        self.server = Server::default();
        self.rmcp = Rmcp::default();
        self.next_port = 1;
        let method = if modern {
            self.router.set_upstream_era(Era::Modern);
            "server/discover"
        } else {
            "initialize"
        };
        let hello = RawMessage::parse(format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"{method}","params":{{}}}}"#
        ))
        .map_err(|e| e.to_string())?;
        self.rmcp.in_flight.insert("0".to_owned());
        let d = self.router.rmcp_outgoing(hello);
        self.apply(d)?;
        self.server.pending.remove("0");
        let answer = RawMessage::parse(
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"prompts":{},"resources":{"subscribe":true,"listChanged":true}}}}"#,
        )
        .map_err(|e| e.to_string())?;
        let d = self.router.upstream(answer, &crate::router::Origin::Stdio);
        self.apply(d)
    }

    /// Carries out what the router decided, checking each delivery.
    pub(super) fn apply(&mut self, deliveries: Vec<Delivery>) -> Outcome {
        for delivery in deliveries {
            match delivery {
                Delivery::Upstream { message, request } => {
                    self.server_gets(&message, request.as_ref())?;
                }
                Delivery::Rmcp(message) => self.rmcp_gets(&message)?,
                Delivery::Request {
                    request,
                    message,
                    last,
                } => self.stream_gets(&request, message, last)?,
                Delivery::Port { port, message } => self.port_gets(port, message)?,
                Delivery::Gateway { key, .. } => {
                    return Err(format!("isolation: a probe answer for {key}, never probed"));
                }
                Delivery::Drop { .. } => {}
            }
        }
        Ok(())
    }

    fn server_gets(&mut self, message: &RawMessage, request: Option<&Key>) -> Outcome {
        let id = message.id().map(key_of);
        match message.kind() {
            MessageKind::Request => {
                let Some(key) = id else {
                    return Err("isolation: a request without an id went upstream".to_owned());
                };
                if request != Some(&key) {
                    return Err(format!(
                        "isolation: request {key} went upstream tagged {request:?}"
                    ));
                }
                self.server_receives(key, message)
            }
            MessageKind::Notification => {
                if message.method().as_deref() == Some("notifications/cancelled")
                    && let Some(id) = message.path(&["params", "requestId"])
                {
                    self.server.pending.remove(&key_of(id));
                }
                Ok(())
            }
            MessageKind::Response | MessageKind::Error => {
                let key = id.unwrap_or_default();
                match self.server.asks.get_mut(&key) {
                    None => Err(format!(
                        "server requests: an answer to {key}, which the server never asked"
                    )),
                    Some(ask) if ask.answered => {
                        Err(format!("server requests: {key} answered twice"))
                    }
                    Some(ask) => {
                        ask.answered = true;
                        Ok(())
                    }
                }
            }
        }
    }

    fn server_receives(&mut self, key: Key, message: &RawMessage) -> Outcome {
        if self.server.pending.contains_key(&key) {
            return Err(format!("isolation: two requests upstream under {key}"));
        }
        let exchange = text_at(message, &["params", "x-exchange"]).and_then(|n| n.parse().ok());
        if let Some(n) = exchange {
            let e: &Exchange = &self.exchanges[n];
            if e.generation != self.generation || port_of(&key) != Some(e.port) {
                return Err(format!(
                    "isolation: exchange #{n} of port {} went upstream as {key}",
                    e.port
                ));
            }
            self.owners.insert((self.generation, key.clone()), n);
        }
        let meta = ["params", "_meta", "io.modelcontextprotocol/protocolVersion"];
        let modern_meta = message.path(&meta).is_some();
        if key.starts_with("\"gw") && modern_meta != (self.era == Era::Modern) {
            return Err(format!(
                "eras: {key} reached a {:?} server with modern _meta {modern_meta}",
                self.era
            ));
        }
        let uri = string_at(message, &["params", "uri"]).or_else(|| {
            message
                .path(&["params", "notifications", "resourceSubscriptions"])
                .and_then(|v| serde_json::from_str::<Vec<String>>(v.get()).ok())
                .and_then(|uris| uris.into_iter().next())
        });
        if self.era == Era::Legacy
            && let Some(uri) = &uri
        {
            // The server takes requests in order: it subscribes until it says no, and
            // honours an unsubscription whatever it answers.
            match message.method().as_deref() {
                Some("resources/subscribe") => {
                    self.server.subs.insert(uri.clone());
                }
                Some("resources/unsubscribe") => {
                    self.server.subs.remove(uri);
                }
                _ => {}
            }
        }
        let upstream = Upstream {
            exchange,
            method: message.method().unwrap_or_default(),
            token: text_at(message, &["params", "_meta", "progressToken"]),
            uri,
        };
        self.server.pending.insert(key, upstream);
        Ok(())
    }

    fn rmcp_gets(&mut self, message: &RawMessage) -> Outcome {
        let id = message.id().map(key_of);
        match message.kind() {
            MessageKind::Response | MessageKind::Error => {
                let key = id.unwrap_or_default();
                if !self.rmcp.in_flight.remove(&key) {
                    return Err(format!(
                        "isolation: rmcp got an answer to {key}, not its own"
                    ));
                }
            }
            MessageKind::Request => {
                let key = id.unwrap_or_default();
                if !self.server.asks.contains_key(&key) {
                    return Err(format!("server requests: rmcp asked {key}, never asked"));
                }
                self.rmcp.asks.push((key, false));
            }
            MessageKind::Notification => {
                if message.method().as_deref() == Some("notifications/progress")
                    && let Some(token) = text_at(message, &["params", "progressToken"])
                    && let Some((key, _)) = self.server.pending.iter().find(|(key, p)| {
                        p.token.as_ref() == Some(&token)
                            && self.owner_of(key).is_some_and(|n| {
                                let e = &self.exchanges[n];
                                e.waiting && e.hub_open && e.token.is_some()
                            })
                    })
                {
                    return Err(format!(
                        "progress: progress of {key}, whose client waits, went to rmcp"
                    ));
                }
            }
        }
        Ok(())
    }

    fn port_gets(&mut self, port: PortId, message: RawMessage) -> Outcome {
        let Some(model) = self.ports.get(&port) else {
            return Err(format!(
                "isolation: a session notification for port {port}, which is closed"
            ));
        };
        if model.era != Era::Legacy {
            return Err(format!(
                "isolation: a session notification for modern port {port}"
            ));
        }
        if message.method().as_deref() == Some("notifications/resources/updated")
            && let Some(uri) = string_at(&message, &["params", "uri"])
            && !model.subs.contains(&uri)
        {
            return Err(format!(
                "isolation: an update of {uri} for port {port}, which is not subscribed"
            ));
        }
        self.port_deliveries.push((port, message));
        Ok(())
    }

    /// The exchange whose `for` marker (the upstream id the server answered) is at `path`,
    /// checked to be `n`.
    fn check_for(&self, n: usize, message: &RawMessage, path: &[&str], what: &str) -> Outcome {
        let Some(upstream) = message.path(path).map(key_of) else {
            return Ok(());
        };
        match self.owners.get(&(self.generation, upstream.clone())) {
            Some(owner) if *owner == n => Ok(()),
            owner => Err(format!(
                "isolation: {what} of {upstream} (exchange {owner:?}) went to exchange #{n}"
            )),
        }
    }

    fn stream_gets(&mut self, stream: &Key, message: RawMessage, last: bool) -> Outcome {
        let Some(&n) = self.streams.get(&(self.generation, stream.clone())) else {
            return Err(format!(
                "isolation: a delivery to stream {stream}, which nobody has"
            ));
        };
        if !self.exchanges[n].hub_open {
            let from_server = message.path(&["result", "for"]).is_some()
                || message.path(&["error", "data", "for"]).is_some();
            if last
                && from_server
                && let Some(held) = self
                    .held
                    .iter_mut()
                    .find(|h| !h.resolved && h.exchange == n)
            {
                // A held call ended before its client came back: nobody gets its answer.
                held.resolved = true;
                return Ok(());
            }
            if last {
                return Err(format!(
                    "once: exchange #{n} was answered again after its stream ended: {}",
                    message.as_str()
                ));
            }
            // The hub drops it: its caller has gone.
            return Ok(());
        }
        if last {
            return self.final_answer(n, &message);
        }
        self.check_for(n, &message, &["params", "for"], "a message")?;
        let e = &self.exchanges[n];
        match message.method().as_deref() {
            Some("notifications/progress") => {
                let token = text_at(&message, &["params", "progressToken"]);
                if token.is_none() || token != e.token {
                    return Err(format!(
                        "progress: exchange #{n} (token {:?}) got progress with token {token:?}",
                        e.token
                    ));
                }
            }
            Some(method) if message.kind() == MessageKind::Request => {
                let id = message.id().map(key_of).unwrap_or_default();
                self.check_ask(n, &id, method)?;
                let port = self.exchanges[n].port;
                self.seen.push(Seen {
                    generation: self.generation,
                    port,
                    id,
                    answered: false,
                });
            }
            _ => {
                let sub = "io.modelcontextprotocol/subscriptionId";
                if let Some(id) = text_at(&message, &["params", "_meta", sub])
                    && !same_json(&id, &e.id)
                {
                    return Err(format!(
                        "isolation: exchange #{n} (id {}) got a listen notification for {id}",
                        e.id
                    ));
                }
            }
        }
        self.stream_deliveries.push((n, message));
        Ok(())
    }

    /// A server request routed to exchange `n`'s stream.
    fn check_ask(&self, n: usize, id: &Key, method: &str) -> Outcome {
        let e = &self.exchanges[n];
        if id.starts_with("\"gwsr:") {
            // One the router made up for an input round of this very call.
            return Ok(());
        }
        let Some(ask) = self.server.asks.get(id) else {
            return Err(format!(
                "server requests: exchange #{n} got {id}, never asked"
            ));
        };
        if let Some(cause) = &ask.cause
            && self.owners.get(&(self.generation, cause.clone())) != Some(&n)
        {
            return Err(format!(
                "isolation: {method} {id} caused by {cause} went to exchange #{n}"
            ));
        }
        let caps = self.ports.get(&e.port).map(|p| p.caps).unwrap_or_default();
        if !caps.allows(method) {
            return Err(format!(
                "server requests: {method} {id} went to port {}, which did not declare it",
                e.port
            ));
        }
        Ok(())
    }

    fn final_answer(&mut self, n: usize, message: &RawMessage) -> Outcome {
        if !message.is_response() {
            return Err(format!(
                "once: exchange #{n} ended with a non-response: {}",
                message.as_str()
            ));
        }
        if message.member("result").is_some() == message.member("error").is_some() {
            return Err(format!(
                "well-formed: exchange #{n} got an answer with both or neither of result and error: {}",
                message.as_str()
            ));
        }
        let id = message.id().map(|i| i.get().to_owned()).unwrap_or_default();
        if !same_json(&id, &self.exchanges[n].id) {
            return Err(format!(
                "isolation: exchange #{n} (id {}) got the answer to {id}: {}",
                self.exchanges[n].id,
                message.as_str()
            ));
        }
        self.check_for(n, message, &["result", "for"], "the answer")?;
        self.check_for(n, message, &["error", "data", "for"], "the error")?;
        let e = &mut self.exchanges[n];
        e.hub_open = false;
        e.waiting = false;
        e.finals += 1;
        let (port, stream, modern) = (e.port, e.stream.clone(), e.modern);
        if message.kind() == MessageKind::Error && e.method == "resources/subscribe" {
            // A refused subscription is not counted.
            if let (Some(uri), Some(model)) = (e.uri.clone(), self.ports.get_mut(&port)) {
                model.subs.remove(&uri);
            }
        }
        let input_required =
            string_at(message, &["result", "resultType"]).as_deref() == Some("input_required");
        if input_required && modern && self.era == Era::Legacy {
            let handle = string_at(message, &["result", "requestState"]).unwrap_or_default();
            let caps = self.ports.get(&port).map(|p| p.caps).unwrap_or_default();
            let method = self.exchanges[n].method.clone();
            self.held.push(Held {
                generation: self.generation,
                stream,
                exchange: n,
                handle,
                method,
                caps,
                resolved: false,
            });
        }
        Ok(())
    }

    /// The exchange the pending upstream request `key` now serves (a held call's retry takes
    /// it over).
    pub(super) fn owner_of(&self, key: &Key) -> Option<usize> {
        self.server.pending.get(key)?.exchange?;
        self.owners.get(&(self.generation, key.clone())).copied()
    }

    /// *orphan*: every request pending upstream has someone waiting for it (its client, a
    /// held call's future retry, rmcp), or is the gateway's own.
    pub(super) fn check_orphans(&self) -> Outcome {
        for (key, upstream) in &self.server.pending {
            let alive = match self.owner_of(key) {
                Some(n) => {
                    self.exchanges[n].waiting
                        || self.held.iter().any(|h| !h.resolved && h.exchange == n)
                }
                None if key.starts_with("\"gw:0:") => true,
                None => self.rmcp.in_flight.contains(key),
            };
            if !alive {
                return Err(format!(
                    "orphan: {key} ({}, exchange {:?}) is pending upstream with nobody waiting",
                    upstream.method, upstream.exchange
                ));
            }
        }
        Ok(())
    }
}
