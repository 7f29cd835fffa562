//! Errors that make a configuration unusable. Everything else a scan finds is a
//! [`Diagnostic`](crate::Diagnostic).

use std::path::PathBuf;

use mcpapp_manifest::{ParseError, Position, quoted};

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
    /// A sandbox grant (`Isolation.Read`, `Write`, `Execute`, or `StateDirectory`) cannot be
    /// resolved, or would expose what the sandbox protects.
    #[error(
        "{}McpApps.{setting} {} {reason}",
        location(file.as_deref(), *position),
        quoted(.value, '"')
    )]
    Grant {
        /// The configuration file, when there is one.
        file: Option<PathBuf>,
        /// Where the value is written, when known.
        position: Option<Position>,
        /// The setting under `McpApps`, such as `Entries.notes.Isolation.Write[0]`.
        setting: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
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

/// `path:line:column: `, or as much of it as is known.
fn location(file: Option<&std::path::Path>, position: Option<Position>) -> String {
    match (file, position) {
        (Some(file), Some(p)) => format!("{}:{}:{}: ", file.display(), p.line, p.column),
        (Some(file), None) => format!("{}: ", file.display()),
        (None, _) => String::new(),
    }
}
