//! Who hears a notification from the server.
//!
//! - A notification tied to a forwarded `subscriptions/listen` (its `_meta` names the listen's
//!   upstream id) goes to that listen's stream, the client's own id restored.
//! - Progress goes to the request its token belongs to, the client's token restored; an
//!   unknown token is rmcp's (which ignores what it does not know).
//! - A cancellation of a server request goes to the stream it was routed to.
//! - `notifications/message` on one request's HTTP response stream goes to that request (a
//!   modern client's only at the level it asked for); elsewhere to every legacy port at its
//!   own level, and to rmcp.
//! - `resources/updated` reaches only the subscribers of its URI.
//! - Anything else (list changes and the rest) reaches every listen that asked for it, every
//!   legacy port and rmcp.

use mcpapp_manifest::Era;

use super::listens::restore_subscription_id;
use super::ports::{PortEntry, heard_at, level_rank};
use super::requests::Progress;
use super::server_requests::Owner;
use super::subscriptions::Party;
use super::{Delivery, Origin, Router, string_at};
use crate::raw::RawMessage;

impl Router {
    pub(super) fn upstream_notification(
        &mut self,
        mut message: RawMessage,
        origin: &Origin,
    ) -> Vec<Delivery> {
        let method = message.method().unwrap_or_default();
        // A notification of a port's `subscriptions/listen` (modern on modern).
        if let Some(stream) =
            restore_subscription_id(&self.requests, &mut message, &["params", "_meta"])
        {
            return vec![Delivery::Request {
                request: stream,
                message,
                last: false,
            }];
        }
        match method.as_str() {
            "notifications/progress" => match self.requests.restore_progress(&mut message) {
                Progress::Stream(stream) => vec![Delivery::Request {
                    request: stream,
                    message,
                    last: false,
                }],
                Progress::Unknown => vec![Delivery::Rmcp(message)],
                Progress::Unwritable => Vec::new(),
            },
            "notifications/cancelled" => {
                let id = message
                    .path(&["params", "requestId"])
                    .map(super::ids::key_of);
                match id.and_then(|id| self.server_requests.remove(&id)) {
                    Some(Owner::Port { request, .. }) => vec![Delivery::Request {
                        request: self.requests.stream_of(&request),
                        message,
                        last: false,
                    }],
                    _ => vec![Delivery::Rmcp(message)],
                }
            }
            "notifications/message" => self.log_message(message, origin),
            "notifications/resources/updated" => self.resource_updated(message),
            _ => {
                let mut out = self.to_listens(&message, &method);
                out.extend(self.broadcast_to(message, |_| true));
                out
            }
        }
    }

    /// `notifications/message`: to the request whose stream it came on, else to everyone at
    /// their level.
    fn log_message(&self, message: RawMessage, origin: &Origin) -> Vec<Delivery> {
        let rank = || {
            string_at(&message, &["params", "level"])
                .as_deref()
                .and_then(level_rank)
        };
        match origin {
            Origin::Post(key) if self.requests.contains(key) => {
                let Some(pending) = self.requests.get(key) else {
                    return Vec::new();
                };
                // A modern client hears its request's log messages only at the level it
                // asked for (a legacy upstream does not know that level).
                if pending.modern_client
                    && self.upstream_era == Era::Legacy
                    && (pending.log_level.is_none() || !heard_at(pending.log_level, rank()))
                {
                    return vec![Delivery::Drop {
                        reason: "a log message the client did not ask for".to_owned(),
                    }];
                }
                vec![Delivery::Request {
                    request: pending.stream.clone(),
                    message,
                    last: false,
                }]
            }
            Origin::Post(key) if self.gateway.in_flight(key) => vec![Delivery::Rmcp(message)],
            _ => {
                let rank = rank();
                self.broadcast_to(message, |entry| heard_at(entry.level, rank))
            }
        }
    }

    /// `resources/updated`: to the subscribers of its URI (ports, listens served here, rmcp).
    fn resource_updated(&self, message: RawMessage) -> Vec<Delivery> {
        let Some(uri) = string_at(&message, &["params", "uri"]) else {
            return vec![Delivery::Rmcp(message)];
        };
        let Some(parties) = self.subscriptions.parties(&uri) else {
            // Nobody here subscribed: only rmcp hears it (and ignores it).
            return vec![Delivery::Rmcp(message)];
        };
        let mut out = Vec::new();
        let mut rmcp = false;
        for party in parties {
            match party {
                Party::Rmcp => rmcp = true,
                Party::Port(port) => {
                    let listening = self.listens.of(*port, &uri);
                    if listening.is_empty() {
                        out.push(Delivery::Port {
                            port: *port,
                            message: message.clone(),
                        });
                    }
                    out.extend(
                        listening
                            .iter()
                            .filter_map(|stream| self.listens.tagged(stream, &message)),
                    );
                }
            }
        }
        if rmcp {
            out.push(Delivery::Rmcp(message));
        }
        out
    }

    /// Every legacy port `wants` (in port order), then rmcp.
    fn broadcast_to(
        &self,
        message: RawMessage,
        wants: impl Fn(&PortEntry) -> bool,
    ) -> Vec<Delivery> {
        let mut out: Vec<Delivery> = self
            .ports
            .legacy_listeners(wants)
            .into_iter()
            .map(|port| Delivery::Port {
                port,
                message: message.clone(),
            })
            .collect();
        out.push(Delivery::Rmcp(message));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::router::PortCapabilities;
    use expect_test::expect;

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
                expect![[r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tokA","progress":1}}"#]].assert_eq(message.as_str());
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
    fn session_notifications_reach_every_port_and_rmcp() {
        let mut r = Router::default();
        r.open_port(1, legacy(PortCapabilities::default()));
        r.open_port(2, legacy(PortCapabilities::default()));
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            &Origin::Post("1".into()),
        );
        assert_eq!(ports_of(&d), [1, 2]);
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
    fn a_modern_client_hears_its_requests_log_messages_at_the_level_it_asked_for() {
        let mut r = legacy_upstream_with_caps();
        r.open_port(1, modern_port(PortCapabilities::default()));
        let request = |id: u32, level: Option<&str>| {
            let meta = level.map_or(String::new(), |l| {
                format!(r#","params":{{"_meta":{{"io.modelcontextprotocol/logLevel":"{l}"}}}}"#)
            });
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"{meta}}}"#
            ))
        };
        let log = |level: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"{level}","data":"x"}}}}"#
            ))
        };
        let (quiet, _) = r
            .port_request(1, request(1, None))
            .map(Accepted::into_parts)
            .unwrap();
        let (warned, _) = r
            .port_request(1, request(2, Some("warning")))
            .map(Accepted::into_parts)
            .unwrap();
        let heard = |r: &mut Router, level: &str, key: &String| {
            let d = r.upstream(log(level), &Origin::Post(key.clone()));
            matches!(&d[..], [Delivery::Request { .. }])
        };
        assert!(!heard(&mut r, "error", &quiet), "asked for no log messages");
        assert!(heard(&mut r, "error", &warned));
        assert!(!heard(&mut r, "info", &warned));
    }
}
