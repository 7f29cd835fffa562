//! Both MCP eras through `/apps/mcp/{appId}`: clients of 2026-07-28 (no `initialize`, no
//! session) and of 2025-11-25, on the one upstream session of an app of either era.

use mcpapp_manifest::Era;
use mcpapp_testkit::{AppsDir, HttpApp, Over, bin};
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

/// The fixture as an app of `era` over `over`; the HTTP server is returned to keep it alive.
fn fixture(apps: &AppsDir, id: &str, era: Era, over: Over) -> Option<HttpApp> {
    let era_flag = match era {
        Era::Legacy => "legacy",
        Era::Modern => "modern",
    };
    match over {
        Over::Stdio => {
            apps.stdio_app(id, &bin("fixture-app"), &["stdio", "--era", era_flag], "{}");
            None
        }
        Over::Http => {
            let server = HttpApp::start("fixture-app", &["--era", era_flag]);
            apps.http_app(id, &server.url, "{}");
            Some(server)
        }
    }
}

/// A legacy client (2025-11-25, `initialize`) that answers elicitation and reports tool list
/// changes.
#[derive(Clone)]
struct LegacyClient {
    changes: tokio::sync::mpsc::UnboundedSender<()>,
}

impl rmcp::ClientHandler for LegacyClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Answering.create_elicitation(request, context).await
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        let _ = self.changes.send(());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("legacy-browser", "1"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// One cell of the matrix: a client of `client` era, through the proxy, onto an app of `app`
/// era over `over`: list, call, hear a list change, answer an elicitation, cancel a call.
async fn cell(client_era: Era, app_era: Era, over: Over) {
    let label = format!("{client_era:?} client, {app_era:?} app, {over:?}");
    let apps = AppsDir::new();
    let _server = fixture(&apps, "fx", app_era, over);
    let gateway = Gateway::start(apps, |_| {}).await;
    let app = gateway.supervisor.get("fx").unwrap();
    assert_eq!(
        app.snapshot().state.lifecycle,
        mcpapp_manifest::Lifecycle::Running,
        "{label}: {:?}",
        app.snapshot().state.last_error
    );
    let url = format!("{}/apps/mcp/fx", gateway.url);
    let (changes_tx, mut changes) = tokio::sync::mpsc::unbounded_channel();
    enum Client {
        Legacy(RunningService<RoleClient, LegacyClient>),
        Modern(RunningService<RoleClient, Answering>),
    }
    let client = match client_era {
        Era::Legacy => {
            let handler = LegacyClient {
                changes: changes_tx,
            };
            let client = rmcp::ServiceExt::serve(
                handler,
                StreamableHttpClientTransport::from_uri(url.clone()),
            )
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
            Client::Legacy(client)
        }
        Era::Modern => Client::Modern(modern_client(&url).await),
    };
    let peer = match &client {
        Client::Legacy(c) => c.peer().clone(),
        Client::Modern(c) => c.peer().clone(),
    };
    let expected_version = match client_era {
        Era::Legacy => ProtocolVersion::V_2025_11_25,
        Era::Modern => ProtocolVersion::V_2026_07_28,
    };
    assert_eq!(
        peer.peer_info().unwrap().protocol_version,
        expected_version,
        "{label}"
    );

    // List and call.
    let tools = peer.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "elicit"), "{label}");
    let echo = peer
        .call_tool(
            CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "hi"}))),
        )
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(echo.structured_content.unwrap()["message"], "hi", "{label}");

    // A list change reaches the client, in its era's way.
    let mut listen = match &client {
        Client::Modern(c) => Some(
            c.listen(SubscriptionFilter::builder().tools_list_changed().build())
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}")),
        ),
        Client::Legacy(_) => None,
    };
    app.call_tool("notify_tools_changed", None, None)
        .await
        .unwrap();
    match &mut listen {
        Some(listen) => {
            let changed = tokio::time::timeout(PATIENCE, listen.next())
                .await
                .unwrap()
                .unwrap();
            assert!(
                matches!(
                    changed,
                    Some(ServerNotification::ToolListChangedNotification(_))
                ),
                "{label}: {changed:?}"
            );
        }
        None => tokio::time::timeout(PATIENCE, changes.recv())
            .await
            .unwrap_or_else(|_| panic!("{label}: no list change"))
            .unwrap(),
    }

    // An elicitation round trip: the app asks, the client answers, the call completes.
    let elicit =
        CallToolRequestParams::new("elicit").with_arguments(args(json!({"message": "name?"})));
    let answer = tokio::time::timeout(PATIENCE, async {
        match &client {
            Client::Legacy(c) => c.call_tool(elicit).await,
            Client::Modern(c) => c.call_tool(elicit).await,
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{label}: the elicitation never completed"))
    .unwrap_or_else(|e| panic!("{label}: {e}"));
    let text = answer.content[0].as_text().unwrap().text.clone();
    assert!(
        text.starts_with("accepted:") && text.contains("Ada"),
        "{label}: {text}"
    );

    // A call the client gives up on is cancelled upstream.
    let hang = peer.call_tool(CallToolRequestParams::new("hang"));
    let _ = tokio::time::timeout(std::time::Duration::from_millis(300), hang).await;
    let seen = app
        .call_tool("cancellations", Some(args(json!({"waitMs": 20_000}))), None)
        .await
        .unwrap();
    assert_eq!(seen.structured_content.unwrap()["count"], 1, "{label}");

    drop(listen);
    match client {
        Client::Legacy(c) => drop(c.cancel().await),
        Client::Modern(c) => drop(c.cancel().await),
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_era_matrix_legacy_clients() {
    for app in [Era::Legacy, Era::Modern] {
        for over in Over::BOTH {
            cell(Era::Legacy, app, over).await;
        }
    }
}

#[tokio::test]
async fn the_era_matrix_modern_clients() {
    for app in [Era::Legacy, Era::Modern] {
        for over in Over::BOTH {
            cell(Era::Modern, app, over).await;
        }
    }
}

#[tokio::test]
async fn an_app_that_speaks_only_2026_runs_and_its_tools_reach_the_agent_and_mcp() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = fixture(&apps, "modern", Era::Modern, over);
        let gateway = Gateway::start(apps, |_| {}).await;
        let app = gateway.supervisor.get("modern").unwrap();
        let snapshot = app.snapshot();
        assert_eq!(
            snapshot.state.lifecycle,
            mcpapp_manifest::Lifecycle::Running,
            "{over:?}: {snapshot:?}"
        );
        assert_eq!(
            snapshot.protocol_version.as_deref(),
            Some("2026-07-28"),
            "{over:?}"
        );
        // In the agent's registry.
        // (The bridge's sync registers the app's tools when it sees it running.)
        let mut versions = gateway.registry.subscribe();
        let registered = tokio::time::timeout(PATIENCE, async {
            loop {
                let names: Vec<String> = gateway
                    .registry
                    .list()
                    .iter()
                    .map(|t| t.name.clone())
                    .collect();
                if names.iter().any(|n| n == "echo") {
                    return names;
                }
                versions.changed().await.unwrap();
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{over:?}: the app's tools never reached the registry"));
        assert!(
            registered.iter().any(|n| n == "echo"),
            "{over:?}: {registered:?}"
        );
        // And on /mcp, for a legacy client.
        let mcp = rmcp::ServiceExt::serve(
            LegacyClient {
                changes: tokio::sync::mpsc::unbounded_channel().0,
            },
            StreamableHttpClientTransport::from_uri(format!("{}/mcp", gateway.url)),
        )
        .await
        .unwrap();
        let listed = mcp.list_all_tools().await.unwrap();
        assert!(listed.iter().any(|t| t.name == "echo"), "{over:?}");
        // The agent's own call of a tool that asks for input is declined, not stuck.
        let declined = app
            .call_tool("elicit", Some(args(json!({"message": "?"}))), None)
            .await
            .unwrap();
        assert_eq!(
            declined.content[0].as_text().unwrap().text,
            "declined",
            "{over:?}"
        );
        drop(mcp.cancel().await);
        gateway.shutdown().await;
    }
}
