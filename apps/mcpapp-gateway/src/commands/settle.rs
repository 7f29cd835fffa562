//! `serve`'s report of the apps settling after start. In a terminal: one line per app with a
//! spinner and its state as it changes, finalised with where it came to rest (Running with its
//! tool count, Failed with the reason, Disabled, Stopped, invalid). Elsewhere (a pipe, a
//! file, a service manager's journal): the supervisor's own log line per transition, and one
//! line once every app has settled.
//!
//! Driven by each app's state watch (`AppHandle::watch`), which holds the current state as
//! well as its changes: apps start while the gateway is still being set up, and a transition
//! made before the display began would be lost on the supervisor's event stream.

use std::collections::BTreeMap;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{AppHandle, AppSnapshot, Supervisor};
use tracing::info;

use super::apps::shorten;

/// The longest failure reason a finished line shows, in characters.
const REASON_WIDTH: usize = 100;

/// Reports the apps of `supervisor` until every one has settled; `terminal` picks the
/// display. Dropping the future (at shutdown) leaves the lines as they are.
pub(crate) async fn report(supervisor: &Supervisor, terminal: bool) {
    let apps = supervisor.list();
    if apps.is_empty() {
        return;
    }
    // Each app as it first came to rest (a failed app may be starting again by the end).
    let settled: Vec<AppSnapshot> = if terminal {
        display(&apps).await
    } else {
        futures::future::join_all(apps.iter().map(|app| settled(app, |_| {}))).await
    };
    info!("{}", summary(&settled));
}

/// "3 apps settled: 2 Running, 1 Failed".
fn summary(apps: &[AppSnapshot]) -> String {
    let mut counts: BTreeMap<u8, (Lifecycle, usize)> = BTreeMap::new();
    for app in apps {
        let lifecycle = app.state.lifecycle;
        counts.entry(lifecycle as u8).or_insert((lifecycle, 0)).1 += 1;
    }
    let parts: Vec<String> = counts
        .values()
        .map(|(lifecycle, n)| format!("{n} {lifecycle}"))
        .collect();
    let noun = if apps.len() == 1 { "app" } else { "apps" };
    format!("{} {noun} settled: {}", apps.len(), parts.join(", "))
}

/// Waits until `app` has settled, calling `seen` with each state it passes through; returns
/// the settled state (or the last one, if the app went away first).
async fn settled(app: &AppHandle, seen: impl Fn(&AppSnapshot)) -> AppSnapshot {
    let mut watch = app.watch();
    loop {
        let snapshot = watch.borrow_and_update().clone();
        seen(&snapshot);
        if snapshot.state.lifecycle.is_settled() || watch.changed().await.is_err() {
            return snapshot;
        }
    }
}

/// One spinner line per app on stderr until it settles, then its final state.
async fn display(apps: &[AppHandle]) -> Vec<AppSnapshot> {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let width = apps
        .iter()
        .map(|a| a.id().chars().count())
        .max()
        .unwrap_or(0);
    let spinning =
        ProgressStyle::with_template(&format!("{{spinner}} {{prefix:<{width}}}  {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
    crate::progress::activate(&multi);
    let lines = apps.iter().map(|app| {
        let bar = multi.add(ProgressBar::new_spinner());
        bar.set_style(spinning.clone());
        bar.set_prefix(app.id().to_owned());
        bar.enable_steady_tick(Duration::from_millis(100));
        let multi = multi.clone();
        async move {
            let snapshot = settled(app, |snapshot| {
                bar.set_message(snapshot.state.lifecycle.to_string());
            })
            .await;
            // The final state goes above the spinners as a line of its own, where it stays
            // (a finished spinner would be erased with the others when a log line is written).
            let id = app.id();
            let _ = multi.println(format!("  {id:<width$}  {}", outcome(&snapshot)));
            bar.finish_and_clear();
            snapshot
        }
    });
    let settled = futures::future::join_all(lines).await;
    crate::progress::deactivate();
    settled
}

/// Where an app came to rest, for its finished line.
fn outcome(app: &AppSnapshot) -> String {
    let state = &app.state;
    match state.lifecycle {
        Lifecycle::Running => {
            let tools = state.tool_count;
            let noun = if tools == 1 { "tool" } else { "tools" };
            format!("✓ Running ({tools} {noun})")
        }
        Lifecycle::Failed => {
            let reason = state.last_error.as_deref().unwrap_or("no reason given");
            format!("✗ Failed: {}", shorten(reason, REASON_WIDTH))
        }
        Lifecycle::Discovered => format!(
            "✗ invalid: {}",
            shorten(
                state.validation_errors.first().map_or("", String::as_str),
                REASON_WIDTH
            )
        ),
        other => format!("- {other}"),
    }
}
