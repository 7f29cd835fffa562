//! `GET /healthz` and `GET /readyz`: probes for process supervisors and balancers.
//!
//! Both are answered without the bearer token, because the probes of kubelet, HAProxy and
//! Docker cannot be given one, and they still pass the `Host` and `Origin` checks every route
//! passes. So they say nothing a stranger could use: `healthz` that the process serves, and
//! `readyz` whether every app has settled, naming only the ids and lifecycle states of the
//! apps that have not. App ids come from manifests and are validated ids; errors, stderr,
//! paths and tools (which an untrusted app could fill with anything) stay behind the token.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::Supervisor;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// What the probes read.
#[derive(Clone)]
pub(crate) struct Probes {
    pub(crate) supervisor: Supervisor,
    /// Cancelled when shutdown begins: `readyz` then says so.
    pub(crate) shutdown: CancellationToken,
}

/// At most this many unsettled apps are named in a `readyz` answer; the count is always whole.
const MAX_NAMED: usize = 50;

fn probe_reply(status: StatusCode, body: Value) -> Response {
    let mut response = (status, Json(body)).into_response();
    // A cached "ready" would be a lie a moment later.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `GET /healthz`: 200 while the process serves requests.
pub(crate) async fn healthz() -> Response {
    probe_reply(StatusCode::OK, json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 when every app has settled (running, failed, stopped, disabled or
/// waiting for authorization, counted as `needsAuthorization`);
/// 503 while some are still starting, naming them, and once shutdown has begun, so a
/// balancer stops sending new sessions to a replica that is going away.
pub(crate) async fn readyz(State(state): State<Probes>) -> Response {
    if state.shutdown.is_cancelled() {
        return probe_reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "stopping" }),
        );
    }
    let apps = state.supervisor.list();
    let unsettled: Vec<_> = apps
        .iter()
        .filter_map(|app| {
            let lifecycle = app.snapshot().state.lifecycle;
            (!lifecycle.is_settled()).then(|| (app.id().to_owned(), lifecycle))
        })
        .collect();
    if unsettled.is_empty() {
        // Apps waiting for a user to authorize them have settled (a probe cannot connect
        // them); they are counted so an operator's dashboard can tell.
        let waiting = apps
            .iter()
            .filter(|app| app.lifecycle() == Lifecycle::NeedsAuthorization)
            .count();
        return probe_reply(
            StatusCode::OK,
            json!({ "status": "ready", "apps": apps.len(), "needsAuthorization": waiting }),
        );
    }
    let named: Vec<Value> = unsettled
        .iter()
        .take(MAX_NAMED)
        .map(|(id, lifecycle)| json!({ "id": id, "lifecycle": lifecycle }))
        .collect();
    probe_reply(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({
            "status": "starting",
            "apps": apps.len(),
            "unsettledCount": unsettled.len(),
            "unsettled": named,
        }),
    )
}
