//! [`AppToolSync`]: keeps the agent's tool registry in step with the supervised apps. A
//! background task follows the supervisor's events and registers, replaces and withdraws
//! each app's model-visible tools as the app starts, changes its tool list, stops or goes away.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{AppHandle, Descriptors, Supervisor, SupervisorEvent};
use serde::Serialize;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::app_tool::McpAppTool;
use crate::registry::{CollisionReport, ToolRegistry, ToolSet, ToolSource};
use crate::tool::Tool;

/// The prefix of every MCP app registration id.
const REGISTRATION_PREFIX: &str = "mcpapp:";

/// The registration id of an app's tools: `mcpapp:{appId}`.
pub fn app_registration_id(app_id: &str) -> String {
    format!("{REGISTRATION_PREFIX}{app_id}")
}

/// What a [`SyncDiagnostic`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum SyncDiagnosticKind {
    /// The tool's `_meta.ui.visibility` is malformed, so it is hidden from the model (fail
    /// closed).
    MalformedVisibility,
    /// The tool's registered name would be blank, so it is not registered.
    BlankName,
    /// Another registration holds the tool's registered name (see
    /// [`ToolRegistry`]'s rule).
    NameCollision,
}

/// A problem with an app's tools that a host should show: a tool hidden because its
/// visibility is malformed, or a name lost in a collision. Serialises to
/// `{"appId", "tool", "kind", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SyncDiagnostic {
    /// The app concerned (in a collision, the app whose tool lost; the winner when only the
    /// winner is an app).
    pub app_id: String,
    /// The tool: its remote name for a tool that was not registered, the contested registered
    /// name in a collision.
    pub tool: String,
    /// What kind of problem it is.
    pub kind: SyncDiagnosticKind,
    /// A sentence saying what happened.
    pub message: String,
}

/// Registers every running app's model-visible tools in a [`ToolRegistry`] and keeps them
/// current.
///
/// [`start`](Self::start) spawns a task (carrying its tracing span) that follows
/// [`Supervisor::subscribe`]:
///
/// - when an app becomes `Running`, its tools are registered as [`McpAppTool`]s under
///   registration id `mcpapp:{appId}` ([`app_registration_id`]) with [`ToolSource::Native`];
/// - when its tool list changes (`ToolsChanged`), the whole set is replaced in one
///   [`ToolRegistry::register`] call, so consumers never see half a list;
/// - when it leaves `Running` (failed, stopped, restarting), its tools are withdrawn; when a
///   reload removes it, its registration is removed.
///
/// On start, and whenever the event stream lagged, it reconciles every app from the
/// supervisor's current state instead of trusting events it may have missed.
///
/// **Visibility.** A tool whose `_meta.ui.visibility` lacks `"model"` is not registered; one
/// whose visibility is malformed is not registered either, and is reported by
/// [`diagnostics`](Self::diagnostics) and logged with `tracing::warn!` once per app, tool and
/// problem (at `debug` when it comes back, say after a restart, while the app is known).
///
/// **Collisions and discovery order.** Two apps may offer the same registered name (the same
/// prefix and tool, or a prefix that spells another app's name). The registry's rule decides:
/// the preferred source wins (app tools are native: built-in tools beat them, plugin tools
/// lose to them), then the registration registered first. Every runnable app's registration
/// is created, empty until it runs, in the supervisor's list order (discovery order) as soon
/// as the sync sees the app, and kept (emptied, not removed) while the app is stopped or
/// failed, so the app discovered first keeps a contested name whichever app starts first or
/// restarts later. Apps added by a reload come after the others. Every loser is reported by
/// the registry's [`collisions`](ToolRegistry::collisions) and by
/// [`diagnostics`](Self::diagnostics).
///
/// The task holds a clone of the supervisor, so the supervisor's processes live at least as
/// long as the sync. Dropping the sync stops the task and withdraws every registration it made.
#[derive(Debug)]
pub struct AppToolSync {
    shared: Arc<Shared>,
    barriers: mpsc::UnboundedSender<oneshot::Sender<()>>,
    stop: CancellationToken,
}

struct Shared {
    supervisor: Supervisor,
    registry: ToolRegistry,
    state: Mutex<State>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppToolSync").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// Set on drop: from then on nothing is registered.
    stopped: bool,
    /// What is registered for each app, by app id.
    apps: BTreeMap<String, Registered>,
    /// The problems of each app's last registered tool list that were logged, as (tool,
    /// message), so that they are logged at WARN once, not on every restart. Kept while the
    /// app is stopped, forgotten when it is removed.
    logged: BTreeMap<String, BTreeSet<(String, String)>>,
    /// Tool sets decided but not yet in the registry, in order: events that arrive together
    /// (apps starting together) go in as one registry change (see [`Shared::flush`]).
    pending: Vec<ToolSet>,
}

/// What the registry holds for one app.
struct Registered {
    /// Whether its tools are registered (else its registration is empty).
    running: bool,
    /// The prefix and tool list they were built from (the app's own listing, shared rather
    /// than copied: with many apps, tool schemas are much of the gateway's memory).
    prefix: String,
    tools: Arc<Descriptors>,
    /// Problems found in that tool list.
    warnings: Vec<SyncDiagnostic>,
}

impl AppToolSync {
    /// Starts following `supervisor` into `registry`. Apps that are already running are
    /// registered at once (by the task, before it handles any event).
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (it spawns a task).
    pub fn start(supervisor: &Supervisor, registry: &ToolRegistry) -> Self {
        // Subscribing before the first reconciliation means no change can fall between them.
        let events = supervisor.subscribe();
        let shared = Arc::new(Shared {
            supervisor: supervisor.clone(),
            registry: registry.clone(),
            state: Mutex::new(State::default()),
        });
        let (barriers, barrier_rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let span = tracing::info_span!("mcpapp_tool_sync");
        tokio::spawn(
            follow(Arc::clone(&shared), events, barrier_rx, stop.clone()).instrument(span),
        );
        Self {
            shared,
            barriers,
            stop,
        }
    }

    /// Waits until the sync has caught up: every supervisor event published before this call
    /// is handled, and every app is reconciled with its state at the time of handling. After
    /// it returns, the registry reflects the apps as they were when it was called.
    pub async fn synced(&self) {
        let (ack, done) = oneshot::channel();
        if self.barriers.send(ack).is_ok() {
            // An error means the task has ended (the runtime is shutting down): nothing more
            // will change.
            let _ = done.await;
        }
    }

    /// The current problems: malformed visibilities and blank names of the registered apps'
    /// tool lists (in app id order), then the registry's collisions that involve an app.
    pub fn diagnostics(&self) -> Vec<SyncDiagnostic> {
        let mut diagnostics: Vec<SyncDiagnostic> = self
            .shared
            .lock()
            .apps
            .values()
            .flat_map(|app| app.warnings.iter().cloned())
            .collect();
        diagnostics.extend(
            self.shared
                .registry
                .collisions()
                .iter()
                .filter_map(collision_diagnostic),
        );
        diagnostics
    }
}

impl Drop for AppToolSync {
    fn drop(&mut self) {
        self.stop.cancel();
        let mut state = self.shared.lock();
        state.stopped = true;
        state.pending.clear();
        for app_id in std::mem::take(&mut state.apps).into_keys() {
            self.shared
                .registry
                .unregister(&app_registration_id(&app_id));
        }
    }
}

/// The task: reconcile everything, then follow events until stopped.
async fn follow(
    shared: Arc<Shared>,
    mut events: broadcast::Receiver<SupervisorEvent>,
    mut barriers: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    stop: CancellationToken,
) {
    tracing::debug!("following the supervisor's apps");
    shared.reconcile_all();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            Some(ack) = barriers.recv() => {
                loop {
                    match events.try_recv() {
                        Ok(event) => shared.on_event(&event),
                        // Reconciled right below.
                        Err(TryRecvError::Lagged(_)) => {}
                        Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                    }
                }
                shared.reconcile_all();
                let _ = ack.send(());
            }
            event = events.recv() => match event {
                Ok(event) => {
                    // The events already waiting are handled with it, and their tool sets go
                    // to the registry together. Letting the tasks that are ready run first
                    // (apps finishing their start, which send the next events) makes those
                    // batches larger when many apps start together; it waits on nothing.
                    shared.on_event(&event);
                    tokio::task::yield_now().await;
                    let mut lagged = false;
                    loop {
                        match events.try_recv() {
                            Ok(event) => shared.on_event(&event),
                            Err(TryRecvError::Lagged(_)) => lagged = true,
                            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                        }
                    }
                    if lagged {
                        tracing::warn!("missed supervisor events; resynchronising every app");
                        shared.reconcile_all();
                    }
                    shared.flush(&mut shared.lock());
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "missed supervisor events; resynchronising every app");
                    shared.reconcile_all();
                }
                Err(RecvError::Closed) => break,
            },
        }
    }
    tracing::debug!("stopped following the supervisor's apps");
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update of `State` is a single insert or removal, so a poisoned lock is still
        // consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn on_event(&self, event: &SupervisorEvent) {
        let (SupervisorEvent::Lifecycle { app_id, .. }
        | SupervisorEvent::ToolsChanged { app_id }
        | SupervisorEvent::Added { app_id }
        | SupervisorEvent::Removed { app_id }) = event
        else {
            return;
        };
        let known = self.lock().apps.contains_key(app_id);
        if known {
            let app = self.supervisor.get(app_id);
            let mut state = self.lock();
            self.apply(&mut state, app_id, app.as_ref());
        } else {
            // A new app: reconciling all of them registers it in list (discovery) order.
            self.reconcile_all();
        }
    }

    /// Hands the pending tool sets to the registry, in one change. The caller holds the state
    /// lock, as for [`apply`](Self::apply).
    fn flush(&self, state: &mut State) {
        if state.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut state.pending);
        if state.stopped {
            return;
        }
        if let Err(error) = self.registry.register_all(pending) {
            // Tool sets are checked before they get here, so this would be a bug.
            tracing::error!(%error, "the registry refused an app's tools");
        }
    }

    /// Brings every app's registration in line with its current state, in list order.
    fn reconcile_all(&self) {
        let apps = self.supervisor.list();
        let mut state = self.lock();
        for app in &apps {
            self.apply(&mut state, app.id(), Some(app));
        }
        let gone: Vec<String> = state
            .apps
            .keys()
            .filter(|id| !apps.iter().any(|app| app.id() == id.as_str()))
            .cloned()
            .collect();
        for app_id in gone {
            self.apply(&mut state, &app_id, None);
        }
        self.flush(&mut state);
    }

    /// Brings one app's registration in line with its current state (`None`: it is gone).
    ///
    /// The caller holds the state lock across the registry call, so that the drop of the sync
    /// cannot interleave with a registration.
    fn apply(&self, state: &mut State, app_id: &str, app: Option<&AppHandle>) {
        if state.stopped {
            return;
        }
        let registration_id = app_registration_id(app_id);
        let Some(app) = app else {
            state.logged.remove(app_id);
            if state.apps.remove(app_id).is_some() {
                // What was decided before goes in first, so the order stays the events'.
                self.flush(state);
                self.registry.unregister(&registration_id);
                tracing::info!(app = %app_id, "removed the tools of an app that is gone");
            }
            return;
        };
        let previous = state.apps.get(app_id);
        if previous.is_none() && !app.is_runnable() {
            // It can never run; there is nothing to register or reserve.
            return;
        }
        if app.lifecycle() != Lifecycle::Running {
            if previous.is_some_and(|p| !p.running) {
                return;
            }
            // An empty set rather than an unregistration keeps the app's place in discovery
            // order for when it runs again.
            state
                .pending
                .push((registration_id, ToolSource::Native, Vec::new()));
            if previous.is_some() {
                tracing::info!(app = %app_id, "withdrew the tools of an app that is not running");
            }
            state.apps.insert(
                app_id.to_owned(),
                Registered {
                    running: false,
                    prefix: String::new(),
                    tools: Arc::default(),
                    warnings: Vec::new(),
                },
            );
            return;
        }

        let descriptors = app.descriptors();
        let prefix = app
            .spec()
            .map(|spec| spec.tool_name_prefix)
            .unwrap_or_default();
        // The handle of a running app with the same id is the one the tools were built with:
        // a reload keeps the handle of an app that stays runnable.
        if previous
            .is_some_and(|p| p.running && p.prefix == prefix && p.tools.tools == descriptors.tools)
        {
            return;
        }
        let (tools, warnings) = build_tools(app, &descriptors, &prefix);
        let current: BTreeSet<(String, String)> = warnings
            .iter()
            .map(|w| (w.tool.clone(), w.message.clone()))
            .collect();
        let logged = state.logged.entry(app_id.to_owned()).or_default();
        for warning in &warnings {
            if logged.contains(&(warning.tool.clone(), warning.message.clone())) {
                tracing::debug!(app = %app_id, tool = %warning.tool, "{}", warning.message);
            } else {
                tracing::warn!(app = %app_id, tool = %warning.tool, "{}", warning.message);
            }
        }
        // Only the current list's problems are remembered: the set cannot outgrow it.
        *logged = current;
        tracing::info!(
            app = %app_id,
            tools = tools.len(),
            listed = descriptors.tools.len(),
            "registered the model-visible tools of an app"
        );
        state
            .pending
            .push((registration_id, ToolSource::Native, tools));
        state.apps.insert(
            app_id.to_owned(),
            Registered {
                running: true,
                prefix,
                tools: descriptors,
                warnings,
            },
        );
    }
}

/// The tools of one app that the model may see, and the problems found.
fn build_tools(
    app: &AppHandle,
    listing: &Arc<Descriptors>,
    prefix: &str,
) -> (Vec<Arc<dyn Tool>>, Vec<SyncDiagnostic>) {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut warnings = Vec::new();
    for (index, descriptor) in listing.tools.iter().enumerate() {
        let registered = format!("{prefix}{}", descriptor.name);
        if descriptor.visibility.malformed {
            warnings.push(SyncDiagnostic {
                app_id: app.id().to_owned(),
                tool: descriptor.name.clone(),
                kind: SyncDiagnosticKind::MalformedVisibility,
                message: format!(
                    "tool '{}' of MCP App '{}' is hidden from the model: its _meta.ui.visibility \
                     is not a list of audiences",
                    descriptor.name,
                    app.id()
                ),
            });
            continue;
        }
        if !descriptor.visibility.model {
            continue;
        }
        if registered.trim().is_empty() {
            warnings.push(SyncDiagnostic {
                app_id: app.id().to_owned(),
                tool: descriptor.name.clone(),
                kind: SyncDiagnosticKind::BlankName,
                message: format!(
                    "a tool of MCP App '{}' has a blank name and no prefix, so it cannot be \
                     registered",
                    app.id()
                ),
            });
            continue;
        }
        tools.push(Arc::new(McpAppTool::in_listing(
            app.clone(),
            listing,
            index,
            descriptor,
            prefix,
        )));
    }
    (tools, warnings)
}

/// A collision as a diagnostic, if an app is involved.
fn collision_diagnostic(report: &CollisionReport) -> Option<SyncDiagnostic> {
    let app_id = report
        .loser
        .strip_prefix(REGISTRATION_PREFIX)
        .or_else(|| report.winner.strip_prefix(REGISTRATION_PREFIX))?;
    Some(SyncDiagnostic {
        app_id: app_id.to_owned(),
        tool: report.name.clone(),
        kind: SyncDiagnosticKind::NameCollision,
        message: report.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    struct Ghost(serde_json::Value);

    impl Tool for Ghost {
        fn name(&self) -> &str {
            "ghost.tool"
        }
        fn description(&self) -> &str {
            "A tool of an app that is gone."
        }
        fn input_schema(&self) -> &serde_json::Value {
            &self.0
        }
        fn invoke(
            &self,
            _arguments_json: String,
            _ctx: crate::ToolContext,
        ) -> futures::future::BoxFuture<'static, crate::ToolOutput> {
            Box::pin(async { crate::ToolOutput::text("boo") })
        }
    }

    fn empty() -> Registered {
        Registered {
            running: false,
            prefix: String::new(),
            tools: Arc::default(),
            warnings: Vec::new(),
        }
    }

    /// A lagged receiver reconciles from the supervisor: the registration of an app the
    /// supervisor does not have is withdrawn although no event names it.
    #[tokio::test]
    async fn a_lagged_event_stream_resynchronises() {
        let registry = ToolRegistry::new();
        let shared = Arc::new(Shared {
            supervisor: Supervisor::builder().build(),
            registry: registry.clone(),
            state: Mutex::new(State::default()),
        });
        let (events_tx, events) = broadcast::channel(2);
        let (barriers, barrier_rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let task = tokio::spawn(follow(
            Arc::clone(&shared),
            events,
            barrier_rx,
            stop.clone(),
        ));
        let (ack, done) = oneshot::channel();
        barriers.send(ack).unwrap();
        done.await.unwrap();

        // A registration the supervisor knows nothing about, as if its removal was missed.
        registry
            .register(
                app_registration_id("ghost"),
                ToolSource::Native,
                vec![Arc::new(Ghost(serde_json::json!({"type": "object"})))],
            )
            .unwrap();
        shared.lock().apps.insert("ghost".to_owned(), empty());
        // Events the sync ignores, more than the channel holds. The test runtime has one
        // thread, so the task reads none of them before all are sent: it must see a lag.
        for _ in 0..5 {
            events_tx
                .send(SupervisorEvent::ResourcesChanged {
                    app_id: "other".to_owned(),
                })
                .unwrap();
        }
        let mut changes = registry.subscribe();
        tokio::time::timeout(
            Duration::from_secs(30),
            changes.wait_for(|_| registry.resolve("ghost.tool").is_none()),
        )
        .await
        .expect("the lag made the task reconcile")
        .unwrap();
        assert!(registry.registration_ids().is_empty());
        assert!(shared.lock().apps.is_empty());
        stop.cancel();
        task.await.unwrap();
    }
}
