//! Errors that make a configuration unusable. Everything else a scan finds is a
//! [`Diagnostic`](crate::Diagnostic).

use std::path::PathBuf;

use mcpapp_manifest::{ParseError, quoted};

/// Why discovery cannot run with the configuration it was given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file is not valid JSON, or a value has the wrong type.
    #[error("{}{}: {}", path.display(), source.position().map(|p| format!(":{}:{}", p.line, p.column)).unwrap_or_default(), source.detail())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line and column.
        #[source]
        source: ParseError,
    },
    /// The configuration file is larger than the limit, 16 MiB (real ones are a few kilobytes).
    #[error("configuration file {} is larger than the {limit}-byte limit", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A pattern of `Allow`, `Deny`, `InheritEnvironment` or `AllowManifestEnv` (or of an
    /// entry's list) is not a valid glob.
    #[error("McpApps.{list} pattern {} is not a valid glob: {reason}", quoted(.pattern, '\''))]
    InvalidPattern {
        /// The setting under `McpApps`, such as `Allow` or `Entries.ID.AllowManifestEnv`.
        list: String,
        /// The pattern as written.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },
    /// A setting has a value that cannot be applied.
    #[error("McpApps.{key} {reason}")]
    InvalidSetting {
        /// The key, such as `MaxManifestBytes`.
        key: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
}
