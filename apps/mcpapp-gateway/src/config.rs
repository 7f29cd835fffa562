//! Loading the gateway's configuration from the command line and an optional file.

use mcpapp_discovery::{ConfigError, Diagnostic, Discovery};
use mcpapp_host::{ConfigSource, GatewaySettings};

use crate::cli::ConfigArgs;

/// The configuration a command runs with.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// A ready discovery.
    pub(crate) discovery: Discovery,
    /// What was noticed while reading the configuration.
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// The `Gateway` section (defaults without a file).
    pub(crate) gateway: GatewaySettings,
    /// Where it came from, so that `serve` can read it again on a reload.
    pub(crate) source: ConfigSource,
}

/// Reads `--config` (if any), applies `--path`s, and builds the discovery (see
/// [`ConfigSource::load`] for the defaults without a file).
pub(crate) fn load(args: &ConfigArgs) -> Result<Loaded, ConfigError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let source = ConfigSource::new(args.config.clone(), args.paths.clone(), cwd);
    let loaded = source.load()?;
    Ok(Loaded {
        discovery: loaded.discovery,
        diagnostics: loaded.diagnostics,
        gateway: loaded.gateway,
        source,
    })
}

/// The folder relative settings of the configuration resolve against: the file's, else the
/// current folder.
pub(crate) fn config_dir(args: &ConfigArgs) -> std::path::PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    match &args.config {
        Some(file) => cwd
            .join(file)
            .parent()
            .map_or_else(|| cwd.clone(), std::path::Path::to_path_buf),
        None => cwd,
    }
}

/// The gateway's secret store: `McpApps.SecretsFile`, else the default under the user's
/// state folder.
pub(crate) fn secret_store(loaded: &Loaded, args: &ConfigArgs) -> mcpapp_install::SecretStore {
    mcpapp_install::SecretStore::for_config(loaded.discovery.config(), &config_dir(args))
}

/// The folder of the gateway's OAuth token store: `oauth/` in the gateway's state directory
/// (`McpApps.StateDirectory`, by default `$XDG_STATE_HOME/mcpapp`), which the app sandbox keeps
/// from every app and which lies outside every discovery path; without one (no home folder),
/// `oauth/` beside the secret store.
pub(crate) fn oauth_dir(loaded: &Loaded, args: &ConfigArgs) -> std::path::PathBuf {
    if let Some(state) = loaded.discovery.state_directory() {
        return state.join("oauth");
    }
    let secrets = secret_store(loaded, args);
    secrets.path().parent().map_or_else(
        || std::path::PathBuf::from("oauth"),
        |dir| dir.join("oauth"),
    )
}

/// Where the token store's key comes from: `MCPAPP_OAUTH_KEY` (32 bytes in base64), else the
/// key file in the store's folder (created, mode 0600, when absent).
pub(crate) fn oauth_key(dir: &std::path::Path) -> mcpapp_oauth::KeySource {
    match std::env::var(mcpapp_oauth::KEY_ENV) {
        Ok(key) if !key.trim().is_empty() => {
            mcpapp_oauth::KeySource::Text(mcpapp_oauth::Secret::new(key.trim()))
        }
        _ => mcpapp_oauth::KeySource::File(dir.join(mcpapp_oauth::KEY_FILE_NAME)),
    }
}

/// Opens the OAuth token store (see [`oauth_dir`] and [`oauth_key`]), warning when it had to
/// create its key file.
pub(crate) fn token_store(
    loaded: &Loaded,
    args: &ConfigArgs,
) -> Result<mcpapp_oauth::TokenStore, mcpapp_oauth::StoreError> {
    let dir = oauth_dir(loaded, args);
    let store = mcpapp_oauth::TokenStore::open(&dir, &oauth_key(&dir))?;
    if let Some(created) = store.created_key_file() {
        tracing::warn!(
            "created the OAuth token store's key file {} (mode 0600); back it up with the store, or set {} instead: without it the apps' tokens are lost and they ask to be connected again",
            created.display(),
            mcpapp_oauth::KEY_ENV
        );
    }
    Ok(store)
}

/// Where `install` puts apps: the first `--path`, else the first configured discovery path.
pub(crate) fn apps_dir(
    loaded: &Loaded,
    args: &ConfigArgs,
) -> Result<std::path::PathBuf, ConfigError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    if let Some(first) = args.paths.first() {
        return Ok(cwd.join(first));
    }
    // Resolved as discovery resolves them (`env:`, `raw:`, relative to the file), whether or
    // not MCP Apps are enabled.
    let mut config = loaded.discovery.config().clone();
    config.enabled = true;
    let roots = Discovery::builder(config)
        .base_dir(config_dir(args))
        .build()?
        .roots();
    Ok(roots
        .into_iter()
        .next()
        .unwrap_or_else(|| cwd.join(mcpapp_manifest::DEFAULT_DISCOVERY_PATH)))
}
