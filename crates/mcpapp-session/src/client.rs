//! The gateway's own MCP client identity and its handler for what the server asks of it.
//!
//! The upstream session is the gateway's: servers see this client's info and capabilities.
//! It advertises MCP Apps support and the capabilities a browser port might need, so that
//! servers enable capability-gated features; requests the router cannot hand to a port that
//! declared the capability are answered here.

// Sampling and roots are deprecated by SEP-2577 (for 2026-07-28 and later), but this client
// speaks 2025-11-25, where servers still use them; answering them is required.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, ErrorData, Implementation,
    ListRootsResult, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};

use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::elicit::{CAUSE_META, Causes, ElicitationRequest, Elicitor};

/// The MCP Apps extension id and what it advertises.
pub(crate) const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// A list the server announced as changed, for the supervisor to re-enumerate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// The tool list changed.
    Tools,
    /// The resource list (or the templates) changed.
    Resources,
    /// The prompt list changed.
    Prompts,
}

/// The handler behind the gateway's rmcp client for one app.
#[derive(Clone)]
pub struct GatewayClient {
    app_id: String,
    notices: mpsc::UnboundedSender<Notice>,
    causes: Causes,
    elicitor: Option<Arc<dyn Elicitor>>,
}

impl std::fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayClient")
            .field("app_id", &self.app_id)
            .field("elicitor", &self.elicitor.is_some())
            .finish_non_exhaustive()
    }
}

impl GatewayClient {
    /// The handler for `app_id`'s session: list changes go to `notices`; elicitations the
    /// gateway's own calls cause go to `elicitor` (declined without one), with the chat
    /// session `causes` knows for the request that caused them.
    pub fn new(
        app_id: String,
        notices: mpsc::UnboundedSender<Notice>,
        causes: Causes,
        elicitor: Option<Arc<dyn Elicitor>>,
    ) -> Self {
        Self {
            app_id,
            notices,
            causes,
            elicitor,
        }
    }
}

/// The `initialize` parameters the gateway sends: protocol 2025-11-25 (the last version with
/// an `initialize` handshake and server-to-client requests), this gateway's name, and the MCP
/// Apps extension.
pub(crate) fn client_info() -> ClientConfig {
    let mut ui = serde_json::Map::new();
    ui.insert(
        "mimeTypes".to_owned(),
        serde_json::json!([mcpapp_manifest::MCP_APP_MIME_TYPE]),
    );
    let mut extensions = std::collections::BTreeMap::new();
    extensions.insert(UI_EXTENSION.to_owned(), ui);
    let capabilities = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_sampling()
        .enable_roots()
        .enable_extensions_with(extensions)
        .build();
    ClientConfig::new(
        capabilities,
        Implementation::new("mcpapp-gateway", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25)
}

/// The gateway's `clientInfo`, as JSON (for requests the hub writes itself).
pub(crate) fn gateway_info_json() -> serde_json::Value {
    serde_json::json!({ "name": "mcpapp-gateway", "version": env!("CARGO_PKG_VERSION") })
}

/// The capabilities the gateway's own client declares, as JSON.
pub(crate) fn gateway_capabilities_json() -> serde_json::Value {
    serde_json::to_value(client_info().capabilities).unwrap_or_default()
}

impl ClientHandler for GatewayClient {
    fn get_info(&self) -> ClientConfig {
        client_info()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let session_id = context
            .meta
            .get(CAUSE_META)
            .and_then(|cause| cause.as_str())
            .and_then(|cause| self.causes.session_of(cause));
        if let Some(elicitor) = &self.elicitor {
            let asked = ElicitationRequest {
                app_id: self.app_id.clone(),
                session_id,
                params: request,
            };
            if let Some(answer) = elicitor.elicit(asked).await {
                return Ok(answer);
            }
            info!(app = %self.app_id, "an elicitation of the gateway's own call was declined");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        warn!(
            app = %self.app_id,
            "declined an elicitation request: no client session of this app could answer it"
        );
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        warn!(app = %self.app_id, "refused a sampling request: no connected client can sample");
        Err(ErrorData::new(
            ErrorCode::INVALID_REQUEST,
            "sampling is not available: no client connected to this app through the gateway can sample",
            None,
        ))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::default())
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        info!(app = %self.app_id, "the app's tool list changed");
        let _ = self.notices.send(Notice::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::Resources);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::Prompts);
    }
}
