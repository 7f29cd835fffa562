//! The test apps and the gateway, started for real from their built binaries: what `demo`
//! and `e2e` share (processes that stop when dropped, the demo folder, waiting for apps).

// xtask starts the programs it demonstrates and tests; that is its job.
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

/// Whether a started program gets its own process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// Stay in xtask's group, so Ctrl-C in a terminal reaches it too.
    Inherit,
    /// Lead a new group, so stopping it also stops everything it started (a WebDriver
    /// server and its browser).
    Own,
}

/// What happens to a started program's stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdout {
    /// Piped to xtask (see [`start_listening`]).
    Piped,
    /// Discarded.
    Discarded,
}

/// A program to start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Program<'a> {
    /// A short name for messages.
    pub(crate) name: &'static str,
    /// The executable.
    pub(crate) path: &'a Path,
    /// Its arguments.
    pub(crate) args: &'a [&'a str],
    /// Extra environment variables.
    pub(crate) envs: &'a [(&'a str, &'a str)],
    /// Where its stderr goes.
    pub(crate) log: &'a Path,
}

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    name: &'static str,
    child: Child,
    group: Group,
}

impl Running {
    /// Starts `program`.
    pub(crate) fn start(
        program: &Program<'_>,
        group: Group,
        stdout: Stdout,
    ) -> anyhow::Result<Self> {
        let log = program.log;
        let log_file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut command = Command::new(program.path);
        command
            .args(program.args)
            .envs(program.envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(match stdout {
                Stdout::Piped => Stdio::piped(),
                Stdout::Discarded => Stdio::null(),
            })
            .stderr(log_file);
        if group == Group::Own {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", program.path.display()))?;
        Ok(Self {
            name: program.name,
            child,
            group,
        })
    }

    /// Stops the program (and its group, if it leads one).
    pub(crate) fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let id = i32::try_from(self.child.id()).unwrap_or_default();
        // A negative pid signals the whole process group.
        let target = if self.group == Group::Own { -id } else { id };
        let pid = nix::unistd::Pid::from_raw(target);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop after SIGTERM; killing it", self.name);
        if self.group == Group::Own {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits until the program exits by itself.
    pub(crate) fn wait(&mut self) {
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `program` in xtask's process group and waits for its `listening on URL` line.
pub(crate) fn start_listening(program: &Program<'_>) -> anyhow::Result<(Running, String)> {
    let mut running = Running::start(program, Group::Inherit, Stdout::Piped)?;
    let stdout = running.child.stdout.take().context("no stdout")?;
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    // Keep reading what follows (the gateway prints its sandbox origin next): a closed pipe
    // would make the program's next write to stdout fail.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let Some(url) = line.trim().strip_prefix("listening on ") else {
        running.stop();
        bail!(
            "{} did not start (it printed {line:?}); see {}",
            program.name,
            program.log.display()
        );
    };
    Ok((running, url.to_owned()))
}

/// Cargo's target folder.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// Writes pretty JSON, creating folders.
pub(crate) fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// Lays out `demo/` with a config and two app folders.
pub(crate) fn lay_out(demo: &Path, grocery_url: &str, fixture: &Path) -> anyhow::Result<PathBuf> {
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

/// Polls `/apps` (sending `headers`) until every app has settled, printing changes.
pub(crate) fn wait_for_apps(base: &str, headers: &[(&str, &str)]) -> anyhow::Result<Value> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let apps = http::request("GET", &format!("{base}/apps"), headers, None)?.json()?;
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
        if settled && tools_registered(base, &apps, headers)? {
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
fn tools_registered(base: &str, apps: &Value, headers: &[(&str, &str)]) -> anyhow::Result<bool> {
    for app in apps["apps"].as_array().into_iter().flatten() {
        if app["lifecycle"] != "Running" {
            continue;
        }
        let id = app["id"].as_str().unwrap_or_default();
        let detail = http::request("GET", &format!("{base}/apps/{id}"), headers, None)?.json()?;
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

/// Builds the binaries the stack runs.
pub(crate) fn build(root: &Path) -> anyhow::Result<()> {
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
    )
}

/// How to start the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackOptions<'a> {
    /// The folder for the configuration and app folders (cleared first).
    pub(crate) folder: &'a Path,
    /// The folder for the programs' logs.
    pub(crate) logs: &'a Path,
    /// Options for `grocery-inventory` before its `http` mode (e.g. `--csp-connect-domain`).
    pub(crate) grocery_options: &'a [&'a str],
    /// A bearer token for the gateway (`MCPAPP_TOKEN`), if any.
    pub(crate) token: Option<&'a str>,
}

/// `grocery-inventory` over HTTP and the gateway in front of it, with every app settled.
#[derive(Debug)]
pub(crate) struct Stack {
    /// The gateway; declared first so that it stops first.
    pub(crate) gateway: Running,
    /// The grocery app.
    pub(crate) grocery: Running,
    /// The grocery app's MCP URL (`http://HOST:PORT/mcp`).
    pub(crate) grocery_url: String,
    /// The gateway's base URL (`http://HOST:PORT`).
    pub(crate) base: String,
    /// The gateway's log.
    pub(crate) gateway_log: PathBuf,
    /// `GET /apps` once everything settled.
    pub(crate) apps: Value,
}

/// Starts `grocery-inventory`, lays out `options.folder`, starts the gateway and waits for
/// the apps and their tools.
pub(crate) fn start(root: &Path, options: &StackOptions<'_>) -> anyhow::Result<Stack> {
    let bin = target_dir(root).join("debug");
    std::fs::create_dir_all(options.logs)
        .with_context(|| format!("creating {}", options.logs.display()))?;

    println!("\n==> starting grocery-inventory over HTTP");
    let mut grocery_args = options.grocery_options.to_vec();
    grocery_args.extend(["http", "--bind", "127.0.0.1:0"]);
    let grocery_log = options.logs.join("grocery-inventory.log");
    let (grocery, grocery_url) = start_listening(&Program {
        name: "grocery-inventory",
        path: &bin.join("grocery-inventory"),
        args: &grocery_args,
        envs: &[],
        log: &grocery_log,
    })?;
    println!("  {grocery_url}");
    let config = lay_out(options.folder, &grocery_url, &bin.join("fixture-app"))?;
    println!("  app folder: {}", options.folder.display());

    println!("\n==> starting the gateway");
    let gateway_log = options.logs.join("gateway.log");
    let config_arg = config.display().to_string();
    let envs: Vec<(&str, &str)> = options
        .token
        .map(|token| ("MCPAPP_TOKEN", token))
        .into_iter()
        .collect();
    let (gateway, base) = start_listening(&Program {
        name: "mcpapp-gateway",
        path: &bin.join("mcpapp-gateway"),
        args: &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
        envs: &envs,
        log: &gateway_log,
    })?;
    let bearer = options.token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .as_deref()
        .map(|b| ("Authorization", b))
        .into_iter()
        .collect();
    let apps = wait_for_apps(&base, &headers)?;
    Ok(Stack {
        gateway,
        grocery,
        grocery_url,
        base,
        gateway_log,
        apps,
    })
}
