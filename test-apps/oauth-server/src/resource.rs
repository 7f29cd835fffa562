//! The protected MCP app: its protected resource metadata, `/mcp` behind a guard that answers
//! 401 and 403 challenges, the tools and the contacts view, and the test controls under
//! `/admin`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, MetaObject,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use crate::PrmAt;
use crate::shared::Shared;

/// Requests larger than this are refused before the guard reads them.
const MAX_BODY: usize = 1024 * 1024;

/// The contacts view, an MCP App view that `show_contacts` names.
const VIEW_URI: &str = "ui://crm/contacts.html";
/// The MIME type of an MCP App view.
const MCP_APP_MIME: &str = "text/html;profile=mcp-app";
const VIEW_HTML: &str = include_str!("contacts.html");

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let prm_path = match shared.options.prm_at {
        PrmAt::Path => Some("/.well-known/oauth-protected-resource/mcp"),
        PrmAt::Root => Some("/.well-known/oauth-protected-resource"),
        PrmAt::Custom => Some("/meta/resource.json"),
        PrmAt::None => None,
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let mcp = StreamableHttpService::new(
        || Ok(Notes::new()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = Router::new();
    if let Some(path) = prm_path {
        router = router.route(path, get(protected_resource));
    }
    router
        .route("/admin/state", get(admin_state))
        .route("/admin/migrate", post(migrate))
        .route("/admin/expire-access-tokens", post(expire_access_tokens))
        .route("/admin/revoke-refresh-tokens", post(revoke_refresh_tokens))
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

async fn protected_resource(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let o = &shared.options;
    let mut doc = json!({
        "resource": o.resource,
        "authorization_servers": [shared.active_issuer()],
        "bearer_methods_supported": ["header"],
    });
    if !o.scopes_supported.is_empty() {
        doc["scopes_supported"] = json!(o.scopes_supported);
    }
    Json(doc)
}

/// The scope a tool needs beyond a valid token.
fn needed_scope(tool: &str) -> Option<&'static str> {
    match tool {
        "write_note" => Some("mcp:write"),
        "admin_reset" => Some("mcp:admin"),
        _ => None,
    }
}

fn challenge(shared: &Shared, error: Option<&str>, scope: Option<&str>) -> HeaderValue {
    let o = &shared.options;
    let mut parts = Vec::new();
    if let Some(error) = error {
        parts.push(format!("error=\"{error}\""));
    }
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        parts.push(format!("scope=\"{scope}\""));
    }
    if o.prm_in_header || o.prm_at == PrmAt::Custom {
        parts.push(format!("resource_metadata=\"{}\"", o.prm_url()));
    }
    let text = if parts.is_empty() {
        "Bearer".to_owned()
    } else {
        format!("Bearer {}", parts.join(", "))
    };
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("Bearer"))
}

fn refuse(shared: &Shared, status: StatusCode, challenge: HeaderValue, error: &str) -> Response {
    let body = Json(json!({"error": error}));
    if shared.options.challenge {
        (status, [(header::WWW_AUTHENTICATE, challenge)], body).into_response()
    } else {
        (status, body).into_response()
    }
}

/// 401 without a valid token, 403 for a tool whose scope the token lacks; the request goes on
/// otherwise. Only `/mcp` is guarded.
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if !request.uri().path().starts_with("/mcp") {
        return next.run(request).await;
    }
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let grant = token.as_deref().and_then(|t| shared.check_access(t));
    let Some(grant) = grant else {
        shared.tables().seen.mcp.push(json!({"status": 401}));
        let error = token.is_some().then_some("invalid_token");
        let scope = Some(shared.options.challenge_scope.as_str());
        return refuse(
            &shared,
            StatusCode::UNAUTHORIZED,
            challenge(&shared, error, scope),
            "invalid_token",
        );
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if message["method"] == "tools/call"
        && let Some(needed) = message["params"]["name"].as_str().and_then(needed_scope)
        && !grant.scopes.iter().any(|s| s == needed)
    {
        shared
            .tables()
            .seen
            .mcp
            .push(json!({"status": 403, "needed": needed}));
        return refuse(
            &shared,
            StatusCode::FORBIDDEN,
            challenge(&shared, Some("insufficient_scope"), Some(needed)),
            "insufficient_scope",
        );
    }
    shared
        .tables()
        .seen
        .mcp
        .push(json!({"status": 200, "method": message["method"], "scopes": grant.scopes}));
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

async fn admin_state(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let tables = shared.tables();
    Json(json!({
        "issuer": shared.active_issuer(),
        "issuers": shared.options.issuers,
        "resource": shared.options.resource,
        "seen": tables.seen,
    }))
}

/// The app names the second authorization server from now on; tokens of the first stop
/// working.
async fn migrate(State(shared): State<Arc<Shared>>) -> StatusCode {
    if shared.options.issuers.len() < 2 {
        return StatusCode::CONFLICT;
    }
    shared.active.store(1, std::sync::atomic::Ordering::SeqCst);
    StatusCode::NO_CONTENT
}

async fn expire_access_tokens(State(shared): State<Arc<Shared>>) -> StatusCode {
    for token in shared.tables().access.values_mut() {
        token.revoked = true;
    }
    StatusCode::NO_CONTENT
}

async fn revoke_refresh_tokens(State(shared): State<Arc<Shared>>) -> StatusCode {
    for token in shared.tables().refresh.values_mut() {
        token.revoked = true;
    }
    StatusCode::NO_CONTENT
}

/// The protected app's tools.
#[derive(Debug, Clone)]
struct Notes {
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct NoteArgs {
    /// The note.
    text: String,
}

/// `_meta` linking a tool to the contacts view.
fn contacts_ui_meta() -> MetaObject {
    match json!({"ui": {"resourceUri": VIEW_URI}}) {
        Value::Object(map) => MetaObject(map),
        _ => MetaObject::new(),
    }
}

#[tool_router]
impl Notes {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    /// Says hello to whoever holds a valid token.
    #[tool]
    fn whoami(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text("hello, authorized client")])
    }

    /// Keeps a note (needs the mcp:write scope).
    #[tool]
    fn write_note(&self, Parameters(args): Parameters<NoteArgs>) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(format!("noted: {}", args.text))])
    }

    /// Resets everything (needs the mcp:admin scope).
    #[tool]
    fn admin_reset(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text("reset")])
    }

    /// Shows the contacts in the CRM's view (ui://crm/contacts.html).
    #[tool(meta = contacts_ui_meta())]
    fn show_contacts(&self) -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text("2 contacts")]);
        result.structured_content = Some(json!({"contacts": [
            {"name": "Ada Lovelace", "email": "ada@example.com"},
            {"name": "Alan Turing", "email": "alan@example.com"},
        ]}));
        result
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new(
            "oauth-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(VIEW_URI, "contacts")
                .with_title("Contacts")
                .with_mime_type(MCP_APP_MIME),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri != VIEW_URI {
            return Err(McpError::resource_not_found(
                format!("no resource {}; the app has only {VIEW_URI}", request.uri),
                None,
            ));
        }
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(VIEW_HTML, VIEW_URI).with_mime_type(MCP_APP_MIME),
        ])
        .into())
    }
}
