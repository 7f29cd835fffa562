//! The routers' composition root: [`Host`] builds each feature's own state from the parts
//! the gateway assembled, and puts the routes, their states and the layers every request
//! passes together. Features know nothing of each other's state or of this module; the
//! route table is here, in one place.

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use mcpapp_agent::Agent;
use mcpapp_bridge::ToolRegistry;
use mcpapp_discovery::Discovery;
use mcpapp_supervisor::Supervisor;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::aggregate::{self, Aggregate};
use crate::app_events::{self, AppEvents};
use crate::apps::{self, AppsState, DiagnosticsFn};
use crate::chat::{self, ChatState};
use crate::config::HostConfig;
use crate::elicitation::{self, ElicitationBroker};
use crate::health::{self, Probes};
use crate::metrics::{self, SharedRegistry};
use crate::oauth::{self, OAuthState};
use crate::proxy::{self, ProxySessions, ProxyState};
use crate::reload::{ConfigSource, Reloader};
use crate::views::{self, ViewStore, ViewsState};
use crate::{intake, replica, security};

/// The parts the host serves, assembled by the gateway.
pub(crate) struct HostParts {
    /// The running apps.
    pub(crate) supervisor: Supervisor,
    /// The agent's tool registry (what `/mcp` serves).
    pub(crate) registry: ToolRegistry,
    /// The chat agent behind `/apps/chat`.
    pub(crate) agent: Agent,
    /// Discovery to run again on `POST /apps/reload`; without it reload is refused.
    pub(crate) discovery: Option<Discovery>,
    /// Where the configuration came from, so a reload reads it again; without it a reload
    /// scans with `discovery` as it is.
    pub(crate) config_source: Option<ConfigSource>,
    /// Extra diagnostics for `GET /apps`.
    pub(crate) diagnostics: Option<DiagnosticsFn>,
    /// Asks chat pages the elicitations of the agent's calls; it must also be the
    /// supervisor's elicitor for any to arrive.
    pub(crate) elicitations: ElicitationBroker,
    /// Installs apps for the page's "Add apps" view (`/installer/…`); without it those routes
    /// are absent.
    pub(crate) installer: Option<mcpapp_install::Installer>,
    /// The gateway as the OAuth client of its HTTP apps (also the supervisor's).
    pub(crate) oauth: Option<mcpapp_oauth::OAuthClient>,
}

/// The gateway's HTTP side: the main router and the sandbox router, sharing state.
#[derive(Clone)]
pub struct Host {
    config: Arc<HostConfig>,
    apps: AppsState,
    probes: Probes,
    chat: ChatState,
    elicitations: ElicitationBroker,
    events: AppEvents,
    views: ViewsState,
    proxy: ProxyState,
    oauth: OAuthState,
    aggregate: Arc<Aggregate>,
    /// What `GET /metrics` renders.
    metrics: SharedRegistry,
    /// The "Add apps" view's installer, if any.
    installer: Option<mcpapp_install::Installer>,
    /// Cancelled by [`Host::begin_shutdown`]: long-lived streams end cleanly.
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

impl Host {
    /// Prepares the routes for `parts` under `config`, with `registry` behind
    /// `GET /metrics`: the host adds its own series (`mcpapp_app_state`,
    /// `mcpapp_app_restarts_total`, `mcpapp_proxy_sessions`, `mcpapp_build_info`) to what is
    /// registered there already, such as the supervisor's
    /// [`SupervisorMetrics`](mcpapp_supervisor::SupervisorMetrics).
    pub(crate) fn new(parts: HostParts, config: HostConfig, mut registry: Registry) -> Self {
        let config = Arc::new(config);
        let sessions =
            ProxySessions::new(config.max_proxy_sessions_per_app, config.proxy_session_idle);
        let shutdown = CancellationToken::new();
        metrics::register(&mut registry, parts.supervisor.clone(), sessions.clone());
        let events = AppEvents::new(parts.supervisor.clone(), shutdown.clone());
        let reloader = parts.discovery.map(|discovery| {
            Reloader::new(
                parts.supervisor.clone(),
                discovery,
                parts.config_source,
                events.clone(),
            )
        });
        // `/mcp` counts as one more app against the proxy's cap.
        let aggregate = Aggregate::new(
            parts.supervisor.clone(),
            parts.registry.clone(),
            config.max_proxy_sessions_per_app,
            config.proxy_session_idle,
            shutdown.clone(),
        );
        Self {
            apps: AppsState {
                supervisor: parts.supervisor.clone(),
                registry: parts.registry,
                diagnostics: parts.diagnostics,
                config: config.clone(),
                browser_sessions: sessions.clone(),
                reloader,
            },
            probes: Probes {
                supervisor: parts.supervisor.clone(),
                shutdown: shutdown.clone(),
            },
            chat: ChatState {
                agent: parts.agent,
                elicitations: parts.elicitations.clone(),
                supervisor: parts.supervisor.clone(),
                elicitation_timeout: config.elicitation_timeout,
            },
            elicitations: parts.elicitations,
            events,
            views: ViewsState {
                supervisor: parts.supervisor.clone(),
                config: config.clone(),
                store: ViewStore::default(),
            },
            oauth: OAuthState {
                supervisor: parts.supervisor.clone(),
                client: parts.oauth,
            },
            proxy: ProxyState {
                supervisor: parts.supervisor,
                sessions,
                enforce_app_visibility: config.enforce_app_visibility,
            },
            aggregate: Arc::new(aggregate),
            metrics: Arc::new(registry),
            installer: parts.installer,
            config,
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

    /// The reloader, when the parts have a discovery.
    pub(crate) fn reloader(&self) -> Option<&Reloader> {
        self.apps.reloader.as_ref()
    }

    /// The routes behind the token, each with its feature's state.
    fn api(&self) -> Router {
        let api = Router::new()
            .route("/apps/health", get(apps::health))
            .route("/apps", get(apps::list))
            .route("/apps/reload", post(apps::reload))
            .route("/apps/{id}", get(apps::detail))
            .route("/apps/{id}/{action}", post(apps::control))
            .with_state(self.apps.clone())
            .route("/apps/events", get(app_events::stream))
            .with_state(self.events.clone())
            .route("/apps/chat", post(chat::chat))
            .with_state(self.chat.clone())
            .route("/apps/chat/elicitation/{id}", post(elicitation::answer))
            .with_state(self.elicitations.clone())
            .route("/apps/{id}/views", post(views::prepare))
            .with_state(self.views.clone())
            .route("/apps/{id}/authorize", post(oauth::authorize))
            .route("/apps/{id}/disconnect", post(oauth::disconnect))
            .with_state(self.oauth.clone())
            .route(
                "/apps/mcp/{app_id}",
                post(proxy::post).get(proxy::get).delete(proxy::delete),
            )
            .with_state(self.proxy.clone())
            .route(
                "/mcp",
                post(aggregate::post)
                    .get(aggregate::get)
                    .delete(aggregate::delete),
            )
            .with_state(self.aggregate.clone());
        let api = crate::extensions::merge(api, self.installer.clone());
        if !self.config.serve_metrics {
            return api;
        }
        api.merge(
            Router::new()
                .route("/metrics", get(metrics::scrape))
                .with_state(self.metrics.clone()),
        )
    }

    /// The main router: the host page, the JSON routes, the per-app proxy and `/mcp`. When
    /// both public origins are configured and name different hosts, requests whose `Host`
    /// is the sandbox's are served by the sandbox router instead (one port for both origins
    /// behind a balancer).
    pub(crate) fn router(&self) -> Router {
        let config = self.config.clone();
        let api = self
            .api()
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
        let public = Router::new()
            .route("/", get(views::page))
            .route("/assets/{file}", get(views::asset))
            .with_state(self.views.clone())
            .route("/healthz", get(health::healthz))
            .route("/readyz", get(health::readyz))
            .with_state(self.probes.clone())
            // An authorization server's redirect carries no token; a single-use `state`
            // guards it (oauth.rs). The metadata document is fetched by servers.
            .route(mcpapp_oauth::CALLBACK_PATH, get(oauth::callback))
            .route(
                mcpapp_oauth::CLIENT_METADATA_PATH,
                get(oauth::client_metadata),
            )
            .with_state(self.oauth.clone());
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
            .service(api.merge(public));
        Router::new().fallback_service(outer)
    }

    /// The sandbox router, for the second listener (a different origin): only
    /// `/sandbox.html?view=TOKEN`, with the view's CSP as a header.
    pub(crate) fn sandbox_router(&self) -> Router {
        let mut config = (*self.config).clone();
        // The sandbox is framed by the host page, never called with its token or from other
        // origins; only the Host check applies.
        config.auth_token = None;
        config.allowed_origins.clear();
        let replica = replica::replica_header_value(&config.replica_name);
        Router::new()
            .route("/sandbox.html", get(views::sandbox))
            .with_state(self.views.store.clone())
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
