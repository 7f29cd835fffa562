//! Resource subscriptions on the shared session, reference-counted: the first party to
//! subscribe to a URI subscribes upstream, the last to leave unsubscribes, the others are
//! answered by the gateway; `resources/updated` reaches only the subscribers of its URI.
//!
//! The parties are the gateway's rmcp client and the ports (a port's emulated listen counts
//! as the port). What "upstream" means is the router's business: a legacy server gets
//! `resources/subscribe`, a modern one a `subscriptions/listen` of the gateway's own.

use std::collections::{BTreeSet, HashMap};

use mcpapp_manifest::Era;
use serde_json::value::RawValue;

use super::ids::PortId;
use super::{Delivery, Router, cancelled, empty_result, string_at};
use crate::raw::RawMessage;

/// Who holds a resource subscription on the shared session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Party {
    Rmcp,
    Port(PortId),
}

/// The subscribers of each URI; a URI nobody holds has no entry.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    by_uri: HashMap<String, BTreeSet<Party>>,
}

impl Subscriptions {
    /// `party` subscribes to `uri`; returns whether it is the first to (so the subscription
    /// must be made upstream).
    pub(crate) fn add(&mut self, uri: &str, party: Party) -> bool {
        let parties = self.by_uri.entry(uri.to_owned()).or_default();
        let first = parties.is_empty();
        parties.insert(party);
        first
    }

    /// `party` leaves `uri`; returns whether it held it and was the last (so the subscription
    /// must end upstream).
    pub(crate) fn remove(&mut self, uri: &str, party: Party) -> bool {
        let Some(parties) = self.by_uri.get_mut(uri) else {
            return false;
        };
        let held = parties.remove(&party);
        if parties.is_empty() {
            self.by_uri.remove(uri);
            return held;
        }
        false
    }

    /// A port leaves every URI; returns, sorted, those it was the last to hold.
    pub(crate) fn remove_port(&mut self, port: PortId) -> Vec<String> {
        let mut emptied: Vec<String> = Vec::new();
        self.by_uri.retain(|uri, parties| {
            let held = parties.remove(&Party::Port(port));
            if held && parties.is_empty() {
                emptied.push(uri.clone());
            }
            !parties.is_empty()
        });
        emptied.sort();
        emptied
    }

    /// The subscribers of `uri`, in order (rmcp first, then ports by number).
    pub(crate) fn parties(&self, uri: &str) -> Option<&BTreeSet<Party>> {
        self.by_uri.get(uri)
    }

    /// How many URIs are held.
    pub(crate) fn len(&self) -> usize {
        self.by_uri.len()
    }
}

impl Router {
    /// A port's `resources/subscribe`: `Ok(Some(uri))` when it goes upstream (the first
    /// subscriber of a legacy server), `Ok(None)` when it goes upstream as it is, or the
    /// answer given here.
    pub(super) fn subscribe(
        &mut self,
        port: PortId,
        message: &RawMessage,
        id: &RawValue,
    ) -> Result<Option<String>, RawMessage> {
        let Some(uri) = string_at(message, &["params", "uri"]) else {
            return Ok(None);
        };
        if !self.subscriptions.add(&uri, Party::Port(port)) {
            return Err(empty_result(id));
        }
        if self.upstream_era == Era::Modern {
            // A modern server has no subscribe; a listen for this URI stands in.
            let params = serde_json::json!({
                "notifications": { "resourceSubscriptions": [uri] }
            })
            .to_string();
            let (key, delivery) = self.gateway_request("subscriptions/listen", &params);
            self.listens.insert_gateway(uri, key);
            return Err(self.answer_now(empty_result(id), delivery));
        }
        Ok(Some(uri))
    }

    /// A port's `resources/unsubscribe`: upstream (`Ok(None)`) only when it was the last
    /// subscriber of a legacy server; else answered here.
    pub(super) fn unsubscribe(
        &mut self,
        port: PortId,
        message: &RawMessage,
        id: &RawValue,
    ) -> Result<Option<String>, RawMessage> {
        let Some(uri) = string_at(message, &["params", "uri"]) else {
            return Ok(None);
        };
        if !self.subscriptions.remove(&uri, Party::Port(port)) {
            return Err(empty_result(id));
        }
        if self.upstream_era == Era::Modern {
            let deliveries = self.unsubscribe_upstream(&uri);
            return Err(deliveries
                .into_iter()
                .fold(empty_result(id), |answer, d| self.answer_now(answer, d)));
        }
        Ok(None)
    }

    /// Ends the gateway's own upstream interest in `uri`.
    pub(super) fn unsubscribe_upstream(&mut self, uri: &str) -> Vec<Delivery> {
        match self.upstream_era {
            Era::Legacy => {
                let params = serde_json::json!({ "uri": uri }).to_string();
                vec![self.gateway_request("resources/unsubscribe", &params).1]
            }
            Era::Modern => match self.listens.take_gateway(uri) {
                Some(key) => vec![cancelled(&key, "no client is subscribed any more")],
                None => Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::router::{Accepted, Origin, PortCapabilities};

    #[test]
    fn the_first_subscribes_and_the_last_unsubscribes() {
        let mut s = Subscriptions::default();
        assert!(s.add("a", Party::Port(1)));
        assert!(!s.add("a", Party::Port(2)));
        assert!(!s.add("a", Party::Port(2)), "twice is once");
        assert!(!s.remove("a", Party::Port(1)));
        assert!(!s.remove("a", Party::Port(1)), "not held any more");
        assert!(s.parties("a").is_some());
        assert!(s.remove("a", Party::Port(2)));
        assert!(s.parties("a").is_none());
        assert!(!s.remove("a", Party::Port(2)));
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn a_leaving_port_ends_only_what_it_held_alone() {
        let mut s = Subscriptions::default();
        s.add("b", Party::Port(1));
        s.add("a", Party::Port(1));
        s.add("c", Party::Port(1));
        s.add("c", Party::Rmcp);
        s.add("d", Party::Port(2));
        assert_eq!(s.remove_port(1), ["a", "b"]);
        assert_eq!(
            s.parties("c").unwrap().iter().copied().collect::<Vec<_>>(),
            [Party::Rmcp]
        );
        assert_eq!(s.len(), 2);
        assert!(s.remove_port(1).is_empty());
    }

    #[test]
    fn parties_come_rmcp_first_then_ports_in_order() {
        let mut s = Subscriptions::default();
        for party in [Party::Port(3), Party::Rmcp, Party::Port(1)] {
            s.add("u", party);
        }
        assert_eq!(
            s.parties("u").unwrap().iter().copied().collect::<Vec<_>>(),
            [Party::Rmcp, Party::Port(1), Party::Port(3)]
        );
        assert!(s.parties("v").is_none());
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
}
