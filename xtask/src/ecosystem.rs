//! `cargo xtask ecosystem`: real servers of the MCP ecosystem under the gateway's app sandbox.
//!
//! Three servers as an operator would install them, each in its own app folder under
//! `target/ecosystem/apps` (packages pinned by the files in `ecosystem/` beside this one, and
//! installed again only when those change): `@modelcontextprotocol/server-everything` and the
//! ext-apps example `@modelcontextprotocol/server-basic-vanillajs` from npm (run with the
//! system's `node`), and `mcp-server-time` from PyPI (in a venv of the system's `python3`). A
//! real `mcpapp-gateway serve` runs them under the default sandbox (isolation `enforce`, no
//! grant); each must reach Running with its sandbox enforced and answer a tool call through
//! the gateway. It prints what each needed beyond the default policy (docs/security.md keeps
//! the list).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::stack::{self, Program};

/// One ecosystem server.
struct Server {
    id: &'static str,
    what: &'static str,
    /// The manifest, less `id`.
    manifest: Value,
    /// A tool and its arguments, and a text its answer must contain.
    call: (&'static str, &'static str, &'static str),
    /// What it needs beyond the default policy, for the report.
    needs: &'static str,
}

fn servers() -> Vec<Server> {
    vec![
        Server {
            id: "everything",
            what: "@modelcontextprotocol/server-everything 2026.8.31 (npm, Node)",
            manifest: json!({
                "command": "node",
                "arguments": ["node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"],
            }),
            call: ("echo", r#"{"message": "sandboxed"}"#, "Echo: sandboxed"),
            needs: "nothing",
        },
        Server {
            id: "basic",
            what: "@modelcontextprotocol/server-basic-vanillajs 2.0.3 (ext-apps example, npm, Node)",
            manifest: json!({
                "command": "node",
                "arguments": ["node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js", "--stdio"],
            }),
            call: ("get-time", "{}", "\"time\""),
            needs: "nothing",
        },
        Server {
            id: "time",
            what: "mcp-server-time 2026.10.19 (PyPI, Python venv)",
            manifest: json!({
                "command": ".venv/bin/mcp-server-time",
                "arguments": [],
                // It speaks only 2026-07-28; naming it skips the era probe (not a sandbox grant).
                "protocolVersion": "2026-07-28",
            }),
            call: (
                "get_current_time",
                r#"{"timezone": "Europe/Paris"}"#,
                "Europe/Paris",
            ),
            needs: "nothing (its manifest names protocolVersion 2026-07-28)",
        },
    ]
}

/// Writes `text` to `path` unless it already holds exactly that; returns whether it changed.
fn write_if_changed(path: &Path, text: &str) -> anyhow::Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|current| current == text) {
        return Ok(false);
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

/// Installs the npm package pinned by `package`/`lock` into `dir` (again only when they
/// changed or the install is gone).
fn npm(dir: &Path, package: &str, lock: &str, entry: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let changed = write_if_changed(&dir.join("package.json"), package)?
        | write_if_changed(&dir.join("package-lock.json"), lock)?;
    let stamp = dir.join("node_modules/.ecosystem-lock");
    let current = std::fs::read_to_string(&stamp).is_ok_and(|s| s == lock);
    if changed || !current || !dir.join(entry).is_file() {
        crate::util::npm_ci(dir, &[])?;
        std::fs::write(&stamp, lock)?;
    }
    Ok(())
}

/// Installs the pinned PyPI packages into a venv `dir/.venv` of the system's Python.
fn venv(dir: &Path, requirements: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("requirements.txt");
    let changed = write_if_changed(&file, requirements)?;
    let venv = dir.join(".venv");
    let stamp = venv.join(".ecosystem-requirements");
    let current = std::fs::read_to_string(&stamp).is_ok_and(|s| s == requirements);
    if changed || !current || !venv.join("bin/mcp-server-time").is_file() {
        let venv_path = venv.display().to_string();
        crate::util::run(
            "/usr/bin/python3",
            &["-m", "venv", "--clear", &venv_path],
            &[],
        )?;
        let pip = venv.join("bin/pip").display().to_string();
        let file = file.display().to_string();
        crate::util::run(
            &pip,
            &["install", "--quiet", "--require-virtualenv", "-r", &file],
            &[],
        )?;
        std::fs::write(&stamp, requirements)?;
    }
    Ok(())
}

/// `cargo xtask ecosystem`.
pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    if let Some(extra) = args.first() {
        bail!("`ecosystem` takes no arguments, got `{extra}`");
    }
    stack::stop_all_on_signal()?;
    let target = stack::target_dir(root);
    let base = target.join("ecosystem");
    let apps = base.join("apps");
    println!(
        "==> installing the ecosystem's servers under {}",
        apps.display()
    );
    npm(
        &apps.join("everything"),
        include_str!("ecosystem/everything.package.json"),
        include_str!("ecosystem/everything.package-lock.json"),
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )?;
    npm(
        &apps.join("basic"),
        include_str!("ecosystem/basic.package.json"),
        include_str!("ecosystem/basic.package-lock.json"),
        "node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js",
    )?;
    venv(
        &apps.join("time"),
        include_str!("ecosystem/time.requirements.txt"),
    )?;
    let servers = servers();
    for server in &servers {
        let mut manifest = server.manifest.clone();
        manifest["id"] = json!(server.id);
        manifest["startupTimeoutSeconds"] = json!(60);
        stack::write_json(
            &apps.join(server.id).join("openclaw.mcpapp.json"),
            &manifest,
        )?;
    }
    let config = base.join("appsettings.json");
    stack::write_json(
        &config,
        &json!({"McpApps": {
            "Enabled": true,
            "DiscoveryPaths": ["apps"],
            "StateDirectory": "state",
            "Supervision": {"HealthCheckIntervalMs": 0},
        }}),
    )?;

    crate::util::cargo(root, &["build", "-p", "mcpapp-gateway"])?;
    let gateway = target.join("debug/mcpapp-gateway");
    let log = base.join("gateway.log");
    let config_arg = config.display().to_string();
    let (_running, url) = stack::start_listening(&Program {
        name: "mcpapp-gateway",
        path: &gateway,
        args: &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
        envs: &[],
        log: &log,
    })?;
    stack::wait_for_apps(&url, &[])?;

    let mut failures = Vec::new();
    println!("\n| server | state | sandbox | call | needs beyond the default policy |");
    println!("|---|---|---|---|---|");
    for server in &servers {
        let detail =
            crate::http::request("GET", &format!("{url}/apps/{}", server.id), &[], None)?.json()?;
        let state = detail["lifecycle"].as_str().unwrap_or("?").to_owned();
        let sandbox = detail["sandbox"]["status"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        let call = call(&gateway, &url, server);
        let answered = call.as_ref().is_ok_and(|text| text.contains(server.call.2));
        println!(
            "| {} | {state} | {sandbox} | {} {} | {} |",
            server.what,
            server.call.0,
            if answered { "answered" } else { "FAILED" },
            server.needs
        );
        if state != "Running" || sandbox != "enforced" || !answered {
            failures.push(format!(
                "{}: {state}, sandbox {sandbox}, last error {}, call {}",
                server.id,
                detail["lastError"],
                match &call {
                    Ok(text) => text.clone(),
                    Err(err) => format!("{err:#}"),
                }
            ));
        }
    }
    ensure!(
        failures.is_empty(),
        "ecosystem servers failed under the sandbox (gateway log: {}):\n{}",
        log.display(),
        failures.join("\n")
    );
    println!("\nall {} servers ran sandboxed and answered", servers.len());
    Ok(())
}

/// `mcpapp-gateway call ID TOOL ARGS` against the running gateway.
fn call(gateway: &PathBuf, url: &str, server: &Server) -> anyhow::Result<String> {
    // xtask is the workspace's script runner; starting the gateway's CLI is its job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(gateway)
        .args(["call", server.id, server.call.0, server.call.1])
        .env("MCPAPP_URL", url)
        .output()
        .context("running mcpapp-gateway call")?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "{} ({})",
        String::from_utf8_lossy(&output.stderr).trim(),
        output.status
    );
    Ok(text)
}
