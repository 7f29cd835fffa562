//! `cargo xtask bench proxy [--clients N,M,..] [--calls K] [--apps N] [--repeat R] [--short]
//! [--json FILE]`: a load benchmark of the gateway's call paths, each beside the direct path it
//! stands in for, in one run on release builds.
//!
//! 1. Installs `@modelcontextprotocol/server-everything` (pinned, `bench/everything.rs`) when
//!    the conformance kit's Node can be had, else its rows are skipped with a note; builds
//!    `mcpapp-gateway`, `fixture-app`, `grocery-inventory` and `loadgen` in release mode.
//! 2. Starts the HTTP apps (fixture-app; fixture-app `--nagle`, serving without
//!    `TCP_NODELAY` as a plain `axum::serve` does; grocery-inventory; server-everything) and a
//!    real `mcpapp-gateway serve` hosting each app over stdio (where it has a stdio mode) and
//!    over HTTP.
//! 3. For every path and every client count, runs `loadgen` (rmcp's client; see
//!    `test-apps/loadgen`): N concurrent clients each make W warm-up calls and then K measured
//!    calls of a cheap tool (`echo` of fixture-app and server-everything, `get_stores {id: 1}`
//!    of grocery-inventory). The paths: each app directly over stdio (loadgen spawns it; N
//!    callers on one shared session, as the gateway's one upstream session) and over HTTP (N
//!    sessions); the same through `/apps/mcp/{appId}` (N browser sessions on the app's one
//!    upstream session); `/mcp`, the aggregated endpoint; `POST /apps/chat` turns of
//!    `/call TOOL {json}` in offline mode; and, inside loadgen's own process with the library
//!    crates, a port's round trip against the agent's tool call (`registry`), the gateway's
//!    rmcp client (`handle`) and a whole offline agent turn (`turn`).
//!    Beside them, the HTTP floor: loadgen's own canned-answer endpoint (`loadgen floor`, no
//!    MCP server behind it), called the same way; every HTTP client row through the gateway is
//!    compared with it again in a second table, which leaves what the gateway and the app add
//!    to the HTTP hop every such client pays anyway.
//! 4. Start-up and memory (`bench/startup.rs`): N stdio apps to Running after `serve` starts,
//!    against loadgen spawning and handshaking the same N; the gateway's VmRSS with N apps and
//!    with one. `cargo xtask bench startup` runs only this part.
//! 5. Prints a table per measurement (`bench/report.rs`; min–max over the runs with
//!    `--repeat`) with each path compared with its baseline, and writes everything to
//!    `target/bench/proxy.json` (or `--json FILE`).
//!
//! Nothing here asserts a time: the run fails only when calls fail or something does not
//! start. `--short` is the CI mode (1 and 4 clients, 50 calls each, 5 apps, debug builds
//! unless `--release`): it shows that every path works, not how fast. Every program it starts is stopped at the end, on failure
//! and on SIGINT/SIGTERM. Logs are under `target/bench/logs/`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::stack::{self, Group, Program, Running, Stdout, start_listening, target_dir};

mod everything;
mod report;
mod startup;

pub(crate) use startup::run as run_startup;

/// The log filter of the gateway: what `serve` logs by default.
pub(crate) const GATEWAY_LOG: &str = "info,rmcp=warn,tower_http=warn";
/// The apps' log filter, in every path alike.
const APP_LOG: &str = "warn";
/// Bound of one loadgen run (it takes seconds; this only stops a hung one).
const LOADGEN_RUN: Duration = Duration::from_secs(900);
/// How long an HTTP app may take to answer after starting.
const APP_STARTUP: Duration = Duration::from_secs(60);

const USAGE: &str = "usage: cargo xtask bench proxy [--clients N,M,..] [--calls K] [--warmup W] \
                     [--apps N] [--repeat R] [--short] [--release | --debug] [--json FILE]";

/// `cargo xtask bench proxy` options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    clients: Vec<usize>,
    calls: usize,
    warmup: usize,
    apps: usize,
    repeat: usize,
    short: bool,
    /// Release builds (the default); `--short` uses the debug builds the tests already made,
    /// since its figures are not read.
    release: bool,
    json: Option<PathBuf>,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let short = args.iter().any(|a| a == "--short");
        let mut options = Self {
            clients: if short { vec![1, 4] } else { vec![1, 16] },
            calls: if short { 50 } else { 300 },
            warmup: if short { 5 } else { 20 },
            apps: if short { 5 } else { 50 },
            repeat: 1,
            short,
            release: !short,
            json: None,
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut value = |name: &str| {
                rest.next()
                    .with_context(|| format!("{name} needs a value\n{USAGE}"))
            };
            let number = |name: &str, text: &str| -> anyhow::Result<usize> {
                let n: usize = text
                    .parse()
                    .with_context(|| format!("{name} takes a positive number, not `{text}`"))?;
                ensure!(n > 0, "{name} takes a positive number, not 0");
                Ok(n)
            };
            match arg.as_str() {
                "--short" => {}
                "--release" => options.release = true,
                "--debug" => options.release = false,
                "--clients" => {
                    let text = value("--clients")?;
                    options.clients = text
                        .split(',')
                        .map(|n| number("--clients", n.trim()))
                        .collect::<anyhow::Result<_>>()?;
                }
                "--calls" => options.calls = number("--calls", value("--calls")?)?,
                "--warmup" => {
                    let text = value("--warmup")?;
                    options.warmup = text
                        .parse()
                        .with_context(|| format!("--warmup takes a number, not `{text}`"))?;
                }
                "--apps" => options.apps = number("--apps", value("--apps")?)?,
                "--repeat" => options.repeat = number("--repeat", value("--repeat")?)?,
                "--json" => options.json = Some(PathBuf::from(value("--json")?)),
                other => bail!("unknown option `{other}`\n{USAGE}"),
            }
        }
        Ok(options)
    }
}

/// Runs `loadgen` to completion and reads its rows.
pub(crate) struct Loadgen<'a> {
    path: PathBuf,
    logs: &'a Path,
    runs: std::cell::Cell<usize>,
}

impl<'a> Loadgen<'a> {
    /// loadgen at `path`, logging under `logs`.
    pub(crate) fn new(path: PathBuf, logs: &'a Path) -> Self {
        Self {
            path,
            logs,
            runs: std::cell::Cell::new(0),
        }
    }

    /// Runs `loadgen ARGS` (its own process group, so the apps it spawns stop with it); its
    /// output goes to a log named after `name`.
    pub(crate) fn run(&self, name: &str, args: &[&str]) -> anyhow::Result<Vec<Value>> {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let safe: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let log = self.logs.join(format!("loadgen-{n:03}-{safe}.log"));
        let mut running = Running::start(
            &Program {
                name: "loadgen",
                path: &self.path,
                args,
                envs: &[("RUST_LOG", APP_LOG)],
                log: &log,
            },
            Group::Own,
            Stdout::Logged,
        )?;
        let status = running.wait_within(LOADGEN_RUN)?;
        let text =
            std::fs::read_to_string(&log).with_context(|| format!("reading {}", log.display()))?;
        ensure!(
            status.success(),
            "loadgen {name} failed ({status}): {}",
            text.trim()
        );
        let line = text
            .lines()
            .rev()
            .find(|l| l.starts_with("{\"rows\""))
            .with_context(|| format!("loadgen printed no result; see {}", log.display()))?;
        let result: Value = serde_json::from_str(line).context("loadgen's result")?;
        Ok(result["rows"].as_array().cloned().unwrap_or_default())
    }
}

/// An app measured on its paths.
struct App {
    /// A short key for ids (`fixture`).
    key: &'static str,
    /// Its name in the tables.
    name: &'static str,
    /// The cheap tool and its arguments.
    tool: &'static str,
    args: &'static str,
    /// How to start it over stdio (program, arguments); `None` for an HTTP-only variant.
    stdio: Option<(String, Vec<String>)>,
    /// Its Streamable HTTP URL (started by this task).
    http: String,
    /// A folder its stdio process reads outside its app folder (a package installed under
    /// `target/`), granted to it in the app sandbox as an operator would.
    reads: Option<PathBuf>,
}

/// What one path runs: loadgen's arguments after the load options, and the path's baseline.
struct PathRun {
    id: String,
    label: String,
    baseline: Option<String>,
    /// How the tables name the baseline.
    baseline_name: &'static str,
    /// `calls`, `inproc` or `chat`.
    command: &'static str,
    /// The tool (prefixed for `/mcp` and chat) and its arguments.
    tool: String,
    args: &'static str,
    /// Extra loadgen arguments (target, `--shared`, `--base`).
    extra: Vec<String>,
    /// Also compared with the HTTP floor (an HTTP client's path through the gateway).
    floored: bool,
}

/// The floor's row id, and the suffix of the copies of rows compared with it.
const FLOOR_ID: &str = "floor/direct";
const FLOORED: &str = "~floor";

/// Loadgen's target words for an app over stdio.
fn stdio_target(stdio: &(String, Vec<String>)) -> Vec<String> {
    let mut target = vec!["stdio".to_owned(), stdio.0.clone()];
    target.extend(stdio.1.iter().cloned());
    target
}

/// The paths of one app (see the module documentation).
fn app_paths(app: &App, base: &str) -> Vec<PathRun> {
    let stdio_id = format!("{}-stdio", app.key);
    let http_id = format!("{}-http", app.key);
    let direct_stdio = format!("{stdio_id}/direct");
    let direct_http = format!("{http_id}/direct");
    let run = |id: String,
               label: String,
               baseline: Option<(&String, &'static str)>,
               extra: Vec<String>| PathRun {
        id,
        label,
        baseline: baseline.map(|(b, _)| b.clone()),
        baseline_name: baseline.map_or("", |(_, name)| name),
        command: "calls",
        tool: app.tool.to_owned(),
        args: app.args,
        extra,
        floored: false,
    };
    let mut paths = Vec::new();
    if let Some(stdio) = &app.stdio {
        let mut shared = vec!["--shared".to_owned()];
        shared.extend(stdio_target(stdio));
        paths.push(run(
            direct_stdio.clone(),
            format!("{} stdio, direct (one shared session)", app.name),
            None,
            shared,
        ));
        paths.push(PathRun {
            floored: true,
            ..run(
                format!("{stdio_id}/proxy"),
                format!("{} stdio, /apps/mcp/{{appId}}", app.name),
                Some((&direct_stdio, "direct stdio")),
                vec!["http".to_owned(), format!("{base}/apps/mcp/{stdio_id}")],
            )
        });
    }
    paths.push(run(
        direct_http.clone(),
        format!("{} HTTP, direct", app.name),
        None,
        vec!["http".to_owned(), app.http.clone()],
    ));
    paths.push(PathRun {
        floored: true,
        ..run(
            format!("{http_id}/proxy"),
            format!("{} HTTP, /apps/mcp/{{appId}}", app.name),
            Some((&direct_http, "direct HTTP")),
            vec!["http".to_owned(), format!("{base}/apps/mcp/{http_id}")],
        )
    });
    paths
}

/// The gateway's other paths to one app over one transport: `/mcp`, the chat, in-process.
fn gateway_paths(app: &App, transport: &str, base: &str) -> Vec<PathRun> {
    let id = format!("{}-{transport}", app.key);
    let direct = format!("{id}/direct");
    let (shown, direct_name) = if transport == "stdio" {
        ("stdio", "direct stdio")
    } else {
        ("HTTP", "direct HTTP")
    };
    let prefixed = format!("{id}.{}", app.tool);
    let target = match &app.stdio {
        Some(stdio) if transport == "stdio" => stdio_target(stdio),
        _ => vec!["http".to_owned(), app.http.clone()],
    };
    vec![
        PathRun {
            id: format!("{id}/mcp"),
            label: format!("/mcp → {} {shown}", app.name),
            baseline: Some(direct.clone()),
            baseline_name: direct_name,
            command: "calls",
            tool: prefixed.clone(),
            args: app.args,
            extra: vec!["http".to_owned(), format!("{base}/mcp")],
            floored: true,
        },
        PathRun {
            id: format!("{id}/chat"),
            label: format!("POST /apps/chat → {} {shown}", app.name),
            baseline: Some(direct),
            baseline_name: direct_name,
            command: "chat",
            tool: prefixed,
            args: app.args,
            extra: vec!["--base".to_owned(), base.to_owned()],
            floored: false,
        },
        PathRun {
            id: format!("{id}/inproc"),
            label: format!("in-process, {} {shown}:", app.name),
            baseline: None,
            baseline_name: "port",
            command: "inproc",
            tool: app.tool.to_owned(),
            args: app.args,
            extra: target,
            floored: false,
        },
    ]
}

/// Runs one path with `clients` callers; returns its rows with ids and baselines.
fn measure_path(
    loadgen: &Loadgen<'_>,
    path: &PathRun,
    clients: usize,
    options: &Options,
) -> anyhow::Result<Vec<Value>> {
    let (clients_text, calls, warmup) = (
        clients.to_string(),
        options.calls.to_string(),
        options.warmup.to_string(),
    );
    let mut args: Vec<&str> = vec![
        path.command,
        "--clients",
        &clients_text,
        "--calls",
        &calls,
        "--warmup",
        &warmup,
        "--tool",
        &path.tool,
        "--args",
        path.args,
        "--label",
        &path.label,
    ];
    args.extend(path.extra.iter().map(String::as_str));
    let started = Instant::now();
    let mut rows = loadgen.run(&path.id, &args)?;
    for row in &mut rows {
        let label = row["path"].as_str().unwrap_or_default().to_owned();
        if path.command == "inproc" {
            // loadgen names its in-process rows `LABEL port`, `LABEL handle`, ...; each is
            // compared with the port's round trip.
            let part = label.rsplit(' ').next().unwrap_or_default().to_owned();
            row["id"] = json!(format!("{}/{part}", path.id));
            if part != "port" {
                row["baseline"] = json!(format!("{}/port", path.id));
                row["baselineName"] = json!(path.baseline_name);
            }
        } else {
            row["id"] = json!(path.id);
            row["baseline"] = json!(path.baseline);
            row["baselineName"] = json!(path.baseline_name);
        }
        println!(
            "  {label:<55} ×{clients:<3} p50 {:>8} µs  p99 {:>8} µs  {:>6} calls/s{}",
            row["p50Us"],
            row["p99Us"],
            row["rps"],
            match row["errors"].as_u64() {
                Some(0) | None => String::new(),
                Some(n) => format!("  {n} FAILED: {}", row["firstError"]),
            }
        );
    }
    if path.floored {
        let copies: Vec<Value> = rows
            .iter()
            .map(|row| {
                let mut copy = row.clone();
                copy["id"] = json!(format!("{}{FLOORED}", path.id));
                copy["baseline"] = json!(FLOOR_ID);
                copy["baselineName"] = json!("HTTP floor");
                copy
            })
            .collect();
        rows.extend(copies);
    }
    if started.elapsed() > Duration::from_secs(60) {
        println!("    (took {:.0} s)", started.elapsed().as_secs_f64());
    }
    Ok(rows)
}

/// The HTTP apps, the gateway and every path, once.
fn proxy_run(
    bin: &Path,
    out: &Path,
    logs: &Path,
    loadgen: &Loadgen<'_>,
    options: &Options,
    everything: Option<&everything::Everything>,
) -> anyhow::Result<(Vec<Value>, u64)> {
    let fixture = bin.join("fixture-app");
    let grocery = bin.join("grocery-inventory");
    let app_env = [("RUST_LOG", APP_LOG)];

    println!("\n==> starting the HTTP apps");
    let start_app = |name: &'static str, path: &Path, options: &[&str], log: &str| {
        let mut args = vec!["http", "--bind", "127.0.0.1:0"];
        args.extend_from_slice(options);
        start_listening(&Program {
            name,
            path,
            args: &args,
            envs: &app_env,
            log: &logs.join(log),
        })
    };
    let (_fixture_http, fixture_url) = start_app("fixture-app", &fixture, &[], "fixture-http.log")?;
    // The same server without TCP_NODELAY, as a plain `axum::serve` runs: the gateway must not
    // stall against it (docs/performance.md).
    let (_nagle_http, nagle_url) = start_app(
        "fixture-app --nagle",
        &fixture,
        &["--nagle"],
        "fixture-nagle-http.log",
    )?;
    let (_grocery_http, grocery_url) =
        start_app("grocery-inventory", &grocery, &[], "grocery-http.log")?;
    let (_floor, floor_url) = start_listening(&Program {
        name: "loadgen floor",
        path: &loadgen.path,
        args: &["floor", "--bind", "127.0.0.1:0"],
        envs: &app_env,
        log: &logs.join("floor.log"),
    })?;
    let mut apps = vec![
        App {
            key: "fixture",
            name: "fixture-app",
            tool: "echo",
            args: r#"{"message":"hello"}"#,
            stdio: Some((fixture.display().to_string(), vec!["stdio".to_owned()])),
            http: fixture_url,
            reads: None,
        },
        App {
            key: "fixture-nagle",
            name: "fixture-app --nagle",
            tool: "echo",
            args: r#"{"message":"hello"}"#,
            stdio: None,
            http: nagle_url,
            reads: None,
        },
        App {
            key: "grocery",
            name: "grocery-inventory",
            tool: "get_stores",
            args: r#"{"id":1}"#,
            stdio: Some((grocery.display().to_string(), vec!["stdio".to_owned()])),
            http: grocery_url,
            reads: None,
        },
    ];
    let mut _everything_http = None;
    if let Some(everything) = everything {
        let port = stack::free_port()?.to_string();
        let script = everything.script.display().to_string();
        let log = logs.join("everything-http.log");
        let mut running = Running::start(
            &Program {
                name: "server-everything",
                path: &everything.node,
                args: &[&script, "streamableHttp"],
                envs: &[("PORT", &port)],
                log: &log,
            },
            Group::Own,
            Stdout::Logged,
        )?;
        let url = format!("http://127.0.0.1:{port}/mcp");
        stack::wait_answering(&mut running, &url, &log, APP_STARTUP)?;
        _everything_http = Some(running);
        apps.push(App {
            key: "everything",
            name: "server-everything",
            tool: "echo",
            args: r#"{"message":"hello"}"#,
            stdio: Some((
                everything.node.display().to_string(),
                vec![script, "stdio".to_owned()],
            )),
            http: url,
            reads: everything
                .script
                .ancestors()
                .find(|dir| dir.file_name().is_some_and(|n| n == "node_modules"))
                .and_then(Path::parent)
                .map(Path::to_path_buf),
        });
    }
    for app in &apps {
        println!("  {} {}", app.name, app.http);
    }

    println!("\n==> starting the gateway with every app over stdio and HTTP");
    let config = lay_out(&out.join("gateway"), &apps)?;
    let config_arg = config.display().to_string();
    let gateway_log = logs.join("gateway.log");
    let (mut gateway, base) = start_listening(&Program {
        name: "mcpapp-gateway",
        path: &bin.join("mcpapp-gateway"),
        args: &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
        envs: &[("RUST_LOG", GATEWAY_LOG)],
        log: &gateway_log,
    })?;
    let listed = stack::wait_for_apps(&base, &[])?;
    for app in listed["apps"].as_array().into_iter().flatten() {
        ensure!(
            app["lifecycle"] == "Running",
            "the gateway did not run {}: {} ({}); see {}",
            app["id"],
            app["lifecycle"],
            app["lastError"],
            gateway_log.display()
        );
    }
    println!("  {base}");

    let mut paths = vec![PathRun {
        id: FLOOR_ID.to_owned(),
        label: "HTTP floor (loadgen floor: canned answers, no server)".to_owned(),
        baseline: None,
        baseline_name: "",
        command: "calls",
        tool: "echo".to_owned(),
        args: r#"{"message":"hello"}"#,
        extra: vec!["http".to_owned(), floor_url],
        floored: false,
    }];
    for app in &apps {
        paths.extend(app_paths(app, &base));
    }
    // The aggregated endpoint, the chat and the in-process paths for one stdio and one HTTP
    // app (both Rust, both rmcp).
    for (key, transport) in [("fixture", "stdio"), ("grocery", "http")] {
        if let Some(app) = apps.iter().find(|a| a.key == key) {
            paths.extend(gateway_paths(app, transport, &base));
        }
    }

    println!(
        "\n==> {} paths × clients {:?} × {} calls (+{} warm-up) each",
        paths.len(),
        options.clients,
        options.calls,
        options.warmup
    );
    let mut rows = Vec::new();
    for path in &paths {
        for &clients in &options.clients {
            rows.extend(measure_path(loadgen, path, clients, options)?);
        }
    }
    let rss = startup::vm_rss_kib(gateway.id())?;
    println!("  the gateway's RSS after the load: {rss} KiB");
    gateway.stop();
    Ok((rows, rss))
}

/// The gateway's configuration: each app over stdio (`KEY-stdio`) and over HTTP
/// (`KEY-http`), with the id as tool prefix so that `/mcp` names are unique.
fn lay_out(folder: &Path, apps: &[App]) -> anyhow::Result<PathBuf> {
    if folder.exists() {
        std::fs::remove_dir_all(folder)
            .with_context(|| format!("clearing {}", folder.display()))?;
    }
    for app in apps {
        let stdio = format!("{}-stdio", app.key);
        let http = format!("{}-http", app.key);
        if let Some((command, arguments)) = &app.stdio {
            stack::write_json(
                &folder.join(format!("apps/{stdio}/openclaw.mcpapp.json")),
                &json!({
                    "id": stdio,
                    "name": format!("{} (stdio)", app.name),
                    "version": "1.0.0",
                    "transport": "stdio",
                    "command": command,
                    "arguments": arguments,
                    "toolNamePrefix": format!("{stdio}."),
                    "environment": {"RUST_LOG": APP_LOG},
                    "requestTimeoutSeconds": 60,
                }),
            )?;
        }
        stack::write_json(
            &folder.join(format!("apps/{http}/openclaw.mcpapp.json")),
            &json!({
                "id": http,
                "name": format!("{} (HTTP)", app.name),
                "version": "1.0.0",
                "transport": "http",
                "url": app.http,
                "toolNamePrefix": format!("{http}."),
                "requestTimeoutSeconds": 60,
            }),
        )?;
    }
    let entries: serde_json::Map<String, Value> = apps
        .iter()
        .filter_map(|app| {
            let reads = app.reads.as_ref()?.display().to_string();
            let grant = json!({ "Isolation": { "Read": [reads] } });
            Some((format!("{}-stdio", app.key), grant))
        })
        .collect();
    let config = folder.join("appsettings.json");
    stack::write_json(
        &config,
        &json!({
            // The apps' HOME folders stay in the bench's folder, not the user's home.
            "McpApps": {
                "Enabled": true,
                "DiscoveryPaths": ["./apps"],
                "StateDirectory": "./state",
                "Entries": entries,
            }
        }),
    )?;
    Ok(config)
}

/// The machine, for the record.
fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        });
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .map(|rest| rest.trim().to_owned())
        });
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu": cpu,
        "memTotal": memory,
        "loadAverage": std::fs::read_to_string("/proc/loadavg").ok().map(|s| s.trim().to_owned()),
    })
}

pub(crate) fn print_startup(startups: &[Value]) {
    let values = |f: &dyn Fn(&Value) -> Option<f64>| -> String {
        let mut list: Vec<f64> = startups.iter().filter_map(f).collect();
        list.sort_by(f64::total_cmp);
        // The median says more than the extremes on a loaded machine.
        let median = match list.len() {
            0 => None,
            n if n % 2 == 1 => list.get(n / 2).copied(),
            n => list
                .get(n / 2 - 1)
                .zip(list.get(n / 2))
                .map(|(a, b)| (a + b) / 2.0),
        };
        match (list.first(), list.last(), median) {
            (Some(a), Some(b), _) if (a - b).abs() < f64::EPSILON => format!("{a}"),
            (Some(a), Some(b), Some(m)) => {
                format!("{a}–{b} (median {})", (m * 1000.0).round() / 1000.0)
            }
            _ => "?".to_owned(),
        }
    };
    let apps = startups.first().map_or(Value::Null, |s| s["apps"].clone());
    println!("\n==> start-up and memory ({apps} stdio apps)\n");
    println!("| measure | value |\n|---|--:|");
    println!(
        "| gateway: `serve` started → all Running, polled (s) | {} |",
        values(&|s| s["gateway"]["polledSeconds"].as_f64())
    );
    println!(
        "| gateway: `serve` started → last Running, its own times (s) | {} |",
        values(&|s| s["gateway"]["ownSeconds"].as_f64())
    );
    println!(
        "| gateway: first discovered → last Running (s) | {} |",
        values(&|s| s["gateway"]["supervisorSeconds"].as_f64())
    );
    if startups
        .iter()
        .any(|s| s["gatewayIsolationOff"].is_object())
    {
        println!(
            "| gateway, isolation off: `serve` started → all Running, polled (s) | {} |",
            values(&|s| s["gatewayIsolationOff"]["polledSeconds"].as_f64())
        );
        println!(
            "| gateway, isolation off: `serve` started → last Running, its own times (s) | {} |",
            values(&|s| s["gatewayIsolationOff"]["ownSeconds"].as_f64())
        );
        println!(
            "| isolation on / off, polled (ratio) | {} |",
            values(&|s| s["isolationRatio"]["polled"].as_f64())
        );
        println!(
            "| isolation on / off, its own times (ratio) | {} |",
            values(&|s| s["isolationRatio"]["own"].as_f64())
        );
        println!(
            "| gateway and apps: CPU until all Running, isolation on (ms) | {} |",
            values(&|s| s["gateway"]["cpuMs"].as_f64())
        );
        println!(
            "| gateway and apps: CPU until all Running, isolation off (ms) | {} |",
            values(&|s| s["gatewayIsolationOff"]["cpuMs"].as_f64())
        );
        println!(
            "| isolation on / off, CPU (ratio) | {} |",
            values(&|s| s["isolationRatio"]["cpu"].as_f64())
        );
    }
    println!(
        "| loadgen: spawn + initialize + tools/list of all, concurrently (s) | {} |",
        values(&|s| s["direct"]["allSeconds"].as_f64())
    );
    println!(
        "| gateway VmRSS, {apps} apps Running (MiB) | {} |",
        values(&|s| s["gateway"]["rssKiB"]
            .as_f64()
            .map(|k| (k / 1024.0 * 10.0).round() / 10.0))
    );
    println!(
        "| gateway VmRSS, 1 app Running (MiB) | {} |",
        values(&|s| s["gatewayOneApp"]["rssKiB"]
            .as_f64()
            .map(|k| (k / 1024.0 * 10.0).round() / 10.0))
    );
    println!(
        "| gateway RssAnon (heap, stacks), {apps} apps Running (MiB) | {} |",
        values(&|s| s["gateway"]["anonKiB"]
            .as_f64()
            .map(|k| (k / 1024.0 * 10.0).round() / 10.0))
    );
    println!(
        "| gateway RssAnon (heap, stacks), 1 app Running (MiB) | {} |",
        values(&|s| s["gatewayOneApp"]["anonKiB"]
            .as_f64()
            .map(|k| (k / 1024.0 * 10.0).round() / 10.0))
    );
}

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let options = Options::parse(args)?;
    stack::stop_all_on_signal()?;
    let started = Instant::now();
    let target = target_dir(root);
    let out = target.join("bench");
    let logs = out.join("logs");
    if logs.exists() {
        std::fs::remove_dir_all(&logs).with_context(|| format!("clearing {}", logs.display()))?;
    }
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;

    let mut notes = Vec::new();
    let everything = match everything::install(root, &target) {
        Ok(everything) => {
            println!(
                "  @modelcontextprotocol/server-everything {}",
                everything.version
            );
            Some(everything)
        }
        Err(err) => {
            let note = format!("server-everything rows skipped: {err:#}");
            println!("  {note}");
            notes.push(note);
            None
        }
    };
    let mut build = vec!["build"];
    if options.release {
        build.push("--release");
    }
    build.extend([
        "-p",
        "mcpapp-gateway",
        "-p",
        "fixture-app",
        "-p",
        "grocery-inventory",
        "-p",
        "loadgen",
    ]);
    crate::util::cargo(root, &build)?;
    let bin = target.join(if options.release { "release" } else { "debug" });
    if !options.release {
        let note = "debug builds (--short or --debug): the figures show that every path works, not how fast it is".to_owned();
        println!("  {note}");
        notes.push(note);
    }
    let loadgen = Loadgen::new(bin.join("loadgen"), &logs);

    let mut runs = Vec::new();
    let mut startups = Vec::new();
    let mut rss_after_load = Vec::new();
    for run in 1..=options.repeat {
        println!("\n==> run {run} of {}", options.repeat);
        let (rows, rss) = proxy_run(&bin, &out, &logs, &loadgen, &options, everything.as_ref())?;
        runs.push(rows);
        rss_after_load.push(rss);
        startups.push(startup::measure(
            &bin,
            &out,
            &logs,
            &loadgen,
            startup::Apps {
                count: options.apps,
                isolation: startup::Isolation::On,
                fresh_state: false,
            },
            1,
        )?);
    }

    let summary = report::summarize(&runs);
    println!(
        "\n==> the paths ({} run{}; ranges are min–max over the runs)\n",
        options.repeat,
        if options.repeat == 1 { "" } else { "s" }
    );
    let (floored, direct): (Vec<Value>, Vec<Value>) = summary
        .iter()
        .cloned()
        .partition(|entry| entry["id"].as_str().is_some_and(|id| id.ends_with(FLOORED)));
    print!("{}", report::render(&direct));
    println!(
        "\n==> the HTTP clients' paths through the gateway against the HTTP floor (the same runs)\n"
    );
    print!("{}", report::render(&floored));
    print_startup(&startups);
    for note in &notes {
        println!("\nnote: {note}");
    }

    let json_path = options
        .json
        .clone()
        .unwrap_or_else(|| out.join("proxy.json"));
    let failed: u64 = summary.iter().filter_map(|e| e["errors"].as_u64()).sum();
    stack::write_json(
        &json_path,
        &json!({
            "machine": machine(),
            "unixTime": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default(),
            "options": {
                "clients": options.clients,
                "callsPerClient": options.calls,
                "warmupPerClient": options.warmup,
                "startupApps": options.apps,
                "repeat": options.repeat,
                "short": options.short,
                "release": options.release,
            },
            "serverEverything": everything.as_ref().map(|e| e.version.clone()),
            "notes": notes,
            "summary": summary,
            "runs": runs,
            "gatewayRssAfterLoadKiB": rss_after_load,
            "startup": startups,
            "failedCalls": failed,
        }),
    )?;
    println!("\nresults: {}", json_path.display());
    println!("logs: {}", logs.display());
    println!("bench proxy took {:.0} s", started.elapsed().as_secs_f64());
    ensure!(
        failed == 0,
        "{failed} calls failed (see the table and {})",
        logs.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn defaults_and_the_short_mode() {
        let full = Options::parse(&[]).unwrap();
        assert_eq!(full.clients, [1, 16]);
        assert_eq!((full.calls, full.apps, full.repeat), (300, 50, 1));
        let short = Options::parse(&args(&["--short"])).unwrap();
        assert_eq!(short.clients, [1, 4]);
        assert_eq!((short.calls, short.apps), (50, 5));
        assert!(short.short);
        // Release builds unless told, except in the short mode, whose figures nobody reads.
        assert!(full.release);
        assert!(!short.release);
        assert!(
            Options::parse(&args(&["--short", "--release"]))
                .unwrap()
                .release
        );
        assert!(!Options::parse(&args(&["--debug"])).unwrap().release);
    }

    #[test]
    fn options_override_the_mode_wherever_they_stand() {
        let options = Options::parse(&args(&[
            "--clients",
            "1,8, 32",
            "--calls",
            "7",
            "--short",
            "--json",
            "x.json",
            "--repeat",
            "3",
            "--warmup",
            "0",
        ]))
        .unwrap();
        assert_eq!(options.clients, [1, 8, 32]);
        assert_eq!((options.calls, options.repeat, options.warmup), (7, 3, 0));
        assert_eq!(options.json, Some(PathBuf::from("x.json")));
    }

    #[test]
    fn bad_options_are_named() {
        for (bad, named) in [
            (&["--clients", "1,x"][..], "--clients"),
            (&["--calls", "0"][..], "--calls"),
            (&["--calls"][..], "--calls needs a value"),
            (&["--fast"][..], "unknown option `--fast`"),
        ] {
            let err = Options::parse(&args(bad)).unwrap_err().to_string();
            assert!(err.contains(named), "{bad:?}: {err}");
        }
    }
}
