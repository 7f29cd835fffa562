//! The composition root: one place that assembles a whole gateway (the supervisor and its
//! apps, the tool registry and the sync that fills it, the agent, the host's routers, both
//! listeners, the elicitation broker shared by the supervisor and the chat) and takes it down
//! again in the right order. The `serve` command and the integration tests both build their
//! gateway here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mcpapp_agent::{Agent, AgentConfig, ChatModel, OfflineModel};
use mcpapp_bridge::{AppToolSync, ToolRegistry};
use mcpapp_discovery::{Discovery, DiscoveryReport};
use mcpapp_oauth::{CLIENT_METADATA_PATH, OAuthClient, TokenStore, callback_url};
use mcpapp_supervisor::{Keeper, SupervisionPolicy, Supervisor, SupervisorMetrics};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch as signal;
use tracing::{info, warn};

use crate::apps::DiagnosticsFn;
use crate::config::{ConnectionLimits, GatewaySettings, HostConfig};
use crate::elicitation::ElicitationBroker;
use crate::host::{Host, HostParts};
use crate::reload::ConfigSource;
use crate::reload::watch::{self, FileWatcher};
use crate::replica::replica_name_problem;
use crate::security::{ExposureError, check_exposure, is_web_origin};
use crate::serve::serve;

/// Address used when neither the builder nor `Gateway.Bind` says otherwise.
const DEFAULT_BIND: &str = "127.0.0.1:8787";
/// How long open connections (event streams) may delay shutdown, by default.
const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The address is not loopback and no token protects it.
    #[error(transparent)]
    Exposure(#[from] ExposureError),
    /// An address setting is not an address.
    #[error("{setting} '{value}' is not an address such as 127.0.0.1:8787")]
    BadAddress {
        /// `Gateway.Bind`, `Gateway.SandboxBind` or the builder's.
        setting: &'static str,
        /// The value as given.
        value: String,
    },
    /// A listener could not be opened.
    #[error("cannot listen on {addr}{what}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What it was for (empty for the main listener).
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An origin setting is not an `http` or `https` origin.
    #[error("{setting} '{value}' is not an origin such as https://mcpapp.example.com")]
    BadOrigin {
        /// `Gateway.PublicOrigin` or `Gateway.SandboxOrigin`.
        setting: &'static str,
        /// The value as given.
        value: String,
    },
    /// The public sandbox origin is the page's own, which would let views reach the page.
    #[error(
        "Gateway.SandboxOrigin '{0}' is the same as Gateway.PublicOrigin: app views need an origin of their own"
    )]
    SandboxNotIsolated(String),
    /// `Gateway.ReplicaName` cannot go into a response header.
    #[error("Gateway.ReplicaName '{value}' is not usable: {reason}")]
    BadReplicaName {
        /// The value as given.
        value: String,
        /// Why not.
        reason: &'static str,
    },
    /// The OAuth client could not be set up (its redirect URI or metadata document URL).
    #[error(transparent)]
    OAuth(#[from] mcpapp_oauth::BuildError),
    /// Scanning the discovery paths did not finish (its thread panicked or was cancelled).
    #[error("discovery did not finish: {0}")]
    Discovery(String),
}

/// Configures a [`Gateway`]. Create one with [`Gateway::builder`].
pub struct GatewayBuilder {
    discovery: Discovery,
    settings: GatewaySettings,
    bind: Option<SocketAddr>,
    token: Option<String>,
    model: Option<Arc<dyn ChatModel>>,
    keeper: Option<Keeper>,
    sandbox: Option<mcpapp_supervisor::Sandbox>,
    policy: Option<SupervisionPolicy>,
    drain: Duration,
    configure: Option<ConfigureHost>,
    watch: bool,
    source: Option<ConfigSource>,
    secrets: Option<Arc<dyn mcpapp_manifest::SecretResolver>>,
    installer: Option<mcpapp_install::Installer>,
    token_store: Option<TokenStore>,
    oauth_clock: Option<Arc<dyn mcpapp_oauth::Clock>>,
}

/// A last change to the host's configuration (see [`GatewayBuilder::configure_host`]).
type ConfigureHost = Box<dyn FnOnce(&mut HostConfig) + Send>;

impl std::fmt::Debug for GatewayBuilder {
    // The token stays out of debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayBuilder")
            .field("bind", &self.bind)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl GatewayBuilder {
    /// The `Gateway` configuration section (addresses, token, origins, limits).
    pub fn settings(mut self, settings: GatewaySettings) -> Self {
        self.settings = settings;
        self
    }

    /// The main listener's address, over `Gateway.Bind` (port 0 picks a free port).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = Some(addr);
        self
    }

    /// The bearer token every route but static assets requires, over `Gateway.AuthToken`.
    pub fn token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|t| !t.trim().is_empty());
        self
    }

    /// The agent's chat model; the offline command mode without one.
    pub fn model(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// The keeper process that kills every app if the gateway dies (see
    /// `mcpapp_supervisor::Keeper`).
    pub fn keeper(mut self, keeper: Keeper) -> Self {
        self.keeper = Some(keeper);
        self
    }

    /// The sandbox stdio apps run in (see `mcpapp_sandbox`); both listeners' ports are kept
    /// closed to apps whatever their network grant, unless a grant names the port. The
    /// [`installer`](GatewayBuilder::installer)'s probe starts run in it too.
    pub fn sandbox(mut self, sandbox: mcpapp_supervisor::Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// One supervision policy for every app, ignoring `McpApps.Supervision` (for tests).
    pub fn policy(mut self, policy: SupervisionPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// How long open connections may delay shutdown (default 5 s).
    pub fn drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Whether to watch the discovery paths (and the configuration file of
    /// [`GatewayBuilder::config_source`]) and apply changes as they happen; `Gateway.Watch`
    /// overrides it. Off by default; `mcpapp-gateway serve` turns it on.
    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = watch;
        self
    }

    /// Where the configuration came from: reloads (`POST /apps/reload` and the watcher) read
    /// it again and apply its difference; a file that cannot be read or applied keeps the
    /// last good configuration. Without it, reloads scan with the builder's discovery.
    pub fn config_source(mut self, source: ConfigSource) -> Self {
        self.source = Some(source);
        self
    }

    /// Where apps' `secret:NAME` values come from (the secret store `install` writes).
    pub fn secrets(mut self, secrets: Arc<dyn mcpapp_manifest::SecretResolver>) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// Serves the page's "Add apps" view with `installer`.
    pub fn installer(mut self, installer: mcpapp_install::Installer) -> Self {
        self.installer = Some(installer);
        self
    }

    /// Makes the gateway the OAuth client of its HTTP apps, keeping their tokens in `store`:
    /// an app that answers 401 with a `Bearer` challenge waits in `NeedsAuthorization` until
    /// the user connects it (`POST /apps/{id}/authorize`, the page's "Connect"), and the
    /// authorization server redirects to `/oauth/callback` on `Gateway.PublicOrigin`, else
    /// on the main listener's address. Without a store a 401 is an ordinary error.
    pub fn token_store(mut self, store: TokenStore) -> Self {
        self.token_store = Some(store);
        self
    }

    /// The clock OAuth tokens' lifetimes and the authorization links' expiry are measured by
    /// (the system's by default; tests move theirs).
    pub fn oauth_clock(mut self, clock: Arc<dyn mcpapp_oauth::Clock>) -> Self {
        self.oauth_clock = Some(clock);
        self
    }

    /// A last say on the host's configuration, after the settings are applied.
    pub fn configure_host(
        mut self,
        configure: impl FnOnce(&mut HostConfig) + Send + 'static,
    ) -> Self {
        self.configure = Some(Box::new(configure));
        self
    }

    /// The builder's token, else `Gateway.AuthToken` when not blank.
    fn effective_token(&self) -> Option<String> {
        effective_token(&self.settings, self.token.as_deref())
    }

    /// Opens both listeners, scans for apps, starts them in the background and serves.
    /// Returns at once: apps settle while the endpoints answer.
    ///
    /// # Errors
    /// [`StartError`] when an address is refused or cannot be listened on.
    pub async fn start(self) -> Result<Gateway, StartError> {
        let token = self.effective_token();
        let settings = self.settings;
        check_public_settings(&settings)?;
        let listeners = Listeners::open(&settings, self.bind, token.as_deref()).await?;
        let (local, sandbox_local) = (listeners.local, listeners.sandbox_local);

        let discovery = self.discovery.clone();
        let report = tokio::task::spawn_blocking(move || discovery.scan())
            .await
            .map_err(|e| StartError::Discovery(e.to_string()))?;
        // One registry per gateway: the supervisor's call series, then the host's own.
        let mut metrics = Registry::default();
        // The agent's calls may make apps ask the user: the broker asks the chat page.
        let elicitations = ElicitationBroker::new();
        let mut supervisor = Supervisor::builder()
            .config(self.discovery.config())
            .metrics(SupervisorMetrics::register(&mut metrics))
            .elicitor(Arc::new(elicitations.clone()));
        if let Some(keeper) = self.keeper {
            supervisor = supervisor.keeper(keeper);
        }
        let sandbox = self
            .sandbox
            .map(|s| Arc::new(s.protect_ports([local.port(), sandbox_local.port()])));
        if let Some(sandbox) = &sandbox {
            supervisor = supervisor.sandbox(sandbox.clone());
        }
        // The "Add apps" view's probe starts run new apps in the same sandbox as the others.
        let installer = match (self.installer, &sandbox) {
            (Some(installer), Some(sandbox)) => Some(installer.with_sandbox(sandbox.clone())),
            (installer, _) => installer,
        };
        if let Some(policy) = self.policy {
            supervisor = supervisor.policy(policy);
        }
        if let Some(secrets) = self.secrets {
            supervisor = supervisor.secrets(secrets);
        }
        let oauth = match self.token_store {
            Some(store) => Some(oauth_client(store, &settings, local, self.oauth_clock)?),
            None => None,
        };
        if let Some(oauth) = &oauth {
            supervisor = supervisor.oauth(oauth.clone());
        }
        let supervisor = supervisor.build();
        let registry = ToolRegistry::new();
        let model = self.model.unwrap_or_else(|| Arc::new(OfflineModel::new()));
        info!(model = model.label(), "chat model");
        let agent = Agent::new(registry.clone(), model, AgentConfig::default());
        let mut config = host_config(&settings, &listeners, token);
        if let Some(configure) = self.configure {
            configure(&mut config);
        }
        // App tools follow the supervisor into the agent's registry (and /mcp).
        let sync = Arc::new(AppToolSync::start(&supervisor, &registry));
        let parts = HostParts {
            supervisor: supervisor.clone(),
            registry: registry.clone(),
            agent,
            discovery: Some(self.discovery),
            config_source: self.source,
            diagnostics: Some(diagnostics_of(&sync)),
            elicitations,
            installer,
            oauth,
        };
        let limits = config.connections;
        let host = Host::new(parts, config, metrics);
        if let Some(reloader) = host.reloader() {
            reloader
                .started_with(report.clone(), settings.clone())
                .await;
        }
        // Apps start in the background; the endpoints answer at once. Loaded before the
        // listeners serve, so that `GET /readyz` never sees an empty list as ready.
        supervisor.load(&report);
        let (stop, servers) = listeners.serve(&host, limits, self.drain);
        let watcher = start_watcher(&host, settings.watch.unwrap_or(self.watch)).await;
        info!(
            "mcpapp gateway listening on http://{local} (open http://{local}/ in a browser); app views are sandboxed on http://{sandbox_local}"
        );
        Ok(Gateway {
            local,
            sandbox_local,
            supervisor,
            registry,
            sync,
            host,
            report,
            stop,
            servers,
            watcher,
        })
    }
}

/// Checks, without opening anything, what [`GatewayBuilder::start`] would refuse from the
/// settings alone, given the builder's `bind` and `token` (the ones passed to
/// [`GatewayBuilder::bind`] and [`GatewayBuilder::token`]): the public-origin settings, and a
/// main address that is not loopback without a token. A program calls it before it opens
/// state of its own (a token store, a secret store), so that a refused start leaves nothing
/// behind.
///
/// # Errors
/// [`StartError`], as `start` would return it.
pub fn check_start(
    settings: &GatewaySettings,
    bind: Option<SocketAddr>,
    token: Option<&str>,
) -> Result<(), StartError> {
    check_public_settings(settings)?;
    let addr = main_address(settings, bind)?;
    let token = effective_token(settings, token);
    check_exposure(
        addr,
        token.as_deref(),
        settings.allow_remote_without_token.unwrap_or(false),
    )?;
    Ok(())
}

/// `token`, else `Gateway.AuthToken` when not blank.
fn effective_token(settings: &GatewaySettings, token: Option<&str>) -> Option<String> {
    token
        .map(str::to_owned)
        .or_else(|| settings.auth_token.clone().filter(|t| !t.trim().is_empty()))
}

/// The main listener's address: the builder's, else `Gateway.Bind`, else [`DEFAULT_BIND`].
fn main_address(
    settings: &GatewaySettings,
    bind: Option<SocketAddr>,
) -> Result<SocketAddr, StartError> {
    match bind {
        Some(addr) => Ok(addr),
        None => {
            let value = settings
                .bind
                .clone()
                .unwrap_or_else(|| DEFAULT_BIND.to_owned());
            value.parse().map_err(|_| StartError::BadAddress {
                setting: "Gateway.Bind",
                value,
            })
        }
    }
}

/// Both listeners, bound, with the addresses they got.
struct Listeners {
    main: TcpListener,
    local: SocketAddr,
    sandbox: TcpListener,
    sandbox_local: SocketAddr,
}

impl Listeners {
    /// Binds the main listener (the builder's address, else `Gateway.Bind`, else
    /// [`DEFAULT_BIND`]) unless it would expose the gateway without a token, then the
    /// sandbox's: app views need an origin of their own, by default a second listener on the
    /// same host.
    async fn open(
        settings: &GatewaySettings,
        bind: Option<SocketAddr>,
        token: Option<&str>,
    ) -> Result<Self, StartError> {
        let addr = main_address(settings, bind)?;
        check_exposure(
            addr,
            token,
            settings.allow_remote_without_token.unwrap_or(false),
        )?;
        let main = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Listen {
                addr,
                what: "",
                source,
            })?;
        let local = local_addr(&main, addr, "")?;
        let sandbox_bind = match &settings.sandbox_bind {
            Some(value) => value.parse().map_err(|_| StartError::BadAddress {
                setting: "Gateway.SandboxBind",
                value: value.clone(),
            })?,
            None => SocketAddr::new(local.ip(), 0),
        };
        let sandbox =
            TcpListener::bind(sandbox_bind)
                .await
                .map_err(|source| StartError::Listen {
                    addr: sandbox_bind,
                    what: " for the sandbox",
                    source,
                })?;
        let sandbox_local = local_addr(&sandbox, sandbox_bind, " for the sandbox")?;
        Ok(Self {
            main,
            local,
            sandbox,
            sandbox_local,
        })
    }

    /// Serves the host's routers until the returned sender says stop.
    fn serve(
        self,
        host: &Host,
        limits: ConnectionLimits,
        drain: Duration,
    ) -> (signal::Sender<bool>, Vec<tokio::task::JoinHandle<()>>) {
        let (stop, stopped) = signal::channel(false);
        let until_stopped = |mut stopped: signal::Receiver<bool>| async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let main = tokio::spawn(serve(
            self.main,
            host.router(),
            limits,
            until_stopped(stopped.clone()),
            drain,
        ));
        let sandbox = tokio::spawn(serve(
            self.sandbox,
            host.sandbox_router(),
            limits,
            until_stopped(stopped),
            drain,
        ));
        (stop, vec![main, sandbox])
    }
}

/// The host's configuration: the settings over the defaults, the token in force, and the
/// sandbox's origin (`Gateway.SandboxOrigin`, else its listener's).
fn host_config(
    settings: &GatewaySettings,
    listeners: &Listeners,
    token: Option<String>,
) -> HostConfig {
    let mut config = HostConfig::new(listeners.local).with_settings(settings);
    config.auth_token = token;
    config.sandbox_origin = Some(
        settings
            .sandbox_origin
            .as_deref()
            .map(|origin| origin.trim().trim_end_matches('/').to_owned())
            .unwrap_or_else(|| format!("http://{}", listeners.sandbox_local)),
    );
    config
}

/// The gateway's OAuth client: authorization servers send the user back to `/oauth/callback`
/// on `Gateway.PublicOrigin`, else on the main listener's address (loopback for a wildcard
/// one); on an https public origin (or with `Gateway.OAuthClientMetadataUrl`) the gateway
/// also offers its client ID metadata document.
fn oauth_client(
    store: TokenStore,
    settings: &GatewaySettings,
    local: SocketAddr,
    clock: Option<Arc<dyn mcpapp_oauth::Clock>>,
) -> Result<OAuthClient, StartError> {
    let origin = match settings.public_origin.as_deref() {
        Some(origin) => origin.trim().trim_end_matches('/').to_owned(),
        None => {
            let mut addr = local;
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr.ip() {
                    std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            format!("http://{addr}")
        }
    };
    let origin = url::Url::parse(&origin).map_err(|_| StartError::BadOrigin {
        setting: "Gateway.PublicOrigin",
        value: origin.clone(),
    })?;
    let mut builder = OAuthClient::builder(store, callback_url(&origin));
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    if let Some(url) = settings.oauth_client_metadata_url.as_deref() {
        let url = url::Url::parse(url.trim())
            .map_err(|_| mcpapp_oauth::BuildError::ClientMetadataUrl(url.to_owned()))?;
        builder = builder.client_metadata_url(url);
    } else if origin.scheme() == "https" {
        let mut document = origin;
        document.set_path(CLIENT_METADATA_PATH);
        builder = builder.client_metadata_url(document);
    }
    let client = builder.build()?;
    info!(redirect_uri = %client.redirect_uri(), "OAuth client of HTTP apps");
    Ok(client)
}

/// The bridge's diagnostics (tool-name collisions and the like) for `GET /apps`.
fn diagnostics_of(sync: &Arc<AppToolSync>) -> DiagnosticsFn {
    let sync = sync.clone();
    Arc::new(move || {
        sync.diagnostics()
            .iter()
            .filter_map(|d| serde_json::to_value(d).ok())
            .collect()
    })
}

/// Watches the discovery paths and the configuration file when `watch` and the host can
/// reload.
async fn start_watcher(host: &Host, watch: bool) -> Option<FileWatcher> {
    let reloader = host.reloader().filter(|_| watch)?;
    match watch::start(reloader.clone()).await {
        Ok(watcher) => Some(watcher),
        // Without a watcher the gateway still serves, and POST /apps/reload works.
        Err(err) => {
            warn!("{err}; changes apply only on POST /apps/reload");
            None
        }
    }
}

/// Refuses public origins that are not origins, a sandbox origin equal to the page's, and
/// a replica name that cannot be a header value.
fn check_public_settings(settings: &GatewaySettings) -> Result<(), StartError> {
    let trimmed = |origin: &str| origin.trim().trim_end_matches('/').to_ascii_lowercase();
    for (setting, value) in [
        ("Gateway.PublicOrigin", &settings.public_origin),
        ("Gateway.SandboxOrigin", &settings.sandbox_origin),
    ] {
        if let Some(value) = value
            && !is_web_origin(&trimmed(value))
        {
            return Err(StartError::BadOrigin {
                setting,
                value: value.clone(),
            });
        }
    }
    if let (Some(public), Some(sandbox)) = (&settings.public_origin, &settings.sandbox_origin)
        && trimmed(public) == trimmed(sandbox)
    {
        return Err(StartError::SandboxNotIsolated(sandbox.clone()));
    }
    if let Some(name) = &settings.replica_name
        && let Some(reason) = replica_name_problem(name)
    {
        return Err(StartError::BadReplicaName {
            value: name.clone(),
            reason,
        });
    }
    Ok(())
}

fn local_addr(
    listener: &tokio::net::TcpListener,
    addr: SocketAddr,
    what: &'static str,
) -> Result<SocketAddr, StartError> {
    listener
        .local_addr()
        .map_err(|source| StartError::Listen { addr, what, source })
}

/// A running gateway. [`Gateway::shutdown`] takes it down in order: long-lived streams are
/// told, the listeners stop accepting and drain, the apps stop, the registry is emptied.
/// Dropping it without a shutdown still stops every app (the supervisor's drop does).
pub struct Gateway {
    local: SocketAddr,
    sandbox_local: SocketAddr,
    supervisor: Supervisor,
    registry: ToolRegistry,
    sync: Arc<AppToolSync>,
    host: Host,
    report: DiscoveryReport,
    stop: signal::Sender<bool>,
    servers: Vec<tokio::task::JoinHandle<()>>,
    watcher: Option<FileWatcher>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("local", &self.local)
            .field("sandbox_local", &self.sandbox_local)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Starts configuring a gateway over the apps `discovery` finds.
    pub fn builder(discovery: Discovery) -> GatewayBuilder {
        GatewayBuilder {
            discovery,
            settings: GatewaySettings::default(),
            bind: None,
            token: None,
            model: None,
            keeper: None,
            sandbox: None,
            policy: None,
            drain: DEFAULT_DRAIN,
            configure: None,
            watch: false,
            source: None,
            secrets: None,
            installer: None,
            token_store: None,
            oauth_clock: None,
        }
    }

    /// The main listener's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The sandbox listener's address (the origin app views run on).
    pub fn sandbox_addr(&self) -> SocketAddr {
        self.sandbox_local
    }

    /// The running apps.
    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// The agent's tool registry (what `/mcp` serves).
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The HTTP side.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// What the start-up scan found, diagnostics included.
    pub fn report(&self) -> &DiscoveryReport {
        &self.report
    }

    /// Waits until every app has settled and its tools are registered, or `deadline` passes;
    /// returns whether all settled.
    pub async fn wait_settled(&self, deadline: Duration) -> bool {
        let settled = self.supervisor.wait_settled(deadline).await;
        self.sync.synced().await;
        settled
    }

    /// Takes the gateway down: streams are told, listeners drain (up to the drain time), apps
    /// stop, the registry is emptied.
    pub async fn shutdown(self) {
        info!("shutting down");
        // No reload may start apps while they are being stopped.
        drop(self.watcher);
        self.host.begin_shutdown();
        let _ = self.stop.send(true);
        for server in self.servers {
            let _ = server.await;
        }
        self.supervisor.shutdown().await;
        drop(self.sync);
        info!("stopped");
    }
}
