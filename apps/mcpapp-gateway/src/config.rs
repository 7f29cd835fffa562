//! Loading the gateway's configuration from the command line and an optional file.

use mcpapp_discovery::{ConfigError, ConfigFile, Diagnostic, Discovery};
use mcpapp_host::GatewaySettings;
use mcpapp_manifest::McpAppsConfig;

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
}

/// Reads `--config` (if any), applies `--path`s, and builds the discovery.
///
/// Without a file, MCP Apps are enabled and `./mcpapps` is scanned: someone running the
/// gateway by hand wants it to do something. A file keeps the original module's default of
/// `Enabled: false`, and says so in a diagnostic when the key is missing.
pub(crate) fn load(args: &ConfigArgs) -> Result<Loaded, ConfigError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let (builder, diagnostics, gateway) = match &args.config {
        Some(path) => {
            let file = ConfigFile::read(path)?;
            let section = file.mcp_apps()?;
            let gateway = file.section::<GatewaySettings>("Gateway")?;
            let builder = Discovery::builder(section.value).config_file(&file);
            let mut diagnostics = section.diagnostics;
            diagnostics.extend(gateway.diagnostics);
            (builder, diagnostics, gateway.value)
        }
        None => {
            let config = McpAppsConfig {
                enabled: true,
                ..McpAppsConfig::default()
            };
            (
                Discovery::builder(config).base_dir(&cwd),
                Vec::new(),
                GatewaySettings::default(),
            )
        }
    };
    let builder = if args.paths.is_empty() {
        builder
    } else {
        builder.discovery_paths(args.paths.clone(), &cwd)
    };
    Ok(Loaded {
        discovery: builder.build()?,
        diagnostics,
        gateway,
    })
}
