//! The gateway's secret store: one JSON file, readable and writable only by the gateway's
//! user (mode 0600 in a 0700 folder), outside every discovery path, holding each installed
//! app's secret values under the app's id and folder.
//!
//! A manifest refers to a value as `secret:NAME`; the supervisor asks the store (through
//! [`SecretResolver`]) when the app starts, with the app's id and folder. A value is given
//! only when both match what was stored: another app, or a manifest that claims the id from
//! another folder, gets nothing. Writes are atomic (a temporary file renamed over the store)
//! and serialised by a lock file, so an install and a running gateway never see half a store.
//!
//! This store is generic (names to values per app); other parts of the gateway that keep
//! credentials could use it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use mcpapp_manifest::{McpAppsConfig, SecretResolver, SecretUnavailable};
use serde::{Deserialize, Serialize};

use crate::error::InstallError;

/// The prefix of the names under which raw secret inputs are kept (so `update` can render a
/// new version's values from them); the manifest never refers to these.
pub(crate) const INPUT_PREFIX: &str = "input.";

/// One app's secrets.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppSecrets {
    /// The app's folder (canonical) the values belong to.
    pub folder: PathBuf,
    /// Names to values.
    pub values: BTreeMap<String, String>,
}

impl std::fmt::Debug for AppSecrets {
    // Values stay out of debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppSecrets")
            .field("folder", &self.folder)
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    #[serde(default)]
    apps: BTreeMap<String, AppSecrets>,
}

/// The secret store (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretStore {
    path: PathBuf,
}

/// The default file: `mcpapp/secrets.json` under `$XDG_STATE_HOME`, else `~/.local/state`.
pub(crate) fn default_secrets_file() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into()))
                .join(".local/state")
        });
    state.join("mcpapp").join("secrets.json")
}

impl SecretStore {
    /// The store in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The store `McpApps.SecretsFile` names (relative to `config_dir`), else the default.
    pub fn for_config(config: &McpAppsConfig, config_dir: &Path) -> Self {
        match config.secrets_file.as_deref().map(str::trim) {
            Some(file) if !file.is_empty() => Self::new(absolute(&config_dir.join(file))),
            _ => Self::new(default_secrets_file()),
        }
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, reason: impl Into<String>) -> InstallError {
        InstallError::Secrets {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// Refuses a store inside a discovery path: secrets must never be in a scanned tree.
    ///
    /// # Errors
    /// [`InstallError::Secrets`] naming the discovery path.
    pub fn check_outside(&self, roots: &[PathBuf]) -> Result<(), InstallError> {
        let store = absolute(&self.path);
        for root in roots {
            let root = absolute(root);
            if store.starts_with(&root) {
                return Err(self.error(format!(
                    "it is inside the discovery path {}; secrets must be kept outside every discovery path (set McpApps.SecretsFile)",
                    root.display()
                )));
            }
        }
        Ok(())
    }

    fn read(&self) -> Result<StoreFile, InstallError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StoreFile {
                    version: 1,
                    apps: BTreeMap::new(),
                });
            }
            Err(e) => return Err(self.error(e.to_string())),
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&self.path)
                .map_err(|e| self.error(e.to_string()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(self.error(format!(
                    "its mode is {:o}: other users may read it; make it readable by its owner only (chmod 600)",
                    mode & 0o777
                )));
            }
        }
        // The store's own format; an error never quotes its text (values are secrets).
        serde_json::from_str(&text).map_err(|e| {
            self.error(format!(
                "it is not a secret store (line {}, column {})",
                e.line(),
                e.column()
            ))
        })
    }

    fn write(&self, store: &StoreFile) -> Result<(), InstallError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| self.error(e.to_string()))?;
        let temp = dir.join(format!(
            ".{}.{}.tmp",
            self.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        let text = serde_json::to_string_pretty(store).map_err(|e| self.error(e.to_string()))?;
        let result = (|| {
            let mut file = private_file(&temp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result.map_err(|e| self.error(e.to_string()))
    }

    /// Runs `change` on the store under its lock and writes the result.
    fn update<T>(&self, change: impl FnOnce(&mut StoreFile) -> T) -> Result<T, InstallError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| self.error(e.to_string()))?;
        let lock_path = self.path.with_extension("lock");
        let lock = private_file_keep(&lock_path).map_err(|e| self.error(e.to_string()))?;
        lock.lock()
            .map_err(|e| self.error(format!("cannot lock it: {e}")))?;
        let mut store = self.read()?;
        let out = change(&mut store);
        store.version = 1;
        self.write(&store)?;
        Ok(out)
    }

    /// Replaces app `id`'s secrets with `values`, bound to `folder`; returns what it had, to
    /// put back with [`SecretStore::restore`] if the install fails.
    ///
    /// # Errors
    /// [`InstallError::Secrets`] when the store cannot be read or written.
    pub fn replace(
        &self,
        id: &str,
        folder: &Path,
        values: BTreeMap<String, String>,
    ) -> Result<Option<AppSecrets>, InstallError> {
        let folder = canonical(folder);
        self.update(|store| {
            if values.is_empty() {
                store.apps.remove(id)
            } else {
                store
                    .apps
                    .insert(id.to_owned(), AppSecrets { folder, values })
            }
        })
    }

    /// Puts back what [`SecretStore::replace`] or [`SecretStore::remove`] returned.
    ///
    /// # Errors
    /// [`InstallError::Secrets`] when the store cannot be read or written.
    pub fn restore(&self, id: &str, previous: Option<AppSecrets>) -> Result<(), InstallError> {
        self.update(|store| match previous {
            Some(previous) => {
                store.apps.insert(id.to_owned(), previous);
            }
            None => {
                store.apps.remove(id);
            }
        })
    }

    /// Forgets app `id`'s secrets; returns them.
    ///
    /// # Errors
    /// [`InstallError::Secrets`] when the store cannot be read or written.
    pub fn remove(&self, id: &str) -> Result<Option<AppSecrets>, InstallError> {
        if !self.path.exists() {
            return Ok(None);
        }
        self.update(|store| store.apps.remove(id))
    }

    /// App `id`'s secrets, if they belong to `folder`.
    ///
    /// # Errors
    /// [`InstallError::Secrets`] when the store cannot be read.
    pub fn get(&self, id: &str, folder: &Path) -> Result<BTreeMap<String, String>, InstallError> {
        let store = self.read()?;
        let folder = canonical(folder);
        Ok(store
            .apps
            .get(id)
            .filter(|app| app.folder == folder)
            .map(|app| app.values.clone())
            .unwrap_or_default())
    }

    /// The names (never the values) of app `id`'s secrets.
    ///
    /// # Errors
    /// [`InstallError::Secrets`] when the store cannot be read.
    pub fn names(&self, id: &str) -> Result<Vec<String>, InstallError> {
        Ok(self
            .read()?
            .apps
            .get(id)
            .map(|app| app.values.keys().cloned().collect())
            .unwrap_or_default())
    }
}

impl SecretResolver for SecretStore {
    fn resolve(&self, app: &str, root: &Path, name: &str) -> Result<String, SecretUnavailable> {
        let store = self.read().map_err(|e| SecretUnavailable(e.to_string()))?;
        let Some(secrets) = store.apps.get(app) else {
            return Err(SecretUnavailable(format!(
                "app {app} has no secrets in {}; set them with `mcpapp-gateway install --set`",
                self.path.display()
            )));
        };
        if secrets.folder != canonical(root) {
            return Err(SecretUnavailable(format!(
                "the secrets of app {app} in {} belong to the app in {}, not to the one in {}",
                self.path.display(),
                secrets.folder.display(),
                root.display()
            )));
        }
        if name.starts_with(INPUT_PREFIX) {
            return Err(SecretUnavailable(format!(
                "app {app} has no secret {name} a manifest may use"
            )));
        }
        secrets.values.get(name).cloned().ok_or_else(|| {
            SecretUnavailable(format!(
                "app {app} has no secret {name} in {}",
                self.path.display()
            ))
        })
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| absolute(path))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

fn private_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let _ = std::fs::remove_file(path);
    private_options().create_new(true).open(path)
}

fn private_file_keep(path: &Path) -> std::io::Result<std::fs::File> {
    private_options().create(true).truncate(false).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_resolve_only_for_their_app_and_folder() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("apps/a");
        std::fs::create_dir_all(&app).unwrap();
        let store = SecretStore::new(dir.path().join("state/secrets.json"));
        let values = BTreeMap::from([
            ("TOKEN".to_owned(), "s3cret".to_owned()),
            ("input.token".to_owned(), "s3cret".to_owned()),
        ]);
        assert!(store.replace("a", &app, values).unwrap().is_none());
        assert_eq!(store.resolve("a", &app, "TOKEN").unwrap(), "s3cret");
        assert!(store.resolve("a", &app, "input.token").is_err());
        let other = store.resolve("b", &app, "TOKEN").unwrap_err();
        assert!(!other.to_string().contains("s3cret"));
        let elsewhere = dir.path().join("apps/evil");
        std::fs::create_dir_all(&elsewhere).unwrap();
        assert!(store.resolve("a", &elsewhere, "TOKEN").is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(store.path()), 0o600);
            assert_eq!(mode(store.path().parent().unwrap()), 0o700);
            // A store others can read is refused.
            std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(
                store
                    .resolve("a", &app, "TOKEN")
                    .unwrap_err()
                    .0
                    .contains("chmod 600")
            );
            std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let previous = store.remove("a").unwrap();
        assert!(store.resolve("a", &app, "TOKEN").is_err());
        store.restore("a", previous).unwrap();
        assert_eq!(store.get("a", &app).unwrap()["TOKEN"], "s3cret");
        assert!(
            store
                .check_outside(&[dir.path().join("state")])
                .unwrap_err()
                .to_string()
                .contains("inside the discovery path")
        );
        assert!(store.check_outside(&[dir.path().join("apps")]).is_ok());
    }
}
