//! `loadgen`: the load generator behind `cargo xtask bench proxy`. It is a workspace binary
//! built in release mode like the gateway it measures, so a debug-built client never sets the
//! pace, and it uses rmcp's own client, as an MCP client of the gateway would.
//!
//! ```text
//! loadgen calls  [--clients N] [--calls K] [--warmup W] [--shared] --tool NAME [--args JSON] [--label L] TARGET
//! loadgen inproc [--clients N] [--calls K] [--warmup W] --tool NAME [--args JSON] [--label L] TARGET
//! loadgen chat   [--clients N] [--calls K] [--warmup W] --tool NAME [--args JSON] [--label L] --base URL
//! loadgen spawn  --count N TARGET
//! loadgen floor  [--bind ADDR]
//! TARGET: http URL | stdio PROGRAM [ARGS...]
//! ```
//!
//! - `calls`: N rmcp clients (each its own session; with `--shared`, N callers on one
//!   session) each make W unmeasured calls of the tool, then all start together and each makes
//!   K measured calls one after the other (`calls.rs`).
//! - `inproc`: the gateway's call paths to one app inside this process (`inproc.rs`).
//! - `chat`: `POST /apps/chat` turns of `/call TOOL {json}` against a gateway (`chat.rs`).
//! - `spawn`: N stdio apps spawned and handshaken concurrently (`spawn.rs`).
//! - `floor`: serves canned MCP answers over HTTP until stopped, the floor under every HTTP
//!   row (`floor.rs`); it prints `listening on URL` instead of rows.
//!
//! It prints one JSON line on stdout: `{"rows": [...]}`, each row with the path, clients,
//! calls, errors (and the first one), seconds, calls per second and the p50/p90/p99/mean/
//! min/max latency in microseconds (`stats.rs`). It exits 1 if it could not measure at all;
//! failed calls are counted in the rows, not fatal. Stdio apps inherit its environment
//! (`RUST_LOG` included), as the gateway's manifests pass the same level.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

mod calls;
mod chat;
mod drive;
mod floor;
mod inproc;
mod spawn;
mod stats;

use calls::{Target, ToolCall};
use drive::Plan;

#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    about = "The load generator of cargo xtask bench proxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// rmcp clients calling a tool over HTTP or stdio.
    Calls {
        #[command(flatten)]
        load: Load,
        /// One session shared by every caller.
        #[arg(long)]
        shared: bool,
        /// `http URL` or `stdio PROGRAM [ARGS...]`.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        target: Vec<String>,
    },
    /// The gateway's call paths (port, handle, registry, agent turn), in-process.
    Inproc {
        #[command(flatten)]
        load: Load,
        /// `http URL` or `stdio PROGRAM [ARGS...]`.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        target: Vec<String>,
    },
    /// `POST /apps/chat` turns of `/call TOOL {json}` in offline mode.
    Chat {
        #[command(flatten)]
        load: Load,
        /// The gateway's base URL.
        #[arg(long)]
        base: String,
    },
    /// N stdio apps spawned, initialized and listed concurrently.
    Spawn {
        /// How many.
        #[arg(long)]
        count: usize,
        /// `stdio PROGRAM [ARGS...]`.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        target: Vec<String>,
    },
    /// Serve canned MCP answers over HTTP (the floor of every HTTP row) until stopped.
    Floor {
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: String,
    },
}

/// What every load command shares.
#[derive(Debug, Args)]
struct Load {
    /// Concurrent callers.
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// Measured calls per caller.
    #[arg(long, default_value_t = 1000)]
    calls: usize,
    /// Unmeasured calls per caller first.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// The tool to call.
    #[arg(long)]
    tool: String,
    /// Its arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// The row's name in the output.
    #[arg(long, default_value = "")]
    label: String,
}

impl Load {
    fn plan(&self) -> Plan {
        Plan {
            warmup: self.warmup,
            calls: self.calls,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("loadgen: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli.command));
    // A stdio app's blocking reader must not hold the process open.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(rows) => {
            use std::io::Write as _;
            // A reader that went away is an error to report, not a panic.
            match writeln!(std::io::stdout(), "{}", json!({ "rows": rows })) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("loadgen: writing the result: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(err) => {
            eprintln!("loadgen: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<Vec<Value>> {
    match command {
        Command::Calls {
            load,
            shared,
            target,
        } => {
            let options = calls::Options {
                label: load.label.clone(),
                clients: load.clients.max(1),
                plan: load.plan(),
                shared,
                tool: ToolCall::new(&load.tool, &load.args)?,
                target: Target::parse(&target)?,
            };
            Ok(vec![calls::run(&options).await?])
        }
        Command::Inproc { load, target } => {
            let options = inproc::Options {
                label: load.label.clone(),
                clients: load.clients.max(1),
                plan: load.plan(),
                tool: ToolCall::new(&load.tool, &load.args)?,
                target: Target::parse(&target)?,
            };
            inproc::run(&options).await
        }
        Command::Chat { load, base } => {
            let options = chat::Options {
                label: load.label.clone(),
                clients: load.clients.max(1),
                plan: load.plan(),
                tool: ToolCall::new(&load.tool, &load.args)?,
                base,
            };
            Ok(vec![chat::run(&options).await?])
        }
        Command::Spawn { count, target } => Ok(vec![
            spawn::run(count.max(1), &Target::parse(&target)?).await?,
        ]),
        Command::Floor { bind } => {
            floor::serve(&bind).await?;
            Ok(Vec::new())
        }
    }
}
