//! The "Add apps" view's endpoints, behind the token like every API route: search the
//! configured MCP Registries, plan an install (what it is, its inputs, the permissions it
//! requests), run installs, updates and removals as jobs whose progress the page polls, and
//! list what `install` put in place.
//!
//! - `GET /installer/registries`: `[{name, url}]`.
//! - `GET /installer/search?q=&cursor=`: `{servers, nextCursor, errors}` over every registry.
//! - `POST /installer/plan` `{source, id?, package?, sha256?}`: the plan (`planId`, id, name,
//!   version, transport, inputs, permissions, notes); nothing is written.
//! - `POST /installer/jobs` `{planId, values}` (install) or `{action: "update"|"uninstall",
//!   id, values?}`: 202 `{job}`; bad values are a 400 naming the input.
//! - `GET /installer/jobs/{job}`: `{state: running|done|failed, lines, error?, result?}`; an
//!   install's or update's result holds `requested` (the permissions its manifest requests,
//!   as `--grant` takes them) and `ungranted` (discovery's message for each one the
//!   configuration does not grant: the app does not run until the operator grants them, in
//!   the configuration file; the page does not grant).
//! - `GET /installer/installed`: `[{id, version, source, identifier}]`.
//!
//! Values may be secret: they go to the installer (and its secret store) only, and are never
//! part of an answer, a job's lines or a log.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mcpapp_install::{Installer, PackageChoice, Plan, Request, Source};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::{info, warn};

/// Plans kept for an install to refer to.
const PLANS_KEPT: usize = 32;
/// Jobs kept for the page to read.
const JOBS_KEPT: usize = 64;
/// Progress lines kept per job.
const LINES_KEPT: usize = 400;

/// A job shared by its task and the page's polls.
type SharedJob = Arc<Mutex<Job>>;

#[derive(Clone)]
struct Extensions {
    installer: Installer,
    plans: Arc<Mutex<VecDeque<(String, Plan)>>>,
    jobs: Arc<Mutex<VecDeque<(String, SharedJob)>>>,
}

#[derive(Debug, Default)]
struct Job {
    state: &'static str,
    lines: VecDeque<String>,
    error: Option<String>,
    result: Option<Value>,
}

/// Adds the routes to `api` when the gateway has an installer.
pub(crate) fn merge(api: Router, installer: Option<Installer>) -> Router {
    let Some(installer) = installer else {
        return api;
    };
    let state = Extensions {
        installer,
        plans: Arc::default(),
        jobs: Arc::default(),
    };
    api.merge(
        Router::new()
            .route("/installer/registries", get(registries))
            .route("/installer/search", get(search))
            .route("/installer/plan", post(plan))
            .route("/installer/jobs", post(start_job))
            .route("/installer/jobs/{job}", get(job))
            .route("/installer/installed", get(installed))
            .with_state(state),
    )
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

fn random_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

async fn registries(State(ext): State<Extensions>) -> Response {
    let list: Vec<Value> = ext
        .installer
        .config()
        .registries
        .iter()
        .map(|r| json!({"name": r.name, "url": r.url}))
        .collect();
    Json(list).into_response()
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    cursor: Option<String>,
}

async fn search(State(ext): State<Extensions>, Query(query): Query<SearchQuery>) -> Response {
    let registries = match ext.installer.registries() {
        Ok(registries) => registries,
        Err(err) => return error(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
    };
    let mut servers = Vec::new();
    let mut errors = Vec::new();
    let mut next = None;
    for registry in registries {
        match registry
            .search(query.q.trim(), 30, query.cursor.as_deref())
            .await
        {
            Ok(page) => {
                servers.extend(page.servers);
                next = next.or(page.next_cursor);
            }
            Err(err) => errors.push(json!({"registry": registry.base(), "error": err.to_string()})),
        }
    }
    Json(json!({"servers": servers, "nextCursor": next, "errors": errors})).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlanBody {
    source: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    package: Option<String>,
    #[serde(default)]
    sha256: Option<String>,
}

fn plan_json(plan_id: &str, plan: &Plan) -> Value {
    json!({
        "planId": plan_id,
        "id": plan.id,
        "name": plan.name,
        "description": plan.description,
        "version": plan.version,
        "transport": plan.transport,
        "source": plan.source_kind,
        "identifier": plan.identifier,
        "integrity": plan.integrity,
        "inputs": plan.inputs,
        "permissions": plan.permissions,
        "notes": plan.notes,
        "update": plan.update_of.is_some(),
        "currentVersion": plan.update_of.as_ref().map(|a| a.record.version.clone()),
    })
}

fn keep_plan(ext: &Extensions, plan: Plan) -> String {
    let plan_id = random_id();
    let mut plans = lock(&ext.plans);
    if plans.len() == PLANS_KEPT {
        plans.pop_front();
    }
    plans.push_back((plan_id.clone(), plan));
    plan_id
}

async fn plan(State(ext): State<Extensions>, Json(body): Json<PlanBody>) -> Response {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let source = match Source::parse(&body.source, &cwd) {
        Ok(source) => source,
        Err(err) => return error(StatusCode::BAD_REQUEST, err.to_string()),
    };
    let package = match body.package.as_deref().map(str::parse::<PackageChoice>) {
        None => PackageChoice::Auto,
        Some(Ok(choice)) => choice,
        Some(Err(err)) => return error(StatusCode::BAD_REQUEST, err),
    };
    let request = Request {
        id: body.id.filter(|id| !id.trim().is_empty()),
        package,
        sha256: body.sha256,
        extra_args: Vec::new(),
    };
    match ext.installer.plan(&source, &request).await {
        Ok(plan) => {
            let json = plan_json("", &plan);
            let plan_id = keep_plan(&ext, plan);
            let mut json = json;
            json["planId"] = json!(plan_id);
            Json(json).into_response()
        }
        Err(err) => error(StatusCode::UNPROCESSABLE_ENTITY, err.to_string()),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobBody {
    #[serde(default)]
    plan_id: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    id: Option<String>,
    /// Input values: a string, or a list of strings for a repeated input.
    #[serde(default)]
    values: BTreeMap<String, Value>,
}

impl std::fmt::Display for JobBody {
    // Values may be secret: never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {:?}", self.action, self.id)
    }
}

fn pairs(values: &BTreeMap<String, Value>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (key, value) in values {
        match value {
            Value::String(s) if s.is_empty() => {}
            Value::String(s) => out.push((key.clone(), s.clone())),
            Value::Bool(b) => out.push((key.clone(), b.to_string())),
            Value::Number(n) => out.push((key.clone(), n.to_string())),
            Value::Array(items) => {
                for item in items {
                    match item.as_str() {
                        Some(s) if !s.is_empty() => out.push((key.clone(), s.to_owned())),
                        Some(_) => {}
                        None => return Err(format!("input {key}: a list of strings is expected")),
                    }
                }
            }
            Value::Null => {}
            Value::Object(_) => return Err(format!("input {key}: a string is expected")),
        }
    }
    Ok(out)
}

async fn start_job(State(ext): State<Extensions>, Json(body): Json<JobBody>) -> Response {
    let given = match pairs(&body.values) {
        Ok(given) => given,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let work: Work = match (
        body.plan_id.as_deref(),
        body.action.as_deref(),
        body.id.clone(),
    ) {
        (Some(plan_id), None, _) => {
            let plan = lock(&ext.plans)
                .iter()
                .find(|(id, _)| id == plan_id)
                .map(|(_, plan)| plan.clone());
            let Some(plan) = plan else {
                return error(
                    StatusCode::NOT_FOUND,
                    "no such plan (plan the install again)",
                );
            };
            match ext.installer.resolve_values(&plan, given, None) {
                Ok(values) => Work::Install(Box::new(plan), values),
                Err(err) => return error(StatusCode::BAD_REQUEST, err.to_string()),
            }
        }
        (None, Some("uninstall"), Some(id)) => Work::Uninstall(id),
        (None, Some("update"), Some(id)) => Work::Update(id, given),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "expected {planId, values} or {action: update|uninstall, id}",
            );
        }
    };
    let job_id = random_id();
    let job = Arc::new(Mutex::new(Job {
        state: "running",
        ..Job::default()
    }));
    {
        let mut jobs = lock(&ext.jobs);
        if jobs.len() == JOBS_KEPT {
            jobs.pop_front();
        }
        jobs.push_back((job_id.clone(), job.clone()));
    }
    info!(job = %job_id, "installer job started");
    let installer = ext.installer;
    tokio::spawn(async move {
        let progress = {
            let job = job.clone();
            move |line: &str| {
                let mut job = lock(&job);
                if job.lines.len() == LINES_KEPT {
                    job.lines.pop_front();
                }
                job.lines.push_back(line.to_owned());
            }
        };
        let outcome = work.run(&installer, &progress).await;
        let mut job = lock(&job);
        match outcome {
            Ok(result) => {
                job.state = "done";
                job.result = Some(result);
            }
            Err(message) => {
                warn!("installer job failed: {message}");
                job.state = "failed";
                job.error = Some(message);
            }
        }
    });
    (StatusCode::ACCEPTED, Json(json!({ "job": job_id }))).into_response()
}

enum Work {
    Install(Box<Plan>, mcpapp_install::Values),
    Update(String, Vec<(String, String)>),
    Uninstall(String),
}

impl Work {
    async fn run(
        self,
        installer: &Installer,
        progress: &mcpapp_install::Progress,
    ) -> Result<Value, String> {
        match self {
            Self::Install(plan, values) => {
                let installed = installer
                    .install(&plan, &values, progress)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({"id": installed.id, "version": installed.version,
                          "hasUi": installed.probe.as_ref().is_some_and(|p| p.has_ui),
                          "requested": strings(&installed.requested),
                          "ungranted": installed.ungranted}))
            }
            Self::Update(id, given) => {
                let plan = installer
                    .plan_update(&id, None)
                    .await
                    .map_err(|e| e.to_string())?;
                let values = installer
                    .resolve_values(&plan, given, None)
                    .map_err(|e| e.to_string())?;
                let installed = installer
                    .install(&plan, &values, progress)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({"id": installed.id, "version": installed.version,
                          "previousVersion": installed.previous_version,
                          "requested": strings(&installed.requested),
                          "ungranted": installed.ungranted}))
            }
            Self::Uninstall(id) => {
                progress(&format!("removing {id}"));
                let removed = installer.uninstall(&id).map_err(|e| e.to_string())?;
                Ok(json!({"id": removed.id, "removed": true}))
            }
        }
    }
}

/// Permissions as `install --grant` writes them.
fn strings(permissions: &[mcpapp_install::Permission]) -> Vec<String> {
    permissions.iter().map(ToString::to_string).collect()
}

async fn job(State(ext): State<Extensions>, Path(job_id): Path<String>) -> Response {
    let job = lock(&ext.jobs)
        .iter()
        .find(|(id, _)| *id == job_id)
        .map(|(_, job)| job.clone());
    let Some(job) = job else {
        return error(StatusCode::NOT_FOUND, "no such job");
    };
    let job = lock(&job);
    Json(json!({
        "state": job.state,
        "lines": job.lines,
        "error": job.error,
        "result": job.result,
    }))
    .into_response()
}

async fn installed(State(ext): State<Extensions>) -> Response {
    let installer = ext.installer.clone();
    let apps = tokio::task::spawn_blocking(move || installer.installed())
        .await
        .unwrap_or_default();
    let list: Vec<Value> = apps
        .iter()
        .map(|a| {
            json!({"id": a.id, "version": a.record.version, "source": a.record.source,
                   "identifier": a.record.identifier})
        })
        .collect();
    Json(list).into_response()
}
