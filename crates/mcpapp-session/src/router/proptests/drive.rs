//! The steps: each [`Op`] done to the router as the hub would do it, what it owes checked
//! right after; and the settling at the end of a case, after which nothing may be left.

use std::collections::BTreeSet;

use mcpapp_manifest::Era;
use proptest::sample::Index;
use serde_json::{Value, json};

use super::model::{Exchange, ListenHere, PortModel, same_json};
use super::ops::{Kind, Note, Op, Outcome as Answer, Pick};
use super::world::{Outcome, World};
use crate::raw::{RawMessage, raw_json};
use crate::router::ids::{Key, PortId, key_of};
use crate::router::ports::{PortCapabilities, PortSpec};
use crate::router::{Delivery, Origin};

const URIS: [&str; 3] = ["a://one", "a://two", "b://three"];
const LEVELS: [&str; 4] = ["debug", "info", "warning", "error"];
const ASKS: [&str; 4] = [
    "elicitation/create",
    "sampling/createMessage",
    "roots/list",
    "ping",
];

fn parse(value: &Value) -> Result<RawMessage, String> {
    RawMessage::from_value(value).map_err(|e| e.to_string())
}

fn parse_text(text: String) -> Result<RawMessage, String> {
    RawMessage::parse(text).map_err(|e| e.to_string())
}

fn caps_of(bits: u8) -> PortCapabilities {
    PortCapabilities {
        elicitation: bits & 1 != 0,
        sampling: bits & 2 != 0,
        roots: bits & 4 != 0,
    }
}

fn caps_json(caps: PortCapabilities) -> Value {
    let mut declared = serde_json::Map::new();
    for (name, on) in [
        ("elicitation", caps.elicitation),
        ("sampling", caps.sampling),
        ("roots", caps.roots),
    ] {
        if on {
            declared.insert(name.to_owned(), json!({}));
        }
    }
    Value::Object(declared)
}

/// The one of `len` things `index` picks, if there are any.
fn choose(index: &Index, len: usize) -> Option<usize> {
    (len > 0).then(|| index.index(len))
}

/// What a client request is made of.
struct Request {
    method: &'static str,
    params: serde_json::Map<String, Value>,
    uri: Option<String>,
    listen_here: Option<ListenHere>,
}

impl World {
    /// Does one step and checks that no request is left without a caller.
    pub(super) fn step(&mut self, op: &Op) -> Outcome {
        self.port_deliveries.clear();
        self.stream_deliveries.clear();
        match op {
            Op::Open { modern, caps } => {
                self.open_port(*modern, caps_of(*caps));
                Ok(())
            }
            Op::Close(index) => match choose(index, self.ports.len()) {
                Some(i) => {
                    let port = *self.ports.keys().nth(i).unwrap_or(&0);
                    self.close(port)
                }
                None => Ok(()),
            },
            Op::Request { port, kind, token } => self.request(port, kind, *token),
            Op::Abandon(index) => self.give_up(index, false),
            Op::Timeout(index) => self.give_up(index, true),
            Op::ClientCancel(index) => self.client_cancel(index),
            Op::Respond { request, outcome } => {
                let keys: Vec<Key> = self.server.pending.keys().cloned().collect();
                match choose(request, keys.len()) {
                    Some(i) => self.respond(&keys[i], outcome),
                    None => Ok(()),
                }
            }
            Op::Progress { request, on_stream } => self.progress(request, *on_stream),
            Op::Notify {
                note,
                origin,
                listen,
            } => self.notify(note, origin, listen.as_ref()),
            Op::Ask { method, origin } => self.ask(ASKS[usize::from(*method) % 4], origin),
            Op::Answer {
                ask,
                error,
                impostor,
            } => self.answer(ask, *error, impostor.as_ref()),
            Op::Retry { held, with_input } => {
                let open: Vec<usize> = self.unresolved_held();
                match choose(held, open.len()) {
                    Some(i) => self.retry(open[i], *with_input),
                    None => Ok(()),
                }
            }
            Op::RmcpCall => self.rmcp_call(),
            Op::RmcpCancel(index) => self.rmcp_cancel(index),
            Op::RmcpAnswer(index) => {
                let open: Vec<usize> = (0..self.rmcp.asks.len())
                    .filter(|i| !self.rmcp.asks[*i].1)
                    .collect();
                match choose(index, open.len()) {
                    Some(i) => self.rmcp_answer(open[i]),
                    None => Ok(()),
                }
            }
            Op::Restart { modern } => self.restart(*modern),
        }?;
        self.check_orphans()
    }

    fn open_port(&mut self, modern: bool, caps: PortCapabilities) -> PortId {
        let port = self.next_port;
        self.next_port += 1;
        let era = if modern { Era::Modern } else { Era::Legacy };
        let client_info = format!(r#"{{"name":"client{port}","version":"1"}}"#);
        let spec = PortSpec {
            era,
            capabilities: caps,
            client_capabilities: Some(raw_json(caps_json(caps).to_string())),
            client_info: (!modern).then(|| raw_json(client_info)),
        };
        self.router.open_port(port, spec);
        self.ports.insert(port, PortModel::new(era, caps));
        port
    }

    pub(super) fn close(&mut self, port: PortId) -> Outcome {
        self.ports.remove(&port);
        let generation = self.generation;
        let mut streams = Vec::new();
        for (n, e) in self.exchanges.iter_mut().enumerate() {
            if e.generation == generation && e.port == port {
                e.waiting = false;
                if e.hub_open && self.streams.get(&(generation, e.stream.clone())) == Some(&n) {
                    streams.push((n, e.stream.clone()));
                }
            }
        }
        for s in &mut self.seen {
            if s.generation == generation && s.port == port {
                s.answered = true;
            }
        }
        let d = self.router.close_port(port, "the client's session ended");
        for (n, stream) in streams {
            if self.router.original_id(&stream).is_some() {
                return Err(format!(
                    "forgotten: exchange #{n} of closed port {port} is still known on {stream}"
                ));
            }
        }
        self.apply(d)
    }

    fn request(&mut self, index: &Index, kind: &Kind, token: bool) -> Outcome {
        let Some(i) = choose(index, self.ports.len()) else {
            return Ok(());
        };
        let mut port = *self.ports.keys().nth(i).unwrap_or(&0);
        if let Some(model) = self.ports.get(&port)
            && model.era == Era::Modern
            && model.used
        {
            // The host opens a port for each modern request.
            let caps = model.caps;
            port = self.open_port(true, caps);
        }
        let request = self.build(port, kind);
        self.send(port, request, token, None).map(|_| ())
    }

    /// What `kind` is on `port` (a legacy port subscribes, a modern one listens).
    fn build(&self, port: PortId, kind: &Kind) -> Request {
        let modern = self.ports.get(&port).is_some_and(|m| m.era == Era::Modern);
        let mut request = Request {
            method: "tools/call",
            params: serde_json::Map::new(),
            uri: None,
            listen_here: None,
        };
        request.params.insert("name".to_owned(), json!("t"));
        let uri = |u: &u8| URIS[usize::from(*u) % URIS.len()].to_owned();
        match (kind, modern) {
            (Kind::List, _) => request.method = "tools/list",
            (Kind::Subscribe(u), false) => {
                request.method = "resources/subscribe";
                request.uri = Some(uri(u));
            }
            (Kind::Unsubscribe(u), false) => {
                request.method = "resources/unsubscribe";
                request.uri = Some(uri(u));
            }
            (Kind::SetLevel(l), false) => {
                request.method = "logging/setLevel";
                request.params.insert(
                    "level".to_owned(),
                    json!(LEVELS[usize::from(*l) % LEVELS.len()]),
                );
            }
            (Kind::Listen { tools, uri: u }, true) => {
                request.method = "subscriptions/listen";
                let uris: Vec<String> = u.iter().map(uri).collect();
                request.params.insert(
                    "notifications".to_owned(),
                    json!({"toolsListChanged": tools, "resourceSubscriptions": uris}),
                );
                if self.era == Era::Legacy {
                    // The test app offers tool list changes and subscriptions.
                    request.listen_here = Some(ListenHere {
                        tools: *tools,
                        uris,
                    });
                }
            }
            _ => {}
        }
        if let Some(uri) = &request.uri {
            request.params.insert("uri".to_owned(), json!(uri));
        }
        request
    }

    /// Sends a client request; returns its exchange, and the answer when the router gave
    /// one at once.
    fn send(
        &mut self,
        port: PortId,
        request: Request,
        token: bool,
        retry: Option<(&str, bool)>,
    ) -> Result<(usize, Option<RawMessage>), String> {
        let n = self.exchanges.len();
        let Some(model) = self.ports.get_mut(&port) else {
            return Err(format!("no port {port}"));
        };
        let id = model.next_id();
        let modern = model.era == Era::Modern;
        model.used |= modern;
        let caps = model.caps;
        let mut params = request.params;
        params.insert("x-exchange".to_owned(), json!(n));
        let mut meta = serde_json::Map::new();
        let token = token.then(|| {
            if n.is_multiple_of(2) {
                format!("\"t{n}\"")
            } else {
                (n + 1000).to_string()
            }
        });
        if let Some(token) = &token {
            meta.insert(
                "progressToken".to_owned(),
                serde_json::from_str(token).unwrap_or_default(),
            );
        }
        if modern {
            meta.insert(
                "io.modelcontextprotocol/protocolVersion".to_owned(),
                json!("2026-07-28"),
            );
            meta.insert(
                "io.modelcontextprotocol/clientCapabilities".to_owned(),
                caps_json(caps),
            );
            if n.is_multiple_of(3) {
                meta.insert("io.modelcontextprotocol/logLevel".to_owned(), json!("info"));
            }
        }
        if !meta.is_empty() {
            params.insert("_meta".to_owned(), Value::Object(meta));
        }
        if let Some((handle, with_input)) = retry {
            params.insert("requestState".to_owned(), json!(handle));
            if with_input {
                params.insert(
                    "inputResponses".to_owned(),
                    json!({"input": {"action": "accept"}}),
                );
            }
        }
        let id_value: Value = serde_json::from_str(&id).unwrap_or_default();
        let message = parse(&json!({
            "jsonrpc": "2.0", "id": id_value, "method": request.method, "params": params,
        }))?;
        let mut exchange = Exchange {
            generation: self.generation,
            port,
            modern,
            id,
            token,
            method: request.method.to_owned(),
            uri: request.uri.clone(),
            stream: Key::new(),
            bounded: false,
            hub_open: false,
            waiting: false,
            finals: 1,
            listen_here: request.listen_here,
        };
        match self.router.port_request(port, message) {
            Ok(accepted) => {
                exchange.stream = accepted.stream.clone();
                exchange.bounded = accepted.bounded;
                exchange.hub_open = true;
                exchange.waiting = true;
                exchange.finals = 0;
                self.exchanges.push(exchange);
                self.note_shared_state(port, request.method, request.uri.as_deref(), &params);
                self.streams.insert((self.generation, accepted.stream), n);
                self.apply(accepted.deliveries)?;
                Ok((n, None))
            }
            Err(answer) => {
                let answered = answer.id().map(|i| i.get().to_owned()).unwrap_or_default();
                if !same_json(&answered, &exchange.id) {
                    return Err(format!(
                        "isolation: exchange #{n} (id {}) was answered at once as {answered}",
                        exchange.id
                    ));
                }
                self.exchanges.push(exchange);
                if !answer.is_response() || answer.member("result").is_some() {
                    self.note_shared_state(port, request.method, request.uri.as_deref(), &params);
                }
                let pending = self.router.take_pending();
                self.apply(pending)?;
                Ok((n, Some(answer)))
            }
        }
    }

    /// What the router keeps for a port once it took its request (or answered it).
    fn note_shared_state(
        &mut self,
        port: PortId,
        method: &str,
        uri: Option<&str>,
        params: &serde_json::Map<String, Value>,
    ) {
        let Some(model) = self.ports.get_mut(&port) else {
            return;
        };
        match (method, uri) {
            ("resources/subscribe", Some(uri)) => {
                model.subs.insert(uri.to_owned());
            }
            ("resources/unsubscribe", Some(uri)) => {
                model.subs.remove(uri);
            }
            ("logging/setLevel", _) => {
                let level = params.get("level").and_then(Value::as_str);
                model.level = LEVELS
                    .iter()
                    .position(|l| Some(*l) == level)
                    .and_then(|l| u8::try_from(l).ok());
            }
            _ => {}
        }
    }

    /// A client drops its stream, or the hub's deadline runs out (then the client gets the
    /// hub's error as its answer).
    fn give_up(&mut self, index: &Index, timeout: bool) -> Outcome {
        let open: Vec<usize> = (0..self.exchanges.len())
            .filter(|n| {
                let e = &self.exchanges[*n];
                e.generation == self.generation && e.hub_open && (!timeout || e.bounded)
            })
            .collect();
        let Some(i) = choose(index, open.len()) else {
            return Ok(());
        };
        let e = &mut self.exchanges[open[i]];
        e.hub_open = false;
        e.waiting = false;
        if timeout {
            e.finals += 1;
        }
        let stream = e.stream.clone();
        let reason = if timeout {
            "timed out"
        } else {
            "the client went away"
        };
        let d = self.router.abandon(&stream, reason);
        self.apply(d)
    }

    fn client_cancel(&mut self, index: &Index) -> Outcome {
        let open: Vec<usize> = (0..self.exchanges.len())
            .filter(|n| {
                let e = &self.exchanges[*n];
                e.generation == self.generation
                    && e.hub_open
                    && e.waiting
                    && !e.modern
                    && self.ports.contains_key(&e.port)
            })
            .collect();
        let Some(i) = choose(index, open.len()) else {
            return Ok(());
        };
        let e = &mut self.exchanges[open[i]];
        e.waiting = false;
        let (port, id) = (e.port, e.id.clone());
        let cancel = parse_text(format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"user"}}}}"#
        ))?;
        let d = self.router.port_notification(port, cancel);
        self.apply(d)
    }

    /// The server answers its pending request `key`.
    pub(super) fn respond(&mut self, key: &Key, outcome: &Answer) -> Outcome {
        let Some(upstream) = self.server.pending.remove(key) else {
            return Ok(());
        };
        let text = match outcome {
            Answer::InputRequired(bits)
                if self.era == Era::Modern && upstream.exchange.is_some() =>
            {
                let mut inputs = serde_json::Map::new();
                for (bit, name, method) in [
                    (1, "e", "elicitation/create"),
                    (2, "s", "sampling/createMessage"),
                    (4, "r", "roots/list"),
                ] {
                    if bits & bit != 0 {
                        inputs.insert(name.to_owned(), json!({"method": method, "params": {}}));
                    }
                }
                let result = json!({
                    "resultType": "input_required",
                    "inputRequests": inputs,
                    "requestState": format!("state of {key}"),
                });
                format!(r#"{{"jsonrpc":"2.0","id":{key},"result":{result}}}"#)
            }
            Answer::Error => {
                if upstream.method == "resources/subscribe"
                    && let Some(uri) = &upstream.uri
                {
                    self.server.subs.remove(uri);
                }
                format!(
                    r#"{{"jsonrpc":"2.0","id":{key},"error":{{"code":-32000,"message":"no","data":{{"for":{key}}}}}}}"#
                )
            }
            _ => format!(r#"{{"jsonrpc":"2.0","id":{key},"result":{{"for":{key}}}}}"#),
        };
        let d = self.router.upstream(parse_text(text)?, &Origin::Stdio);
        self.apply(d)
    }

    /// Where a message from the server arrives, and the request whose stream that is.
    fn origin(&self, pick: &Pick) -> (Origin, Option<Key>) {
        self.origin_among(pick, |_| true)
    }

    /// Where a message from the server arrives, on the stream of a pending request that
    /// `allowed` lets through.
    fn origin_among(&self, pick: &Pick, allowed: impl Fn(&Key) -> bool) -> (Origin, Option<Key>) {
        match pick {
            Pick::Stdio => (Origin::Stdio, None),
            Pick::Get => (Origin::Get, None),
            Pick::Post(index) => {
                let keys: Vec<&Key> = self.server.pending.keys().filter(|k| allowed(k)).collect();
                match choose(index, keys.len()) {
                    Some(i) => (Origin::Post(keys[i].clone()), Some(keys[i].clone())),
                    None => (Origin::Stdio, None),
                }
            }
        }
    }

    /// The exchange still waiting on the pending upstream request `key`.
    fn waiting_on(&self, key: &Key) -> Option<usize> {
        let n = self.owner_of(key)?;
        let e = &self.exchanges[n];
        (e.waiting && e.hub_open).then_some(n)
    }

    fn progress(&mut self, index: &Index, on_stream: bool) -> Outcome {
        let tokens: Vec<(Key, String)> = self
            .server
            .pending
            .iter()
            .filter_map(|(k, p)| Some((k.clone(), p.token.clone()?)))
            .collect();
        let Some(i) = choose(index, tokens.len()) else {
            return Ok(());
        };
        let (key, token) = &tokens[i];
        let text = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":1,"for":{key}}}}}"#
        );
        let origin = if on_stream {
            Origin::Post(key.clone())
        } else {
            Origin::Stdio
        };
        let owed = self
            .waiting_on(key)
            .filter(|n| self.exchanges[*n].token.is_some());
        let d = self.router.upstream(parse_text(text)?, &origin);
        self.apply(d)?;
        match owed {
            Some(n) if !self.stream_deliveries.iter().any(|(m, _)| *m == n) => Err(format!(
                "completeness: progress of {key} did not reach exchange #{n}"
            )),
            _ => Ok(()),
        }
    }

    fn notify(&mut self, note: &Note, pick: &Pick, listen: Option<&Index>) -> Outcome {
        let (mut origin, mut cause) = self.origin(pick);
        let listens: Vec<Key> = self
            .server
            .pending
            .iter()
            .filter(|(_, p)| p.method == "subscriptions/listen")
            .map(|(k, _)| k.clone())
            .collect();
        let listen = listen
            .and_then(|i| choose(i, listens.len()))
            .map(|i| listens[i].clone());
        if let Some(listen) = &listen {
            // A listen's notifications come on its own stream.
            origin = Origin::Post(listen.clone());
            cause = Some(listen.clone());
        }
        let mut params = serde_json::Map::new();
        let method = match note {
            Note::ToolsChanged => "notifications/tools/list_changed",
            Note::PromptsChanged => "notifications/prompts/list_changed",
            Note::Updated(u) => {
                params.insert("uri".to_owned(), json!(URIS[usize::from(*u) % URIS.len()]));
                "notifications/resources/updated"
            }
            Note::Message(l) => {
                params.insert(
                    "level".to_owned(),
                    json!(LEVELS[usize::from(*l) % LEVELS.len()]),
                );
                params.insert("data".to_owned(), json!("x"));
                if let Some(cause) = &cause {
                    params.insert(
                        "for".to_owned(),
                        serde_json::from_str(cause).unwrap_or_default(),
                    );
                }
                "notifications/message"
            }
        };
        if let Some(listen) = &listen {
            let id: Value = serde_json::from_str(listen).unwrap_or_default();
            params.insert(
                "_meta".to_owned(),
                json!({"io.modelcontextprotocol/subscriptionId": id}),
            );
        }
        let text = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let owed = listen.as_ref().and_then(|k| self.waiting_on(k));
        let d = self.router.upstream(parse(&text)?, &origin);
        self.apply(d)?;
        if let Some(n) = owed {
            if !self.stream_deliveries.iter().any(|(m, _)| *m == n) {
                return Err(format!(
                    "completeness: {method} for listen #{n} did not reach it"
                ));
            }
            return Ok(());
        }
        if listen.is_none()
            && matches!(
                note,
                Note::ToolsChanged | Note::PromptsChanged | Note::Updated(_)
            )
        {
            self.check_fan_out(note)?;
        }
        Ok(())
    }

    /// *completeness* and *isolation* of a session-wide notification: exactly the legacy
    /// ports and the listens served here that are owed it got it.
    fn check_fan_out(&self, note: &Note) -> Outcome {
        let uri = match note {
            Note::Updated(u) => Some(URIS[usize::from(*u) % URIS.len()]),
            _ => None,
        };
        let expected_ports: BTreeSet<PortId> = self
            .ports
            .iter()
            .filter(|(_, m)| m.era == Era::Legacy && uri.is_none_or(|u| m.subs.contains(u)))
            .map(|(p, _)| *p)
            .collect();
        let got_ports: BTreeSet<PortId> = self.port_deliveries.iter().map(|(p, _)| *p).collect();
        if expected_ports != got_ports {
            return Err(format!(
                "completeness: {note:?} reached ports {got_ports:?}, owed to {expected_ports:?}"
            ));
        }
        let expected_listens: BTreeSet<usize> = (0..self.exchanges.len())
            .filter(|n| {
                let e = &self.exchanges[*n];
                e.generation == self.generation
                    && e.hub_open
                    && e.waiting
                    && e.listen_here.as_ref().is_some_and(|l| match note {
                        Note::ToolsChanged => l.tools,
                        Note::Updated(_) => uri.is_some_and(|u| l.uris.iter().any(|x| x == u)),
                        _ => false,
                    })
            })
            .collect();
        let got_listens: BTreeSet<usize> = self.stream_deliveries.iter().map(|(n, _)| *n).collect();
        if expected_listens != got_listens {
            return Err(format!(
                "completeness: {note:?} reached listens {got_listens:?}, owed to {expected_listens:?}"
            ));
        }
        Ok(())
    }

    /// A server-to-client request (a legacy server's): routed exactly once.
    fn ask(&mut self, method: &str, pick: &Pick) -> Outcome {
        if self.era == Era::Modern {
            return Ok(());
        }
        // One input at a time: the server does not ask again for a call held for its
        // client's input. (That is a known gap of the era translation: the router holds the
        // call a second time, and the first request is never answered.)
        let (origin, cause) = self.origin_among(pick, |key| {
            self.owner_of(key)
                .is_none_or(|n| !self.held.iter().any(|h| !h.resolved && h.exchange == n))
        });
        self.server.next_ask += 1;
        let id = (100 + self.server.next_ask).to_string();
        self.server.asks.insert(
            id.clone(),
            super::model::Ask {
                cause,
                answered: false,
            },
        );
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{}}}}"#);
        let d = self.router.upstream(parse_text(text)?, &origin);
        let routes = d
            .iter()
            .filter(|d| match d {
                Delivery::Request { message, last, .. } => {
                    message.id().map(key_of).as_ref() == Some(&id) || *last
                }
                Delivery::Rmcp(message) | Delivery::Upstream { message, .. } => {
                    message.id().map(key_of).as_ref() == Some(&id)
                }
                _ => false,
            })
            .count();
        if routes != 1 {
            return Err(format!(
                "server requests: {method} {id} was routed {routes} times: {d:?}"
            ));
        }
        self.apply(d)
    }

    fn answer(&mut self, index: &Index, error: bool, impostor: Option<&Index>) -> Outcome {
        let open: Vec<usize> = (0..self.seen.len())
            .filter(|i| {
                let s = &self.seen[*i];
                s.generation == self.generation && !s.answered && self.ports.contains_key(&s.port)
            })
            .collect();
        let Some(i) = choose(index, open.len()) else {
            return Ok(());
        };
        let s = open[i];
        let (owner, id) = (self.seen[s].port, self.seen[s].id.clone());
        let text = if error {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-1,"message":"no"}}}}"#)
        } else {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"action":"accept"}}}}"#)
        };
        if let Some(impostor) = impostor {
            let others: Vec<PortId> = self.ports.keys().copied().filter(|p| *p != owner).collect();
            if let Some(j) = choose(impostor, others.len()) {
                let d = self.router.port_response(others[j], parse_text(text)?);
                if !d.iter().all(|d| matches!(d, Delivery::Drop { .. })) {
                    return Err(format!(
                        "isolation: port {} answered {id}, asked of port {owner}: {d:?}",
                        others[j]
                    ));
                }
                return Ok(());
            }
        }
        self.seen[s].answered = true;
        let d = self.router.port_response(owner, parse_text(text)?);
        self.apply(d)
    }

    fn unresolved_held(&self) -> Vec<usize> {
        (0..self.held.len())
            .filter(|h| !self.held[*h].resolved && self.held[*h].generation == self.generation)
            .collect()
    }

    /// A modern client retries held call `h` (with the input, or without).
    pub(super) fn retry(&mut self, h: usize, with_input: bool) -> Outcome {
        let held = self.held[h].clone();
        let port = self.open_port(true, held.caps);
        let mut request = self.build(port, &Kind::Call);
        request.method = if held.method == "tools/list" {
            "tools/list"
        } else {
            "tools/call"
        };
        let (n, answer) = self.send(port, request, false, Some((&held.handle, with_input)))?;
        if let Some(answer) = answer {
            // Answered at once: asked again (the call still holds), or refused.
            self.held[h].resolved = answer.member("result").is_none();
            return Ok(());
        }
        if self.exchanges[n].stream != held.stream {
            return Err(format!(
                "isolation: the retry of the call on {} went on as {}",
                held.stream, self.exchanges[n].stream
            ));
        }
        self.held[h].resolved = true;
        for owner in self.owners.values_mut() {
            if *owner == held.exchange {
                *owner = n;
            }
        }
        Ok(())
    }

    fn rmcp_call(&mut self) -> Outcome {
        self.rmcp.next += 1;
        let id = self.rmcp.next.to_string();
        self.rmcp.in_flight.insert(id.clone());
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t"}}}}"#
        );
        let d = self.router.rmcp_outgoing(parse_text(text)?);
        self.apply(d)
    }

    fn rmcp_cancel(&mut self, index: &Index) -> Outcome {
        let open: Vec<Key> = self.rmcp.in_flight.iter().cloned().collect();
        let Some(i) = choose(index, open.len()) else {
            return Ok(());
        };
        self.rmcp.in_flight.remove(&open[i]);
        let text = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{}}}}}"#,
            open[i]
        );
        let d = self.router.rmcp_outgoing(parse_text(text)?);
        self.apply(d)
    }

    pub(super) fn rmcp_answer(&mut self, i: usize) -> Outcome {
        self.rmcp.asks[i].1 = true;
        let id = self.rmcp.asks[i].0.clone();
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"action":"decline"}}}}"#);
        let d = self.router.rmcp_outgoing(parse_text(text)?);
        self.apply(d)
    }

    /// The app restarts: what the hub held gets its connection-lost error, the legacy client
    /// sessions reopen their ports on the new session and restore their state there.
    fn restart(&mut self, modern: bool) -> Outcome {
        let generation = self.generation;
        for e in &mut self.exchanges {
            if e.generation == generation {
                if e.hub_open {
                    e.finals += 1;
                }
                e.hub_open = false;
                e.waiting = false;
            }
        }
        for h in &mut self.held {
            h.resolved = true;
        }
        for s in &mut self.seen {
            s.answered = true;
        }
        let sessions: Vec<PortModel> = std::mem::take(&mut self.ports)
            .into_values()
            .filter(|m| m.era == Era::Legacy)
            .collect();
        self.generation += 1;
        self.start_session(modern)?;
        for old in sessions {
            let port = self.open_port(false, old.caps);
            if let Some(level) = old.level {
                let request = self.build(port, &Kind::SetLevel(level));
                self.send(port, request, false, None)?;
            }
            for uri in &old.subs {
                let u = URIS.iter().position(|x| x == uri).unwrap_or(0);
                let request = self.build(port, &Kind::Subscribe(u8::try_from(u).unwrap_or(0)));
                self.send(port, request, false, None)?;
            }
        }
        Ok(())
    }
}
