//! The random steps of a session: what clients, the server, the gateway's rmcp client and the
//! hub can do, with every choice of "which one" an [`Index`] into what exists at that moment,
//! so that any sequence is valid and shrinks well.

use proptest::prelude::*;
use proptest::sample::Index;

/// What a client request asks (mapped to what its port's era can send).
#[derive(Debug, Clone)]
pub(super) enum Kind {
    Call,
    List,
    /// A legacy port subscribes to one of a few URIs (a modern one listens instead).
    Subscribe(u8),
    Unsubscribe(u8),
    SetLevel(u8),
    /// A modern port's `subscriptions/listen` (tool list changes, and a URI or none).
    Listen {
        tools: bool,
        uri: Option<u8>,
    },
}

/// How the server answers one of its requests.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Result,
    Error,
    /// Input-required (a modern server only), asking for the inputs whose bits are set
    /// (elicitation, sampling, roots); none means only a new `requestState`.
    InputRequired(u8),
}

/// Where a message from the server arrives.
#[derive(Debug, Clone)]
pub(super) enum Pick {
    Stdio,
    Get,
    /// On the response stream of one of the server's pending requests.
    Post(Index),
}

/// A notification from the server.
#[derive(Debug, Clone)]
pub(super) enum Note {
    ToolsChanged,
    PromptsChanged,
    Updated(u8),
    Message(u8),
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    /// A client session opens a port.
    Open {
        modern: bool,
        caps: u8,
    },
    /// A client session ends.
    Close(Index),
    /// A client sends a request.
    Request {
        port: Index,
        kind: Kind,
        token: bool,
    },
    /// A client drops its response stream before the end.
    Abandon(Index),
    /// The hub's deadline for a request runs out.
    Timeout(Index),
    /// A legacy client cancels its request (`notifications/cancelled`).
    ClientCancel(Index),
    Respond {
        request: Index,
        outcome: Outcome,
    },
    Progress {
        request: Index,
        on_stream: bool,
    },
    Notify {
        note: Note,
        origin: Pick,
        listen: Option<Index>,
    },
    /// A server-to-client request (legacy server): elicitation, sampling, roots or ping.
    Ask {
        method: u8,
        origin: Pick,
    },
    /// A legacy client answers a server request it got (or another port tries to).
    Answer {
        ask: Index,
        error: bool,
        impostor: Option<Index>,
    },
    /// A modern client retries a held call.
    Retry {
        held: Index,
        with_input: bool,
    },
    RmcpCall,
    RmcpCancel(Index),
    RmcpAnswer(Index),
    /// The app restarts: the upstream session is replaced (maybe by the other era).
    Restart {
        modern: bool,
    },
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Call),
        1 => Just(Kind::List),
        2 => (0u8..3).prop_map(Kind::Subscribe),
        1 => (0u8..3).prop_map(Kind::Unsubscribe),
        1 => (0u8..4).prop_map(Kind::SetLevel),
        2 => (any::<bool>(), proptest::option::of(0u8..3))
            .prop_map(|(tools, uri)| Kind::Listen { tools, uri }),
    ]
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        1 => Just(Pick::Stdio),
        1 => Just(Pick::Get),
        2 => any::<Index>().prop_map(Pick::Post),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        3 => Just(Outcome::Result),
        1 => Just(Outcome::Error),
        3 => (0u8..8).prop_map(Outcome::InputRequired),
    ]
}

fn note() -> impl Strategy<Value = Note> {
    prop_oneof![
        Just(Note::ToolsChanged),
        Just(Note::PromptsChanged),
        (0u8..3).prop_map(Note::Updated),
        (0u8..4).prop_map(Note::Message),
    ]
}

pub(super) fn op() -> impl Strategy<Value = Op> {
    // Weights out of 80: mostly requests, answers and server requests; a restart now and
    // then (one case in two or three has one), since it starts everything afresh.
    prop_oneof![
        6 => (any::<bool>(), 0u8..8).prop_map(|(modern, caps)| Op::Open { modern, caps }),
        2 => any::<Index>().prop_map(Op::Close),
        16 => (any::<Index>(), kind(), any::<bool>())
            .prop_map(|(port, kind, token)| Op::Request { port, kind, token }),
        2 => any::<Index>().prop_map(Op::Abandon),
        2 => any::<Index>().prop_map(Op::Timeout),
        2 => any::<Index>().prop_map(Op::ClientCancel),
        10 => (any::<Index>(), outcome()).prop_map(|(request, outcome)| Op::Respond { request, outcome }),
        4 => (any::<Index>(), any::<bool>())
            .prop_map(|(request, on_stream)| Op::Progress { request, on_stream }),
        6 => (note(), pick(), proptest::option::of(any::<Index>()))
            .prop_map(|(note, origin, listen)| Op::Notify { note, origin, listen }),
        8 => (0u8..4, pick()).prop_map(|(method, origin)| Op::Ask { method, origin }),
        8 => (any::<Index>(), any::<bool>(), proptest::option::weighted(0.2, any::<Index>()))
            .prop_map(|(ask, error, impostor)| Op::Answer { ask, error, impostor }),
        6 => (any::<Index>(), any::<bool>())
            .prop_map(|(held, with_input)| Op::Retry { held, with_input }),
        2 => Just(Op::RmcpCall),
        2 => any::<Index>().prop_map(Op::RmcpCancel),
        3 => any::<Index>().prop_map(Op::RmcpAnswer),
        1 => any::<bool>().prop_map(|modern| Op::Restart { modern }),
    ]
}

/// A case: a few ports open from the start (so the first steps find someone to act), then
/// up to 60 steps.
pub(super) fn ops() -> impl Strategy<Value = Vec<Op>> {
    let open = (any::<bool>(), 0u8..8).prop_map(|(modern, caps)| Op::Open { modern, caps });
    (
        prop::collection::vec(open, 0..4),
        prop::collection::vec(op(), 1..60),
    )
        .prop_map(|(mut first, then)| {
            first.extend(then);
            first
        })
}
