//! Where an installed app came from (`install` in the manifest) and how a manifest refers to
//! a secret the gateway keeps for it (`secret:NAME` values).
//!
//! `mcpapp-gateway install` writes both; discovery and the supervisor only read them. The
//! record lets `installed` and `update` work from the app's folder alone, and secret
//! references keep secret values out of the folder: the value lives in the gateway's secret
//! store, keyed by the app, and is resolved when the app starts.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The folder of an app's folder where `install` puts what it vendors (npm packages, a
/// Python virtual environment, an unpacked bundle). Discovery never scans inside a folder of
/// this name: it holds thousands of files and other packages' files, never the app's manifest.
pub const RUNTIME_FOLDER_NAME: &str = ".mcpapp-runtime";

/// The prefix of a value that names a secret of the app's own (`secret:API_KEY`), in
/// `environment`, `headers` and `arguments`.
pub const SECRET_PREFIX: &str = "secret:";

/// The secret name in `value` when it is a whole `secret:NAME` reference with a usable name
/// (1 to 128 of `A-Z a-z 0-9 _ . -`).
///
/// ```
/// use mcpapp_manifest::secret_reference;
/// assert_eq!(secret_reference("secret:API_KEY"), Some("API_KEY"));
/// assert_eq!(secret_reference("Bearer secret:x"), None);
/// assert_eq!(secret_reference("secret:"), None);
/// ```
pub fn secret_reference(value: &str) -> Option<&str> {
    let name = value.strip_prefix(SECRET_PREFIX)?;
    is_secret_name(name).then_some(name)
}

/// Whether `name` can name a secret: 1 to 128 of `A-Z a-z 0-9 _ . -`.
pub fn is_secret_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Why a secret reference could not be resolved. The message names the app and the secret,
/// never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SecretUnavailable(pub String);

/// Resolves the `secret:NAME` references of an app when it starts. The gateway's secret store
/// implements it (`mcpapp-install`); the supervisor calls it where `env:` values resolve.
///
/// An implementation must resolve a name only for the app it was stored for: the same `app`
/// id *and* the same app folder `root`, so that another manifest (another app, or one that
/// claims the id from another folder) cannot read it.
pub trait SecretResolver: Send + Sync + std::fmt::Debug {
    /// The value of secret `name` of app `app`, whose manifest is in `root`.
    ///
    /// # Errors
    /// [`SecretUnavailable`] when there is no such secret for this app and folder, or the
    /// store cannot be read.
    fn resolve(&self, app: &str, root: &Path, name: &str) -> Result<String, SecretUnavailable>;
}

/// Where an installed app came from, written by `mcpapp-gateway install` as the manifest's
/// `install` object. The gateway does not interpret it when running the app; `installed`,
/// `update` and `uninstall` read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallRecord {
    /// The kind of source: `npm`, `pypi`, `server.json`, `registry`, `mcpb` or `remote`.
    pub source: String,
    /// What was asked for, as given to `install` (a package name, a file, a URL, a registry
    /// name).
    pub requested: String,
    /// The package, bundle or server the app was made from: an npm or PyPI name, a bundle
    /// URL, a registry server name.
    pub identifier: String,
    /// The exact version installed.
    pub version: String,
    /// A hash of what was installed: npm's `dist.integrity` (`sha512-…`), a PyPI file's or a
    /// bundle's `sha256-…` (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<String>,
    /// The registry it came from (an MCP Registry, npm or PyPI base URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// For a `server.json` or registry source: which package (`npm`, `pypi`, `mcpb`) or
    /// remote was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_type: Option<String>,
    /// The original descriptor kept beside the manifest (`server.json`, `mcpb-manifest.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<String>,
    /// `vendor` (the package installed into the app folder) or `run` (a runner such as
    /// `npx` fetches it at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The values of the inputs that are not secret, by input key, so `update` keeps them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    /// The keys of the secret inputs; their values are in the gateway's secret store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_inputs: Vec<String>,
    /// Arguments given after `--` on the command line, appended to the package's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_arguments: Vec<String>,
    /// When it was installed (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_at: Option<String>,
    /// The installer's name and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer: Option<String>,
}
