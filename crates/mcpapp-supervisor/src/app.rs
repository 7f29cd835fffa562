//! One app under supervision: its shared state, the task that connects, watches and restarts
//! it, and the calls made through its current connection.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpapp_manifest::{AppSpec, InstallState, Lifecycle, Timestamp};
use rmcp::ServiceError;
use rmcp::model::{
    CancelledNotificationParam, ClientRequest, ErrorCode, RequestMetaObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tracing::{Instrument, info, info_span, warn};

use crate::client::{GatewayClient, Notice};
use crate::descriptors::{
    Descriptors, PromptDescriptor, ResourceDescriptor, ResourceTemplateDescriptor, ToolDescriptor,
};
use crate::error::{CallError, ControlError};
use crate::events::SupervisorEvent;
use crate::launch::{self, Environment, LaunchPlan};
use crate::link::stdio::{ProcessTable, StderrTail};
use crate::link::{Link, LinkEvent, http, stdio};
use crate::policy::SupervisionPolicy;
use crate::router::PortCapabilities;
use crate::session::{Connection, HandshakeError, Port, PortError};

/// Stderr lines quoted in a failure reason.
const STDERR_IN_REASON: usize = 5;

/// A point-in-time view of one app.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AppSnapshot {
    /// The install state: effective manifest, paths, validity, lifecycle, timestamps, last
    /// error and counts.
    pub state: InstallState,
    /// How many times the app has been started again after its first start.
    pub restart_count: u32,
    /// Whether restarts stopped because it failed too often (see the supervision policy).
    pub crash_loop: bool,
    /// The process id of a running stdio app.
    pub pid: Option<u32>,
    /// The MCP protocol version the server negotiated.
    pub protocol_version: Option<String>,
    /// The server's name and version, as it reported them.
    pub server_info: Option<(String, String)>,
    /// The server's instructions, if it sent any.
    pub instructions: Option<String>,
    /// When the next automatic restart is due, if one is scheduled.
    pub next_restart: Option<Timestamp>,
}

/// Commands for an app's task.
#[derive(Debug)]
pub(crate) enum Command {
    Start,
    Stop,
    Restart,
    /// A reload changed the app: run it with this spec from now on.
    Reconfigure(Box<(AppSpec, InstallState, SupervisionPolicy)>),
    Shutdown(oneshot::Sender<()>),
}

/// What every holder of an app shares.
pub(crate) struct AppShared {
    pub(crate) id: String,
    snapshot: watch::Sender<AppSnapshot>,
    connection: Mutex<Option<Arc<Connection>>>,
    descriptors: watch::Sender<Arc<Descriptors>>,
    pub(crate) stderr: StderrTail,
    commands: Option<mpsc::UnboundedSender<Command>>,
    events: broadcast::Sender<SupervisorEvent>,
    spec: Mutex<Option<(AppSpec, SupervisionPolicy)>>,
}

impl std::fmt::Debug for AppShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppShared")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What the app task needs from the supervisor.
#[derive(Clone)]
pub(crate) struct TaskContext {
    pub(crate) env: Arc<Environment>,
    pub(crate) processes: ProcessTable,
}

/// How a connected run ended.
enum Outcome {
    Stop,
    Restart,
    Reconfigure(Box<(AppSpec, InstallState, SupervisionPolicy)>),
    Shutdown(Option<oneshot::Sender<()>>),
    Died(String),
}

impl AppShared {
    /// Creates the shared state; a runnable app also gets a command channel (its task is
    /// started by [`spawn_task`]).
    pub(crate) fn new(
        state: InstallState,
        runnable: Option<(AppSpec, SupervisionPolicy)>,
        events: broadcast::Sender<SupervisorEvent>,
    ) -> (Arc<Self>, Option<mpsc::UnboundedReceiver<Command>>) {
        let (commands, receiver) = match runnable {
            Some(_) => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let snapshot = AppSnapshot {
            state,
            restart_count: 0,
            crash_loop: false,
            pid: None,
            protocol_version: None,
            server_info: None,
            instructions: None,
            next_restart: None,
        };
        let shared = Arc::new(Self {
            id: snapshot.state.id().to_owned(),
            snapshot: watch::channel(snapshot).0,
            connection: Mutex::new(None),
            descriptors: watch::channel(Arc::new(Descriptors::default())).0,
            stderr: StderrTail::default(),
            commands,
            events,
            spec: Mutex::new(runnable),
        });
        (shared, receiver)
    }

    pub(crate) fn snapshot(&self) -> AppSnapshot {
        self.snapshot.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<AppSnapshot> {
        self.snapshot.subscribe()
    }

    pub(crate) fn descriptors(&self) -> Arc<Descriptors> {
        self.descriptors.borrow().clone()
    }

    pub(crate) fn spec(&self) -> Option<AppSpec> {
        self.spec
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(spec, _)| spec.clone())
    }

    pub(crate) fn policy(&self) -> Option<SupervisionPolicy> {
        self.spec
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(_, policy)| *policy)
    }

    pub(crate) fn command(&self, command: Command) -> Result<(), ControlError> {
        match &self.commands {
            None => Err(ControlError::NotRunnable {
                app_id: self.id.clone(),
                reason: {
                    let snapshot = self.snapshot();
                    if snapshot.state.validation_errors.is_empty() {
                        "it is not valid".to_owned()
                    } else {
                        snapshot.state.validation_errors.join("; ")
                    }
                },
            }),
            Some(commands) => commands.send(command).map_err(|_| ControlError::ShutDown),
        }
    }

    fn update(&self, change: impl FnOnce(&mut AppSnapshot)) {
        self.snapshot.send_modify(change);
    }

    /// Moves to `to`, records the reason as the last error for failures, and publishes it.
    fn transition(&self, to: Lifecycle, reason: Option<String>) {
        let mut from = to;
        let at = Timestamp::now();
        self.update(|s| {
            from = s.state.lifecycle;
            s.state.transition_at(to, at);
            if to == Lifecycle::Failed {
                s.state.last_error.clone_from(&reason);
            }
            if to != Lifecycle::Running {
                s.pid = None;
            }
        });
        match (&reason, to) {
            (Some(reason), Lifecycle::Failed) => {
                warn!(app = %self.id, "McpApp '{}' failed: {reason}", self.id)
            }
            (Some(reason), _) => info!(app = %self.id, "McpApp '{}' is {to}: {reason}", self.id),
            (None, _) => info!(app = %self.id, "McpApp '{}' is {to}", self.id),
        }
        let _ = self.events.send(SupervisorEvent::Lifecycle {
            app_id: self.id.clone(),
            from,
            to,
            reason,
            at,
        });
    }

    fn current(&self) -> Option<Arc<Connection>> {
        self.connection
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_connection(&self, connection: Option<Arc<Connection>>) {
        *self.connection.lock().unwrap_or_else(|p| p.into_inner()) = connection;
    }

    fn not_running(&self) -> CallError {
        CallError::NotRunning {
            app_id: self.id.clone(),
            state: self.snapshot.borrow().state.lifecycle,
        }
    }

    /// Sends a request through the current connection, bounded by the app's request timeout;
    /// a timed-out request is cancelled upstream.
    pub(crate) async fn request(
        &self,
        method: &str,
        request: ClientRequest,
        meta: Option<RequestMetaObject>,
    ) -> Result<ServerResult, CallError> {
        let connection = self.current().ok_or_else(|| self.not_running())?;
        let timeout = connection.request_timeout;
        let mut options = PeerRequestOptions::with_timeout(timeout);
        if let Some(meta) = meta {
            options = options.with_meta(meta);
        }
        let transport = |message: String| CallError::Transport {
            app_id: self.id.clone(),
            method: method.to_owned(),
            message,
        };
        let handle = connection
            .client
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|e| transport(e.to_string()))?;
        // rmcp cancels upstream on its own timeout, but not when the caller stops waiting
        // (an agent turn cancelled, a select! lost): the guard covers that case.
        let mut guard = AbandonGuard {
            peer: Some(connection.client.peer().clone()),
            id: handle.id.clone(),
        };
        let outcome = handle.await_response().await;
        guard.peer = None;
        match outcome {
            Ok(result) => Ok(result),
            Err(ServiceError::Timeout { .. }) => Err(CallError::Timeout {
                app_id: self.id.clone(),
                method: method.to_owned(),
                seconds: timeout.as_secs(),
            }),
            Err(ServiceError::McpError(error)) => Err(CallError::Remote {
                app_id: self.id.clone(),
                method: method.to_owned(),
                code: error.code.0,
                message: error.message.to_string(),
            }),
            Err(other) => Err(transport(other.to_string())),
        }
    }

    /// Opens a port on the current upstream session.
    pub(crate) async fn open_port(
        &self,
        capabilities: PortCapabilities,
    ) -> Result<Port, PortError> {
        let connection = self
            .current()
            .ok_or_else(|| PortError::NotRunning(self.snapshot.borrow().state.lifecycle))?;
        connection.open_port(capabilities).await
    }
}

/// Sends `notifications/cancelled` for a request whose caller dropped the future before the
/// answer came, so that the app stops working on a result nobody will read.
struct AbandonGuard {
    /// Set while the answer is awaited; cleared once it arrived (or rmcp timed it out, which
    /// sends its own cancellation).
    peer: Option<rmcp::Peer<rmcp::RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        // Dropping happens inside the runtime that polled the call; without one (the runtime
        // is going away) the connection goes with it and nothing needs cancelling.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let params = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the caller stopped waiting".to_owned()),
        );
        runtime.spawn(
            async move {
                let _ = peer.notify_cancelled(params).await;
            }
            .in_current_span(),
        );
    }
}

/// Starts the supervision task of a runnable app.
pub(crate) fn spawn_task(
    shared: Arc<AppShared>,
    commands: mpsc::UnboundedReceiver<Command>,
    context: TaskContext,
) -> tokio::task::JoinHandle<()> {
    let span = info_span!("app", id = %shared.id);
    tokio::spawn(supervise(shared, commands, context).instrument(span))
}

/// Failure bookkeeping between starts.
struct Backoff {
    failures: VecDeque<Instant>,
    attempt: u32,
}

async fn supervise(
    shared: Arc<AppShared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    context: TaskContext,
) {
    let mut backoff = Backoff {
        failures: VecDeque::new(),
        attempt: 0,
    };
    let mut want_running = true;
    loop {
        if !want_running {
            match commands.recv().await {
                Some(Command::Start | Command::Restart) => {
                    want_running = true;
                    backoff.failures.clear();
                    backoff.attempt = 0;
                    shared.update(|s| s.crash_loop = false);
                }
                Some(Command::Stop) => continue,
                Some(Command::Reconfigure(config)) => {
                    apply_reconfigure(&shared, *config);
                    continue;
                }
                Some(Command::Shutdown(done)) => {
                    let _ = done.send(());
                    return;
                }
                None => return,
            }
        }

        let Some((spec, policy)) = shared
            .spec
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return;
        };
        shared.update(|s| s.next_restart = None);
        shared.transition(Lifecycle::Loaded, None);
        info!(
            "Connecting to McpApp '{}' via {}",
            shared.id,
            spec.launch.transport()
        );
        let (notice_tx, mut notice_rx) = mpsc::unbounded_channel();
        let started = tokio::select! {
            result = start(&shared, &spec, &context, notice_tx) => Some(result),
            command = commands.recv() => {
                // Dropping the half-made connection kills anything it started.
                match command {
                    Some(Command::Stop) => {
                        shared.transition(Lifecycle::Stopped, Some("stopped on request".to_owned()));
                        want_running = false;
                        continue;
                    }
                    Some(Command::Start | Command::Restart) => continue,
                    Some(Command::Reconfigure(config)) => {
                        apply_reconfigure(&shared, *config);
                        continue;
                    }
                    Some(Command::Shutdown(done)) => {
                        shared.transition(Lifecycle::Stopped, Some("the gateway is shutting down".to_owned()));
                        let _ = done.send(());
                        return;
                    }
                    None => return,
                }
            }
        };
        let run_started = Instant::now();
        let outcome = match started {
            Some(Ok(connection)) => {
                let connection = Arc::new(connection);
                shared.set_connection(Some(connection.clone()));
                shared.update(|s| s.pid = connection.pid());
                shared.transition(Lifecycle::Running, None);
                let outcome = run(
                    &shared,
                    &connection,
                    &mut commands,
                    &mut notice_rx,
                    &spec,
                    &policy,
                )
                .await;
                shared.set_connection(None);
                let grace = match outcome {
                    Outcome::Died(_) => Duration::from_millis(200),
                    _ => policy.shutdown_grace,
                };
                connection.shutdown(grace).await;
                outcome
            }
            Some(Err(reason)) => Outcome::Died(reason),
            None => Outcome::Shutdown(None),
        };

        match outcome {
            Outcome::Stop => {
                shared.transition(Lifecycle::Stopped, Some("stopped on request".to_owned()));
                want_running = false;
            }
            Outcome::Restart => {
                shared.transition(Lifecycle::Stopped, Some("restarting on request".to_owned()));
                backoff.failures.clear();
                backoff.attempt = 0;
                shared.update(|s| s.restart_count += 1);
            }
            Outcome::Reconfigure(config) => {
                shared.transition(
                    Lifecycle::Stopped,
                    Some("restarting with a changed configuration".to_owned()),
                );
                apply_reconfigure(&shared, *config);
                backoff.failures.clear();
                backoff.attempt = 0;
            }
            Outcome::Shutdown(done) => {
                shared.transition(
                    Lifecycle::Stopped,
                    Some("the gateway is shutting down".to_owned()),
                );
                if let Some(done) = done {
                    let _ = done.send(());
                }
                return;
            }
            Outcome::Died(reason) => {
                if run_started.elapsed() >= policy.stable_after {
                    backoff.attempt = 0;
                }
                backoff.attempt += 1;
                let now = Instant::now();
                backoff.failures.push_back(now);
                while backoff
                    .failures
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > policy.crash_loop_window)
                {
                    backoff.failures.pop_front();
                }
                let count = backoff.failures.len();
                if count > policy.crash_loop_failures as usize {
                    shared.update(|s| s.crash_loop = true);
                    shared.transition(
                        Lifecycle::Failed,
                        Some(format!(
                            "crash loop: {count} failures within {} s, so it is not restarted again until restarted by hand; last failure: {reason}",
                            policy.crash_loop_window.as_secs()
                        )),
                    );
                    want_running = false;
                    continue;
                }
                shared.transition(Lifecycle::Failed, Some(reason));
                if !policy.auto_restart {
                    want_running = false;
                    continue;
                }
                let seed = u64::from(backoff.attempt)
                    ^ std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64);
                let delay = policy.restart_delay(backoff.attempt, seed);
                let due = Timestamp::from_system_time(std::time::SystemTime::now() + delay);
                shared.update(|s| s.next_restart = Some(due));
                let _ = shared.events.send(SupervisorEvent::RestartScheduled {
                    app_id: shared.id.clone(),
                    attempt: backoff.attempt,
                    delay,
                });
                info!(
                    "McpApp '{}' restarts in {} ms",
                    shared.id,
                    delay.as_millis()
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    command = commands.recv() => match command {
                        Some(Command::Stop) => {
                            shared.update(|s| s.next_restart = None);
                            shared.transition(Lifecycle::Stopped, Some("stopped on request".to_owned()));
                            want_running = false;
                            continue;
                        }
                        Some(Command::Start | Command::Restart) => {
                            backoff.failures.clear();
                            backoff.attempt = 0;
                        }
                        Some(Command::Reconfigure(config)) => apply_reconfigure(&shared, *config),
                        Some(Command::Shutdown(done)) => {
                            shared.transition(Lifecycle::Stopped, Some("the gateway is shutting down".to_owned()));
                            let _ = done.send(());
                            return;
                        }
                        None => return,
                    }
                }
                shared.update(|s| s.restart_count += 1);
            }
        }
    }
}

fn apply_reconfigure(shared: &AppShared, config: (AppSpec, InstallState, SupervisionPolicy)) {
    let (spec, state, policy) = config;
    *shared.spec.lock().unwrap_or_else(|p| p.into_inner()) = Some((spec, policy));
    shared.update(|s| {
        let lifecycle = s.state.lifecycle;
        let changed_at = s.state.state_changed_at;
        let last_error = s.state.last_error.take();
        s.state = state;
        s.state.lifecycle = lifecycle;
        s.state.state_changed_at = changed_at;
        s.state.last_error = last_error;
    });
}

/// Connects, performs the handshake and enumerates, all within the startup timeout.
async fn start(
    shared: &Arc<AppShared>,
    spec: &AppSpec,
    context: &TaskContext,
    notices: mpsc::UnboundedSender<Notice>,
) -> Result<Connection, String> {
    let root: PathBuf = shared.snapshot.borrow().state.root_path.clone();
    let plan = launch::plan(
        spec,
        &root,
        &context.env,
        &shared.stderr,
        &context.processes,
    )?;
    let (events_tx, events_rx) = mpsc::unbounded_channel::<LinkEvent>();
    let link = match plan {
        LaunchPlan::Stdio(spawn) => {
            let program = spawn.program.display().to_string();
            Link::Stdio(
                stdio::spawn(&spawn, events_tx)
                    .map_err(|e| format!("cannot start '{program}': {e}"))?,
            )
        }
        LaunchPlan::Http(http_spec) => Link::Http(
            http::connect(http_spec, events_tx)
                .map_err(|e| format!("cannot create an HTTP client: {e}"))?,
        ),
    };
    let handler = GatewayClient::new(shared.id.clone(), notices);
    let deadline = spec.startup_timeout;
    let work = async {
        let connection =
            Connection::open(&shared.id, link, events_rx, handler, spec.request_timeout)
                .await
                .map_err(|e| match e {
                    HandshakeError::LinkClosed(reason) => reason,
                    HandshakeError::Protocol(message) => {
                        format!("the MCP handshake failed: {message}")
                    }
                })?;
        connection
            .client
            .peer()
            .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
            .await;
        let (descriptors, warnings) = enumerate(&connection, spec.request_timeout).await?;
        Ok::<_, String>((connection, descriptors, warnings))
    };
    let (connection, descriptors, mut warnings) = match tokio::time::timeout(deadline, work).await {
        Ok(result) => result.map_err(|reason| with_stderr(shared, reason))?,
        Err(_) => {
            return Err(with_stderr(
                shared,
                format!(
                    "startup timed out after {} s (connect, MCP handshake and listing must finish within startupTimeoutSeconds)",
                    deadline.as_secs()
                ),
            ));
        }
    };

    let info = connection.client.peer_info();
    let negotiated = info.as_ref().map(|i| i.protocol_version.to_string());
    if let Some(version) = &negotiated
        && version.as_str() < spec.protocol_version.as_str()
    {
        warnings.push(format!(
            "the server negotiated MCP protocol {version}, older than the {} its manifest declares",
            spec.protocol_version
        ));
    }
    info!(
        "McpApp '{}' connected: {} tools, {} resources, {} prompts",
        shared.id,
        descriptors.tools.len(),
        descriptors.resources.len(),
        descriptors.prompts.len()
    );
    shared.update(|s| {
        s.state.tool_count = descriptors.tools.len();
        s.state.resource_count = descriptors.resources.len();
        s.state.resource_template_count = descriptors.templates.len();
        s.state.prompt_count = descriptors.prompts.len();
        s.state
            .warnings
            .retain(|w| !w.starts_with("enumeration: ") && !w.starts_with("the server negotiated"));
        s.state.warnings.extend(warnings.iter().cloned());
        s.protocol_version = negotiated.clone();
        s.server_info = info.as_ref().and_then(|i| {
            i.server_info
                .as_ref()
                .map(|si| (si.name.clone(), si.version.clone()))
        });
        s.instructions = info.as_ref().and_then(|i| i.instructions.clone());
    });
    shared.descriptors.send_replace(Arc::new(descriptors));
    Ok(connection)
}

/// Adds the app's last stderr lines to a failure reason.
fn with_stderr(shared: &AppShared, reason: String) -> String {
    let tail = shared.stderr.last(STDERR_IN_REASON);
    if tail.is_empty() {
        reason
    } else {
        format!("{reason}; stderr: {}", tail.join(" | "))
    }
}

/// Which lists to (re-)enumerate.
#[derive(Debug, Clone, Copy)]
struct Lists {
    tools: bool,
    resources: bool,
    prompts: bool,
}

/// Lists tools, resources, templates and prompts, as the server's capabilities allow. A
/// failing `tools/list` fails the start; the others become warnings.
async fn enumerate(
    connection: &Connection,
    timeout: Duration,
) -> Result<(Descriptors, Vec<String>), String> {
    let mut descriptors = Descriptors::default();
    let warnings = enumerate_into(
        connection,
        timeout,
        &mut descriptors,
        Lists {
            tools: true,
            resources: true,
            prompts: true,
        },
    )
    .await?;
    Ok((descriptors, warnings))
}

async fn enumerate_into(
    connection: &Connection,
    timeout: Duration,
    descriptors: &mut Descriptors,
    lists: Lists,
) -> Result<Vec<String>, String> {
    let peer = connection.client.peer();
    let capabilities = connection
        .client
        .peer_info()
        .map(|info| info.capabilities.clone())
        .unwrap_or_default();
    let mut warnings = Vec::new();
    if lists.tools {
        descriptors.tools = if capabilities.tools.is_some() {
            let tools = bounded(
                "tools/list",
                tokio::time::timeout(timeout, peer.list_all_tools()).await,
                timeout,
            )?;
            tools
                .iter()
                .filter(|t| !t.name.trim().is_empty())
                .map(ToolDescriptor::from_tool)
                .collect()
        } else {
            Vec::new()
        };
    }
    if lists.resources && capabilities.resources.is_some() {
        match bounded(
            "resources/list",
            tokio::time::timeout(timeout, peer.list_all_resources()).await,
            timeout,
        ) {
            Ok(resources) => {
                descriptors.resources = resources
                    .iter()
                    .map(ResourceDescriptor::from_resource)
                    .collect()
            }
            Err(w) => warnings.push(format!("enumeration: {w}")),
        }
        match tokio::time::timeout(timeout, peer.list_all_resource_templates()).await {
            Ok(Ok(templates)) => {
                descriptors.templates = templates
                    .iter()
                    .map(ResourceTemplateDescriptor::from_template)
                    .collect();
            }
            // Servers without templates often answer "method not found"; that is no problem.
            Ok(Err(ServiceError::McpError(e))) if e.code == ErrorCode::METHOD_NOT_FOUND => {}
            Ok(Err(err)) => warnings.push(format!(
                "enumeration: resources/templates/list failed: {err}"
            )),
            Err(_) => warnings.push(format!(
                "enumeration: resources/templates/list timed out after {} s",
                timeout.as_secs()
            )),
        }
    }
    if lists.prompts && capabilities.prompts.is_some() {
        match bounded(
            "prompts/list",
            tokio::time::timeout(timeout, peer.list_all_prompts()).await,
            timeout,
        ) {
            Ok(prompts) => {
                descriptors.prompts = prompts.iter().map(PromptDescriptor::from_prompt).collect()
            }
            Err(w) => warnings.push(format!("enumeration: {w}")),
        }
    }
    Ok(warnings)
}

/// Turns a listing bounded by a timeout into items or a message.
fn bounded<T>(
    what: &str,
    result: Result<Result<Vec<T>, ServiceError>, tokio::time::error::Elapsed>,
    timeout: Duration,
) -> Result<Vec<T>, String> {
    match result {
        Ok(Ok(items)) => Ok(items),
        Ok(Err(err)) => Err(format!("{what} failed: {err}")),
        Err(_) => Err(format!("{what} timed out after {} s", timeout.as_secs())),
    }
}

/// Serves a connected app until it dies, is told to stop, or the gateway shuts down.
async fn run(
    shared: &Arc<AppShared>,
    connection: &Arc<Connection>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    notices: &mut mpsc::UnboundedReceiver<Notice>,
    spec: &AppSpec,
    policy: &SupervisionPolicy,
) -> Outcome {
    let mut closed = connection.closed();
    let (ping_tx, mut ping_rx) = mpsc::unbounded_channel::<Result<(), String>>();
    let mut ping_in_flight = false;
    let mut ping_failures = 0u32;
    let interval = policy
        .health_check_interval
        .unwrap_or(Duration::from_secs(3600 * 24 * 365));
    let mut health = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            reason = crate::session::closed_reason(&mut closed) => {
                return Outcome::Died(with_stderr(shared, reason));
            }
            _ = health.tick(), if policy.health_check_interval.is_some() && !ping_in_flight => {
                ping_in_flight = true;
                let shared = shared.clone();
                let ping_tx = ping_tx.clone();
                tokio::spawn(async move {
                    let result = shared
                        .request("ping", ClientRequest::PingRequest(Default::default()), None)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string());
                    let _ = ping_tx.send(result);
                }.in_current_span());
            }
            Some(result) = ping_rx.recv() => {
                ping_in_flight = false;
                match result {
                    Ok(()) => ping_failures = 0,
                    Err(err) => {
                        ping_failures += 1;
                        warn!(app = %shared.id, "health check {ping_failures}/{} failed: {err}", policy.health_check_failures);
                        if ping_failures >= policy.health_check_failures {
                            return Outcome::Died(with_stderr(shared, format!(
                                "health check failed {ping_failures} times in a row: {err}"
                            )));
                        }
                    }
                }
            }
            Some(notice) = notices.recv() => {
                let lists = Lists {
                    tools: notice == Notice::Tools,
                    resources: notice == Notice::Resources,
                    prompts: notice == Notice::Prompts,
                };
                refresh(shared, connection, spec.request_timeout, lists).await;
            }
            command = commands.recv() => match command {
                Some(Command::Stop) => return Outcome::Stop,
                Some(Command::Restart) => return Outcome::Restart,
                Some(Command::Start) => {}
                Some(Command::Reconfigure(config)) => return Outcome::Reconfigure(config),
                Some(Command::Shutdown(done)) => return Outcome::Shutdown(Some(done)),
                None => return Outcome::Shutdown(None),
            },
        }
    }
}

/// Re-enumerates after a list-changed notification and publishes the change.
async fn refresh(
    shared: &Arc<AppShared>,
    connection: &Connection,
    timeout: Duration,
    lists: Lists,
) {
    let mut descriptors = (*shared.descriptors()).clone();
    match enumerate_into(connection, timeout, &mut descriptors, lists).await {
        Ok(warnings) => {
            for warning in warnings {
                warn!(app = %shared.id, "{warning}");
            }
            shared.update(|s| {
                s.state.tool_count = descriptors.tools.len();
                s.state.resource_count = descriptors.resources.len();
                s.state.resource_template_count = descriptors.templates.len();
                s.state.prompt_count = descriptors.prompts.len();
            });
            shared.descriptors.send_replace(Arc::new(descriptors));
            let app_id = shared.id.clone();
            let event = if lists.tools {
                SupervisorEvent::ToolsChanged { app_id }
            } else if lists.resources {
                SupervisorEvent::ResourcesChanged { app_id }
            } else {
                SupervisorEvent::PromptsChanged { app_id }
            };
            let _ = shared.events.send(event);
        }
        Err(err) => {
            warn!(app = %shared.id, "re-listing after a change failed, keeping the old list: {err}")
        }
    }
}
