//! Errors that make a configuration unusable. Everything else a scan finds is a
//! [`Diagnostic`](crate::Diagnostic).

use std::path::PathBuf;

use mcpapp_manifest::ParseError;

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
    /// A pattern of `Allow`, `Deny`, `InheritEnvironment` or `AllowManifestEnv` (or of an
    /// entry's list) is not a valid glob.
    #[error("McpApps.{list} pattern '{pattern}' is not a valid glob: {reason}")]
    InvalidPattern {
        /// The setting under `McpApps`, such as `Allow` or `Entries.ID.AllowManifestEnv`.
        list: String,
        /// The pattern as written.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },
}
