//! Input rounds between eras: a server request in one era is an input-required result in the
//! other (2026-07-28, SEP-2322), both ways.
//!
//! - A *legacy port on a modern upstream*: an input-required result becomes server requests to
//!   the port on its call's stream (ids `"gwsr:{n}"`), one per input; when every answer is in,
//!   the call goes upstream again under a new id with the answers and the `requestState`
//!   ([`Round`]). An error answer fails the call with the client's error.
//! - A *modern port on a legacy upstream*: a server request its call causes is held, and the
//!   client gets an input-required result whose `requestState` is an unguessable handle
//!   naming the held call; its retry, echoing the handle, answers the server and carries the
//!   call on under the retry's id.

use std::collections::{BTreeSet, HashMap};

use serde_json::value::RawValue;

use super::errors::Failure;
use super::ids::{Key, PortId, handle};
use super::server_requests::Owner;
use super::{Accepted, Delivery, Router};
use crate::era;
use crate::raw::{RawMessage, raw_json};

/// Rounds a modern upstream may ask for in one call (as rmcp's client allows).
pub(crate) const MAX_ROUNDS: u32 = 10;

/// An input-required round of a modern upstream, answered by a legacy port.
#[derive(Debug)]
pub(crate) struct Round {
    /// The upstream id of the attempt that asked.
    upstream: Key,
    awaiting: BTreeSet<String>,
    responses: serde_json::Map<String, serde_json::Value>,
    request_state: Option<Box<RawValue>>,
    /// Which round of the call this is (from 1).
    rounds: u32,
}

impl Round {
    /// The retry of `sent` under `id` with this round's answers and state.
    fn retry_of(&self, sent: &RawMessage, id: &RawValue) -> RawMessage {
        let mut message = sent.clone();
        message.set_id(id);
        let responses = serde_json::Value::Object(self.responses.clone());
        let _ = message.set_path(
            &["params", "inputResponses"],
            &raw_json(responses.to_string()),
        );
        match &self.request_state {
            Some(state) => {
                let _ = message.set_path(&["params", "requestState"], state);
            }
            None => {
                message.remove_path(&["params", "requestState"]);
            }
        }
        message
    }
}

/// The server request asking a legacy port for one input.
fn input_request(id: &Key, method: &str, params: Option<serde_json::Value>) -> Option<RawMessage> {
    let mut request = serde_json::json!({
        "jsonrpc": "2.0",
        "id": serde_json::from_str::<serde_json::Value>(id).unwrap_or_default(),
        "method": method,
    });
    if let Some(params) = params {
        request["params"] = params;
    }
    RawMessage::from_value(&request).ok()
}

/// The end of a call whose client refused an input: its own error under the call's id.
fn refused(id: Option<Box<RawValue>>, error: Option<Box<RawValue>>) -> RawMessage {
    let fallback = || Failure::InputRefused.answer(None);
    match (id, error) {
        (Some(id), Some(error)) => RawMessage::parse(format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
            id.get(),
            error.get()
        ))
        .unwrap_or_else(|_| fallback()),
        _ => fallback(),
    }
}

/// The last message of a call's stream: an error under the client's id.
fn fail(stream: Key, original_id: &RawValue, reason: &str) -> Delivery {
    Delivery::Request {
        request: stream,
        message: Failure::RoundFailed { reason }.answer(Some(original_id)),
        last: true,
    }
}

/// The rounds of both directions.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    /// Rounds waiting for a legacy port's answers, by stream.
    open: HashMap<Key, Round>,
    /// Input-required rounds already run, per stream.
    done: HashMap<Key, u32>,
    /// `requestState` handle → held stream, for modern clients' retries.
    held: HashMap<String, Key>,
    /// The server requests of held calls (`(method, params)`), to ask again.
    held_requests: HashMap<Key, (String, Option<Box<RawValue>>)>,
    /// Makes `requestState` handles unguessable (the hub seeds it).
    secret: [u64; 2],
}

impl Rounds {
    pub(crate) fn with_secret(secret: [u64; 2]) -> Self {
        Self {
            secret,
            ..Self::default()
        }
    }

    /// Forgets a stream's open round and how many it ran (its call ended).
    pub(crate) fn end_stream(&mut self, stream: &Key) {
        self.open.remove(stream);
        self.done.remove(stream);
    }

    /// A held call ended without its client's retry: forgets it.
    fn release_held(&mut self, stream: &Key, server_request: &Key) {
        self.held.retain(|_, s| s != stream);
        self.held_requests.remove(server_request);
    }

    /// How many entries each table holds: open rounds, round counts, held handles, held
    /// server requests.
    pub(crate) fn sizes(&self) -> (usize, usize, usize, usize) {
        (
            self.open.len(),
            self.done.len(),
            self.held.len(),
            self.held_requests.len(),
        )
    }
}

impl Router {
    /// A modern upstream asked a legacy port's request for input: each input becomes a server
    /// request to the port on that request's stream.
    pub(super) fn start_round(&mut self, key: &Key, message: &RawMessage) -> Vec<Delivery> {
        let Some(pending) = self.requests.get(key) else {
            return Vec::new();
        };
        let stream = pending.stream.clone();
        let port = pending.port;
        let Some(result) = message.member("result").map(ToOwned::to_owned) else {
            return Vec::new();
        };
        let done = self.rounds.done.get(&stream).copied().unwrap_or(0);
        let original_id = pending.original_id.clone();
        if done >= MAX_ROUNDS {
            self.end_request(key);
            let reason =
                format!("the app asked for input more than {MAX_ROUNDS} times in one call");
            return vec![fail(stream, &original_id, &reason)];
        }
        let state = serde_json::from_str::<serde_json::Value>(result.get())
            .ok()
            .and_then(|r| r.get("requestState").cloned())
            .map(|s| raw_json(s.to_string()));
        let capabilities = self
            .ports
            .get(port)
            .map(|e| e.spec.capabilities)
            .unwrap_or_default();
        let mut out = Vec::new();
        let mut awaiting = BTreeSet::new();
        for (input, method, params) in era::input_requests(&result) {
            if !capabilities.allows(&method) {
                self.end_request(key);
                let reason =
                    format!("the app needs {method}, which this client session did not declare");
                return vec![fail(stream, &original_id, &reason)];
            }
            let id = self.ids.server_request();
            let Some(request) = input_request(&id, &method, params) else {
                continue;
            };
            let owner = Owner::Round {
                port,
                stream: stream.clone(),
                input: input.clone(),
            };
            self.server_requests.insert(id, owner);
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
            out.extend(self.retry_upstream(&stream, &round));
        } else {
            self.rounds.open.insert(stream, round);
        }
        out
    }

    /// One answer of a legacy port to a modern upstream's input request; when all are in, the
    /// request goes upstream again with them.
    pub(super) fn answer_round(
        &mut self,
        stream: &Key,
        input: &str,
        message: &RawMessage,
    ) -> Vec<Delivery> {
        let Some(round) = self.rounds.open.get_mut(stream) else {
            return Vec::new();
        };
        round.awaiting.remove(input);
        let Some(result) = message.member("result") else {
            // Input responses cannot carry errors: the call fails with the client's.
            let error = message.member("error").map(ToOwned::to_owned);
            let upstream = round.upstream.clone();
            let id = self.requests.get(&upstream).map(|p| p.original_id.clone());
            self.end_request(&upstream);
            return vec![Delivery::Request {
                request: stream.clone(),
                message: refused(id, error),
                last: true,
            }];
        };
        let value = serde_json::from_str(result.get()).unwrap_or_default();
        round.responses.insert(input.to_owned(), value);
        if !round.awaiting.is_empty() {
            return Vec::new();
        }
        let Some(round) = self.rounds.open.remove(stream) else {
            return Vec::new();
        };
        self.retry_upstream(stream, &round)
    }

    /// Sends the request of `stream` upstream again with the round's answers, under a new id.
    fn retry_upstream(&mut self, stream: &Key, round: &Round) -> Vec<Delivery> {
        let Some(pending) = self.requests.get(&round.upstream) else {
            return Vec::new();
        };
        let Some(sent) = pending.sent.clone() else {
            return Vec::new();
        };
        let port = pending.port;
        let (key, key_value, _) = self.ids.port_request(port);
        let message = round.retry_of(&sent, &key_value);
        if let Some(pending) = self.requests.get_mut(&round.upstream) {
            pending.sent = Some(message.clone());
        }
        self.ports.replace_in_flight(port, &round.upstream, &key);
        self.requests.move_to(&round.upstream, &key);
        self.rounds.done.insert(stream.clone(), round.rounds);
        vec![Delivery::Upstream {
            message,
            request: Some(key),
        }]
    }

    /// A legacy server asks a modern client's call for input: the call is held, and the client
    /// gets an input-required answer whose `requestState` names the held call.
    pub(super) fn hold_for_input(
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
        let handle = handle(self.rounds.secret, self.ids.next());
        self.rounds.held.insert(handle.clone(), stream.clone());
        let params = message.member("params").map(ToOwned::to_owned);
        self.rounds
            .held_requests
            .insert(server_request.clone(), (method.to_owned(), params.clone()));
        self.server_requests.insert(
            server_request,
            Owner::Held {
                stream: stream.clone(),
            },
        );
        // The client's exchange ends here; the held call belongs to no port until the retry.
        self.ports.remove_in_flight(port, request);
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

    /// A modern client's retry of a call held for its input (legacy upstream): its answer goes
    /// to the server request waiting for it, and the call carries on on the retry's stream.
    pub(super) fn resume_held(
        &mut self,
        port: PortId,
        handle: &str,
        message: &RawMessage,
        retry_id: &RawValue,
    ) -> Result<Option<Accepted>, RawMessage> {
        let Some(stream) = self.rounds.held.get(handle).cloned() else {
            return Err(Failure::UnknownRequestState.answer(Some(retry_id)));
        };
        let method = message.method().unwrap_or_default();
        let Some(pending) = self.requests.get(&stream) else {
            self.rounds.held.remove(handle);
            return Err(Failure::HeldCallEnded.answer(Some(retry_id)));
        };
        if pending.method != method {
            return Err(Failure::StateOfAnotherRequest.answer(Some(retry_id)));
        }
        let Some(server_request) = pending.held.clone() else {
            return Ok(None);
        };
        let Some(answer) = message.path(&["params", "inputResponses", "input"]) else {
            // Nothing for the input yet: ask again, as the spec suggests.
            return Err(self.reask(&stream, handle, retry_id));
        };
        self.rounds.held.remove(handle);
        self.rounds.held_requests.remove(&server_request);
        self.server_requests.remove(&server_request);
        let pending = self
            .requests
            .get_mut(&stream)
            .ok_or_else(|| Failure::HeldCallVanished.answer(Some(retry_id)))?;
        pending.port = port;
        pending.original_id = retry_id.to_owned();
        pending.held = None;
        // Progress of the call is the retry's now, under the retry's token (or none).
        let token = message.get_path(&["params", "_meta", "progressToken"]);
        self.requests.retoken(&stream, token);
        self.ports.add_in_flight(port, stream.clone());
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
            .and_then(|s| self.rounds.held_requests.get(&s).cloned());
        match asked {
            Some((method, params)) => RawMessage::response(
                retry_id,
                &era::input_required("input", &method, params.as_deref(), handle),
            ),
            None => Failure::HeldCallVanished.answer(Some(retry_id)),
        }
    }

    /// A held call is given up: the server, still waiting for the client's input, is told it
    /// will not come.
    pub(super) fn give_up_held(
        &mut self,
        stream: &Key,
        server_request: &Key,
        reason: &str,
    ) -> Delivery {
        self.rounds.release_held(stream, server_request);
        self.server_requests.remove(server_request);
        Delivery::Upstream {
            message: Failure::NoInput { reason }.answer(Some(&raw_json(server_request.clone()))),
            request: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::raw::raw_string;
    use crate::router::{Origin, PortCapabilities, PortSpec};
    use expect_test::expect;

    #[test]
    fn a_retry_carries_the_answers_and_the_state_under_its_new_id() {
        let sent = msg(
            r#"{"jsonrpc":"2.0","id":"gw:1:1","method":"tools/call","params":{"name":"x","requestState":"old"}}"#,
        );
        let mut round = Round {
            upstream: r#""gw:1:1""#.to_owned(),
            awaiting: BTreeSet::new(),
            responses: serde_json::Map::new(),
            request_state: Some(raw_string("s2")),
            rounds: 1,
        };
        round
            .responses
            .insert("a".to_owned(), serde_json::json!({"action": "accept"}));
        expect![[r#"{"jsonrpc":"2.0","id":"gw:1:2","method":"tools/call","params":{"name":"x","requestState":"s2","inputResponses":{"a":{"action":"accept"}}}}"#]]
            .assert_eq(round.retry_of(&sent, &raw_string("gw:1:2")).as_str());
        round.request_state = None;
        expect![[r#"{"jsonrpc":"2.0","id":"gw:1:3","method":"tools/call","params":{"name":"x","inputResponses":{"a":{"action":"accept"}}}}"#]]
            .assert_eq(round.retry_of(&sent, &raw_string("gw:1:3")).as_str());
    }

    #[test]
    fn input_requests_and_refusals_are_well_formed() {
        let asked = input_request(
            &r#""gwsr:4""#.to_owned(),
            "roots/list",
            Some(serde_json::json!({})),
        )
        .unwrap();
        assert_eq!(
            asked.as_str(),
            r#"{"jsonrpc":"2.0","id":"gwsr:4","method":"roots/list","params":{}}"#
        );
        let refusal = refused(
            Some(raw_string("c")),
            Some(raw_json(r#"{"code":-1,"message":"no"}"#.to_owned())),
        );
        assert_eq!(
            refusal.as_str(),
            r#"{"jsonrpc":"2.0","id":"c","error":{"code":-1,"message":"no"}}"#
        );
        assert!(
            refused(None, None)
                .as_str()
                .contains("refused the app's request")
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
        // The state is spent, and nothing of the call is left.
        assert!(r.port_request(2, msg(&retry)).is_err());
        r.close_port(2, "exchange over");
        assert!(r.sizes().is_settled(), "{:?}", r.sizes());
    }

    /// A modern client's call with a progress token, held for `roots/list` on a legacy
    /// upstream; its upstream progress token and the `requestState` of its retry.
    fn held_call_with_a_token() -> (Router, String, String) {
        let mut r = legacy_upstream_with_caps();
        r.open_port(1, modern_port(all_caps()));
        let (k, d) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"first"}}}"#))
            .map(Accepted::into_parts)
            .unwrap();
        let sent: serde_json::Value = serde_json::from_str(&upstream_text(&d)[0]).unwrap();
        let token = sent["params"]["_meta"]["progressToken"].to_string();
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":50,"method":"roots/list"}"#),
            &Origin::Post(k),
        );
        let answer: serde_json::Value = serde_json::from_str(last_request(&d).1.as_str()).unwrap();
        let state = answer["result"]["requestState"]
            .as_str()
            .unwrap()
            .to_owned();
        r.close_port(1, "exchange over");
        r.open_port(2, modern_port(all_caps()));
        (r, token, state)
    }

    #[test]
    fn progress_of_a_resumed_call_goes_to_the_retry_under_its_own_token() {
        let progress = |token: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":1}}}}"#
            ))
        };
        let retry = |state: &str, meta: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"requestState":"{state}","inputResponses":{{"input":{{"roots":[]}}}},"_meta":{{{meta}}}}}}}"#
            ))
        };
        let (mut r, token, state) = held_call_with_a_token();
        r.port_request(2, retry(&state, r#""progressToken":"second""#))
            .unwrap();
        let d = r.upstream(progress(&token), &Origin::Stdio);
        let (_, message, _) = last_request(&d);
        assert!(
            message.as_str().contains(r#""progressToken":"second""#),
            "{}",
            message.as_str()
        );
        // A retry without a token hears no progress.
        let (mut r, token, state) = held_call_with_a_token();
        r.port_request(2, retry(&state, "")).unwrap();
        let d = r.upstream(progress(&token), &Origin::Stdio);
        assert!(matches!(&d[..], [Delivery::Rmcp(_)]), "{d:?}");
    }

    #[test]
    fn a_retry_without_the_input_is_asked_again_and_one_for_another_method_refused() {
        let mut r = legacy_upstream_with_caps();
        r.open_port(1, modern_port(all_caps()));
        let (k, _) = r
            .port_request(1, msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#))
            .map(Accepted::into_parts)
            .unwrap();
        let d = r.upstream(
            msg(r#"{"jsonrpc":"2.0","id":50,"method":"roots/list"}"#),
            &Origin::Post(k),
        );
        let (_, answer, _) = last_request(&d);
        let answer: serde_json::Value = serde_json::from_str(answer.as_str()).unwrap();
        let state = answer["result"]["requestState"].as_str().unwrap();
        let again = r
            .port_request(1, msg(&format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"requestState":"{state}"}}}}"#)))
            .unwrap_err();
        let again: serde_json::Value = serde_json::from_str(again.as_str()).unwrap();
        assert_eq!(again["id"], 2);
        assert_eq!(again["result"]["requestState"], state);
        assert_eq!(
            again["result"]["inputRequests"]["input"]["method"],
            "roots/list"
        );
        let other = r
            .port_request(1, msg(&format!(r#"{{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{{"requestState":"{state}"}}}}"#)))
            .unwrap_err();
        assert!(other.as_str().contains("belongs to another request"));
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

    /// A modern upstream, a legacy port with every capability and a call in flight.
    fn call_on_a_modern_upstream() -> (Router, Key) {
        let mut r = Router::with_secret([3, 4]);
        r.set_upstream_era(Era::Modern);
        r.open_port(1, legacy(all_caps()));
        let (k, _) = r
            .port_request(
                1,
                msg(r#"{"jsonrpc":"2.0","id":"c","method":"tools/call"}"#),
            )
            .map(Accepted::into_parts)
            .unwrap();
        (r, k)
    }

    fn input_required(key: &Key, inputs: &str) -> RawMessage {
        msg(&format!(
            r#"{{"jsonrpc":"2.0","id":{key},"result":{{"resultType":"input_required","inputRequests":{{{inputs}}},"requestState":"s"}}}}"#
        ))
    }

    #[test]
    fn a_call_that_ends_in_any_way_leaves_nothing_of_its_rounds() {
        // Its port closes during its second round.
        let (mut r, k) = call_on_a_modern_upstream();
        let elicit = r#""e":{"method":"elicitation/create","params":{}}"#;
        let d = r.upstream(input_required(&k, elicit), &Origin::Stdio);
        let asked = last_request(&d).1.id().unwrap().get().to_owned();
        let d = r.port_response(
            1,
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{asked},"result":{{}}}}"#
            )),
        );
        let retry = request_key(&d);
        r.upstream(input_required(&retry, elicit), &Origin::Stdio);
        r.close_port(1, "gone");
        assert!(r.sizes().is_settled(), "{:?}", r.sizes());
        // Its client refuses one of two inputs.
        let (mut r, k) = call_on_a_modern_upstream();
        let two = r#""e":{"method":"elicitation/create","params":{}},"r":{"method":"roots/list"}"#;
        let d = r.upstream(input_required(&k, two), &Origin::Stdio);
        let asked = last_request(&d).1.id().unwrap().get().to_owned();
        let d = r.port_response(
            1,
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{asked},"error":{{"code":-1,"message":"no"}}}}"#
            )),
        );
        assert!(last_request(&d).2);
        assert!(r.sizes().is_idle(), "{:?}", r.sizes());
        // The app asks for input once too often.
        let (mut r, k) = call_on_a_modern_upstream();
        let mut key = k;
        for _ in 0..MAX_ROUNDS {
            // Only a requestState: the call goes up again at once.
            key = request_key(&r.upstream(input_required(&key, ""), &Origin::Stdio));
        }
        let d = r.upstream(input_required(&key, ""), &Origin::Stdio);
        assert!(last_request(&d).1.as_str().contains("more than 10 times"));
        assert!(r.sizes().is_idle(), "{:?}", r.sizes());
    }

    #[test]
    fn an_input_the_port_cannot_answer_or_an_error_answer_fails_the_call() {
        let mut r = Router::with_secret([3, 4]);
        r.set_upstream_era(Era::Modern);
        r.open_port(1, legacy(PortCapabilities::default()));
        let (k, _) = r
            .port_request(
                1,
                msg(r#"{"jsonrpc":"2.0","id":"c","method":"tools/call"}"#),
            )
            .map(Accepted::into_parts)
            .unwrap();
        let ask = |k: &Key| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{k},"result":{{"resultType":"input_required","inputRequests":{{"f":{{"method":"elicitation/create","params":{{}}}}}}}}}}"#
            ))
        };
        let d = r.upstream(ask(&k), &Origin::Stdio);
        let (_, message, last) = last_request(&d);
        assert!(last);
        assert!(
            message.as_str().contains("did not declare"),
            "{}",
            message.as_str()
        );
        // A port that can, but says no.
        r.open_port(2, legacy(all_caps()));
        let (k, _) = r
            .port_request(
                2,
                msg(r#"{"jsonrpc":"2.0","id":"d","method":"tools/call"}"#),
            )
            .map(Accepted::into_parts)
            .unwrap();
        let d = r.upstream(ask(&k), &Origin::Stdio);
        let (_, asked, _) = last_request(&d);
        let asked_id = asked.id().unwrap().get().to_owned();
        let d = r.port_response(
            2,
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":{asked_id},"error":{{"code":-1,"message":"no"}}}}"#
            )),
        );
        let (stream, message, last) = last_request(&d);
        assert_eq!((stream, last), (&k, true));
        assert_eq!(
            message.as_str(),
            r#"{"jsonrpc":"2.0","id":"d","error":{"code":-1,"message":"no"}}"#
        );
    }
}
