//! The MCP server: one [`GroceryServer`] per connection, sharing one [`AppState`].
//!
//! Tools live in `tools.rs`; this file wires them up with resources, resource templates,
//! subscriptions, prompts and completions, and caps the protocol at 2025-11-25 so elicitation
//! (a server-to-client request) stays available.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::handler::server::tool::ToolRouter;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    MetaObject, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, tool_handler};

use crate::notify::{ConnectionId, Notifier, store_summary_uri};
use crate::service::{InventoryError, InventoryService};
use crate::{completions, dashboard, prompts, views};

/// The URI of the dashboard UI resource.
pub(crate) const DASHBOARD_URI: &str = "ui://grocery/store-dashboard.html";
/// The MCP Apps MIME type of UI resources.
pub(crate) const MCP_APP_MIME: &str = "text/html;profile=mcp-app";
/// The store summary resource template.
pub(crate) const STORE_SUMMARY_TEMPLATE: &str = "inventory://stores/{storeId}/summary";
/// The product details resource template.
pub(crate) const PRODUCT_DETAILS_TEMPLATE: &str = "inventory://products/{productId}/details";

/// Settings of the dashboard's UI resource.
#[derive(Debug, Clone, Default)]
pub(crate) struct UiConfig {
    /// Origins the dashboard may connect to (`_meta.ui.csp.connectDomains`).
    pub(crate) connect_domains: Vec<String>,
}

/// State shared by every connection and the REST API.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) service: Arc<dyn InventoryService>,
    pub(crate) notifier: Notifier,
    pub(crate) ui: UiConfig,
}

/// The MCP server of one connection.
#[derive(Debug, Clone)]
pub(crate) struct GroceryServer {
    pub(crate) state: Arc<AppState>,
    pub(crate) connection: ConnectionId,
    tool_router: ToolRouter<Self>,
}

impl GroceryServer {
    /// A server for a new connection.
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        let connection = state.notifier.new_connection();
        Self {
            state,
            connection,
            tool_router: Self::tool_router(),
        }
    }

    pub(crate) fn service(&self) -> &dyn InventoryService {
        self.state.service.as_ref()
    }

    fn ui_meta(&self) -> MetaObject {
        MetaObject(rmcp::object!({
            "ui": {
                "prefersBorder": true,
                "csp": {
                    "connectDomains": self.state.ui.connect_domains,
                    "resourceDomains": []
                }
            }
        }))
    }
}

/// Splits `inventory://stores/{id}/summary` and `inventory://products/{id}/details`.
enum DataUri {
    StoreSummary(u32),
    ProductDetails(u32),
}

fn parse_data_uri(uri: &str) -> Result<DataUri, McpError> {
    let parse_id = |text: &str, what: &str| {
        text.parse::<u32>().map_err(|_| {
            McpError::invalid_params(
                format!("{what} id {text:?} in {uri} is not a positive integer"),
                None,
            )
        })
    };
    if let Some(rest) = uri.strip_prefix("inventory://stores/")
        && let Some(id) = rest.strip_suffix("/summary")
    {
        return Ok(DataUri::StoreSummary(parse_id(id, "store")?));
    }
    if let Some(rest) = uri.strip_prefix("inventory://products/")
        && let Some(id) = rest.strip_suffix("/details")
    {
        return Ok(DataUri::ProductDetails(parse_id(id, "product")?));
    }
    Err(McpError::resource_not_found(
        format!(
            "no resource {uri}; known: {DASHBOARD_URI}, {STORE_SUMMARY_TEMPLATE}, {PRODUCT_DETAILS_TEMPLATE}"
        ),
        None,
    ))
}

fn not_found(uri: &str, e: &InventoryError) -> McpError {
    McpError::resource_not_found(format!("no resource {uri}: {e}"), None)
}

fn json_text(value: &impl serde::Serialize) -> Result<String, McpError> {
    serde_json::to_string_pretty(value)
        .map_err(|e| McpError::internal_error(format!("could not encode JSON: {e}"), None))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for GroceryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_completions()
                .build(),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
        .with_server_info(Implementation::new(
            "grocery-inventory",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Multi-store grocery inventory. Query categories, products, suppliers, stores and \
             inventory; find low stock; adjust or set stock; show the interactive dashboard with \
             show_store_inventory_dashboard.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        // 2026-07-28 forbids server-to-client requests, which the elicitation tools need.
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources = vec![
            Resource::new(DASHBOARD_URI, "store-dashboard")
                .with_title("Store inventory dashboard")
                .with_description("Interactive multi-store inventory dashboard (MCP App view).")
                .with_mime_type(MCP_APP_MIME)
                .with_meta(self.ui_meta()),
        ];
        for store in self.service().stores() {
            resources.push(
                Resource::new(
                    store_summary_uri(store.id),
                    format!("store-{}-summary", store.id),
                )
                .with_title(format!("{} inventory summary", store.name))
                .with_description(format!(
                    "Inventory health of {} ({}, {}): value, low stock, value at risk.",
                    store.name, store.city, store.state
                ))
                .with_mime_type("application/json"),
            );
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(STORE_SUMMARY_TEMPLATE, "store-summary")
                .with_title("Store inventory summary")
                .with_description(
                    "Per-store inventory summary: SKUs, units, value, low-stock items, value at risk.",
                )
                .with_mime_type("application/json"),
            ResourceTemplate::new(PRODUCT_DETAILS_TEMPLATE, "product-details")
                .with_title("Product details")
                .with_description(
                    "A product with its category, supplier and stock level in every store.",
                )
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.as_str();
        if uri == DASHBOARD_URI {
            return Ok(ReadResourceResult::new(vec![
                ResourceContents::text(dashboard::HTML, DASHBOARD_URI)
                    .with_mime_type(MCP_APP_MIME)
                    .with_meta(self.ui_meta()),
            ])
            .into());
        }
        let text = match parse_data_uri(uri)? {
            DataUri::StoreSummary(id) => json_text(
                &views::store_summary(self.service(), id).map_err(|e| not_found(uri, &e))?,
            )?,
            DataUri::ProductDetails(id) => json_text(
                &views::product_details(self.service(), id).map_err(|e| not_found(uri, &e))?,
            )?,
        };
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type("application/json"),
        ])
        .into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Only the data resources change; the dashboard HTML is static.
        if request.uri != DASHBOARD_URI {
            let exists = match parse_data_uri(&request.uri)? {
                DataUri::StoreSummary(id) => self.service().store(id).map(|_| ()),
                DataUri::ProductDetails(id) => self.service().product(id).map(|_| ()),
            };
            exists.map_err(|e| not_found(&request.uri, &e))?;
        }
        self.state
            .notifier
            .subscribe(self.connection, context.peer, request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.state
            .notifier
            .unsubscribe(self.connection, &request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(prompts::list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        prompts::get(self.service(), &request.name, request.arguments.as_ref()).map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        completions::complete(self.service(), &request).map(CompleteResult::new)
    }
}
