//! Every error the router answers on its own, in one place: each situation by name, with the
//! JSON-RPC code and the words it gets. (The hub's own, a timeout or a lost connection, are in
//! `hub.rs`; what a port answers before the router sees a request is in `port.rs`.)

use serde_json::value::RawValue;

use crate::raw::RawMessage;

/// JSON-RPC 2.0: the message is not a valid request.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC 2.0: the request's parameters are not valid.
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC 2.0: an error inside the receiver.
const INTERNAL_ERROR: i64 = -32603;

/// Why the router answers a request itself with an error.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Failure<'a> {
    /// A client's request has no id.
    NoId,
    /// A client's request came on a port that is closed.
    SessionClosed,
    /// A server request no client connected through the gateway can answer (`why`).
    NobodyCanAnswer { method: &'a str, why: &'a str },
    /// The client asked a server request has gone (`reason`).
    ClientGone { reason: &'a str },
    /// A held call's client will not give its input (`reason`).
    NoInput { reason: &'a str },
    /// A call fails in an input round (`reason`: too many rounds, an input the client cannot
    /// give).
    RoundFailed { reason: &'a str },
    /// The client refused an input and said nothing of why.
    InputRefused,
    /// A retry's `requestState` names no call held here.
    UnknownRequestState,
    /// A retry's `requestState` names a call that has ended.
    HeldCallEnded,
    /// A retry's `requestState` names a call of another method.
    StateOfAnotherRequest,
    /// A held call went while its retry was being taken.
    HeldCallVanished,
}

impl Failure<'_> {
    fn code(self) -> i64 {
        match self {
            Self::NoId => INVALID_REQUEST,
            Self::UnknownRequestState | Self::HeldCallEnded | Self::StateOfAnotherRequest => {
                INVALID_PARAMS
            }
            Self::SessionClosed
            | Self::NobodyCanAnswer { .. }
            | Self::ClientGone { .. }
            | Self::NoInput { .. }
            | Self::RoundFailed { .. }
            | Self::InputRefused
            | Self::HeldCallVanished => INTERNAL_ERROR,
        }
    }

    fn message(self) -> String {
        match self {
            Self::NoId => "a request needs an id".to_owned(),
            Self::SessionClosed => "this session is closed".to_owned(),
            Self::NobodyCanAnswer { method, why } => {
                format!("no client connected through the gateway can answer {method}: {why}")
            }
            Self::ClientGone { reason } => {
                format!("the client that was asked has gone: {reason}")
            }
            Self::NoInput { reason } => format!("the client did not answer: {reason}"),
            Self::RoundFailed { reason } => reason.to_owned(),
            Self::InputRefused => "the client refused the app's request".to_owned(),
            Self::UnknownRequestState => "requestState names no call waiting for input here (it ended, timed out or belongs to another gateway)".to_owned(),
            Self::HeldCallEnded => "the call this requestState belonged to has ended".to_owned(),
            Self::StateOfAnotherRequest => "requestState belongs to another request".to_owned(),
            Self::HeldCallVanished => "the held call vanished".to_owned(),
        }
    }

    /// The error response to the request `id` (none: JSON `null`).
    pub(crate) fn answer(self, id: Option<&RawValue>) -> RawMessage {
        RawMessage::error_response(id, self.code(), &self.message())
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;
    use crate::raw::raw_string;

    #[test]
    fn failures_are_json_rpc_errors_with_their_code_and_words() {
        let id = raw_string("c");
        expect![[r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a request needs an id"}}"#]]
            .assert_eq(Failure::NoId.answer(None).as_str());
        expect![[r#"{"jsonrpc":"2.0","id":"c","error":{"code":-32602,"message":"requestState belongs to another request"}}"#]]
            .assert_eq(Failure::StateOfAnotherRequest.answer(Some(&id)).as_str());
        let nobody = Failure::NobodyCanAnswer {
            method: "roots/list",
            why: "none declared it",
        };
        expect![[r#"{"jsonrpc":"2.0","id":"c","error":{"code":-32603,"message":"no client connected through the gateway can answer roots/list: none declared it"}}"#]]
            .assert_eq(nobody.answer(Some(&id)).as_str());
    }
}
