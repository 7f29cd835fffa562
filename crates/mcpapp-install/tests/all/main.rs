//! Integration tests of `mcpapp-install`: real documents, real bundles built here, real
//! package registries (npm, PyPI) for version resolution, and real app processes started by
//! the supervisor.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod bundles;
mod server_json;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpapp_discovery::Discovery;
use mcpapp_install::{Installer, SecretStore};
use mcpapp_manifest::{Lifecycle, McpAppsConfig};
use mcpapp_supervisor::{AppHandle, Supervisor};

/// A fixture's text.
pub(crate) fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// A temporary place with an apps folder and a secret store outside it.
pub(crate) struct Place {
    pub(crate) dir: tempfile::TempDir,
}

impl Place {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn apps(&self) -> PathBuf {
        self.dir.path().join("apps")
    }

    pub(crate) fn store(&self) -> SecretStore {
        SecretStore::new(self.dir.path().join("state/secrets.json"))
    }

    /// The operator's configuration: it allows the folders the test bundles' `directory`
    /// inputs ask for, so that the probe start (which, like the gateway, refuses to run an
    /// app whose requests are not granted) and [`Place::start`] run them.
    pub(crate) fn config(&self) -> McpAppsConfig {
        let mut config = McpAppsConfig {
            enabled: true,
            ..McpAppsConfig::default()
        };
        config.isolation.allow_manifest_permissions.write = vec!["/srv/**".to_owned()];
        config
    }

    pub(crate) fn installer(&self, probe: bool) -> Installer {
        Installer::builder(self.apps(), self.store())
            .config(self.config())
            .probe(probe)
            .build()
            .unwrap()
    }

    /// Every file under the apps folder whose bytes contain `needle`.
    pub(crate) fn files_containing(&self, needle: &str) -> Vec<PathBuf> {
        mcpapp_testkit::files_containing(&self.apps(), needle)
    }

    /// Starts every app in the apps folder as the gateway would, with the secret store.
    pub(crate) async fn start(&self) -> Supervisor {
        let config = self.config();
        let report = Discovery::builder(config.clone())
            .discovery_paths(vec![self.apps().display().to_string()], "/")
            .build()
            .unwrap()
            .scan();
        let supervisor = Supervisor::builder()
            .config(&config)
            .secrets(Arc::new(self.store()))
            .build();
        supervisor.load(&report);
        supervisor
    }
}

/// Waits until `app` runs or fails; returns the state.
pub(crate) async fn settle(app: &AppHandle) -> Lifecycle {
    let settled = format!("{} to run or fail", app.id());
    mcpapp_testkit::wait_watch(app.watch(), settled, |s| {
        matches!(s.state.lifecycle, Lifecycle::Running | Lifecycle::Failed)
    })
    .await
    .state
    .lifecycle
}

/// Calls `tool` of `app` and returns its structured content.
pub(crate) async fn call(
    app: &AppHandle,
    tool: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let arguments = arguments.as_object().cloned();
    let result = app.call_tool(tool, arguments, None).await.unwrap();
    result.structured_content.unwrap()
}
