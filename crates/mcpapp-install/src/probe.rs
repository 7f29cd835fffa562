//! The probe start after an install: the app is started once through a supervisor of its
//! own, exactly as the gateway will start it (the operator's entry overrides, inherited
//! environment and secrets), and its tools are read: a tool with `_meta.ui.resourceUri` shows
//! that the app has MCP App views, and the first such resource is its primary UI. No other
//! format says this (see the install reference), so asking the app is the only way.
//!
//! The probe runs before the manifest is written, so a running gateway never sees the app
//! until it is known to start.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcpapp_discovery::{DiscoveredApp, DiscoveryReport};
use mcpapp_manifest::{
    InstallState, Lifecycle, MANIFEST_FILE_NAME, McpAppManifest, McpAppsConfig, SecretResolver,
    SupervisionConfig,
};
use mcpapp_supervisor::{SupervisionPolicy, Supervisor};

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeResult {
    /// Whether a tool has a UI resource.
    pub has_ui: bool,
    /// The first tool's UI resource.
    pub ui_resource_uri: Option<String>,
    /// How many tools the app lists.
    pub tools: usize,
    /// The server's name and version, as it reported them.
    pub server_info: Option<(String, String)>,
}

/// Starts the app of `manifest` (in `root`) once and reads its tools; the app is stopped
/// again before this returns. Errors are the app's, with its last stderr lines.
pub(crate) async fn probe(
    manifest: &McpAppManifest,
    root: &Path,
    config: &McpAppsConfig,
    secrets: Arc<dyn SecretResolver>,
) -> Result<ProbeResult, String> {
    let id = manifest.id.clone().unwrap_or_default();
    let effective = match config.entries.get(&id) {
        Some(entry) => manifest.with_overrides(entry),
        None => manifest.clone(),
    };
    let spec = effective.validate().map_err(|errors| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let startup = spec.startup_timeout;
    let mut state = InstallState::new(effective, root.join(MANIFEST_FILE_NAME), root.to_path_buf());
    state.lifecycle = Lifecycle::Validated;
    let report = DiscoveryReport {
        apps: vec![DiscoveredApp {
            state,
            spec: Some(spec),
        }],
        diagnostics: Vec::new(),
    };
    let supervisor = Supervisor::builder()
        .config(config)
        .policy(SupervisionPolicy::from_config(
            &SupervisionConfig {
                auto_restart: Some(false),
                health_check_interval_ms: Some(0),
                shutdown_grace_ms: Some(2000),
                ..SupervisionConfig::default()
            },
            None,
        ))
        .secrets(secrets)
        .build();
    supervisor.load(&report);
    let result = async {
        let handle = supervisor
            .get(&id)
            .ok_or_else(|| "the supervisor did not take the app".to_owned())?;
        let mut watch = handle.watch();
        let settled = tokio::time::timeout(startup + Duration::from_secs(5), async {
            loop {
                let lifecycle = watch.borrow_and_update().state.lifecycle;
                if matches!(
                    lifecycle,
                    Lifecycle::Running | Lifecycle::Failed | Lifecycle::Stopped
                ) {
                    return lifecycle;
                }
                if watch.changed().await.is_err() {
                    return Lifecycle::Failed;
                }
            }
        })
        .await
        .unwrap_or(Lifecycle::Failed);
        let snapshot = handle.snapshot();
        if settled != Lifecycle::Running {
            let mut reason = snapshot
                .state
                .last_error
                .unwrap_or_else(|| format!("it did not start within {} s", startup.as_secs()));
            let tail = handle.stderr_tail();
            if !tail.is_empty() && !reason.contains(tail.last().map_or("", String::as_str)) {
                reason.push_str("\nits last lines on stderr:\n");
                reason.push_str(&tail[tail.len().saturating_sub(10)..].join("\n"));
            }
            return Err(reason);
        }
        let descriptors = handle.descriptors();
        let ui = descriptors
            .tools
            .iter()
            .find_map(|tool| tool.ui_resource_uri.clone());
        Ok(ProbeResult {
            has_ui: ui.is_some(),
            ui_resource_uri: ui,
            tools: descriptors.tools.len(),
            server_info: snapshot.server_info,
        })
    }
    .await;
    supervisor.shutdown().await;
    result
}
