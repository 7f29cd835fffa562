//! `cargo xtask demo [--smoke]`: builds the gateway and the test apps, starts
//! `grocery-inventory` over HTTP, lays out a demo folder (under `target/demo`) with its
//! manifest and a second app over stdio, starts the gateway, waits for the apps to settle,
//! prints the URLs and tours the live gateway. Without `--smoke` it then waits for Ctrl-C;
//! with it, it checks the tour, stops everything and exits 0 or 1.

// xtask starts the programs it demonstrates; that is its job.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::http;

/// How long apps may take to settle.
const SETTLE: Duration = Duration::from_secs(60);

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
struct Running {
    name: &'static str,
    child: Child,
}

impl Running {
    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap_or_default());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop after SIGTERM; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `program args` and waits for its `listening on URL` line.
fn start_listening(
    name: &'static str,
    program: &Path,
    args: &[&str],
    log: &Path,
) -> anyhow::Result<(Running, String)> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut running = Running { name, child };
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    // Keep reading what else it prints, so it never writes into a closed pipe.
    std::thread::spawn(move || {
        let mut sink = std::io::sink();
        let _ = std::io::copy(&mut reader, &mut sink);
    });
    let Some(url) = line.trim().strip_prefix("listening on ") else {
        running.stop();
        bail!(
            "{name} did not start (it printed {line:?}); see {}",
            log.display()
        );
    };
    Ok((running, url.to_owned()))
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// Lays out `demo/` with a config and two app folders.
fn lay_out(demo: &Path, grocery_url: &str, fixture: &Path) -> anyhow::Result<PathBuf> {
    if demo.exists() {
        std::fs::remove_dir_all(demo).with_context(|| format!("clearing {}", demo.display()))?;
    }
    write_json(
        &demo.join("mcpapps/grocery-inventory/openclaw.mcpapp.json"),
        &json!({
            "id": "grocery-inventory",
            "name": "Grocery Inventory Dashboard",
            "description": "Multi-store grocery inventory management MCP App with interactive dashboard.",
            "version": "1.0.0",
            "protocolVersion": "2025-11-25",
            "transport": "http",
            "url": grocery_url,
            "hasUi": true,
            "uiResourceUri": "ui://grocery/store-dashboard.html",
            "category": "data",
            "capabilities": ["tools", "resources", "prompts", "completions"],
            "startupTimeoutSeconds": 10,
            "requestTimeoutSeconds": 60,
            "toolNamePrefix": "grocery.",
            "headers": {}
        }),
    )?;
    write_json(
        &demo.join("mcpapps/fixture-stdio/openclaw.mcpapp.json"),
        &json!({
            "id": "fixture-stdio",
            "name": "Fixture (stdio)",
            "version": "0.1.0",
            "protocolVersion": "2025-11-25",
            "transport": "stdio",
            "command": fixture,
            "arguments": ["stdio"],
            "hasUi": true,
            "toolNamePrefix": "fixture.",
        }),
    )?;
    let config = demo.join("appsettings.json");
    write_json(
        &config,
        &json!({
            "McpApps": {
                "Enabled": true,
                "DiscoveryPaths": ["./mcpapps"],
                "AllowlistSemantics": "legacy",
                "Allow": ["*"],
                "Entries": { "grocery-inventory": { "Enabled": true } }
            }
        }),
    )?;
    Ok(config)
}

/// Polls `/apps` until every app has settled, printing changes.
fn wait_for_apps(base: &str) -> anyhow::Result<Value> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let apps = http::request("GET", &format!("{base}/apps"), &[], None)?.json()?;
        let states: Vec<String> = apps["apps"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|a| {
                        format!(
                            "{} {}",
                            a["id"].as_str().unwrap_or("?"),
                            a["lifecycle"].as_str().unwrap_or("?")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let line = states.join(", ");
        if line != last {
            println!("  apps: {line}");
            last = line;
        }
        let settled = apps["apps"].as_array().is_some_and(|list| {
            list.iter()
                .all(|a| !matches!(a["lifecycle"].as_str(), Some("Validated" | "Loaded")))
        });
        // Running apps' tools reach the agent's registry just after; wait for those too.
        if settled && tools_registered(base, &apps)? {
            return Ok(apps);
        }
        ensure!(
            started.elapsed() < SETTLE,
            "apps did not settle within {} s",
            SETTLE.as_secs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether every running app's model-visible tools are registered for the agent.
fn tools_registered(base: &str, apps: &Value) -> anyhow::Result<bool> {
    for app in apps["apps"].as_array().into_iter().flatten() {
        if app["lifecycle"] != "Running" {
            continue;
        }
        let id = app["id"].as_str().unwrap_or_default();
        let detail = http::request("GET", &format!("{base}/apps/{id}"), &[], None)?.json()?;
        let missing = detail["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|tool| tool["visibility"]["model"] == true && tool["registeredName"].is_null());
        if missing {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Sends a chat message and returns the events.
fn chat(base: &str, message: &str) -> anyhow::Result<Vec<Value>> {
    let body = json!({ "message": message, "sessionId": "demo-session" }).to_string();
    let response = http::request(
        "POST",
        &format!("{base}/apps/chat"),
        &[("Content-Type", "application/json")],
        Some(&body),
    )?;
    ensure!(
        response.status == 200,
        "chat answered {}: {}",
        response.status,
        response.body
    );
    Ok(response.events())
}

fn tool_result(events: &[Value]) -> Option<&Value> {
    events.iter().find(|e| e["type"] == "tool_result")
}

/// What the tour found, for the smoke checks.
struct Tour {
    running: usize,
    apps: usize,
    low_stock: Option<Value>,
    proxy_tools: Vec<String>,
    dashboard: Option<Value>,
}

fn tour(base: &str, apps: &Value) -> anyhow::Result<Tour> {
    println!("\n== GET /apps");
    let list = apps["apps"].as_array().cloned().unwrap_or_default();
    for app in &list {
        println!(
            "  {:<20} {:<9} {:<6} tools={:<3} {}",
            app["id"].as_str().unwrap_or("?"),
            app["lifecycle"].as_str().unwrap_or("?"),
            app["transport"].as_str().unwrap_or("?"),
            app["toolCount"],
            app["lastError"].as_str().unwrap_or("")
        );
    }
    let running = list.iter().filter(|a| a["lifecycle"] == "Running").count();

    println!("\n== POST /apps/chat \"get_low_stock, storeId=1\" (offline mode)");
    let events = chat(base, "get_low_stock, storeId=1")?;
    for event in &events {
        println!("  {}", truncate(&event.to_string(), 160));
    }
    let low_stock = tool_result(&events).cloned();

    println!("\n== tools/list through /apps/mcp/grocery-inventory");
    let url = format!("{base}/apps/mcp/grocery-inventory");
    let accept = ("Accept", "application/json, text/event-stream");
    let json_type = ("Content-Type", "application/json");
    let init = http::request(
        "POST",
        &url,
        &[accept, json_type],
        Some(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"xtask-demo","version":"1"}}}"#,
        ),
    )?;
    ensure!(
        init.status == 200,
        "initialize answered {}: {}",
        init.status,
        init.body
    );
    let session = init
        .header("mcp-session-id")
        .context("no Mcp-Session-Id")?
        .to_owned();
    let list_tools = http::request(
        "POST",
        &url,
        &[accept, json_type, ("Mcp-Session-Id", &session)],
        Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
    )?;
    let list_tools = list_tools.json().or_else(|_| {
        list_tools
            .events()
            .into_iter()
            .last()
            .context("no tools/list answer")
    })?;
    let proxy_tools: Vec<String> = list_tools["result"]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    println!("  {} tools: {}", proxy_tools.len(), proxy_tools.join(", "));

    println!("\n== the dashboard tool through /apps/chat");
    let events = chat(base, "/call grocery.show_store_inventory_dashboard {}")?;
    let dashboard = tool_result(&events).cloned();
    if let Some(result) = &dashboard {
        println!(
            "  {}",
            truncate(result["text"].as_str().unwrap_or_default(), 400)
        );
    }
    Ok(Tour {
        running,
        apps: list.len(),
        low_stock,
        proxy_tools,
        dashboard,
    })
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// The smoke checks: every problem, not just the first.
fn check(tour: &Tour) -> Vec<String> {
    let mut problems = Vec::new();
    if tour.apps != 2 || tour.running != 2 {
        problems.push(format!(
            "expected 2 running apps, found {} of {}",
            tour.running, tour.apps
        ));
    }
    match &tour.low_stock {
        Some(result)
            if result["isError"] == false
                && result["text"].as_str().is_some_and(|t| !t.is_empty()) => {}
        other => problems.push(format!(
            "get_low_stock did not answer through the chat: {other:?}"
        )),
    }
    for wanted in [
        "get_low_stock",
        "refresh_dashboard",
        "show_store_inventory_dashboard",
    ] {
        if !tour.proxy_tools.iter().any(|t| t == wanted) {
            problems.push(format!("tools/list through the proxy lacks {wanted}"));
        }
    }
    match &tour.dashboard {
        Some(result)
            if result["isError"] == false
                && result["text"].as_str().is_some_and(|t| !t.is_empty()) => {}
        other => problems.push(format!("the dashboard tool did not answer: {other:?}")),
    }
    problems
}

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let smoke = match args {
        [] => false,
        [flag] if flag == "--smoke" => true,
        other => bail!("`demo` takes only `--smoke`, got {other:?}"),
    };
    crate::util::cargo(
        root,
        &[
            "build",
            "-p",
            "mcpapp-gateway",
            "-p",
            "grocery-inventory",
            "-p",
            "fixture-app",
        ],
    )?;
    let target = target_dir(root);
    let bin = target.join("debug");
    let demo = target.join("demo");
    std::fs::create_dir_all(&demo)?;
    let logs = target.join("demo-logs");
    std::fs::create_dir_all(&logs)?;

    println!("\n==> starting grocery-inventory over HTTP");
    let (grocery, grocery_url) = start_listening(
        "grocery-inventory",
        &bin.join("grocery-inventory"),
        &["http", "--bind", "127.0.0.1:0"],
        &logs.join("grocery-inventory.log"),
    )?;
    println!("  {grocery_url}");
    let config = lay_out(&demo, &grocery_url, &bin.join("fixture-app"))?;
    println!("  demo folder: {}", demo.display());

    println!("\n==> starting the gateway");
    let gateway_log = logs.join("gateway.log");
    let config_arg = config.display().to_string();
    let (gateway, base) = start_listening(
        "mcpapp-gateway",
        &bin.join("mcpapp-gateway"),
        &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
        &gateway_log,
    )?;
    let apps = wait_for_apps(&base)?;

    println!("\n==> the gateway is up");
    println!("  open the host page: {base}/");
    println!("  host endpoints:  {base}/apps  {base}/apps/health");
    println!("  chat:            POST {base}/apps/chat");
    println!("  MCP (all apps):  {base}/mcp");
    println!("  MCP per app:     {base}/apps/mcp/<appId>");
    println!("  logs:            {}", gateway_log.display());

    let tour = tour(&base, &apps);
    let mut gateway = gateway;
    let mut grocery = grocery;
    if smoke {
        let problems = match &tour {
            Ok(tour) => check(tour),
            Err(err) => vec![format!("the tour failed: {err:#}")],
        };
        println!("\n==> stopping");
        gateway.stop();
        grocery.stop();
        if problems.is_empty() {
            println!("smoke run passed");
            return Ok(());
        }
        for problem in &problems {
            eprintln!("smoke: {problem}");
        }
        bail!(
            "smoke run failed ({} problems); see {}",
            problems.len(),
            gateway_log.display()
        );
    }
    tour?;
    println!("\nPress Ctrl-C to stop the gateway and the apps.");
    let _ = gateway.child.wait();
    grocery.stop();
    Ok(())
}
