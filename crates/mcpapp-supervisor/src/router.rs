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
//! - A server-to-client request (elicitation, sampling, roots) goes to the port whose request
//!   caused it when that can be told: over HTTP by the response stream it arrives on, over
//!   stdio only when exactly one port, and not rmcp, has requests in flight. The port must
//!   have declared the matching capability. Otherwise rmcp's handler answers it.
//! - A port may answer only the server requests routed to it.

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
pub struct PortCapabilities {
    /// The port can answer `elicitation/create`.
    pub elicitation: bool,
    /// The port can answer `sampling/createMessage`.
    pub sampling: bool,
    /// The port can answer `roots/list`.
    pub roots: bool,
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
            },
        );
    }

    /// Updates the capabilities a port declared.
    pub(crate) fn set_capabilities(&mut self, port: PortId, capabilities: PortCapabilities) {
        if let Some(entry) = self.ports.get_mut(&port) {
            entry.capabilities = capabilities;
        }
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
        out
    }

    /// A request from a port. Returns the upstream key it was given, or an error response to
    /// hand straight back (malformed message, unknown port).
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
                    if message.method().as_deref() == Some("initialize") {
                        self.rmcp_initialize = Some(key.clone());
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
                _ => self.broadcast(message),
            },
            _ => self.broadcast(message),
        }
    }

    fn broadcast(&self, message: RawMessage) -> Vec<Delivery> {
        let mut ports: Vec<PortId> = self.ports.keys().copied().collect();
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
        let cause = match origin {
            Origin::Post(key) => self
                .requests
                .get(key)
                .map(|pending| (pending.port, key.clone())),
            Origin::Stdio => self.only_party_in_flight(),
            Origin::Get => None,
        };
        let routed = cause.filter(|(port, _)| {
            self.ports
                .get(port)
                .is_some_and(|entry| entry.capabilities.allows(&method))
        });
        match routed {
            Some((port, request)) => {
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
            None => {
                self.server_requests.insert(id, Owner::Rmcp);
                vec![Delivery::Rmcp(message)]
            }
        }
    }

    /// Over stdio a server request carries no hint of its cause; it is attributed only when a
    /// single port, and not rmcp, has requests in flight (its newest one).
    fn only_party_in_flight(&self) -> Option<(PortId, Key)> {
        if !self.rmcp_in_flight.is_empty() {
            return None;
        }
        let mut busy = self
            .ports
            .iter()
            .filter(|(_, entry)| !entry.in_flight.is_empty());
        let (port, entry) = busy.next()?;
        if busy.next().is_some() {
            return None;
        }
        entry.in_flight.last().map(|key| (*port, key.clone()))
    }
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
            msg(r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x"}}"#),
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
        // Port 2 did not declare elicitation: the gateway answers instead.
        let d = r.upstream(msg(elicit.replace("40", "41").as_str()), &Origin::Post(k2));
        assert!(matches!(&d[..], [Delivery::Rmcp(_)]));
    }

    #[test]
    fn over_stdio_server_requests_go_to_the_only_busy_port() {
        let mut r = Router::default();
        r.open_port(1, all_caps());
        r.open_port(2, all_caps());
        let elicit = r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}"#;
        let (k1, _) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .unwrap();
        let d = r.upstream(msg(elicit), &Origin::Stdio);
        assert!(matches!(&d[..], [Delivery::Request { request, .. }] if *request == k1));
        // With two ports busy, or rmcp busy, nobody can tell: rmcp answers.
        r.port_request(2, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .unwrap();
        let d = r.upstream(msg(&elicit.replace("7", "8")), &Origin::Stdio);
        assert!(matches!(&d[..], [Delivery::Rmcp(_)]));
        let mut r = Router::default();
        r.open_port(1, all_caps());
        r.port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .unwrap();
        r.rmcp_outgoing(msg(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#));
        let d = r.upstream(msg(elicit), &Origin::Stdio);
        assert!(matches!(&d[..], [Delivery::Rmcp(_)]));
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
