//! `mcp-registry`: a small MCP Registry for tests, serving the registry's `v0.1` API over a
//! folder of documents, and the files of another folder (bundles) beside it.
//!
//! ```text
//! mcp-registry --dir DOCS [--files DIR] [--bind ADDR]
//! ```
//!
//! Every `*.json` file in `DOCS` is one server version: a `server.json` document, or an
//! answer entry `{"server": {...}, "_meta": {...}}` (to set a status such as `deprecated`).
//! The folder is read on every request, so a test publishes a new version by writing a file.
//! Once listening it prints one stdout line, `listening on http://HOST:PORT`.
//!
//! - `GET /v0.1/servers?search=&limit=&cursor=&version=latest`: versions whose name contains
//!   `search` (case-insensitive), `latest` only with `version=latest`, sorted by name and
//!   version, `limit` (default 30) at a time; `metadata.nextCursor` continues.
//! - `GET /v0.1/servers/{name}/versions/{version|latest}`: one version, 404 when absent.
//! - `GET /v0.1/servers/{name}/versions`: every version of a server.
//! - `GET /files/{name}`: a file of `--files` (no subfolders).
//!
//! Each answer entry carries `_meta["io.modelcontextprotocol.registry/official"]` with
//! `status` (`active` unless the file says otherwise), `isLatest` and `publishedAt`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use clap::Parser;
use serde::Deserialize;
use serde_json::{Value, json};

const OFFICIAL: &str = "io.modelcontextprotocol.registry/official";

#[derive(Debug, Parser)]
struct Args {
    /// The folder of server versions.
    #[arg(long)]
    dir: PathBuf,
    /// A folder served under /files/.
    #[arg(long)]
    files: Option<PathBuf>,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
}

#[derive(Debug)]
struct Config {
    dir: PathBuf,
    files: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let state = Arc::new(Config {
        dir: args.dir,
        files: args.files,
    });
    let app = Router::new()
        .route("/v0.1/servers", get(list))
        .route("/v0.1/servers/{name}/versions", get(versions))
        .route("/v0.1/servers/{name}/versions/{version}", get(one))
        .route("/files/{name}", get(file))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

/// Every entry in the folder, with `isLatest` worked out per name.
fn entries(config: &Config) -> Vec<Value> {
    let mut out: Vec<Value> = std::fs::read_dir(&config.dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|text| serde_json::from_str::<Value>(&text).ok())
        .map(|value| {
            if value.get("server").is_some() {
                value
            } else {
                json!({"server": value, "_meta": {}})
            }
        })
        .collect();
    out.sort_by_key(key);
    let latest: Vec<(String, Vec<u64>)> = out.iter().map(key).fold(
        Vec::new(),
        |mut acc: Vec<(String, Vec<u64>)>, (name, version)| {
            match acc.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = slot.1.clone().max(version),
                None => acc.push((name, version)),
            }
            acc
        },
    );
    for entry in &mut out {
        let (name, version) = key(entry);
        let is_latest = latest.iter().any(|(n, v)| *n == name && *v == version);
        if let Some(official) = entry["_meta"].as_object_mut().and_then(|meta| {
            meta.entry(OFFICIAL)
                .or_insert_with(|| json!({}))
                .as_object_mut()
        }) {
            official.entry("status").or_insert_with(|| json!("active"));
            official.insert("isLatest".into(), json!(is_latest));
            official
                .entry("publishedAt")
                .or_insert_with(|| json!("2026-11-30T12:00:00Z"));
        }
    }
    out
}

/// Name and numeric version, for sorting.
fn key(entry: &Value) -> (String, Vec<u64>) {
    let name = entry["server"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let version = entry["server"]["version"]
        .as_str()
        .unwrap_or_default()
        .split(['.', '-'])
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    (name, version)
}

fn is_latest(entry: &Value) -> bool {
    entry["_meta"][OFFICIAL]["isLatest"] == json!(true)
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    search: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

async fn list(State(config): State<Arc<Config>>, Query(query): Query<ListQuery>) -> Response {
    let search = query.search.unwrap_or_default().to_ascii_lowercase();
    let found: Vec<Value> = entries(&config)
        .into_iter()
        .filter(|e| {
            e["server"]["name"]
                .as_str()
                .is_some_and(|n| n.to_ascii_lowercase().contains(&search))
        })
        .filter(|e| query.version.as_deref() != Some("latest") || is_latest(e))
        .collect();
    let start: usize = query
        .cursor
        .as_deref()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let limit = query.limit.unwrap_or(30).clamp(1, 100);
    let page: Vec<Value> = found.iter().skip(start).take(limit).cloned().collect();
    let next = (start + limit < found.len()).then(|| (start + limit).to_string());
    Json(json!({"servers": page, "metadata": {"count": page.len(), "nextCursor": next}}))
        .into_response()
}

async fn versions(State(config): State<Arc<Config>>, Path(name): Path<String>) -> Response {
    let found: Vec<Value> = entries(&config)
        .into_iter()
        .filter(|e| e["server"]["name"] == json!(name))
        .collect();
    if found.is_empty() {
        return not_found(&name);
    }
    Json(json!({"servers": found, "metadata": {"count": found.len()}})).into_response()
}

async fn one(
    State(config): State<Arc<Config>>,
    Path((name, version)): Path<(String, String)>,
) -> Response {
    entries(&config)
        .into_iter()
        .find(|e| {
            e["server"]["name"] == json!(name)
                && if version == "latest" {
                    is_latest(e)
                } else {
                    e["server"]["version"] == json!(version)
                }
        })
        .map_or_else(|| not_found(&name), |e| Json(e).into_response())
}

async fn file(State(config): State<Arc<Config>>, Path(name): Path<String>) -> Response {
    let Some(dir) = &config.files else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return StatusCode::NOT_FOUND.into_response();
    }
    match std::fs::read(dir.join(&name)) {
        Ok(bytes) => bytes.into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

fn not_found(name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"title": "Not Found", "status": 404, "detail": format!("server {name} not found")})),
    )
        .into_response()
}
