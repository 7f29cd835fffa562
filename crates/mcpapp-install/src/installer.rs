//! The [`Installer`]: where apps go, which configuration and secret store apply, and how
//! packages are vendored; and carrying out a [`Plan`]: the folder, the runtime, the secrets,
//! the probe start and, last, the manifest, so that a running gateway (which picks the
//! manifest up through hot reload) never sees a half-installed app. A failure removes what
//! this install wrote and puts back what an update replaced.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpapp_discovery::Discovery;
use mcpapp_manifest::{InstallRecord, MANIFEST_FILE_NAME, McpAppsConfig, RUNTIME_FOLDER_NAME};
use mcpapp_supervisor::Sandbox;

use crate::draft::{Launch, Runtime};
use crate::error::InstallError;
use crate::fetch::Http;
use crate::inputs::Values;
use crate::mcpb::BundleLimits;
use crate::plan::Plan;
use crate::probe::{ProbeResult, Probed, probe};
use crate::registry::{RegistryClient, RegistryEntry};
use crate::secrets::{INPUT_PREFIX, SecretStore};
use crate::server_json::{DEFAULT_NPM_REGISTRY, DEFAULT_PYPI};
use crate::vendor::{self, VendorOptions};

/// How packages are made runnable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Installed into the app's folder (the default): the app starts offline, at once, at
    /// the exact version.
    #[default]
    Vendor,
    /// A runner (`npx -y`, `uvx`) fetches the pinned version when the app starts.
    Run,
}

/// Reports progress: steps and the package managers' output, one line at a time.
pub type Progress = dyn Fn(&str) + Send + Sync;

/// Configures an [`Installer`]. Create one with [`Installer::builder`].
#[derive(Debug)]
pub struct InstallerBuilder {
    apps_dir: PathBuf,
    secrets: SecretStore,
    config: McpAppsConfig,
    discovery: Option<Discovery>,
    mode: Mode,
    vendor: VendorOptions,
    probe: bool,
    sandbox: Option<Arc<Sandbox>>,
    npm_registry: String,
    pypi: String,
    limits: BundleLimits,
}

impl InstallerBuilder {
    /// The operator's `McpApps` configuration: its entries apply to the probe start, its
    /// registries to registry names.
    pub fn config(mut self, config: McpAppsConfig) -> Self {
        self.config = config;
        self
    }

    /// The discovery whose paths hold apps (ids must be unique across all of them, and
    /// `installed` lists apps from all of them). Without one, only the apps folder counts.
    pub fn discovery(mut self, discovery: Discovery) -> Self {
        self.discovery = Some(discovery);
        self
    }

    /// Vendor (the default) or run mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// How package managers run (install scripts, caches).
    pub fn vendor_options(mut self, options: VendorOptions) -> Self {
        self.vendor = options;
        self
    }

    /// Whether to start the app once after installing, to find its UI (on by default).
    pub fn probe(mut self, probe: bool) -> Self {
        self.probe = probe;
        self
    }

    /// The sandbox the probe start runs the app in: the gateway's (see `mcpapp_sandbox`),
    /// so that the freshly installed app, untrusted code, is confined by the operator's
    /// isolation settings exactly as `serve` confines it. Without one the probe runs stdio
    /// apps unconfined, which only a host without a sandbox of its own should do.
    pub fn sandbox(mut self, sandbox: impl Into<Arc<Sandbox>>) -> Self {
        self.sandbox = Some(sandbox.into());
        self
    }

    /// The npm registry for `npm:` sources (default `https://registry.npmjs.org`).
    pub fn npm_registry(mut self, url: impl Into<String>) -> Self {
        self.npm_registry = url.into();
        self
    }

    /// The PyPI base for `pypi:` sources (default `https://pypi.org`).
    pub fn pypi(mut self, url: impl Into<String>) -> Self {
        self.pypi = url.into();
        self
    }

    /// Size limits for bundles.
    pub fn bundle_limits(mut self, limits: BundleLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Builds the installer.
    ///
    /// # Errors
    /// [`InstallError::Secrets`] when the secret store is inside a discovery path, and
    /// [`InstallError::Fetch`] when no HTTP client can be made.
    pub fn build(self) -> Result<Installer, InstallError> {
        let mut roots = vec![self.apps_dir.clone()];
        if let Some(discovery) = &self.discovery {
            roots.extend(discovery.roots());
        }
        self.secrets.check_outside(&roots)?;
        Ok(Installer {
            inner: Arc::new(Inner {
                apps_dir: std::path::absolute(&self.apps_dir).unwrap_or(self.apps_dir),
                secrets: self.secrets,
                config: self.config,
                discovery: self.discovery,
                mode: self.mode,
                vendor: self.vendor,
                probe: self.probe,
                sandbox: self.sandbox,
                npm_registry: self.npm_registry,
                pypi: self.pypi,
                limits: self.limits,
                http: Http::new()?,
            }),
        })
    }
}

/// Installs, lists, updates and removes apps (see the crate documentation). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Installer {
    inner: Arc<Inner>,
}

#[derive(Debug, Clone)]
struct Inner {
    apps_dir: PathBuf,
    secrets: SecretStore,
    config: McpAppsConfig,
    discovery: Option<Discovery>,
    mode: Mode,
    vendor: VendorOptions,
    probe: bool,
    sandbox: Option<Arc<Sandbox>>,
    npm_registry: String,
    pypi: String,
    limits: BundleLimits,
    http: Http,
}

/// What an install or update did.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The app's id.
    pub id: String,
    /// Its folder.
    pub folder: PathBuf,
    /// Its manifest.
    pub manifest_path: PathBuf,
    /// The version now installed.
    pub version: String,
    /// The version it replaced, for an update.
    pub previous_version: Option<String>,
    /// What the probe start found (none without a probe).
    pub probe: Option<ProbeResult>,
    /// The names of the secrets kept for it in the store.
    pub secret_names: Vec<String>,
    /// The permissions its manifest requests.
    pub requested: Vec<crate::Permission>,
    /// The requests the configuration the installer was built with does not grant, each as
    /// discovery reports it (naming the setting that would grant it): until they are granted,
    /// the app is invalid and does not run. Empty for an installer built without a
    /// [`Discovery`](InstallerBuilder::discovery).
    pub ungranted: Vec<String>,
}

impl Installer {
    /// An installer that puts apps into `apps_dir` and secrets into `secrets`.
    pub fn builder(apps_dir: impl Into<PathBuf>, secrets: SecretStore) -> InstallerBuilder {
        InstallerBuilder {
            apps_dir: apps_dir.into(),
            secrets,
            config: McpAppsConfig::default(),
            discovery: None,
            mode: Mode::Vendor,
            vendor: VendorOptions::default(),
            probe: true,
            sandbox: None,
            npm_registry: DEFAULT_NPM_REGISTRY.to_owned(),
            pypi: DEFAULT_PYPI.to_owned(),
            limits: BundleLimits::default(),
        }
    }

    /// This installer with its probe starts in `sandbox` (see
    /// [`InstallerBuilder::sandbox`]): a gateway hands its own sandbox, with its listeners'
    /// ports protected, to the installer it serves once those ports are known.
    #[must_use]
    pub fn with_sandbox(&self, sandbox: impl Into<Arc<Sandbox>>) -> Self {
        let mut inner = (*self.inner).clone();
        inner.sandbox = Some(sandbox.into());
        Self {
            inner: Arc::new(inner),
        }
    }

    /// This installer with `discovery` (and its configuration) in place of its own: the
    /// configuration as it will be once grants given at install time are recorded (see
    /// [`GrantsFile::discovery_with`](crate::GrantsFile::discovery_with)), so that the probe
    /// start gets them.
    #[must_use]
    pub fn with_discovery(&self, discovery: Discovery) -> Self {
        let mut inner = (*self.inner).clone();
        inner.config = discovery.config().clone();
        inner.discovery = Some(discovery);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Where new apps go.
    pub fn apps_dir(&self) -> &Path {
        &self.inner.apps_dir
    }

    /// The secret store.
    pub fn secrets(&self) -> &SecretStore {
        &self.inner.secrets
    }

    /// The configuration in force.
    pub fn config(&self) -> &McpAppsConfig {
        &self.inner.config
    }

    pub(crate) fn discovery(&self) -> Option<&Discovery> {
        self.inner.discovery.as_ref()
    }

    pub(crate) fn http(&self) -> &Http {
        &self.inner.http
    }

    pub(crate) fn mode(&self) -> Mode {
        self.inner.mode
    }

    pub(crate) fn vendor_options(&self) -> &VendorOptions {
        &self.inner.vendor
    }

    pub(crate) fn npm_registry(&self) -> &str {
        &self.inner.npm_registry
    }

    pub(crate) fn pypi(&self) -> &str {
        &self.inner.pypi
    }

    pub(crate) fn limits(&self) -> BundleLimits {
        self.inner.limits
    }

    /// Clients of the configured registries (`McpApps.Registries`), in order.
    ///
    /// # Errors
    /// [`InstallError::Fetch`] when no HTTP client can be made.
    pub fn registries(&self) -> Result<Vec<RegistryClient>, InstallError> {
        self.inner
            .config
            .registries
            .iter()
            .map(|r| RegistryClient::new(&r.name, &r.url))
            .collect()
    }

    /// Finds server `name` in the configured registries, in order; a deleted one is refused,
    /// a deprecated one is noted.
    pub(crate) async fn registry_entry(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<(RegistryEntry, Vec<String>), InstallError> {
        let registries = self.registries()?;
        if registries.is_empty() {
            return Err(InstallError::BadSource {
                source_text: name.to_owned(),
                reason: "it looks like a registry name, but no registry is configured (McpApps.Registries)".to_owned(),
            });
        }
        let mut last = None;
        for registry in registries {
            match registry.get(name, version).await {
                Ok(entry) => {
                    let mut notes = Vec::new();
                    match entry.status.as_str() {
                        "deleted" => {
                            return Err(InstallError::NotFound {
                                what: format!("an installable {name} {}", entry.version),
                                registry: format!("registry {}", entry.registry),
                                hint: "; the registry marks it deleted".to_owned(),
                            });
                        }
                        "deprecated" => notes.push(format!(
                            "registry {} marks {name} {} deprecated",
                            entry.registry, entry.version
                        )),
                        _ => {}
                    }
                    return Ok((entry, notes));
                }
                Err(err @ InstallError::NotFound { .. }) => last = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| InstallError::NotFound {
            what: name.to_owned(),
            registry: "the configured registries".to_owned(),
            hint: String::new(),
        }))
    }

    /// Where an app with id `id` already is (any app, installed by us or not).
    pub(crate) fn id_in_use(&self, id: &str) -> Option<String> {
        let folder = self.apps_dir().join(id);
        if folder.exists() {
            return Some(folder.display().to_string());
        }
        let report = self.discovery()?.scan();
        report
            .app(id)
            .map(|app| app.state.manifest_path.display().to_string())
    }

    /// Carries out `plan` with `values`: see the module documentation.
    ///
    /// # Errors
    /// Any [`InstallError`]; what was written is removed, and an update's previous state is
    /// kept.
    pub async fn install(
        &self,
        plan: &Plan,
        values: &Values,
        progress: &Progress,
    ) -> Result<Installed, InstallError> {
        let fresh = plan.update_of.is_none();
        let folder = &plan.folder;
        if fresh {
            if let Some(place) = self.id_in_use(&plan.id) {
                return Err(InstallError::IdTaken {
                    id: plan.id.clone(),
                    where_: place,
                });
            }
            std::fs::create_dir_all(self.apps_dir()).map_err(InstallError::io(self.apps_dir()))?;
            std::fs::create_dir(folder).map_err(InstallError::io(folder))?;
        }
        let runtime_rel = plan.runtime_dir();
        let runtime = folder.join(&runtime_rel);
        let new_runtime = !runtime.exists();
        let mut undo = Undo {
            folder: fresh.then(|| folder.clone()),
            runtime: (!fresh && new_runtime).then(|| runtime.clone()),
            secrets: None,
            store: &self.inner.secrets,
            id: &plan.id,
        };
        let result = self
            .apply(plan, values, progress, new_runtime, &mut undo)
            .await;
        match result {
            Ok(installed) => {
                undo.forget();
                Ok(installed)
            }
            Err(err) => {
                undo.run();
                Err(err)
            }
        }
    }

    async fn apply(
        &self,
        plan: &Plan,
        values: &Values,
        progress: &Progress,
        new_runtime: bool,
        undo: &mut Undo<'_>,
    ) -> Result<Installed, InstallError> {
        let folder = &plan.folder;
        let runtime_rel = plan.runtime_dir();
        let runtime = folder.join(&runtime_rel);
        let mut draft = plan.draft.clone();
        let program = if new_runtime {
            self.vendor(plan, &runtime, progress).await?
        } else {
            progress(&format!(
                "{} is already in {}",
                plan.version,
                runtime.display()
            ));
            existing_program(&plan.draft, &runtime, plan.update_of.as_ref())
        };
        if let (Some(program), Launch::Stdio { command, .. }) = (program, &mut draft.launch) {
            *command = program.display().to_string();
        }
        let rendered = draft
            .render(&plan.id, &runtime_rel, values, &plan.extra_args)
            .map_err(InstallError::Unsupported)?;
        let mut manifest = rendered.manifest;
        let requested: Vec<crate::Permission> = plan
            .permission_requests(values)
            .into_iter()
            .map(|r| r.permission)
            .collect();
        manifest.permissions = crate::permissions::request_of(&requested);
        let mut secrets = rendered.secrets;
        manifest.install = Some(self.install_record(plan, values, &mut secrets));
        let secret_names: Vec<String> = secrets
            .keys()
            .filter(|k| !k.starts_with(INPUT_PREFIX))
            .cloned()
            .collect();
        if !secret_names.is_empty() {
            progress("keeping the secret values in the gateway's secret store");
        }
        undo.secrets = Some(self.inner.secrets.replace(&plan.id, folder, secrets)?);
        if let Some((name, text)) = &plan.descriptor {
            write_atomic(&folder.join(name), text.as_bytes())?;
        }
        let probed = if self.inner.probe {
            self.probe(plan, &mut manifest, progress).await?
        } else {
            None
        };
        let manifest_path = folder.join(MANIFEST_FILE_NAME);
        write_atomic(&manifest_path, manifest.to_json_pretty().as_bytes())?;
        let ungranted = self
            .discovery()
            .map(|d| d.ungranted_permissions(&plan.id, &manifest))
            .unwrap_or_default();
        let previous_version = plan.update_of.as_ref().map(|a| a.record.version.clone());
        // The old version's runtime is no longer used by anything.
        if let Some(previous) = &plan.update_of {
            let old = folder
                .join(RUNTIME_FOLDER_NAME)
                .join(crate::plan::version_folder(&previous.record.version));
            if old != runtime && old.exists() {
                let _ = std::fs::remove_dir_all(&old);
            }
        }
        progress(&format!(
            "installed {} {} in {}",
            plan.id,
            plan.version,
            folder.display()
        ));
        Ok(Installed {
            id: plan.id.clone(),
            folder: folder.clone(),
            manifest_path,
            version: plan.version.clone(),
            previous_version,
            probe: probed,
            secret_names,
            requested,
            ungranted,
        })
    }

    /// The probe start of `manifest` (see `probe.rs`); records its UI in the manifest.
    async fn probe(
        &self,
        plan: &Plan,
        manifest: &mut mcpapp_manifest::McpAppManifest,
        progress: &Progress,
    ) -> Result<Option<ProbeResult>, InstallError> {
        let failed = |reason: String| InstallError::Probe {
            id: plan.id.clone(),
            reason,
        };
        // Without a discovery of its own, the installer's configuration alone decides.
        let discovery = match self.discovery() {
            Some(discovery) => discovery.clone(),
            None => Discovery::builder(self.inner.config.clone())
                .build()
                .map_err(|e| failed(e.to_string()))?,
        };
        let probed = probe(
            manifest,
            &plan.folder,
            &discovery,
            self.inner.sandbox.clone(),
            Arc::new(self.inner.secrets.clone()),
            progress,
        )
        .await
        .map_err(failed)?;
        match probed {
            Probed::Ran(found) => {
                manifest.has_ui = found.has_ui;
                manifest.ui_resource_uri = found.ui_resource_uri.clone();
                Ok(Some(found))
            }
            Probed::NotRunnable(reason) => {
                progress(&format!(
                    "not started: the gateway would not run it as configured now ({reason}); its views are found when it first runs"
                ));
                Ok(None)
            }
        }
    }

    /// The manifest's record of where the app came from and the values it was given; secret
    /// values go to `secrets` instead.
    fn install_record(
        &self,
        plan: &Plan,
        values: &Values,
        secrets: &mut std::collections::BTreeMap<String, String>,
    ) -> InstallRecord {
        let mut record = InstallRecord {
            source: plan.source_kind.to_owned(),
            requested: plan.requested.clone(),
            identifier: plan.identifier.clone(),
            version: plan.version.clone(),
            integrity: plan.integrity.clone(),
            registry: plan.registry.clone(),
            package_type: plan.package_type.clone(),
            descriptor: plan.descriptor.as_ref().map(|(name, _)| name.clone()),
            mode: Some(match self.mode() {
                Mode::Vendor => "vendor".to_owned(),
                Mode::Run => "run".to_owned(),
            }),
            extra_arguments: plan.extra_args.clone(),
            installed_at: Some(mcpapp_manifest::Timestamp::now().to_string()),
            installer: Some(concat!("mcpapp-install ", env!("CARGO_PKG_VERSION")).to_owned()),
            ..InstallRecord::default()
        };
        for input in &plan.inputs {
            let Some(value) = values.get(&input.key) else {
                continue;
            };
            if input.secret {
                record.secret_inputs.push(input.key.clone());
                secrets.insert(format!("{INPUT_PREFIX}{}", input.key), value.join("\n"));
            } else {
                record.inputs.insert(input.key.clone(), value.join("\n"));
            }
        }
        record
    }

    /// Puts the plan's runtime into `runtime`; returns the program's path relative to it.
    async fn vendor(
        &self,
        plan: &Plan,
        runtime: &Path,
        progress: &Progress,
    ) -> Result<Option<PathBuf>, InstallError> {
        match &plan.draft.runtime {
            Runtime::None => Ok(None),
            Runtime::Npm {
                name,
                version,
                registry,
            } => {
                let Launch::Stdio { command, .. } = &plan.draft.launch else {
                    return Ok(None);
                };
                let bin = command.rsplit('/').next().unwrap_or(command);
                progress(&format!("installing npm package {name}@{version}"));
                vendor::npm_install(
                    runtime,
                    name,
                    version,
                    bin,
                    registry.as_deref(),
                    &self.inner.vendor,
                    progress,
                )
                .await
                .map(Some)
            }
            Runtime::Pypi {
                name,
                version,
                index,
            } => {
                progress(&format!("installing PyPI project {name}=={version}"));
                vendor::pypi_install(
                    runtime,
                    name,
                    version,
                    index.as_deref(),
                    &self.inner.vendor,
                    progress,
                )
                .await
                .map(Some)
            }
            Runtime::Bundle(bundle) => {
                if let Some(program) = bundle.needs_program() {
                    vendor::require(
                        program,
                        &format!("the {} bundle {}", bundle.manifest.server.kind, bundle.file),
                        if program == "node" {
                            vendor::NODE_HINT
                        } else {
                            vendor::PYTHON_HINT
                        },
                    )?;
                }
                progress(&format!("unpacking {}", bundle.file));
                std::fs::create_dir_all(runtime).map_err(InstallError::io(runtime))?;
                bundle.unpack(&runtime.join("bundle"))?;
                Ok(None)
            }
        }
    }

    /// Values for `plan`'s inputs: for an update or a change of inputs, the values the app
    /// already has (those of inputs the new version still has), with `given` over them; then
    /// `prompter` and the defaults, as [`resolve`](crate::resolve) does.
    ///
    /// # Errors
    /// [`InputError`](crate::InputError) as [`resolve`](crate::resolve).
    pub fn resolve_values(
        &self,
        plan: &Plan,
        given: Vec<(String, String)>,
        prompter: Option<&mut dyn crate::Prompter>,
    ) -> Result<Values, crate::InputError> {
        let mut all: Vec<(String, String)> = match &plan.update_of {
            Some(app) => self
                .kept_values(app)
                .into_iter()
                .filter(|(k, _)| !given.iter().any(|(g, _)| g == k))
                .filter(|(k, _)| plan.inputs.iter().any(|i| &i.key == k))
                .collect(),
            None => Vec::new(),
        };
        all.extend(given);
        crate::resolve(&plan.inputs, &all, prompter)
    }

    /// The values an installed app was given, to keep them on an update: the inputs in its
    /// manifest and the secret inputs in the store.
    pub fn kept_values(&self, app: &crate::installed::InstalledApp) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = app
            .record
            .inputs
            .iter()
            .flat_map(|(k, v)| v.split('\n').map(move |v| (k.clone(), v.to_owned())))
            .collect();
        let stored = self
            .inner
            .secrets
            .get(&app.id, &app.folder)
            .unwrap_or_default();
        for key in &app.record.secret_inputs {
            if let Some(value) = stored.get(&format!("{INPUT_PREFIX}{key}")) {
                out.extend(value.split('\n').map(|v| (key.clone(), v.to_owned())));
            }
        }
        out
    }
}

/// The program of an already installed runtime (same version): the one the manifest runs.
fn existing_program(
    draft: &crate::draft::Draft,
    runtime: &Path,
    app: Option<&crate::installed::InstalledApp>,
) -> Option<PathBuf> {
    if !matches!(draft.runtime, Runtime::Npm { .. } | Runtime::Pypi { .. }) {
        return None;
    }
    let command = app?.manifest.command.clone()?;
    let full = Path::new(&command);
    let folder = runtime.parent()?.parent()?;
    full.strip_prefix(runtime.strip_prefix(folder).ok()?)
        .ok()
        .map(Path::to_path_buf)
}

/// What to take back when an install fails.
struct Undo<'a> {
    folder: Option<PathBuf>,
    runtime: Option<PathBuf>,
    secrets: Option<Option<crate::secrets::AppSecrets>>,
    store: &'a SecretStore,
    id: &'a str,
}

impl Undo<'_> {
    fn forget(&mut self) {
        self.folder = None;
        self.runtime = None;
        self.secrets = None;
    }

    fn run(&mut self) {
        if let Some(previous) = self.secrets.take() {
            let _ = self.store.restore(self.id, previous);
        }
        if let Some(folder) = self.folder.take() {
            let _ = std::fs::remove_dir_all(folder);
        }
        if let Some(runtime) = self.runtime.take() {
            let _ = std::fs::remove_dir_all(runtime);
        }
    }
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a
/// reader (a scan, a reload) sees the old file or the new one, never half of one.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(InstallError::io(path))
}
