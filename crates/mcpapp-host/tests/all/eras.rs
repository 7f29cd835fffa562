//! Both MCP eras through `/apps/mcp/{appId}`: clients of 2026-07-28 (no `initialize`, no
//! session) and of 2025-11-25, on the one upstream session of an app of either era.

use mcpapp_manifest::Era;
use mcpapp_testkit::{
    AppsDir, Connection, Elicit, Event, HttpApp, Over, TestClient, TestClientBuilder, bin, within,
};
use rmcp::ClientLifecycleMode;
use rmcp::model::{
    CallToolRequestParams, ProtocolVersion, ServerNotification, SubscribeRequestParams,
    SubscriptionFilter,
};
use serde_json::json;

use crate::{Gateway, PATIENCE};

/// A browser-like client that accepts every elicitation with a fixed answer.
fn browser(name: &str) -> TestClientBuilder {
    TestClient::builder()
        .name(name)
        .elicit(Elicit::Accept(json!({"name": "Ada", "agree": true})))
}

/// A client pinned to 2026-07-28 (`server/discover`, no `initialize`).
pub(crate) async fn modern_client(url: &str) -> Connection {
    browser("modern-browser").discover().http(url).await
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
        client.client.cancel().await.unwrap();
        gateway.shutdown().await;
    }
}

#[tokio::test]
async fn an_auto_mode_client_negotiates_2026_on_the_proxy() {
    let apps = AppsDir::new();
    let _server = apps.test_app("fx", "fixture-app", Over::Stdio);
    let gateway = Gateway::start(apps, |_| {}).await;
    let client = browser("modern-browser")
        .lifecycle(ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        })
        .http(&format!("{}/apps/mcp/fx", gateway.url))
        .await;
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    client.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

/// The fixture's view, a resource whose updates the fixture sends on `touch_resource`.
const VIEW: &str = "ui://fixture/view.html";

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

/// One cell of the matrix: a client of `client` era, through the proxy, onto an app of `app`
/// era over `over`: list, call, hear a list change and a resource update, answer an
/// elicitation, cancel a call.
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
    let mut client = match client_era {
        Era::Legacy => browser("legacy-browser").http(&url).await,
        Era::Modern => modern_client(&url).await,
    };
    let peer = client.peer().clone();
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
    let mut listen = match client_era {
        Era::Modern => Some(
            client
                .listen(SubscriptionFilter::builder().tools_list_changed().build())
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}")),
        ),
        Era::Legacy => None,
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
        None => {
            client
                .event(format!("{label}: a list change"), |e| {
                    matches!(e, Event::ToolListChanged).then_some(())
                })
                .await
        }
    }

    // A resource update reaches the client, in its era's way: a legacy client's
    // `resources/subscribe`, a modern client's listen naming the URI (the gateway subscribes,
    // listens or forwards upstream, as the app's era asks).
    let mut resource_listen = match client_era {
        Era::Modern => {
            let filter = SubscriptionFilter::builder()
                .resource_subscription(VIEW)
                .build();
            let listen = client
                .listen(filter.clone())
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(listen.acknowledged(), &filter, "{label}");
            Some(listen)
        }
        Era::Legacy => {
            // The legacy way is what this client is here to test.
            #[allow(deprecated)]
            peer.subscribe(SubscribeRequestParams::new(VIEW))
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            None
        }
    };
    // The gateway's own subscription upstream may follow the client's answer: touch the
    // resource until the app reaches a subscriber, each touch an event the app reports.
    let reached = within(
        format!("{label}: a subscriber of {VIEW} in the app"),
        async {
            loop {
                let touched = app
                    .call_tool("touch_resource", Some(args(json!({"uri": VIEW}))), None)
                    .await
                    .unwrap()
                    .structured_content
                    .unwrap();
                let reached = touched["sessions"].as_u64().unwrap_or(0)
                    + touched["listens"].as_u64().unwrap_or(0);
                if reached > 0 {
                    break reached;
                }
                tokio::task::yield_now().await;
            }
        },
    )
    .await;
    assert_eq!(
        reached, 1,
        "{label}: one upstream subscription for the client"
    );
    match &mut resource_listen {
        Some(listen) => match within(format!("{label}: a resource update"), listen.next())
            .await
            .unwrap()
        {
            Some(ServerNotification::ResourceUpdatedNotification(updated)) => {
                assert_eq!(updated.params.uri, VIEW, "{label}");
            }
            other => panic!("{label}: {other:?}"),
        },
        None => client.expect_updates(&[VIEW]).await,
    }
    drop(resource_listen);

    // An elicitation round trip: the app asks, the client answers, the call completes.
    let elicit =
        CallToolRequestParams::new("elicit").with_arguments(args(json!({"message": "name?"})));
    let answer = within(
        format!("{label}: the elicitation"),
        client.call_tool(elicit),
    )
    .await
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
    drop(client.client.cancel().await);
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
        let mcp = browser("legacy-browser")
            .http(&format!("{}/mcp", gateway.url))
            .await;
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
        drop(mcp.client.cancel().await);
        gateway.shutdown().await;
    }
}
