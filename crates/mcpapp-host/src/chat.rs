//! `POST /apps/chat`: a chat turn streamed as server-sent events.
//!
//! The body is `{message, sessionId?, appEvents?, modelContext?}`; the response is
//! `text/event-stream` with one `data: <json>` frame per agent event (`session`, `text`,
//! `tool`, `tool_result`, `error`, `result`, `done`), keep-alive comments while idle, and the
//! turn is cancelled when the client goes away. Elicitations of the turn's calls come on the
//! same stream, between those events: `elicitation` (answered with
//! `POST /apps/chat/elicitation/{id}`) and `elicitation_closed` (see `elicitation/`).
//!
//! An `Mcpapp-Affinity` header is the session id (see `replica.rs`); the response's
//! `Mcpapp-Affinity` names the turn's session id.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{StreamExt, stream};
use mcpapp_agent::{Agent, TurnRequest};
use mcpapp_supervisor::Supervisor;
use serde_json::json;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::config::KEEP_ALIVE;
use crate::elicitation::{ElicitationBroker, Timeouts};
use crate::replica::{AFFINITY_HEADER, affinity_key, is_affinity_key};

/// What a chat turn needs: the agent, the broker its calls' elicitations go through, and
/// how long each app's may wait.
#[derive(Clone)]
pub(crate) struct ChatState {
    pub(crate) agent: Agent,
    pub(crate) elicitations: ElicitationBroker,
    /// The apps, for their request timeouts.
    pub(crate) supervisor: Supervisor,
    /// The host's cap on an elicitation's wait (`HostConfig::elicitation_timeout`).
    pub(crate) elicitation_timeout: Option<Duration>,
}

fn bad_request(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": message })),
    )
        .into_response()
}

/// `POST /apps/chat`.
pub(crate) async fn chat(
    State(state): State<ChatState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if body.iter().all(u8::is_ascii_whitespace) {
        return bad_request("the request body is empty: send {\"message\": \"...\"}");
    }
    let mut request: TurnRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(err) => return bad_request(&format!("the request body is not valid JSON: {err}")),
    };
    // Behind a balancer the affinity key is the session id: a turn without `sessionId`
    // continues (or starts) the key's session, and one that names another session is
    // refused, because the balancer routed it by the key and the session may live elsewhere.
    match affinity_key(&headers) {
        Err(problem) => return bad_request(&problem),
        Ok(Some(key)) => match request.session_id.as_deref().map(str::trim) {
            None | Some("") => request.session_id = Some(key.to_owned()),
            Some(id) if id == key => {}
            Some(_) => {
                return bad_request(
                    "sessionId and the Mcpapp-Affinity header differ: the affinity key is the chat session id",
                );
            }
        },
        Ok(None) => {}
    }
    if let Err(err) = request.prompt() {
        return bad_request(&format!("nothing to say: {err}"));
    }
    let cancel = CancellationToken::new();
    // When the client disconnects, axum drops this stream, the guard with it, and the turn is
    // cancelled.
    let guard = cancel.clone().drop_guard();
    let turn = state.agent.run_turn(request, cancel);
    let session_id = turn.session_id().to_owned();
    // While the turn streams, elicitations of its calls are asked on this stream; the
    // attachment ends with it (a sentinel after the turn's last event ends the merge).
    let (attachment, asks) = state
        .elicitations
        .attach(turn.session_id(), timeouts(&state));
    let agent_events = turn
        .map(|event| {
            Some(serde_json::to_string(&event).unwrap_or_else(|e| {
                json!({ "type": "error", "error": format!("unserialisable event: {e}") })
                    .to_string()
            }))
        })
        .chain(stream::once(async { None }));
    let elicitations = UnboundedReceiverStream::new(asks).map(|event| Some(event.to_string()));
    let events = stream::select(agent_events, elicitations)
        .take_while(|data| std::future::ready(data.is_some()))
        .filter_map(std::future::ready)
        .map(move |data| {
            let _keep = (&guard, &attachment);
            Ok::<_, Infallible>(Event::default().data(data))
        });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    // The key to send from now on, for a client that let the gateway pick the session id.
    if let Ok(key) = HeaderValue::from_str(&session_id)
        && is_affinity_key(&session_id)
    {
        response.headers_mut().insert(AFFINITY_HEADER, key);
    }
    response
}

/// How long each app's elicitations may wait for this stream's page.
fn timeouts(state: &ChatState) -> Timeouts {
    Timeouts {
        per_app: state
            .supervisor
            .list()
            .iter()
            .filter_map(|app| Some((app.id().to_owned(), app.spec()?.request_timeout)))
            .collect(),
        cap: state.elicitation_timeout,
    }
}
