//! The [`Agent`]: sessions and turns. A turn asks the model, runs the tools it calls through the
//! registry, gives the results back, and repeats up to the step limit, streaming
//! [`AgentEvent`]s all along.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use mcpapp_bridge::{RegistrySnapshot, ToolContext, ToolEntry, ToolOutput, ToolRegistry};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument;

use crate::model::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ToolCall, ToolSpec,
};
use crate::prompt::{AppEvent, PromptError, build_prompt};
use crate::session::{SessionStore, StoreFull};

/// The system prompt used when the configuration does not give one.
pub(crate) const DEFAULT_SYSTEM_PROMPT: &str = "You are the assistant of an MCP Apps host. Use the \
available tools to answer; do not invent data that a tool can provide. A tool result that \
starts with \"Error:\" is a failure: say so briefly. Lines starting with [UI events] describe \
tool calls the user already made in an app's UI; their results are final and visible to the \
user. Keep answers short.";

/// How many events may wait for a slow client before the turn waits for it.
const EVENT_BUFFER: usize = 64;

/// Settings of an [`Agent`].
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The most model calls in one turn (default 8). Values below 1 count as 1.
    pub step_limit: usize,
    /// The most sessions kept in memory (default 1000). Values below 1 count as 1.
    pub session_capacity: usize,
    /// How long an unused session is kept (default 1 hour).
    pub idle_expiry: Duration,
    /// The system prompt that starts every conversation; empty for none.
    pub system_prompt: String,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            step_limit: 8,
            session_capacity: 1000,
            idle_expiry: Duration::from_secs(3600),
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
        }
    }
}

/// One chat request: the body of `POST /apps/chat`. Deserialises from
/// `{"message", "sessionId", "appEvents", "modelContext"}`; values of the wrong type count as
/// absent, and `appEvents` items that are not objects are skipped.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRequest {
    /// What the user typed.
    #[serde(default, deserialize_with = "string_or_none")]
    pub message: Option<String>,
    /// The session to continue; a blank or missing id starts a new session.
    #[serde(default, deserialize_with = "string_or_none")]
    pub session_id: Option<String>,
    /// Tool calls the user made in an app's UI since the last message.
    #[serde(default, deserialize_with = "events_or_empty")]
    pub app_events: Vec<AppEvent>,
    /// Extra context for this turn only (for example what the app's UI shows), given to the
    /// model as a system message and not kept in the session.
    #[serde(default, deserialize_with = "string_or_none")]
    pub model_context: Option<String>,
}

impl TurnRequest {
    /// A request with just a message.
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: Some(message.into()),
            ..Self::default()
        }
    }

    /// Continues the session `session_id`.
    #[must_use]
    pub fn in_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// The user prompt of this turn: the UI events, then the message. Hosts call it before streaming
    /// to answer an empty request with HTTP 400.
    ///
    /// # Errors
    ///
    /// [`PromptError::Empty`] when there is neither a message nor a UI event.
    pub fn prompt(&self) -> Result<String, PromptError> {
        build_prompt(self.message.as_deref(), &self.app_events)
    }
}

/// What a turn streams. Serialises to the `/apps/chat` wire shapes, for example
/// `{"type":"tool_result","id":"…","text":"…","isError":false}`.
///
/// A turn always starts with [`Session`](Self::Session) and ends with [`Done`](Self::Done).
/// Before `Done` comes either [`Result`](Self::Result) (the model answered) or
/// [`Error`](Self::Error) (the prompt was empty, the model failed, the step limit was reached
/// or the turn was cancelled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    /// The session the turn runs in.
    Session {
        /// The session id, to send back with the next message.
        session_id: String,
    },
    /// A piece of the model's reply.
    Text {
        /// The new text.
        text: String,
    },
    /// The model called a tool.
    Tool {
        /// Correlates this event with its [`ToolResult`](Self::ToolResult).
        id: String,
        /// The registered tool name (the model's name when no tool has it).
        name: String,
        /// The arguments as JSON, or `{}` when they are empty or not JSON.
        input: Value,
    },
    /// A tool call finished.
    ToolResult {
        /// The id of the [`Tool`](Self::Tool) event.
        id: String,
        /// The result text given to the model.
        text: String,
        /// Whether the call failed.
        is_error: bool,
        /// The tool's structured result, when it has one: for a tool with a UI this is what
        /// the view renders (it is kept out of the model's text).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured_content: Option<Value>,
        /// For a tool with a UI: the app's whole `CallToolResult` as it sent it (every
        /// content block, `_meta`, `structuredContent`, `isError`), for the host to hand to
        /// the tool's view unchanged. The model never sees it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_tool_result: Option<Value>,
    },
    /// The turn failed.
    Error {
        /// What went wrong.
        error: String,
    },
    /// The model's final answer.
    Result {
        /// The text of the last model reply.
        text: String,
        /// Whether the reply is incomplete (cut at the token limit or filtered).
        is_error: bool,
    },
    /// The turn is over. Always the last event.
    Done,
}

/// Why a turn failed; its message becomes the [`AgentEvent::Error`] text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TurnError {
    /// The request has no prompt.
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The model failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model still wanted tools after the last allowed step.
    #[error("the turn stopped after {limit} model calls without a final answer (step limit)")]
    StepLimit {
        /// The step limit.
        limit: usize,
    },
    /// Every session is busy and the store is full.
    #[error("too many active chat sessions (at most {capacity}); try again later")]
    TooManySessions {
        /// The session capacity.
        capacity: usize,
    },
    /// The turn was cancelled (for example the client went away).
    #[error("the turn was cancelled")]
    Cancelled,
    /// There is no Tokio runtime to run the turn on.
    #[error("the agent must run inside a Tokio runtime")]
    NoRuntime,
}

/// The chat agent behind `/apps/chat`: sessions, turns and tool calls through a
/// [`ToolRegistry`]. Cheap to clone; clones share sessions.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    registry: ToolRegistry,
    model: Arc<dyn ChatModel>,
    config: AgentConfig,
    sessions: SessionStore,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.inner.model.label())
            .field("config", &self.inner.config)
            .field("sessions", &self.inner.sessions.len())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent that calls `model` and the tools of `registry`.
    pub fn new(registry: ToolRegistry, model: Arc<dyn ChatModel>, mut config: AgentConfig) -> Self {
        config.step_limit = config.step_limit.max(1);
        config.session_capacity = config.session_capacity.max(1);
        let sessions = SessionStore::new(config.session_capacity, config.idle_expiry);
        Self {
            inner: Arc::new(Inner {
                registry,
                model,
                config,
                sessions,
            }),
        }
    }

    /// The registry the agent calls tools through.
    pub fn registry(&self) -> &ToolRegistry {
        &self.inner.registry
    }

    /// The model's label.
    pub fn model_label(&self) -> &str {
        self.inner.model.label()
    }

    /// The configuration in force.
    pub fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// Runs one turn and streams its events.
    ///
    /// The session is the requested one if its id is not blank (created if unknown or
    /// expired), else a new one with id `apps-` + 32 hex digits. Turns on one session run one
    /// at a time; a second waits for the first. Cancelling `cancel`, or dropping the stream,
    /// stops the turn: the model stream is dropped and running tools see their context's
    /// token fire. The stream still ends with `error` and `done` if it is being read.
    ///
    /// The turn runs on a Tokio task; outside a Tokio runtime the stream reports an `error`,
    /// "the agent must run inside a Tokio runtime".
    // The token is taken by value so that a host can hand over its request's token; the turn
    // works on a child of it, which the stream's drop guard can cancel on its own.
    #[expect(
        clippy::needless_pass_by_value,
        reason = "the public contract takes the token"
    )]
    pub fn run_turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let session_id = request
            .session_id
            .clone()
            .filter(|id| !id.trim().is_empty())
            .unwrap_or_else(new_session_id);
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let turn_cancel = cancel.child_token();
        let guard = turn_cancel.clone().drop_guard();

        let span = tracing::info_span!(
            "chat_turn",
            session_id = %session_id,
            model = %self.inner.model.label()
        );
        let driver = drive(
            Arc::clone(&self.inner),
            request,
            session_id.clone(),
            turn_cancel,
            Emitter(tx.clone()),
        )
        .instrument(span);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(driver);
            }
            Err(_) => {
                // Report the problem through the stream itself rather than panicking.
                let events = [
                    AgentEvent::Session {
                        session_id: session_id.clone(),
                    },
                    AgentEvent::Error {
                        error: TurnError::NoRuntime.to_string(),
                    },
                    AgentEvent::Done,
                ];
                for event in events {
                    let _ = tx.try_send(event);
                }
            }
        }
        TurnStream {
            session_id,
            rx,
            _guard: guard,
        }
    }

    /// The conversation of a session (without the system prompt), waiting for a running turn
    /// on it to finish. `None` if there is no such session.
    pub async fn history(&self, session_id: &str) -> Option<Vec<ChatMessage>> {
        let session = self.inner.sessions.get(session_id)?;
        let history = session.history.lock().await;
        Some(history.clone())
    }

    /// Forgets a session. Returns whether it existed.
    pub fn remove_session(&self, session_id: &str) -> bool {
        self.inner.sessions.remove(session_id)
    }

    /// How many sessions are held.
    pub fn session_count(&self) -> usize {
        self.inner.sessions.len()
    }
}

/// The events of one turn, as returned by [`Agent::run_turn`]. Dropping it cancels the turn.
pub struct TurnStream {
    session_id: String,
    rx: mpsc::Receiver<AgentEvent>,
    _guard: DropGuard,
}

impl TurnStream {
    /// The turn's session id (also the first event).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

impl fmt::Debug for TurnStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnStream")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Stream for TurnStream {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// A new session id: `apps-` and 32 lower-case hex digits.
fn new_session_id() -> String {
    format!("apps-{}", uuid::Uuid::new_v4().simple())
}

/// Sends events to the stream; a client that went away is not an error (the turn's token
/// fires when the stream is dropped).
struct Emitter(mpsc::Sender<AgentEvent>);

impl Emitter {
    async fn send(&self, event: AgentEvent) {
        let _ = self.0.send(event).await;
    }
}

/// Runs a turn and frames it with `session` and `done`.
async fn drive(
    inner: Arc<Inner>,
    request: TurnRequest,
    session_id: String,
    cancel: CancellationToken,
    emitter: Emitter,
) {
    emitter
        .send(AgentEvent::Session {
            session_id: session_id.clone(),
        })
        .await;
    let outcome = run(&inner, request, &session_id, &cancel, &emitter).await;
    match outcome {
        Ok(Final { text, is_error }) => {
            emitter.send(AgentEvent::Result { text, is_error }).await;
        }
        Err(error) => {
            match &error {
                TurnError::Cancelled => tracing::debug!("turn cancelled"),
                other => tracing::warn!(error = %other, "turn failed"),
            }
            emitter
                .send(AgentEvent::Error {
                    error: error.to_string(),
                })
                .await;
        }
    }
    emitter.send(AgentEvent::Done).await;
}

/// The model's final answer.
struct Final {
    text: String,
    is_error: bool,
}

/// Takes the session's turn, runs the steps and keeps what was completed in the session.
async fn run(
    inner: &Inner,
    request: TurnRequest,
    session_id: &str,
    cancel: &CancellationToken,
    emitter: &Emitter,
) -> Result<Final, TurnError> {
    let prompt = request.prompt()?;
    let session = inner
        .sessions
        .get_or_create(session_id)
        .map_err(|StoreFull { capacity }| TurnError::TooManySessions { capacity })?;
    let mut history = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(TurnError::Cancelled),
        history = session.history.lock() => history,
    };

    let context = request.model_context.filter(|c| !c.trim().is_empty());
    let mut turn = vec![ChatMessage::User { content: prompt }];
    let outcome = steps(
        inner,
        &history,
        &mut turn,
        context.as_deref(),
        session_id,
        cancel,
        emitter,
    )
    .await;
    // Whatever happened, the user's message and every completed exchange stay in the
    // session, so that the next turn has the context; an interrupted exchange is left out so
    // that no tool call lacks its result.
    history.extend(turn);
    session.touch();
    outcome
}

/// The model → tools → model loop.
async fn steps(
    inner: &Inner,
    history: &[ChatMessage],
    turn: &mut Vec<ChatMessage>,
    context: Option<&str>,
    session_id: &str,
    cancel: &CancellationToken,
    emitter: &Emitter,
) -> Result<Final, TurnError> {
    let limit = inner.config.step_limit;
    for step in 1..=limit {
        let snapshot = inner.registry.snapshot();
        let mut messages = Vec::with_capacity(history.len() + turn.len() + 2);
        if !inner.config.system_prompt.trim().is_empty() {
            messages.push(ChatMessage::System {
                content: inner.config.system_prompt.clone(),
            });
        }
        if let Some(context) = context {
            messages.push(ChatMessage::System {
                content: context.to_owned(),
            });
        }
        messages.extend_from_slice(history);
        messages.extend_from_slice(turn);
        let request = ChatRequest {
            messages,
            tools: tool_specs(&snapshot),
        };

        let mut stream = inner.model.stream(request);
        let mut text = String::new();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut finish = None;
        loop {
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(TurnError::Cancelled),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Ok(ModelEvent::TextDelta(delta))) => {
                    if !delta.is_empty() {
                        text.push_str(&delta);
                        emitter.send(AgentEvent::Text { text: delta }).await;
                    }
                }
                Some(Ok(ModelEvent::ToolCall(call))) => calls.push(call),
                Some(Ok(ModelEvent::Finish(reason))) => {
                    finish = Some(reason);
                    break;
                }
                Some(Err(error)) => return Err(TurnError::Model(error)),
            }
        }
        drop(stream);

        if calls.is_empty() {
            turn.push(ChatMessage::Assistant {
                content: text.clone(),
                tool_calls: Vec::new(),
            });
            let is_error = matches!(
                finish,
                Some(FinishReason::Length | FinishReason::ContentFilter)
            );
            return Ok(Final { text, is_error });
        }
        if step == limit {
            return Err(TurnError::StepLimit { limit });
        }

        for call in &mut calls {
            if call.id.is_empty() {
                call.id = format!("call_{}", uuid::Uuid::new_v4().simple());
            }
        }
        let mut results = Vec::with_capacity(calls.len());
        for call in &calls {
            let output = call_tool(inner, &snapshot, call, session_id, cancel, emitter).await?;
            results.push(ChatMessage::Tool {
                tool_call_id: call.id.clone(),
                content: output.text,
            });
        }
        turn.push(ChatMessage::Assistant {
            content: text,
            tool_calls: calls,
        });
        turn.extend(results);
    }
    Err(TurnError::StepLimit { limit })
}

/// The tools as offered to the model: safe names, descriptions, object schemas.
fn tool_specs(snapshot: &RegistrySnapshot) -> Vec<ToolSpec> {
    snapshot
        .entries()
        .iter()
        .filter_map(|entry| {
            let name = snapshot.model_names().to_model(&entry.name)?;
            let schema = entry.tool.input_schema();
            // Providers require an object schema; a tool without one takes any object.
            let parameters = if schema.is_object() {
                schema.clone()
            } else {
                serde_json::json!({"type": "object"})
            };
            Some(ToolSpec {
                name: name.to_owned(),
                registered_name: entry.name.clone(),
                description: entry.tool.description().to_owned(),
                parameters,
            })
        })
        .collect()
}

/// Runs one tool call and emits its `tool` and `tool_result` events.
async fn call_tool(
    inner: &Inner,
    snapshot: &RegistrySnapshot,
    call: &ToolCall,
    session_id: &str,
    cancel: &CancellationToken,
    emitter: &Emitter,
) -> Result<ToolOutput, TurnError> {
    let event_id = uuid::Uuid::new_v4().simple().to_string();
    // The model should use the safe name; a registered name is accepted too.
    let registered = snapshot
        .model_names()
        .from_model(&call.name)
        .or_else(|| snapshot.resolve(&call.name).map(|e| e.name.as_str()));
    let name = registered.unwrap_or(&call.name).to_owned();
    emitter
        .send(AgentEvent::Tool {
            id: event_id.clone(),
            name: name.clone(),
            input: parse_input(&call.arguments),
        })
        .await;

    // The registry is asked again so that a tool replaced since the snapshot is called in its
    // newest form.
    let output = match registered.and_then(|n| inner.registry.resolve(n)) {
        Some(entry) => invoke(entry, call.arguments.clone(), session_id, cancel).await?,
        None if registered.is_some() => {
            ToolOutput::error(format!("tool '{name}' is no longer available"))
        }
        None => ToolOutput::error(format!("there is no tool named '{}'", call.name)),
    };
    tracing::debug!(tool = %name, is_error = output.is_error, "tool call finished");
    emitter
        .send(AgentEvent::ToolResult {
            id: event_id,
            text: output.text.clone(),
            is_error: output.is_error,
            structured_content: output.structured.clone(),
            call_tool_result: output.raw.clone(),
        })
        .await;
    Ok(output)
}

/// Calls a tool with a child token, stopping when the turn is cancelled. A tool that panics
/// gives an error result instead of ending the turn.
async fn invoke(
    entry: ToolEntry,
    arguments: String,
    session_id: &str,
    cancel: &CancellationToken,
) -> Result<ToolOutput, TurnError> {
    let ctx = ToolContext::new()
        .with_session_id(session_id)
        .with_cancel(cancel.child_token());
    let name = entry.name.clone();
    let panicked = move || {
        tracing::error!(tool = %name, "tool panicked");
        ToolOutput::error(format!("tool '{name}' failed unexpectedly"))
    };
    let Ok(future) =
        std::panic::catch_unwind(AssertUnwindSafe(|| entry.tool.invoke(arguments, ctx)))
    else {
        return Ok(panicked());
    };
    let mut future = AssertUnwindSafe(future).catch_unwind();
    tokio::select! {
        biased;
        () = cancel.cancelled() => {
            // One last poll lets a tool that watches its token see it fire and clean up
            // before it is dropped.
            let _ = (&mut future).now_or_never();
            Err(TurnError::Cancelled)
        }
        result = &mut future => Ok(result.unwrap_or_else(|_| panicked())),
    }
}

/// The `input` of a `tool` event: the parsed arguments, or `{}`.
fn parse_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
}

/// Reads a string, treating any other JSON type as absent.
fn string_or_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// Reads `appEvents`: a non-array is no events, and items that are not objects are skipped.
fn events_or_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<AppEvent>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items
            .into_iter()
            .filter(Value::is_object)
            .filter_map(|item| serde_json::from_value(item).ok())
            .collect(),
        _ => Vec::new(),
    })
}
