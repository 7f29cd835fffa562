//! Integration tests of mcpapp-supervisor with real child processes and real HTTP servers:
//! the `fixture-app` and `grocery-inventory` test apps, and `oauth-server` for apps behind OAuth.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used, clippy::needless_pass_by_value)]

mod connect;
mod elicitor;
mod http_link;
mod isolation;
mod metrics;
mod oauth;
mod ports;
mod supervision;

use std::time::Duration;

use mcpapp_discovery::DiscoveryReport;
use mcpapp_supervisor::{SupervisionPolicy, Supervisor, SupervisorEvent};
use tokio::sync::broadcast;

/// The one bound of every wait (the testkit's, for all suites).
pub(crate) use mcpapp_testkit::PATIENCE;

/// A policy for tests: fast restarts, no health pings unless a test wants them.
pub(crate) fn fast_policy() -> SupervisionPolicy {
    let mut policy = SupervisionPolicy::default();
    policy.restart_delay = Duration::from_millis(50);
    policy.max_restart_delay = Duration::from_secs(2);
    policy.health_check_interval = None;
    policy.shutdown_grace = Duration::from_secs(2);
    policy
}

/// Logs to the test output when `RUST_LOG` is set.
pub(crate) fn logging() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    }
}

/// A supervisor with `policy`, loaded with `report`.
pub(crate) fn supervise(report: &DiscoveryReport, policy: SupervisionPolicy) -> Supervisor {
    logging();
    let supervisor = Supervisor::builder().policy(policy).build();
    supervisor.load(report);
    supervisor
}

/// Waits for the first event matching `pred`.
pub(crate) async fn next_event(
    events: &mut broadcast::Receiver<SupervisorEvent>,
    mut pred: impl FnMut(&SupervisorEvent) -> bool,
) -> SupervisorEvent {
    tokio::time::timeout(PATIENCE, async {
        loop {
            match events.recv().await {
                Ok(event) if pred(&event) => return event,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("event stream closed"),
            }
        }
    })
    .await
    .expect("the expected event arrived")
}

/// The text of the first content block of a tool result.
pub(crate) fn first_text(result: &mcpapp_supervisor::mcp::CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .unwrap_or_default()
}
