//! Server-to-client requests (elicitation, sampling, roots, pings): who answers each, and who
//! may.
//!
//! The three rules (docs/architecture.md, "One upstream session per app"):
//! 1. on an HTTP response stream, the cause is that stream's request: its port gets it if it
//!    declared the capability, otherwise the gateway answers with an error that says the
//!    causing session did not declare it; what rmcp's own requests caused goes to rmcp;
//! 2. where the wire names no cause (stdio, the standalone GET stream), it goes to the one
//!    port that has requests in flight and declared the capability (to its newest request);
//! 3. otherwise rmcp answers when it has requests in flight (they may be the cause) or for
//!    `roots/list` (the gateway exposes no roots), and else the gateway answers with an error
//!    naming why no session could (none capable and busy, or several).
//!
//! A port may answer only the server requests routed to it; [`ServerRequests`] remembers who
//! owes each answer.

use std::collections::HashMap;

use mcpapp_manifest::Era;

use super::errors::Failure;
use super::gateway::Gateway;
use super::ids::{Key, PortId, key_of};
use super::ports::Ports;
use super::requests::Requests;
use super::{Delivery, Origin, Router};
use crate::raw::{RawMessage, raw_string};

/// Who owes the answer to a server request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
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

/// The server requests waiting for an answer, by id.
#[derive(Debug, Default)]
pub(crate) struct ServerRequests {
    owners: HashMap<Key, Owner>,
}

impl ServerRequests {
    pub(crate) fn insert(&mut self, id: Key, owner: Owner) {
        self.owners.insert(id, owner);
    }

    pub(crate) fn get(&self, id: &Key) -> Option<&Owner> {
        self.owners.get(id)
    }

    pub(crate) fn remove(&mut self, id: &Key) -> Option<Owner> {
        self.owners.remove(id)
    }

    /// Forgets what `port` owes; returns the ids it owed directly (which the server is still
    /// waiting for), the inputs of its rounds going with their calls.
    pub(crate) fn release_port(&mut self, port: PortId) -> Vec<Key> {
        let owed: Vec<Key> = self
            .owners
            .iter()
            .filter(|(_, owner)| {
                matches!(owner, Owner::Port { port: p, .. } | Owner::Round { port: p, .. } if *p == port)
            })
            .map(|(key, _)| key.clone())
            .collect();
        owed.into_iter()
            .filter(|key| matches!(self.owners.remove(key), Some(Owner::Port { .. })))
            .collect()
    }

    /// Forgets the inputs of a stream's round (its call ended).
    pub(crate) fn end_stream(&mut self, stream: &Key) {
        self.owners
            .retain(|_, owner| !matches!(owner, Owner::Round { stream: s, .. } if s == stream));
    }

    pub(crate) fn len(&self) -> usize {
        self.owners.len()
    }
}

/// Where a server request goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// To the port whose request (by upstream id) caused it.
    Port { port: PortId, request: Key },
    /// To rmcp's handler; `cause` is the request of rmcp's that caused it, when known.
    Rmcp { cause: Option<Key> },
    /// The gateway answers with an error: nobody here can.
    Refuse(String),
}

/// Methods a server may call only on clients that declared a capability for them.
fn is_client_capability(method: &str) -> bool {
    matches!(
        method,
        "elicitation/create" | "sampling/createMessage" | "roots/list"
    )
}

/// The three rules: where a server request of `method` that arrived at `origin` goes.
pub(crate) fn route(
    origin: &Origin,
    method: &str,
    requests: &Requests,
    ports: &Ports,
    rmcp: &Gateway,
) -> Route {
    let routed = match origin {
        Origin::Post(key) => match requests.get(key) {
            Some(pending) => {
                let port = pending.port;
                if ports.allows(port, method) {
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
        Origin::Stdio | Origin::Get => ports.sole_capable(method).map_err(Some),
    };
    // What rmcp answers, it answers for the request that caused it, when that is known.
    let cause = match origin {
        Origin::Post(key) if rmcp.in_flight(key) => Some(key.clone()),
        Origin::Stdio | Origin::Get => rmcp.sole_request(),
        Origin::Post(_) => None,
    };
    match routed {
        Ok((port, request)) => Route::Port { port, request },
        Err(None) => Route::Rmcp { cause },
        // The gateway's own client answers pings and methods it may know better, and
        // anything while its own requests are in flight (they may be the cause).
        // `roots/list` is answered by it too: the gateway exposes no roots.
        Err(Some(_)) if !is_client_capability(method) || method == "roots/list" || rmcp.busy() => {
            Route::Rmcp { cause }
        }
        Err(Some(why)) => Route::Refuse(why),
    }
}

impl Router {
    /// A request from the server: to the party the rules name.
    pub(super) fn upstream_request(
        &mut self,
        mut message: RawMessage,
        origin: &Origin,
    ) -> Vec<Delivery> {
        let Some(id) = message.id().map(key_of) else {
            return vec![Delivery::Drop {
                reason: "a request without an id".to_owned(),
            }];
        };
        let method = message.method().unwrap_or_default();
        match route(origin, &method, &self.requests, &self.ports, &self.gateway) {
            Route::Port { port, request } if self.ports.era(port) == Era::Modern => {
                self.hold_for_input(port, &request, id, &method, &message)
            }
            Route::Port { port, request } => {
                let stream = self.requests.stream_of(&request);
                self.server_requests
                    .insert(id, Owner::Port { port, request });
                vec![Delivery::Request {
                    request: stream,
                    message,
                    last: false,
                }]
            }
            Route::Rmcp { cause } => {
                if let Some(cause) = cause {
                    let _ = message.set_path(
                        &["params", "_meta", crate::elicit::CAUSE_META],
                        &raw_string(&cause),
                    );
                }
                self.server_requests.insert(id, Owner::Rmcp);
                vec![Delivery::Rmcp(message)]
            }
            Route::Refuse(why) => vec![Delivery::Upstream {
                message: Failure::NobodyCanAnswer {
                    method: &method,
                    why: &why,
                }
                .answer(message.id()),
                request: None,
            }],
        }
    }

    /// A response from a port, to a server request: only the one it owes goes on.
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
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::router::{PortCapabilities, PortSpec};

    #[test]
    fn what_a_port_owes_is_released_with_it() {
        let mut s = ServerRequests::default();
        s.insert(
            "1".into(),
            Owner::Port {
                port: 1,
                request: "a".into(),
            },
        );
        s.insert(
            "2".into(),
            Owner::Round {
                port: 1,
                stream: "b".into(),
                input: "i".into(),
            },
        );
        s.insert(
            "3".into(),
            Owner::Port {
                port: 2,
                request: "c".into(),
            },
        );
        s.insert("4".into(), Owner::Rmcp);
        assert_eq!(s.release_port(1), ["1"]);
        assert_eq!(s.len(), 2);
        s.insert(
            "5".into(),
            Owner::Round {
                port: 2,
                stream: "d".into(),
                input: "i".into(),
            },
        );
        s.end_stream(&"d".to_owned());
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(&"4".to_owned()), Some(Owner::Rmcp));
    }

    #[test]
    fn the_rules_route_by_origin_capability_and_business() {
        let mut ports = Ports::default();
        let elicitation_only = PortCapabilities {
            elicitation: true,
            ..PortCapabilities::default()
        };
        ports.open(1, legacy(elicitation_only));
        ports.open(2, PortSpec::default());
        let mut requests = Requests::default();
        let mut ids = super::super::ids::Ids::default();
        let mut add = |port, requests: &mut Requests, ports: &mut Ports| {
            let mut m = msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
            let (key, _) = requests.rewrite(&mut ids, port, &mut m);
            requests.insert(key.clone(), pending_for(port, &key));
            ports.add_in_flight(port, key.clone());
            key
        };
        let k1 = add(1, &mut requests, &mut ports);
        let k2 = add(2, &mut requests, &mut ports);
        let mut rmcp = Gateway::default();
        let elicit = "elicitation/create";
        // Rule 1.
        let at = |key: &Key| Origin::Post(key.clone());
        assert_eq!(
            route(&at(&k1), elicit, &requests, &ports, &rmcp),
            Route::Port {
                port: 1,
                request: k1.clone()
            }
        );
        assert!(matches!(
            route(&at(&k2), elicit, &requests, &ports, &rmcp),
            Route::Refuse(why) if why.contains("did not declare")
        ));
        assert_eq!(
            route(&at(&"7".to_owned()), elicit, &requests, &ports, &rmcp),
            Route::Rmcp { cause: None }
        );
        // Rule 2.
        assert_eq!(
            route(&Origin::Stdio, elicit, &requests, &ports, &rmcp),
            Route::Port {
                port: 1,
                request: k1
            }
        );
        // Rule 3: nobody capable, rmcp idle, then busy; pings and roots are always rmcp's.
        assert!(matches!(
            route(
                &Origin::Get,
                "sampling/createMessage",
                &requests,
                &ports,
                &rmcp
            ),
            Route::Refuse(_)
        ));
        assert_eq!(
            route(&Origin::Get, "roots/list", &requests, &ports, &rmcp),
            Route::Rmcp { cause: None }
        );
        assert_eq!(
            route(&Origin::Get, "ping", &requests, &ports, &rmcp),
            Route::Rmcp { cause: None }
        );
        rmcp.note_request("3".to_owned(), Some("tools/call"));
        assert_eq!(
            route(
                &Origin::Get,
                "sampling/createMessage",
                &requests,
                &ports,
                &rmcp
            ),
            Route::Rmcp {
                cause: Some("3".to_owned())
            }
        );
        assert_eq!(
            route(&at(&"3".to_owned()), elicit, &requests, &ports, &rmcp),
            Route::Rmcp {
                cause: Some("3".to_owned())
            }
        );
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
    fn rmcps_answers_settle_what_it_owes() {
        let mut r = Router::default();
        r.rmcp_outgoing(msg(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#));
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":5,"method":"elicitation/create","params":{}}"#),
            &Origin::Post("3".into()),
        );
        let [Delivery::Rmcp(asked)] = &d[..] else {
            panic!("{d:?}")
        };
        assert!(asked.as_str().contains(r#""io.mcpapp/cause":"3""#));
        assert_eq!(r.sizes().server_requests, 1);
        r.rmcp_outgoing(msg(
            r#"{"jsonrpc":"2.0","id":5,"result":{"action":"decline"}}"#,
        ));
        assert_eq!(r.sizes().server_requests, 0);
    }
}
