//! Integration tests of mcpapp-host over real sockets, with real apps behind a real
//! supervisor, driven by reqwest and by rmcp's own Streamable HTTP client.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used, clippy::needless_pass_by_value)]

mod aggregate;
mod apps;
mod chat;
mod connections;
mod eras;
mod faithful;
mod proxy;
mod security;
mod views;

use std::sync::Arc;
use std::time::Duration;

use mcpapp_agent::{Agent, AgentConfig, ChatModel, OfflineModel};
use mcpapp_bridge::{AppToolSync, ToolRegistry};
use mcpapp_discovery::Discovery;
use mcpapp_host::{Host, HostConfig, HostParts};
use mcpapp_manifest::McpAppsConfig;
use mcpapp_supervisor::{SupervisionPolicy, Supervisor};
use mcpapp_testkit::AppsDir;
use serde_json::Value;

pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// A gateway serving on a free loopback port.
pub(crate) struct Gateway {
    pub(crate) url: String,
    pub(crate) sandbox_url: String,
    pub(crate) supervisor: Supervisor,
    pub(crate) registry: ToolRegistry,
    pub(crate) apps: AppsDir,
    /// Kept alive for as long as the gateway: dropping it withdraws the app tools.
    _sync: Arc<AppToolSync>,
    server: tokio::task::JoinHandle<()>,
    sandbox_server: tokio::task::JoinHandle<()>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.server.abort();
        self.sandbox_server.abort();
    }
}

pub(crate) fn policy() -> SupervisionPolicy {
    let mut policy = SupervisionPolicy::default();
    policy.restart_delay = Duration::from_millis(50);
    policy.health_check_interval = None;
    policy.shutdown_grace = Duration::from_secs(2);
    policy
}

impl Gateway {
    /// Starts a gateway over the apps in `apps`, waiting until they settle.
    pub(crate) async fn start(apps: AppsDir, tweak: impl FnOnce(&mut HostConfig)) -> Self {
        Self::start_with_model(apps, Arc::new(OfflineModel::new()), tweak).await
    }

    /// Starts a gateway whose agent uses `model`.
    pub(crate) async fn start_with_model(
        apps: AppsDir,
        model: Arc<dyn ChatModel>,
        tweak: impl FnOnce(&mut HostConfig),
    ) -> Self {
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt().with_test_writer().try_init();
        }
        let config = McpAppsConfig {
            enabled: true,
            ..McpAppsConfig::default()
        };
        let discovery = Discovery::builder(config)
            .discovery_paths(vec![apps.path().display().to_string()], apps.path())
            .build()
            .unwrap();
        let supervisor = Supervisor::builder().policy(policy()).build();
        supervisor.load(&discovery.scan());
        assert!(supervisor.wait_settled(PATIENCE).await);
        let registry = ToolRegistry::new();
        // App tools reach the registry (the agent's and /mcp's) as in the gateway binary.
        let sync = Arc::new(AppToolSync::start(&supervisor, &registry));
        sync.synced().await;
        let diagnostics = {
            let sync = sync.clone();
            Arc::new(move || {
                sync.diagnostics()
                    .iter()
                    .map(|d| serde_json::to_value(d).unwrap())
                    .collect()
            })
        };
        let agent = Agent::new(registry.clone(), model, AgentConfig::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sandbox_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sandbox_addr = sandbox_listener.local_addr().unwrap();
        let mut host_config = HostConfig::new(addr);
        host_config.sandbox_origin = Some(format!("http://{sandbox_addr}"));
        tweak(&mut host_config);
        let parts = HostParts::new(supervisor.clone(), registry.clone(), agent)
            .with_discovery(discovery)
            .with_diagnostics(diagnostics);
        let limits = host_config.connections;
        let host = Host::new(parts, host_config);
        let app = host.router();
        let sandbox = host.sandbox_router();
        // The gateway binary's serve loop, so the connection limits are under test too.
        let server = tokio::spawn(mcpapp_host::serve(
            listener,
            app,
            limits,
            std::future::pending(),
            Duration::ZERO,
        ));
        let sandbox_server = tokio::spawn(mcpapp_host::serve(
            sandbox_listener,
            sandbox,
            limits,
            std::future::pending(),
            Duration::ZERO,
        ));
        Self {
            url: format!("http://{addr}"),
            sandbox_url: format!("http://{sandbox_addr}"),
            supervisor,
            registry,
            apps,
            _sync: sync,
            server,
            sandbox_server,
        }
    }

    pub(crate) async fn get_json(&self, path: &str) -> (u16, Value) {
        let response = reqwest::get(format!("{}{path}", self.url)).await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn post_json(&self, path: &str) -> (u16, Value) {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn shutdown(self) {
        self.supervisor.shutdown().await;
    }
}
