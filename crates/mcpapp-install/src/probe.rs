//! The probe start after an install: the app is started once through a supervisor of its
//! own, exactly as the gateway will start it, and its tools are read: a tool with
//! `_meta.ui.resourceUri` shows that the app has MCP App views, and the first such resource is
//! its primary UI. No other format says this (see the install reference), so asking the app is
//! the only way.
//!
//! "Exactly as the gateway" includes the sandbox: the app is untrusted code, so the manifest
//! goes through the installer's discovery (the operator's entry overrides, environment rules,
//! isolation mode and grants, state directory) and the app starts in the sandbox the
//! installer was given, as `serve` would start it. An app the gateway would not run (requests
//! not granted yet, an entry disabled) is not started at all.
//!
//! The probe runs before the manifest is written, so a running gateway never sees the app
//! until it is known to start.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcpapp_discovery::Discovery;
use mcpapp_manifest::{
    InstallState, Lifecycle, MANIFEST_FILE_NAME, McpAppManifest, SecretResolver, SupervisionConfig,
};
use mcpapp_supervisor::{Sandbox, SupervisionPolicy, Supervisor};

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

/// What became of a probe start.
#[derive(Debug)]
pub(crate) enum Probed {
    /// The app started and listed its tools.
    Ran(ProbeResult),
    /// The gateway would not run the app as it is configured now, so it was not started;
    /// why, in discovery's words (naming the setting).
    NotRunnable(String),
}

/// Starts the app of `manifest` (in `root`) once, as `discovery` resolves it and in
/// `sandbox`, and reads its tools; the app is stopped again before this returns. Errors are
/// the app's (or its sandbox's), with its last stderr lines.
pub(crate) async fn probe(
    manifest: &McpAppManifest,
    root: &Path,
    discovery: &Discovery,
    sandbox: Option<Arc<Sandbox>>,
    secrets: Arc<dyn SecretResolver>,
    progress: &crate::Progress,
) -> Result<Probed, String> {
    let id = manifest.id.clone().unwrap_or_default();
    let report = discovery.resolve_manifest(manifest, &root.join(MANIFEST_FILE_NAME));
    let Some(app) = report.apps.first() else {
        let problems: Vec<String> = report.diagnostics.iter().map(ToString::to_string).collect();
        return Err(problems.join("; "));
    };
    let Some(spec) = &app.spec else {
        return not_runnable(discovery, &id, manifest, &app.state);
    };
    let startup = spec.startup_timeout;
    progress(if sandbox.is_some() {
        "starting the app once, in its sandbox, to see what it offers"
    } else {
        "starting the app once to see what it offers"
    });
    let mut supervisor = Supervisor::builder()
        .config(discovery.config())
        .policy(SupervisionPolicy::from_config(
            &SupervisionConfig {
                auto_restart: Some(false),
                health_check_interval_ms: Some(0),
                shutdown_grace_ms: Some(2000),
                ..SupervisionConfig::default()
            },
            None,
        ))
        .secrets(secrets);
    if let Some(sandbox) = sandbox {
        supervisor = supervisor.sandbox(sandbox);
    }
    let supervisor = supervisor.build();
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
        Ok(Probed::Ran(ProbeResult {
            has_ui: ui.is_some(),
            ui_resource_uri: ui,
            tools: descriptors.tools.len(),
            server_info: snapshot.server_info,
        }))
    }
    .await;
    supervisor.shutdown().await;
    result
}

/// Why the gateway would not run an app discovery did not accept: requests not granted yet
/// (the install goes on, saying so) or a disabled entry; anything else wrong stops the install.
fn not_runnable(
    discovery: &Discovery,
    id: &str,
    manifest: &McpAppManifest,
    state: &InstallState,
) -> Result<Probed, String> {
    let reasons = state.validation_errors.join("; ");
    if state.lifecycle == Lifecycle::Disabled {
        return Ok(Probed::NotRunnable(reasons));
    }
    let ungranted = discovery.ungranted_permissions(id, manifest);
    if !ungranted.is_empty()
        && state
            .validation_errors
            .iter()
            .all(|e| ungranted.contains(e))
    {
        return Ok(Probed::NotRunnable(reasons));
    }
    Err(reasons)
}
