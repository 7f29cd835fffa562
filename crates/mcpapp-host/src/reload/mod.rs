//! Reloading: one path from "something may have changed" to the supervisor's reload by
//! difference, shared by `POST /apps/reload` and the file watcher (`watch.rs`).
//!
//! A reload reads the configuration file again (when the gateway was given one), scans the
//! discovery paths, keeps the last good version of any app whose manifest is now broken
//! (`plan::keep_running`), hands the result to [`Supervisor::reload`], and tells
//! `/apps/events` what it did. A configuration file that cannot be read or applied is a
//! diagnostic, and the last good configuration stays in force. Reloads run one at a time.

pub(crate) mod plan;
pub(crate) mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpapp_discovery::{ConfigError, ConfigFile, Diagnostic, Discovery, DiscoveryReport};
use mcpapp_manifest::{McpAppsConfig, Severity};
use mcpapp_supervisor::Supervisor;
use serde::Serialize;
use tracing::{info, warn};

use crate::app_events::AppEvents;
use crate::config::GatewaySettings;
use plan::{Kept, Targets, keep_running};

/// Where the gateway's configuration comes from, so that it can be read again: an optional
/// file, and discovery paths given on the command line that replace the file's.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    file: Option<PathBuf>,
    paths: Vec<String>,
    cwd: PathBuf,
}

/// A configuration as read by [`ConfigSource::load`].
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadedConfig {
    /// A ready discovery.
    pub discovery: Discovery,
    /// What was noticed while reading the configuration.
    pub diagnostics: Vec<Diagnostic>,
    /// The `Gateway` section (defaults without a file).
    pub gateway: GatewaySettings,
}

impl ConfigSource {
    /// Configuration from `file` (if any); `paths`, when not empty, replace its discovery
    /// paths and resolve against `cwd`, as a relative `file` does.
    pub fn new(file: Option<PathBuf>, paths: Vec<String>, cwd: PathBuf) -> Self {
        Self { file, paths, cwd }
    }

    /// The configuration file, as given (messages name it so).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The configuration file, absolute (what is watched).
    fn absolute_file(&self) -> Option<PathBuf> {
        self.file.as_ref().map(|f| {
            if f.is_absolute() {
                f.clone()
            } else {
                self.cwd.join(f)
            }
        })
    }

    /// Reads the configuration and builds the discovery.
    ///
    /// Without a file, MCP Apps are enabled and `./mcpapps` is scanned: someone running the
    /// gateway by hand wants it to do something. A file keeps the original module's default
    /// of `Enabled: false`, and says so in a diagnostic when the key is missing.
    ///
    /// # Errors
    /// [`ConfigError`] when the file cannot be read or parsed, or its settings cannot be
    /// applied.
    pub fn load(&self) -> Result<LoadedConfig, ConfigError> {
        let (builder, diagnostics, gateway) = match &self.file {
            Some(path) => {
                let file = ConfigFile::read(path)?;
                let section = file.mcp_apps()?;
                let gateway = file.section::<GatewaySettings>("Gateway")?;
                let builder = Discovery::builder(section.value).config_file(&file);
                let mut diagnostics = section.diagnostics;
                diagnostics.extend(gateway.diagnostics);
                (builder, diagnostics, gateway.value)
            }
            None => {
                let config = McpAppsConfig {
                    enabled: true,
                    ..McpAppsConfig::default()
                };
                (
                    Discovery::builder(config).base_dir(&self.cwd),
                    Vec::new(),
                    GatewaySettings::default(),
                )
            }
        };
        let builder = if self.paths.is_empty() {
            builder
        } else {
            builder.discovery_paths(self.paths.clone(), &self.cwd)
        };
        Ok(LoadedConfig {
            discovery: builder.build()?,
            diagnostics,
            gateway,
        })
    }
}

/// What started a reload (named in its `/apps/events` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Trigger {
    /// `POST /apps/reload`.
    Api,
    /// The file watcher.
    Watch,
}

/// What a reload did: the wire shape of `POST /apps/reload` and of the `reload` event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReloadOutcome {
    pub(crate) trigger: Trigger,
    /// Whether the configuration file was read again (and could be).
    pub(crate) config_reloaded: bool,
    pub(crate) added: Vec<String>,
    pub(crate) removed: Vec<String>,
    pub(crate) changed: Vec<String>,
    pub(crate) unchanged: Vec<String>,
    /// Apps left running as they were because their manifest is broken.
    pub(crate) kept: Vec<String>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// What a reload works from, replaced as reloads succeed.
struct Current {
    discovery: Discovery,
    /// The `Gateway` section last read, to say when it changed (it applies on restart).
    gateway: Option<GatewaySettings>,
    /// The report last given to the supervisor.
    last_good: DiscoveryReport,
}

/// Runs reloads, one at a time. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Reloader {
    inner: Arc<Inner>,
}

struct Inner {
    supervisor: Supervisor,
    source: Option<ConfigSource>,
    events: AppEvents,
    current: tokio::sync::Mutex<Current>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

impl Reloader {
    pub(crate) fn new(
        supervisor: Supervisor,
        discovery: Discovery,
        source: Option<ConfigSource>,
        events: AppEvents,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                supervisor,
                source,
                events,
                current: tokio::sync::Mutex::new(Current {
                    discovery,
                    gateway: None,
                    last_good: DiscoveryReport::default(),
                }),
            }),
        }
    }

    /// Records what the gateway started with: the report the supervisor loaded, and the
    /// `Gateway` section in force.
    pub(crate) async fn started_with(&self, report: DiscoveryReport, gateway: GatewaySettings) {
        let mut current = self.inner.current.lock().await;
        current.last_good = report;
        current.gateway = Some(gateway);
    }

    /// What the watcher should watch now.
    pub(crate) async fn targets(&self) -> Targets {
        let current = self.inner.current.lock().await;
        Targets {
            roots: current.discovery.roots(),
            config: self
                .inner
                .source
                .as_ref()
                .and_then(ConfigSource::absolute_file),
        }
    }

    /// Reads the configuration again when `config` (and there is a file), scans, and applies
    /// the difference.
    pub(crate) async fn reload(&self, trigger: Trigger, config: bool) -> ReloadOutcome {
        let mut current = self.inner.current.lock().await;
        let mut diagnostics = Vec::new();
        let mut config_reloaded = false;
        if let Some(source) = self.inner.source.as_ref().filter(|_| config) {
            let source = source.clone();
            match tokio::task::spawn_blocking(move || source.load()).await {
                Ok(Ok(loaded)) => {
                    config_reloaded = true;
                    diagnostics.extend(loaded.diagnostics);
                    let changed = current
                        .gateway
                        .as_ref()
                        .map(|g| g.changed_keys(&loaded.gateway))
                        .unwrap_or_default();
                    if !changed.is_empty() {
                        diagnostics.push(Diagnostic {
                            path: self
                                .inner
                                .source
                                .as_ref()
                                .and_then(|s| s.file().map(Path::to_path_buf)),
                            line: None,
                            column: None,
                            severity: Severity::Warning,
                            message: gateway_changed_message(&changed),
                        });
                    }
                    current.gateway = Some(loaded.gateway);
                    current.discovery = loaded.discovery;
                }
                Ok(Err(err)) => {
                    warn!("the configuration was not reloaded, the last good one stays: {err}");
                    diagnostics.push(config_diagnostic(&err, self.inner.source.as_ref()));
                }
                Err(err) => {
                    warn!("reading the configuration did not finish: {err}");
                }
            }
        }
        let discovery = current.discovery.clone();
        let scanned = match tokio::task::spawn_blocking(move || discovery.scan()).await {
            Ok(report) => report,
            Err(err) => {
                // Without a scan nothing is known to have changed: leave every app alone.
                warn!("discovery did not finish: {err}");
                current.last_good.clone()
            }
        };
        let (report, kept) = keep_running(&current.last_good, scanned);
        for Kept { app_id, manifest } in &kept {
            warn!(app = %app_id, manifest = %manifest.display(), "manifest is broken; the app keeps running as it was");
        }
        // The configuration in force (new or not) goes along: an app whose supervision or
        // inherited environment it changed restarts like an app whose manifest changed.
        let summary = self
            .inner
            .supervisor
            .reload_with(current.discovery.config(), &report)
            .await;
        diagnostics.extend(report.diagnostics.iter().cloned());
        current.last_good = report;
        let outcome = ReloadOutcome {
            trigger,
            config_reloaded,
            added: summary.added,
            removed: summary.removed,
            changed: summary.changed,
            unchanged: summary.unchanged,
            kept: kept.into_iter().map(|k| k.app_id).collect(),
            diagnostics,
        };
        info!(
            trigger = ?trigger,
            added = outcome.added.len(),
            removed = outcome.removed.len(),
            changed = outcome.changed.len(),
            kept = outcome.kept.len(),
            "reload applied"
        );
        // Published while the lock is held, so reload events come in the order of reloads.
        self.inner.events.reloaded(&outcome);
        outcome
    }
}

/// The warning for a `Gateway` section that changed: which keys, never their values (a
/// token is a secret).
fn gateway_changed_message(keys: &[&str]) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("Gateway.{k}")).collect();
    format!(
        "{} changed; the Gateway section applies when the gateway is restarted",
        keys.join(", ")
    )
}

/// A configuration error as a diagnostic on the configuration file, with the position when
/// the error has one.
fn config_diagnostic(err: &ConfigError, source: Option<&ConfigSource>) -> Diagnostic {
    // A parse error names its own file and position; the diagnostic carries them apart.
    let (path, position, detail) = match err {
        ConfigError::Parse { path, source } => {
            (Some(path.clone()), source.position(), source.detail())
        }
        _ => (
            source.and_then(|s| s.file().map(Path::to_path_buf)),
            None,
            err.to_string(),
        ),
    };
    Diagnostic {
        path,
        line: position.map(|p| p.line),
        column: position.map(|p| p.column),
        severity: Severity::Error,
        message: format!("the configuration was not reloaded, the last good one stays: {detail}"),
    }
}
