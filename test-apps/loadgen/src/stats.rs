//! Latency summaries: percentiles by nearest rank over every measured call, and throughput as
//! calls over the wall time from the first measured call to the last.

use std::time::Duration;

use serde_json::{Value, json};

/// What a run of calls produced.
#[derive(Debug, Default)]
pub(crate) struct Sample {
    /// One entry per measured call that succeeded.
    pub(crate) latencies: Vec<Duration>,
    /// Calls that failed, warm-up included.
    pub(crate) errors: usize,
    /// The first failure's message, to say what went wrong.
    pub(crate) first_error: Option<String>,
    /// From the first measured call's start to the last one's end.
    pub(crate) wall: Duration,
}

/// The `p`th percentile (0 < p <= 100) of ascending `sorted` by nearest rank, so it is always
/// a latency that was measured.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // Nearest rank: the smallest value with at least p% of the values at or below it.
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

fn micros(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| {
        json!((d.as_secs_f64() * 1e6 * 10.0).round() / 10.0)
    })
}

/// One result row: the path measured, how, and the figures (microseconds; calls per second).
pub(crate) fn row(path: &str, clients: usize, calls_per_client: usize, sample: &Sample) -> Value {
    let mut sorted = sample.latencies.clone();
    sorted.sort_unstable();
    let total: Duration = sorted.iter().sum();
    let count = sorted.len();
    let mean = (count > 0).then(|| total / u32::try_from(count).unwrap_or(u32::MAX));
    let seconds = sample.wall.as_secs_f64();
    let rps = if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    };
    json!({
        "path": path,
        "clients": clients,
        "callsPerClient": calls_per_client,
        "calls": count,
        "errors": sample.errors,
        "firstError": sample.first_error,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "rps": rps.round(),
        "p50Us": micros(percentile(&sorted, 50.0)),
        "p90Us": micros(percentile(&sorted, 90.0)),
        "p99Us": micros(percentile(&sorted, 99.0)),
        "meanUs": micros(mean),
        "minUs": micros(sorted.first().copied()),
        "maxUs": micros(sorted.last().copied()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(list: &[u64]) -> Vec<Duration> {
        list.iter().map(|m| Duration::from_millis(*m)).collect()
    }

    #[test]
    fn percentiles_are_measured_values_by_nearest_rank() {
        let sorted = ms(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(percentile(&sorted, 50.0), Some(Duration::from_millis(5)));
        assert_eq!(percentile(&sorted, 90.0), Some(Duration::from_millis(9)));
        assert_eq!(percentile(&sorted, 99.0), Some(Duration::from_millis(10)));
        assert_eq!(percentile(&sorted, 100.0), Some(Duration::from_millis(10)));
        assert_eq!(percentile(&ms(&[7]), 1.0), Some(Duration::from_millis(7)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn a_row_counts_calls_over_the_wall_time() {
        let sample = Sample {
            latencies: ms(&[4, 2, 3, 1]),
            errors: 1,
            first_error: Some("boom".to_owned()),
            wall: Duration::from_millis(500),
        };
        let row = row("direct", 2, 2, &sample);
        assert_eq!(row["calls"], 4);
        assert_eq!(row["errors"], 1);
        assert_eq!(row["firstError"], "boom");
        assert_eq!(row["rps"], 8.0);
        assert_eq!(row["p50Us"], 2000.0);
        assert_eq!(row["minUs"], 1000.0);
        assert_eq!(row["maxUs"], 4000.0);
        assert_eq!(row["meanUs"], 2500.0);
    }

    #[test]
    fn an_empty_sample_has_no_latencies() {
        let row = row("none", 1, 0, &Sample::default());
        assert_eq!(row["calls"], 0);
        assert_eq!(row["rps"], 0.0);
        assert!(row["p50Us"].is_null());
    }
}
