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
    /// List, inspect, start, stop and restart the apps of a running gateway.
    Apps(AppsArgs),
    /// Call one app's tool through a running gateway and print its result.
    Call(CallArgs),
    /// Make a running gateway scan its discovery paths again and apply the difference.
    Reload(ReloadArgs),
}

/// How to reach a running gateway; shared by `apps`, `call` and `reload`.
///
/// Exit codes: 0 done, 1 the operation failed (or the tool returned an error result),
/// 2 usage error, 3 no gateway answers at the URL, 4 the token is missing or wrong,
/// 5 no such app or tool.
#[derive(Debug, clap::Args)]
pub(crate) struct RemoteArgs {
    /// The running gateway (default: $MCPAPP_URL, else http://127.0.0.1:8787). A token it
    /// needs is read from $MCPAPP_TOKEN.
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) url: Option<String>,

    /// Print JSON for scripts instead of text for people.
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// Seconds to wait for each answer of the gateway (for `call`, for the tool's result).
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30)]
    pub(crate) timeout: u64,
}

#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct AppsArgs {
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,

    /// What to do; `list` when left out.
    #[command(subcommand)]
    pub(crate) action: Option<AppsAction>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AppsAction {
    /// One line per app: id, state, transport, tools, last error (the default).
    List,
    /// One app in detail: state, errors, restarts, server, tools, resources and prompts.
    Show(AppId),
    /// Start a stopped or failed app and wait until it runs or fails.
    Start(ControlArgs),
    /// Stop an app (it stays stopped until started) and wait until it has stopped.
    Stop(ControlArgs),
    /// Stop and start an app again and wait until it runs or fails.
    Restart(ControlArgs),
    /// Print what the app wrote to stderr lately (the gateway keeps the last 200 lines).
    Logs(LogsArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct AppId {
    /// The app's id (as `apps list` shows it).
    pub(crate) id: String,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ControlArgs {
    /// The app's id (as `apps list` shows it).
    pub(crate) id: String,

    /// Return once the gateway has taken the command, without waiting for the app.
    #[arg(long)]
    pub(crate) no_wait: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    /// The app's id (as `apps list` shows it).
    pub(crate) id: String,

    /// The lines of the run before the current one (after a crash or a restart).
    #[arg(long, conflicts_with = "follow")]
    pub(crate) previous: bool,

    /// Keep printing new lines as the app writes them (asks the gateway twice a second),
    /// across restarts, until interrupted.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
}

#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,

    /// The app's id (as `apps list` shows it).
    pub(crate) app: String,

    /// The tool's name as the app lists it (`apps show APP`), or its registered name.
    pub(crate) tool: String,

    /// The arguments as one JSON object, or `-` to read it from stdin (default `{}`).
    #[arg(value_name = "JSON")]
    pub(crate) arguments: Option<String>,
}

#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct ReloadArgs {
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// The exit codes of the commands that talk to a running gateway, for their `--help`.
const EXIT_CODES: &str = "\
Exit codes: 0 done; 1 the operation failed or the tool returned an error result; 2 usage error;
3 no gateway answers at the URL; 4 the token (MCPAPP_TOKEN) is missing or wrong; 5 no such app
or tool.";

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
