//! The registry of supervised apps: load from a discovery report, look up, reload, shut down.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use mcpapp_discovery::{DiscoveredApp, DiscoveryReport};
use mcpapp_manifest::{InstallState, McpAppsConfig};
use mcpapp_oauth::OAuthClient;
use mcpapp_session::Elicitor;
use tokio::sync::{broadcast, mpsc};
use tracing::info;

use crate::app::{AppShared, Command, Settings, TaskContext, spawn_task};
use crate::events::SupervisorEvent;
use crate::handle::AppHandle;
use crate::keeper::Keeper;
use crate::launch::{Environment, Inheritance};
use crate::link::stdio::ProcessTable;
use crate::metrics::SupervisorMetrics;
use crate::policy::SupervisionPolicy;

/// Events kept for slow subscribers.
const EVENT_BACKLOG: usize = 1024;

/// Configures a [`Supervisor`].
pub struct SupervisorBuilder {
    config: McpAppsConfig,
    policy: Option<SupervisionPolicy>,
    env: Environment,
    keeper: Option<Arc<Keeper>>,
    elicitor: Option<Arc<dyn Elicitor>>,
    metrics: SupervisorMetrics,
    oauth: Option<OAuthClient>,
}

impl std::fmt::Debug for SupervisorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorBuilder")
            .field("supervision", &self.config.supervision)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl SupervisorBuilder {
    /// Takes the supervision and environment settings of `McpApps` and its entries
    /// (`Supervision`, `InheritEnvironment`); [`Supervisor::reload_with`] replaces them.
    pub fn config(mut self, config: &McpAppsConfig) -> Self {
        self.config = config.clone();
        self
    }

    /// Uses one policy for every app, ignoring configuration.
    pub fn policy(mut self, policy: SupervisionPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// How `env:NAME` values in manifests and entries are read. Defaults to the process
    /// environment. (Which references a manifest may make is discovery's decision.)
    pub fn env_lookup(
        mut self,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.env.lookup = Arc::new(lookup);
        self
    }

    /// The environment apps inherit from, instead of the gateway's own (read at each
    /// launch). Only the variables `McpApps.InheritEnvironment` names pass either way.
    pub fn inherited_environment<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<std::ffi::OsString>,
        V: Into<std::ffi::OsString>,
    {
        self.env.base = Some(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// Where `secret:NAME` values of manifests and entries come from (the gateway's secret
    /// store); without one, an app that refers to a secret fails to start with a message
    /// saying so.
    pub fn secrets(mut self, secrets: Arc<dyn mcpapp_manifest::SecretResolver>) -> Self {
        self.env.secrets = Some(secrets);
        self
    }

    /// Reports every app's process group to `keeper`, so that apps die with the gateway even
    /// when it is killed (see [`Keeper`]). Without one, apps are still stopped on
    /// [`Supervisor::shutdown`] and when the supervisor is dropped.
    pub fn keeper(mut self, keeper: Keeper) -> Self {
        self.keeper = Some(Arc::new(keeper));
        self
    }

    /// Confines every stdio app in a sandbox of its own (see `mcpapp_sandbox`): its isolation
    /// settings (`McpApps.Isolation`, which discovery resolves into each app's spec) are
    /// applied by each app's process before its program runs. Without one, stdio apps run
    /// unconfined and their snapshot says so. An `Arc` lets one sandbox (its kernel probe,
    /// its state folders) serve several supervisors, such as the gateway's and an install's
    /// probe start.
    pub fn sandbox(mut self, sandbox: impl Into<Arc<mcpapp_sandbox::Sandbox>>) -> Self {
        self.env.sandbox = Some(sandbox.into());
        self
    }

    /// Who answers elicitations the gateway's own calls cause (an agent's tool call), for
    /// example by asking the chat session's user; without one they are declined.
    pub fn elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> Self {
        self.elicitor = Some(elicitor);
        self
    }

    /// Makes the gateway the OAuth client of its HTTP apps (see `mcpapp_oauth`): an HTTP app
    /// that answers 401 with a `Bearer` challenge waits in `NeedsAuthorization` until the
    /// user connects it, and its requests carry its tokens from then on. Without one, a 401
    /// is an ordinary error. Apps that send an `Authorization` header of their own are left
    /// alone either way.
    pub fn oauth(mut self, oauth: OAuthClient) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Counts tool calls, timeouts and cancellations into these series (see
    /// [`SupervisorMetrics::register`]); without it they are counted but never scraped.
    pub fn metrics(mut self, metrics: SupervisorMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Builds the supervisor; nothing runs until [`Supervisor::load`].
    pub fn build(self) -> Supervisor {
        Supervisor {
            inner: Arc::new(Inner {
                apps: RwLock::new(Vec::new()),
                others: RwLock::new(Vec::new()),
                events: broadcast::channel(EVENT_BACKLOG).0,
                context: TaskContext {
                    env: Arc::new(self.env),
                    elicitor: self.elicitor,
                    processes: ProcessTable::with_keeper(self.keeper),
                    oauth: self.oauth,
                },
                config: RwLock::new(self.config),
                policy: self.policy,
                tasks: Mutex::new(Vec::new()),
                metrics: self.metrics,
                loaded: AtomicBool::new(false),
                shut_down: AtomicBool::new(false),
            }),
        }
    }
}

/// Supervises every app of a discovery report.
///
/// Apps start concurrently, in the background: [`Supervisor::load`] returns at once and
/// [`Supervisor::wait_settled`] waits for them. Each app is restarted with backoff when it
/// fails. Dropping the supervisor without [`Supervisor::shutdown`] still kills every child
/// process it started.
#[derive(Debug, Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

struct Inner {
    apps: RwLock<Vec<AppHandle>>,
    others: RwLock<Vec<InstallState>>,
    events: broadcast::Sender<SupervisorEvent>,
    context: TaskContext,
    /// The configuration apps' settings come from, replaced by [`Supervisor::reload_with`].
    config: RwLock<McpAppsConfig>,
    policy: Option<SupervisionPolicy>,
    metrics: SupervisorMetrics,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    loaded: AtomicBool,
    shut_down: AtomicBool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Without a shutdown, children must still not outlive us: kill their process groups
        // now (no runtime needed) and stop the tasks.
        self.context.processes.kill_all();
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

/// What a reload changed, by app id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Apps new in the report, now started (when runnable).
    pub added: Vec<String>,
    /// Apps no longer in the report, now stopped and removed.
    pub removed: Vec<String>,
    /// Apps whose spec, settings (supervision, inherited environment) or runnability
    /// changed, now restarted.
    pub changed: Vec<String>,
    /// Apps left alone.
    pub unchanged: Vec<String>,
}

impl Supervisor {
    /// Starts configuring a supervisor.
    pub fn builder() -> SupervisorBuilder {
        SupervisorBuilder {
            config: McpAppsConfig::default(),
            policy: None,
            env: Environment::default(),
            keeper: None,
            elicitor: None,
            metrics: SupervisorMetrics::default(),
            oauth: None,
        }
    }

    /// The effective settings of app `id` under the configuration in force.
    fn settings_for(&self, id: &str) -> Settings {
        let config = self.inner.config.read().unwrap_or_else(|p| p.into_inner());
        let entry = config.entries.get(id);
        Settings {
            policy: self.inner.policy.unwrap_or_else(|| {
                SupervisionPolicy::from_config(&config.supervision, entry.map(|e| &e.supervision))
            }),
            inheritance: Inheritance::from_config(&config, id),
            oauth: entry.map(|e| e.oauth.clone()).unwrap_or_default(),
        }
    }

    /// Makes the handle of one discovered app; a runnable app's task is started later by
    /// [`Supervisor::start_tasks`], once the handle is listed, so that no event names an app
    /// the supervisor does not list yet.
    fn make(
        &self,
        app: &DiscoveredApp,
        pending: &mut Vec<(AppHandle, mpsc::UnboundedReceiver<Command>)>,
    ) -> AppHandle {
        let runnable = app
            .spec
            .clone()
            .map(|spec| (spec, self.settings_for(app.id())));
        let (shared, commands) = AppShared::new(
            app.state.clone(),
            runnable,
            self.inner.events.clone(),
            self.inner.context.elicitor.clone(),
            &self.inner.metrics,
        );
        let handle = AppHandle { shared };
        if let Some(commands) = commands {
            pending.push((handle.clone(), commands));
        }
        handle
    }

    fn start_tasks(&self, pending: Vec<(AppHandle, mpsc::UnboundedReceiver<Command>)>) {
        let mut tasks = self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner());
        for (handle, commands) in pending {
            tasks.push(spawn_task(
                handle.shared,
                commands,
                self.inner.context.clone(),
            ));
        }
    }

    /// Splits a report into apps with a unique id and the rest.
    fn partition(report: &DiscoveryReport) -> (Vec<&DiscoveredApp>, Vec<InstallState>) {
        let mut seen = HashSet::new();
        let mut keyed = Vec::new();
        let mut others = Vec::new();
        for app in &report.apps {
            if !app.id().is_empty() && seen.insert(app.id().to_owned()) {
                keyed.push(app);
            } else {
                others.push(app.state.clone());
            }
        }
        (keyed, others)
    }

    /// Starts every runnable app of `report` in the background; returns at once. Only the
    /// first call loads; later calls change nothing (use [`Supervisor::reload`]).
    pub fn load(&self, report: &DiscoveryReport) {
        if self.inner.shut_down.load(Ordering::SeqCst)
            || self.inner.loaded.swap(true, Ordering::SeqCst)
        {
            return;
        }
        let (keyed, others) = Self::partition(report);
        let mut pending = Vec::new();
        let handles: Vec<AppHandle> = keyed
            .into_iter()
            .map(|app| self.make(app, &mut pending))
            .collect();
        info!(apps = handles.len(), "supervising MCP Apps");
        *self.inner.apps.write().unwrap_or_else(|p| p.into_inner()) = handles;
        *self.inner.others.write().unwrap_or_else(|p| p.into_inner()) = others;
        self.start_tasks(pending);
    }

    /// Applies a new discovery report under the configuration in force: starts added apps,
    /// stops and removes apps that are gone, restarts apps whose spec or settings changed,
    /// and leaves the rest alone.
    pub async fn reload(&self, report: &DiscoveryReport) -> ReloadSummary {
        self.apply(None, report).await
    }

    /// Like [`Supervisor::reload`], with `config`'s supervision and environment settings
    /// (`Supervision`, `InheritEnvironment`, and the entries' own) replacing those in force
    /// first. An app whose effective settings change is restarted like an app whose
    /// manifest changed; every other app is left alone.
    pub async fn reload_with(
        &self,
        config: &McpAppsConfig,
        report: &DiscoveryReport,
    ) -> ReloadSummary {
        self.apply(Some(config), report).await
    }

    async fn apply(
        &self,
        config: Option<&McpAppsConfig>,
        report: &DiscoveryReport,
    ) -> ReloadSummary {
        let mut summary = ReloadSummary::default();
        if self.inner.shut_down.load(Ordering::SeqCst) {
            return summary;
        }
        if let Some(config) = config {
            config.clone_into(&mut self.inner.config.write().unwrap_or_else(|p| p.into_inner()));
        }
        self.inner.loaded.store(true, Ordering::SeqCst);
        let (keyed, others) = Self::partition(report);
        let current: Vec<AppHandle> = self.list();
        let mut next = Vec::new();
        let mut retired = Vec::new();
        let mut pending = Vec::new();
        for app in &keyed {
            let id = app.id();
            let settings = self.settings_for(id);
            match current.iter().find(|h| h.id() == id) {
                None => {
                    next.push(self.make(app, &mut pending));
                    summary.added.push(id.to_owned());
                }
                Some(handle) => {
                    let old_spec = handle.spec();
                    let same_root = handle.snapshot().state.root_path == app.state.root_path;
                    let same = old_spec == app.spec
                        && same_root
                        && (old_spec.is_none()
                            || handle.shared.settings().as_ref() == Some(&settings));
                    if same {
                        next.push(handle.clone());
                        summary.unchanged.push(id.to_owned());
                    } else if let (Some(_), Some(spec)) = (&old_spec, &app.spec) {
                        // Same handle, new settings: holders keep working after the restart.
                        let _ = handle.shared.command(Command::Reconfigure(Box::new((
                            spec.clone(),
                            app.state.clone(),
                            settings,
                        ))));
                        next.push(handle.clone());
                        summary.changed.push(id.to_owned());
                    } else {
                        retired.push(handle.clone());
                        next.push(self.make(app, &mut pending));
                        summary.changed.push(id.to_owned());
                    }
                }
            }
        }
        for handle in &current {
            if !keyed.iter().any(|app| app.id() == handle.id()) {
                retired.push(handle.clone());
                summary.removed.push(handle.id().to_owned());
            }
        }
        *self.inner.apps.write().unwrap_or_else(|p| p.into_inner()) = next;
        *self.inner.others.write().unwrap_or_else(|p| p.into_inner()) = others;
        // Retired handles stop first, so their last events come before anything the new ones
        // say under the same id.
        futures::future::join_all(retired.iter().map(AppHandle::shut_down)).await;
        self.start_tasks(pending);
        for id in &summary.removed {
            // A removed app's tokens stay stored (uninstalling forgets them), but its
            // authorizer and waiting flows go.
            if let (Some(oauth), Ok(app)) =
                (&self.inner.context.oauth, mcpapp_manifest::AppId::new(id))
            {
                oauth.remove(&app);
            }
            let _ = self
                .inner
                .events
                .send(SupervisorEvent::Removed { app_id: id.clone() });
        }
        for id in &summary.added {
            let _ = self
                .inner
                .events
                .send(SupervisorEvent::Added { app_id: id.clone() });
        }
        info!(
            added = summary.added.len(),
            removed = summary.removed.len(),
            changed = summary.changed.len(),
            unchanged = summary.unchanged.len(),
            "reloaded MCP Apps"
        );
        summary
    }

    /// The app with this id.
    pub fn get(&self, id: &str) -> Option<AppHandle> {
        self.inner
            .apps
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|h| h.id() == id)
            .cloned()
    }

    /// Every app with an id, in discovery order (runnable or not).
    pub fn list(&self) -> Vec<AppHandle> {
        self.inner
            .apps
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Discovered apps that have no usable id (missing, or repeated), which cannot have a
    /// handle; shown for completeness.
    pub fn unaddressable(&self) -> Vec<InstallState> {
        self.inner
            .others
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<SupervisorEvent> {
        self.inner.events.subscribe()
    }

    /// Waits until every app has settled (running, failed, stopped, disabled or invalid), or
    /// `deadline` passes; returns whether all settled.
    pub async fn wait_settled(&self, deadline: Duration) -> bool {
        let watches: Vec<_> = self.list().iter().map(AppHandle::watch).collect();
        let all = async {
            for mut watch in watches {
                let _ = watch.wait_for(|s| s.state.lifecycle.is_settled()).await;
            }
        };
        tokio::time::timeout(deadline, all).await.is_ok()
    }

    /// Stops every app (closing sessions, terminating process groups, killing after the grace
    /// period) and ends their tasks. A second call does nothing.
    pub async fn shutdown(&self) {
        if self.inner.shut_down.swap(true, Ordering::SeqCst) {
            return;
        }
        let apps = self.list();
        futures::future::join_all(apps.iter().map(AppHandle::shut_down)).await;
        let tasks: Vec<_> = self
            .inner
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for task in tasks {
            let _ = task.await;
        }
        self.inner.context.processes.kill_all();
        info!("all MCP Apps stopped");
    }
}
