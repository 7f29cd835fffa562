//! `/mcp`: every model-visible app tool under its registered name, for external clients of
//! both protocol eras (legacy sessions and stateless 2026-07-28 requests with
//! `subscriptions/listen`).

use mcpapp_testkit::{AppsDir, Connection, Event, TestClient, bin, wait_watch};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    ServerNotification, SubscriptionFilter,
};
use rmcp::service::{RoleClient, RunningService, Subscription};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::{Gateway, PATIENCE};

#[tokio::test]
async fn mcp_lists_prefixed_model_tools_and_calls_them() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let client = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/mcp",
            gateway.url
        )))
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"grocery.get_stores") && names.contains(&"grocery.reset_inventory"),
        "{names:?}"
    );
    // App-only tools are for views, not for models.
    assert!(
        !names.iter().any(|n| n.ends_with("refresh_dashboard")),
        "{names:?}"
    );
    let result = client
        .call_tool(
            CallToolRequestParams::new("grocery.get_stores")
                .with_arguments(json!({"id": 1}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    assert!(
        result.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("Downtown Market")
    );
    let unknown = client
        .call_tool(CallToolRequestParams::new("grocery.nope"))
        .await;
    assert!(unknown.is_err());
    client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn mcp_and_the_app_proxy_keep_separate_surfaces() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "inventory-app",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "inventory."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let aggregate = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/mcp",
            gateway.url
        )))
        .await
        .unwrap();
    let proxy = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/apps/mcp/inventory-app",
            gateway.url
        )))
        .await
        .unwrap();
    let aggregate_names: Vec<String> = aggregate
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let proxy_names: Vec<String> = proxy
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(aggregate_names.contains(&"inventory.echo_session".to_owned()));
    assert!(!aggregate_names.contains(&"echo_session".to_owned()));
    assert!(!aggregate_names.iter().any(|n| n.contains("app_only_tool")));
    assert!(
        proxy_names.contains(&"echo_session".to_owned())
            && proxy_names.contains(&"app_only_tool".to_owned())
    );
    assert!(!proxy_names.iter().any(|n| n.starts_with("inventory.")));
    aggregate.cancel().await.unwrap();
    proxy.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn mcp_clients_hear_when_the_tool_set_changes() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let mut client = TestClient::builder()
        .http(&format!("{}/mcp", gateway.url))
        .await;
    let before = client.list_all_tools().await.unwrap().len();
    client.call("fx.notify_tools_changed", json!({})).await;
    tool_list_changed(&mut client).await;
    let after = client.list_all_tools().await.unwrap();
    assert!(
        after.iter().any(|t| t.name == "fx.added_tool_1"),
        "{after:?}"
    );
    assert_eq!(after.len(), before + 1);
    client.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

/// Waits for `notifications/tools/list_changed` on a legacy session.
async fn tool_list_changed(client: &mut Connection) {
    client
        .event("a tool list change", |e| {
            matches!(e, Event::ToolListChanged).then_some(())
        })
        .await;
}

/// A gateway with the fixture app over stdio, its tools prefixed `fx.`.
async fn fixture_gateway() -> Gateway {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    Gateway::start(apps, |_| {}).await
}

/// A client of `/mcp` started in `lifecycle`, declaring no capabilities.
async fn client_in(
    gateway: &Gateway,
    lifecycle: ClientLifecycleMode,
) -> RunningService<RoleClient, ClientConfig> {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("aggregate-test", "0.1.0"),
    )
    .serve_with_lifecycle(
        StreamableHttpClientTransport::from_uri(format!("{}/mcp", gateway.url)),
        lifecycle,
    )
    .await
    .unwrap()
}

/// A client pinned to 2026-07-28: `server/discover`, then stateless requests only.
async fn modern_client(gateway: &Gateway) -> RunningService<RoleClient, ClientConfig> {
    client_in(
        gateway,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
}

async fn listen_for_tools(client: &RunningService<RoleClient, ClientConfig>) -> Subscription {
    client
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap()
}

/// Waits for the next notification on `subscription` and checks it is a tool list change.
async fn expect_tool_list_change(subscription: &mut Subscription) {
    let next = tokio::time::timeout(PATIENCE, subscription.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            next,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{next:?}"
    );
}

/// POSTs one 2026-07-28 request to `/mcp` as a modern client writes it (the `_meta` keys
/// and the SEP-2243 headers) and returns the status, whether a session id came back, and
/// every JSON message of the reply.
async fn modern_post(
    gateway: &Gateway,
    method: &str,
    mut params: Value,
) -> (u16, bool, Vec<Value>) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    });
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", gateway.url))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("Mcp-Name", name);
    }
    let response = request
        .body(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let session = response.headers().contains_key("mcp-session-id");
    let text = response.text().await.unwrap();
    let messages = if text.trim_start().starts_with('{') {
        vec![serde_json::from_str(&text).unwrap()]
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    };
    (status, session, messages)
}

#[tokio::test]
async fn mcp_answers_2026_requests_on_the_wire_without_a_session() {
    let gateway = fixture_gateway().await;

    let (status, session, messages) = modern_post(&gateway, "server/discover", json!({})).await;
    assert_eq!(status, 200, "{messages:?}");
    assert!(!session, "a 2026 reply must not mint a session");
    let discover = &messages.last().unwrap()["result"];
    assert_eq!(discover["resultType"], "complete", "{discover}");
    let versions = discover["supportedVersions"].as_array().unwrap();
    assert!(
        versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-11-25")),
        "{discover}"
    );
    assert_eq!(
        discover["capabilities"]["tools"]["listChanged"], true,
        "{discover}"
    );
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({"name": "mcpapp-gateway", "title": "mcpapp", "version": env!("CARGO_PKG_VERSION")}),
        "{discover}"
    );
    assert!(discover["instructions"].is_string(), "{discover}");
    assert!(discover["ttlMs"].is_u64(), "{discover}");
    assert!(discover["cacheScope"].is_string(), "{discover}");

    let (status, session, messages) = modern_post(&gateway, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{messages:?}");
    assert!(!session);
    let list = &messages.last().unwrap()["result"];
    assert_eq!(list["resultType"], "complete", "{list}");
    assert!(
        list["ttlMs"].is_u64() && list["cacheScope"].is_string(),
        "{list}"
    );
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"fx.echo"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("app_only_tool")),
        "{names:?}"
    );

    let (status, _, messages) = modern_post(
        &gateway,
        "tools/call",
        json!({"name": "fx.echo", "arguments": {"message": "over 2026"}}),
    )
    .await;
    assert_eq!(status, 200, "{messages:?}");
    let call = &messages.last().unwrap()["result"];
    assert_eq!(call["resultType"], "complete", "{call}");
    assert!(
        call["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("over 2026"),
        "{call}"
    );
    assert_eq!(call["structuredContent"]["message"], "over 2026", "{call}");

    // A failing tool is a result with isError, an unknown one a JSON-RPC error.
    let (status, _, messages) = modern_post(
        &gateway,
        "tools/call",
        json!({"name": "fx.huge_output", "arguments": {"bytes": u64::MAX}}),
    )
    .await;
    assert_eq!(status, 200, "{messages:?}");
    let failed = &messages.last().unwrap()["result"];
    assert_eq!(failed["isError"], true, "{failed}");
    assert!(
        failed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("at most"),
        "{failed}"
    );
    let (_, _, messages) = modern_post(
        &gateway,
        "tools/call",
        json!({"name": "fx.nope", "arguments": {}}),
    )
    .await;
    let error = &messages.last().unwrap()["error"];
    assert_eq!(error["code"], -32602, "{messages:?}");
    assert!(
        error["message"].as_str().unwrap().contains("fx.nope"),
        "{error}"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_client_pinned_to_2026_lists_calls_and_hears_tool_changes_over_listen() {
    let gateway = fixture_gateway().await;
    let client = modern_client(&gateway).await;
    let server = client.peer_info().unwrap();
    assert_eq!(server.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(
        server
            .capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed),
        Some(true)
    );
    let info = server.server_info.as_ref().unwrap();
    assert_eq!(
        (info.name.as_str(), info.version.as_str()),
        ("mcpapp-gateway", env!("CARGO_PKG_VERSION"))
    );

    let before = client.list_all_tools().await.unwrap();
    assert!(before.iter().any(|t| t.name == "fx.echo"), "{before:?}");
    let echoed = client
        .call_tool(
            CallToolRequestParams::new("fx.echo")
                .with_arguments(json!({"message": "hi"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(echoed.is_error, Some(true));
    assert!(
        echoed.content[0].as_text().unwrap().text.starts_with("hi"),
        "{echoed:?}"
    );
    let failed = client
        .call_tool(
            CallToolRequestParams::new("fx.huge_output")
                .with_arguments(json!({"bytes": u64::MAX}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert!(
        client
            .call_tool(CallToolRequestParams::new("fx.nope"))
            .await
            .is_err()
    );

    // Asked for everything, the gateway acknowledges what it will send: every list change
    // (its lists merge every app's), and the app's resource under its namespaced URI.
    let mut subscription = client
        .listen(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .resource_subscription("ui://fx/fixture/view.html")
                .build(),
        )
        .await
        .unwrap();
    assert_eq!(
        subscription.acknowledged(),
        &SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .resource_subscription("ui://fx/fixture/view.html")
            .build()
    );
    client
        .call_tool(CallToolRequestParams::new("fx.notify_tools_changed"))
        .await
        .unwrap();
    expect_tool_list_change(&mut subscription).await;
    let after = client.list_all_tools().await.unwrap();
    assert!(
        after.iter().any(|t| t.name == "fx.added_tool_1"),
        "{after:?}"
    );
    assert_eq!(after.len(), before.len() + 1);
    subscription.cancel().await.unwrap();
    client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn an_auto_client_negotiates_2026_on_mcp() {
    let gateway = fixture_gateway().await;
    let client = client_in(
        &gateway,
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    )
    .await;
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "fx.echo"), "{tools:?}");
    client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn one_change_reaches_legacy_sessions_and_every_listen() {
    let gateway = fixture_gateway().await;
    let mut legacy = TestClient::builder()
        .http(&format!("{}/mcp", gateway.url))
        .await;
    // Two clients, so the two listens may well carry the same request id.
    let first = modern_client(&gateway).await;
    let second = modern_client(&gateway).await;
    let mut first_listen = listen_for_tools(&first).await;
    let mut second_listen = listen_for_tools(&second).await;
    first
        .call_tool(CallToolRequestParams::new("fx.notify_tools_changed"))
        .await
        .unwrap();
    expect_tool_list_change(&mut first_listen).await;
    expect_tool_list_change(&mut second_listen).await;
    tool_list_changed(&mut legacy).await;

    first_listen.cancel().await.unwrap();
    second_listen.cancel().await.unwrap();
    for client in [first, second] {
        client.cancel().await.unwrap();
    }
    legacy.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

/// Records the open-listen count of every `/mcp` event that reports it, in order.
struct ListenCounts(watch::Sender<Vec<u64>>);

impl<S: tracing::Subscriber> Layer<S> for ListenCounts {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        struct Count(Option<u64>);
        impl tracing::field::Visit for Count {
            fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
                if field.name() == "listens" {
                    self.0 = Some(value);
                }
            }
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
        }
        if event.metadata().target() != "mcpapp_host::aggregate::listen" {
            return;
        }
        let mut count = Count(None);
        event.record(&mut count);
        if let Some(n) = count.0 {
            self.0.send_modify(|counts| counts.push(n));
        }
    }
}

/// Waits until the latest reported count of open listens is `n`.
async fn open_listens_reach(counts: &watch::Receiver<Vec<u64>>, n: u64) {
    let what = format!("open listens to reach {n}");
    wait_watch(counts.clone(), what, |c| c.last() == Some(&n)).await;
}

#[tokio::test]
async fn a_closed_listen_leaves_the_endpoint() {
    // The test runs on one thread, so the gateway's events reach this thread's subscriber.
    // tracing caches each callsite's interest for the whole process, and while only one
    // dispatcher exists it asks the default of whichever thread reaches the callsite first:
    // a sibling test without a subscriber would switch our events off for good. A second
    // live dispatcher makes it ask all of them; the rebuild once the gateway runs repairs a
    // callsite registered while ours were being added.
    let _anchor = tracing::Dispatch::new(tracing_subscriber::registry());
    let (counts_tx, counts) = watch::channel(Vec::new());
    let _capture = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(ListenCounts(counts_tx)),
    );
    let gateway = fixture_gateway().await;
    tracing::callsite::rebuild_interest_cache();
    let client = modern_client(&gateway).await;
    let mut leaving = listen_for_tools(&client).await;
    open_listens_reach(&counts, 1).await;
    let mut staying = listen_for_tools(&client).await;
    open_listens_reach(&counts, 2).await;

    leaving.cancel().await.unwrap();
    open_listens_reach(&counts, 1).await;
    // The one left still hears changes; the closed one is not tried again.
    client
        .call_tool(CallToolRequestParams::new("fx.notify_tools_changed"))
        .await
        .unwrap();
    expect_tool_list_change(&mut staying).await;
    staying.cancel().await.unwrap();
    open_listens_reach(&counts, 0).await;
    assert_eq!(*counts.borrow(), vec![1, 2, 1, 0]);
    client.cancel().await.unwrap();
    gateway.shutdown().await;
}

/// The error of a 2026-07-28 `tools/call` of `name` on `/mcp`.
async fn call_error(gateway: &Gateway, name: &str) -> Value {
    let (_, _, messages) = modern_post(
        gateway,
        "tools/call",
        json!({"name": name, "arguments": {}}),
    )
    .await;
    messages.last().unwrap()["error"].clone()
}

#[tokio::test]
async fn a_name_no_app_lists_goes_to_the_one_app_without_a_prefix() {
    let apps = AppsDir::new();
    apps.stdio_app("bare", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    // The app's own answer: the call reached it.
    let error = call_error(&gateway, "not_listed").await;
    assert_eq!(error["message"], "tool not found", "{error}");
    // A tool the app lists for views only stays unknown to a client without the extension.
    let error = call_error(&gateway, "app_only_tool").await;
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("Unknown tool: app_only_tool"),
        "{error}"
    );
    gateway.shutdown().await;

    // With two apps without a prefix, nobody can tell whose it would be.
    let apps = AppsDir::new();
    apps.stdio_app("one", &bin("fixture-app"), &["stdio"], "{}");
    apps.stdio_app("two", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let error = call_error(&gateway, "not_listed").await;
    assert_eq!(error["message"], "Unknown tool: not_listed", "{error}");
    gateway.shutdown().await;
}
