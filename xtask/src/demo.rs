//! `cargo xtask demo [--smoke]`: builds the gateway and the test apps, starts
//! `grocery-inventory` over HTTP, lays out a demo folder (under `target/demo`) with its
//! manifest and a second app over stdio, starts the gateway, waits for the apps to settle,
//! prints the URLs and tours the live gateway. Without `--smoke` it then waits for Ctrl-C;
//! with it, it checks the tour, stops everything and exits 0 or 1.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::http;
use crate::stack::{self, Stack, StackOptions, target_dir};

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
    stack::build(root)?;
    let target = target_dir(root);
    let Stack {
        gateway,
        grocery,
        base,
        gateway_log,
        apps,
        ..
    } = stack::start(
        root,
        &StackOptions {
            folder: &target.join("demo"),
            logs: &target.join("demo-logs"),
            grocery_options: &[],
            token: None,
            allowed_origins: &[],
            registry: None,
            oauth_app: false,
        },
    )?;

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
    gateway.wait();
    grocery.stop();
    Ok(())
}
