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
    /// Install an app from npm, PyPI, a server.json, an MCPB bundle, a registry or a URL.
    Install(InstallArgs),
    /// List the apps `install` put in place, and whether newer versions exist.
    Installed(InstalledArgs),
    /// Update installed apps (all, or one), keeping their inputs and secrets.
    Update(UpdateArgs),
    /// Remove an installed app: its folder and its secrets.
    Uninstall(UninstallArgs),
    /// Grant an app permissions beyond the default sandbox, recorded in --config.
    Grant(GrantArgs),
}

/// `install`'s arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = INSTALL_HELP)]
pub(crate) struct InstallArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,

    /// What to install: npm:PACKAGE[@VERSION], pypi:PACKAGE[==VERSION], a server.json file or
    /// https URL, an .mcpb file (or URL with --sha256), a registry name (io.github.owner/name
    /// [@VERSION], from McpApps.Registries), or an https://…/mcp endpoint.
    pub(crate) source: String,

    /// The app's id (default: from the package or server name).
    #[arg(long)]
    pub(crate) id: Option<String>,

    /// A value for an input (repeatable; repeat a key for several values).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,

    /// Which entry of a server.json to install: npm, pypi, mcpb or remote (default: the first
    /// usable, in that order).
    #[arg(long, value_name = "KIND")]
    pub(crate) package: Option<String>,

    /// The SHA-256 (hex) a bundle must have; needed for a bundle URL.
    #[arg(long, value_name = "HEX")]
    pub(crate) sha256: Option<String>,

    /// Grant the app a permission beyond the default sandbox (repeatable): read=PATH,
    /// write=PATH, net=PORT, net=HOST:PORT or net=all. Recorded in --config under
    /// McpApps.Entries.<id>.Isolation; refused, with nothing written, when the gateway would
    /// refuse it.
    #[arg(long = "grant", value_name = "KIND=VALUE")]
    pub(crate) grant: Vec<String>,

    /// Grant every permission the app requests that the configuration does not grant yet
    /// (listed before anything is installed).
    #[arg(long)]
    pub(crate) grant_requested: bool,

    /// Agree without being asked (needed without a terminal). Grants nothing that is not
    /// given with --grant or --grant-requested.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,

    /// Show what would be installed and run, and stop.
    #[arg(long)]
    pub(crate) dry_run: bool,

    #[command(flatten)]
    pub(crate) how: HowArgs,

    /// Arguments for the package's program, after its own (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub(crate) args: Vec<String>,
}

/// How packages are installed; shared by `install` and `update`.
#[derive(Debug, clap::Args)]
pub(crate) struct HowArgs {
    /// `vendor`: install the package into the app folder (the default); `run`: write an
    /// `npx -y` / `uvx` command that fetches the pinned version at start.
    #[arg(long, value_name = "MODE", default_value = "vendor")]
    pub(crate) mode: String,

    /// Let npm run the packages' install scripts.
    #[arg(long)]
    pub(crate) allow_scripts: bool,

    /// Do not start the app once after installing (its UI is then not detected).
    #[arg(long)]
    pub(crate) no_probe: bool,

    /// A folder for the package managers' download caches (default: $MCPAPP_INSTALL_CACHE,
    /// else their own).
    #[arg(long, value_name = "DIR")]
    pub(crate) cache: Option<PathBuf>,
}

const INSTALL_HELP: &str = "\
Apps go into the first --path, else the first discovery path of --config. Secret inputs are kept
in the gateway's secret store (McpApps.SecretsFile), never in the app folder. A running gateway
picks the app up through hot reload.

Permissions: a stdio app runs in the gateway's sandbox. What it requests beyond it (the folders
and files its path inputs name, the publisher's ToolHive profile) is written into its manifest
and listed before installing; the operator grants it with --grant, --grant-requested or at the
prompt (on a terminal without --yes), recorded in --config, never in the app's folder. An app
whose requests are not granted is installed but does not run until they are: `mcpapp-gateway
grant ID --requested --config FILE` grants them later.

Exit codes: 0 done; 1 failed; 2 usage or configuration (a refused grant included).";

const GRANT_HELP: &str = "\
Grants are recorded in --config under McpApps.Entries.<id>.Isolation (Read, Write, Network),
merged with what is there, the rest of the file kept byte for byte; a running gateway applies
them on its next reload (it watches the file). A grant the gateway would refuse (the
configuration's folder, its state directory, an apps' folder, /, the home folder's dot-files) is
refused and nothing is written. Without grants on the command line, a terminal asks about each
request that is not granted yet. To take a grant back, remove it from the file.

Exit codes: 0 done; 1 failed; 2 usage or configuration (a refused grant included).";

/// `grant`'s arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = GRANT_HELP)]
pub(crate) struct GrantArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,

    /// The app (any discovered app, installed or written by hand).
    pub(crate) id: String,

    /// What to grant: read=PATH, write=PATH, net=PORT, net=HOST:PORT or net=all.
    #[arg(value_name = "KIND=VALUE")]
    pub(crate) grants: Vec<String>,

    /// Grant every permission the app's manifest requests that is not granted yet.
    #[arg(long)]
    pub(crate) requested: bool,

    /// Do not ask: grant only what the command line names.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
}

/// `installed`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct InstalledArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,

    /// Do not look for newer versions.
    #[arg(long)]
    pub(crate) offline: bool,
}

/// `update`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct UpdateArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,

    /// The app to update (default: every installed app).
    pub(crate) id: Option<String>,

    /// Only show what would change.
    #[arg(long)]
    pub(crate) check: bool,

    /// A new value for an input (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,

    /// Agree without being asked.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,

    #[command(flatten)]
    pub(crate) how: HowArgs,
}

/// `uninstall`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct UninstallArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,

    /// The app to remove.
    pub(crate) id: String,

    /// Agree without being asked.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
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
    /// Connect an HTTP app behind OAuth (or grant it the more access it asks for): print the
    /// authorization URL to open in a browser, then wait until the app runs with its tokens.
    Authorize(AuthorizeArgs),
    /// Revoke and delete an app's OAuth tokens (it then asks to be connected again).
    Disconnect(AppId),
}

#[derive(Debug, clap::Args)]
pub(crate) struct AuthorizeArgs {
    /// The app's id (as `apps list` shows it).
    pub(crate) id: String,

    /// Print the URL and return, without waiting for the app.
    #[arg(long)]
    pub(crate) no_wait: bool,

    /// Seconds to wait for the user to sign in and the app to run (the URL expires after
    /// ten minutes).
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub(crate) wait: u64,
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
