//! `GET /metrics`: the gateway's series in the Prometheus text format (version 0.0.4).
//!
//! The registry belongs to the [`Host`](crate::Host) (the gateway's composition root fills it
//! with the supervisor's call series first). What the supervisor and the host already know,
//! app states, restart counts and open browser sessions, is read at scrape time by a
//! collector rather than mirrored into gauges, so it can never disagree with `GET /apps`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpapp_manifest::Lifecycle;
use mcpapp_session::{MODERN_PROTOCOL_VERSION, PORT_PROTOCOL_VERSIONS};
use mcpapp_supervisor::Supervisor;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::proxy::ProxySessions;

/// Adds the host's own series to `registry`: build info, and the collector of app states,
/// restarts and browser sessions.
pub(crate) fn register(registry: &mut Registry, supervisor: Supervisor, sessions: ProxySessions) {
    let build = Family::<[(&'static str, String); 2], Gauge>::default();
    build
        .get_or_create(&[
            ("version", env!("CARGO_PKG_VERSION").to_owned()),
            (
                "mcp_versions",
                PORT_PROTOCOL_VERSIONS
                    .iter()
                    .copied()
                    .chain([MODERN_PROTOCOL_VERSION])
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ])
        .set(1);
    registry.register(
        "mcpapp_build_info",
        "The gateway's version and the MCP protocol versions it serves (always 1)",
        build,
    );
    registry.register_collector(Box::new(AppsCollector {
        supervisor,
        sessions,
    }));
}

/// Reads app states, restart counts and session counts on each scrape.
struct AppsCollector {
    supervisor: Supervisor,
    sessions: ProxySessions,
}

impl std::fmt::Debug for AppsCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppsCollector").finish_non_exhaustive()
    }
}

impl Collector for AppsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let apps: Vec<_> = self
            .supervisor
            .list()
            .into_iter()
            .map(|app| {
                let snapshot = app.snapshot();
                (
                    app.id().to_owned(),
                    snapshot.state.lifecycle,
                    snapshot.restart_count,
                )
            })
            .collect();
        {
            let mut metric = encoder.encode_descriptor(
                "mcpapp_app_state",
                "Each app's lifecycle state: 1 for the current state, 0 for the others",
                None,
                MetricType::Gauge,
            )?;
            for (app, lifecycle, _) in &apps {
                for state in Lifecycle::ALL {
                    let labels = [("app", app.as_str()), ("state", state.as_str())];
                    metric
                        .encode_family(&labels)?
                        .encode_gauge(&i64::from(*lifecycle == state))?;
                }
            }
        }
        {
            let mut metric = encoder.encode_descriptor(
                "mcpapp_app_restarts",
                "Times each app was started again after its first start (after failures, and on request)",
                None,
                MetricType::Counter,
            )?;
            for (app, _, restarts) in &apps {
                metric
                    .encode_family(&[("app", app.as_str())])?
                    .encode_counter::<NoLabelSet, _, u64>(&u64::from(*restarts), None)?;
            }
        }
        let sessions = self.sessions.counts();
        let mut metric = encoder.encode_descriptor(
            "mcpapp_proxy_sessions",
            "Open browser sessions of /apps/mcp/{appId}, per app",
            None,
            MetricType::Gauge,
        )?;
        for (app, _, _) in &apps {
            let open = sessions.get(app).copied().unwrap_or(0);
            metric
                .encode_family(&[("app", app.as_str())])?
                .encode_gauge(&i64::try_from(open).unwrap_or(i64::MAX))?;
        }
        Ok(())
    }
}

/// `GET /metrics`.
pub(crate) async fn scrape(State(registry): State<SharedRegistry>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::prometheus_text::encode(&mut text, &registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            )],
            text,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be written",
        )
            .into_response(),
    }
}

/// The registry as the routes share it.
pub(crate) type SharedRegistry = Arc<Registry>;
