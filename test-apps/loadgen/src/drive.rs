//! Runs concurrent callers: each warms up, all start measuring together (a barrier), and each
//! makes its calls one after the other, timing every one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::Barrier;

use crate::stats::Sample;

/// One caller's call: given a sequence number unique to that caller, performs one call and
/// says whether it succeeded.
pub(crate) type Call = Arc<dyn Fn(u64) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// How many calls each caller makes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Unmeasured calls first (connections opened, caches and pools filled).
    pub(crate) warmup: usize,
    /// Measured calls.
    pub(crate) calls: usize,
}

struct CallerResult {
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    started: Instant,
    ended: Instant,
}

/// Runs every caller concurrently, each on its own task, and merges what they measured.
pub(crate) async fn drive(callers: Vec<Call>, plan: Plan) -> Sample {
    let barrier = Arc::new(Barrier::new(callers.len()));
    let tasks: Vec<_> = callers
        .into_iter()
        .map(|call| tokio::spawn(caller(call, plan, barrier.clone())))
        .collect();
    let mut sample = Sample::default();
    let mut first_start: Option<Instant> = None;
    let mut last_end: Option<Instant> = None;
    for task in tasks {
        let result = match task.await {
            Ok(result) => result,
            Err(err) => {
                sample.errors += 1;
                sample
                    .first_error
                    .get_or_insert_with(|| format!("a caller panicked: {err}"));
                continue;
            }
        };
        sample.latencies.extend(result.latencies);
        sample.errors += result.errors;
        if sample.first_error.is_none() {
            sample.first_error = result.first_error;
        }
        first_start = Some(first_start.map_or(result.started, |t| t.min(result.started)));
        last_end = Some(last_end.map_or(result.ended, |t| t.max(result.ended)));
    }
    if let (Some(start), Some(end)) = (first_start, last_end) {
        sample.wall = end.saturating_duration_since(start);
    }
    sample
}

async fn caller(call: Call, plan: Plan, barrier: Arc<Barrier>) -> CallerResult {
    let mut errors = 0;
    let mut first_error = None;
    let mut note = |err: String, errors: &mut usize| {
        *errors += 1;
        first_error.get_or_insert(err);
    };
    let mut seq = 0u64;
    for _ in 0..plan.warmup {
        seq += 1;
        if let Err(err) = call(seq).await {
            note(err, &mut errors);
        }
    }
    barrier.wait().await;
    let mut latencies = Vec::with_capacity(plan.calls);
    let started = Instant::now();
    for _ in 0..plan.calls {
        seq += 1;
        let before = Instant::now();
        match call(seq).await {
            Ok(()) => latencies.push(before.elapsed()),
            Err(err) => note(err, &mut errors),
        }
    }
    CallerResult {
        latencies,
        errors,
        first_error,
        started,
        ended: Instant::now(),
    }
}
