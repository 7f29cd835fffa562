//! The HTTP face of mcpapp: an axum [`Router`](axum::Router) built by [`router`] from the
//! supervisor, the tool registry and the agent.
//!
//! | Route | What it does |
//! |---|---|
//! | `GET /` and `/assets/{file}` | the browser host page (apps, chat, app views in a sandbox) |
//! | `GET /apps/health` | `{"ok","name","mcp","sandbox"}`: the app a browser host should show (`?appId=` picks one) |
//! | `GET /apps` | every discovered app: lifecycle, errors, counts, restarts, UI, its `mcp` URL |
//! | `GET /apps/{id}` | one app with its tools, resources, templates, prompts, the stderr tails of its current and previous run, and its open browser sessions |
//! | `POST /apps/{id}/start`, `/stop`, `/restart`, `POST /apps/reload` | control (reload reads the configuration file again and applies the difference) |
//! | `GET /apps/events` | lifecycle, list, added/removed and reload events as server-sent events (see docs/operations.md) |
//! | `POST /apps/chat` | a chat turn as server-sent events (with the elicitations of its calls) |
//! | `POST /apps/chat/elicitation/{id}` | the page's answer to an elicitation of the agent's call |
//! | `/apps/mcp/{appId}` | Streamable HTTP MCP for app views, sharing the app's upstream session |
//! | `/mcp` | one MCP server with every app's tools, resources, templates, prompts and completions, for external clients and MCP Apps hosts |
//! | `GET /healthz`, `GET /readyz` | probes without the token: the process serves; every app has settled (else 503 naming the unsettled ones) |
//! | `GET /metrics` | the gateway's series in the Prometheus text format (`Gateway.Metrics`, on by default; see docs/operations.md) |
//!
//! The sandbox listener ([`Host::sandbox_router`], a second port and so another origin)
//! serves only `/sandbox.html?view=TOKEN`: the outer frame of an app view, with the view's CSP
//! as a header. The page (`assets/`, hand-written ES modules embedded in the binary) speaks the
//! MCP Apps view protocol to views; `docs/architecture.md` describes it.
//!
//! Every response names the replica that gave it (`Mcpapp-Replica`, `Gateway.ReplicaName`);
//! the chat session id, sent as `Mcpapp-Affinity`, is the key balancers route replicas by
//! (see `replica.rs` and docs/operations.md).
//!
//! Every route checks `Host` and `Origin` against DNS rebinding, answers CORS for the allowed
//! origins, requires the bearer token when one is configured, and refuses bodies over the
//! limit (413). [`serve`] runs a router on a listener with a header read timeout, a deadline
//! for whole request bodies and a cap on connections ([`ConnectionLimits`]). This is the only
//! crate that knows HTTP servers.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcpapp_agent::{Agent, AgentConfig, OfflineModel};
//! use mcpapp_bridge::ToolRegistry;
//! use mcpapp_host::{HostConfig, HostParts, router, serve};
//! use mcpapp_supervisor::Supervisor;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let supervisor = Supervisor::builder().build();
//! let registry = ToolRegistry::new();
//! let agent = Agent::new(registry.clone(), Arc::new(OfflineModel::new()), AgentConfig::default());
//! let config = HostConfig::new(listener.local_addr()?);
//! let limits = config.connections;
//! let app = router(HostParts::new(supervisor, registry, agent), config);
//! serve(listener, app, limits, std::future::pending(), std::time::Duration::from_secs(5)).await;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod apps;
mod chat;
mod config;
mod csp;
mod elicitation;
mod error;
mod events;
mod extensions;
mod gateway;
mod health;
mod intake;
mod mcp;
mod metrics;
mod proxy;
mod reload;
mod replica;
mod security;
mod serve;
mod state;
mod streamable;
mod views;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

pub use config::{
    ConnectionLimits, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_PROXY_SESSIONS_PER_APP,
    DEFAULT_PROXY_SESSION_IDLE, GatewaySettings, HostConfig,
};
pub use csp::{ViewPolicy, sanitize_origin, view_policy};
pub use elicitation::ElicitationBroker;
pub use gateway::{DEFAULT_BIND, DEFAULT_DRAIN, Gateway, GatewayBuilder, StartError};
pub use reload::{ConfigSource, LoadedConfig};
pub use security::{ExposureError, check_exposure};
pub use serve::serve;
pub use state::{DiagnosticsFn, HostParts};

/// The gateway's HTTP side: the main router and the sandbox router, sharing state.
#[derive(Clone)]
pub struct Host {
    state: state::AppState,
    /// Cancelled by [`Host::begin_shutdown`]: long-lived streams end cleanly.
    shutdown: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

impl Host {
    /// Prepares the routes for `parts` under `config`; `GET /metrics` shows only the host's
    /// own series (see [`Host::with_metrics`]).
    pub fn new(parts: HostParts, config: HostConfig) -> Self {
        Self::with_metrics(
            parts,
            config,
            prometheus_client::registry::Registry::default(),
        )
    }

    /// Prepares the routes, with `registry` behind `GET /metrics`: the host adds its own
    /// series (`mcpapp_app_state`, `mcpapp_app_restarts_total`, `mcpapp_proxy_sessions`,
    /// `mcpapp_build_info`) to what is registered there already, such as the supervisor's
    /// [`SupervisorMetrics`](mcpapp_supervisor::SupervisorMetrics).
    #[allow(clippy::needless_pass_by_value)] // Taken by value: the host owns them from now on.
    pub fn with_metrics(
        parts: HostParts,
        config: HostConfig,
        mut registry: prometheus_client::registry::Registry,
    ) -> Self {
        let sessions =
            proxy::ProxySessions::new(config.max_proxy_sessions_per_app, config.proxy_session_idle);
        // `/mcp` counts as one more app against the same cap.
        let mcp_sessions = streamable::sessions::Sessions::new(
            config.max_proxy_sessions_per_app,
            config.proxy_session_idle,
        );
        let shutdown = tokio_util::sync::CancellationToken::new();
        metrics::register(&mut registry, parts.supervisor.clone(), sessions.clone());
        let events = events::AppEvents::new(parts.supervisor.clone(), shutdown.clone());
        let reloader = parts.discovery.clone().map(|discovery| {
            reload::Reloader::new(
                parts.supervisor.clone(),
                discovery,
                parts.config_source.clone(),
                events.clone(),
            )
        });
        Self {
            state: state::AppState {
                parts,
                config: Arc::new(config),
                sessions,
                mcp: Arc::new(mcp::McpEndpoint::new(mcp_sessions, shutdown.clone())),
                views: views::ViewStore::default(),
                metrics: Arc::new(registry),
                shutdown: shutdown.clone(),
                events,
                reloader,
            },
            shutdown,
        }
    }

    /// Tells long-lived streams that the gateway is going away: `/mcp`'s
    /// `subscriptions/listen` streams end with their final result, so clients know to listen
    /// again elsewhere instead of seeing a broken connection. Call it when shutdown begins,
    /// before the listeners drain.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The main router: the host page, the JSON routes, the per-app proxy and `/mcp`. When
    /// both public origins are configured and name different hosts, requests whose `Host`
    /// is the sandbox's are served by the sandbox router instead (one port for both origins
    /// behind a balancer).
    pub fn router(&self) -> Router {
        let config = self.state.config.clone();
        let mut api = Router::new();
        if config.serve_metrics {
            api = api.route("/metrics", get(metrics::scrape));
        }
        let api = api
            .route("/apps/health", get(apps::health))
            .route("/apps", get(apps::list))
            .route("/apps/reload", post(apps::reload))
            .route("/apps/events", get(events::stream))
            .route("/apps/chat", post(chat::chat))
            .route("/apps/chat/elicitation/{id}", post(elicitation::answer))
            .route("/apps/{id}", get(apps::detail))
            .route("/apps/{id}/views", post(views::prepare))
            .route("/apps/{id}/{action}", post(apps::control))
            .route(
                "/apps/mcp/{app_id}",
                post(proxy::post).get(proxy::get).delete(proxy::delete),
            )
            .route("/mcp", post(mcp::post).get(mcp::get).delete(mcp::delete))
            .with_state(self.state.clone());
        let api = extensions::merge(api, self.state.parts.installer.clone())
            // Every route reads its body through intake: one limit, answered in the route's
            // own language; axum's own (smaller) default limit then has nothing to add.
            .layer(axum::extract::DefaultBodyLimit::disable())
            .layer(axum::middleware::from_fn_with_state(
                config.clone(),
                intake::read_body,
            ))
            .layer(axum::middleware::from_fn_with_state(
                config.clone(),
                security::authenticate,
            ));
        // The page and its assets are public: they hold no data, and the page asks for the
        // token when the gateway needs one.
        // The probes are public too (kubelet and balancers send no token); what they say is
        // in health.rs.
        let assets = Router::new()
            .route("/", get(views::page))
            .route("/assets/{file}", get(views::asset))
            .route("/healthz", get(health::healthz))
            .route("/readyz", get(health::readyz))
            .with_state(self.state.clone());
        let replica = replica::replica_header_value(&config.replica_name);
        let sandbox = security::SandboxByHost::new(&config, self.sandbox_router());
        let access = security::Access::new(config);
        let cors = security::cors(&access);
        // Behind a balancer the sandbox's public name may point at this listener too.
        let sandbox = sandbox.map(|sandbox| {
            axum::middleware::from_fn_with_state(Arc::new(sandbox), security::sandbox_by_host)
        });
        // These layers see every request, so they wrap the router as a whole rather than
        // each route (what `Router::layer` does): axum clones a route's whole stack of boxed
        // services for every request it serves, one box per layer. Outermost first.
        let outer = tower::ServiceBuilder::new()
            .layer(axum::middleware::from_fn_with_state(
                replica,
                replica::name_replica,
            ))
            .option_layer(sandbox)
            .layer(axum::middleware::from_fn_with_state(
                access,
                security::guard,
            ))
            .layer(cors)
            .service(api.merge(assets));
        Router::new().fallback_service(outer)
    }

    /// The reloader, when the parts have a discovery.
    pub(crate) fn reloader(&self) -> Option<&reload::Reloader> {
        self.state.reloader.as_ref()
    }

    /// The sandbox router, for the second listener (a different origin): only
    /// `/sandbox.html?view=TOKEN`, with the view's CSP as a header.
    pub fn sandbox_router(&self) -> Router {
        let mut config = (*self.state.config).clone();
        // The sandbox is framed by the host page, never called with its token or from other
        // origins; only the Host check applies.
        config.auth_token = None;
        config.allowed_origins.clear();
        let replica = replica::replica_header_value(&config.replica_name);
        Router::new()
            .route("/sandbox.html", get(views::sandbox))
            .with_state(self.state.views.clone())
            .layer(axum::middleware::from_fn_with_state(
                security::Access::new(Arc::new(config)),
                security::guard_host,
            ))
            .layer(axum::middleware::from_fn_with_state(
                replica,
                replica::name_replica,
            ))
    }
}

/// Builds the main router for `parts` under `config` (without a sandbox listener).
pub fn router(parts: HostParts, config: HostConfig) -> Router {
    Host::new(parts, config).router()
}
