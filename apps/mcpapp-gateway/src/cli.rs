//! Command-line arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Discover, validate and host MCP Apps.
#[derive(Debug, Parser)]
#[command(name = "mcpapp-gateway", version, about)]
pub(crate) struct Cli {
    /// Log level for stderr (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, global = true, value_name = "LEVEL")]
    pub(crate) log_level: Option<String>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Scan discovery paths and list the apps found, with their state and problems.
    Discover(DiscoverArgs),
    /// Check manifest files, or every manifest under folders; exit 1 if any is invalid.
    Validate(ValidateArgs),
    /// Print the JSON Schema of the manifest or of the McpApps configuration section.
    Schema(SchemaArgs),
    /// Discover and run apps, and serve the host endpoints until SIGINT or SIGTERM.
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,

    /// Address to listen on (default: Gateway.Bind, else 127.0.0.1:8787); port 0 picks a
    /// free port. The chosen address is printed as `listening on http://ADDR`.
    #[arg(long, value_name = "ADDR")]
    pub(crate) bind: Option<String>,
}

/// Where configuration comes from, shared by commands that discover apps.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    /// Configuration file (JSON with comments) with an `McpApps` section at the top level or
    /// under `OpenClaw`. Without one, apps are enabled and `./mcpapps` is scanned.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Folder to scan instead of the configured discovery paths (repeatable; relative to
    /// the current folder).
    #[arg(long = "path", value_name = "DIR")]
    pub(crate) paths: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DiscoverArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ValidateArgs {
    /// Manifest files, or folders to search for `openclaw.mcpapp.json` files.
    #[arg(required = true, value_name = "PATH")]
    pub(crate) paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SchemaArgs {
    /// Which schema to print.
    #[arg(value_enum, default_value_t = SchemaChoice::Manifest)]
    pub(crate) which: SchemaChoice,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum SchemaChoice {
    /// The `openclaw.mcpapp.json` manifest.
    Manifest,
    /// The `McpApps` configuration section.
    Config,
}
