//! Integration tests of mcpapp-bridge: the registry's naming rules, collisions and change
//! counter, safe model names, and the tool helpers; then MCP App tools and the live sync
//! against real test apps (`fixture-app`, `grocery-inventory`) run by the real supervisor.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod app_tools;
mod conformance;
mod names;
mod registry;
mod sync;
mod tool;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use mcpapp_bridge::{AppToolSync, Tool, ToolContext, ToolOutput, ToolRegistry};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{AppHandle, SupervisionPolicy, Supervisor};
use mcpapp_testkit::AppsDir;
use serde_json::{Value, json};

/// The one bound of every wait (the testkit's, for all suites).
pub(crate) use mcpapp_testkit::PATIENCE;

/// Whether model providers accept `name`: their pattern `^[A-Za-z0-9_-]{1,64}$`, checked here
/// independently of the crate's own check.
pub(crate) fn provider_accepts(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Logs to the test output when `RUST_LOG` is set.
pub(crate) fn logging() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    }
}

/// One event recorded by [`LogCapture`].
#[derive(Debug, Clone)]
pub(crate) struct LoggedEvent {
    pub(crate) level: tracing::Level,
    pub(crate) target: String,
    pub(crate) message: String,
}

/// A `tracing` layer that records every event, for tests that count what was logged. Install
/// it on the test's thread with [`LogCapture::install`].
#[derive(Clone, Default)]
pub(crate) struct LogCapture {
    events: Arc<std::sync::Mutex<Vec<LoggedEvent>>>,
}

impl LogCapture {
    /// Makes this capture the current thread's subscriber until the guard is dropped. Tasks of
    /// a current-thread Tokio runtime run on that thread, so they are captured too.
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        use tracing_subscriber::layer::SubscriberExt as _;
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    /// The events at `level` from the module `target` whose message contains `text`.
    pub(crate) fn matching(
        &self,
        level: tracing::Level,
        target: &str,
        text: &str,
    ) -> Vec<LoggedEvent> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.level == level && e.target == target && e.message.contains(text))
            .cloned()
            .collect()
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LogCapture {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        self.events.lock().unwrap().push(LoggedEvent {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message: message.0,
        });
    }
}

/// Supervised apps bridged into a registry, torn down at the end of a test.
pub(crate) struct Bridge {
    pub(crate) supervisor: Supervisor,
    pub(crate) registry: ToolRegistry,
    pub(crate) sync: AppToolSync,
    /// Kept so the app folders outlive the apps.
    pub(crate) apps: AppsDir,
}

impl Bridge {
    /// Starts the sync first (as a host does), then supervises every app of `apps`, and waits
    /// until all of them have settled and the sync has caught up.
    pub(crate) async fn start(apps: AppsDir) -> Self {
        logging();
        let mut policy = SupervisionPolicy::default();
        policy.restart_delay = Duration::from_millis(50);
        policy.health_check_interval = None;
        policy.shutdown_grace = Duration::from_secs(2);
        let supervisor = Supervisor::builder().policy(policy).build();
        let registry = ToolRegistry::new();
        let sync = AppToolSync::start(&supervisor, &registry);
        supervisor.load(&apps.discover());
        assert!(supervisor.wait_settled(PATIENCE).await, "the apps settle");
        for app in supervisor.list() {
            assert_eq!(
                app.snapshot().state.lifecycle,
                Lifecycle::Running,
                "{}: {:?}",
                app.id(),
                app.snapshot().state.last_error
            );
        }
        sync.synced().await;
        Self {
            supervisor,
            registry,
            sync,
            apps,
        }
    }

    pub(crate) fn app(&self, id: &str) -> AppHandle {
        self.supervisor.get(id).unwrap()
    }

    /// The registered tool `name`; panics if it is not registered.
    pub(crate) fn tool(&self, name: &str) -> Arc<dyn Tool> {
        self.registry
            .resolve(name)
            .unwrap_or_else(|| panic!("{name} is not registered: {:?}", self.names()))
            .tool
    }

    /// Every registered name.
    pub(crate) fn names(&self) -> Vec<String> {
        self.registry.list().into_iter().map(|e| e.name).collect()
    }

    /// Calls the registered tool `name` with no session.
    pub(crate) async fn call(&self, name: &str, arguments: &str) -> ToolOutput {
        self.call_with(name, arguments, ToolContext::new()).await
    }

    /// Calls the registered tool `name` with `ctx`.
    pub(crate) async fn call_with(
        &self,
        name: &str,
        arguments: &str,
        ctx: ToolContext,
    ) -> ToolOutput {
        let tool = self.tool(name);
        tokio::time::timeout(PATIENCE, tool.invoke(arguments.to_owned(), ctx))
            .await
            .expect("the call ends")
    }

    pub(crate) async fn shutdown(self) {
        drop(self.sync);
        self.supervisor.shutdown().await;
    }
}

/// Waits until `check` holds for the registry, re-checking on every change of its counter.
pub(crate) async fn wait_registry(
    registry: &ToolRegistry,
    mut check: impl FnMut(&ToolRegistry) -> bool,
) {
    // Subscribing before the first check means no change can slip between check and wait.
    let mut changes = registry.subscribe();
    let waited = tokio::time::timeout(PATIENCE, async {
        while !check(registry) {
            changes.changed().await.unwrap();
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the registry never got there: {:?}",
        registry.list().iter().map(|e| &e.name).collect::<Vec<_>>()
    );
}

/// A tool that answers with its own label, so a test can tell which of two same-named tools
/// was called.
pub(crate) struct LabelTool {
    name: String,
    description: String,
    schema: Value,
    label: String,
}

impl Tool for LabelTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn invoke(&self, arguments_json: String, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let label = self.label.clone();
        Box::pin(async move {
            let session = ctx.session_id.unwrap_or_default();
            ToolOutput::text(format!("{label}:{session}:{arguments_json}"))
        })
    }
}

/// A tool named `name` whose calls answer `label:...`.
pub(crate) fn tool(name: &str, label: &str) -> Arc<dyn Tool> {
    Arc::new(LabelTool {
        name: name.to_owned(),
        description: format!("{name} from {label}"),
        schema: json!({"type": "object"}),
        label: label.to_owned(),
    })
}

/// Like [`tool`] with a chosen description.
pub(crate) fn described(name: &str, label: &str, description: &str) -> Arc<dyn Tool> {
    Arc::new(LabelTool {
        name: name.to_owned(),
        description: description.to_owned(),
        schema: json!({"type": "object"}),
        label: label.to_owned(),
    })
}

/// Calls a tool and returns its output.
pub(crate) fn call(tool: &Arc<dyn Tool>, args: &str) -> ToolOutput {
    futures::executor::block_on(tool.invoke(args.to_owned(), ToolContext::new()))
}
