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
