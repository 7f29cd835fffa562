//! `subscriptions/listen`, the 2026-07-28 way to hear notifications, across eras.
//!
//! - A modern port on a legacy upstream: the listen is served here from the session's
//!   notifications ([`Listens`] holds what each one asked for and the app can offer); its
//!   resource URIs count as the port's subscriptions.
//! - A legacy port on a modern upstream: a resource subscription becomes a listen the gateway
//!   makes upstream on its own behalf, one per URI, cancelled when the last subscriber leaves.
//! - A modern port on a modern upstream: the listen is forwarded like any request; its
//!   notifications name the upstream id in their `_meta`, which is put back to the client's.

use std::collections::HashMap;

use serde_json::value::RawValue;

use super::ids::{Key, PortId, key_of};
use super::requests::Requests;
use super::subscriptions::Party;
use super::{Accepted, Delivery, Router};
use crate::era::META_SUBSCRIPTION_ID;
use crate::raw::RawMessage;

/// A `subscriptions/listen` served here for a modern port on a legacy upstream.
#[derive(Debug)]
pub(crate) struct Listen {
    pub(crate) port: PortId,
    original_id: Box<RawValue>,
    tools: bool,
    prompts: bool,
    resources: bool,
    pub(crate) uris: Vec<String>,
}

impl Listen {
    /// What `port`'s listen request gets of what it asks: the list changes the app says it
    /// sends (`handshake` is its `InitializeResult`), and resource updates if it offers
    /// subscriptions.
    pub(crate) fn accept(
        port: PortId,
        message: &RawMessage,
        original_id: Box<RawValue>,
        handshake: Option<&RawValue>,
    ) -> Self {
        let wanted = |name: &str| {
            message
                .path(&["params", "notifications", name])
                .is_some_and(|v| v.get() == "true")
        };
        let capabilities: serde_json::Value = handshake
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
            .map(|r| r["capabilities"].clone())
            .unwrap_or_default();
        let offers = |list: &str, flag: &str| capabilities[list][flag].as_bool() == Some(true);
        let uris: Vec<String> = if offers("resources", "subscribe") {
            message
                .path(&["params", "notifications", "resourceSubscriptions"])
                .and_then(|v| serde_json::from_str(v.get()).ok())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Self {
            port,
            original_id,
            tools: wanted("toolsListChanged") && offers("tools", "listChanged"),
            prompts: wanted("promptsListChanged") && offers("prompts", "listChanged"),
            resources: wanted("resourcesListChanged") && offers("resources", "listChanged"),
            uris,
        }
    }

    /// The acknowledgement that opens the listen's stream: what it will hear, under the
    /// client's own id.
    pub(crate) fn acknowledgement(&self) -> Option<RawMessage> {
        let mut accepted = serde_json::Map::new();
        for (name, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                accepted.insert(name.to_owned(), serde_json::Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            accepted.insert(
                "resourceSubscriptions".to_owned(),
                serde_json::json!(self.uris),
            );
        }
        let id: serde_json::Value =
            serde_json::from_str(self.original_id.get()).unwrap_or_default();
        let ack = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": { "_meta": { META_SUBSCRIPTION_ID: id }, "notifications": accepted },
        });
        RawMessage::from_value(&ack).ok()
    }

    /// Whether the listen asked for a list change notification of `method`.
    fn hears(&self, method: &str) -> bool {
        match method {
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            _ => false,
        }
    }
}

/// The listens served here, by stream, and the gateway's own upstream listens, by URI.
#[derive(Debug, Default)]
pub(crate) struct Listens {
    here: HashMap<Key, Listen>,
    /// Upstream listens standing in for resource subscriptions (modern upstream), by URI.
    gateway: HashMap<String, Key>,
}

impl Listens {
    pub(crate) fn insert(&mut self, stream: Key, listen: Listen) {
        self.here.insert(stream, listen);
    }

    /// Ends the listen on `stream`, if one is served here.
    pub(crate) fn remove(&mut self, stream: &Key) -> Option<Listen> {
        self.here.remove(stream)
    }

    /// Ends every listen of `port`.
    pub(crate) fn remove_port(&mut self, port: PortId) {
        self.here.retain(|_, l| l.port != port);
    }

    /// The streams that asked for the list change notification `method`.
    pub(crate) fn hearing(&self, method: &str) -> Vec<Key> {
        self.here
            .iter()
            .filter(|(_, l)| l.hears(method))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The streams of `port`'s listens that asked for updates of `uri`.
    pub(crate) fn of(&self, port: PortId, uri: &str) -> Vec<Key> {
        self.here
            .iter()
            .filter(|(_, l)| l.port == port && l.uris.iter().any(|u| u == uri))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// `message` on a listen's stream, tagged with its subscription id (the client's id).
    pub(crate) fn tagged(&self, stream: &Key, message: &RawMessage) -> Option<Delivery> {
        let listen = self.here.get(stream)?;
        let mut tagged = message.clone();
        tagged
            .set_path(
                &["params", "_meta", META_SUBSCRIPTION_ID],
                &listen.original_id,
            )
            .ok()?;
        Some(Delivery::Request {
            request: stream.clone(),
            message: tagged,
            last: false,
        })
    }

    /// Records the gateway's own upstream listen for `uri`.
    pub(crate) fn insert_gateway(&mut self, uri: String, key: Key) {
        self.gateway.insert(uri, key);
    }

    /// The gateway's own upstream listen for `uri`, forgotten.
    pub(crate) fn take_gateway(&mut self, uri: &str) -> Option<Key> {
        self.gateway.remove(uri)
    }

    /// How many listens are served here, and how many the gateway holds upstream.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (self.here.len(), self.gateway.len())
    }
}

/// Puts a port's own listen id back into a `subscriptionId` at `path` (a notification's
/// `params._meta`, or a final listen result's `result._meta`) of a listen forwarded upstream;
/// returns the listen's stream.
pub(crate) fn restore_subscription_id(
    requests: &Requests,
    message: &mut RawMessage,
    path: &[&str],
) -> Option<Key> {
    let mut full: Vec<&str> = path.to_vec();
    full.push(META_SUBSCRIPTION_ID);
    let id = message.path(&full).map(key_of)?;
    let pending = requests.get(&id)?;
    let original = pending.original_id.clone();
    let stream = pending.stream.clone();
    let _ = message.set_path(&full, &original);
    Some(stream)
}

impl Router {
    /// A modern client's `subscriptions/listen` on a legacy upstream, served here from the
    /// session's notifications: acknowledged with what the app's capabilities allow.
    pub(super) fn listen_here(
        &mut self,
        port: PortId,
        message: &RawMessage,
        original_id: Box<RawValue>,
    ) -> Accepted {
        let listen = Listen::accept(port, message, original_id, self.gateway.handshake_result());
        let (stream, _, _) = self.ids.port_request(port);
        let mut deliveries = Vec::new();
        for uri in &listen.uris {
            if self.subscriptions.add(uri, Party::Port(port)) {
                let params = serde_json::json!({ "uri": uri }).to_string();
                deliveries.push(self.gateway_request("resources/subscribe", &params).1);
            }
        }
        if let Some(ack) = listen.acknowledgement() {
            deliveries.push(Delivery::Request {
                request: stream.clone(),
                message: ack,
                last: false,
            });
        }
        self.listens.insert(stream.clone(), listen);
        Accepted {
            stream,
            deliveries,
            bounded: false,
        }
    }

    /// A listen served here ends (its client went away): its subscriptions end with it.
    pub(super) fn end_listen(&mut self, listen: Listen) -> Vec<Delivery> {
        let mut out = Vec::new();
        for uri in listen.uris {
            if self.subscriptions.remove(&uri, Party::Port(listen.port)) {
                out.extend(self.unsubscribe_upstream(&uri));
            }
        }
        out
    }

    /// A list change to every listen served here that asked for it.
    pub(super) fn to_listens(&self, message: &RawMessage, method: &str) -> Vec<Delivery> {
        self.listens
            .hearing(method)
            .iter()
            .filter_map(|s| self.listens.tagged(s, message))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::raw::{raw_json, raw_string};
    use crate::router::{Origin, PortCapabilities};
    use expect_test::expect;

    fn listen_request(notifications: &str) -> RawMessage {
        msg(&format!(
            r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{{"notifications":{notifications}}}}}"#
        ))
    }

    #[test]
    fn a_listen_gets_what_the_app_offers_of_what_it_asks() {
        let handshake = raw_json(
            r#"{"capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":false},"resources":{"subscribe":true}}}"#
                .to_owned(),
        );
        let listen = Listen::accept(
            4,
            &listen_request(
                r#"{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["a://x","b://y"]}"#,
            ),
            raw_string("L"),
            Some(&handshake),
        );
        assert!(listen.hears("notifications/tools/list_changed"));
        assert!(!listen.hears("notifications/prompts/list_changed"));
        assert!(!listen.hears("notifications/resources/list_changed"));
        assert_eq!(listen.uris, ["a://x", "b://y"]);
        expect![[r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a://x","b://y"]}}}"#]]
            .assert_eq(listen.acknowledgement().unwrap().as_str());
        // Without a handshake nothing is offered.
        let none = Listen::accept(
            4,
            &listen_request(r#"{"toolsListChanged":true,"resourceSubscriptions":["a://x"]}"#),
            raw_string("L"),
            None,
        );
        assert!(!none.hears("notifications/tools/list_changed") && none.uris.is_empty());
    }

    #[test]
    fn listens_are_found_by_what_they_hear_and_tagged_with_their_id() {
        let handshake = raw_json(
            r#"{"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}"#
                .to_owned(),
        );
        let mut listens = Listens::default();
        let accept = |port, notifications: &str, id: &str| {
            Listen::accept(
                port,
                &listen_request(notifications),
                raw_string(id),
                Some(&handshake),
            )
        };
        listens.insert(
            "s1".to_owned(),
            accept(1, r#"{"toolsListChanged":true}"#, "one"),
        );
        listens.insert(
            "s2".to_owned(),
            accept(2, r#"{"resourceSubscriptions":["u"]}"#, "two"),
        );
        assert_eq!(listens.hearing("notifications/tools/list_changed"), ["s1"]);
        assert_eq!(listens.of(2, "u"), ["s2"]);
        assert!(listens.of(1, "u").is_empty());
        let update = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u"}}"#,
        );
        let Some(Delivery::Request {
            request, message, ..
        }) = listens.tagged(&"s2".to_owned(), &update)
        else {
            panic!("no delivery");
        };
        assert_eq!(request, "s2");
        expect![[r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u","_meta":{"io.modelcontextprotocol/subscriptionId":"two"}}}"#]].assert_eq(message.as_str());
        assert!(listens.tagged(&"s3".to_owned(), &update).is_none());
        listens.remove_port(1);
        assert_eq!(listens.sizes(), (1, 0));
        listens.insert_gateway("u".to_owned(), "k".to_owned());
        assert_eq!(listens.take_gateway("u").as_deref(), Some("k"));
        assert_eq!(listens.take_gateway("u"), None);
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
