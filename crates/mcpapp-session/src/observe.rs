//! What the hub reports about the calls that cross a session, for whoever keeps the meters.
//!
//! The hub is where a request and its answer, timeout or cancellation meet, for the gateway's
//! own calls and every port's alike, so it is the one place that can see how each
//! `tools/call` ended. It does not count anything itself: it tells a [`SessionObserver`]
//! (the supervisor's Prometheus meters of the app), so the series, their labels and their
//! registry stay with the metrics of apps.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

/// Which surface a `tools/call` came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CallPath {
    /// The gateway's own calls: the agent through the tool bridge.
    Agent,
    /// A browser view's session of `/apps/mcp/{appId}` (what ports are opened as).
    #[default]
    Proxy,
    /// An external MCP client of the gateway's aggregated `/mcp` endpoint.
    Mcp,
}

impl CallPath {
    const ALL: [CallPath; 3] = [Self::Agent, Self::Proxy, Self::Mcp];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Proxy => "proxy",
            Self::Mcp => "mcp",
        }
    }

    fn to_u8(self) -> u8 {
        self as u8
    }

    fn from_u8(value: u8) -> Self {
        Self::ALL
            .get(usize::from(value))
            .copied()
            .unwrap_or_default()
    }
}

/// How a `tools/call` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true` (the tool ran and reported a failure).
    Error,
    /// A JSON-RPC error, or the connection was lost.
    Failed,
    /// The request timeout ran out; the request was cancelled upstream.
    Timeout,
    /// The caller stopped waiting (or its session closed); cancelled upstream.
    Cancelled,
}

impl CallOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Told about the calls of one app's sessions (every connection the app makes shares one).
///
/// The hub calls it on its own task, once per event: keep it cheap and never block.
pub trait SessionObserver: fmt::Debug + Send + Sync + 'static {
    /// A `tools/call` of the tool `name` (`None`: the request names none) begins; the
    /// returned observer is told how it ends. Called for every call, so hand out a kept
    /// handle rather than making one each time.
    fn tool(&self, name: Option<&str>) -> Arc<dyn ToolObserver>;

    /// A request ran out of the request timeout and was cancelled upstream.
    fn timed_out(&self);

    /// `count` requests were cancelled upstream because their caller stopped waiting or its
    /// session closed (timeouts not included). Called with 0 too.
    fn cancelled(&self, count: u64);
}

/// Told how the `tools/call`s of one tool end.
pub trait ToolObserver: fmt::Debug + Send + Sync {
    /// A call that came through `path` ended with `outcome` after `elapsed`.
    fn finish(&self, path: CallPath, outcome: CallOutcome, elapsed: Duration);
}

/// A port's path, settable after it was opened.
#[derive(Debug, Default)]
pub(crate) struct PathCell(AtomicU8);

impl PathCell {
    pub(crate) fn new(path: CallPath) -> Self {
        Self(AtomicU8::new(path.to_u8()))
    }

    pub(crate) fn get(&self) -> CallPath {
        CallPath::from_u8(self.0.load(Ordering::Relaxed))
    }

    pub(crate) fn set(&self, path: CallPath) {
        self.0.store(path.to_u8(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_survive_the_round_trip_through_the_cell() {
        for path in CallPath::ALL {
            let cell = PathCell::new(CallPath::Proxy);
            cell.set(path);
            assert_eq!(cell.get(), path);
        }
    }
}
