//! `loadgen inproc`: the gateway's own call paths to one app, measured inside this process
//! with the library crates wired as `mcpapp-gateway serve` wires them (discovery, supervisor,
//! tool sync into a registry, an agent with the offline model), so that no HTTP hop and no
//! other process stands between the caller and the supervisor:
//!
//! - `port`: a [`Port`](mcpapp_session::Port) per caller, raw `tools/call` through the hub,
//!   as each browser session of `/apps/mcp/{appId}` sends it;
//! - `handle`: [`AppHandle::call_tool`](mcpapp_supervisor::AppHandle::call_tool), the gateway's
//!   rmcp client over its duplex pipe into the same hub;
//! - `registry`: the registered tool's `invoke`, which is exactly what the agent does for a
//!   tool call (arguments checked, the handle's call, the result turned into model text);
//! - `turn`: a whole [`Agent::run_turn`](mcpapp_agent::Agent::run_turn) of `/call TOOL {json}`
//!   with the offline model (session, prompt, model, tool call, events), each in a new session
//!   so a growing history does not slow later turns.
//!
//! `registry` minus `port` is what the agent's tool call adds to a port's round trip.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use futures::{FutureExt as _, StreamExt as _};
use mcpapp_agent::{Agent, AgentConfig, AgentEvent, OfflineModel, TurnRequest};
use mcpapp_bridge::{AppToolSync, ToolContext, ToolRegistry};
use mcpapp_discovery::Discovery;
use mcpapp_manifest::{Lifecycle, McpAppsConfig};
use mcpapp_session::{PortReply, RawMessage};
use mcpapp_supervisor::{AppHandle, SupervisionPolicy, Supervisor};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::calls::{Target, ToolCall};
use crate::drive::{Call, Plan, drive};
use crate::stats;

/// The app's id inside this process.
const APP_ID: &str = "bench";
/// Its tool prefix, so registered names look like the gateway's.
const PREFIX: &str = "bench.";
/// The chat session id the handle and registry calls carry, as the agent's calls do.
const SESSION_ID: &str = "loadgen";
/// How long the app may take to start.
const STARTUP: Duration = Duration::from_secs(30);

/// Settings of `loadgen inproc`.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) label: String,
    pub(crate) clients: usize,
    pub(crate) plan: Plan,
    pub(crate) tool: ToolCall,
    pub(crate) target: Target,
}

/// Hosts the app as the gateway does and measures the four paths one after the other;
/// returns one row per path.
pub(crate) async fn run(options: &Options) -> anyhow::Result<Vec<Value>> {
    let folder = tempfile::Builder::new()
        .prefix("loadgen-")
        .tempdir()
        .context("creating a folder for the manifest")?;
    write_manifest(folder.path(), &options.target)?;
    let config = McpAppsConfig {
        enabled: true,
        ..McpAppsConfig::default()
    };
    let report = Discovery::builder(config.clone())
        .discovery_paths(vec![folder.path().display().to_string()], folder.path())
        .build()?
        .scan();
    ensure!(
        report.app(APP_ID).and_then(|a| a.spec.as_ref()).is_some(),
        "discovery refused the app: {:?}",
        report
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let mut policy = SupervisionPolicy::default();
    policy.auto_restart = false;
    policy.health_check_interval = None;
    let supervisor = Supervisor::builder().config(&config).policy(policy).build();
    let registry = ToolRegistry::new();
    let sync = AppToolSync::start(&supervisor, &registry);
    supervisor.load(&report);
    supervisor.wait_settled(STARTUP).await;
    sync.synced().await;
    let handle = supervisor
        .get(APP_ID)
        .context("the app is not supervised")?;
    let state = handle.snapshot().state;
    ensure!(
        state.lifecycle == Lifecycle::Running,
        "the app did not start: {:?} {}",
        state.lifecycle,
        state.last_error.unwrap_or_default()
    );

    let rows = measure(options, &handle, &registry).await;
    drop(sync);
    supervisor.shutdown().await;
    rows
}

async fn measure(
    options: &Options,
    handle: &AppHandle,
    registry: &ToolRegistry,
) -> anyhow::Result<Vec<Value>> {
    let label = |path: &str| format!("{} {path}", options.label);
    let mut rows = Vec::new();

    let mut ports = Vec::with_capacity(options.clients);
    for _ in 0..options.clients {
        ports.push(port_caller(handle, &options.tool).await?);
    }
    let sample = drive(ports, options.plan).await;
    rows.push(stats::row(
        &label("port"),
        options.clients,
        options.plan.calls,
        &sample,
    ));

    let callers = (0..options.clients)
        .map(|_| handle_caller(handle, &options.tool))
        .collect();
    let sample = drive(callers, options.plan).await;
    rows.push(stats::row(
        &label("handle"),
        options.clients,
        options.plan.calls,
        &sample,
    ));

    let name = format!("{PREFIX}{}", options.tool.name);
    let Some(entry) = registry.resolve(&name) else {
        bail!("the registry has no tool {name}");
    };
    let arguments = Value::Object(options.tool.arguments.clone()).to_string();
    let callers = (0..options.clients)
        .map(|_| {
            let tool = entry.tool.clone();
            let arguments = arguments.clone();
            let call: Call = Arc::new(move |_| {
                let ctx = ToolContext::new().with_session_id(SESSION_ID);
                let output = tool.invoke(arguments.clone(), ctx);
                async move {
                    let output = output.await;
                    if output.is_error {
                        return Err(output.text);
                    }
                    Ok(())
                }
                .boxed()
            });
            call
        })
        .collect();
    let sample = drive(callers, options.plan).await;
    rows.push(stats::row(
        &label("registry"),
        options.clients,
        options.plan.calls,
        &sample,
    ));

    let agent = Agent::new(
        registry.clone(),
        Arc::new(OfflineModel::new()),
        AgentConfig::default(),
    );
    let message = format!("/call {name} {arguments}");
    let callers = (0..options.clients)
        .map(|_| {
            let agent = agent.clone();
            let message = message.clone();
            let call: Call = Arc::new(move |_| {
                let turn = agent.run_turn(TurnRequest::message(&message), CancellationToken::new());
                async move { turn_succeeded(&turn.collect::<Vec<_>>().await) }.boxed()
            });
            call
        })
        .collect();
    let sample = drive(callers, options.plan).await;
    rows.push(stats::row(
        &label("turn"),
        options.clients,
        options.plan.calls,
        &sample,
    ));
    Ok(rows)
}

/// Whether a turn ran its tool call successfully.
fn turn_succeeded(events: &[AgentEvent]) -> Result<(), String> {
    for event in events {
        match event {
            AgentEvent::ToolResult {
                is_error: false, ..
            } => return Ok(()),
            AgentEvent::ToolResult { text, .. } => return Err(text.clone()),
            AgentEvent::Error { error } => return Err(error.clone()),
            _ => {}
        }
    }
    Err(format!("the turn made no tool call: {events:?}"))
}

/// Opens a port (as a browser session's `initialize` does) and returns a caller on it.
async fn port_caller(handle: &AppHandle, tool: &ToolCall) -> anyhow::Result<Call> {
    let initialize = RawMessage::from_value(&json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "loadgen", "version": "1"},
        },
    }))?;
    let (port, _answer) = handle
        .open_port(&initialize)
        .await
        .map_err(|e| anyhow::anyhow!("opening a port: {e}"))?;
    let port = Arc::new(port);
    let params = json!({"name": tool.name, "arguments": tool.arguments});
    let ids = Arc::new(AtomicU64::new(1));
    Ok(Arc::new(move |_| {
        let port = port.clone();
        let id = ids.fetch_add(1, Ordering::Relaxed);
        let message = RawMessage::from_value(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params,
        }));
        async move {
            let message = message.map_err(|e| e.to_string())?;
            let reply = port.send(message).await.map_err(|e| e.to_string())?;
            let PortReply::Stream(mut stream) = reply else {
                return Err(format!("the port answered at once: {reply:?}"));
            };
            while let Some(message) = stream.next().await {
                if message.is_response() {
                    return check_response(&message);
                }
            }
            Err("the stream ended without a response".to_owned())
        }
        .boxed()
    }))
}

/// A `tools/call` response that is a result and not a tool error.
fn check_response(message: &RawMessage) -> Result<(), String> {
    if message.member("error").is_some() {
        return Err(format!("an error response: {}", message.as_str()));
    }
    match message.get_path(&["result", "isError"]) {
        Some(flag) if flag.get().trim() == "true" => {
            Err(format!("the tool answered an error: {}", message.as_str()))
        }
        _ => Ok(()),
    }
}

fn handle_caller(handle: &AppHandle, tool: &ToolCall) -> Call {
    let handle = handle.clone();
    let tool = tool.clone();
    let mut meta = serde_json::Map::new();
    meta.insert("sessionId".to_owned(), json!(SESSION_ID));
    Arc::new(move |_| {
        let handle = handle.clone();
        let tool = tool.clone();
        let meta = meta.clone();
        async move {
            let result = handle
                .call_tool(&tool.name, Some(tool.arguments), Some(meta))
                .await
                .map_err(|e| e.to_string())?;
            if result.is_error == Some(true) {
                return Err(format!("the tool answered an error: {:?}", result.content));
            }
            Ok(())
        }
        .boxed()
    })
}

/// The manifest of the app under test: stdio or HTTP, with the prefix above.
fn write_manifest(folder: &std::path::Path, target: &Target) -> anyhow::Result<()> {
    let mut manifest = json!({
        "id": APP_ID,
        "name": "loadgen's app under test",
        "version": "1.0.0",
        "toolNamePrefix": PREFIX,
        "startupTimeoutSeconds": STARTUP.as_secs(),
        "requestTimeoutSeconds": 60,
    });
    match target {
        Target::Http(url) => {
            manifest["transport"] = json!("http");
            manifest["url"] = json!(url);
        }
        Target::Stdio { program, args } => {
            // A relative path would resolve against the manifest's folder; this one was
            // meant relative to the current folder.
            let program = if program.contains('/') {
                std::fs::canonicalize(program)
                    .with_context(|| format!("finding {program}"))?
                    .display()
                    .to_string()
            } else {
                program.clone()
            };
            manifest["transport"] = json!("stdio");
            manifest["command"] = json!(program);
            manifest["arguments"] = json!(args);
            // The app's own log level, as the direct rows' children inherit it.
            if let Ok(level) = std::env::var("RUST_LOG") {
                manifest["environment"] = json!({"RUST_LOG": level});
            }
        }
    }
    let dir = folder.join(APP_ID);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("openclaw.mcpapp.json");
    std::fs::write(&path, serde_json::to_string_pretty(&manifest)?)
        .with_context(|| format!("writing {}", path.display()))
}
