//! One app under supervision: its shared state, the task that connects, watches and restarts
//! it, and the calls made through its current connection.
//!
//! The task only does I/O: it waits for the next command, start result, closed connection,
//! health tick or ping result, list change or restart timer, tells the app's lifecycle
//! machine (`lifecycle.rs`, where every rule of the restart policy lives) and carries out
//! its decisions in order.

use std::future::Future;
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use mcpapp_manifest::{AppSpec, InstallState, Lifecycle, ProtocolEra, Timestamp};
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
use crate::era::Era;
use crate::error::{CallError, ControlError};
use crate::events::SupervisorEvent;
use crate::launch::{self, Environment, Inheritance, LaunchPlan};
use crate::lifecycle::{Decision, Event, Machine};
use crate::link::stdio::{ProcessTable, StderrTail};
use crate::link::{Link, LinkEvent, http, stdio};
use crate::policy::SupervisionPolicy;
use crate::raw::RawMessage;
use crate::session::{Connection, EraChoice, HandshakeError, Port, PortError};

/// Stderr lines quoted in a failure reason.
const STDERR_IN_REASON: usize = 5;

/// A point-in-time view of one app.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AppSnapshot {
    /// The install state: effective manifest, paths, validity, lifecycle, timestamps, last
    /// error and counts.
    pub state: InstallState,
    /// How many times the app has been started again after its first start: each restart
    /// after a failure (also one pulled forward by a command or a reload) and each
    /// [`restart`](crate::AppHandle::restart) of a running app.
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
    /// The sandbox of the current (or last) start of a stdio app.
    pub sandbox: Option<mcpapp_sandbox::SandboxReport>,
}

/// An app's effective launch settings besides its spec: how it is kept alive and what it
/// inherits of the gateway's environment. A reload compares them, so a configuration change
/// restarts exactly the apps whose settings it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) policy: SupervisionPolicy,
    pub(crate) inheritance: Inheritance,
}

/// Commands for an app's task.
#[derive(Debug)]
pub(crate) enum Command {
    Start,
    Stop,
    Restart,
    /// A reload changed the app: run it with this spec from now on.
    Reconfigure(Box<(AppSpec, InstallState, Settings)>),
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
    spec: Mutex<Option<(AppSpec, Settings)>>,
    /// The chat sessions of the gateway's own requests in flight.
    causes: crate::elicit::Causes,
    /// Answers input a modern app asks of the gateway's own calls.
    pub(crate) elicitor: Option<Arc<dyn crate::elicit::Elicitor>>,
    /// Its call counters, shared with the hub of each connection.
    pub(crate) meters: Arc<crate::metrics::AppMeters>,
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
    /// Answers elicitations of the gateway's own calls (see `elicit.rs`).
    pub(crate) elicitor: Option<Arc<dyn crate::elicit::Elicitor>>,
    pub(crate) processes: ProcessTable,
}

impl AppShared {
    /// Creates the shared state; a runnable app also gets a command channel (its task is
    /// started by [`spawn_task`]).
    pub(crate) fn new(
        state: InstallState,
        runnable: Option<(AppSpec, Settings)>,
        events: broadcast::Sender<SupervisorEvent>,
        elicitor: Option<Arc<dyn crate::elicit::Elicitor>>,
        metrics: &crate::metrics::SupervisorMetrics,
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
            sandbox: None,
        };
        let shared = Arc::new(Self {
            meters: metrics.app(snapshot.state.id()),
            id: snapshot.state.id().to_owned(),
            snapshot: watch::channel(snapshot).0,
            connection: Mutex::new(None),
            descriptors: watch::channel(Arc::new(Descriptors::default())).0,
            stderr: StderrTail::default(),
            causes: crate::elicit::Causes::default(),
            elicitor,
            commands,
            events,
            spec: Mutex::new(runnable),
        });
        (shared, receiver)
    }

    pub(crate) fn snapshot(&self) -> AppSnapshot {
        self.snapshot.borrow().clone()
    }

    pub(crate) fn lifecycle(&self) -> Lifecycle {
        self.snapshot.borrow().state.lifecycle
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
            .map(|(_, settings)| settings.policy)
    }

    pub(crate) fn settings(&self) -> Option<Settings> {
        self.spec
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(_, settings)| settings.clone())
    }

    /// The spec and settings to launch with, read together so a reload between the two
    /// cannot mix old and new.
    fn runnable(&self) -> Option<(AppSpec, Settings)> {
        self.spec.lock().unwrap_or_else(|p| p.into_inner()).clone()
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
        mut meta: Option<RequestMetaObject>,
    ) -> Result<ServerResult, CallError> {
        // Health checks stay out of traces: they belong to no caller's work.
        let span = if matches!(method, "ping" | "server/discover") {
            tracing::Span::none()
        } else {
            info_span!("mcp_upstream_request", app = %self.id, method, path = "agent")
        };
        crate::trace_context::inject_meta(&mut meta, &span);
        self.send(method, request, meta).instrument(span).await
    }

    async fn send(
        &self,
        method: &str,
        request: ClientRequest,
        meta: Option<RequestMetaObject>,
    ) -> Result<ServerResult, CallError> {
        let connection = self.current().ok_or_else(|| self.not_running())?;
        let timeout = connection.request_timeout;
        let mut options = PeerRequestOptions::with_timeout(timeout);
        let session = meta
            .as_ref()
            .and_then(|m| m.0.get("sessionId"))
            .and_then(|s| s.as_str())
            .map(str::to_owned);
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
        // The chat session a call belongs to, for an elicitation it causes.
        let _cause = session.map(|session| {
            self.causes.note(&handle.id, session);
            CauseGuard {
                causes: self.causes.clone(),
                id: handle.id.clone(),
            }
        });
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

    /// Asks the app whether it is alive: `ping`, or `server/discover` for a modern app (the
    /// modern era has no `ping`).
    pub(crate) async fn health_check(&self) -> Result<(), CallError> {
        let modern = self.current().is_some_and(|c| c.era == Era::Modern);
        if modern {
            let discover = rmcp::model::DiscoverRequest::new(rmcp::model::DiscoverRequestParams {});
            self.request(
                "server/discover",
                ClientRequest::DiscoverRequest(discover),
                None,
            )
            .await
            .map(|_| ())
        } else {
            self.request("ping", ClientRequest::PingRequest(Default::default()), None)
                .await
                .map(|_| ())
        }
    }

    /// Opens a port on the current upstream session for one request of a modern client.
    pub(crate) fn open_modern_port(&self, request: &RawMessage) -> Result<Port, PortError> {
        let connection = self
            .current()
            .ok_or_else(|| PortError::NotRunning(self.snapshot.borrow().state.lifecycle))?;
        connection.open_modern_port(request)
    }

    /// Opens a port on the current upstream session for the client that sent `initialize`.
    pub(crate) async fn open_port(
        &self,
        initialize: &RawMessage,
    ) -> Result<(Port, RawMessage), PortError> {
        let connection = self
            .current()
            .ok_or_else(|| PortError::NotRunning(self.snapshot.borrow().state.lifecycle))?;
        connection.open_port(initialize).await
    }
}

/// Forgets a request's session once it is answered (or given up).
struct CauseGuard {
    causes: crate::elicit::Causes,
    id: rmcp::model::RequestId,
}

impl Drop for CauseGuard {
    fn drop(&mut self) {
        self.causes.forget(&self.id);
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

/// What a reload hands an app: its new spec, install state and settings.
type Configuration = (AppSpec, InstallState, Settings);

/// A start attempt in flight; dropping it kills whatever it started.
type StartAttempt = Pin<Box<dyn Future<Output = Result<Connection, String>> + Send>>;

/// The app's task: the I/O around its lifecycle [`Machine`]. It waits for the next thing that
/// happens, tells the machine, and carries out what the machine decides.
struct Task {
    shared: Arc<AppShared>,
    context: TaskContext,
    machine: Machine,
    attempt: Option<StartAttempt>,
    /// List-change notices of the attempt's connection, until the connection is used.
    notices: Option<mpsc::UnboundedReceiver<Notice>>,
    /// A connection that has just started, until the machine decides to use it.
    started: Option<Connection>,
    live: Option<Live>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The stderr of the current run, quoted in its failure reasons.
    run: StderrTail,
    /// The payload of the `Reconfigure` being handled.
    configuration: Option<Box<Configuration>>,
    /// Whom to tell that a requested shutdown is done.
    acknowledge: Option<oneshot::Sender<()>>,
}

/// The connection in use and what is watched on it.
struct Live {
    connection: Arc<Connection>,
    closed: watch::Receiver<Option<String>>,
    notices: mpsc::UnboundedReceiver<Notice>,
    health: Option<tokio::time::Interval>,
    ping_results: mpsc::UnboundedSender<Result<(), String>>,
    pings: mpsc::UnboundedReceiver<Result<(), String>>,
}

/// What woke the task.
enum Wake {
    Command(Option<Command>),
    Started(Result<Connection, String>),
    Closed(String),
    HealthTick,
    Ping(Result<(), String>),
    Notice(Notice),
    Timer,
}

async fn supervise(
    shared: Arc<AppShared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    context: TaskContext,
) {
    let Some(policy) = shared.policy() else {
        return;
    };
    // Apps that fail together must not restart in lockstep: each gets its own seed.
    let seed = std::collections::hash_map::RandomState::new().hash_one(&shared.id);
    let mut task = Task {
        machine: Machine::new(policy, seed),
        run: shared.stderr.clone(),
        shared,
        context,
        attempt: None,
        notices: None,
        started: None,
        live: None,
        timer: None,
        configuration: None,
        acknowledge: None,
    };
    let mut event = Event::Start;
    loop {
        let decisions = task.machine.handle(event, Instant::now());
        if !task.carry_out(decisions).await {
            return;
        }
        // A connection the machine did not take (it was stopped meanwhile) closes on drop.
        task.started = None;
        event = task.next_event(&mut commands).await;
    }
}

/// Awaits `future` if there is one; without one it never resolves (a disabled branch).
async fn optional<F: Future>(future: Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

impl Task {
    /// Waits for the next event for the machine, handling list changes on the way.
    async fn next_event(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Event {
        loop {
            match self.wait(commands).await {
                Wake::Command(command) => return self.command_event(command),
                Wake::Started(result) => {
                    self.attempt = None;
                    return match result {
                        Ok(connection) => {
                            self.started = Some(connection);
                            Event::Started
                        }
                        Err(reason) => Event::StartFailed(reason),
                    };
                }
                Wake::Closed(reason) => return Event::Closed(with_stderr(&self.run, reason)),
                Wake::HealthTick => return Event::HealthTick,
                Wake::Ping(Ok(())) => return Event::PingOk,
                Wake::Ping(Err(error)) => {
                    warn!(
                        app = %self.shared.id,
                        "health check {}/{} failed: {error}",
                        self.machine.failed_pings() + 1,
                        self.shared.policy().map_or(0, |p| p.health_check_failures)
                    );
                    return Event::PingFailed(with_stderr(&self.run, error));
                }
                Wake::Timer => {
                    self.timer = None;
                    return Event::TimerFired;
                }
                Wake::Notice(notice) => {
                    if let Some(live) = &self.live {
                        let lists = Lists {
                            tools: notice == Notice::Tools,
                            resources: notice == Notice::Resources,
                            prompts: notice == Notice::Prompts,
                        };
                        let timeout = live.connection.request_timeout;
                        // Boxed: the listings run side by side, so their futures are all held
                        // at once, and inline they would make every app's task future (alive
                        // for the app's whole life) three times larger for a rare event.
                        Box::pin(refresh(&self.shared, &live.connection, timeout, lists)).await;
                    }
                }
            }
        }
    }

    /// Waits for a command, the start attempt, the connection closing, a health tick or
    /// ping result, a list change, or the restart timer, whichever comes first.
    async fn wait(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Wake {
        let attempt = self.attempt.as_mut();
        let timer = self.timer.as_mut();
        let (closed, tick, ping, notice) = match self.live.as_mut() {
            Some(Live {
                closed,
                notices,
                health,
                pings,
                ..
            }) => (
                Some(crate::session::closed_reason(closed)),
                health.as_mut().map(tokio::time::Interval::tick),
                Some(pings.recv()),
                Some(notices.recv()),
            ),
            None => (None, None, None, None),
        };
        tokio::select! {
            command = commands.recv() => Wake::Command(command),
            result = optional(attempt) => Wake::Started(result),
            reason = optional(closed) => Wake::Closed(reason),
            _ = optional(tick) => Wake::HealthTick,
            Some(result) = optional(ping) => Wake::Ping(result),
            Some(notice) = optional(notice) => Wake::Notice(notice),
            () = optional(timer) => Wake::Timer,
        }
    }

    /// Turns a command into an event, keeping what it carries for the decisions.
    fn command_event(&mut self, command: Option<Command>) -> Event {
        match command {
            Some(Command::Start) => Event::Start,
            Some(Command::Stop) => Event::Stop,
            Some(Command::Restart) => Event::Restart,
            Some(Command::Reconfigure(configuration)) => {
                let policy = configuration.2.policy;
                self.configuration = Some(configuration);
                Event::Reconfigure(policy)
            }
            Some(Command::Shutdown(done)) => {
                self.acknowledge = Some(done);
                Event::Shutdown
            }
            // The sender lives in the shared state, so this means nobody can reach the app
            // any more: stop it.
            None => Event::Shutdown,
        }
    }

    /// Carries out decisions in order; `false` once the task must end.
    async fn carry_out(&mut self, decisions: Vec<Decision>) -> bool {
        for decision in decisions {
            match decision {
                Decision::Connect => self.connect(),
                Decision::AbandonStart => {
                    self.attempt = None;
                    self.notices = None;
                }
                Decision::UseConnection => self.use_connection(),
                Decision::WatchHealth { every } => {
                    if let Some(live) = &mut self.live {
                        let first = tokio::time::Instant::now().checked_add(every);
                        live.health = first.map(|first| {
                            let mut health = tokio::time::interval_at(first, every);
                            health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                            health
                        });
                    }
                }
                Decision::Ping => self.ping(),
                Decision::Disconnect { grace } => {
                    if let Some(live) = self.live.take() {
                        self.shared.set_connection(None);
                        live.connection.shutdown(grace).await;
                    }
                }
                Decision::Transition { to, reason } => self.shared.transition(to, reason),
                Decision::ScheduleRestart { at, delay, attempt } => {
                    self.timer = Some(Box::pin(tokio::time::sleep_until(at.into())));
                    let due = SystemTime::now()
                        .checked_add(delay)
                        .map(Timestamp::from_system_time);
                    self.shared.update(|s| s.next_restart = due);
                    let _ = self.shared.events.send(SupervisorEvent::RestartScheduled {
                        app_id: self.shared.id.clone(),
                        attempt,
                        delay,
                    });
                    info!(
                        "McpApp '{}' restarts in {} ms",
                        self.shared.id,
                        delay.as_millis()
                    );
                }
                Decision::CancelTimer => {
                    self.timer = None;
                    self.shared.update(|s| s.next_restart = None);
                }
                Decision::CountRestart => self
                    .shared
                    .update(|s| s.restart_count = s.restart_count.saturating_add(1)),
                Decision::CrashLoop(on) => self.shared.update(|s| s.crash_loop = on),
                Decision::ApplyConfiguration => {
                    if let Some(configuration) = self.configuration.take() {
                        apply_reconfigure(&self.shared, *configuration);
                    }
                }
                Decision::AcknowledgeShutdown => {
                    if let Some(done) = self.acknowledge.take() {
                        let _ = done.send(());
                    }
                }
                Decision::Exit => return false,
            }
        }
        true
    }

    /// Begins a start attempt with the current spec, as a new stderr run.
    fn connect(&mut self) {
        let (notices, notice_rx) = mpsc::unbounded_channel();
        self.notices = Some(notice_rx);
        self.run = self.shared.stderr.begin_run();
        let attempt: StartAttempt = match self.shared.runnable() {
            Some((spec, settings)) => {
                info!(
                    "Connecting to McpApp '{}' via {}",
                    self.shared.id,
                    spec.launch.transport()
                );
                let shared = self.shared.clone();
                let context = self.context.clone();
                let run = self.run.clone();
                Box::pin(async move {
                    start(
                        &shared,
                        &spec,
                        &settings.inheritance,
                        &context,
                        notices,
                        &run,
                    )
                    .await
                })
            }
            // Runnable apps always have a spec; failing beats waiting forever.
            None => Box::pin(async { Err("the app has no runnable configuration".to_owned()) }),
        };
        self.attempt = Some(attempt);
    }

    /// Makes the connection that just started the current one.
    fn use_connection(&mut self) {
        let Some(connection) = self.started.take() else {
            return;
        };
        let connection = Arc::new(connection);
        self.shared.set_connection(Some(connection.clone()));
        self.shared.update(|s| s.pid = connection.pid());
        let (ping_results, pings) = mpsc::unbounded_channel();
        self.live = Some(Live {
            closed: connection.closed(),
            connection,
            // Without its own receiver (never the case) the app's notices are not followed.
            notices: self
                .notices
                .take()
                .unwrap_or_else(|| mpsc::unbounded_channel().1),
            health: None,
            ping_results,
            pings,
        });
    }

    /// Sends one health ping in the background; the result comes back on the live channel.
    fn ping(&self) {
        let Some(live) = &self.live else {
            return;
        };
        let shared = self.shared.clone();
        let results = live.ping_results.clone();
        tokio::spawn(
            async move {
                let result = shared.health_check().await.map_err(|e| e.to_string());
                let _ = results.send(result);
            }
            .in_current_span(),
        );
    }
}

fn apply_reconfigure(shared: &AppShared, config: Configuration) {
    let (spec, state, settings) = config;
    *shared.spec.lock().unwrap_or_else(|p| p.into_inner()) = Some((spec, settings));
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
    inheritance: &Inheritance,
    context: &TaskContext,
    notices: mpsc::UnboundedSender<Notice>,
    run: &StderrTail,
) -> Result<Connection, String> {
    let root: PathBuf = shared.snapshot.borrow().state.root_path.clone();
    // A legacy version in the manifest means `initialize` at once (some older servers end
    // when asked anything else first); otherwise the app is asked, which also keeps a
    // manifest that claims 2026-07-28 for an older server working (with a warning).
    let mut choice = match spec.protocol_era {
        ProtocolEra::Legacy => EraChoice::Legacy,
        _ => EraChoice::Auto,
    };
    let deadline = spec.startup_timeout;
    let list_notices = notices.clone();
    let work = async {
        let connection = loop {
            let plan = launch::plan(
                spec,
                &root,
                &context.env,
                inheritance,
                run,
                &context.processes,
            )?;
            let (events_tx, events_rx) = mpsc::unbounded_channel::<LinkEvent>();
            let link = match plan {
                LaunchPlan::Stdio(spawn) => {
                    let report = spawn.sandbox.as_ref().clone();
                    shared.update(|s| s.sandbox = Some(report));
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
            let handler = GatewayClient::new(
                shared.id.clone(),
                notices.clone(),
                shared.causes.clone(),
                context.elicitor.clone(),
            );
            match Connection::open(
                &shared.id,
                link,
                events_rx,
                handler,
                spec.request_timeout,
                choice,
                shared.meters.clone(),
            )
            .await
            {
                Ok(connection) => break connection,
                // Some servers end when asked anything before `initialize`: start it again
                // and use `initialize` at once.
                Err(HandshakeError::ProbeClosed(reason)) if choice == EraChoice::Auto => {
                    info!(app = %shared.id, "the app ended when asked for its era ({reason}); starting it again with initialize");
                    choice = EraChoice::Legacy;
                }
                Err(HandshakeError::LinkClosed(reason) | HandshakeError::ProbeClosed(reason)) => {
                    return Err(reason);
                }
                Err(HandshakeError::Protocol(message)) => {
                    return Err(format!("the MCP handshake failed: {message}"));
                }
            }
        };
        connection
            .client
            .peer()
            .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
            .await;
        let (descriptors, warnings) = enumerate(&connection, spec.request_timeout).await?;
        Ok::<_, String>((connection, descriptors, warnings))
    };
    let (connection, descriptors, mut warnings) = match tokio::time::timeout(deadline, work).await {
        Ok(result) => result.map_err(|reason| with_stderr(run, reason))?,
        Err(_) => {
            return Err(with_stderr(
                run,
                format!(
                    "startup timed out after {} s (connect, MCP handshake and listing must finish within startupTimeoutSeconds)",
                    deadline.as_secs()
                ),
            ));
        }
    };

    if connection.era == Era::Modern {
        listen_for_changes(&connection, list_notices);
    }
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
    shared
        .meters
        .know_tools(descriptors.tools.iter().map(|t| t.name.as_str()));
    shared.descriptors.send_replace(Arc::new(descriptors));
    Ok(connection)
}

/// A modern app announces list changes only on a `subscriptions/listen` stream: the gateway's
/// client listens for the lists the app says can change, for as long as the connection lives.
fn listen_for_changes(connection: &Connection, notices: mpsc::UnboundedSender<Notice>) {
    let capabilities = connection
        .client
        .peer_info()
        .map(|info| info.capabilities.clone())
        .unwrap_or_default();
    let mut filter = rmcp::model::SubscriptionFilter::builder();
    let mut any = false;
    if capabilities.tools.as_ref().and_then(|t| t.list_changed) == Some(true) {
        filter = filter.tools_list_changed();
        any = true;
    }
    if capabilities.prompts.as_ref().and_then(|p| p.list_changed) == Some(true) {
        filter = filter.prompts_list_changed();
        any = true;
    }
    if capabilities.resources.as_ref().and_then(|r| r.list_changed) == Some(true) {
        filter = filter.resources_list_changed();
        any = true;
    }
    if !any {
        return;
    }
    let filter = filter.build();
    let peer = connection.client.peer().clone();
    tokio::spawn(
        async move {
            let mut subscription = match peer.listen(filter).await {
                Ok(subscription) => subscription,
                Err(err) => {
                    warn!("cannot listen for the app's list changes: {err}");
                    return;
                }
            };
            while let Ok(Some(notification)) = subscription.next().await {
                let notice = match notification {
                    rmcp::model::ServerNotification::ToolListChangedNotification(_) => {
                        Notice::Tools
                    }
                    rmcp::model::ServerNotification::PromptListChangedNotification(_) => {
                        Notice::Prompts
                    }
                    rmcp::model::ServerNotification::ResourceListChangedNotification(_) => {
                        Notice::Resources
                    }
                    _ => continue,
                };
                if notices.send(notice).is_err() {
                    break;
                }
            }
        }
        .in_current_span(),
    );
}

/// Adds the last stderr lines of the current run to a failure reason.
fn with_stderr(run: &StderrTail, reason: String) -> String {
    let tail = run.last(STDERR_IN_REASON);
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
    let resources = lists.resources && capabilities.resources.is_some();
    let prompts = lists.prompts && capabilities.prompts.is_some();
    // The lists are asked for at once rather than one after another: each is a round trip
    // through the hub and the app, and at start-up four of them in a row were most of an
    // app's time to Running. What the results mean (and the order of the warnings) stays
    // as if they had been asked in turn.
    let (tools, resource_list, templates, prompt_list) = tokio::join!(
        optional_list(lists.tools && capabilities.tools.is_some(), || {
            tokio::time::timeout(timeout, peer.list_all_tools())
        }),
        optional_list(resources, || tokio::time::timeout(
            timeout,
            peer.list_all_resources()
        )),
        optional_list(resources, || tokio::time::timeout(
            timeout,
            peer.list_all_resource_templates()
        )),
        optional_list(prompts, || tokio::time::timeout(
            timeout,
            peer.list_all_prompts()
        )),
    );
    let mut warnings = Vec::new();
    if lists.tools {
        descriptors.tools = match tools {
            Some(tools) => bounded("tools/list", tools, timeout)?
                .iter()
                .filter(|t| !t.name.trim().is_empty())
                .map(ToolDescriptor::from_tool)
                .collect(),
            None => Vec::new(),
        };
    }
    if let Some(resource_list) = resource_list {
        match bounded("resources/list", resource_list, timeout) {
            Ok(resources) => {
                descriptors.resources = resources
                    .iter()
                    .map(ResourceDescriptor::from_resource)
                    .collect()
            }
            Err(w) => warnings.push(format!("enumeration: {w}")),
        }
    }
    match templates {
        None => {}
        Some(Ok(Ok(templates))) => {
            descriptors.templates = templates
                .iter()
                .map(ResourceTemplateDescriptor::from_template)
                .collect();
        }
        // Servers without templates often answer "method not found"; that is no problem.
        Some(Ok(Err(ServiceError::McpError(e)))) if e.code == ErrorCode::METHOD_NOT_FOUND => {}
        Some(Ok(Err(err))) => warnings.push(format!(
            "enumeration: resources/templates/list failed: {err}"
        )),
        Some(Err(_)) => warnings.push(format!(
            "enumeration: resources/templates/list timed out after {} s",
            timeout.as_secs()
        )),
    }
    if let Some(prompt_list) = prompt_list {
        match bounded("prompts/list", prompt_list, timeout) {
            Ok(prompts) => {
                descriptors.prompts = prompts.iter().map(PromptDescriptor::from_prompt).collect()
            }
            Err(w) => warnings.push(format!("enumeration: {w}")),
        }
    }
    Ok(warnings)
}

/// Runs the listing `list` makes if `wanted`, else nothing.
async fn optional_list<F: Future>(wanted: bool, list: impl FnOnce() -> F) -> Option<F::Output> {
    if wanted { Some(list().await) } else { None }
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
            shared
                .meters
                .know_tools(descriptors.tools.iter().map(|t| t.name.as_str()));
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
