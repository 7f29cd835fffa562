//! The benchmark's figures across runs: every (path, clients) row summarised as min–max over
//! the runs, compared with its baseline row of the same run (the matching direct path, or the
//! port for the in-process paths), and rendered as a Markdown table for the terminal and
//! `docs/performance.md`.

use serde_json::{Value, json};

/// The [min, max] of `values` (empty gives none).
fn range(values: &[f64]) -> Option<(f64, f64)> {
    let min = values.iter().copied().reduce(f64::min)?;
    let max = values.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

fn range_json(values: &[f64]) -> Value {
    range(values).map_or(Value::Null, |(a, b)| json!([a, b]))
}

/// The rows of one run with this `id` and `clients`.
fn find<'a>(run: &'a [Value], id: &str, clients: &Value) -> Option<&'a Value> {
    run.iter()
        .find(|row| row["id"] == id && &row["clients"] == clients)
}

/// One entry per (id, clients) in the order of the first run that has it: ranges over the
/// runs of p50/p90/p99 (µs) and calls per second, and per-run comparisons with the baseline
/// (`p50 / base p50`, `p50 - base p50`, `rps / base rps`).
pub(crate) fn summarize(runs: &[Vec<Value>]) -> Vec<Value> {
    let mut keys: Vec<(String, Value)> = Vec::new();
    for run in runs {
        for row in run {
            let key = (
                row["id"].as_str().unwrap_or_default().to_owned(),
                row["clients"].clone(),
            );
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys.iter()
        .map(|(id, clients)| {
            let rows: Vec<(&Value, Option<&Value>)> = runs
                .iter()
                .filter_map(|run| {
                    let row = find(run, id, clients)?;
                    let base = row["baseline"].as_str().and_then(|b| find(run, b, clients));
                    Some((row, base))
                })
                .collect();
            let of = |name: &str| -> Vec<f64> {
                rows.iter().filter_map(|(r, _)| r[name].as_f64()).collect()
            };
            let compared = |f: &dyn Fn(f64, f64) -> f64, name: &str| -> Vec<f64> {
                rows.iter()
                    .filter_map(|(r, b)| Some(f(r[name].as_f64()?, b.as_ref()?[name].as_f64()?)))
                    .filter(|v| v.is_finite())
                    .collect()
            };
            let first = rows.first().map(|(r, _)| *r);
            json!({
                "id": id,
                "path": first.map_or(Value::Null, |r| r["path"].clone()),
                "clients": clients,
                "baseline": first.map_or(Value::Null, |r| r["baseline"].clone()),
                "baselineName": first.map_or(Value::Null, |r| r["baselineName"].clone()),
                "runs": rows.len(),
                "errors": rows.iter().filter_map(|(r, _)| r["errors"].as_u64()).sum::<u64>(),
                "p50Us": range_json(&of("p50Us")),
                "p90Us": range_json(&of("p90Us")),
                "p99Us": range_json(&of("p99Us")),
                "rps": range_json(&of("rps")),
                "p50Ratio": range_json(&compared(&|a, b| a / b, "p50Us")),
                "p50DeltaUs": range_json(&compared(&|a, b| a - b, "p50Us")),
                "rpsRatio": range_json(&compared(&|a, b| a / b, "rps")),
            })
        })
        .collect()
}

/// A latency in milliseconds with sensible precision.
fn ms(us: f64) -> String {
    let ms = us / 1000.0;
    if ms.abs() >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    }
}

fn count(value: f64) -> String {
    format!("{value:.0}")
}

fn ratio(value: f64) -> String {
    format!("{value:.2}")
}

/// `a–b`, or one value when they are equal in the chosen format.
fn cell(value: &Value, format: fn(f64) -> String) -> String {
    match (value[0].as_f64(), value[1].as_f64()) {
        (Some(a), Some(b)) => {
            let (a, b) = (format(a), format(b));
            if a == b { a } else { format!("{a}–{b}") }
        }
        _ => String::new(),
    }
}

/// The summary as a Markdown table; the baseline column shows each row's `baselineName`.
pub(crate) fn render(summary: &[Value]) -> String {
    let mut out = String::from(
        "| path | clients | p50 ms | p90 ms | p99 ms | calls/s | vs | p50 × | p50 + ms | calls/s × |\n\
         |---|--:|--:|--:|--:|--:|---|--:|--:|--:|\n",
    );
    for entry in summary {
        let baseline = entry["baselineName"].as_str().unwrap_or_default();
        let errors = entry["errors"].as_u64().unwrap_or_default();
        let path = entry["path"].as_str().unwrap_or_default();
        let path = if errors > 0 {
            format!("{path} (**{errors} failed calls**)")
        } else {
            path.to_owned()
        };
        out.push_str(&format!(
            "| {path} | {} | {} | {} | {} | {} | {baseline} | {} | {} | {} |\n",
            entry["clients"],
            cell(&entry["p50Us"], ms),
            cell(&entry["p90Us"], ms),
            cell(&entry["p99Us"], ms),
            cell(&entry["rps"], count),
            cell(&entry["p50Ratio"], ratio),
            cell(&entry["p50DeltaUs"], ms),
            cell(&entry["rpsRatio"], ratio),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, clients: u64, p50: f64, rps: f64, baseline: Option<&str>) -> Value {
        json!({
            "id": id, "path": format!("path {id}"), "clients": clients, "baseline": baseline,
            "baselineName": baseline.map(|b| format!("the {b}")),
            "errors": 0, "p50Us": p50, "p90Us": p50 * 2.0, "p99Us": p50 * 3.0, "rps": rps,
        })
    }

    #[test]
    fn runs_become_ranges_compared_with_their_baseline_in_the_same_run() {
        let runs = vec![
            vec![
                row("direct", 1, 400.0, 2000.0, None),
                row("proxy", 1, 600.0, 1000.0, Some("direct")),
                row("proxy", 4, 900.0, 3000.0, Some("direct")),
            ],
            vec![
                row("direct", 1, 500.0, 1800.0, None),
                row("proxy", 1, 1000.0, 900.0, Some("direct")),
            ],
        ];
        let summary = summarize(&runs);
        assert_eq!(summary.len(), 3);
        let proxy = &summary[1];
        assert_eq!(proxy["runs"], 2);
        assert_eq!(proxy["p50Us"], json!([600.0, 1000.0]));
        assert_eq!(proxy["p50Ratio"], json!([1.5, 2.0]));
        assert_eq!(proxy["p50DeltaUs"], json!([200.0, 500.0]));
        assert_eq!(proxy["rpsRatio"], json!([0.5, 0.5]));
        // No direct row with 4 clients: nothing to compare with.
        assert_eq!(summary[2]["p50Ratio"], Value::Null);
        assert_eq!(summary[0]["p50Ratio"], Value::Null);
    }

    #[test]
    fn the_table_shows_ranges_and_names_the_baseline() {
        let runs = vec![
            vec![
                row("direct", 1, 400.0, 2000.0, None),
                row("proxy", 1, 44_000.0, 23.0, Some("direct")),
            ],
            vec![
                row("direct", 1, 540.0, 2000.0, None),
                row("proxy", 1, 44_000.0, 23.0, Some("direct")),
            ],
        ];
        let table = render(&summarize(&runs));
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(
            lines[2].starts_with("| path direct | 1 | 0.40–0.54 |"),
            "{table}"
        );
        assert!(
            lines[3].starts_with("| path proxy | 1 | 44.0 | 88.0 | 132.0 | 23 | the direct |"),
            "{table}"
        );
    }

    #[test]
    fn failed_calls_are_marked() {
        let mut failing = row("direct", 1, 400.0, 2000.0, None);
        failing["errors"] = json!(3);
        let table = render(&summarize(&[vec![failing]]));
        assert!(table.contains("(**3 failed calls**)"), "{table}");
    }
}
