//! The discovery builder and the scan that turns discovery paths into a vetted list of apps.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpapp_manifest::{
    AppSpec, Era, InstallState, Lifecycle, McpAppEntryConfig, McpAppsConfig, ParsedManifest,
    Severity, Transport, closest_match, quoted,
};
use tracing::{debug, info, info_span, warn};

use crate::config_file::ConfigFile;
use crate::env_policy::{self, ManifestEnvPolicy};
use crate::error::ConfigError;
use crate::filter::AppFilter;
use crate::isolation::{self, IsolationPolicy};
use crate::paths::{self, Resolved};
use crate::report::{Diagnostic, DiscoveredApp, DiscoveryReport};
use crate::scan::{self, Found};

/// Looks up an environment variable; injectable so tests never touch the process environment.
type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Configures a [`Discovery`]. Create one with [`Discovery::builder`].
pub struct DiscoveryBuilder {
    config: McpAppsConfig,
    config_file: Option<ConfigFile>,
    config_path: Option<PathBuf>,
    base_dir: Option<PathBuf>,
    paths: Option<(Vec<String>, PathBuf)>,
    env: EnvLookup,
    threads: usize,
}

impl fmt::Debug for DiscoveryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscoveryBuilder")
            .field("config", &self.config)
            .field("config_path", &self.config_path)
            .field("base_dir", &self.base_dir)
            .field("paths", &self.paths)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl DiscoveryBuilder {
    /// Says which file the configuration came from: relative discovery paths then resolve
    /// against its folder, and configuration diagnostics name it.
    pub fn config_file(mut self, file: &ConfigFile) -> Self {
        self.config_path = Some(file.path().to_path_buf());
        self.base_dir = Some(file.dir().to_path_buf());
        self.config_file = Some(file.clone());
        self
    }

    /// The folder relative configured discovery paths resolve against, when the
    /// configuration did not come from a file. Defaults to the current folder.
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = Some(dir.into());
        self
    }

    /// Replaces the configured discovery paths (for example with command-line `--path`s),
    /// resolving relative ones against `base` (for the command line, the current folder).
    pub fn discovery_paths(mut self, paths: Vec<String>, base: impl Into<PathBuf>) -> Self {
        self.paths = Some((paths, base.into()));
        self
    }

    /// How `env:NAME` discovery paths read variables. Defaults to the process environment.
    pub fn env_lookup(
        mut self,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.env = Arc::new(lookup);
        self
    }

    /// Threads for walking folders; 0 (the default) picks one per available core.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Checks the configuration and builds the discovery.
    ///
    /// # Errors
    /// [`ConfigError::InvalidPattern`] when an `Allow`, `Deny` or other pattern is not a valid
    /// glob, [`ConfigError::InvalidSetting`] when `MaxManifestBytes` is 0, and
    /// [`ConfigError::Grant`] when a sandbox grant cannot be resolved or would expose what the
    /// sandbox protects.
    pub fn build(self) -> Result<Discovery, ConfigError> {
        let filter = AppFilter::new(&self.config)?;
        if self.config.max_manifest_bytes == 0 {
            return Err(ConfigError::InvalidSetting {
                key: "MaxManifestBytes",
                reason: "is 0; it must be at least 1 (the default is 1048576)".to_owned(),
            });
        }
        let env_policy = ManifestEnvPolicy::new(&self.config)?;
        let cwd = || paths::absolute(Path::new("."));
        // Relative sandbox grants resolve against the configuration file's folder, even when
        // `--path` replaces the discovery paths.
        let config_base = self.base_dir.as_deref().map_or_else(cwd, paths::absolute);
        let (raw_paths, base) = match self.paths {
            Some((paths, base)) => (paths, paths::absolute(&base)),
            None => (
                self.config.discovery_paths.clone(),
                self.base_dir.map_or_else(cwd, |dir| paths::absolute(&dir)),
            ),
        };
        let roots = raw_paths
            .iter()
            .filter_map(|raw| match paths::resolve(raw, &base, &*self.env) {
                Resolved::Folder(root) => Some(root),
                Resolved::Unusable(_) => None,
            })
            .collect();
        let isolation = IsolationPolicy::new(
            &self.config,
            &isolation::Source {
                file: self.config_file.as_ref(),
                base: &config_base,
                env: &*self.env,
            },
            roots,
        )?;
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(2, usize::from)
        } else {
            self.threads
        };
        Ok(Discovery {
            inner: Arc::new(Inner {
                max_manifest_bytes: self.config.max_manifest_bytes,
                config: self.config,
                config_path: self.config_path,
                raw_paths,
                base,
                env: self.env,
                filter,
                env_policy,
                isolation,
                threads,
            }),
        })
    }
}

/// Scans discovery paths for app manifests and vets what it finds.
///
/// Cheap to clone; [`Discovery::scan`] can run any number of times (each scan reads the
/// folders afresh, which is how a reload sees new apps). Discovery reads files and never
/// starts anything.
#[derive(Clone)]
pub struct Discovery {
    inner: Arc<Inner>,
}

struct Inner {
    config: McpAppsConfig,
    config_path: Option<PathBuf>,
    raw_paths: Vec<String>,
    base: PathBuf,
    env: EnvLookup,
    filter: AppFilter,
    env_policy: ManifestEnvPolicy,
    isolation: IsolationPolicy,
    threads: usize,
    /// `McpApps.MaxManifestBytes`.
    max_manifest_bytes: u64,
}

impl fmt::Debug for Discovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Discovery")
            .field("paths", &self.inner.raw_paths)
            .field("base", &self.inner.base)
            .finish_non_exhaustive()
    }
}

impl Discovery {
    /// Starts configuring a discovery for `config`.
    pub fn builder(config: McpAppsConfig) -> DiscoveryBuilder {
        DiscoveryBuilder {
            config,
            config_file: None,
            config_path: None,
            base_dir: None,
            paths: None,
            env: Arc::new(|name| std::env::var(name).ok()),
            threads: 0,
        }
    }

    /// The configuration this discovery applies.
    pub fn config(&self) -> &McpAppsConfig {
        &self.inner.config
    }

    /// The gateway's state directory (`McpApps.StateDirectory` resolved, else
    /// `$XDG_STATE_HOME/mcpapp` or `~/.local/state/mcpapp`); `None` without a home folder.
    /// Every app's [`AppIsolation`](mcpapp_manifest::AppIsolation) carries it.
    pub fn state_directory(&self) -> Option<&Path> {
        self.inner.isolation.state_directory()
    }

    /// The requests of `manifest`'s `permissions` that this configuration does not grant app
    /// `id`, each as the message a scan reports at the request (naming the setting that would
    /// grant it); empty when everything is granted, when the app's isolation is off, or when
    /// it asks for nothing. `install` uses this to ask for, record and check grants before
    /// the app's manifest exists.
    pub fn ungranted_permissions(
        &self,
        id: &str,
        manifest: &mcpapp_manifest::McpAppManifest,
    ) -> Vec<String> {
        let entry = self.inner.config.entries.get(id);
        match self.inner.isolation.resolve(id, manifest, entry, None) {
            Ok(_) => Vec::new(),
            Err(refusals) => refusals.into_iter().map(|r| r.message).collect(),
        }
    }

    /// The app `manifest` would be if it were the file at `manifest_path` (which need not
    /// exist yet), as a scan finds it: the entry's overrides applied, validated, its
    /// environment references and permission requests checked, its sandbox settled into the
    /// spec, the allow/deny rules applied. `install` starts an app with this before writing
    /// its manifest, so that the probe start gets exactly what the gateway will give it.
    /// Diagnostics carry `manifest_path` with positions in the manifest as
    /// [`McpAppManifest::to_json_pretty`](mcpapp_manifest::McpAppManifest::to_json_pretty)
    /// writes it.
    pub fn resolve_manifest(
        &self,
        manifest: &mcpapp_manifest::McpAppManifest,
        manifest_path: &Path,
    ) -> DiscoveryReport {
        let mut scan = Scan {
            inner: &self.inner,
            report: DiscoveryReport::default(),
            seen_files: HashSet::new(),
            first_by_id: HashMap::new(),
        };
        let text = manifest.to_json_pretty();
        let parsed = mcpapp_manifest::McpAppManifest::parse(&text).map_err(|err| {
            Diagnostic::new(
                Some(manifest_path),
                err.position(),
                Severity::Error,
                format!("invalid manifest, skipped: {}", err.detail()),
            )
        });
        scan.found(Found {
            path: manifest_path.to_path_buf(),
            canonical: manifest_path.to_path_buf(),
            parsed,
        });
        scan.report
    }

    /// The folders (or manifest files) a scan reads, resolved as [`Discovery::scan`] resolves
    /// them, in configured order; empty when MCP Apps are disabled. Unusable paths (an unset
    /// `env:` variable, an empty path) are left out: a scan reports them. A watcher of changes
    /// watches these, whether or not they exist yet.
    pub fn roots(&self) -> Vec<PathBuf> {
        let inner = &*self.inner;
        if !inner.config.enabled {
            return Vec::new();
        }
        inner
            .raw_paths
            .iter()
            .filter_map(|raw| match paths::resolve(raw, &inner.base, &*inner.env) {
                Resolved::Folder(root) => Some(root),
                Resolved::Unusable(_) => None,
            })
            .collect()
    }

    /// Scans every discovery path, in order, and returns the apps found and diagnostics.
    ///
    /// Per app: the manifest is parsed; its entry's overrides are applied; the effective
    /// manifest is validated; a repeated id makes every later app with it invalid; then the
    /// allow/deny rules may disable it. Valid, allowed apps end `Validated` with a spec.
    pub fn scan(&self) -> DiscoveryReport {
        let inner = &*self.inner;
        let span = info_span!("discovery", paths = inner.raw_paths.len());
        let _guard = span.enter();
        let mut scan = Scan {
            inner,
            report: DiscoveryReport::default(),
            seen_files: HashSet::new(),
            first_by_id: HashMap::new(),
        };
        if !inner.config.enabled {
            debug!("MCP Apps are disabled; nothing to scan");
            scan.config_diagnostic(
                Severity::Info,
                "MCP Apps are disabled (McpApps.Enabled is false); nothing was scanned",
            );
            return scan.report;
        }
        if let Some(problem) = inner.filter.semantics_problem() {
            warn!("{problem}");
            scan.config_diagnostic(Severity::Warning, problem);
        }
        for raw in &inner.raw_paths {
            match paths::resolve(raw, &inner.base, &*inner.env) {
                Resolved::Unusable(message) => {
                    warn!("{message}");
                    scan.config_diagnostic(Severity::Warning, message);
                }
                Resolved::Folder(root) => scan.root(&root),
            }
        }
        scan.unmatched_entries();
        info!(
            apps = scan.report.apps.len(),
            runnable = scan.report.runnable().count(),
            "discovery finished"
        );
        scan.report
    }
}

/// The state of one scan while it runs.
struct Scan<'a> {
    inner: &'a Inner,
    report: DiscoveryReport,
    seen_files: HashSet<PathBuf>,
    first_by_id: HashMap<String, PathBuf>,
}

impl Scan<'_> {
    fn config_diagnostic(&mut self, severity: Severity, message: impl Into<String>) {
        let path = self.inner.config_path.as_deref();
        self.report
            .diagnostics
            .push(Diagnostic::new(path, None, severity, message));
    }

    fn root(&mut self, root: &Path) {
        match std::fs::metadata(root) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                debug!(path = %root.display(), "discovery path does not exist");
                self.report.diagnostics.push(Diagnostic::new(
                    Some(root),
                    None,
                    Severity::Debug,
                    "discovery path does not exist",
                ));
                return;
            }
            Err(err) => {
                warn!(path = %root.display(), "cannot read discovery path: {err}");
                self.report.diagnostics.push(Diagnostic::new(
                    Some(root),
                    None,
                    Severity::Warning,
                    format!("cannot read discovery path: {err}"),
                ));
                return;
            }
            Ok(meta) if meta.is_file() => {
                // A discovery path may name one manifest file directly, whatever its name.
                let found = scan::read_manifest(root, self.inner.max_manifest_bytes);
                self.found(found);
                return;
            }
            Ok(meta) if !meta.is_dir() => {
                // A named pipe or a device is never opened: reading it could block the scan.
                let link = std::fs::symlink_metadata(root).is_ok_and(|m| m.is_symlink());
                let problem = scan::not_a_file(root, Some(meta.file_type()), link);
                warn!("{problem}");
                self.report.diagnostics.push(problem);
                return;
            }
            Ok(_) => {}
        }
        info!("Scanning for MCP Apps in: {}", root.display());
        let scanned = scan::scan_root(root, self.inner.threads, self.inner.max_manifest_bytes);
        for problem in &scanned.problems {
            warn!("{problem}");
        }
        self.report.diagnostics.extend(scanned.problems);
        for found in scanned.found {
            self.found(found);
        }
    }

    fn found(&mut self, found: Found) {
        if !self.seen_files.insert(found.canonical.clone()) {
            // Overlapping discovery paths (or links) reach the same file twice; one app.
            self.report.diagnostics.push(Diagnostic::new(
                Some(&found.path),
                None,
                Severity::Debug,
                "manifest already found through another discovery path; counted once",
            ));
            return;
        }
        match found.parsed {
            Err(diagnostic) => {
                warn!("{diagnostic}");
                self.report.diagnostics.push(diagnostic);
            }
            Ok(parsed) => {
                let app = self.app(&found.path, &parsed);
                self.report.apps.push(app);
            }
        }
    }

    fn app(&mut self, path: &Path, parsed: &ParsedManifest) -> DiscoveredApp {
        let root = path.parent().unwrap_or(path).to_path_buf();
        let id = parsed
            .manifest
            .id
            .clone()
            .filter(|id| !id.trim().is_empty());
        let entry: Option<&McpAppEntryConfig> =
            id.as_ref().and_then(|id| self.inner.config.entries.get(id));
        let effective = match entry {
            Some(entry) => parsed.manifest.with_overrides(entry),
            None => parsed.manifest.clone(),
        };
        let mut state = InstallState::new(effective.clone(), path.to_path_buf(), root);
        for finding in &parsed.findings {
            state.warnings.push(finding.to_string());
            self.report
                .diagnostics
                .push(Diagnostic::from_finding(path, finding));
        }

        let mut spec: Option<AppSpec> = match effective.validate() {
            Ok(mut spec) => {
                // A version the manifest names decides the era; without one the app is asked.
                if parsed.field_position("protocolVersion").is_some() {
                    spec.protocol_era = Some(Era::of_version(spec.protocol_version.trim()));
                }
                Some(spec)
            }
            Err(errors) => {
                for error in &errors {
                    let position = parsed
                        .field_position(error.field())
                        .or(Some(parsed.root_position()));
                    self.report.diagnostics.push(Diagnostic::new(
                        Some(path),
                        position,
                        Severity::Error,
                        error.to_string(),
                    ));
                    state.invalidate(error.to_string());
                }
                warn!(
                    path = %path.display(),
                    "McpApp manifest is invalid: {}",
                    state.validation_errors.join("; ")
                );
                None
            }
        };

        if let (Some(id), Some(_)) = (&id, &spec)
            && self.refuse_env(path, parsed, id, entry, &mut state)
        {
            spec = None;
        }

        if let (Some(id), Some(spec_value)) = (&id, spec.as_mut())
            && self.isolate(path, parsed, id, entry, spec_value, &mut state)
        {
            spec = None;
        }

        if let Some(id) = &id
            && !self.claim_id(path, parsed, id, &mut state)
        {
            spec = None;
        }

        if state.is_valid {
            state.transition(Lifecycle::Validated);
            // A valid id is short, but the name and version can be anything.
            info!(
                "Discovered McpApp '{}' ({}) version {} at {}",
                state.id(),
                quoted(state.manifest.display_name(), '"'),
                quoted(&state.manifest.version, '"'),
                path.display()
            );
        }

        if let Some(id) = &id
            && !self.admit(path, id, entry, &mut state)
        {
            spec = None;
        }

        DiscoveredApp { state, spec }
    }

    /// Checks the manifest's environment references against `AllowManifestEnv`; returns
    /// whether any was refused (the app is then invalid, with a diagnostic per reference).
    fn refuse_env(
        &mut self,
        path: &Path,
        parsed: &ParsedManifest,
        id: &str,
        entry: Option<&McpAppEntryConfig>,
        state: &mut InstallState,
    ) -> bool {
        let refused = self.inner.env_policy.refused(id, &parsed.manifest, entry);
        for reference in &refused {
            self.report.diagnostics.push(Diagnostic::new(
                Some(path),
                Some(env_policy::reference_position(parsed, &reference.field)),
                Severity::Error,
                reference.message.clone(),
            ));
            state.invalidate(reference.message.clone());
        }
        if !refused.is_empty() {
            warn!(
                path = %path.display(),
                "McpApp manifest is invalid: {}",
                state.validation_errors.join("; ")
            );
        }
        !refused.is_empty()
    }

    /// Claims `id` for this manifest; returns false (the app is then invalid) when an earlier
    /// manifest of the scan already holds it, since the first one found wins.
    fn claim_id(
        &mut self,
        path: &Path,
        parsed: &ParsedManifest,
        id: &str,
        state: &mut InstallState,
    ) -> bool {
        let Some(first) = self.first_by_id.get(id) else {
            self.first_by_id.insert(id.to_owned(), path.to_path_buf());
            return true;
        };
        let message = format!(
            "duplicate app id {}: already defined by {}; this manifest is ignored",
            quoted(id, '\''),
            first.display()
        );
        warn!(path = %path.display(), "{message}");
        self.report.diagnostics.push(Diagnostic::new(
            Some(path),
            parsed.field_position("id"),
            Severity::Error,
            message.clone(),
        ));
        state.invalidate(message);
        false
    }

    /// Applies the entry's `Enabled` and the allow/deny filter; returns false (the app is then
    /// disabled, with an info diagnostic) when the app must not run.
    fn admit(
        &mut self,
        path: &Path,
        id: &str,
        entry: Option<&McpAppEntryConfig>,
        state: &mut InstallState,
    ) -> bool {
        let enabled = entry.is_none_or(|e| e.enabled);
        let Err(denial) = self.inner.filter.check(id, enabled) else {
            return true;
        };
        if denial.misconfigured {
            warn!("{}", denial.message);
        } else {
            info!("{}", denial.message);
        }
        self.report.diagnostics.push(Diagnostic::new(
            Some(path),
            None,
            Severity::Info,
            denial.message.clone(),
        ));
        state.disable(denial.message);
        false
    }

    /// Settles the sandbox of a valid app into its spec; returns whether its manifest's
    /// request was refused (the app is then invalid, with a diagnostic per refusal).
    fn isolate(
        &mut self,
        path: &Path,
        parsed: &ParsedManifest,
        id: &str,
        entry: Option<&McpAppEntryConfig>,
        spec: &mut AppSpec,
        state: &mut InstallState,
    ) -> bool {
        let request = &parsed.manifest.permissions;
        if spec.launch.transport() == Transport::Http {
            if !request.is_empty() {
                let message = "permissions apply only to stdio apps: an http app runs outside the gateway and is not sandboxed by it";
                state.warnings.push(message.to_owned());
                self.report.diagnostics.push(Diagnostic::new(
                    Some(path),
                    parsed.field_position("permissions"),
                    Severity::Warning,
                    message,
                ));
            }
            return false;
        }
        let root = path.parent().unwrap_or(path);
        let command = match &spec.launch {
            mcpapp_manifest::Launch::Stdio { command, .. } => Some((command.as_str(), root)),
            _ => None,
        };
        match self
            .inner
            .isolation
            .resolve(id, &parsed.manifest, entry, command)
        {
            Ok(isolation) => {
                spec.isolation = isolation;
                false
            }
            Err(refusals) => {
                for refusal in &refusals {
                    self.report.diagnostics.push(Diagnostic::new(
                        Some(path),
                        Some(env_policy::reference_position(parsed, &refusal.field)),
                        Severity::Error,
                        refusal.message.clone(),
                    ));
                    state.invalidate(refusal.message.clone());
                }
                warn!(
                    path = %path.display(),
                    "McpApp manifest is invalid: {}",
                    state.validation_errors.join("; ")
                );
                true
            }
        }
    }

    fn unmatched_entries(&mut self) {
        let ids: Vec<&str> = self.report.apps.iter().map(DiscoveredApp::id).collect();
        let mut messages = Vec::new();
        for key in self.inner.config.entries.keys() {
            if ids.contains(&key.as_str()) {
                continue;
            }
            let hint = match closest_match(key, ids.iter().copied()) {
                Some(near) => format!("; did you mean {}?", quoted(&near, '\'')),
                None => String::new(),
            };
            messages.push(format!(
                "McpApps.Entries has a key {} that matches no discovered app{hint}",
                quoted(key, '\'')
            ));
        }
        for message in messages {
            warn!("{message}");
            self.config_diagnostic(Severity::Warning, message);
        }
    }
}
