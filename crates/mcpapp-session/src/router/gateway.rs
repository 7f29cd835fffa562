//! The gateway's own traffic on the shared session: its rmcp client's requests (and the
//! handshake among them, whose result every port is answered from), the hub's era probes, and
//! the requests the router makes on its own behalf to keep shared state right (log levels,
//! subscriptions), whose answers nobody waits for.
//!
//! rmcp's ids are numbers, the gateway's own `"gw:0:{n}"` strings, so neither collides with
//! the ports' `"gw:{port}:{n}"`.

use std::collections::HashSet;

use mcpapp_manifest::Era;
use serde_json::value::RawValue;

use super::ids::{Key, key_of};
use super::subscriptions::Party;
use super::{Delivery, Router, string_at};
use crate::era;
use crate::raw::{MessageKind, RawMessage, raw_json, raw_string};

/// What the gateway itself has in flight upstream.
#[derive(Debug, Default)]
pub(crate) struct Gateway {
    /// rmcp's requests waiting for their response.
    in_flight: HashSet<Key>,
    /// rmcp's handshake request (`initialize` or `server/discover`), until it is answered.
    handshake: Option<Key>,
    /// The upstream's raw `InitializeResult` (legacy) or `server/discover` result (modern).
    handshake_result: Option<Box<RawValue>>,
    /// The hub's era probes waiting for their answer.
    probes: HashSet<Key>,
}

impl Gateway {
    /// rmcp sent a request of `method` under `key`.
    pub(crate) fn note_request(&mut self, key: Key, method: Option<&str>) {
        if matches!(method, Some("initialize" | "server/discover"))
            && self.handshake_result.is_none()
        {
            self.handshake = Some(key.clone());
        }
        self.in_flight.insert(key);
    }

    /// rmcp gave up its request `key`.
    pub(crate) fn note_cancelled(&mut self, key: &Key) {
        self.in_flight.remove(key);
    }

    /// Whether `key` is one of rmcp's requests in flight.
    pub(crate) fn in_flight(&self, key: &Key) -> bool {
        self.in_flight.contains(key)
    }

    /// Whether rmcp has any request in flight.
    pub(crate) fn busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// rmcp's one request in flight, when it has exactly one.
    pub(crate) fn sole_request(&self) -> Option<Key> {
        if self.in_flight.len() == 1 {
            self.in_flight.iter().next().cloned()
        } else {
            None
        }
    }

    /// Takes the response to `key` if it is rmcp's (keeping the handshake's result).
    pub(crate) fn take_response(&mut self, key: &Key, message: &RawMessage) -> bool {
        if !self.in_flight.remove(key) {
            return false;
        }
        if self.handshake.as_ref() == Some(key)
            && let Some(result) = message.member("result")
        {
            self.handshake_result = Some(result.to_owned());
        }
        true
    }

    pub(crate) fn handshake_result(&self) -> Option<&RawValue> {
        self.handshake_result.as_deref()
    }

    pub(crate) fn add_probe(&mut self, key: Key) {
        self.probes.insert(key);
    }

    /// Takes the answer to `key` if it is a probe's.
    pub(crate) fn take_probe(&mut self, key: &Key) -> bool {
        self.probes.remove(key)
    }

    /// How many of rmcp's requests and the hub's probes are in flight.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (self.in_flight.len(), self.probes.len())
    }
}

impl Router {
    /// A `server/discover` the hub sends itself, to learn the upstream's era; its answer
    /// comes back as [`Delivery::Gateway`].
    pub(crate) fn probe(
        &mut self,
        client_info: &serde_json::Value,
        capabilities: &serde_json::Value,
    ) -> (Key, Delivery) {
        let id = self.ids.gateway_request();
        let key = key_of(&id);
        self.gateway.add_probe(key.clone());
        let message = era::probe_request(&id, client_info, capabilities);
        (
            key.clone(),
            Delivery::Upstream {
                message,
                request: Some(key),
            },
        )
    }

    /// A message the gateway's rmcp client sends.
    pub(crate) fn rmcp_outgoing(&mut self, message: RawMessage) -> Vec<Delivery> {
        let mut request = None;
        match message.kind() {
            MessageKind::Request => {
                if let Some(id) = message.id() {
                    let key = key_of(id);
                    let method = message.method();
                    self.gateway.note_request(key.clone(), method.as_deref());
                    if let Some(subscription) = method
                        .as_deref()
                        .filter(|m| matches!(*m, "resources/subscribe" | "resources/unsubscribe"))
                        && let Some(uri) = string_at(&message, &["params", "uri"])
                    {
                        if subscription == "resources/subscribe" {
                            self.subscriptions.add(&uri, Party::Rmcp);
                        } else {
                            self.subscriptions.remove(&uri, Party::Rmcp);
                        }
                    }
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
                    self.gateway.note_cancelled(&key_of(id));
                }
            }
        }
        vec![Delivery::Upstream { message, request }]
    }

    /// A request the gateway makes on its own behalf (keeping shared state right); nobody
    /// waits for its answer, which is dropped when it comes. A modern upstream gets the
    /// gateway's own request `_meta`.
    pub(super) fn gateway_request(&mut self, method: &str, params: &str) -> (Key, Delivery) {
        let id = self.ids.gateway_request();
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
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::router::Origin;

    #[test]
    fn the_handshake_result_is_the_answer_to_the_first_handshake() {
        let mut g = Gateway::default();
        g.note_request("0".into(), Some("initialize"));
        g.note_request("1".into(), Some("tools/list"));
        assert!(g.busy() && g.sole_request().is_none());
        let answer = msg(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"x"}}"#);
        assert!(g.take_response(&"0".into(), &answer));
        assert!(!g.take_response(&"0".into(), &answer), "answered once");
        assert_eq!(
            g.handshake_result().unwrap().get(),
            r#"{"protocolVersion":"x"}"#
        );
        assert_eq!(g.sole_request().as_deref(), Some("1"));
        g.note_cancelled(&"1".into());
        assert!(!g.busy());
        // A later handshake (there is none in one session) would not replace it.
        g.note_request("2".into(), Some("initialize"));
        g.take_response(
            &"2".into(),
            &msg(r#"{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"y"}}"#),
        );
        assert_eq!(
            g.handshake_result().unwrap().get(),
            r#"{"protocolVersion":"x"}"#
        );
        assert_eq!(g.sizes(), (0, 0));
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
    fn the_probe_is_answered_to_the_hub() {
        let mut r = Router::default();
        let (key, Delivery::Upstream { message, request }) =
            r.probe(&serde_json::json!({"name": "g"}), &serde_json::json!({}))
        else {
            panic!("the probe goes upstream");
        };
        assert_eq!(request.as_ref(), Some(&key));
        assert_eq!(key, r#""gw:0:1""#);
        assert_eq!(message.method().as_deref(), Some("server/discover"));
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":"gw:0:1","result":{}}"#),
            &Origin::Stdio,
        );
        assert!(matches!(&d[..], [Delivery::Gateway { key: k, .. }] if *k == key));
        assert!(r.sizes().is_settled());
    }

    #[test]
    fn the_gateways_own_requests_carry_its_meta_on_a_modern_upstream() {
        let mut r = Router::default();
        let (_, Delivery::Upstream { message, .. }) = r.gateway_request("x/y", "{}") else {
            panic!()
        };
        assert_eq!(
            message.as_str(),
            r#"{"jsonrpc":"2.0","id":"gw:0:1","method":"x/y","params":{}}"#
        );
        r.set_upstream_era(Era::Modern);
        let (_, Delivery::Upstream { message, .. }) = r.gateway_request("x/y", "{}") else {
            panic!()
        };
        assert!(
            message
                .as_str()
                .contains(r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#),
            "{}",
            message.as_str()
        );
    }
}
