//! `cargo xtask conformance --sets`, the `auth/*` client scenarios: the gateway as the OAuth
//! client of the scenario's protected server. `conformance-driver --via mcp` (its `auth`
//! family) starts a gateway hosting the scenario's URL as an HTTP app with OAuth on, plays the
//! user's browser through the suite's fake authorization server (which redirects at once) into
//! the gateway's `/oauth/callback`, then lists and calls a tool through `/mcp`.
//!
//! There is no baseline column here: the driver's end client does no OAuth of its own, so
//! each scenario is judged on its own. A scored scenario passes when the suite exits 0 for it
//! (no failing check, no client error it does not allow) and its checks are clean (a warning
//! fails, as in the suite's scoring).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::checks::{Run, read_scenarios};
use super::kit::Kit;
use super::requirements::{Leg, RequirementSet};
use super::{CLIENT_TIMEOUT_MS, run_cli};

/// Scenario runs at a time (each is the suite, its two servers, the driver and a gateway).
const WORKERS: usize = 3;

/// One scenario of one set, run once.
pub(crate) struct Outcome {
    pub(crate) revision: String,
    pub(crate) scenario: String,
    pub(crate) not_scored: Option<String>,
    /// The suite exited 0 for it.
    pub(crate) exited_ok: bool,
    pub(crate) run: Run,
}

impl Outcome {
    pub(crate) fn passed(&self) -> bool {
        self.exited_ok && self.run.clean()
    }
}

struct Job {
    revision: String,
    scenario: String,
    not_scored: Option<String>,
    dir: PathBuf,
    log: PathBuf,
}

/// Runs every `auth/*` client scenario of `sets` that the driver drives.
pub(crate) fn run(
    kit: &Kit,
    command: &str,
    out: &Path,
    logs: &Path,
    sets: &[RequirementSet],
    driven: &BTreeSet<String>,
) -> Vec<Outcome> {
    let mut jobs = Vec::new();
    for set in sets {
        for entry in set.entries(Leg::Client) {
            if !driven.contains(&entry.scenario) {
                continue;
            }
            let file = entry.scenario.replace('/', "_");
            jobs.push(Job {
                revision: set.revision.clone(),
                scenario: entry.scenario.clone(),
                not_scored: entry.not_scored.clone(),
                dir: out.join("client").join(&set.revision).join("auth"),
                log: logs.join(format!("client-{}-auth-{file}.log", set.revision)),
            });
        }
    }
    println!(
        "\n==> {} auth/* client scenario runs, the gateway as the OAuth client, {WORKERS} at a time",
        jobs.len()
    );
    let done = crate::util::in_parallel(jobs, WORKERS, |job| {
        let exited_ok = run_one(kit, command, &job);
        (job, exited_ok)
    });
    let mut outcomes: Vec<Outcome> = done
        .into_iter()
        .map(|(job, exited_ok)| {
            // The suite writes `auth/*` results under `OUT/auth/NAME-STAMP`.
            let name = job.scenario.trim_start_matches("auth/");
            let run = read_scenarios(&job.dir.join("auth"), "")
                .ok()
                .and_then(|runs| runs.into_iter().find(|(s, _)| s == name))
                .map_or_else(|| Run::missing("no result"), |(_, run)| run);
            Outcome {
                revision: job.revision,
                scenario: job.scenario,
                not_scored: job.not_scored,
                exited_ok,
                run,
            }
        })
        .collect();
    outcomes.sort_by(|a, b| (&a.revision, &a.scenario).cmp(&(&b.revision, &b.scenario)));
    outcomes
}

fn run_one(kit: &Kit, command: &str, job: &Job) -> bool {
    let dir = job.dir.display().to_string();
    let args = [
        "client",
        "--command",
        command,
        "--scenario",
        &job.scenario,
        "--spec-version",
        &job.revision,
        "--timeout",
        CLIENT_TIMEOUT_MS,
        "-o",
        &dir,
    ];
    match run_cli(kit, &kit.conformance_next, &args, &job.log) {
        Ok(status) => {
            println!(
                "  {} {} (gateway): suite exited with {status}",
                job.revision, job.scenario
            );
            status.success()
        }
        Err(err) => {
            println!("  {} {}: {err:#}", job.revision, job.scenario);
            false
        }
    }
}

/// Prints each set's pass count and failures; returns the report's part and the
/// regressions (a scored scenario that does not pass).
pub(crate) fn report(sets: &[RequirementSet], outcomes: &[Outcome]) -> (Value, Vec<String>) {
    let mut json = serde_json::Map::new();
    let mut regressions = Vec::new();
    for set in sets {
        let mine: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| o.revision == set.revision)
            .collect();
        let scored: Vec<&&Outcome> = mine.iter().filter(|o| o.not_scored.is_none()).collect();
        let passed = scored.iter().filter(|o| o.passed()).count();
        println!(
            "\n==> {} auth/* client scenarios, the gateway as the OAuth client: {passed} of {} \
             scored pass",
            set.revision,
            scored.len()
        );
        let mut rows = serde_json::Map::new();
        for outcome in &mine {
            let failing: Vec<String> = outcome
                .run
                .checks
                .iter()
                .filter(|c| c.status.failing())
                .map(|c| c.id.clone())
                .collect();
            let verdict = if outcome.passed() { "pass" } else { "FAIL" };
            println!(
                "  {verdict}  {:<42} {:>3} checks graded{}{}",
                outcome.scenario,
                outcome.run.graded(),
                if outcome.exited_ok {
                    ""
                } else {
                    ", suite exited non-zero"
                },
                if failing.is_empty() {
                    String::new()
                } else {
                    format!(", failing: {}", failing.join(", "))
                }
            );
            if outcome.not_scored.is_none() && !outcome.passed() {
                regressions.push(format!(
                    "{} client scenario {} with the gateway as the OAuth client fails{}",
                    set.revision,
                    outcome.scenario,
                    outcome
                        .run
                        .missing
                        .as_deref()
                        .map(|why| format!(" ({why})"))
                        .unwrap_or_default()
                ));
            }
            rows.insert(
                outcome.scenario.clone(),
                json!({
                    "passed": outcome.passed(),
                    "scored": outcome.not_scored.is_none(),
                    "suiteExitedOk": outcome.exited_ok,
                    "graded": outcome.run.graded(),
                    "failing": failing,
                }),
            );
        }
        json.insert(
            set.revision.clone(),
            json!({"scored": scored.len(), "passed": passed, "scenarios": rows}),
        );
    }
    (Value::Object(json), regressions)
}
