//! `cargo xtask conformance [--report-only] [--repeat N] [--sets | --sets-only]`: the
//! official MCP conformance suite (`@modelcontextprotocol/conformance`), run against the same
//! reference server directly and through the gateway, and with the gateway as the client
//! under test.
//!
//! 1. Installs the conformance kit (Node 22, both suites, both reference servers; `kit.rs`)
//!    under `target/conformance`; builds `mcpapp-gateway` and `conformance-client` (with
//!    `conformance-driver`).
//! 2. Starts the kit's reference server on a free port and a real `mcpapp-gateway serve` that
//!    hosts it as the HTTP app `conformance` with an empty tool prefix.
//! 3. Runs every server scenario (`--suite all`) against three targets: the reference server
//!    (`direct`), `/apps/mcp/conformance` (`proxy`) and `/mcp` (`mcp`).
//! 4. Runs the client scenarios `initialize`, `tools_call`, `sse-retry` and
//!    `elicitation-sep1034-client-defaults` with two clients: the TypeScript SDK's
//!    (`reference`, `conformance/reference-client.mjs`) and the gateway's stack
//!    (`gateway`, the `conformance-client` binary).
//! 5. Reads every `checks.json` the suite wrote (`report.rs`), prints one table per kind and
//!    writes `target/conformance/report.json`.
//!
//! That is the 0.1.16 run, CI's. Fails when a server scenario that passes directly fails
//! through the proxy or through `/mcp`, or one of the client scenarios `initialize`,
//! `tools_call` and `sse-retry` that the reference client passes fails with the gateway; the
//! gateway's elicitation (it has no user to ask) is reported and not required. `--repeat N`
//! runs every scenario N times against every target (a scenario passes only when all N pass;
//! one that sometimes passes shows as `flaky k/N`), for telling a race from a steady failure.
//!
//! `--sets` adds, and `--sets-only` runs alone, the 0.2 suite's frozen requirement sets
//! `2025-11-25` and `2026-07-28` on both sides, compared check by check (`sets.rs`): the
//! dual-era reference server directly, through `/apps/mcp/conformance` and through `/mcp`;
//! and every client scenario a `conformance-driver` family drives, with a real gateway as
//! the client under test and an end client through it; and every scored `auth/*` client
//! scenario once, with a gateway as the OAuth client (`auth.rs`). Their tables are printed
//! and go into `report.json` under `sets`; their regressions fail the run like the others.
//!
//! `--report-only` prints the same and exits 0. Everything it starts is stopped at the end,
//! on failure and on SIGINT/SIGTERM (see `stack::stop_all_on_signal`). Results and logs are
//! under `target/conformance/results/` (the sets' under `results/sets/` and `logs/sets/`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::stack::{self, Group, Program, Running, Stdout, start_listening, target_dir};

mod auth;
mod checks;
pub(crate) mod kit;
mod report;
mod requirements;
mod sets;

use kit::Kit;
use report::{Outcome, Table};

/// The app id the reference server is hosted under.
pub(crate) const APP_ID: &str = "conformance";
/// The client scenarios measured, in order (the `auth/*` ones run with the requirement sets,
/// `--sets`, through `conformance-driver`'s `auth` family).
const CLIENT_SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
];
/// The client scenarios the gateway must pass whenever the reference client does. The
/// gateway's own client has no user behind it, so it declines elicitation by design (the
/// host page answers elicitation for its sessions); that scenario is reported only.
const REQUIRED_CLIENT_SCENARIOS: &[&str] = &["initialize", "tools_call", "sse-retry"];
/// The known-good client, embedded so that xtask can put it where the kit's SDK resolves.
const REFERENCE_CLIENT: &str = include_str!("conformance/reference-client.mjs");
/// How long the reference server may take to answer after starting.
const STARTUP: Duration = Duration::from_secs(60);
/// Bound of one run of the suite (it takes seconds; this only stops a hung run).
const SUITE_RUN: Duration = Duration::from_secs(300);
/// The suite's own bound of one client run, in milliseconds (its default is 30 s).
pub(crate) const CLIENT_TIMEOUT_MS: &str = "60000";
/// Failure messages in the printed tables are cut to this many characters.
const MESSAGE_WIDTH: usize = 150;

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let options = Options::parse(args)?;
    stack::stop_all_on_signal()?;
    let started = Instant::now();
    // The kit first: a missing npm is reported before minutes of building.
    let kit = kit::install(root, &target_dir(root).join("conformance"))?;
    println!("  suite: @modelcontextprotocol/conformance {}", kit.version);
    if options.sets != Sets::Off {
        println!(
            "  requirement sets: @modelcontextprotocol/conformance {}",
            kit.version_next
        );
    }
    // conformance-client's package also builds conformance-driver.
    crate::util::cargo(
        root,
        &["build", "-p", "mcpapp-gateway", "-p", "conformance-client"],
    )?;
    let bin = target_dir(root).join("debug");

    let out = kit.dir.join("results");
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;

    let mut report = json!({});
    let mut summary = Vec::new();
    if options.sets != Sets::Only {
        let (json, lines) = suite_0116(&kit, &bin, &out, &logs, options.repeat)?;
        report = json;
        summary.extend(lines);
    }
    if options.sets != Sets::Off {
        let measured = sets::run(&kit, &bin, &out.join("sets"), &logs)?;
        report["sets"] = measured.json;
        summary.extend(measured.regressions);
    }
    let report_path = kit.dir.join("report.json");
    stack::write_json(&report_path, &report)?;
    println!("\nreport: {}", report_path.display());
    println!("results and logs: {}", out.display());
    println!("conformance took {:.1} s", started.elapsed().as_secs_f64());

    if summary.is_empty() {
        println!("conformance: no regressions through the gateway");
        return Ok(());
    }
    if options.report_only {
        println!(
            "conformance: {} regressions (--report-only: not failing)",
            summary.len()
        );
        return Ok(());
    }
    bail!("{} regressions:\n  {}", summary.len(), summary.join("\n  "))
}

/// The 0.1.16 run: the measurement, its tables and its part of the report; the regressions
/// as sentences.
fn suite_0116(
    kit: &Kit,
    bin: &Path,
    out: &Path,
    logs: &Path,
    repeat: usize,
) -> anyhow::Result<(Value, Vec<String>)> {
    let reference_client = kit.dir.join("reference-client.mjs");
    std::fs::write(&reference_client, REFERENCE_CLIENT)
        .with_context(|| format!("writing {}", reference_client.display()))?;

    let measured = measure(kit, bin, out, logs, &reference_client, repeat);
    let Measured { server, client } = measured?;

    let server_regressions = server.regressions("direct", "proxy");
    let mcp_regressions = server.regressions("direct", "mcp");
    let client_regressions: Vec<(String, String)> = client
        .regressions("reference", "gateway")
        .into_iter()
        .filter(|(scenario, _)| REQUIRED_CLIENT_SCENARIOS.contains(&scenario.as_str()))
        .collect();
    print_tables(&server, &client);
    let report = json!({
        "suite": format!("@modelcontextprotocol/conformance {}", kit.version),
        "appId": APP_ID,
        "runsPerScenario": repeat,
        "server": {
            "columns": {
                "direct": "the reference server",
                "proxy": format!("the gateway's /apps/mcp/{APP_ID}"),
                "mcp": "the gateway's /mcp",
            },
            "passing": {
                "direct": server.passing("direct"),
                "proxy": server.passing("proxy"),
                "mcp": server.passing("mcp"),
                "of": server.rows.len(),
            },
            "scenarios": server.to_json(),
        },
        "client": {
            "columns": {
                "reference": "the TypeScript SDK's client",
                "gateway": "the gateway's stack (conformance-client)",
            },
            "scenarios": client.to_json(),
        },
        "regressions": {
            "proxy": pairs(&server_regressions),
            "mcp": pairs(&mcp_regressions),
            "gateway": pairs(&client_regressions),
        },
        "results": out,
    });
    ensure!(
        server.passing("direct") > 0,
        "no server scenario passed against the reference server itself; the harness is broken \
         (see {})",
        logs.display()
    );
    let mut summary = Vec::new();
    for (scenario, message) in &server_regressions {
        summary.push(format!(
            "server scenario {scenario} passes directly but fails through /apps/mcp/{APP_ID}: {message}"
        ));
    }
    for (scenario, message) in &mcp_regressions {
        summary.push(format!(
            "server scenario {scenario} passes directly but fails through /mcp: {message}"
        ));
    }
    for (scenario, message) in &client_regressions {
        summary.push(format!(
            "client scenario {scenario} passes with the reference client but fails with the gateway: {message}"
        ));
    }
    Ok((report, summary))
}

/// Which suites run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sets {
    /// Only 0.1.16 (CI's run).
    Off,
    /// 0.1.16 and the requirement sets (`--sets`).
    Also,
    /// Only the requirement sets (`--sets-only`).
    Only,
}

/// The command line of the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Options {
    /// Print and exit 0 whatever the results.
    report_only: bool,
    /// Runs of every 0.1.16 scenario against every target (a scenario passes when all pass).
    repeat: usize,
    /// Whether the requirement sets run.
    sets: Sets,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut options = Self {
            report_only: false,
            repeat: 1,
            sets: Sets::Off,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--report-only" => options.report_only = true,
                "--repeat" => {
                    options.repeat = args
                        .next()
                        .and_then(|n| n.parse().ok())
                        .filter(|n| (1..=100).contains(n))
                        .context("--repeat takes a number of runs from 1 to 100")?;
                }
                "--sets" => options.sets = Sets::Also,
                "--sets-only" => options.sets = Sets::Only,
                other => bail!(
                    "`conformance` takes `--report-only`, `--repeat N`, `--sets` and \
                     `--sets-only`, got `{other}`"
                ),
            }
        }
        ensure!(
            options.repeat == 1 || options.sets != Sets::Only,
            "--repeat repeats the 0.1.16 run, which --sets-only leaves out"
        );
        Ok(options)
    }
}

fn pairs(list: &[(String, String)]) -> Value {
    list.iter()
        .map(|(scenario, message)| json!({"scenario": scenario, "failure": message}))
        .collect()
}

/// Both tables.
struct Measured {
    server: Table,
    client: Table,
}

/// Starts the reference server and the gateway, runs the suite, and stops both (also when a
/// step fails: they are stopped when dropped).
fn measure(
    kit: &Kit,
    bin: &Path,
    out: &Path,
    logs: &Path,
    reference_client: &Path,
    repeat: usize,
) -> anyhow::Result<Measured> {
    println!("\n==> starting the reference server");
    let server_log = logs.join("reference-server.log");
    let (mut reference, direct) = reference_server(kit, &kit.reference_server, &server_log)?;
    println!("  {direct}");

    println!("\n==> starting the gateway with the reference server as app `{APP_ID}`");
    let (mut gateway, base) = hosting_gateway(bin, &out.join("gateway"), &direct, logs)?;

    let targets = [
        ("direct", direct),
        ("proxy", format!("{base}/apps/mcp/{APP_ID}")),
        ("mcp", format!("{base}/mcp")),
    ];
    let mut server_runs = Vec::new();
    for (name, url) in &targets {
        let mut repeats = Vec::new();
        for run in 1..=repeat {
            println!("\n==> server scenarios against {name} (run {run} of {repeat}): {url}");
            let dir = out.join("server").join(name).join(run.to_string());
            suite(
                kit,
                &[
                    "server",
                    "--url",
                    url,
                    "--suite",
                    "all",
                    "-o",
                    &path_arg(&dir),
                ],
                &logs.join(format!("server-{name}-{run}.log")),
            )?;
            let runs = report::read_runs(&dir, "server-")?;
            println!("  {} scenarios", runs.len());
            repeats.push(runs);
        }
        server_runs.push(report::merge_runs(&repeats));
    }

    let clients = [
        (
            "reference",
            format!("{} {}", no_spaces(&kit.node)?, no_spaces(reference_client)?),
        ),
        (
            "gateway",
            no_spaces(&bin.join("conformance-client"))?.to_owned(),
        ),
    ];
    let mut client_runs = Vec::new();
    for (name, command) in &clients {
        let mut repeats = Vec::new();
        for run in 1..=repeat {
            let dir = out.join("client").join(name).join(run.to_string());
            // One after the other: `sse-retry` measures reconnection delays, which a loaded
            // machine would blur.
            for scenario in CLIENT_SCENARIOS {
                println!(
                    "\n==> client scenario {scenario} with the {name} client (run {run} of {repeat})"
                );
                suite(
                    kit,
                    &[
                        "client",
                        "--command",
                        command,
                        "--scenario",
                        scenario,
                        "--timeout",
                        CLIENT_TIMEOUT_MS,
                        "-o",
                        &path_arg(&dir),
                    ],
                    &logs.join(format!("client-{name}-{scenario}-{run}.log")),
                )?;
            }
            let mut runs = report::read_runs(&dir, "")?;
            for scenario in CLIENT_SCENARIOS {
                if !runs.iter().any(|(s, _)| s == scenario) {
                    runs.push((
                        (*scenario).to_owned(),
                        Outcome::missing("the suite wrote no result"),
                    ));
                }
            }
            repeats.push(runs);
        }
        client_runs.push(report::merge_runs(&repeats));
    }

    println!("\n==> stopping the gateway and the reference server");
    gateway.stop();
    reference.stop();
    Ok(Measured {
        server: Table::join(vec!["direct", "proxy", "mcp"], &server_runs),
        client: Table::join(vec!["reference", "gateway"], &client_runs),
    })
}

/// Starts a reference server (`source`, run by the kit's Node and tsx) on a free port and
/// waits until it answers; returns it and its MCP URL.
pub(crate) fn reference_server(
    kit: &Kit,
    source: &Path,
    log: &Path,
) -> anyhow::Result<(Running, String)> {
    let port = stack::free_port()?;
    let tsx = kit.tsx.display().to_string();
    let server_source = source.display().to_string();
    let mut reference = Running::start(
        &Program {
            name: "reference-server",
            path: &kit.node,
            args: &[&tsx, &server_source],
            envs: &[("PORT", &port.to_string())],
            log,
        },
        // tsx runs the server in a child process of its own: stop the whole group.
        Group::Own,
        Stdout::Logged,
    )?;
    let url = format!("http://localhost:{port}/mcp");
    stack::wait_answering(&mut reference, &url, log, STARTUP)?;
    Ok((reference, url))
}

/// Starts a real `mcpapp-gateway serve` hosting `url` as the HTTP app [`APP_ID`] without a
/// tool prefix (its configuration in `folder`) and waits until the app runs; returns the
/// gateway and its base URL.
pub(crate) fn hosting_gateway(
    bin: &Path,
    folder: &Path,
    url: &str,
    logs: &Path,
) -> anyhow::Result<(Running, String)> {
    let config = lay_out(folder, url)?;
    let config_arg = config.display().to_string();
    let gateway_log = logs.join(format!(
        "{}.log",
        folder
            .file_name()
            .map_or_else(|| "gateway".into(), |n| n.to_string_lossy())
    ));
    let (gateway, base) = start_listening(&Program {
        name: "mcpapp-gateway",
        path: &bin.join("mcpapp-gateway"),
        args: &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
        envs: &[],
        log: &gateway_log,
    })?;
    let apps = stack::wait_for_apps(&base, &[])?;
    let app = apps["apps"]
        .as_array()
        .and_then(|list| list.iter().find(|a| a["id"] == APP_ID))
        .cloned()
        .unwrap_or(Value::Null);
    ensure!(
        app["lifecycle"] == "Running",
        "the gateway did not run the reference server: {} ({}); see {}",
        app["lifecycle"],
        app["lastError"],
        gateway_log.display()
    );
    println!("  {base} ({} tools)", app["toolCount"]);
    Ok((gateway, base))
}

fn print_tables(server: &Table, client: &Table) {
    println!(
        "\n==> server scenarios: the reference server directly, through /apps/mcp/{APP_ID} \
         (proxy) and /mcp (mcp)\n"
    );
    print!("{}", server.render("server scenario", MESSAGE_WIDTH));
    println!("\n==> client scenarios: the TypeScript SDK's client and the gateway's stack\n");
    print!("{}", client.render("client scenario", MESSAGE_WIDTH));
    // What the gateway's side saw, for the failing ones: the adapter's one-line outcome.
    for (scenario, cells) in &client.rows {
        if let Some(seen) = cells
            .get(1)
            .filter(|c| !c.passed)
            .and_then(|c| c.client_stdout.as_deref())
        {
            println!("  the gateway saw in {scenario}: {seen}");
        }
    }
}

/// Runs the 0.1.16 suite's CLI with `args` to completion (its exit status only repeats what
/// the checks say, so only the checks are read). Its output goes to `log`.
fn suite(kit: &Kit, args: &[&str], log: &Path) -> anyhow::Result<()> {
    let status = run_cli(kit, &kit.conformance, args, log)?;
    println!("  suite exited with {status}; log: {}", log.display());
    Ok(())
}

/// Runs a suite's CLI (`script`) with `args` to completion; its output goes to `log`.
pub(crate) fn run_cli(
    kit: &Kit,
    script: &Path,
    args: &[&str],
    log: &Path,
) -> anyhow::Result<std::process::ExitStatus> {
    let script = script.display().to_string();
    let mut all = vec![script.as_str()];
    all.extend_from_slice(args);
    let mut run = Running::start(
        &Program {
            name: "conformance suite",
            path: &kit.node,
            args: &all,
            envs: &[],
            log,
        },
        // Its own group: stopping it also stops the client command it runs.
        Group::Own,
        Stdout::Logged,
    )?;
    run.wait_within(SUITE_RUN)
}

/// Writes the gateway's configuration and the app folder for the reference server.
fn lay_out(folder: &Path, url: &str) -> anyhow::Result<PathBuf> {
    stack::write_json(
        &folder.join(format!("apps/{APP_ID}/openclaw.mcpapp.json")),
        &json!({
            "id": APP_ID,
            "name": "MCP conformance reference server",
            "description": "The conformance suite's everything server, hosted for `cargo xtask conformance`.",
            "version": "1.0.0",
            "transport": "http",
            "url": url,
            // No prefix: the suite calls the server's own tool names through /mcp.
            "toolNamePrefix": "",
            "startupTimeoutSeconds": 30,
            "requestTimeoutSeconds": 30,
        }),
    )?;
    let config = folder.join("appsettings.json");
    stack::write_json(
        &config,
        // The apps' HOME folders stay in this run's folder, not the user's home.
        &json!({ "McpApps": {
            "Enabled": true,
            "DiscoveryPaths": ["./apps"],
            "StateDirectory": "./state",
        } }),
    )?;
    Ok(config)
}

/// The suite splits `--command` at spaces, so a path in it must have none.
pub(crate) fn no_spaces(path: &Path) -> anyhow::Result<&str> {
    let text = path
        .to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))?;
    ensure!(
        !text.contains(char::is_whitespace),
        "the suite splits a client command at spaces, and {text} contains one; \
         use a checkout (or CARGO_TARGET_DIR) whose path has none"
    );
    Ok(text)
}

fn path_arg(path: &Path) -> String {
    path.display().to_string()
}
