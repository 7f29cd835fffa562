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
