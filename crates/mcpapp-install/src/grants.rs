//! Grants: what the operator allows an app beyond the default sandbox, recorded where the
//! gateway reads them, the operator's configuration file (`McpApps.Entries.<id>.Isolation`),
//! never the app's folder (which the app's publisher wrote).
//!
//! [`GrantsFile::check`] edits the file's text in memory and reads the result as the gateway
//! would, so a grant the gateway refuses (the configuration file, its state, an apps' folder,
//! `/`, the home folder's dot-files) is refused before anything is written, with the gateway's
//! own words. [`GrantsFile::record`] then writes it atomically (a temporary file beside it,
//! the file's mode kept, a rename), so a running gateway's reload sees the old file or the new
//! one, never half of one, and applies the grant.

use std::path::{Path, PathBuf};

use mcpapp_discovery::{ConfigError, ConfigFile, Discovery};
use mcpapp_manifest::{McpAppManifest, quoted};

use crate::config_edit::{Edited, add_grants};
use crate::error::InstallError;
use crate::permissions::Permission;

/// How many times [`GrantsFile::record`] starts again when the file changes under it.
const ATTEMPTS: usize = 5;

/// The operator's configuration file, as the place where grants are kept.
#[derive(Debug, Clone)]
pub struct GrantsFile {
    path: PathBuf,
    paths: Option<(Vec<String>, PathBuf)>,
}

/// What recording grants changes (or would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantChange {
    /// The grants that were not in the file yet.
    pub added: Vec<Permission>,
    /// What the operator should know about the edit.
    pub notes: Vec<String>,
    text: String,
}

impl GrantsFile {
    /// The configuration file at `path` (JSON with comments, as `--config` takes it).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            paths: None,
        }
    }

    /// Discovery paths that replace the file's, resolved against `cwd` (the gateway's
    /// `--path`), so that checks protect the same folders the gateway does.
    pub fn discovery_paths(mut self, paths: Vec<String>, cwd: PathBuf) -> Self {
        if !paths.is_empty() {
            self.paths = Some((paths, cwd));
        }
        self
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The discovery of the file as it is now.
    ///
    /// # Errors
    /// [`InstallError::GrantConfig`] when it cannot be read or applied.
    pub fn discovery(&self) -> Result<Discovery, InstallError> {
        let text = self.read()?;
        self.build(&text).map_err(|e| self.config_error(&e))
    }

    /// What recording `grants` for app `id` would add, checked as the gateway checks its
    /// configuration; nothing is written.
    ///
    /// # Errors
    /// [`InstallError::GrantRefused`] for a grant the gateway would refuse, and
    /// [`InstallError::GrantConfig`] when the file cannot be read or edited.
    pub fn check(&self, id: &str, grants: &[Permission]) -> Result<GrantChange, InstallError> {
        let text = self.read()?;
        self.edit(&text, id, grants)
    }

    /// The discovery the gateway would build from the file once `grants` for app `id` are
    /// recorded; nothing is written. An install gives it to its probe start
    /// ([`Installer::with_discovery`](crate::Installer::with_discovery)), since grants are
    /// recorded only after the install succeeds.
    ///
    /// # Errors
    /// As [`GrantsFile::check`].
    pub fn discovery_with(
        &self,
        id: &str,
        grants: &[Permission],
    ) -> Result<Discovery, InstallError> {
        let change = self.check(id, grants)?;
        self.build(&change.text).map_err(|e| self.config_error(&e))
    }

    /// Records `grants` for app `id` (see the module documentation); grants already there
    /// are not added again, and a file that would not change is not written.
    ///
    /// # Errors
    /// As [`GrantsFile::check`], and [`InstallError::Io`] when the file cannot be written.
    pub fn record(&self, id: &str, grants: &[Permission]) -> Result<GrantChange, InstallError> {
        // Written through a link to where it leads: a link replaced by a file would no longer
        // be the operator's shared configuration.
        let real = std::fs::canonicalize(&self.path).map_err(InstallError::io(&self.path))?;
        for _ in 0..ATTEMPTS {
            let text = self.read()?;
            let change = self.edit(&text, id, grants)?;
            if change.added.is_empty() {
                return Ok(change);
            }
            // Someone else's edit since the file was read is not overwritten: read it again.
            if replace_if_unchanged(&real, &text, &change.text)? {
                return Ok(change);
            }
        }
        Err(InstallError::GrantConfig {
            path: self.path.clone(),
            reason: "the file kept changing while the grants were recorded; try again".to_owned(),
        })
    }

    fn read(&self) -> Result<String, InstallError> {
        std::fs::read_to_string(&self.path).map_err(|e| InstallError::GrantConfig {
            path: self.path.clone(),
            reason: format!("cannot read it: {e}"),
        })
    }

    fn edit(
        &self,
        text: &str,
        id: &str,
        grants: &[Permission],
    ) -> Result<GrantChange, InstallError> {
        let config_error = |reason: String| InstallError::GrantConfig {
            path: self.path.clone(),
            reason,
        };
        let current = ConfigFile::from_text(&self.path, text.to_owned())
            .mcp_apps()
            .map_err(|e| self.config_error(&e))?
            .value;
        let global = current.isolation.network.map(|n| n.0).unwrap_or_default();
        let Edited { text, added, notes } =
            add_grants(text, id, grants, &global).map_err(config_error)?;
        if !added.is_empty() {
            self.build(&text).map_err(|e| match e {
                ConfigError::Grant {
                    setting,
                    value,
                    reason,
                    ..
                } => {
                    let grant = added
                        .iter()
                        .find(|g| matches!(g, Permission::Read(p) | Permission::Write(p) if *p == value))
                        .map_or_else(|| value.clone(), ToString::to_string);
                    InstallError::GrantRefused {
                        grant,
                        reason: format!("McpApps.{setting} {} {reason}", quoted(&value, '"')),
                    }
                }
                other => self.config_error(&other),
            })?;
        }
        Ok(GrantChange { added, notes, text })
    }

    /// The discovery the gateway would build from `text`.
    fn build(&self, text: &str) -> Result<Discovery, ConfigError> {
        let file = ConfigFile::from_text(&self.path, text.to_owned());
        let section = file.mcp_apps()?;
        let builder = Discovery::builder(section.value).config_file(&file);
        let builder = match &self.paths {
            Some((paths, cwd)) => builder.discovery_paths(paths.clone(), cwd),
            None => builder,
        };
        builder.build()
    }

    fn config_error(&self, err: &ConfigError) -> InstallError {
        InstallError::GrantConfig {
            path: self.path.clone(),
            reason: err.to_string(),
        }
    }
}

/// Writes `new` to `path` through a temporary file with `path`'s mode and a rename, unless
/// the file no longer holds `old`; returns whether it wrote.
fn replace_if_unchanged(path: &Path, old: &str, new: &str) -> Result<bool, InstallError> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.grants.tmp", std::process::id()));
    let permissions = std::fs::metadata(path)
        .map_err(InstallError::io(path))?
        .permissions();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        // Created with the file's mode, so that a configuration holding a token is never
        // readable by others, not even for a moment.
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(permissions.mode() & 0o7777);
    }
    let written = (|| {
        let mut file = options.open(&temp)?;
        file.write_all(new.as_bytes())?;
        file.sync_all()?;
        std::fs::set_permissions(&temp, permissions.clone())?;
        if std::fs::read_to_string(path)? != old {
            return Ok(false);
        }
        std::fs::rename(&temp, path)?;
        Ok(true)
    })();
    if !matches!(written, Ok(true)) {
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(InstallError::io(path))
}

/// The requests among `requested` that `discovery`'s configuration does not grant app `id`,
/// each with discovery's message (which names the setting that would grant it).
pub fn ungranted(
    discovery: &Discovery,
    id: &str,
    requested: &[Permission],
) -> Vec<(Permission, String)> {
    requested
        .iter()
        .filter_map(|permission| {
            let manifest = McpAppManifest {
                permissions: permission.as_request(),
                ..McpAppManifest::default()
            };
            let messages = discovery.ungranted_permissions(id, &manifest);
            (!messages.is_empty()).then(|| (permission.clone(), messages.join("; ")))
        })
        .collect()
}

/// The JSON to add to a configuration file by hand to grant `grants` to app `id`.
pub fn grants_snippet(id: &str, grants: &[Permission]) -> String {
    let empty = "{\n  \"McpApps\": {}\n}\n";
    let global = mcpapp_manifest::NetworkAccess::None;
    match add_grants(empty, id, grants, &global) {
        Ok(edited) => edited.text,
        Err(_) => empty.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snippet_is_the_whole_path_to_the_grants() {
        let grants: Vec<Permission> = ["write=/srv/notes", "net=api.example.com:443"]
            .iter()
            .map(|g| g.parse().unwrap())
            .collect();
        expect_test::expect![[r#"
            {
              "McpApps": {
                "Entries": {
                  "notes": {
                    "Isolation": {
                      "Write": ["/srv/notes"],
                      "Network": {
                        "Hosts": ["api.example.com:443"]
                      }
                    }
                  }
                }
              }
            }
        "#]]
        .assert_eq(&grants_snippet("notes", &grants));
    }
}
