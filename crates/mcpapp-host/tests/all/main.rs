//! Integration tests of mcpapp-host over real sockets, with real apps behind a real
//! supervisor, driven by reqwest and by rmcp's own Streamable HTTP client.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used, clippy::needless_pass_by_value)]

mod abandoned;
mod aggregate;
mod apps;
mod chat;
mod connections;
mod elicitation;
mod eras;
mod faithful;
mod installer;
mod mcp_server;
mod metrics;
mod oauth;
mod proxy;
mod replicas;
mod security;
mod traces;
mod views;

use std::sync::Arc;
use std::time::Duration;

use mcpapp_agent::{ChatModel, OfflineModel};
use mcpapp_bridge::ToolRegistry;
use mcpapp_discovery::Discovery;
use mcpapp_host::HostConfig;
use mcpapp_manifest::McpAppsConfig;
use mcpapp_supervisor::{SupervisionPolicy, Supervisor};
use mcpapp_testkit::AppsDir;
use serde_json::Value;

/// The one bound of every wait (the testkit's, for all suites).
pub(crate) use mcpapp_testkit::PATIENCE;

/// A gateway serving on a free loopback port, built by the composition root the gateway
/// binary uses, over the apps of an [`AppsDir`].
pub(crate) struct Gateway {
    pub(crate) url: String,
    pub(crate) sandbox_url: String,
    pub(crate) supervisor: Supervisor,
    pub(crate) registry: ToolRegistry,
    pub(crate) apps: AppsDir,
    inner: mcpapp_host::Gateway,
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
    pub(crate) async fn start(
        apps: AppsDir,
        tweak: impl FnOnce(&mut HostConfig) + Send + 'static,
    ) -> Self {
        Self::start_with_model(apps, Arc::new(OfflineModel::new()), tweak).await
    }

    /// Starts a gateway whose agent uses `model`.
    pub(crate) async fn start_with_model(
        apps: AppsDir,
        model: Arc<dyn ChatModel>,
        tweak: impl FnOnce(&mut HostConfig) + Send + 'static,
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
        let inner = mcpapp_host::Gateway::builder(discovery)
            .bind("127.0.0.1:0".parse().unwrap())
            .policy(policy())
            .model(model)
            .drain(Duration::ZERO)
            .configure_host(tweak)
            .start()
            .await
            .unwrap();
        assert!(inner.wait_settled(PATIENCE).await);
        Self {
            url: format!("http://{}", inner.local_addr()),
            sandbox_url: format!("http://{}", inner.sandbox_addr()),
            supervisor: inner.supervisor().clone(),
            registry: inner.registry().clone(),
            apps,
            inner,
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
        self.inner.shutdown().await;
    }
}
