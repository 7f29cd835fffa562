//! Counting the calls that cross an app's upstream session, in Prometheus series.
//!
//! The families live in a `prometheus_client` registry owned by whoever composes the gateway
//! ([`SupervisorMetrics::register`]), never in a global, so two gateways in one process keep
//! their series apart. The hub of each session (`mcpapp-session`) is where a request and its
//! answer, timeout or cancellation meet, for the gateway's own calls and every port's alike,
//! so it is the one place that sees them: it tells the app's [`AppMeters`], its
//! [`SessionObserver`], and they count.
//!
//! Label values are bounded: `app` is an app the supervisor knows; `tool` is a tool the app
//! listed, or `other`; `path` and `outcome` are fixed sets. The handles of each (tool, path,
//! outcome) are made the first time they are used and kept, so a call allocates no labels.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use mcpapp_session::{CallOutcome, CallPath, SessionObserver, ToolObserver};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `tool` label of calls to a name the app does not list.
pub(crate) const OTHER_TOOL: &str = "other";

/// Buckets of the call duration histogram: 0.5 ms doubling to about 65 s (18 buckets), so
/// both an in-memory answer and a call near a long request timeout land in a bucket.
const DURATION_BUCKETS: (f64, f64, u16) = (0.0005, 2.0, 18);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CallLabels {
    app: Arc<str>,
    tool: Arc<str>,
    path: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DurationLabels {
    app: Arc<str>,
    tool: Arc<str>,
    path: &'static str,
}

/// Where a path's handles are kept in a [`ToolMeters`].
fn path_index(path: CallPath) -> usize {
    match path {
        CallPath::Agent => 0,
        CallPath::Proxy => 1,
        CallPath::Mcp => 2,
    }
}

/// Paths a tool's handles are kept for.
const PATHS: usize = 3;

/// Where an outcome's handle is kept in a [`ToolMeters`].
fn outcome_index(outcome: CallOutcome) -> usize {
    match outcome {
        CallOutcome::Ok => 0,
        CallOutcome::Error => 1,
        CallOutcome::Failed => 2,
        CallOutcome::Timeout => 3,
        CallOutcome::Cancelled => 4,
    }
}

/// Outcomes a tool's handles are kept for.
const OUTCOMES: usize = 5;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct AppLabels {
    app: Arc<str>,
}

#[derive(Debug, Clone, Copy)]
struct DurationHistogram;

impl MetricConstructor<Histogram> for DurationHistogram {
    fn new_metric(&self) -> Histogram {
        let (start, factor, length) = DURATION_BUCKETS;
        Histogram::new(exponential_buckets(start, factor, length))
    }
}

#[derive(Debug)]
struct Families {
    calls: Family<CallLabels, Counter>,
    durations: Family<DurationLabels, Histogram, DurationHistogram>,
    timeouts: Family<AppLabels, Counter>,
    cancellations: Family<AppLabels, Counter>,
}

/// The supervisor's series: tool calls by app, tool, path and outcome, their durations, and
/// the requests that timed out or were cancelled upstream. Cheap to clone; every clone
/// counts into the same series.
#[derive(Debug, Clone)]
pub struct SupervisorMetrics {
    families: Arc<Families>,
}

impl Default for SupervisorMetrics {
    /// Series that count but belong to no registry (nobody scrapes them).
    fn default() -> Self {
        Self {
            families: Arc::new(Families {
                calls: Family::default(),
                durations: Family::new_with_constructor(DurationHistogram),
                timeouts: Family::default(),
                cancellations: Family::default(),
            }),
        }
    }
}

impl SupervisorMetrics {
    /// Creates the series and registers them in `registry`:
    /// `mcpapp_tool_calls_total{app,tool,path,outcome}`,
    /// `mcpapp_tool_call_duration_seconds{app,tool,path}`,
    /// `mcpapp_upstream_timeouts_total{app}` and `mcpapp_upstream_cancellations_total{app}`.
    /// Hand the result to [`SupervisorBuilder::metrics`](crate::SupervisorBuilder::metrics).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let families = &metrics.families;
        registry.register(
            "mcpapp_tool_calls",
            "tools/call requests sent to apps, by app, tool (one the app lists, else \"other\"), path (agent, proxy, mcp) and outcome (ok, error, failed, timeout, cancelled)",
            families.calls.clone(),
        );
        registry.register(
            "mcpapp_tool_call_duration_seconds",
            "Time from a tools/call reaching an app's session to its answer, timeout or cancellation",
            families.durations.clone(),
        );
        registry.register(
            "mcpapp_upstream_timeouts",
            "Requests to an app that ran out of the request timeout and were cancelled upstream",
            families.timeouts.clone(),
        );
        registry.register(
            "mcpapp_upstream_cancellations",
            "Requests to an app cancelled upstream because their caller stopped waiting or its session closed (timeouts not included)",
            families.cancellations.clone(),
        );
        metrics
    }

    /// The meters of one app.
    pub(crate) fn app(&self, app_id: &str) -> Arc<AppMeters> {
        let app: Arc<str> = Arc::from(app_id);
        let labels = AppLabels { app: app.clone() };
        let timeouts = self.families.timeouts.get_or_create_owned(&labels);
        let cancellations = self.families.cancellations.get_or_create_owned(&labels);
        Arc::new(AppMeters {
            other: Arc::new(ToolMeters::new(
                self.families.clone(),
                app.clone(),
                Arc::from(OTHER_TOOL),
            )),
            families: self.families.clone(),
            app,
            tools: RwLock::new(HashMap::new()),
            timeouts,
            cancellations,
        })
    }
}

/// The meters of one app, shared by its task (which tells it the tools listed) and the hub
/// of every connection it makes.
#[derive(Debug)]
pub(crate) struct AppMeters {
    families: Arc<Families>,
    app: Arc<str>,
    /// The listed tools, each with its meters once it has been called.
    tools: RwLock<HashMap<Arc<str>, Option<Arc<ToolMeters>>>>,
    other: Arc<ToolMeters>,
    timeouts: Counter,
    cancellations: Counter,
}

impl AppMeters {
    /// The tools the app lists now; calls to any other name count as [`OTHER_TOOL`]. A
    /// listed tool gets its meters when it is first called: most of an app's tools are never
    /// called in a gateway's life, and meters for each would cost every app kilobytes.
    pub(crate) fn know_tools<'a>(&self, names: impl Iterator<Item = &'a str>) {
        let mut tools = self.tools.write().unwrap_or_else(|p| p.into_inner());
        let mut next = HashMap::with_capacity(tools.len());
        for name in names {
            match tools.remove_entry(name) {
                Some((name, meters)) => next.insert(name, meters),
                None => next.insert(Arc::from(name), None),
            };
        }
        *tools = next;
    }
}

impl SessionObserver for AppMeters {
    /// The meters of the tool `name`, or of [`OTHER_TOOL`] for a name the app does not list
    /// (or no name).
    fn tool(&self, name: Option<&str>) -> Arc<dyn ToolObserver> {
        let Some(name) = name else {
            return self.other.clone();
        };
        {
            let tools = self.tools.read().unwrap_or_else(|p| p.into_inner());
            match tools.get(name) {
                None => return self.other.clone(),
                Some(Some(meters)) => return meters.clone(),
                Some(None) => {}
            }
        }
        // The first call of a listed tool; the list may have changed since the read.
        let mut tools = self.tools.write().unwrap_or_else(|p| p.into_inner());
        match tools.get_mut(name) {
            None => self.other.clone(),
            Some(meters) => meters
                .get_or_insert_with(|| {
                    Arc::new(ToolMeters::new(
                        self.families.clone(),
                        self.app.clone(),
                        Arc::from(name),
                    ))
                })
                .clone(),
        }
    }

    fn timed_out(&self) {
        self.timeouts.inc();
    }

    fn cancelled(&self, count: u64) {
        if count > 0 {
            self.cancellations.inc_by(count);
        }
    }
}

/// The handles of one tool, made on first use.
#[derive(Debug)]
pub(crate) struct ToolMeters {
    families: Arc<Families>,
    app: Arc<str>,
    tool: Arc<str>,
    calls: [[OnceLock<Counter>; OUTCOMES]; PATHS],
    durations: [OnceLock<Histogram>; PATHS],
}

impl ToolMeters {
    fn new(families: Arc<Families>, app: Arc<str>, tool: Arc<str>) -> Self {
        Self {
            families,
            app,
            tool,
            calls: Default::default(),
            durations: Default::default(),
        }
    }
}

impl ToolObserver for ToolMeters {
    /// Counts one finished call.
    fn finish(&self, path: CallPath, outcome: CallOutcome, elapsed: Duration) {
        self.calls[path_index(path)][outcome_index(outcome)]
            .get_or_init(|| {
                self.families.calls.get_or_create_owned(&CallLabels {
                    app: self.app.clone(),
                    tool: self.tool.clone(),
                    path: path.as_str(),
                    outcome: outcome.as_str(),
                })
            })
            .inc();
        self.durations[path_index(path)]
            .get_or_init(|| {
                self.families
                    .durations
                    .get_or_create_owned(&DurationLabels {
                        app: self.app.clone(),
                        tool: self.tool.clone(),
                        path: path.as_str(),
                    })
            })
            .observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn unknown_tools_count_as_other_and_known_ones_by_name() {
        let mut registry = Registry::default();
        let metrics = SupervisorMetrics::register(&mut registry);
        let app = metrics.app("fx");
        app.know_tools(["echo", "slow"].into_iter());
        app.tool(Some("echo"))
            .finish(CallPath::Agent, CallOutcome::Ok, Duration::from_millis(2));
        app.tool(Some("no_such_tool")).finish(
            CallPath::Proxy,
            CallOutcome::Failed,
            Duration::from_millis(1),
        );
        app.tool(None)
            .finish(CallPath::Mcp, CallOutcome::Timeout, Duration::from_secs(1));
        let text = render(&registry);
        assert!(
            text.contains(
                r#"mcpapp_tool_calls_total{app="fx",tool="echo",path="agent",outcome="ok"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"mcpapp_tool_calls_total{app="fx",tool="other",path="proxy",outcome="failed"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"mcpapp_tool_calls_total{app="fx",tool="other",path="mcp",outcome="timeout"} 1"#
            ),
            "{text}"
        );
        assert!(!text.contains("no_such_tool"), "{text}");
        // Only what was used has series.
        assert!(!text.contains(r#"tool="slow""#), "{text}");
    }

    #[test]
    fn a_tool_that_is_listed_again_keeps_counting_into_its_series() {
        let mut registry = Registry::default();
        let metrics = SupervisorMetrics::register(&mut registry);
        let app = metrics.app("fx");
        app.know_tools(["echo"].into_iter());
        app.tool(Some("echo"))
            .finish(CallPath::Proxy, CallOutcome::Ok, Duration::ZERO);
        app.know_tools(["other_tool", "echo"].into_iter());
        app.tool(Some("echo"))
            .finish(CallPath::Proxy, CallOutcome::Ok, Duration::ZERO);
        app.know_tools(std::iter::empty());
        app.tool(Some("echo"))
            .finish(CallPath::Proxy, CallOutcome::Ok, Duration::ZERO);
        let text = render(&registry);
        assert!(
            text.contains(
                r#"mcpapp_tool_calls_total{app="fx",tool="echo",path="proxy",outcome="ok"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"mcpapp_tool_calls_total{app="fx",tool="other",path="proxy",outcome="ok"} 1"#
            ),
            "{text}"
        );
    }
}
