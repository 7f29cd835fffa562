//! Both MCP eras through `/apps/mcp/{appId}`: clients of 2026-07-28 (no `initialize`, no
//! session) and of 2025-11-25, on the one upstream session of an app of either era.

use mcpapp_testkit::{AppsDir, Over};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, ProtocolVersion, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

use crate::{Gateway, PATIENCE};

/// A client that accepts every elicitation with a fixed answer.
#[derive(Clone)]
pub(crate) struct Answering;

impl rmcp::ClientHandler for Answering {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({"name": "Ada", "agree": true}));
        Ok(result)
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("modern-browser", "1"),
        )
    }
}

/// A client pinned to 2026-07-28 (`server/discover`, no `initialize`).
pub(crate) async fn modern_client(url: &str) -> RunningService<RoleClient, Answering> {
    Answering
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url.to_owned()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("a 2026-07-28 client connects")
}

fn args(value: serde_json::Value) -> rmcp::model::JsonObject {
    value.as_object().unwrap().clone()
}

#[tokio::test]
async fn a_2026_client_uses_a_legacy_app_through_the_proxy() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("fx", "fixture-app", over);
        let gateway = Gateway::start(apps, |_| {}).await;
        let url = format!("{}/apps/mcp/fx", gateway.url);
        let client = modern_client(&url).await;
        let info = client.peer_info().unwrap();
        assert_eq!(
            info.protocol_version,
            ProtocolVersion::V_2026_07_28,
            "{over:?}"
        );
        assert_eq!(info.server_info.as_ref().unwrap().name, "fixture-app");

        // List and call.
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "echo"), "{over:?}");
        let echo = client
            .call_tool(
                CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "hi"}))),
            )
            .await
            .unwrap();
        assert_eq!(echo.structured_content.unwrap()["message"], "hi");

        // The app's own request arrives as an input-required round; the retry answers it.
        let answer = tokio::time::timeout(
            PATIENCE,
            client.call_tool(
                CallToolRequestParams::new("elicit")
                    .with_arguments(args(json!({"message": "name?"}))),
            ),
        )
        .await
        .unwrap()
        .unwrap();
        let text = answer.content[0].as_text().unwrap().text.clone();
        assert!(
            text.starts_with("accepted:") && text.contains("Ada"),
            "{over:?}: {text}"
        );

        // A list change over subscriptions/listen.
        let mut listen = client
            .listen(SubscriptionFilter::builder().tools_list_changed().build())
            .await
            .unwrap();
        assert_eq!(listen.acknowledged().tools_list_changed, Some(true));
        gateway
            .supervisor
            .get("fx")
            .unwrap()
            .call_tool("notify_tools_changed", None, None)
            .await
            .unwrap();
        let changed = tokio::time::timeout(PATIENCE, listen.next())
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(
                changed,
                Some(ServerNotification::ToolListChangedNotification(_))
            ),
            "{over:?}: {changed:?}"
        );

        // A call the client gives up on is cancelled upstream.
        let call = client.call_tool(CallToolRequestParams::new("hang"));
        let _ = tokio::time::timeout(std::time::Duration::from_millis(300), call).await;
        let seen = gateway
            .supervisor
            .get("fx")
            .unwrap()
            .call_tool("cancellations", Some(args(json!({"waitMs": 20_000}))), None)
            .await
            .unwrap();
        assert_eq!(seen.structured_content.unwrap()["count"], 1, "{over:?}");
        drop(listen);
        client.cancel().await.unwrap();
        gateway.shutdown().await;
    }
}

#[tokio::test]
async fn an_auto_mode_client_negotiates_2026_on_the_proxy() {
    let apps = AppsDir::new();
    let _server = apps.test_app("fx", "fixture-app", Over::Stdio);
    let gateway = Gateway::start(apps, |_| {}).await;
    let client = Answering
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(format!("{}/apps/mcp/fx", gateway.url)),
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    client.cancel().await.unwrap();
    gateway.shutdown().await;
}
