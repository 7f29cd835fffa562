//! Waiting in tests: one bound for every step ([`PATIENCE`]), on events where the system
//! offers them ([`within`], [`wait_watch`], [`wait_state`]) and by polling where it does not
//! ([`eventually`], and [`eventually_blocking`] for tests that are not async).

use std::fmt::{Debug, Display};
use std::future::Future;
use std::time::Duration;

use mcpapp_manifest::{InstallState, Lifecycle};
use tokio::sync::watch;

/// How long a test waits for any one step before it fails: long enough for a loaded 2-core
/// machine. Tests wait on events and only fail at this bound; it never measures speed.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Awaits `fut`, failing the test with `what` if it takes longer than [`PATIENCE`].
pub async fn within<F: Future>(what: impl Display, fut: F) -> F::Output {
    match tokio::time::timeout(PATIENCE, fut).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {PATIENCE:?}: {what}"),
    }
}

/// Polls `check` (an async closure: it may make requests) every 20 ms until it is true or
/// `limit` passes; returns whether it came true. For conditions the system offers no event
/// for: a process leaving the process table, a counter a server reports, a log line written.
/// A closure that records what it saw gives the caller's assertion its message.
pub async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`eventually`] for tests that are not async, with a plain closure (it runs on a runtime of
/// its own, so it must not be called from inside one).
pub fn eventually_blocking(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime for eventually_blocking")
        .block_on(eventually(limit, async || check()))
}

/// Waits until `done` holds for the value `rx` watches (checked now, then at every change)
/// and returns that value. Fails the test with `what` and the last value seen when
/// [`PATIENCE`] passes or the sender goes away first.
pub async fn wait_watch<T: Debug + Clone>(
    mut rx: watch::Receiver<T>,
    what: impl Display,
    mut done: impl FnMut(&T) -> bool,
) -> T {
    let waited = tokio::time::timeout(PATIENCE, async {
        rx.wait_for(|value| done(value)).await.map(|v| v.clone())
    })
    .await;
    match waited {
        Ok(Ok(value)) => value,
        Ok(Err(_)) => panic!(
            "{what}: the sender went away; last value: {:?}",
            *rx.borrow()
        ),
        Err(_) => panic!(
            "timed out after {PATIENCE:?} waiting for {what}; last value: {:?}",
            *rx.borrow()
        ),
    }
}

/// Waits until a watched app (a supervisor's `AppHandle::watch()`, or anything that holds an
/// [`InstallState`]) reaches `state`, and returns what it holds then.
pub async fn wait_state<T>(rx: watch::Receiver<T>, state: Lifecycle) -> T
where
    T: AsRef<InstallState> + Debug + Clone,
{
    let id = rx.borrow().as_ref().id().to_owned();
    wait_watch(rx, format!("{id} to become {state}"), |s| {
        s.as_ref().lifecycle == state
    })
    .await
}
