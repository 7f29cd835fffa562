//! What the conformance suite wrote, read back: one `checks.json` per scenario run, turned
//! into outcomes, the table, `report.json` and the verdict. Pure apart from reading files, so
//! the rules are unit-tested on their own.
//!
//! The suite writes `OUT/server-<scenario>-<timestamp>/checks.json` for a server scenario and
//! `OUT/<scenario>-<timestamp>/{checks.json,stdout.txt,stderr.txt}` for a client scenario,
//! the timestamp shaped like `2026-12-01T10-08-02-584Z`. Each check has a `status`: `SUCCESS`,
//! `WARNING`, `FAILURE` or `INFO`. A scenario passes when it recorded at least one check and
//! none is a `FAILURE` (a warning is reported, not a failure; a client that never reached the
//! test server leaves no checks at all, which is not a pass). With repeated runs
//! (`--repeat N`), a scenario passes only when every run passes; one that passes some of the
//! time is shown as `flaky k/N`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};

/// How one scenario went against one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) passed: bool,
    pub(crate) success: usize,
    pub(crate) warning: usize,
    pub(crate) failure: usize,
    /// The first failure's message (its `errorMessage`, else `details.message`, else its
    /// description), or why there is no result.
    pub(crate) first_failure: Option<String>,
    /// The first warning's message, for the record.
    pub(crate) first_warning: Option<String>,
    /// The folder the suite wrote, if any.
    pub(crate) dir: Option<PathBuf>,
    /// What the client under test printed on stdout (client scenarios; our own clients print
    /// one line saying what they saw), at most [`MAX_STDOUT`] characters.
    pub(crate) client_stdout: Option<String>,
    /// How many runs this outcome stands for, and how many of them passed.
    pub(crate) runs: usize,
    pub(crate) passes: usize,
    /// Each distinct first failure over the runs, with the runs (1-based) that had it.
    pub(crate) failures: Vec<(String, Vec<usize>)>,
}

/// How much of a client's stdout the report keeps.
const MAX_STDOUT: usize = 2000;

impl Outcome {
    /// No result at all: the suite wrote nothing for the scenario.
    pub(crate) fn missing(why: &str) -> Self {
        Self {
            passed: false,
            success: 0,
            warning: 0,
            failure: 0,
            first_failure: Some(why.to_owned()),
            first_warning: None,
            dir: None,
            client_stdout: None,
            runs: 1,
            passes: 0,
            failures: vec![(why.to_owned(), vec![1])],
        }
    }

    /// Judges the checks of one scenario run.
    pub(crate) fn from_checks(checks: &Value) -> Self {
        let list = checks.as_array().map(Vec::as_slice).unwrap_or_default();
        let with = |status: &'static str| list.iter().filter(move |c| c["status"] == status);
        let message = |check: &Value| {
            [
                &check["errorMessage"],
                &check["details"]["message"],
                &check["description"],
            ]
            .into_iter()
            .find_map(|v| v.as_str().filter(|s| !s.is_empty()))
            .map(|m| format!("[{}] {m}", check["id"].as_str().unwrap_or("?")))
        };
        let failure = with("FAILURE").count();
        let first_failure = if list.is_empty() {
            Some("no checks were recorded".to_owned())
        } else {
            with("FAILURE").next().and_then(message)
        };
        let passed = !list.is_empty() && failure == 0;
        Self {
            passed,
            success: with("SUCCESS").count(),
            warning: with("WARNING").count(),
            failure,
            first_warning: with("WARNING").next().and_then(message),
            dir: None,
            client_stdout: None,
            runs: 1,
            passes: usize::from(passed),
            failures: first_failure
                .iter()
                .filter(|_| !passed)
                .map(|m| (m.clone(), vec![1]))
                .collect(),
            first_failure,
        }
    }

    /// Several runs of one scenario against one target as one outcome: it passes when every
    /// run passed; the details are those of the first failing run (else of the last run), and
    /// every distinct failure is kept with the runs that had it (messages that differ only in
    /// their numbers, such as a measured delay, count as one, shown as the first).
    pub(crate) fn merge(outcomes: &[Self]) -> Self {
        let failing = outcomes.iter().position(|o| !o.passed);
        let mut merged = match failing.or(outcomes.len().checked_sub(1)) {
            Some(index) => outcomes[index].clone(),
            None => return Self::missing("no runs"),
        };
        merged.runs = outcomes.iter().map(|o| o.runs).sum();
        merged.passes = outcomes.iter().map(|o| o.passes).sum();
        merged.passed = merged.passes == merged.runs;
        merged.failures.clear();
        for (index, outcome) in outcomes.iter().enumerate() {
            for (message, _) in &outcome.failures {
                let key = shape(message);
                match merged.failures.iter_mut().find(|(m, _)| shape(m) == key) {
                    Some((_, runs)) => runs.push(index + 1),
                    None => merged.failures.push((message.clone(), vec![index + 1])),
                }
            }
        }
        merged
    }

    fn to_json(&self) -> Value {
        json!({
            "passed": self.passed,
            "success": self.success,
            "warning": self.warning,
            "failure": self.failure,
            "firstFailure": self.first_failure,
            "firstWarning": self.first_warning,
            "dir": self.dir,
            "clientStdout": self.client_stdout,
            "runs": self.runs,
            "passes": self.passes,
            "failures": self
                .failures
                .iter()
                .map(|(message, runs)| json!({"message": message, "runs": runs}))
                .collect::<Vec<_>>(),
        })
    }

    fn cell(&self) -> String {
        match (self.passed, self.warning, self.passes) {
            (true, 0, _) => "pass".to_owned(),
            (true, _, _) => "pass (warn)".to_owned(),
            (false, _, 0) => "FAIL".to_owned(),
            (false, _, passes) => format!("flaky {passes}/{}", self.runs),
        }
    }
}

/// `message` with every run of digits replaced by `#`, to group failures by cause.
fn shape(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    out
}

/// `server-initialize-2026-12-01T10-08-02-584Z` → (`server-initialize`, the timestamp).
pub(crate) fn split_timestamp(name: &str) -> Option<(&str, &str)> {
    // The suite's timestamp: an ISO date with `:` and `.` replaced by `-`.
    const SHAPE: &str = "0000-00-00T00-00-00-000Z";
    let cut = name.len().checked_sub(SHAPE.len() + 1)?;
    let (scenario, rest) = (name.get(..cut)?, name.get(cut..)?);
    let stamp = rest.strip_prefix('-')?;
    let shaped = stamp
        .chars()
        .zip(SHAPE.chars())
        .all(|(c, s)| if s == '0' { c.is_ascii_digit() } else { c == s });
    (shaped && !scenario.is_empty()).then_some((scenario, stamp))
}

/// Reads every scenario folder in `out` (`prefix` is `server-` for server scenarios, empty
/// for client ones), in the order the suite ran them. The latest run of a scenario wins.
pub(crate) fn read_runs(out: &Path, prefix: &str) -> anyhow::Result<Vec<(String, Outcome)>> {
    let mut found: BTreeMap<String, (String, PathBuf)> = BTreeMap::new();
    let entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("reading {}", out.display())),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((scenario, stamp)) = name
            .strip_prefix(prefix)
            .and_then(split_timestamp)
            .filter(|_| entry.path().is_dir())
        else {
            continue;
        };
        let newer = found
            .get(scenario)
            .is_none_or(|(seen, _)| stamp > seen.as_str());
        if newer {
            found.insert(scenario.to_owned(), (stamp.to_owned(), entry.path()));
        }
    }
    let mut runs: Vec<(String, String, PathBuf)> = found
        .into_iter()
        .map(|(scenario, (stamp, dir))| (stamp, scenario, dir))
        .collect();
    runs.sort();
    Ok(runs
        .into_iter()
        .map(|(_, scenario, dir)| {
            let outcome = read_outcome(&dir);
            (scenario, outcome)
        })
        .collect())
}

fn read_outcome(dir: &Path) -> Outcome {
    let path = dir.join("checks.json");
    let mut outcome = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()))
    {
        Ok(checks) => Outcome::from_checks(&checks),
        Err(err) => Outcome::missing(&format!("{}: {err}", path.display())),
    };
    outcome.dir = Some(dir.to_path_buf());
    outcome.client_stdout = std::fs::read_to_string(dir.join("stdout.txt"))
        .ok()
        .map(|text| text.trim().chars().take(MAX_STDOUT).collect::<String>())
        .filter(|text| !text.is_empty());
    outcome
}

/// Joins repeated runs against one target by scenario (see [`Outcome::merge`]), in the order
/// of the first run; a scenario missing from a run is a failure of that run.
pub(crate) fn merge_runs(repeats: &[Vec<(String, Outcome)>]) -> Vec<(String, Outcome)> {
    scenario_order(repeats)
        .into_iter()
        .map(|scenario| {
            let outcomes: Vec<Outcome> = repeats.iter().map(|run| find(run, &scenario)).collect();
            let merged = Outcome::merge(&outcomes);
            (scenario, merged)
        })
        .collect()
}

/// Every scenario of `runs`, in the order of the first, then those only later ones have.
fn scenario_order(runs: &[Vec<(String, Outcome)>]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for run in runs {
        for (scenario, _) in run {
            if !order.contains(scenario) {
                order.push(scenario.clone());
            }
        }
    }
    order
}

/// The outcome of `scenario` in `run`, or a failure saying there is none.
fn find(run: &[(String, Outcome)], scenario: &str) -> Outcome {
    run.iter()
        .find(|(s, _)| s == scenario)
        .map(|(_, o)| o.clone())
        .unwrap_or_else(|| Outcome::missing("the suite wrote no result"))
}

/// One table: scenarios by target.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// The column names, e.g. `direct`, `proxy`, `mcp`.
    pub(crate) columns: Vec<&'static str>,
    /// Scenario name and one outcome per column, in the suite's order.
    pub(crate) rows: Vec<(String, Vec<Outcome>)>,
}

impl Table {
    /// Joins the runs of each column by scenario: the order is the first column's, then
    /// scenarios only other columns ran; a scenario missing from a column is a failure there.
    pub(crate) fn join(columns: Vec<&'static str>, runs: &[Vec<(String, Outcome)>]) -> Self {
        let rows = scenario_order(runs)
            .into_iter()
            .map(|scenario| {
                let cells = runs.iter().map(|run| find(run, &scenario)).collect();
                (scenario, cells)
            })
            .collect();
        Self { columns, rows }
    }

    fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| *c == name)
    }

    /// Scenarios that pass in column `good` and fail in column `bad`, with the failure.
    pub(crate) fn regressions(&self, good: &str, bad: &str) -> Vec<(String, String)> {
        let (Some(g), Some(b)) = (self.column(good), self.column(bad)) else {
            return Vec::new();
        };
        self.rows
            .iter()
            .filter(|(_, cells)| cells[g].passed && !cells[b].passed)
            .map(|(scenario, cells)| {
                (
                    scenario.clone(),
                    cells[b].first_failure.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// How many scenarios pass in `column`.
    pub(crate) fn passing(&self, column: &str) -> usize {
        self.column(column).map_or(0, |c| {
            self.rows
                .iter()
                .filter(|(_, cells)| cells[c].passed)
                .count()
        })
    }

    /// The table as text: a row per scenario, then under it the first failure of each
    /// failing cell (shortened to `width` characters).
    pub(crate) fn render(&self, title: &str, width: usize) -> String {
        let name_width = self
            .rows
            .iter()
            .map(|(s, _)| s.len())
            .chain([title.len()])
            .max()
            .unwrap_or(0);
        let mut out = format!("{title:<name_width$}");
        for column in &self.columns {
            let _ = write!(out, "  {column:<11}");
        }
        out = out.trim_end().to_owned();
        out.push('\n');
        for (scenario, cells) in &self.rows {
            let mut line = format!("{scenario:<name_width$}");
            for cell in cells {
                let _ = write!(line, "  {:<11}", cell.cell());
            }
            out.push_str(line.trim_end());
            out.push('\n');
            for (column, cell) in self.columns.iter().zip(cells) {
                for (message, runs) in &cell.failures {
                    let which = if cell.runs == 1 {
                        String::new()
                    } else {
                        let list: Vec<String> = runs.iter().map(ToString::to_string).collect();
                        format!(" (runs {} of {})", list.join(", "), cell.runs)
                    };
                    let _ = writeln!(out, "    {column}: {}{which}", shorten(message, width));
                }
            }
        }
        let mut totals = format!("{:<name_width$}", "passing");
        for column in &self.columns {
            let _ = write!(
                totals,
                "  {:<11}",
                format!("{}/{}", self.passing(column), self.rows.len())
            );
        }
        out.push_str(totals.trim_end());
        out.push('\n');
        out
    }

    /// The table as JSON: one object per scenario with one member per column.
    pub(crate) fn to_json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|(scenario, cells)| {
                    let mut row = serde_json::Map::new();
                    row.insert("scenario".to_owned(), json!(scenario));
                    for (column, cell) in self.columns.iter().zip(cells) {
                        row.insert((*column).to_owned(), cell.to_json());
                    }
                    Value::Object(row)
                })
                .collect(),
        )
    }
}

/// `text` on one line, at most `width` characters.
pub(crate) fn shorten(text: &str, width: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= width {
        flat
    } else {
        format!("{}…", flat.chars().take(width).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(id: &str, status: &str, message: Option<&str>) -> Value {
        json!({"id": id, "status": status, "description": format!("{id} check"), "errorMessage": message})
    }

    #[test]
    fn a_scenario_passes_without_failures_and_with_some_check() {
        let ok = Outcome::from_checks(&json!([
            check("a", "INFO", None),
            check("b", "SUCCESS", None)
        ]));
        assert!(ok.passed);
        assert_eq!((ok.success, ok.failure), (1, 0));
        assert_eq!(ok.first_failure, None);

        let warned = Outcome::from_checks(&json!([check("w", "WARNING", Some("late"))]));
        assert!(warned.passed);
        assert_eq!(warned.first_warning.as_deref(), Some("[w] late"));

        let failed = Outcome::from_checks(&json!([
            check("s", "SUCCESS", None),
            check("f1", "FAILURE", Some("first")),
            check("f2", "FAILURE", Some("second")),
        ]));
        assert!(!failed.passed);
        assert_eq!(failed.failure, 2);
        assert_eq!(failed.first_failure.as_deref(), Some("[f1] first"));

        let empty = Outcome::from_checks(&json!([]));
        assert!(!empty.passed);
        assert_eq!(
            empty.first_failure.as_deref(),
            Some("no checks were recorded")
        );
    }

    #[test]
    fn a_failure_without_error_message_uses_its_details_then_description() {
        let details = json!([{"id": "t", "status": "FAILURE", "details": {"message": "Tool was not called by client"}}]);
        assert_eq!(
            Outcome::from_checks(&details).first_failure.as_deref(),
            Some("[t] Tool was not called by client")
        );
        let bare = json!([check("d", "FAILURE", None)]);
        assert_eq!(
            Outcome::from_checks(&bare).first_failure.as_deref(),
            Some("[d] d check")
        );
    }

    #[test]
    fn folder_names_split_into_scenario_and_timestamp() {
        assert_eq!(
            split_timestamp("server-initialize-2026-12-01T10-08-02-584Z"),
            Some(("server-initialize", "2026-12-01T10-08-02-584Z"))
        );
        assert_eq!(
            split_timestamp("tools_call-2026-12-01T10-15-55-884Z"),
            Some(("tools_call", "2026-12-01T10-15-55-884Z"))
        );
        assert_eq!(split_timestamp("tools_call"), None);
        assert_eq!(split_timestamp("-2026-12-01T10-15-55-884Z"), None);
        assert_eq!(split_timestamp("x-2026-12-01T10-15-55-88AZ"), None);
    }

    #[test]
    fn runs_are_read_in_the_suite_order_and_the_latest_run_wins() {
        let out = tempfile::tempdir().unwrap();
        let write = |name: &str, checks: &Value| {
            let dir = out.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("checks.json"), checks.to_string()).unwrap();
        };
        write(
            "server-ping-2026-12-01T10-00-00-002Z",
            &json!([check("p", "SUCCESS", None)]),
        );
        write(
            "server-server-initialize-2026-12-01T10-00-00-001Z",
            &json!([check("i", "FAILURE", Some("old"))]),
        );
        write(
            "server-server-initialize-2026-12-01T10-00-00-003Z",
            &json!([check("i", "SUCCESS", None)]),
        );
        std::fs::create_dir_all(out.path().join("server-broken-2026-12-01T10-00-00-004Z")).unwrap();
        std::fs::write(out.path().join("stray.txt"), "").unwrap();

        let runs = read_runs(out.path(), "server-").unwrap();
        let names: Vec<&str> = runs.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(names, ["ping", "server-initialize", "broken"]);
        assert!(runs[1].1.passed, "the later run of server-initialize wins");
        assert!(!runs[2].1.passed);
        assert!(
            runs[2]
                .1
                .first_failure
                .as_deref()
                .unwrap()
                .contains("checks.json")
        );
        assert!(
            read_runs(&out.path().join("absent"), "")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn regressions_are_what_passes_in_one_column_and_fails_in_another() {
        let pass = Outcome::from_checks(&json!([check("s", "SUCCESS", None)]));
        let fail = Outcome::from_checks(&json!([check("f", "FAILURE", Some("broke"))]));
        let table = Table::join(
            vec!["direct", "proxy"],
            &[
                vec![
                    ("a".to_owned(), pass.clone()),
                    ("b".to_owned(), pass.clone()),
                    ("c".to_owned(), fail.clone()),
                ],
                vec![("a".to_owned(), pass), ("c".to_owned(), fail)],
            ],
        );
        // b has no result through the proxy: a failure; c fails everywhere: no regression.
        assert_eq!(
            table.regressions("direct", "proxy"),
            [("b".to_owned(), "the suite wrote no result".to_owned())]
        );
        assert_eq!(table.passing("direct"), 2);
        assert_eq!(table.passing("proxy"), 1);
        let text = table.render("scenario", 80);
        assert!(text.contains("proxy: the suite wrote no result"), "{text}");
        assert!(text.contains("passing   2/3"), "{text}");
        assert_eq!(table.to_json()[2]["proxy"]["firstFailure"], "[f] broke");
    }

    #[test]
    fn repeated_runs_pass_only_when_every_run_passes() {
        let pass = Outcome::from_checks(&json!([check("s", "SUCCESS", None)]));
        let fail = Outcome::from_checks(&json!([check("f", "FAILURE", Some("broke"))]));
        let merged = merge_runs(&[
            vec![
                ("a".to_owned(), pass.clone()),
                ("b".to_owned(), pass.clone()),
            ],
            vec![
                ("a".to_owned(), fail.clone()),
                ("b".to_owned(), pass.clone()),
            ],
            vec![("a".to_owned(), pass.clone())],
        ]);
        let (a, b) = (&merged[0].1, &merged[1].1);
        assert!(!a.passed);
        assert_eq!((a.passes, a.runs), (2, 3));
        assert_eq!(a.cell(), "flaky 2/3");
        assert_eq!(a.first_failure.as_deref(), Some("[f] broke"));
        assert_eq!(a.failures, [("[f] broke".to_owned(), vec![2])]);
        // b has no result in the third run.
        assert_eq!((b.passes, b.runs), (2, 3));
        assert_eq!(
            b.failures,
            [("the suite wrote no result".to_owned(), vec![3])]
        );
        let table = Table::join(vec!["gateway"], std::slice::from_ref(&merged));
        let text = table.render("scenario", 80);
        assert!(text.contains("gateway: [f] broke (runs 2 of 3)"), "{text}");

        // Different failures in different runs are all kept.
        let other = Outcome::from_checks(&json!([check("g", "FAILURE", Some("timed out"))]));
        let early = |ms: &str| {
            Outcome::from_checks(&json!([check(
                "t",
                "FAILURE",
                Some(&format!("early ({ms}ms)"))
            )]))
        };
        let mixed = Outcome::merge(&[fail.clone(), other, early("-51"), fail.clone(), early("-7")]);
        assert_eq!(
            mixed.failures,
            [
                ("[f] broke".to_owned(), vec![1, 4]),
                ("[g] timed out".to_owned(), vec![2]),
                ("[t] early (-51ms)".to_owned(), vec![3, 5]),
            ]
        );

        let all = Outcome::merge(&[pass.clone(), pass]);
        assert!(all.passed);
        assert_eq!((all.cell().as_str(), all.runs), ("pass", 2));
        assert_eq!(Outcome::merge(&[fail.clone(), fail]).cell(), "FAIL");
    }
}
