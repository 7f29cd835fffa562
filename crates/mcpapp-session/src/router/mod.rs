//! Routing for one shared upstream session: who gets each message.
//!
//! Three kinds of party share an app's single upstream MCP session: the gateway's own rmcp
//! client, and any number of *ports* (client sessions of `/apps/mcp/{appId}`). The router is
//! a plain state machine: it is told about every message that crosses the session and answers
//! with [`Delivery`]s; the hub task (see `hub.rs`) carries them out. Keeping it free of
//! I/O makes every routing rule testable on its own.
//!
//! [`Router`] composes one table per concern, each in its own module with the router's flows
//! of that concern:
//! - `ids`: the names given upstream (`"gw:{port}:{n}"` request ids, `"gwpt:{n}"` progress
//!   tokens, `"gwsr:{n}"` made-up server requests, held-call handles), from one counter;
//! - `requests`: the port requests in flight, who is owed which response, what to restore;
//! - `ports`: per-port state (era, capabilities, requests in flight, log level);
//! - `subscriptions`: resource subscriptions, reference-counted across parties;
//! - `server_requests`: server-to-client requests, the three routing rules, who owes answers;
//! - `notifications`: who hears each notification from the server;
//! - `rounds`: input rounds between eras, both ways;
//! - `listens`: `subscriptions/listen` across eras;
//! - `gateway`: the gateway's own traffic (rmcp's requests, the handshake, probes, and the
//!   requests the router makes to keep shared state right);
//! - `errors`: every error the router answers on its own, with its JSON-RPC code.
//!
//! `proptests/` drives the whole with random interleavings of every party's moves against a
//! model of them (its doc lists the properties); `Router::sizes` says what each table holds.
//!
//! This file holds the entry points, what a port's arrival, request, departure and a given-up
//! request do across the tables, and responses from the server.
//!
//! Rules:
//! - Port requests get a fresh upstream id and progress token; both are restored on the way
//!   back, and a port only ever sees its own responses.
//! - Progress goes to the request it belongs to. `notifications/message` that arrives on one
//!   request's HTTP response stream goes to that request; list changes go to every port and
//!   to rmcp.
//! - A server-to-client request (elicitation, sampling, roots) goes to the session that caused
//!   it (see `server_requests`). A port may answer only the server requests routed to it.
//! - Session-wide state is kept per port on the one upstream session: resource subscriptions
//!   (reference-counted) and log levels (see `ports` and `subscriptions`).
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

mod errors;
mod gateway;
mod ids;
mod listens;
mod notifications;
mod ports;
mod requests;
mod rounds;
mod server_requests;
mod subscriptions;
#[cfg(test)]
mod testing;

#[cfg(test)]
mod proptests;

use mcpapp_manifest::Era;
use serde_json::value::RawValue;

use self::errors::Failure;
use self::gateway::Gateway;
use self::ids::Ids;
pub(crate) use self::ids::{Key, PortId, key_of};
use self::listens::{Listens, restore_subscription_id};
pub(crate) use self::ports::{PortCapabilities, PortSpec};
use self::ports::{Ports, level_rank};
use self::requests::{PendingRequest, Requests};
use self::rounds::Rounds;
use self::server_requests::ServerRequests;
use self::subscriptions::{Party, Subscriptions};
use crate::era;
pub(crate) use crate::link::Origin;
use crate::raw::{MessageKind, RawMessage, raw_json};

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

/// How many entries each of the router's tables holds: what a session keeps for what is in
/// flight, for tests and checks (the hub logs them when the link closes). When nothing is in flight and no port is open, every one is
/// zero but `subscriptions` (rmcp's own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub(crate) ports: usize,
    /// Requests in flight, summed over ports.
    pub(crate) in_flight: usize,
    pub(crate) requests: usize,
    pub(crate) aliases: usize,
    pub(crate) tokens: usize,
    pub(crate) server_requests: usize,
    pub(crate) subscriptions: usize,
    pub(crate) rounds: usize,
    pub(crate) round_counts: usize,
    pub(crate) held: usize,
    pub(crate) held_requests: usize,
    pub(crate) listens: usize,
    pub(crate) gateway_listens: usize,
    pub(crate) rmcp_in_flight: usize,
    pub(crate) probes: usize,
    pub(crate) pending_out: usize,
}

impl Sizes {
    #[cfg(test)]
    /// Whether the tables of what is in flight are empty (open ports may keep their
    /// subscriptions and listens).
    pub(crate) fn is_idle(&self) -> bool {
        Self {
            ports: 0,
            subscriptions: 0,
            listens: 0,
            gateway_listens: 0,
            ..*self
        } == Self::default()
    }

    #[cfg(test)]
    /// Whether every table is empty (no port open, nothing in flight, nothing subscribed).
    pub(crate) fn is_settled(&self) -> bool {
        *self == Self::default()
    }
}

/// The routing tables of one upstream session.
#[derive(Debug, Default)]
pub(crate) struct Router {
    upstream_era: Era,
    ids: Ids,
    ports: Ports,
    requests: Requests,
    server_requests: ServerRequests,
    subscriptions: Subscriptions,
    rounds: Rounds,
    listens: Listens,
    gateway: Gateway,
    /// Deliveries made while answering a port at once (see [`Router::take_pending`]).
    pending_out: Vec<Delivery>,
}

/// A string at `path` of `message`.
fn string_at(message: &RawMessage, path: &[&str]) -> Option<String> {
    message
        .path(path)
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

/// An empty result for `id`: what the gateway answers a request it serves itself.
fn empty_result(id: &RawValue) -> RawMessage {
    RawMessage::response(id, &raw_json("{}".to_owned()))
}

/// Tells the server to stop working on the request `key`.
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

impl Router {
    /// A router whose `requestState` handles are derived from `secret`.
    pub(crate) fn with_secret(secret: [u64; 2]) -> Self {
        Self {
            rounds: Rounds::with_secret(secret),
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
        self.gateway.handshake_result()
    }

    /// How many entries each table holds.
    pub(crate) fn sizes(&self) -> Sizes {
        let (ports, in_flight) = self.ports.sizes();
        let (requests, aliases, tokens) = self.requests.sizes();
        let (rounds, round_counts, held, held_requests) = self.rounds.sizes();
        let (listens, gateway_listens) = self.listens.sizes();
        let (rmcp_in_flight, probes) = self.gateway.sizes();
        Sizes {
            ports,
            in_flight,
            requests,
            aliases,
            tokens,
            server_requests: self.server_requests.len(),
            subscriptions: self.subscriptions.len(),
            rounds,
            round_counts,
            held,
            held_requests,
            listens,
            gateway_listens,
            rmcp_in_flight,
            probes,
            pending_out: self.pending_out.len(),
        }
    }

    /// Registers a port.
    pub(crate) fn open_port(&mut self, port: PortId, spec: PortSpec) {
        self.ports.open(port, spec);
    }

    /// Removes a port: its in-flight requests are cancelled upstream and the server requests
    /// it still owes are answered with an error, so the server is not left waiting.
    pub(crate) fn close_port(&mut self, port: PortId, reason: &str) -> Vec<Delivery> {
        let mut out = Vec::new();
        if let Some(entry) = self.ports.remove(port) {
            for key in entry.in_flight {
                self.end_request(&key);
                out.push(cancelled(&key, reason));
            }
        }
        for key in self.server_requests.release_port(port) {
            out.push(Delivery::Upstream {
                message: Failure::ClientGone { reason }.answer(Some(&raw_json(key))),
                request: None,
            });
        }
        self.listens.remove_port(port);
        // Subscriptions only this port held end upstream too.
        for uri in self.subscriptions.remove_port(port) {
            out.extend(self.unsubscribe_upstream(&uri));
        }
        // A less verbose level may do now (a modern upstream has no session level).
        if self.upstream_era == Era::Legacy
            && let Some(level) = self.ports.settle_level()
        {
            let params = serde_json::json!({ "level": level }).to_string();
            out.push(self.gateway_request("logging/setLevel", &params).1);
        }
        out
    }

    /// Ends the port request under the current upstream id `key` for good, with everything
    /// kept for its stream: an open input round and its inputs, the retry's alias, the count
    /// of rounds run. Every way a request ends comes through here.
    fn end_request(&mut self, key: &Key) -> Option<PendingRequest> {
        let pending = self.forget_request(key)?;
        self.rounds.end_stream(&pending.stream);
        self.requests.end_stream(&pending.stream);
        self.server_requests.end_stream(&pending.stream);
        Some(pending)
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
        match method {
            "resources/subscribe" => self.subscribe(port, message, id),
            "resources/unsubscribe" => self.unsubscribe(port, message, id),
            "logging/setLevel" => self.set_level(port, message, id),
            _ => Ok(None),
        }
    }

    /// A request from a port. Returns what was accepted, or a response to hand straight back
    /// (a malformed message, an unknown port, or something answered here).
    pub(crate) fn port_request(
        &mut self,
        port: PortId,
        mut message: RawMessage,
    ) -> Result<Accepted, RawMessage> {
        let Some(original_id) = message.id().map(ToOwned::to_owned) else {
            return Err(Failure::NoId.answer(None));
        };
        let Some(entry) = self.ports.get(port) else {
            return Err(Failure::SessionClosed.answer(Some(&original_id)));
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
        let (key, token) = self.requests.rewrite(&mut self.ids, port, &mut message);
        let log_level = if port_era == Era::Modern {
            era::request_log_level(&message)
                .as_deref()
                .and_then(level_rank)
        } else {
            None
        };
        self.translate_request(port, port_era, &mut message);
        let keep = self.upstream_era == Era::Modern && port_era == Era::Legacy;
        self.requests.insert(
            key.clone(),
            PendingRequest {
                port,
                stream: key.clone(),
                original_id,
                token,
                subscribes,
                method: method.clone(),
                modern_client: port_era == Era::Modern,
                log_level,
                sent: keep.then(|| message.clone()),
                held: None,
            },
        );
        self.ports.add_in_flight(port, key.clone());
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

    /// A port request's `_meta` in the upstream's era: a modern client's loses the modern
    /// keys before a legacy server; a legacy client's gains them, on its behalf, before a
    /// modern one.
    fn translate_request(&self, port: PortId, port_era: Era, message: &mut RawMessage) {
        match (port_era, self.upstream_era) {
            (Era::Modern, Era::Legacy) => era::strip_request_meta(message),
            (Era::Legacy, Era::Modern) => {
                let spec = self.ports.get(port).map(|e| &e.spec);
                era::inject_request_meta(
                    message,
                    spec.and_then(|s| s.client_capabilities.as_deref()),
                    spec.and_then(|s| s.client_info.as_deref()),
                    self.ports.level_name(port),
                );
            }
            _ => {}
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
                let key = self
                    .requests
                    .find_by_original(self.ports.in_flight(port), &original);
                let Some(stream) = key
                    .and_then(|k| self.requests.get(k))
                    .map(|p| p.stream.clone())
                else {
                    return Vec::new();
                };
                let reason = string_at(&message, &["params", "reason"])
                    .unwrap_or_else(|| "cancelled by the client".to_owned());
                self.abandon(&stream, &reason)
            }
            _ => vec![Delivery::Upstream {
                message,
                request: None,
            }],
        }
    }

    /// A port's request was given up (timeout, or its client went away): forget it and tell
    /// the server. `stream` is the request's stream key.
    pub(crate) fn abandon(&mut self, stream: &Key, reason: &str) -> Vec<Delivery> {
        if let Some(listen) = self.listens.remove(stream) {
            return self.end_listen(listen);
        }
        let current = self.requests.current(stream);
        let Some(pending) = self.end_request(&current) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(server_request) = &pending.held {
            // The server is still waiting for the modern client's input: it will not come.
            out.push(self.give_up_held(stream, server_request, reason));
        }
        out.push(cancelled(&current, reason));
        out
    }

    /// The original id of a port request (by its stream key), to build responses the port
    /// understands.
    pub(crate) fn original_id(&self, stream: &Key) -> Option<&RawValue> {
        self.requests.original_id(stream)
    }

    /// Forgets the port request under the current upstream id `key`.
    fn forget_request(&mut self, key: &Key) -> Option<PendingRequest> {
        let pending = self.requests.remove(key)?;
        self.ports.remove_in_flight(pending.port, key);
        Some(pending)
    }

    /// A message from the server.
    pub(crate) fn upstream(&mut self, message: RawMessage, origin: &Origin) -> Vec<Delivery> {
        match message.kind() {
            MessageKind::Response | MessageKind::Error => self.upstream_response(message),
            MessageKind::Notification => self.upstream_notification(message, origin),
            MessageKind::Request => self.upstream_request(message, origin),
        }
    }

    /// A response from the server: to the port request, the probe or the rmcp request it
    /// answers.
    fn upstream_response(&mut self, mut message: RawMessage) -> Vec<Delivery> {
        let Some(key) = message.id().map(key_of) else {
            return vec![Delivery::Drop {
                reason: "a response without an id".to_owned(),
            }];
        };
        if self.gateway.take_probe(&key) {
            return vec![Delivery::Gateway { key, message }];
        }
        if self.upstream_era == Era::Modern
            && let Some(pending) = self.requests.get(&key)
            && !pending.modern_client
            && message.member("result").is_some_and(era::is_input_required)
        {
            return self.start_round(&key, &message);
        }
        if let Some(pending) = self.end_request(&key) {
            if message.kind() == MessageKind::Error
                && let Some(uri) = &pending.subscribes
            {
                // The server refused it: the port holds no subscription after all.
                self.subscriptions.remove(uri, Party::Port(pending.port));
            }
            message.set_id(&pending.original_id);
            if pending.modern_client && self.upstream_era == Era::Legacy {
                era::complete_result(&mut message, &pending.method);
            }
            restore_subscription_id(&self.requests, &mut message, &["result", "_meta"]);
            let stream = pending.stream;
            let mut out = Vec::new();
            if let Some(server_request) = &pending.held {
                // The call ended while held for its client's input: that input is not needed.
                out.push(self.give_up_held(&stream, server_request, "the call has ended"));
            }
            out.push(Delivery::Request {
                request: stream,
                message,
                last: true,
            });
            return out;
        }
        if self.gateway.take_response(&key, &message) {
            return vec![Delivery::Rmcp(message)];
        }
        vec![Delivery::Drop {
            reason: format!("a response to {key}, which nobody is waiting for"),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use expect_test::expect;

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
        assert!(r.sizes().is_idle(), "{:?}", r.sizes());
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
        assert!(r.sizes().is_settled(), "{:?}", r.sizes());
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
    fn requests_without_an_id_or_a_port_are_answered_at_once() {
        let mut r = Router::default();
        let closed = r
            .port_request(
                7,
                msg(r#"{"jsonrpc":"2.0","id":"q","method":"tools/list"}"#),
            )
            .unwrap_err();
        assert_eq!(
            closed.as_str(),
            r#"{"jsonrpc":"2.0","id":"q","error":{"code":-32603,"message":"this session is closed"}}"#
        );
        let no_id = r
            .port_request(7, msg(r#"{"jsonrpc":"2.0","method":"tools/list"}"#))
            .unwrap_err();
        assert!(no_id.as_str().contains("-32600"), "{}", no_id.as_str());
    }

    #[test]
    fn a_held_call_the_server_ends_anyway_lets_go_of_its_input_request() {
        let mut r = legacy_upstream_with_caps();
        r.open_port(1, modern_port(all_caps()));
        let (k, _) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .map(Accepted::into_parts)
            .unwrap();
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":50,"method":"elicitation/create","params":{}}"#),
            &Origin::Post(k.clone()),
        );
        let (_, answer, _) = last_request(&d);
        let answer: serde_json::Value = serde_json::from_str(answer.as_str()).unwrap();
        let state = answer["result"]["requestState"]
            .as_str()
            .unwrap()
            .to_owned();
        r.close_port(1, "exchange over");
        // The app gives up waiting for the input and ends the call: its own request is
        // answered, and the held call is gone.
        let d = r.upstream(
            msg(&format!(r#"{{"jsonrpc":"2.0","id":{k},"result":{{}}}}"#)),
            &Origin::Stdio,
        );
        let answered = upstream_text(&d);
        assert!(
            answered.len() == 1 && answered[0].contains(r#""id":50,"error""#),
            "{answered:?}"
        );
        assert!(r.sizes().is_settled(), "{:?}", r.sizes());
        r.open_port(2, modern_port(all_caps()));
        let retry = r
            .port_request(2, msg(&format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"requestState":"{state}","inputResponses":{{"input":{{}}}}}}}}"#)))
            .unwrap_err();
        assert!(
            retry.as_str().contains("requestState names no call"),
            "{}",
            retry.as_str()
        );
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
        expect![[r#"{"jsonrpc":"2.0","id":"m1","result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}}"#]].assert_eq(message.as_str());
    }
}
