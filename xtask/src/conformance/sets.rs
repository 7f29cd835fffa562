//! `cargo xtask conformance --sets`: the suite's frozen requirement sets (`2025-11-25` and
//! `2026-07-28`, `@modelcontextprotocol/conformance` 0.2) on both sides.
//!
//! - **Server side.** The kit's dual-era reference server and a real `mcpapp-gateway serve`
//!   hosting it as the HTTP app `conformance` with an empty prefix; each set runs
//!   (`server --requirements REV`) against the server directly, `/apps/mcp/conformance` and
//!   `/mcp`, one after the other (the scenarios change the server's lists).
//! - **Client side.** Every client scenario of each set that a family of
//!   `conformance-driver` drives (`conformance-driver --list`; today every scored one but
//!   `auth/*`) runs (`client --scenario S --spec-version REV`) with the driver as the
//!   command, once per column: the driver's end client straight at the scenario's server
//!   (`direct`, the baseline), and a real gateway hosting the scenario's server with the end
//!   client on `/apps/mcp/conformance` (`proxy`), on `/mcp` (`mcp`), and on
//!   `/apps/mcp/conformance` speaking the other era (`proxy·legacy` for 2026-07-28,
//!   `proxy·modern` for 2025-11-25). Runs go [`WORKERS`] at a time; `sse-retry`, which
//!   measures reconnection delays, runs alone afterwards.
//!
//! - **`auth/*`** (`auth.rs`): every scored client scenario of the `auth` family, once, with
//!   a gateway as the OAuth client (`--via mcp`), judged on its own: no baseline exists, as
//!   the end client does no OAuth.
//!
//! Every `checks.json` is compared check by check with the baseline column (`checks.rs`).
//! The run regresses when, in a scored scenario, a check that passes directly fails (or goes
//! missing) through a gateway column, or a check fails there that the baseline does not
//! report; when the server's direct failures differ from the kit's expected failures
//! (`expected-failures-2026-07-28.yml`; none for 2025-11-25); and when a driven scored client
//! scenario fails directly (the driver would then not be doing what the scenario needs).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, ensure};
use serde_json::{Value, json};

use super::checks::{Difference, SetTable, read_scenarios};
use super::kit::Kit;
use super::report::shorten;
use super::requirements::{Entry, ExpectedFailures, Leg, RequirementSet};
use super::{APP_ID, CLIENT_TIMEOUT_MS, hosting_gateway, no_spaces, reference_server, run_cli};

/// The requirement sets, oldest first.
const REVISIONS: &[&str] = &["2025-11-25", "2026-07-28"];
/// Client scenario runs at a time (each is the suite, a scenario server, the driver and a
/// gateway; more would only queue on 2 cores).
const WORKERS: usize = 3;
/// Client scenarios that run alone, after the others (their checks time reconnections).
const ALONE: &[&str] = &["sse-retry"];
/// Failure messages in the printed tables are cut to this many characters, and at most this
/// many differences are printed per cell.
const MESSAGE_WIDTH: usize = 150;
const DIFFERENCES_SHOWN: usize = 6;

/// The sets' part of the report and the regressions as sentences.
pub(crate) struct Measured {
    pub(crate) json: Value,
    pub(crate) regressions: Vec<String>,
}

pub(crate) fn run(kit: &Kit, bin: &Path, out: &Path, logs: &Path) -> anyhow::Result<Measured> {
    let logs = logs.join("sets");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let sets = REVISIONS
        .iter()
        .map(|revision| RequirementSet::load(&kit.package_next(), revision))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let expected_2026 = ExpectedFailures::load(&kit.expected_failures_2026_07_28)?;

    let started = Instant::now();
    let server = server_side(kit, bin, out, &logs, &sets)?;
    println!(
        "  server side took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let driver = bin.join("conformance-driver");
    let (driven, auth_driven) = driven_scenarios(&driver)?;
    let client = client_side(kit, &driver, bin, out, &logs, &sets, &driven)?;
    println!(
        "  client side took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let command = format!(
        "{} --via mcp --gateway {}",
        no_spaces(&driver)?,
        no_spaces(&bin.join("mcpapp-gateway"))?
    );
    let auth_outcomes = super::auth::run(kit, &command, out, &logs, &sets, &auth_driven);
    println!(
        "  auth/* scenarios took {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut regressions = Vec::new();
    let mut baselines = serde_json::Map::new();
    let mut not_driven = serde_json::Map::new();
    for (set, (server_table, client_table)) in sets.iter().zip(server.iter().zip(&client)) {
        let expected = if set.revision == "2026-07-28" {
            expected_2026.server.clone()
        } else {
            BTreeSet::new()
        };
        let mismatch = server_table.baseline_mismatch(&expected);
        for line in &mismatch {
            regressions.push(format!(
                "{} server, the reference server directly (the baseline): {line}",
                set.revision
            ));
        }
        baselines.insert(set.revision.clone(), json!(mismatch));
        for (scenario, column, differences) in grouped(server_table.regressions()) {
            regressions.push(format!(
                "{} server scenario {scenario} through {}: {}",
                set.revision,
                endpoint(&column),
                summary(&differences)
            ));
        }
        for row in client_table.rows.iter().filter(|r| r.not_scored.is_none()) {
            if !row.cells[0].clean() {
                regressions.push(format!(
                    "{} client scenario {} fails directly: the driver's end client does not \
                     do what it needs",
                    set.revision, row.scenario
                ));
            }
        }
        for (scenario, column, differences) in grouped(client_table.regressions()) {
            regressions.push(format!(
                "{} client scenario {scenario} with the gateway as the client ({column}): {}",
                set.revision,
                summary(&differences)
            ));
        }
        let missing: Vec<&str> = set
            .client
            .iter()
            .filter(|e| !driven.contains(&e.scenario) && !auth_driven.contains(&e.scenario))
            .map(|e| e.scenario.as_str())
            .collect();
        not_driven.insert(set.revision.clone(), json!(missing));
    }

    print_tables(&sets, &server, &client, &not_driven);
    let (auth_json, auth_regressions) = super::auth::report(&sets, &auth_outcomes);
    regressions.extend(auth_regressions);
    let table_json = |tables: &[SetTable]| -> Value {
        sets.iter()
            .zip(tables)
            .map(|(set, table)| (set.revision.clone(), table.to_json()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let json = json!({
        "suite": format!("@modelcontextprotocol/conformance {}", kit.version_next),
        "appId": APP_ID,
        "server": {
            "columns": {
                "direct": "the dual-era reference server",
                "proxy": format!("the gateway's /apps/mcp/{APP_ID}"),
                "mcp": "the gateway's /mcp",
            },
            "sets": table_json(&server),
            "baselineMismatch": baselines,
        },
        "client": {
            "columns": {
                "direct": "conformance-driver's end client (rmcp) at the scenario's server",
                "proxy": format!("the end client through a gateway's /apps/mcp/{APP_ID}"),
                "mcp": "the end client through a gateway's /mcp",
                "proxy·legacy": "a 2025-11-25 end client through /apps/mcp (2026-07-28 set)",
                "proxy·modern": "a 2026-07-28 end client through /apps/mcp (2025-11-25 set)",
            },
            "sets": table_json(&client),
            "notDriven": not_driven,
        },
        "auth": auth_json,
        "regressions": regressions,
        "results": out,
    });
    Ok(Measured { json, regressions })
}

/// Regressions grouped by scenario and column, in order.
fn grouped(list: Vec<(String, String, Difference)>) -> Vec<(String, String, Vec<Difference>)> {
    let mut out: Vec<(String, String, Vec<Difference>)> = Vec::new();
    for (scenario, column, difference) in list {
        match out
            .iter_mut()
            .find(|(s, c, _)| *s == scenario && *c == column)
        {
            Some((_, _, differences)) => differences.push(difference),
            None => out.push((scenario, column, vec![difference])),
        }
    }
    out
}

/// `N checks; the first: CHECK: MESSAGE`.
fn summary(differences: &[Difference]) -> String {
    let Some(first) = differences.first() else {
        return String::new();
    };
    let what = format!(
        "{}: {}",
        first.check.as_deref().unwrap_or("the scenario"),
        shorten(&first.message, MESSAGE_WIDTH)
    );
    match differences.len() {
        1 => what,
        n => format!("{n} checks; the first: {what}"),
    }
}

fn endpoint(column: &str) -> String {
    match column {
        "proxy" => format!("/apps/mcp/{APP_ID}"),
        "mcp" => "/mcp".to_owned(),
        other => other.to_owned(),
    }
}

/// Runs both sets' server scenarios against the dual-era reference server, directly and
/// through a gateway hosting it.
fn server_side(
    kit: &Kit,
    bin: &Path,
    out: &Path,
    logs: &Path,
    sets: &[RequirementSet],
) -> anyhow::Result<Vec<SetTable>> {
    println!("\n==> starting the dual-era reference server");
    let server_log = logs.join("reference-server-next.log");
    let (mut reference, direct) = reference_server(kit, &kit.reference_server_next, &server_log)?;
    println!("  {direct}");
    println!("\n==> starting the gateway with it as app `{APP_ID}`");
    let (mut gateway, base) = hosting_gateway(bin, &out.join("gateway"), &direct, logs)?;
    let targets = [
        ("direct", direct),
        ("proxy", format!("{base}/apps/mcp/{APP_ID}")),
        ("mcp", format!("{base}/mcp")),
    ];
    let mut tables = Vec::new();
    for set in sets {
        let mut columns = Vec::new();
        for (name, url) in &targets {
            let dir = out.join("server").join(&set.revision).join(name);
            let log = logs.join(format!("server-{}-{name}.log", set.revision));
            println!(
                "\n==> {} server scenarios against {name}: {url}",
                set.revision
            );
            let dir_arg = dir.display().to_string();
            let args = [
                "server",
                "--url",
                url,
                "--requirements",
                &set.revision,
                "-o",
                &dir_arg,
            ];
            let status = run_cli(kit, &kit.conformance_next, &args, &log)?;
            let runs = read_scenarios(&dir, "server-")?;
            println!("  {} scenarios, suite exited with {status}", runs.len());
            columns.push(runs);
        }
        let entries: Vec<&Entry> = set.entries(Leg::Server).iter().collect();
        ensure!(
            !columns[0].is_empty(),
            "the {} set wrote no results against the reference server itself; the harness is \
             broken (see {})",
            set.revision,
            logs.display()
        );
        tables.push(SetTable::build(
            &format!("{} server scenario", set.revision),
            targets.iter().map(|(n, _)| (*n).to_owned()).collect(),
            &entries,
            &columns,
        ));
    }
    println!("\n==> stopping the gateway and the reference server");
    gateway.stop();
    reference.stop();
    Ok(tables)
}

/// `conformance-driver --list`: the scenarios its families drive, those compared with the
/// direct baseline apart from the `auth` family's (judged on their own, `auth.rs`).
fn driven_scenarios(driver: &Path) -> anyhow::Result<(BTreeSet<String>, BTreeSet<String>)> {
    // Running the driver xtask built is xtask's job.
    #[allow(clippy::disallowed_methods)]
    let output = std::process::Command::new(driver)
        .arg("--list")
        .output()
        .with_context(|| format!("running {} --list", driver.display()))?;
    ensure!(
        output.status.success(),
        "{} --list failed: {}",
        driver.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).context("the driver's list is not UTF-8")?;
    let mut compared = BTreeSet::new();
    let mut auth = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if let (Some(family), Some(scenario)) = (words.next(), words.next()) {
            let into = if family == "auth" {
                &mut auth
            } else {
                &mut compared
            };
            into.insert(scenario.to_owned());
        }
    }
    Ok((compared, auth))
}

/// One client scenario run: a scenario of a set with one column's command.
#[derive(Debug, Clone)]
struct Job {
    revision: String,
    scenario: String,
    column: String,
    command: String,
    dir: PathBuf,
    log: PathBuf,
}

/// The columns of a set's client table: (name, the driver's options).
fn client_columns(revision: &str) -> Vec<(String, &'static str)> {
    let other = if revision == "2026-07-28" {
        ("proxy·legacy".to_owned(), "--via proxy --era legacy")
    } else {
        ("proxy·modern".to_owned(), "--via proxy --era modern")
    };
    vec![
        ("direct".to_owned(), "--via direct"),
        ("proxy".to_owned(), "--via proxy"),
        ("mcp".to_owned(), "--via mcp"),
        other,
    ]
}

/// Runs every driven client scenario of every set in every column.
fn client_side(
    kit: &Kit,
    driver: &Path,
    bin: &Path,
    out: &Path,
    logs: &Path,
    sets: &[RequirementSet],
    driven: &BTreeSet<String>,
) -> anyhow::Result<Vec<SetTable>> {
    let driver = no_spaces(driver)?;
    let gateway = bin.join("mcpapp-gateway");
    let gateway = no_spaces(&gateway)?;
    let mut jobs = Vec::new();
    for set in sets {
        for entry in set.entries(Leg::Client) {
            if !driven.contains(&entry.scenario) {
                continue;
            }
            for (column, options) in client_columns(&set.revision) {
                let file = entry.scenario.replace('/', "_");
                jobs.push(Job {
                    revision: set.revision.clone(),
                    scenario: entry.scenario.clone(),
                    command: format!("{driver} {options} --gateway {gateway}"),
                    dir: out.join("client").join(&set.revision).join(&column),
                    log: logs.join(format!("client-{}-{column}-{file}.log", set.revision)),
                    column,
                });
            }
        }
    }
    let (alone, shared): (Vec<Job>, Vec<Job>) = jobs
        .into_iter()
        .partition(|job| ALONE.contains(&job.scenario.as_str()));
    println!(
        "\n==> {} client scenario runs, {WORKERS} at a time, then {} alone",
        shared.len(),
        alone.len()
    );
    let mut failures: Vec<String> =
        crate::util::in_parallel(shared, WORKERS, |job| client_run(kit, &job).err())
            .into_iter()
            .flatten()
            .map(|err| format!("{err:#}"))
            .collect();
    for job in &alone {
        if let Err(err) = client_run(kit, job) {
            failures.push(format!("{err:#}"));
        }
    }
    for failure in failures {
        // The scenario then has no result, which its cell shows.
        println!("  {failure}");
    }

    let mut tables = Vec::new();
    for set in sets {
        let columns = client_columns(&set.revision);
        let mut runs = Vec::new();
        for (column, _) in &columns {
            let dir = out.join("client").join(&set.revision).join(column);
            runs.push(read_scenarios(&dir, "")?);
        }
        let entries: Vec<&Entry> = set
            .entries(Leg::Client)
            .iter()
            .filter(|e| driven.contains(&e.scenario))
            .collect();
        tables.push(SetTable::build(
            &format!("{} client scenario", set.revision),
            columns.into_iter().map(|(c, _)| c).collect(),
            &entries,
            &runs,
        ));
    }
    Ok(tables)
}

fn client_run(kit: &Kit, job: &Job) -> anyhow::Result<()> {
    let dir = job.dir.display().to_string();
    let args = [
        "client",
        "--command",
        &job.command,
        "--scenario",
        &job.scenario,
        "--spec-version",
        &job.revision,
        "--timeout",
        CLIENT_TIMEOUT_MS,
        "-o",
        &dir,
    ];
    let status = run_cli(kit, &kit.conformance_next, &args, &job.log).with_context(|| {
        format!(
            "{} client scenario {} ({})",
            job.revision, job.scenario, job.column
        )
    })?;
    println!(
        "  {} {} ({}): suite exited with {status}",
        job.revision, job.scenario, job.column
    );
    Ok(())
}

fn print_tables(
    sets: &[RequirementSet],
    server: &[SetTable],
    client: &[SetTable],
    not_driven: &serde_json::Map<String, Value>,
) {
    for (set, table) in sets.iter().zip(server) {
        println!(
            "\n==> {} server scenarios (checks passed/graded; ✗ a failure, ! a warning): the \
             dual-era reference server directly, through /apps/mcp/{APP_ID} (proxy) and /mcp \
             (mcp); ▼ worse than direct, ▲ better\n",
            set.revision
        );
        print!("{}", table.render(MESSAGE_WIDTH, DIFFERENCES_SHOWN));
    }
    for (set, table) in sets.iter().zip(client) {
        println!(
            "\n==> {} client scenarios, the gateway as the client: the driver's end client \
             directly, and through a gateway hosting the scenario's server\n",
            set.revision
        );
        print!("{}", table.render(MESSAGE_WIDTH, DIFFERENCES_SHOWN));
        if let Some(list) = not_driven.get(&set.revision).and_then(Value::as_array)
            && !list.is_empty()
        {
            let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            println!(
                "  not driven (no family of conformance-driver yet): {}",
                names.join(", ")
            );
        }
    }
}
