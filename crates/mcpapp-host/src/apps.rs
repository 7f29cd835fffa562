//! `/apps/health`, `/apps`, `/apps/{id}` and the control routes: what the gateway runs, and
//! starting, stopping, restarting and reloading it.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use mcpapp_bridge::ToolRegistry;
use mcpapp_manifest::{InstallState, Lifecycle, Transport};
use mcpapp_supervisor::{AppHandle, AppSnapshot, Descriptors, Supervisor};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::HostConfig;
use crate::error::ApiError;
use crate::oauth::authorization_json;
use crate::proxy::ProxySessions;
use crate::reload::{Reloader, Trigger};

/// Produces extra diagnostics to show in `GET /apps` (for example tool-name collisions).
pub(crate) type DiagnosticsFn = Arc<dyn Fn() -> Vec<Value> + Send + Sync>;

/// What the app routes read and control.
#[derive(Clone)]
pub(crate) struct AppsState {
    /// The running apps.
    pub(crate) supervisor: Supervisor,
    /// The agent's tool registry, for the names it gave each app's tools.
    pub(crate) registry: ToolRegistry,
    /// Extra diagnostics for `GET /apps`.
    pub(crate) diagnostics: Option<DiagnosticsFn>,
    pub(crate) config: Arc<HostConfig>,
    /// The proxy's browser sessions, counted in `GET /apps/{id}`.
    pub(crate) browser_sessions: ProxySessions,
    /// Reloads, when the gateway has a discovery.
    pub(crate) reloader: Option<Reloader>,
}

/// Everything but letters, digits, `.`, `_` and `-` is escaped in a path segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'_')
    .remove(b'-');

/// Percent-encodes an app id for a URL path segment (valid ids need nothing).
fn encode_segment(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// This gateway's per-app MCP endpoint.
fn mcp_url(base: &str, id: &str) -> String {
    format!("{base}/apps/mcp/{}", encode_segment(id))
}

fn has_ui(snapshot: &AppSnapshot, descriptors: &Descriptors) -> bool {
    snapshot.state.manifest.has_ui || descriptors.tools.iter().any(|t| t.has_ui())
}

fn transport_name(state: &InstallState) -> String {
    Transport::parse(&state.manifest.transport)
        .map_or_else(|_| state.manifest.transport.clone(), |t| t.to_string())
}

/// One app in `GET /apps`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AppSummary {
    id: Option<String>,
    name: String,
    version: String,
    description: Option<String>,
    transport: String,
    lifecycle: Lifecycle,
    manifest_path: String,
    root_path: String,
    is_valid: bool,
    validation_errors: Vec<String>,
    warnings: Vec<String>,
    last_error: Option<String>,
    tool_count: usize,
    resource_count: usize,
    resource_template_count: usize,
    prompt_count: usize,
    restart_count: u32,
    crash_loop: bool,
    next_restart_at: Option<String>,
    discovered_at: String,
    state_changed_at: String,
    protocol_version: Option<String>,
    server_name: Option<String>,
    server_version: Option<String>,
    has_ui: bool,
    ui_resource_uri: Option<String>,
    mcp: Option<String>,
    /// Where an HTTP app behind OAuth stands with its authorization server (its issuer, the
    /// scopes granted or wanted); `null` when the gateway does not authorize to it.
    authorization: Value,
    /// How much of a stdio app's sandbox applies (`enforced`, `partial`, `none`); the whole
    /// report is in `/apps/{id}`.
    sandbox: Option<mcpapp_supervisor::SandboxStatus>,
}

fn summary_of(
    state: &InstallState,
    snapshot: Option<(&AppSnapshot, &Descriptors)>,
    base: &str,
) -> AppSummary {
    let manifest = &state.manifest;
    let id = manifest.id.clone().filter(|id| !id.is_empty());
    let ui_tool_uri =
        snapshot.and_then(|(_, d)| d.tools.iter().find_map(|t| t.ui_resource_uri.clone()));
    AppSummary {
        mcp: id
            .as_deref()
            .filter(|_| snapshot.is_some())
            .map(|id| mcp_url(base, id)),
        id,
        name: manifest.display_name().to_owned(),
        version: manifest.version.clone(),
        description: manifest.description.clone(),
        transport: transport_name(state),
        lifecycle: state.lifecycle,
        manifest_path: state.manifest_path.display().to_string(),
        root_path: state.root_path.display().to_string(),
        is_valid: state.is_valid,
        validation_errors: state.validation_errors.clone(),
        warnings: state.warnings.clone(),
        last_error: state.last_error.clone(),
        tool_count: state.tool_count,
        resource_count: state.resource_count,
        resource_template_count: state.resource_template_count,
        prompt_count: state.prompt_count,
        restart_count: snapshot.map_or(0, |(s, _)| s.restart_count),
        crash_loop: snapshot.is_some_and(|(s, _)| s.crash_loop),
        next_restart_at: snapshot.and_then(|(s, _)| s.next_restart.map(|t| t.to_string())),
        discovered_at: state.discovered_at.to_string(),
        state_changed_at: state.state_changed_at.to_string(),
        protocol_version: snapshot.and_then(|(s, _)| s.protocol_version.clone()),
        server_name: snapshot.and_then(|(s, _)| s.server_info.as_ref().map(|(n, _)| n.clone())),
        server_version: snapshot.and_then(|(s, _)| s.server_info.as_ref().map(|(_, v)| v.clone())),
        has_ui: snapshot.is_some_and(|(s, d)| has_ui(s, d)) || manifest.has_ui,
        ui_resource_uri: manifest.ui_resource_uri.clone().or(ui_tool_uri),
        authorization: authorization_json(snapshot.and_then(|(s, _)| s.authorization.as_ref())),
        sandbox: snapshot.and_then(|(s, _)| s.sandbox.as_ref().map(|r| r.status)),
    }
}

fn summary(handle: &AppHandle, base: &str) -> AppSummary {
    let snapshot = handle.snapshot();
    let descriptors = handle.descriptors();
    summary_of(&snapshot.state, Some((&snapshot, &descriptors)), base)
}

/// `GET /apps`: every discovered app, with the bridge's diagnostics.
pub(crate) async fn list(State(state): State<AppsState>, headers: HeaderMap) -> Json<Value> {
    let base = state.config.base_url(&headers);
    let mut apps: Vec<AppSummary> = state
        .supervisor
        .list()
        .iter()
        .map(|h| summary(h, &base))
        .collect();
    apps.extend(
        state
            .supervisor
            .unaddressable()
            .iter()
            .map(|s| summary_of(s, None, &base)),
    );
    let diagnostics = state.diagnostics.as_ref().map(|f| f()).unwrap_or_default();
    Json(json!({ "apps": apps, "diagnostics": diagnostics }))
}

fn find(state: &AppsState, id: &str) -> Result<AppHandle, ApiError> {
    state
        .supervisor
        .get(id)
        .ok_or_else(|| ApiError::NotFound(format!("no app with id '{id}'")))
}

/// `GET /apps/{id}`: one app with what it offers, the stderr tails of its current and
/// previous run, and how many browser sessions of `/apps/mcp/{id}` are open.
pub(crate) async fn detail(
    State(state): State<AppsState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let handle = find(&state, &id)?;
    let base = state.config.base_url(&headers);
    let descriptors = handle.descriptors();
    let prefix = handle
        .spec()
        .map(|s| s.tool_name_prefix)
        .unwrap_or_default();
    let registration = format!("mcpapp:{id}");
    let tools: Vec<Value> = descriptors
        .tools
        .iter()
        .map(|tool| {
            let candidate = format!("{prefix}{}", tool.name);
            let registered = state
                .registry
                .resolve(&candidate)
                .filter(|entry| entry.registration_id == registration)
                .map(|_| candidate);
            json!({
                "name": tool.name,
                "registeredName": registered,
                "title": tool.title,
                "description": tool.description,
                "visibility": tool.visibility,
                "uiResourceUri": tool.ui_resource_uri,
                "inputSchema": tool.input_schema,
            })
        })
        .collect();
    let mut body = serde_json::to_value(summary(&handle, &base)).unwrap_or_default();
    if let Some(object) = body.as_object_mut() {
        object.insert("tools".into(), Value::Array(tools));
        object.insert("resources".into(), json!(descriptors.resources));
        object.insert("resourceTemplates".into(), json!(descriptors.templates));
        object.insert("prompts".into(), json!(descriptors.prompts));
        object.insert("stderrTail".into(), json!(handle.stderr_tail()));
        // Kept apart so that the current run's lines are never mixed with an earlier one's.
        object.insert(
            "previousStderrTail".into(),
            json!(handle.previous_stderr_tail()),
        );
        object.insert(
            "browserSessions".into(),
            json!(state.browser_sessions.count(handle.id())),
        );
        // The sandbox of the app's current (or last) start: what actually applies.
        object.insert("sandbox".into(), json!(handle.snapshot().sandbox));
    }
    Ok(Json(body))
}

/// `POST /apps/{id}/{action}` with `start`, `stop` or `restart`.
pub(crate) async fn control(
    State(state): State<AppsState>,
    Path((id, action)): Path<(String, String)>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let handle = find(&state, &id)?;
    let result = match action.as_str() {
        "start" => handle.start(),
        "stop" => handle.stop(),
        "restart" => handle.restart(),
        other => {
            return Err(ApiError::NotFound(format!(
                "unknown action '{other}': use start, stop or restart"
            )));
        }
    };
    result.map_err(|e| ApiError::Conflict(e.to_string()))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "ok": true, "id": id, "action": action, "lifecycle": handle.lifecycle() })),
    ))
}

/// `POST /apps/reload`: reads the configuration again, discovers again and applies the
/// difference (the same reload the file watcher runs).
pub(crate) async fn reload(State(state): State<AppsState>) -> Result<Json<Value>, ApiError> {
    let reloader = state.reloader.clone().ok_or_else(|| {
        ApiError::Unavailable(
            "reload is not available: the gateway was started without discovery".into(),
        )
    })?;
    let outcome = reloader.reload(Trigger::Api, true).await;
    Ok(Json(serde_json::to_value(outcome).unwrap_or_default()))
}

/// The query of `/apps/health`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HealthQuery {
    app_id: Option<String>,
}

/// `GET /apps/health`: the app a browser host should show, and where to reach it.
pub(crate) async fn health(
    State(state): State<AppsState>,
    Query(query): Query<HealthQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let base = state.config.base_url(&headers);
    let sandbox = state
        .config
        .sandbox_origin
        .as_ref()
        .map(|o| format!("{o}/sandbox.html"));
    let running = |h: &AppHandle| h.lifecycle() == Lifecycle::Running;
    let picked = match query.app_id.filter(|id| !id.is_empty()) {
        Some(id) => Some(find(&state, &id)?),
        None => {
            let apps = state.supervisor.list();
            apps.iter()
                .find(|h| running(h) && has_ui(&h.snapshot(), &h.descriptors()))
                .or_else(|| apps.iter().find(|h| running(h)))
                .cloned()
        }
    };
    // Key order is part of the contract: ok, name, mcp, sandbox.
    Ok(Json(match picked {
        Some(app) => json!({
            "ok": running(&app),
            "name": app.id(),
            "mcp": mcp_url(&base, app.id()),
            "sandbox": sandbox,
        }),
        None => json!({ "ok": false, "name": "mcpapp", "mcp": null, "sandbox": sandbox }),
    }))
}
