//! One app under supervision: the state every holder of it shares ([`AppShared`]: its
//! snapshot, current connection, descriptors and command channel), and the four concerns
//! around it, one file each:
//!
//! - `calls.rs`: the calls made through the current connection (what `AppHandle` uses),
//!   bounded by the app's request timeout and cancelled upstream when given up.
//! - `task.rs`: the supervision task, the I/O around the app's lifecycle machine
//!   (`lifecycle.rs`, where every rule of the restart policy lives): it waits for the next
//!   thing that happens, tells the machine and carries out its decisions in order.
//! - `start.rs`: one start attempt: launch or connect, the MCP handshake, the first listing,
//!   all within the startup timeout, and what the start tells about the server.
//! - `enumerate.rs`: listing tools, resources, templates and prompts into `Descriptors`, and
//!   listing again when the app says a list changed.
//!
//! `error.rs` names what can go wrong in a start or a listing, and the warnings a start
//! leaves, as types; their texts are what people read.

mod calls;
mod enumerate;
mod error;
mod start;
mod task;

use std::sync::{Arc, Mutex};

use mcpapp_manifest::{AppSpec, InstallState, Lifecycle, OAuthEntryConfig, Timestamp};
use mcpapp_oauth::{AppAuthorizer, AuthState, OAuthClient};
use mcpapp_session::{Causes, Connection, Elicitor};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tracing::{info, warn};

use crate::descriptors::Descriptors;
use crate::error::{CallError, ControlError};
use crate::events::SupervisorEvent;
use crate::launch::{Environment, Inheritance};
use crate::link::stdio::{ProcessTable, StderrTail};
use crate::policy::SupervisionPolicy;

pub(crate) use calls::session_of;
pub(crate) use task::spawn_task;

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
    /// Where an HTTP app the gateway authorizes to with OAuth stands with its authorization
    /// server (the issuer, the scopes granted or wanted; never a token); `None` for apps the
    /// gateway does not authorize to.
    pub authorization: Option<AuthState>,
    /// The sandbox of the current (or last) start of a stdio app.
    pub sandbox: Option<mcpapp_sandbox::SandboxReport>,
}

/// A snapshot is an install state plus what supervision adds, so code that reads install
/// states (a waiter for a lifecycle state, say) reads snapshots too.
impl AsRef<InstallState> for AppSnapshot {
    fn as_ref(&self) -> &InstallState {
        &self.state
    }
}

/// An app's effective launch settings besides its spec: how it is kept alive and what it
/// inherits of the gateway's environment. A reload compares them, so a configuration change
/// restarts exactly the apps whose settings it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) policy: SupervisionPolicy,
    pub(crate) inheritance: Inheritance,
    /// Its entry's `OAuth` settings (an HTTP app protected by OAuth).
    pub(crate) oauth: OAuthEntryConfig,
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
    /// The warnings discovery gave the app; a start shows its own after them, replacing the
    /// previous start's.
    discovered_warnings: Mutex<Vec<String>>,
    /// The chat sessions of the gateway's own requests in flight.
    causes: Causes,
    /// Answers input a modern app asks of the gateway's own calls.
    pub(crate) elicitor: Option<Arc<dyn Elicitor>>,
    /// Its call counters, shared with the hub of each connection.
    pub(crate) meters: Arc<crate::metrics::AppMeters>,
    /// The OAuth authorizer of its current start (an HTTP app the gateway authorizes to).
    authorizer: Mutex<Option<AppAuthorizer>>,
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
    /// Answers elicitations of the gateway's own calls (see `mcpapp_session::Elicitor`).
    pub(crate) elicitor: Option<Arc<dyn Elicitor>>,
    pub(crate) processes: ProcessTable,
    /// The gateway as the OAuth client of its HTTP apps, if it is one.
    pub(crate) oauth: Option<OAuthClient>,
}

impl AppShared {
    /// Creates the shared state; a runnable app also gets a command channel (its task is
    /// started by [`spawn_task`]).
    pub(crate) fn new(
        state: InstallState,
        runnable: Option<(AppSpec, Settings)>,
        events: broadcast::Sender<SupervisorEvent>,
        elicitor: Option<Arc<dyn Elicitor>>,
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
            authorization: None,
            sandbox: None,
        };
        let shared = Arc::new(Self {
            meters: metrics.app(snapshot.state.id()),
            id: snapshot.state.id().to_owned(),
            discovered_warnings: Mutex::new(snapshot.state.warnings.clone()),
            snapshot: watch::channel(snapshot).0,
            connection: Mutex::new(None),
            descriptors: watch::channel(Arc::new(Descriptors::default())).0,
            stderr: StderrTail::default(),
            causes: Causes::default(),
            elicitor,
            commands,
            events,
            spec: Mutex::new(runnable),
            authorizer: Mutex::new(None),
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

    /// Takes a reload's new spec, install state and settings, keeping where the app is in
    /// its lifecycle (state, since when, last error).
    fn reconfigure(&self, spec: AppSpec, state: InstallState, settings: Settings) {
        *self.spec.lock().unwrap_or_else(|p| p.into_inner()) = Some((spec, settings));
        state.warnings.clone_into(
            &mut self
                .discovered_warnings
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        self.update(|s| {
            let lifecycle = s.state.lifecycle;
            let changed_at = s.state.state_changed_at;
            let last_error = s.state.last_error.take();
            s.state = state;
            s.state.lifecycle = lifecycle;
            s.state.state_changed_at = changed_at;
            s.state.last_error = last_error;
        });
    }

    /// The warnings to show after a start: discovery's, then the start's own.
    fn warnings_with(&self, start: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut warnings = self
            .discovered_warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        warnings.extend(start);
        warnings
    }

    /// Makes `descriptors` what the app offers: the counts in its state (with whatever else
    /// `also` changes, in the same update), its meters' tool names, and its descriptors.
    fn publish(&self, descriptors: Descriptors, also: impl FnOnce(&mut AppSnapshot)) {
        self.update(|s| {
            s.state.tool_count = descriptors.tools.len();
            s.state.resource_count = descriptors.resources.len();
            s.state.resource_template_count = descriptors.templates.len();
            s.state.prompt_count = descriptors.prompts.len();
            also(s);
        });
        self.meters
            .know_tools(descriptors.tools.iter().map(|t| t.name.as_str()));
        self.descriptors.send_replace(Arc::new(descriptors));
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

    pub(crate) fn authorizer(&self) -> Option<AppAuthorizer> {
        self.authorizer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_authorizer(&self, authorizer: Option<AppAuthorizer>) {
        *self.authorizer.lock().unwrap_or_else(|p| p.into_inner()) = authorizer;
    }

    fn not_running(&self) -> CallError {
        self.authorization_error()
            .unwrap_or_else(|| CallError::NotRunning {
                app_id: self.id.clone(),
                state: self.snapshot.borrow().state.lifecycle,
            })
    }

    /// The error of a call to an app that waits for the user to authorize it, if it does.
    fn authorization_error(&self) -> Option<CallError> {
        let state = self.authorizer()?.state();
        state
            .waiting_for()
            .map(|issuer| CallError::NeedsAuthorization {
                app_id: self.id.clone(),
                issuer: issuer.to_owned(),
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    use mcpapp_manifest::McpAppManifest;

    use super::*;

    /// The install state of a valid stdio app `id`, with one discovery warning.
    pub(crate) fn state(id: &str) -> InstallState {
        let manifest = McpAppManifest {
            id: Some(id.to_owned()),
            command: Some("fixture-app".to_owned()),
            ..McpAppManifest::default()
        };
        let mut state = InstallState::new(
            manifest,
            PathBuf::from(format!("/apps/{id}/mcp-app.json")),
            PathBuf::from(format!("/apps/{id}")),
        );
        state.warnings.push(format!("{id}: a discovery warning"));
        state
    }

    /// The spec and default settings of `state`'s app.
    pub(crate) fn runnable(state: &InstallState) -> (AppSpec, Settings) {
        let spec = state
            .manifest
            .validate()
            .expect("the test manifest is valid");
        let settings = Settings {
            policy: SupervisionPolicy::default(),
            inheritance: Inheritance::from_config(&Default::default(), spec.id.as_str()),
            oauth: OAuthEntryConfig::default(),
        };
        (spec, settings)
    }

    /// A runnable app's shared state with no task, and the supervisor's event channel.
    pub(crate) fn shared(
        id: &str,
    ) -> (
        Arc<AppShared>,
        mpsc::UnboundedReceiver<Command>,
        broadcast::Receiver<SupervisorEvent>,
    ) {
        let state = state(id);
        let runnable = runnable(&state);
        let (events, receiver) = broadcast::channel(16);
        let metrics = crate::metrics::SupervisorMetrics::default();
        let (shared, commands) = AppShared::new(state, Some(runnable), events, None, &metrics);
        let commands = commands.expect("a runnable app has a command channel");
        (shared, commands, receiver)
    }

    #[test]
    fn a_failure_records_its_reason_and_every_transition_is_published() {
        let (shared, _commands, mut events) = shared("weather");
        shared.transition(Lifecycle::Loaded, None);
        shared.transition(Lifecycle::Failed, Some("exited with status 3".to_owned()));
        let snapshot = shared.snapshot();
        assert_eq!(snapshot.state.lifecycle, Lifecycle::Failed);
        assert_eq!(
            snapshot.state.last_error.as_deref(),
            Some("exited with status 3")
        );
        let mut seen = Vec::new();
        while let Ok(SupervisorEvent::Lifecycle {
            app_id,
            from,
            to,
            reason,
            ..
        }) = events.try_recv()
        {
            seen.push((app_id, from, to, reason));
        }
        assert_eq!(
            seen,
            [
                (
                    "weather".to_owned(),
                    Lifecycle::Discovered,
                    Lifecycle::Loaded,
                    None
                ),
                (
                    "weather".to_owned(),
                    Lifecycle::Loaded,
                    Lifecycle::Failed,
                    Some("exited with status 3".to_owned())
                ),
            ]
        );
    }

    #[test]
    fn commands_reach_the_task_and_an_app_that_cannot_run_says_why() {
        let (shared, mut commands, _events) = shared("weather");
        shared
            .command(Command::Stop)
            .expect("the task's channel is open");
        assert!(matches!(commands.try_recv(), Ok(Command::Stop)));
        drop(commands);
        assert_eq!(shared.command(Command::Start), Err(ControlError::ShutDown));

        let mut invalid = state("broken");
        invalid.invalidate("transport: unknown transport 'carrier-pigeon'");
        let (events, _) = broadcast::channel(1);
        let metrics = crate::metrics::SupervisorMetrics::default();
        let (shared, commands) = AppShared::new(invalid, None, events, None, &metrics);
        assert!(commands.is_none());
        assert_eq!(
            shared.command(Command::Start).map_err(|e| e.to_string()),
            Err(
                "app 'broken' cannot be started: transport: unknown transport 'carrier-pigeon'"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_reconfiguration_keeps_the_lifecycle_and_the_last_error() {
        let (shared, _commands, _events) = shared("weather");
        shared.transition(Lifecycle::Failed, Some("died".to_owned()));
        let before = shared.snapshot().state;
        let mut next = state("weather");
        next.warnings = vec!["a new discovery warning".to_owned()];
        next.root_path = PathBuf::from("/elsewhere/weather");
        let (spec, mut settings) = runnable(&next);
        settings.policy.auto_restart = false;
        shared.reconfigure(spec, next, settings.clone());
        let after = shared.snapshot().state;
        assert_eq!(after.root_path, PathBuf::from("/elsewhere/weather"));
        assert_eq!(after.lifecycle, Lifecycle::Failed);
        assert_eq!(after.state_changed_at, before.state_changed_at);
        assert_eq!(after.last_error.as_deref(), Some("died"));
        assert_eq!(shared.settings(), Some(settings));
        // The next start's warnings follow the new discovery's, not the old.
        assert_eq!(
            shared.warnings_with(["from the start".to_owned()]),
            ["a new discovery warning", "from the start"]
        );
    }

    #[test]
    fn publishing_descriptors_counts_them_in_the_state() {
        let (shared, _commands, _events) = shared("weather");
        let mut descriptors = Descriptors::default();
        descriptors.prompts = vec![crate::descriptors::PromptDescriptor::from_prompt(
            &rmcp::model::Prompt::new("greet", None::<String>, None),
        )];
        shared.publish(descriptors, |s| {
            s.instructions = Some("be brief".to_owned())
        });
        let state = shared.snapshot();
        assert_eq!(
            (
                state.state.tool_count,
                state.state.prompt_count,
                state.instructions.as_deref()
            ),
            (0, 1, Some("be brief"))
        );
        assert_eq!(shared.descriptors().prompts[0].name, "greet");
    }
}
