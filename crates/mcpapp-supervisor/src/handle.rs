//! [`AppHandle`]: the stable, cheap-to-clone way to look at and use one app.

use std::sync::Arc;

use mcpapp_session::{ElicitationRequest, Port, PortError, RawMessage, SessionStats};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, CompleteRequest,
    CompleteRequestParams, CompleteResult, GetPromptRequest, GetPromptRequestParams,
    GetPromptResult, JsonObject, ReadResourceRequest, ReadResourceRequestParams,
    ReadResourceResult, RequestMetaObject, ServerResult,
};
use tokio::sync::{oneshot, watch};

use crate::app::{AppShared, AppSnapshot, Command, session_of};
use crate::descriptors::Descriptors;
use crate::error::{CallError, ControlError};

/// One app under supervision.
///
/// Every call goes through the app's *current* connection, so a handle keeps working across
/// restarts: whoever holds it is healed when the app comes back. Calls are bounded by the
/// app's request timeout; a timed-out request is cancelled upstream, and so is a request whose
/// future is dropped before the answer arrives (`notifications/cancelled`).
#[derive(Debug, Clone)]
pub struct AppHandle {
    pub(crate) shared: Arc<AppShared>,
}

/// Input rounds the gateway's own calls go through before giving up.
const AGENT_INPUT_ROUNDS: usize = 10;

impl AppHandle {
    /// The app id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Its state now.
    pub fn snapshot(&self) -> AppSnapshot {
        self.shared.snapshot()
    }

    /// Its lifecycle state now, without copying the rest of the snapshot (proxied requests
    /// check it on every call).
    pub fn lifecycle(&self) -> mcpapp_manifest::Lifecycle {
        self.shared.lifecycle()
    }

    /// A receiver that sees every change of the snapshot.
    pub fn watch(&self) -> watch::Receiver<AppSnapshot> {
        self.shared.subscribe()
    }

    /// What the app offers, from its last successful enumeration.
    pub fn descriptors(&self) -> Arc<Descriptors> {
        self.shared.descriptors()
    }

    /// The last lines the app's current run wrote to stderr (stdio apps; up to 200, oldest
    /// first). A run is one start attempt: each new process starts with an empty tail.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.shared.stderr.lines()
    }

    /// The last lines the run before the current one wrote to stderr (up to 200, oldest
    /// first): what a process said before it was replaced.
    pub fn previous_stderr_tail(&self) -> Vec<String> {
        self.shared.stderr.previous_lines()
    }

    /// The validated spec it runs with; `None` for apps that cannot run.
    pub fn spec(&self) -> Option<mcpapp_manifest::AppSpec> {
        self.shared.spec()
    }

    /// The app's OAuth authorizer, when the gateway authorizes to it (an HTTP app without
    /// credentials of its own, on a gateway with an OAuth client): what "Connect" and
    /// "Disconnect" act on. Set by the app's first start.
    pub fn authorizer(&self) -> Option<mcpapp_oauth::AppAuthorizer> {
        self.shared.authorizer()
    }

    /// Whether the app can run at all (it is valid and allowed).
    pub fn is_runnable(&self) -> bool {
        self.shared.spec().is_some()
    }

    /// Starts a stopped or failed app (this also ends a crash loop).
    ///
    /// # Errors
    /// [`ControlError`] when the app cannot run or the supervisor has shut down.
    pub fn start(&self) -> Result<(), ControlError> {
        self.shared.command(Command::Start)
    }

    /// Stops the app; it stays stopped until started.
    ///
    /// # Errors
    /// [`ControlError`] when the app cannot run or the supervisor has shut down.
    pub fn stop(&self) -> Result<(), ControlError> {
        self.shared.command(Command::Stop)
    }

    /// Stops and starts the app again, resetting its backoff.
    ///
    /// # Errors
    /// [`ControlError`] when the app cannot run or the supervisor has shut down.
    pub fn restart(&self) -> Result<(), ControlError> {
        self.shared.command(Command::Restart)
    }

    /// Stops the app and ends its task; resolves when it has stopped.
    pub(crate) async fn shut_down(&self) {
        let (done, wait) = oneshot::channel();
        if self.shared.command(Command::Shutdown(done)).is_ok() {
            let _ = wait.await;
        }
    }

    /// Calls a tool by its remote name. `meta` becomes the request's `_meta` (the agent puts
    /// `sessionId` there).
    ///
    /// # Errors
    /// [`CallError`] when the app is not running, times out, or answers with an error.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        meta: Option<JsonObject>,
    ) -> Result<CallToolResult, CallError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let meta = meta.map(|m| RequestMetaObject(m.into()));
        // A modern app asks for input in its result; the gateway's own client has no user to
        // ask, so it answers as its handler does for legacy apps (elicitation declined, no
        // roots) and retries, a bounded number of times.
        for _ in 0..=AGENT_INPUT_ROUNDS {
            let request = ClientRequest::from(CallToolRequest::new(params.clone()));
            match self
                .shared
                .request("tools/call", request, meta.clone())
                .await?
            {
                ServerResult::CallToolResult(result) => return Ok(result),
                ServerResult::InputRequiredResult(asked) => {
                    let session = session_of(meta.as_ref());
                    params =
                        params.with_input_responses(self.answer_inputs(&asked, session).await?);
                    if let Some(state) = asked.request_state {
                        params = params.with_request_state(state);
                    }
                }
                other => return Err(self.unexpected("tools/call", &other)),
            }
        }
        Err(CallError::Remote {
            app_id: self.id().to_owned(),
            method: "tools/call".to_owned(),
            code: -32603,
            message: format!("the app asked for input more than {AGENT_INPUT_ROUNDS} times"),
        })
    }

    /// Answers a modern app's input requests as the gateway's client answers server requests:
    /// elicitation through the elicitor (the chat session's user), else declined; no roots.
    async fn answer_inputs(
        &self,
        asked: &rmcp::model::InputRequiredResult,
        session_id: Option<String>,
    ) -> Result<rmcp::model::InputResponses, CallError> {
        use rmcp::model::InputRequest;
        let mut responses = rmcp::model::InputResponses::new();
        for (key, request) in asked.input_requests.iter().flatten() {
            let answer = match request {
                InputRequest::Elicitation(elicitation) => {
                    let answer = match &self.shared.elicitor {
                        Some(elicitor) => {
                            elicitor
                                .elicit(ElicitationRequest::new(
                                    self.id().to_owned(),
                                    session_id.clone(),
                                    elicitation.params.clone(),
                                ))
                                .await
                        }
                        None => None,
                    };
                    answer
                        .and_then(|a| serde_json::to_value(a).ok())
                        .unwrap_or_else(|| serde_json::json!({ "action": "decline" }))
                }
                InputRequest::ListRoots(_) => serde_json::json!({ "roots": [] }),
                _ => {
                    return Err(CallError::Remote {
                        app_id: self.id().to_owned(),
                        method: "tools/call".to_owned(),
                        code: -32603,
                        message: "the app asks for sampling, which no client connected through the gateway can provide here".to_owned(),
                    });
                }
            };
            responses.insert(key.clone(), answer);
        }
        Ok(responses)
    }

    /// Reads a resource.
    ///
    /// # Errors
    /// [`CallError`] when the app is not running, times out, or answers with an error.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, CallError> {
        let request = ClientRequest::from(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        match self.shared.request("resources/read", request, None).await? {
            ServerResult::ReadResourceResult(result) => Ok(result),
            other => Err(self.unexpected("resources/read", &other)),
        }
    }

    /// Gets a prompt with arguments.
    ///
    /// # Errors
    /// [`CallError`] when the app is not running, times out, or answers with an error.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, CallError> {
        let mut params = GetPromptRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let request = ClientRequest::from(GetPromptRequest::new(params));
        match self.shared.request("prompts/get", request, None).await? {
            ServerResult::GetPromptResult(result) => Ok(result),
            other => Err(self.unexpected("prompts/get", &other)),
        }
    }

    /// Asks for completions of a prompt argument or resource-template variable.
    ///
    /// # Errors
    /// [`CallError`] when the app is not running, times out, or answers with an error.
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, CallError> {
        let request = ClientRequest::from(CompleteRequest::new(params));
        match self
            .shared
            .request("completion/complete", request, None)
            .await?
        {
            ServerResult::CompleteResult(result) => Ok(result),
            other => Err(self.unexpected("completion/complete", &other)),
        }
    }

    /// Checks that the app answers: an MCP `ping`, or `server/discover` for an app of the
    /// 2026-07-28 era (which has no `ping`).
    ///
    /// # Errors
    /// [`CallError`] when the app is not running or does not answer in time.
    pub async fn ping(&self) -> Result<(), CallError> {
        self.shared.health_check().await
    }

    /// Opens a port for one request of a 2026-07-28 client (which has no session: each
    /// request declares the client's capabilities in its `_meta`, read from `request`). Send
    /// that request (and, for a retry with `requestState`, the retry) through it; drop it when
    /// the exchange is over. `server/discover` is answered by the gateway.
    ///
    /// # Errors
    /// [`PortError::NotRunning`] when the app is not running.
    pub fn open_modern_port(&self, request: &RawMessage) -> Result<Port, PortError> {
        self.shared.open_modern_port(request)
    }

    /// Opens a port for the client whose `initialize` request this is: a raw JSON-RPC channel
    /// that shares the app's one upstream session with the gateway's own calls (see
    /// [`Port`]). Returns the port and the answer to that `initialize`: the upstream's own
    /// `InitializeResult` with the protocol version agreed with this client. The capabilities
    /// the client declared decide which server requests may be routed to it.
    ///
    /// # Errors
    /// [`PortError::NotRunning`] when the app is not running, [`PortError::Invalid`] when
    /// `initialize` has no id.
    pub async fn open_port(
        &self,
        initialize: &RawMessage,
    ) -> Result<(Port, RawMessage), PortError> {
        self.shared.open_port(initialize).await
    }

    /// What the app's upstream session holds for its clients now: ports, requests in flight,
    /// deadlines, subscriptions, listens, held calls (see [`SessionStats`]). Once every
    /// client session has ended and nothing of theirs is in flight, it is
    /// [idle](SessionStats::is_idle).
    ///
    /// # Errors
    /// [`PortError::NotRunning`] when the app is not running, [`PortError::SessionGone`] when
    /// its session ended meanwhile.
    pub async fn session_stats(&self) -> Result<SessionStats, PortError> {
        self.shared.session_stats().await
    }

    fn unexpected(&self, method: &str, result: &ServerResult) -> CallError {
        CallError::Transport {
            app_id: self.shared.id.clone(),
            method: method.to_owned(),
            message: format!(
                "unexpected result: {}",
                serde_json::to_string(result)
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect::<String>()
            ),
        }
    }
}
