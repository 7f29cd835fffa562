//! Life after install: the apps `install` put in place (found through their manifests'
//! `install` records, in every discovery path), whether a newer version exists, updates that
//! keep the inputs and secrets, and removal (the manifest first, so a running gateway stops
//! the app, then the folder and the app's secrets).

use std::path::PathBuf;

use mcpapp_manifest::{InstallRecord, Lifecycle, MANIFEST_FILE_NAME, McpAppManifest};
use serde::Serialize;

use crate::error::InstallError;
use crate::installer::Installer;
use crate::plan::{Plan, Request};
use crate::source::Source;

/// An app that `install` put in place.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstalledApp {
    /// Its id.
    pub id: String,
    /// Its folder.
    pub folder: PathBuf,
    /// Its manifest as written.
    #[serde(skip)]
    pub manifest: McpAppManifest,
    /// Where it came from.
    pub record: InstallRecord,
    /// What discovery makes of it (`Validated`, `Disabled`, or `Discovered` when invalid).
    pub lifecycle: Lifecycle,
}

/// What `uninstall` removed.
#[derive(Debug, Clone)]
pub struct Uninstalled {
    /// The app's id.
    pub id: String,
    /// Its folder, now gone.
    pub folder: PathBuf,
    /// How many secrets were forgotten.
    pub secrets: usize,
}

impl Installer {
    /// Every app installed by `install` in the discovery paths (or the apps folder), in
    /// discovery order.
    pub fn installed(&self) -> Vec<InstalledApp> {
        let report = match self.discovery() {
            Some(discovery) => discovery.scan(),
            None => {
                let mut config = self.config().clone();
                config.enabled = true;
                match mcpapp_discovery::Discovery::builder(config)
                    .discovery_paths(vec![self.apps_dir().display().to_string()], ".")
                    .build()
                {
                    Ok(discovery) => discovery.scan(),
                    Err(_) => return Vec::new(),
                }
            }
        };
        report
            .apps
            .into_iter()
            .filter_map(|app| {
                // The manifest as written (not with the entry's overrides), read again.
                let text = std::fs::read_to_string(&app.state.manifest_path).ok()?;
                let manifest = McpAppManifest::parse(&text).ok()?.manifest;
                let record = manifest.install.clone()?;
                Some(InstalledApp {
                    id: manifest.id.clone()?,
                    folder: app.state.root_path.clone(),
                    manifest,
                    record,
                    lifecycle: app.state.lifecycle,
                })
            })
            .collect()
    }

    /// The installed app `id`.
    ///
    /// # Errors
    /// [`InstallError::NotInstalled`].
    pub fn find(&self, id: &str) -> Result<InstalledApp, InstallError> {
        self.installed()
            .into_iter()
            .find(|a| a.id == id)
            .ok_or_else(|| InstallError::NotInstalled(id.to_owned()))
    }

    /// The source to look for newer versions of `app` in (no version: the newest), or why
    /// there is none.
    fn update_source(app: &InstalledApp, version: Option<&str>) -> Result<Source, InstallError> {
        let record = &app.record;
        let version = version.map(str::to_owned);
        Ok(match record.source.as_str() {
            "npm" => Source::Npm {
                name: record.identifier.clone(),
                version,
            },
            "pypi" => Source::Pypi {
                name: record.identifier.clone(),
                version,
            },
            "registry" => Source::Registry {
                name: record.identifier.clone(),
                version,
            },
            "server.json" | "mcpb" => Source::parse(&record.requested, std::path::Path::new("/"))?,
            _ => {
                return Err(InstallError::Unsupported(format!(
                    "app {} is a {} install; it has no versions to update",
                    app.id, record.source
                )));
            }
        })
    }

    /// The plan that updates `id` to `version` (the newest when `None`), keeping its id,
    /// inputs and extra arguments.
    ///
    /// # Errors
    /// [`InstallError::NotInstalled`], or any error of planning.
    pub async fn plan_update(&self, id: &str, version: Option<&str>) -> Result<Plan, InstallError> {
        let app = self.find(id)?;
        let source = Self::update_source(&app, version)?;
        let request = Request {
            id: Some(app.id.clone()),
            package: match app.record.package_type.as_deref() {
                Some(kind) => kind.parse().unwrap_or_default(),
                None => Default::default(),
            },
            sha256: None,
            extra_args: app.record.extra_arguments.clone(),
        };
        let mut plan = self.plan(&source, &request).await?;
        // The source as first given stays the record's.
        plan.requested = app.record.requested.clone();
        plan.source_kind = match app.record.source.as_str() {
            "npm" => "npm",
            "pypi" => "pypi",
            "registry" => "registry",
            "mcpb" => "mcpb",
            _ => "server.json",
        };
        if plan.update_of.is_none() {
            plan.update_of = Some(app);
        }
        Ok(plan)
    }

    /// The newest version of `app` its source offers.
    ///
    /// # Errors
    /// Any error of looking it up.
    pub async fn latest_version(&self, app: &InstalledApp) -> Result<String, InstallError> {
        Ok(self.plan_update(&app.id, None).await?.version)
    }

    /// Removes app `id`: its manifest (a running gateway stops the app), its folder and its
    /// secrets.
    ///
    /// # Errors
    /// [`InstallError::NotInstalled`] for an app `install` did not put in place, or an I/O
    /// error.
    pub fn uninstall(&self, id: &str) -> Result<Uninstalled, InstallError> {
        let app = self.find(id)?;
        let manifest = app.folder.join(MANIFEST_FILE_NAME);
        std::fs::remove_file(&manifest).map_err(InstallError::io(&manifest))?;
        std::fs::remove_dir_all(&app.folder).map_err(InstallError::io(&app.folder))?;
        let secrets = self.secrets().remove(id)?.map_or(0, |s| s.values.len());
        Ok(Uninstalled {
            id: app.id,
            folder: app.folder,
            secrets,
        })
    }
}
