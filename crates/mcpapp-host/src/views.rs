//! App views in the browser: the host page's static files, `POST /apps/{id}/views` (which
//! prepares a sandbox for one UI resource), and the sandbox proxy served from its own origin
//! with the view's Content-Security-Policy as an HTTP header.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{Supervisor, is_mcp_app_mime};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::info;

use crate::config::HostConfig;
use crate::csp::{ViewPolicy, view_policy};
use crate::error::ApiError;
use crate::replica::{AFFINITY_PARAM, affinity_key};

const HOST_HTML: &str = include_str!("../assets/host.html");
const SANDBOX_HTML: &str = include_str!("../assets/sandbox.html");

const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// An embedded script of the page, served as JavaScript.
macro_rules! script {
    ($name:literal) => {
        (
            $name,
            JAVASCRIPT,
            include_str!(concat!("../assets/", $name)),
        )
    };
}

/// The page's scripts and styles, served under `/assets/`. The scripts are hand-written ES
/// modules: nothing is built, so the Rust build never needs Node. `host.js` is the entry; the
/// others are its modules (`docs/host-page.md` says what each holds).
const ASSETS: [(&str, &str, &str); 19] = [
    script!("host.js"),
    script!("state.js"),
    script!("dom.js"),
    script!("notices.js"),
    script!("theme.js"),
    script!("catalog.js"),
    script!("apps-panel.js"),
    script!("transcript.js"),
    script!("views.js"),
    script!("ui-events.js"),
    script!("chat.js"),
    script!("elicitation.js"),
    script!("api.js"),
    script!("affinity.js"),
    script!("mcp-client.js"),
    script!("view-bridge.js"),
    script!("extensions.js"),
    script!("connect.js"),
    (
        "host.css",
        "text/css; charset=utf-8",
        include_str!("../assets/host.css"),
    ),
];

/// Prepared views kept this long (a view is loaded right after it is prepared).
const VIEW_LIFETIME: Duration = Duration::from_secs(60 * 60);
/// At most this many prepared views are kept.
const VIEW_CAPACITY: usize = 1024;

/// A view prepared for the sandbox: its policy and the host page's origin.
#[derive(Debug, Clone)]
struct PreparedView {
    policy: ViewPolicy,
    host_origin: String,
    created: Instant,
}

/// Prepared views by opaque token. The sandbox URL carries only the token, so a page cannot
/// ask the sandbox for a looser policy than the server built.
#[derive(Debug, Clone, Default)]
pub(crate) struct ViewStore {
    views: Arc<Mutex<HashMap<String, PreparedView>>>,
}

impl ViewStore {
    fn insert(&self, view: PreparedView) -> String {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        views.retain(|_, v| v.created.elapsed() < VIEW_LIFETIME);
        if views.len() >= VIEW_CAPACITY
            && let Some(oldest) = views
                .iter()
                .min_by_key(|(_, v)| v.created)
                .map(|(k, _)| k.clone())
        {
            views.remove(&oldest);
        }
        views.insert(token.clone(), view);
        token
    }

    fn get(&self, token: &str) -> Option<PreparedView> {
        let views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        views
            .get(token)
            .filter(|v| v.created.elapsed() < VIEW_LIFETIME)
            .cloned()
    }
}

/// What the page and `POST /apps/{id}/views` read: the apps, the host's origins, and where
/// prepared views are kept (the sandbox router gets only those).
#[derive(Clone)]
pub(crate) struct ViewsState {
    pub(crate) supervisor: Supervisor,
    pub(crate) config: Arc<HostConfig>,
    pub(crate) store: ViewStore,
}

fn text(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// The host page's own Content-Security-Policy: its scripts, styles and API calls come from
/// its own origin, it frames only the sandbox origin, and no one may frame it.
fn page_csp(sandbox_origin: Option<&str>) -> String {
    let frames = sandbox_origin.unwrap_or("'none'");
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-src {frames}; form-action 'self'; base-uri 'none'; \
         object-src 'none'; frame-ancestors 'none'"
    )
}

/// `GET /`: the host page.
pub(crate) async fn page(State(state): State<ViewsState>) -> Response {
    let mut response = text("text/html; charset=utf-8", HOST_HTML);
    let headers = response.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&page_csp(state.config.sandbox_origin.as_deref())) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    // The first load may carry ?token=...; no request the page makes may repeat it.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `GET /assets/{file}`: the page's scripts and styles.
pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => {
            let mut response = text(content_type, body);
            response.headers_mut().insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            response
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The body of `POST /apps/{id}/views`.
#[derive(Debug, Deserialize)]
pub(crate) struct PrepareView {
    uri: String,
}

/// `POST /apps/{id}/views`: reads the UI resource's `_meta.ui` (content item over listing
/// entry), builds its policy, and returns where to load the sandbox for it.
pub(crate) async fn prepare(
    State(state): State<ViewsState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(request): Json<PrepareView>,
) -> Result<Json<Value>, ApiError> {
    let app = state
        .supervisor
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("no app with id '{id}'")))?;
    let lifecycle = app.lifecycle();
    if lifecycle != Lifecycle::Running {
        return Err(ApiError::Unavailable(format!(
            "app '{id}' is not running (it is {lifecycle})"
        )));
    }
    let sandbox_origin = state
        .config
        .sandbox_origin
        .clone()
        .ok_or_else(|| ApiError::Unavailable("this gateway has no sandbox listener".into()))?;
    let listing = app
        .descriptors()
        .resources
        .iter()
        .find(|r| r.uri == request.uri)
        .and_then(|r| r.meta.clone());
    let read = app
        .read_resource(&request.uri)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    let content = serde_json::to_value(&read.contents).unwrap_or_default();
    let item = content
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|c| c["uri"] == request.uri.as_str())
                .or_else(|| items.first())
        })
        .cloned()
        .ok_or_else(|| ApiError::Conflict(format!("resource '{}' has no content", request.uri)))?;
    let mime = item["mimeType"].as_str().unwrap_or_default();
    if !is_mcp_app_mime(mime) {
        return Err(ApiError::Conflict(format!(
            "resource '{}' is not an MCP App view: its MIME type is '{mime}', not text/html;profile=mcp-app",
            request.uri
        )));
    }
    let content_meta = item.get("_meta").and_then(Value::as_object).cloned();
    let policy = view_policy(content_meta.as_ref(), listing.as_ref());
    let csp = policy.header();
    info!(app = %id, uri = %request.uri, "prepared a view with CSP: {csp}");
    let token = state.store.insert(PreparedView {
        policy: policy.clone(),
        host_origin: state.config.base_url(&headers),
        created: Instant::now(),
    });
    let declares_external = !(policy.connect_domains.is_empty()
        && policy.resource_domains.is_empty()
        && policy.frame_domains.is_empty());
    // Behind a balancer the sandbox frame must reach this replica, which holds the token; a
    // frame's URL is all a page can give it, so the affinity key rides along.
    let affinity = affinity_key(&headers)
        .ok()
        .flatten()
        .map(|key| format!("&{AFFINITY_PARAM}={key}"))
        .unwrap_or_default();
    Ok(Json(json!({
        "sandboxUrl": format!("{sandbox_origin}/sandbox.html?view={token}{affinity}"),
        "sandboxOrigin": sandbox_origin,
        "csp": csp,
        "allow": policy.allow_attribute(),
        "policy": policy,
        "externalDomains": declares_external,
    })))
}

/// The query of the sandbox page.
#[derive(Debug, Deserialize)]
pub(crate) struct SandboxQuery {
    view: Option<String>,
}

/// `GET /sandbox.html?view=TOKEN` on the sandbox listener.
pub(crate) async fn sandbox(
    State(views): State<ViewStore>,
    Query(query): Query<SandboxQuery>,
) -> Response {
    let Some(view) = query.view.as_deref().and_then(|t| views.get(t)) else {
        return (StatusCode::NOT_FOUND, "unknown or expired view").into_response();
    };
    // The origin is embedded as a JSON string literal, so it cannot break out of the script.
    let origin = serde_json::to_string(&view.host_origin).unwrap_or_else(|_| "\"\"".into());
    let html = SANDBOX_HTML.replace("__HOST_ORIGIN__", &origin);
    let mut response = (StatusCode::OK, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(csp) = HeaderValue::from_str(&view.policy.header()) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::ASSETS;

    /// Every `import … from "./X.js"` of a served script names a served script, and every
    /// served script but the entry is imported by one: a module left out of `ASSETS` would
    /// break the page only in a browser.
    #[test]
    fn the_served_modules_are_exactly_the_imported_ones() {
        let served: Vec<&str> = ASSETS.iter().map(|(name, _, _)| *name).collect();
        let mut imported = Vec::new();
        for (name, _, body) in ASSETS.iter().filter(|(n, _, _)| n.ends_with(".js")) {
            for line in body.lines() {
                let Some(rest) = line.split(" from \"./").nth(1) else {
                    continue;
                };
                let target = rest.split('"').next().unwrap();
                assert!(
                    served.contains(&target),
                    "{name} imports {target}, which /assets/ does not serve"
                );
                imported.push(target);
            }
        }
        for name in served
            .iter()
            .filter(|n| n.ends_with(".js") && **n != "host.js")
        {
            assert!(
                imported.contains(name),
                "{name} is served but nothing imports it"
            );
        }
    }
}
