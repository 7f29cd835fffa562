//! Reading a configuration file (`appsettings.json` style) from disk.

use std::path::{Path, PathBuf};

use mcpapp_manifest::{ConfigDocument, ConfigSection, McpAppsConfig};

use crate::bounded::{Bounded, read_bounded};
use crate::error::ConfigError;
use crate::report::Diagnostic;

/// Configuration files larger than this are refused. Real ones are a few kilobytes; the limit
/// only keeps a wrong path (a log file, a disk image) from being read into memory whole.
pub(crate) const MAX_CONFIG_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A configuration file read into memory. Sections are read from it on demand, so the
/// gateway and other layers can each bind their own.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    dir: PathBuf,
    text: String,
}

/// A section read from a [`ConfigFile`], with diagnostics about it (unknown keys and the
/// like) that name the file.
#[derive(Debug, Clone)]
pub struct LoadedSection<T> {
    /// The section's value.
    pub value: T,
    /// What was noticed while reading it.
    pub diagnostics: Vec<Diagnostic>,
}

impl ConfigFile {
    /// Reads `path`. Relative discovery paths in it will resolve against its folder.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read or is not UTF-8,
    /// [`ConfigError::TooLarge`] when it has more than 16 MiB, and
    /// [`ConfigError::Parse`] when it is not a JSON object.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let absolute = crate::paths::absolute(path);
        let read_error = |source| ConfigError::Read {
            path: absolute.clone(),
            source,
        };
        // The file is opened as given, so `--config /dev/stdin` keeps working; the bound holds
        // whatever it is.
        let file = std::fs::File::open(&absolute).map_err(read_error)?;
        let bytes = match read_bounded(file, MAX_CONFIG_FILE_BYTES).map_err(read_error)? {
            Bounded::Read(bytes) => bytes,
            Bounded::TooLarge => {
                return Err(ConfigError::TooLarge {
                    path: absolute,
                    limit: MAX_CONFIG_FILE_BYTES,
                });
            }
        };
        let text = String::from_utf8(bytes).map_err(|e| {
            read_error(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the file is not valid UTF-8 (at byte {})",
                    e.utf8_error().valid_up_to()
                ),
            ))
        })?;
        let file = Self::from_text(&absolute, text);
        // Fail early on malformed JSON rather than on the first section read.
        ConfigDocument::parse(&file.text).map_err(|source| ConfigError::Parse {
            path: file.path.clone(),
            source,
        })?;
        Ok(file)
    }

    /// Wraps text that claims to come from `path`, without touching the disk.
    pub fn from_text(path: &Path, text: String) -> Self {
        let path = crate::paths::absolute(path);
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| path.clone());
        Self { path, dir, text }
    }

    /// The file's absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder holding the file: the base for relative discovery paths.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads the `McpApps` section (at the top level or under `OpenClaw`).
    ///
    /// # Errors
    /// [`ConfigError::Parse`] when the file is malformed or a value has the wrong type.
    pub fn mcp_apps(&self) -> Result<LoadedSection<McpAppsConfig>, ConfigError> {
        let document = self.document()?;
        let section = document
            .mcp_apps()
            .map_err(|source| self.parse_error(source))?;
        Ok(self.loaded(section))
    }

    /// Reads any other section by name, case-insensitively, at the top level or under
    /// `OpenClaw`; a missing section gives `T::default()`.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] when the file is malformed or a value has the wrong type.
    pub fn section<T: ConfigSection>(&self, name: &str) -> Result<LoadedSection<T>, ConfigError> {
        let document = self.document()?;
        let section = document
            .section::<T>(name)
            .map_err(|source| self.parse_error(source))?;
        Ok(self.loaded(section))
    }

    /// Where the value at `path` inside the `McpApps` section is written (keys compared
    /// case-insensitively, array elements by index: `["Isolation", "Write", "0"]`).
    pub fn mcp_apps_position(&self, path: &[&str]) -> Option<mcpapp_manifest::Position> {
        ConfigDocument::parse(&self.text)
            .ok()?
            .value_position(mcpapp_manifest::SECTION_NAME, path)
    }

    fn document(&self) -> Result<ConfigDocument<'_>, ConfigError> {
        ConfigDocument::parse(&self.text).map_err(|source| self.parse_error(source))
    }

    fn parse_error(&self, source: mcpapp_manifest::ParseError) -> ConfigError {
        ConfigError::Parse {
            path: self.path.clone(),
            source,
        }
    }

    fn loaded<T>(&self, section: mcpapp_manifest::ParsedSection<T>) -> LoadedSection<T> {
        LoadedSection {
            value: section.value,
            diagnostics: section
                .findings
                .iter()
                .map(|finding| Diagnostic::from_finding(&self.path, finding))
                .collect(),
        }
    }
}
