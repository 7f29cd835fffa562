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
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{AppHandle, SupervisionPolicy, Supervisor, SupervisorEvent};
use tokio::sync::broadcast;

/// Long enough for any single step on a loaded 2-core CI machine; tests wait on events and
/// only fail at this bound.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

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

/// Waits until `app` reaches `state`; panics with its snapshot otherwise.
pub(crate) async fn wait_state(app: &AppHandle, state: Lifecycle) {
    let mut watch = app.watch();
    let reached =
        tokio::time::timeout(PATIENCE, watch.wait_for(|s| s.state.lifecycle == state)).await;
    assert!(
        reached.is_ok(),
        "{} never became {state}: {:?}",
        app.id(),
        app.snapshot()
    );
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
