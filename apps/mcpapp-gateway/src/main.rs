//! `mcpapp-gateway`: discovers, validates and hosts MCP Apps.
//!
//! This file only parses arguments, installs logging and hands over to a command; the work
//! happens in the library crates.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod config;
mod otel;
mod progress;
mod remote;

fn main() -> ExitCode {
    // `serve` starts this executable again, once, as the sandbox's kernel probe, which tries
    // Landlock and seccomp on itself; that copy does nothing else.
    if let Some(code) = mcpapp_sandbox::run_probe_if_requested() {
        return code;
    }
    // `serve` starts this executable again as its keeper (the process that kills every app
    // if the gateway is killed); that copy does nothing else.
    if let Some(code) = mcpapp_supervisor::run_keeper_if_requested() {
        return code;
    }
    let cli = cli::Cli::parse();
    // Held until the command returns, so the last spans are exported before the exit.
    let _traces = install_tracing(&cli);
    commands::run(cli.command)
}

/// Logs go to stderr (stdout carries command output); `RUST_LOG` overrides the level. `serve`
/// logs what it does by default; the one-shot commands only warnings. With the `otel`
/// feature and `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans are also exported (see `otel.rs`).
fn install_tracing(cli: &cli::Cli) -> Option<otel::Traces> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let quiet = if matches!(cli.command, cli::Command::Serve(_)) {
        "info,rmcp=warn,tower_http=warn"
    } else {
        "warn"
    };
    let default = cli.log_level.as_deref().unwrap_or(quiet);
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // rmcp's OAuth client logs authorization codes (and token responses' extra fields) at
    // debug: kept at info whatever `RUST_LOG` says, unless it names that module itself.
    let names_auth = std::env::var("RUST_LOG").is_ok_and(|v| v.contains("rmcp::transport::auth"));
    if !names_auth && let Ok(directive) = "rmcp::transport::auth=info".parse() {
        filter = filter.add_directive(directive);
    }
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(progress::Stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let (traces, layer) = otel::layer();
    tracing_subscriber::registry().with(logs).with(layer).init();
    traces
}
