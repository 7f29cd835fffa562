//! The shared state behind every route.

use std::sync::Arc;

use mcpapp_agent::Agent;
use mcpapp_bridge::ToolRegistry;
use mcpapp_discovery::Discovery;
use mcpapp_supervisor::Supervisor;
use serde_json::Value;

use crate::config::HostConfig;
use crate::elicitation::ElicitationBroker;
use crate::events::AppEvents;
use crate::proxy::ProxySessions;
use crate::reload::{ConfigSource, Reloader};
use crate::views::ViewStore;

/// Produces extra diagnostics to show in `GET /apps` (for example tool-name collisions).
pub type DiagnosticsFn = Arc<dyn Fn() -> Vec<Value> + Send + Sync>;

/// The parts the host serves.
#[derive(Clone)]
#[non_exhaustive]
pub struct HostParts {
    /// The running apps.
    pub supervisor: Supervisor,
    /// The agent's tool registry (what `/mcp` serves).
    pub registry: ToolRegistry,
    /// The chat agent behind `/apps/chat`.
    pub agent: Agent,
    /// Discovery to run again on `POST /apps/reload`; without it reload is refused.
    pub discovery: Option<Discovery>,
    /// Where the configuration came from, so a reload reads it again; without it a reload
    /// scans with `discovery` as it is.
    pub config_source: Option<ConfigSource>,
    /// Extra diagnostics for `GET /apps`.
    pub diagnostics: Option<DiagnosticsFn>,
    /// Asks chat pages the elicitations of the agent's calls; it must also be the
    /// supervisor's elicitor for any to arrive (the gateway wires both).
    pub elicitations: ElicitationBroker,
    /// Installs apps for the page's "Add apps" view (`/installer/…`); without it those
    /// routes are absent.
    pub installer: Option<mcpapp_install::Installer>,
}

impl std::fmt::Debug for HostParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostParts").finish_non_exhaustive()
    }
}

impl HostParts {
    /// The parts, without reload or extra diagnostics.
    pub fn new(supervisor: Supervisor, registry: ToolRegistry, agent: Agent) -> Self {
        Self {
            supervisor,
            registry,
            agent,
            discovery: None,
            config_source: None,
            diagnostics: None,
            elicitations: ElicitationBroker::new(),
            installer: None,
        }
    }

    /// Enables `POST /apps/reload` with this discovery.
    #[must_use]
    pub fn with_discovery(mut self, discovery: Discovery) -> Self {
        self.discovery = Some(discovery);
        self
    }

    /// Makes reloads read the configuration from `source` again (with [`HostParts::with_discovery`]).
    #[must_use]
    pub fn with_config_source(mut self, source: ConfigSource) -> Self {
        self.config_source = Some(source);
        self
    }

    /// Uses `broker` for the elicitations of the agent's calls: give the same broker to the
    /// supervisor ([`SupervisorBuilder::elicitor`](mcpapp_supervisor::SupervisorBuilder::elicitor)).
    #[must_use]
    pub fn with_elicitations(mut self, broker: ElicitationBroker) -> Self {
        self.elicitations = broker;
        self
    }

    /// Serves the "Add apps" view's routes with `installer`.
    #[must_use]
    pub fn with_installer(mut self, installer: mcpapp_install::Installer) -> Self {
        self.installer = Some(installer);
        self
    }

    /// Adds a source of diagnostics for `GET /apps`.
    #[must_use]
    pub fn with_diagnostics(mut self, diagnostics: DiagnosticsFn) -> Self {
        self.diagnostics = Some(diagnostics);
        self
    }
}

/// What every handler gets.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) parts: HostParts,
    pub(crate) config: Arc<HostConfig>,
    pub(crate) sessions: ProxySessions,
    pub(crate) mcp: Arc<crate::mcp::McpEndpoint>,
    pub(crate) views: ViewStore,
    /// What `GET /metrics` renders.
    pub(crate) metrics: crate::metrics::SharedRegistry,
    /// Cancelled when shutdown begins (`GET /readyz` then says so).
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
    /// What `GET /apps/events` streams.
    pub(crate) events: AppEvents,
    /// Reloads, when the parts have a discovery.
    pub(crate) reloader: Option<Reloader>,
}
