//! Elicitations of the agent's own tool calls, asked of the user of the chat session they
//! belong to: [`ElicitationBroker`], the supervisor's [`Elicitor`], and the route that takes the
//! page's answer, `POST /apps/chat/elicitation/{id}`.
//!
//! While a chat turn streams (`POST /apps/chat`), its stream is *attached* to the broker
//! under the turn's session id. An app that asks during that session's call (the
//! supervisor names the session in [`ElicitationRequest::session_id`]) is asked through the
//! first stream attached for it: the page receives `{"type":"elicitation","id","appId",
//! "params"}` and POSTs the `ElicitResult` to the route; the answer is checked against the
//! requested schema (`answer.rs`) and handed to the app. The elicitation is declined (and a line
//! logged) when no stream is attached for the session, when its stream ends first, and when
//! no answer comes within the app's request timeout (or the host's shorter
//! `elicitation_timeout`); the page then gets `{"type":"elicitation_closed","id","reason"}`
//! if it is still listening.

mod answer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mcpapp_session::{ElicitFuture, ElicitationRequest, Elicitor};
use mcpapp_supervisor::mcp::ElicitResult;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info};

/// How long to wait for an answer when the app's own request timeout is unknown.
const FALLBACK_TIMEOUT: Duration =
    Duration::from_secs(mcpapp_manifest::DEFAULT_REQUEST_TIMEOUT_SECONDS.unsigned_abs());

/// Asks the page of a chat session for the answers to elicitations of the agent's calls.
/// Cheap to clone; clones share their state. The gateway gives one to the supervisor as its
/// [`Elicitor`] and the same one to the chat routes.
#[derive(Clone, Default)]
pub(crate) struct ElicitationBroker {
    inner: Arc<Mutex<Broker>>,
}

impl std::fmt::Debug for ElicitationBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let broker = self.lock();
        f.debug_struct("ElicitationBroker")
            .field("attached_sessions", &broker.streams.len())
            .field("waiting", &broker.waiting.len())
            .finish()
    }
}

#[derive(Default)]
struct Broker {
    /// Attached chat streams by session id, in the order they were attached.
    streams: HashMap<String, Vec<Stream>>,
    /// Elicitations waiting for the page's answer, by id.
    waiting: HashMap<String, Waiting>,
    next_stream: u64,
}

struct Stream {
    id: u64,
    events: mpsc::UnboundedSender<Value>,
    timeouts: Arc<Timeouts>,
}

struct Waiting {
    stream: u64,
    session_id: String,
    params: Value,
    answer: oneshot::Sender<ElicitResult>,
}

/// How long an elicitation may wait, per app: the app's request timeout, capped by the host.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeouts {
    /// Each app's request timeout when the stream was attached.
    pub(crate) per_app: HashMap<String, Duration>,
    /// The host's cap (`HostConfig::elicitation_timeout`).
    pub(crate) cap: Option<Duration>,
}

impl Timeouts {
    fn of(&self, app_id: &str) -> Duration {
        let app = self
            .per_app
            .get(app_id)
            .copied()
            .unwrap_or(FALLBACK_TIMEOUT);
        self.cap.map_or(app, |cap| cap.min(app))
    }
}

/// A chat stream's registration; dropping it detaches the stream, declining what still
/// waits for it.
pub(crate) struct Attachment {
    broker: ElicitationBroker,
    session_id: String,
    stream: u64,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let declined = {
            let mut broker = self.broker.lock();
            if let Some(streams) = broker.streams.get_mut(&self.session_id) {
                streams.retain(|s| s.id != self.stream);
                if streams.is_empty() {
                    broker.streams.remove(&self.session_id);
                }
            }
            let ids: Vec<String> = broker
                .waiting
                .iter()
                .filter(|(_, w)| w.stream == self.stream)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| broker.waiting.remove(&id))
                .collect::<Vec<_>>()
        };
        for waiting in declined {
            info!(session = %waiting.session_id, "declined an elicitation of an agent's call: the chat stream ended before the page answered");
            let _ = waiting.answer.send(ElicitResult::new(
                mcpapp_supervisor::mcp::ElicitationAction::Decline,
            ));
        }
    }
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnswerError {
    /// No elicitation with this id is waiting.
    #[error(
        "no elicitation '{0}' is waiting for an answer (it was answered, timed out, or its chat turn ended)"
    )]
    NotWaiting(String),
    /// The answer does not fit the request.
    #[error("the answer was refused: {0}")]
    Refused(String),
}

impl ElicitationBroker {
    /// A broker with nothing attached.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Broker> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attaches a chat stream of `session_id`: elicitations of that session's calls are sent
    /// on the returned receiver until the attachment is dropped.
    pub(crate) fn attach(
        &self,
        session_id: &str,
        timeouts: Timeouts,
    ) -> (Attachment, mpsc::UnboundedReceiver<Value>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let mut broker = self.lock();
        broker.next_stream += 1;
        let id = broker.next_stream;
        broker
            .streams
            .entry(session_id.to_owned())
            .or_default()
            .push(Stream {
                id,
                events,
                timeouts: Arc::new(timeouts),
            });
        let attachment = Attachment {
            broker: self.clone(),
            session_id: session_id.to_owned(),
            stream: id,
        };
        (attachment, receiver)
    }

    /// Takes the page's answer to elicitation `id`, once it fits the request.
    pub(crate) fn answer(&self, id: &str, answer: &Value) -> Result<(), AnswerError> {
        let mut broker = self.lock();
        let waiting = broker
            .waiting
            .get(id)
            .ok_or_else(|| AnswerError::NotWaiting(id.to_owned()))?;
        let result = answer::check(&waiting.params, answer).map_err(AnswerError::Refused)?;
        let Some(waiting) = broker.waiting.remove(id) else {
            return Err(AnswerError::NotWaiting(id.to_owned()));
        };
        drop(broker);
        debug!(session = %waiting.session_id, "the page answered an elicitation");
        waiting
            .answer
            .send(result)
            .map_err(|_| AnswerError::NotWaiting(id.to_owned()))
    }

    /// Sends `request` to the session's page and waits for its answer; `None` declines.
    async fn ask(self, request: ElicitationRequest) -> Option<ElicitResult> {
        let app_id = request.app_id;
        let Some(session_id) = request.session_id else {
            info!(app = %app_id, "declined an elicitation of an agent's call: the call named no chat session");
            return None;
        };
        let params = serde_json::to_value(&request.params).ok()?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (answer, answered) = oneshot::channel();
        let (events, timeout) = {
            let mut broker = self.lock();
            let stream = broker
                .streams
                .get(&session_id)
                .and_then(|streams| streams.iter().find(|s| !s.events.is_closed()));
            let Some(stream) = stream else {
                drop(broker);
                info!(app = %app_id, session = %session_id, "declined an elicitation of an agent's call: no page is connected to its chat session");
                return None;
            };
            let event = json!({"type": "elicitation", "id": id, "appId": app_id, "params": params});
            if stream.events.send(event).is_err() {
                return None;
            }
            let found = (
                stream.events.clone(),
                stream.timeouts.of(&app_id),
                stream.id,
            );
            broker.waiting.insert(
                id.clone(),
                Waiting {
                    stream: found.2,
                    session_id: session_id.clone(),
                    params,
                    answer,
                },
            );
            (found.0, found.1)
        };
        // Whatever ends the wait (an answer, the timeout, the stream going, the app giving
        // up on the call), the guard forgets the elicitation and closes the page's form.
        let guard = Forget {
            broker: self.clone(),
            id: id.clone(),
            events,
            reason: "the app no longer waits for an answer",
        };
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(result)) => Some(result),
            Ok(Err(_)) => None,
            Err(_) => {
                info!(app = %app_id, session = %session_id, seconds = timeout.as_secs_f64(), "declined an elicitation of an agent's call: the page did not answer in time");
                guard.timed_out();
                None
            }
        }
    }
}

impl Elicitor for ElicitationBroker {
    fn elicit(&self, request: ElicitationRequest) -> ElicitFuture {
        Box::pin(self.clone().ask(request))
    }
}

/// Removes a waiting elicitation when its wait ends. If it was still waiting (no answer
/// taken, its stream still attached), the page is told to close the form, and why.
struct Forget {
    broker: ElicitationBroker,
    id: String,
    events: mpsc::UnboundedSender<Value>,
    reason: &'static str,
}

impl Forget {
    fn timed_out(mut self) {
        self.reason = "no answer came in time, so it was declined";
    }
}

impl Drop for Forget {
    fn drop(&mut self) {
        let was_waiting = self.broker.lock().waiting.remove(&self.id).is_some();
        if was_waiting {
            let _ = self.events.send(json!({
                "type": "elicitation_closed",
                "id": self.id,
                "reason": self.reason,
            }));
        }
    }
}

/// `POST /apps/chat/elicitation/{id}`: the page's `ElicitResult` for elicitation `id`.
/// 200 `{"ok":true}` when the app gets it, 400 when it does not fit the request (the
/// elicitation keeps waiting), 404 when nothing waits under that id.
pub(crate) async fn answer(
    State(broker): State<ElicitationBroker>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let answer: Value = match serde_json::from_slice(&body) {
        Ok(answer) => answer,
        Err(err) => {
            return reply(
                StatusCode::BAD_REQUEST,
                &format!("the answer is not valid JSON: {err}"),
            );
        }
    };
    match broker.answer(&id, &answer) {
        Ok(()) => (StatusCode::OK, axum::Json(json!({"ok": true}))).into_response(),
        Err(err @ AnswerError::NotWaiting(_)) => reply(StatusCode::NOT_FOUND, &err.to_string()),
        Err(err @ AnswerError::Refused(_)) => reply(StatusCode::BAD_REQUEST, &err.to_string()),
    }
}

fn reply(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}
