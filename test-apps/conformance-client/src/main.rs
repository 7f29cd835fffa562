//! `conformance-client`: the gateway as the client under test of the MCP conformance suite's
//! client scenarios (`cargo xtask conformance` runs it through the suite).
//!
//! ```text
//! conformance-client [--scenario NAME] URL
//! ```
//!
//! The suite starts a test server for a scenario and runs this program with the server's URL
//! as the last argument and the scenario's name in `MCP_CONFORMANCE_SCENARIO` (`--scenario`
//! wins, for running it by hand). The program does what the gateway does with an app, with
//! the same library crates: it writes a manifest for an HTTP app `conformance` at `URL` with no
//! tool prefix into a temporary folder, discovers it (`mcpapp-discovery`), supervises it
//! (`mcpapp-supervisor`), follows it into a tool registry (`mcpapp-bridge`'s sync), and then
//! calls the scenario's tool through the registry's `invoke`, the agent's path to a tool:
//!
//! | scenario | tool | arguments |
//! |---|---|---|
//! | `initialize` | none: connecting is the test | |
//! | `tools_call` | `add_numbers` | `{"a": 5, "b": 3}` |
//! | `elicitation-sep1034-client-defaults` | `test_client_elicitation_defaults` | `{}` |
//! | `sse-retry` | `test_reconnection` | `{}` |
//!
//! It prints one JSON line on stdout, `{"scenario", "lifecycle", "lastError", "tools", "tool",
//! "isError", "text", "ok"}`, and exits 0 when the app ran and the call (if any) returned a
//! result that is not an error, 1 otherwise, and 2 on bad usage. The suite judges the client by
//! what its server saw, not by this exit status; the line says what the gateway's side saw.
//! Logs go to stderr (`RUST_LOG`, default `info`).
//!
//! The supervisor does not restart the app and does not ping it here, so a failure is final
//! and reported at once; everything else is the gateway's default behaviour.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use mcpapp_bridge::{AppToolSync, ToolContext, ToolRegistry};
use mcpapp_discovery::Discovery;
use mcpapp_manifest::{Lifecycle, McpAppsConfig};
use mcpapp_supervisor::{SupervisionPolicy, Supervisor};
use serde_json::{Value, json};

/// The app id the server is hosted under (as `cargo xtask conformance` hosts the reference
/// server in the gateway).
const APP_ID: &str = "conformance";
/// How long connecting, the handshake and the first listing may take.
const STARTUP_SECONDS: u64 = 20;
/// How long one tool call may take. Shorter than the suite's client timeout, so a call that
/// never returns is reported by this program rather than killed by the suite.
const REQUEST_SECONDS: u64 = 10;
/// The chat session id the calls carry, as the agent's calls do.
const SESSION_ID: &str = "conformance";

/// The tool a scenario calls and its arguments; `None` when connecting is the whole test.
fn scenario_call(scenario: &str) -> anyhow::Result<Option<(&'static str, Value)>> {
    Ok(match scenario {
        "initialize" => None,
        "tools_call" => Some(("add_numbers", json!({"a": 5, "b": 3}))),
        "elicitation-sep1034-client-defaults" => {
            Some(("test_client_elicitation_defaults", json!({})))
        }
        "sse-retry" => Some(("test_reconnection", json!({}))),
        other => bail!(
            "unknown scenario `{other}`: expected initialize, tools_call, \
             elicitation-sep1034-client-defaults or sse-retry"
        ),
    })
}

/// The command line: the scenario and the server's URL.
fn parse_args(args: &[String]) -> anyhow::Result<(String, String)> {
    let (scenario, rest) = match args {
        [flag, name, rest @ ..] if flag == "--scenario" => (Some(name.clone()), rest),
        rest => (None, rest),
    };
    let [url] = rest else {
        bail!("usage: conformance-client [--scenario NAME] URL");
    };
    let scenario = match scenario {
        Some(name) => name,
        None => std::env::var("MCP_CONFORMANCE_SCENARIO")
            .context("no scenario: pass --scenario NAME or set MCP_CONFORMANCE_SCENARIO")?,
    };
    Ok((scenario, url.clone()))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // The suite saves stderr to a file; colour codes would only clutter it.
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (scenario, url) = match parse_args(&args) {
        Ok(parsed) => parsed,
        Err(err) => {
            eprintln!("conformance-client: {err:#}");
            return ExitCode::from(2);
        }
    };
    let call = match scenario_call(&scenario) {
        Ok(call) => call,
        Err(err) => {
            eprintln!("conformance-client: {err:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("conformance-client: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&scenario, &url, call)) {
        Ok(outcome) => {
            println!("{outcome}");
            if outcome["ok"] == true {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("conformance-client: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Hosts `url` as an app, performs `call` through the registry and describes the outcome.
async fn run(scenario: &str, url: &str, call: Option<(&str, Value)>) -> anyhow::Result<Value> {
    let folder = tempfile::Builder::new()
        .prefix("conformance-client-")
        .tempdir()
        .context("creating a folder for the manifest")?;
    let app_folder = folder.path().join(APP_ID);
    std::fs::create_dir_all(&app_folder)
        .with_context(|| format!("creating {}", app_folder.display()))?;
    let manifest = json!({
        "id": APP_ID,
        "name": "MCP conformance test server",
        "version": "1.0.0",
        "transport": "http",
        "url": url,
        "toolNamePrefix": "",
        "startupTimeoutSeconds": STARTUP_SECONDS,
        "requestTimeoutSeconds": REQUEST_SECONDS,
    });
    let manifest_path = app_folder.join("openclaw.mcpapp.json");
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&manifest)?)
        .with_context(|| format!("writing {}", manifest_path.display()))?;

    let config = McpAppsConfig {
        enabled: true,
        ..McpAppsConfig::default()
    };
    let report = Discovery::builder(config.clone())
        .discovery_paths(vec![folder.path().display().to_string()], folder.path())
        .build()?
        .scan();
    if report
        .app(APP_ID)
        .and_then(|app| app.spec.as_ref())
        .is_none()
    {
        let problems: Vec<String> = report.diagnostics.iter().map(ToString::to_string).collect();
        bail!("discovery did not accept the app: {}", problems.join("; "));
    }

    let mut policy = SupervisionPolicy::default();
    policy.auto_restart = false;
    policy.health_check_interval = None;
    let supervisor = Supervisor::builder().config(&config).policy(policy).build();
    let registry = ToolRegistry::new();
    // The sync starts before the apps, as in the gateway, so it sees every event.
    let sync = AppToolSync::start(&supervisor, &registry);
    supervisor.load(&report);
    let settled = supervisor
        .wait_settled(Duration::from_secs(STARTUP_SECONDS + 5))
        .await;
    sync.synced().await;

    let snapshot = supervisor.get(APP_ID).map(|app| app.snapshot());
    let lifecycle = snapshot.as_ref().map(|s| s.state.lifecycle);
    let last_error = snapshot.as_ref().and_then(|s| s.state.last_error.clone());
    let tools: Vec<String> = registry
        .list()
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    let running = settled && lifecycle == Some(Lifecycle::Running);
    let mut outcome = json!({
        "scenario": scenario,
        "lifecycle": lifecycle.map(|l| format!("{l:?}")),
        "lastError": last_error,
        "tools": tools,
        "tool": null,
        "isError": null,
        "text": null,
        "ok": running,
    });

    if running && let Some((name, arguments)) = call {
        outcome["tool"] = json!(name);
        match registry.resolve(name) {
            Some(entry) => {
                let ctx = ToolContext::new().with_session_id(SESSION_ID);
                let output = entry.tool.invoke(arguments.to_string(), ctx).await;
                outcome["isError"] = json!(output.is_error);
                outcome["text"] = json!(output.text);
                outcome["ok"] = json!(!output.is_error);
            }
            None => {
                outcome["text"] = json!(format!("the registry has no tool `{name}`"));
                outcome["ok"] = json!(false);
            }
        }
    }
    drop(sync);
    supervisor.shutdown().await;
    Ok(outcome)
}
