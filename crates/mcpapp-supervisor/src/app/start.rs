//! One start attempt of an app: launch the child or build the HTTP client, perform the MCP
//! handshake (asking a modern app for its era first, unless the manifest names a legacy
//! version), disable rmcp's response cache, list what the app offers, and publish what the
//! start found; all of it within the app's startup timeout.

use std::path::PathBuf;
use std::sync::Arc;

use mcpapp_manifest::{AppSpec, Era};
use mcpapp_session::{Connection, EraChoice, GatewayClient, HandshakeError, LinkEvent, Notice};
use tokio::sync::mpsc;
use tracing::info;

use super::enumerate::{enumerate, listen_for_changes};
use super::error::{StartError, StartWarning};
use super::{AppShared, TaskContext};
use crate::descriptors::Descriptors;
use crate::launch::{self, Inheritance, LaunchPlan};
use crate::link;
use crate::link::stdio::StderrTail;

/// Stderr lines quoted in a failure reason.
const STDERR_IN_REASON: usize = 5;

/// A connection that has just started, with the process id of a stdio app (the session
/// knows links, not processes).
pub(super) type Started = (Connection, Option<u32>);

/// Connects, performs the handshake and enumerates, all within the startup timeout, and
/// publishes what the start found. `notices` receives the app's list changes; `run` is the
/// stderr of this attempt.
///
/// # Errors
/// Why the attempt failed, for the app's failure reason (the caller adds the stderr tail).
pub(super) async fn start(
    shared: &Arc<AppShared>,
    spec: &AppSpec,
    inheritance: &Inheritance,
    context: &TaskContext,
    notices: mpsc::UnboundedSender<Notice>,
    run: &StderrTail,
) -> Result<Started, StartError> {
    let list_notices = notices.clone();
    let work = async {
        let (connection, pid) = connect(shared, spec, inheritance, context, notices, run).await?;
        connection
            .client
            .peer()
            .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
            .await;
        let (descriptors, warnings) = enumerate(&connection, spec.request_timeout).await?;
        Ok::<_, StartError>((connection, pid, descriptors, warnings))
    };
    let deadline = spec.startup_timeout;
    let (connection, pid, descriptors, warnings) = tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| StartError::TimedOut {
            seconds: deadline.as_secs(),
        })??;
    if connection.era == Era::Modern {
        listen_for_changes(&connection, list_notices);
    }
    publish(shared, spec, &connection, descriptors, warnings);
    Ok((connection, pid))
}

/// Launches or connects and performs the handshake; starts again with `initialize` at once
/// when the app ended on being asked for its era.
async fn connect(
    shared: &Arc<AppShared>,
    spec: &AppSpec,
    inheritance: &Inheritance,
    context: &TaskContext,
    notices: mpsc::UnboundedSender<Notice>,
    run: &StderrTail,
) -> Result<Started, StartError> {
    let root: PathBuf = shared.snapshot.borrow().state.root_path.clone();
    let mut choice = era_choice(spec);
    loop {
        let mut plan = launch::plan(
            spec,
            &root,
            &context.env,
            inheritance,
            run,
            &context.processes,
        )
        .map_err(StartError::Plan)?;
        // The token goes on every request of the link, the legacy session's included.
        if let LaunchPlan::Http(http) = &mut plan {
            http.auth = shared.authorizer();
        }
        // The sandbox this start applies, for `/apps/{id}`.
        if let LaunchPlan::Stdio(spawn) = &plan {
            let report = spawn.sandbox.as_ref().clone();
            shared.update(|s| s.sandbox = Some(report));
        }
        // An HTTP endpoint can be reached again, for a dual-era app's legacy session; a
        // manifest that names a version asks for that era alone.
        let opener = match &plan {
            LaunchPlan::Http(http) if spec.protocol_era.is_none() => {
                Some(Arc::new(link::HttpOpener { spec: http.clone() }))
            }
            _ => None,
        };
        let (events_tx, events_rx) = mpsc::unbounded_channel::<LinkEvent>();
        let (link, pid) = link::open(plan, events_tx)?;
        let handler = GatewayClient::new(
            shared.id.clone(),
            notices.clone(),
            shared.causes.clone(),
            context.elicitor.clone(),
        );
        match Connection::open(
            &shared.id,
            link,
            events_rx,
            handler,
            spec.request_timeout,
            choice,
            shared.meters.clone(),
        )
        .await
        {
            Ok(connection) => {
                let connection = match opener {
                    Some(opener) => connection.with_legacy_session(opener),
                    None => connection,
                };
                return Ok((connection, pid));
            }
            // Some servers end when asked anything before `initialize`: start it again
            // and use `initialize` at once.
            Err(HandshakeError::ProbeClosed(reason)) if choice == EraChoice::Auto => {
                info!(app = %shared.id, "the app ended when asked for its era ({reason}); starting it again with initialize");
                choice = EraChoice::Legacy;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// How to find out the app's era. A legacy version in the manifest means `initialize` at
/// once (some older servers end when asked anything else first); otherwise the app is asked,
/// which also keeps a manifest that claims 2026-07-28 for an older server working (with a
/// warning).
fn era_choice(spec: &AppSpec) -> EraChoice {
    match spec.protocol_era {
        Some(Era::Legacy) => EraChoice::Legacy,
        _ => EraChoice::Auto,
    }
}

/// Publishes what a start found: the counts and descriptors, its warnings after discovery's
/// (replacing the previous start's), and what the server said of itself.
fn publish(
    shared: &AppShared,
    spec: &AppSpec,
    connection: &Connection,
    descriptors: Descriptors,
    mut warnings: Vec<StartWarning>,
) {
    let info = connection.client.peer_info();
    let negotiated = info.as_ref().map(|i| i.protocol_version.to_string());
    if let Some(warning) = older_protocol(negotiated.as_deref(), &spec.protocol_version) {
        warnings.push(warning);
    }
    info!(
        "McpApp '{}' connected: {} tools, {} resources, {} prompts",
        shared.id,
        descriptors.tools.len(),
        descriptors.resources.len(),
        descriptors.prompts.len()
    );
    let warnings = shared.warnings_with(warnings.iter().map(ToString::to_string));
    shared.publish(descriptors, |s| {
        s.state.warnings = warnings;
        s.protocol_version = negotiated;
        s.server_info = info.as_ref().and_then(|i| {
            i.server_info
                .as_ref()
                .map(|si| (si.name.clone(), si.version.clone()))
        });
        s.instructions = info.as_ref().and_then(|i| i.instructions.clone());
    });
}

/// The warning due when the server agreed on an older protocol than the manifest declares
/// (versions are dates, so they compare as text).
fn older_protocol(negotiated: Option<&str>, declared: &str) -> Option<StartWarning> {
    let negotiated = negotiated?;
    (negotiated < declared).then(|| StartWarning::OlderProtocol {
        negotiated: negotiated.to_owned(),
        declared: declared.to_owned(),
    })
}

/// Adds the last stderr lines of the current run to a failure reason.
pub(super) fn with_stderr(run: &StderrTail, reason: impl std::fmt::Display) -> String {
    quote_stderr(reason, &run.last(STDERR_IN_REASON))
}

fn quote_stderr(reason: impl std::fmt::Display, tail: &[String]) -> String {
    if tail.is_empty() {
        reason.to_string()
    } else {
        format!("{reason}; stderr: {}", tail.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::tests::{runnable, state};

    #[test]
    fn only_a_legacy_manifest_skips_asking_for_the_era() {
        let (mut spec, _) = runnable(&state("weather"));
        spec.protocol_era = Some(Era::Legacy);
        assert_eq!(era_choice(&spec), EraChoice::Legacy);
        spec.protocol_era = Some(Era::Modern);
        assert_eq!(era_choice(&spec), EraChoice::Auto);
        spec.protocol_era = None;
        assert_eq!(era_choice(&spec), EraChoice::Auto);
    }

    #[test]
    fn an_older_negotiated_protocol_is_a_warning() {
        assert_eq!(
            older_protocol(Some("2025-06-18"), "2025-11-25").map(|w| w.to_string()),
            Some(
                "the server negotiated MCP protocol 2025-06-18, older than the 2025-11-25 its manifest declares"
                    .to_owned()
            )
        );
        assert!(older_protocol(Some("2025-11-25"), "2025-11-25").is_none());
        assert!(older_protocol(Some("2026-07-28"), "2025-11-25").is_none());
        assert!(older_protocol(None, "2025-11-25").is_none());
    }

    #[test]
    fn a_failure_reason_quotes_the_runs_last_stderr_lines() {
        assert_eq!(
            quote_stderr("exited with status 3", &[]),
            "exited with status 3"
        );
        assert_eq!(
            quote_stderr(
                StartError::TimedOut { seconds: 1 },
                &["loading".to_owned(), "stuck".to_owned()]
            ),
            "startup timed out after 1 s (connect, MCP handshake and listing must finish within startupTimeoutSeconds); stderr: loading | stuck"
        );
    }
}
