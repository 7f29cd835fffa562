//! `/mcp`: one MCP server for external clients (Claude Desktop, MCP Inspector, Codex) with
//! every model-visible app tool under its registered name (`grocery.get_stores`), calls routed
//! through the bridge, and `notifications/tools/list_changed` whenever the set changes.
//!
//! This surface is the gateway's own, so rmcp's typed server is the right tool here (unlike
//! the per-app proxy, which must pass messages through untouched).

use std::sync::Arc;

use mcpapp_bridge::{ToolContext, ToolRegistry};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tracing::{Instrument, debug};

/// The MCP server of one `/mcp` session.
#[derive(Clone)]
struct AggregateServer {
    registry: ToolRegistry,
}

impl ServerHandler for AggregateServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcpapp-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Tools of the MCP Apps this gateway runs, each named with its app's prefix.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .registry
            .list()
            .into_iter()
            .map(|entry| {
                let schema = match entry.tool.input_schema() {
                    serde_json::Value::Object(object) => object.clone(),
                    _ => serde_json::Map::new(),
                };
                Tool::new(
                    entry.name.clone(),
                    entry.tool.description().to_owned(),
                    Arc::new(schema),
                )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(entry) = self.registry.resolve(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", request.name),
                None,
            ));
        };
        let arguments = request.arguments.map_or_else(
            || "{}".to_owned(),
            |args| serde_json::Value::Object(args).to_string(),
        );
        let session_id = context
            .meta
            .get("sessionId")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let mut ctx = ToolContext::new().with_cancel(context.ct.clone());
        if let Some(session_id) = session_id {
            ctx = ctx.with_session_id(session_id);
        }
        let output = entry.tool.invoke(arguments, ctx).await;
        let mut result = if output.is_error {
            CallToolResult::error(vec![ContentBlock::text(output.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(output.text)])
        };
        result.structured_content = output.structured;
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Tell this client whenever the tool set changes, until it goes away.
        let mut changes = self.registry.subscribe();
        let peer = context.peer;
        tokio::spawn(
            async move {
                while changes.changed().await.is_ok() {
                    if peer.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                    debug!("told an /mcp client that the tool list changed");
                }
            }
            .in_current_span(),
        );
    }
}

/// The tower service behind `/mcp`.
pub(crate) fn service(
    registry: ToolRegistry,
    max_body_bytes: usize,
) -> StreamableHttpService<impl ServerHandler + Clone, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked by the gateway's own middleware for every route.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(max_body_bytes);
    StreamableHttpService::new(
        move || {
            Ok(AggregateServer {
                registry: registry.clone(),
            })
        },
        LocalSessionManager::default().into(),
        config,
    )
}
