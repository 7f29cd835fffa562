//! The requirement sets' results check by check: every `checks.json` read into its checks,
//! one table per set and leg with a column per target (the first is the baseline, `direct`),
//! and the comparison the verdict rests on. Pure apart from reading files.
//!
//! A check is graded when its status is `SUCCESS`, `WARNING` or `FAILURE` (`INFO` and
//! `SKIPPED` are not); a cell shows `passed/graded`. Checks are matched across columns by id,
//! name and occurrence (a scenario may emit one id several times under different names).
//!
//! Against the baseline, a column **regresses** on a check that passes in the baseline and
//! fails (or is missing) there, on a check that fails there and is absent from the baseline,
//! and on a scenario without any result there. A check that fails in the baseline and passes
//! there is an **improvement**, and one that passes in the baseline and is only informational
//! there (`INFO`: the suite found the behaviour optional, e.g. JSON answers where the server
//! streamed) is **ungraded**: both are reported, never a failure (an improvement may mean the
//! column changed what the server said; see the kit's README).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};

use super::report::{shorten, split_timestamp};
use super::requirements::Entry;

/// A check's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Success,
    Warning,
    Failure,
    /// `INFO`, `SKIPPED` or anything else: not graded.
    Ungraded,
}

impl Status {
    fn parse(text: &str) -> Self {
        match text {
            "SUCCESS" => Self::Success,
            "WARNING" => Self::Warning,
            "FAILURE" => Self::Failure,
            _ => Self::Ungraded,
        }
    }

    pub(crate) fn failing(self) -> bool {
        matches!(self, Self::Warning | Self::Failure)
    }

    fn name(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::Warning => "WARNING",
            Self::Failure => "FAILURE",
            Self::Ungraded => "UNGRADED",
        }
    }
}

/// One check of one scenario run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub(crate) id: String,
    pub(crate) name: String,
    /// Which occurrence of this id and name it is (0 for the first).
    pub(crate) occurrence: usize,
    pub(crate) status: Status,
    /// Its `errorMessage`, else `details.message`, else its description.
    pub(crate) message: Option<String>,
}

impl Check {
    fn key(&self) -> (&str, &str, usize) {
        (&self.id, &self.name, self.occurrence)
    }
}

/// One scenario against one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) checks: Vec<Check>,
    /// Why there is no result, when there is none.
    pub(crate) missing: Option<String>,
    /// The folder the suite wrote.
    pub(crate) dir: Option<PathBuf>,
    /// The client's stdout (client scenarios; the driver prints what it did).
    pub(crate) stdout: Option<String>,
}

/// How much of a client's stdout the report keeps.
const MAX_STDOUT: usize = 4000;

impl Run {
    pub(crate) fn missing(why: &str) -> Self {
        Self {
            checks: Vec::new(),
            missing: Some(why.to_owned()),
            dir: None,
            stdout: None,
        }
    }

    /// The checks of a `checks.json` document.
    pub(crate) fn from_checks(document: &Value) -> Self {
        let mut checks: Vec<Check> = Vec::new();
        for check in document.as_array().into_iter().flatten() {
            let id = check["id"].as_str().unwrap_or("?").to_owned();
            let name = check["name"].as_str().unwrap_or_default().to_owned();
            let occurrence = checks
                .iter()
                .filter(|c| c.id == id && c.name == name)
                .count();
            let message = [
                &check["errorMessage"],
                &check["details"]["message"],
                &check["description"],
            ]
            .into_iter()
            .find_map(|v| v.as_str().filter(|s| !s.is_empty()))
            .map(str::to_owned);
            checks.push(Check {
                id,
                name,
                occurrence,
                status: Status::parse(check["status"].as_str().unwrap_or_default()),
                message,
            });
        }
        Self {
            checks,
            missing: None,
            dir: None,
            stdout: None,
        }
    }

    fn read(dir: &Path) -> Self {
        let path = dir.join("checks.json");
        let mut run = match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()))
        {
            Ok(document) => Self::from_checks(&document),
            Err(err) => Self::missing(&format!("{}: {err}", path.display())),
        };
        run.dir = Some(dir.to_path_buf());
        run.stdout = std::fs::read_to_string(dir.join("stdout.txt"))
            .ok()
            .map(|text| text.trim().chars().take(MAX_STDOUT).collect::<String>())
            .filter(|text| !text.is_empty());
        run
    }

    fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    pub(crate) fn graded(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.status != Status::Ungraded)
            .count()
    }

    /// A result with no failing check (a warning counts as failing, as it does against a
    /// baseline in the suite).
    pub(crate) fn clean(&self) -> bool {
        self.missing.is_none() && !self.checks.iter().any(|c| c.status.failing())
    }

    fn find(&self, check: &Check) -> Option<&Check> {
        self.checks.iter().find(|c| c.key() == check.key())
    }

    /// How `check` is named in a table: its id, with its name when the id is not unique.
    fn label(&self, check: &Check) -> String {
        let shared = self.checks.iter().filter(|c| c.id == check.id).count() > 1;
        match (shared, check.occurrence) {
            (false, _) => check.id.clone(),
            (true, 0) => format!("{} ({})", check.id, check.name),
            (true, n) => format!("{} ({} #{})", check.id, check.name, n + 1),
        }
    }

    /// `passed/graded` with a mark: `✗` a failure, `!` only warnings, `–` no result.
    fn cell(&self) -> String {
        if self.missing.is_some() {
            return "–".to_owned();
        }
        let mark = if self.count(Status::Failure) > 0 {
            " ✗"
        } else if self.count(Status::Warning) > 0 {
            " !"
        } else {
            ""
        };
        format!("{}/{}{mark}", self.count(Status::Success), self.graded())
    }

    /// `scenario:id` for each failing check, as the expected-failures file names them.
    fn failing(&self, scenario: &str) -> BTreeSet<String> {
        self.checks
            .iter()
            .filter(|c| c.status.failing())
            .map(|c| format!("{scenario}:{}", c.id))
            .collect()
    }
}

/// A difference of one column from the baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    /// The check (as labelled in the table), or `None` for the scenario as a whole.
    pub(crate) check: Option<String>,
    /// What the column got instead (or why there is no result).
    pub(crate) message: String,
}

/// How a column differs from the baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    pub(crate) regressions: Vec<Difference>,
    pub(crate) improvements: Vec<Difference>,
    pub(crate) ungraded: Vec<Difference>,
}

/// Compares `run` with `baseline`.
pub(crate) fn compare(baseline: &Run, run: &Run) -> Comparison {
    let mut out = Comparison::default();
    if let Some(why) = &run.missing {
        if baseline.missing.is_none() {
            out.regressions.push(Difference {
                check: None,
                message: why.clone(),
            });
        }
        return out;
    }
    let Comparison {
        regressions,
        improvements,
        ungraded,
    } = &mut out;
    for check in &baseline.checks {
        let there = run.find(check);
        match (check.status, there) {
            (Status::Success, Some(c)) if c.status == Status::Success => {}
            (Status::Success, Some(c)) if c.status == Status::Ungraded => {
                ungraded.push(Difference {
                    check: Some(run.label(c)),
                    message: c.message.clone().unwrap_or_default(),
                });
            }
            (Status::Success, Some(c)) => regressions.push(Difference {
                check: Some(run.label(c)),
                message: format!(
                    "{}: {}",
                    c.status.name(),
                    c.message.as_deref().unwrap_or("no message")
                ),
            }),
            (Status::Success, None) => regressions.push(Difference {
                check: Some(baseline.label(check)),
                message: "not reported (passes in the baseline)".to_owned(),
            }),
            (Status::Warning | Status::Failure, Some(c)) if c.status == Status::Success => {
                improvements.push(Difference {
                    check: Some(run.label(c)),
                    message: format!("{} in the baseline", check.status.name()),
                });
            }
            _ => {}
        }
    }
    for check in &run.checks {
        if check.status.failing() && baseline.find(check).is_none() {
            regressions.push(Difference {
                check: Some(run.label(check)),
                message: format!(
                    "{} (not reported in the baseline): {}",
                    check.status.name(),
                    check.message.as_deref().unwrap_or("no message")
                ),
            });
        }
    }
    out
}

/// Reads every scenario folder in `out` (`prefix` is `server-` for server scenarios, empty
/// for client ones). The latest run of a scenario wins.
pub(crate) fn read_scenarios(out: &Path, prefix: &str) -> anyhow::Result<Vec<(String, Run)>> {
    let entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("reading {}", out.display())),
    };
    let mut found: Vec<(String, String, PathBuf)> = Vec::new();
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
        match found.iter_mut().find(|(s, _, _)| s == scenario) {
            Some(seen) if seen.1.as_str() < stamp => {
                *seen = (scenario.to_owned(), stamp.to_owned(), entry.path());
            }
            Some(_) => {}
            None => found.push((scenario.to_owned(), stamp.to_owned(), entry.path())),
        }
    }
    Ok(found
        .into_iter()
        .map(|(scenario, _, dir)| {
            let run = Run::read(&dir);
            (scenario, run)
        })
        .collect())
}

/// The labels of the two totals rows.
const TOTALS: [&str; 2] = ["scored, clean", "scored, checks passed"];

/// One row: a scenario of the set and its result in each column.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) scenario: String,
    /// The reason it is not scored, if it is not.
    pub(crate) not_scored: Option<String>,
    pub(crate) cells: Vec<Run>,
}

/// One requirement set and leg, a column per target; the first column is the baseline.
#[derive(Debug, Clone)]
pub(crate) struct SetTable {
    pub(crate) title: String,
    pub(crate) columns: Vec<String>,
    pub(crate) rows: Vec<Row>,
}

impl SetTable {
    /// Rows in the set's order; `runs[c]` is column `c`'s results. A scenario a column has no
    /// result for is `–` there.
    pub(crate) fn build(
        title: &str,
        columns: Vec<String>,
        entries: &[&Entry],
        runs: &[Vec<(String, Run)>],
    ) -> Self {
        let rows = entries
            .iter()
            .map(|entry| Row {
                scenario: entry.scenario.clone(),
                not_scored: entry.not_scored.clone(),
                cells: runs
                    .iter()
                    .map(|column| {
                        column
                            .iter()
                            .find(|(s, _)| *s == entry.scenario)
                            .map_or_else(
                                || Run::missing("the suite wrote no result"),
                                |(_, r)| r.clone(),
                            )
                    })
                    .collect(),
            })
            .collect();
        Self {
            title: title.to_owned(),
            columns,
            rows,
        }
    }

    /// Every regression of a scored scenario against the baseline: (scenario, column,
    /// difference).
    pub(crate) fn regressions(&self) -> Vec<(String, String, Difference)> {
        let mut out = Vec::new();
        for row in self.rows.iter().filter(|r| r.not_scored.is_none()) {
            let Some((baseline, others)) = row.cells.split_first() else {
                continue;
            };
            for (column, run) in self.columns.iter().skip(1).zip(others) {
                for difference in compare(baseline, run).regressions {
                    out.push((row.scenario.clone(), column.clone(), difference));
                }
            }
        }
        out
    }

    /// How the baseline column's failures of scored scenarios differ from `expected`
    /// (`scenario` or `scenario:check` entries): failures not expected, and entries that no
    /// longer fail (stale).
    pub(crate) fn baseline_mismatch(&self, expected: &BTreeSet<String>) -> Vec<String> {
        let mut out = Vec::new();
        let mut covered = BTreeSet::new();
        for row in self.rows.iter().filter(|r| r.not_scored.is_none()) {
            let Some(baseline) = row.cells.first() else {
                continue;
            };
            if let Some(why) = &baseline.missing {
                out.push(format!(
                    "{}: no result in the baseline ({why})",
                    row.scenario
                ));
                continue;
            }
            for failing in baseline.failing(&row.scenario) {
                if expected.contains(&failing) || expected.contains(&row.scenario) {
                    covered.insert(failing.clone());
                    covered.insert(row.scenario.clone());
                } else {
                    out.push(format!(
                        "{failing} fails in the baseline and is not expected to"
                    ));
                }
            }
        }
        for entry in expected {
            let scored = self
                .rows
                .iter()
                .any(|r| r.not_scored.is_none() && entry.split(':').next() == Some(&r.scenario));
            if scored && !covered.contains(entry) {
                out.push(format!(
                    "{entry} is expected to fail but passes in the baseline (stale)"
                ));
            }
        }
        out
    }

    /// The table as text: a row per scenario, then under it each column's regressions (`▼`),
    /// improvements (`▲`) and ungraded checks (`~`) against the baseline, at most `limit` of
    /// each per cell.
    pub(crate) fn render(&self, width: usize, limit: usize) -> String {
        let label = |row: &Row| match &row.not_scored {
            Some(reason) => format!("{} ({reason})", row.scenario),
            None => row.scenario.clone(),
        };
        let name_width = self
            .rows
            .iter()
            .map(|r| label(r).chars().count())
            .chain([self.title.chars().count(), TOTALS[1].len()])
            .max()
            .unwrap_or(0);
        let cell_width = self
            .columns
            .iter()
            .map(|c| c.chars().count())
            .chain([10])
            .max()
            .unwrap_or(10);
        let pad = |text: &str, n: usize| {
            let len = text.chars().count();
            format!("{text}{}", " ".repeat(n.saturating_sub(len)))
        };
        let mut out = pad(&self.title, name_width);
        for column in &self.columns {
            let _ = write!(out, "  {}", pad(column, cell_width));
        }
        out = out.trim_end().to_owned();
        out.push('\n');
        for row in &self.rows {
            let baseline = &row.cells[0];
            let mut line = pad(&label(row), name_width);
            let mut notes = Vec::new();
            for (index, (column, run)) in self.columns.iter().zip(&row.cells).enumerate() {
                let mut cell = run.cell();
                if index > 0 {
                    let comparison = compare(baseline, run);
                    if !comparison.regressions.is_empty() {
                        cell.push_str(" ▼");
                    } else if !comparison.improvements.is_empty() {
                        cell.push_str(" ▲");
                    }
                    for (mark, list) in [
                        ("▼", &comparison.regressions),
                        ("▲", &comparison.improvements),
                        ("~", &comparison.ungraded),
                    ] {
                        for difference in list.iter().take(limit) {
                            let what = difference.check.as_deref().unwrap_or("scenario");
                            notes.push(format!(
                                "    {column} {mark} {}",
                                shorten(&format!("{what}: {}", difference.message), width)
                            ));
                        }
                        if list.len() > limit {
                            notes.push(format!(
                                "    {column} {mark} … and {} more",
                                list.len() - limit
                            ));
                        }
                    }
                }
                let _ = write!(line, "  {}", pad(&cell, cell_width));
            }
            out.push_str(line.trim_end());
            out.push('\n');
            for note in notes {
                out.push_str(&note);
                out.push('\n');
            }
        }
        let scored: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.not_scored.is_none())
            .collect();
        let mut totals = pad(TOTALS[0], name_width);
        for index in 0..self.columns.len() {
            let clean = scored.iter().filter(|r| r.cells[index].clean()).count();
            let _ = write!(
                totals,
                "  {}",
                pad(&format!("{clean}/{}", scored.len()), cell_width)
            );
        }
        out.push_str(totals.trim_end());
        out.push('\n');
        let mut checks = pad(TOTALS[1], name_width);
        for index in 0..self.columns.len() {
            let passed: usize = scored
                .iter()
                .map(|r| r.cells[index].count(Status::Success))
                .sum();
            let graded: usize = scored.iter().map(|r| r.cells[index].graded()).sum();
            let _ = write!(
                checks,
                "  {}",
                pad(&format!("{passed}/{graded}"), cell_width)
            );
        }
        out.push_str(checks.trim_end());
        out.push('\n');
        out
    }

    /// The table as JSON: one object per scenario with one member per column.
    pub(crate) fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let baseline = &row.cells[0];
                let mut object = serde_json::Map::new();
                object.insert("scenario".to_owned(), json!(row.scenario));
                object.insert("scored".to_owned(), json!(row.not_scored.is_none()));
                object.insert("notScored".to_owned(), json!(row.not_scored));
                for (index, (column, run)) in self.columns.iter().zip(&row.cells).enumerate() {
                    let mut cell = json!({
                        "passed": run.count(Status::Success),
                        "warning": run.count(Status::Warning),
                        "failure": run.count(Status::Failure),
                        "graded": run.graded(),
                        "clean": run.clean(),
                        "missing": run.missing,
                        "failing": run
                            .checks
                            .iter()
                            .filter(|c| c.status.failing())
                            .map(|c| json!({
                                "check": run.label(c),
                                "status": c.status.name(),
                                "message": c.message,
                            }))
                            .collect::<Vec<_>>(),
                        "dir": run.dir,
                        "stdout": run.stdout,
                    });
                    if index > 0 {
                        let comparison = compare(baseline, run);
                        let list = |l: &[Difference]| -> Value {
                            l.iter()
                                .map(|d| json!({"check": d.check, "message": d.message}))
                                .collect()
                        };
                        cell["regressions"] = list(&comparison.regressions);
                        cell["improvements"] = list(&comparison.improvements);
                        cell["ungraded"] = list(&comparison.ungraded);
                    }
                    object.insert(column.clone(), cell);
                }
                Value::Object(object)
            })
            .collect();
        json!({"title": self.title, "columns": self.columns, "rows": rows})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(id: &str, name: &str, status: &str) -> Value {
        json!({"id": id, "name": name, "status": status, "errorMessage": format!("{id} said {status}")})
    }

    fn run(checks: &[Value]) -> Run {
        Run::from_checks(&Value::Array(checks.to_vec()))
    }

    #[test]
    fn checks_are_counted_and_matched_by_id_name_and_occurrence() {
        let direct = run(&[
            check("a", "A", "SUCCESS"),
            check("h", "Region", "SUCCESS"),
            check("h", "Priority", "SUCCESS"),
            check("h", "Priority", "SUCCESS"),
            check("i", "", "INFO"),
            check("s", "", "SKIPPED"),
        ]);
        assert_eq!((direct.count(Status::Success), direct.graded()), (4, 4));
        assert!(direct.clean());
        assert_eq!(direct.cell(), "4/4");
        assert_eq!(direct.label(&direct.checks[3]), "h (Priority #2)");
        assert_eq!(direct.label(&direct.checks[0]), "a");

        let proxy = run(&[
            check("a", "A", "SUCCESS"),
            check("h", "Region", "FAILURE"),
            check("h", "Priority", "SUCCESS"),
            check("x", "", "WARNING"),
        ]);
        assert_eq!(proxy.cell(), "2/4 ✗");
        let Comparison {
            regressions: worse,
            improvements: better,
            ungraded,
        } = compare(&direct, &proxy);
        assert!(ungraded.is_empty());
        let labels: Vec<&str> = worse.iter().filter_map(|d| d.check.as_deref()).collect();
        assert_eq!(labels, ["h (Region)", "h (Priority #2)", "x"]);
        assert!(
            worse[0].message.starts_with("FAILURE: h said FAILURE"),
            "{worse:?}"
        );
        assert!(worse[1].message.contains("not reported"), "{worse:?}");
        assert!(
            worse[2].message.contains("not reported in the baseline"),
            "{worse:?}"
        );
        assert!(better.is_empty());
    }

    #[test]
    fn passing_where_the_baseline_fails_is_an_improvement_not_a_regression() {
        let direct = run(&[
            check("w", "", "FAILURE"),
            check("v", "", "WARNING"),
            check("f", "", "FAILURE"),
        ]);
        let proxy = run(&[
            check("w", "", "SUCCESS"),
            check("v", "", "SUCCESS"),
            check("f", "", "FAILURE"),
        ]);
        let comparison = compare(&direct, &proxy);
        assert!(comparison.regressions.is_empty(), "{comparison:?}");
        assert_eq!(comparison.improvements.len(), 2);

        // Passing directly and only informational there: reported, not a regression.
        let streamed = run(&[check("s", "", "SUCCESS")]);
        let json_only = run(&[check("s", "", "INFO")]);
        let comparison = compare(&streamed, &json_only);
        assert!(comparison.regressions.is_empty());
        assert_eq!(comparison.ungraded[0].check.as_deref(), Some("s"));
        assert_eq!(direct.cell(), "0/3 ✗");
        assert_eq!(run(&[check("v", "", "WARNING")]).cell(), "0/1 !");
    }

    #[test]
    fn a_missing_result_regresses_only_where_the_baseline_has_one() {
        let missing = Run::missing("the suite wrote no result");
        let worse = compare(&run(&[check("a", "", "SUCCESS")]), &missing).regressions;
        assert_eq!(worse[0].check, None);
        assert!(compare(&missing, &missing).regressions.is_empty());
        assert_eq!(missing.cell(), "–");
        assert!(!missing.clean());
    }

    fn entry(scenario: &str, reason: Option<&str>) -> Entry {
        Entry {
            scenario: scenario.to_owned(),
            not_scored: reason.map(str::to_owned),
        }
    }

    #[test]
    fn a_table_reports_regressions_of_scored_scenarios_and_checks_the_baseline() {
        let entries = [
            entry("one", None),
            entry("two", None),
            entry("ext", Some("extension")),
        ];
        let entries: Vec<&Entry> = entries.iter().collect();
        let direct = vec![
            (
                "one".to_owned(),
                run(&[check("a", "", "SUCCESS"), check("wire", "", "FAILURE")]),
            ),
            ("two".to_owned(), run(&[check("b", "", "SUCCESS")])),
            ("ext".to_owned(), run(&[check("e", "", "SUCCESS")])),
        ];
        let proxy = vec![
            (
                "one".to_owned(),
                run(&[check("a", "", "SUCCESS"), check("wire", "", "FAILURE")]),
            ),
            ("ext".to_owned(), run(&[check("e", "", "FAILURE")])),
        ];
        let table = SetTable::build(
            "2026-07-28 server",
            vec!["direct".to_owned(), "proxy".to_owned()],
            &entries,
            &[direct, proxy],
        );
        // `two` has no result through the proxy; `ext` is not scored.
        let regressions = table.regressions();
        assert_eq!(regressions.len(), 1, "{regressions:?}");
        assert_eq!(
            (regressions[0].0.as_str(), regressions[0].1.as_str()),
            ("two", "proxy")
        );

        let expected: BTreeSet<String> = ["one:wire".to_owned()].into();
        assert!(table.baseline_mismatch(&expected).is_empty());
        let stale: BTreeSet<String> = ["one:wire".to_owned(), "two:b".to_owned()].into();
        assert_eq!(
            table.baseline_mismatch(&stale),
            ["two:b is expected to fail but passes in the baseline (stale)"]
        );
        let mismatch = table.baseline_mismatch(&BTreeSet::new());
        assert_eq!(
            mismatch,
            ["one:wire fails in the baseline and is not expected to"]
        );

        expect_test::expect![[r#"
            2026-07-28 server      direct      proxy
            one                    1/2 ✗       1/2 ✗
            two                    1/1         – ▼
                proxy ▼ scenario: the suite wrote no result
            ext (extension)        1/1         0/1 ✗ ▼
                proxy ▼ e: FAILURE: e said FAILURE
            scored, clean          1/2         0/2
            scored, checks passed  2/3         1/2
        "#]]
        .assert_eq(&table.render(100, 3));
        let json = table.to_json();
        assert_eq!(
            json["rows"][1]["proxy"]["regressions"][0]["check"],
            Value::Null
        );
        assert_eq!(json["rows"][0]["direct"]["failing"][0]["check"], "wire");
    }
}
