//! `/mcp` as a full MCP server over several apps, checked with rmcp's client against what the
//! same apps say through their own endpoints (`/apps/mcp/{appId}`, which is faithful to each
//! app): tools with every field, UI resources readable through their rewritten URIs,
//! results unchanged, prompts and completions, progress, elicitation answered by the `/mcp`
//! client, cancellation, list changes and resource updates, and a session that outlives one
//! app's restart.

use mcpapp_manifest::MCP_APP_MIME_TYPE as MCP_APP_MIME;
use mcpapp_testkit::{
    AppsDir, Connection, Elicit, Event, TestClient, TestClientBuilder, bin, wait_watch,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, CompleteRequestParams,
    GetPromptRequestParams, ReadResourceRequestParams, ServerNotification, SubscribeRequestParams,
    SubscriptionFilter, Tool,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::{Gateway, PATIENCE};

/// A client like an MCP Apps host: it declares form elicitation (and, with `ui`, the UI
/// extension) and accepts every elicitation with a fixed form.
fn apps_host(ui: bool) -> TestClientBuilder {
    let mut capabilities = json!({ "elicitation": { "form": {} } });
    if ui {
        capabilities["extensions"] =
            json!({ "io.modelcontextprotocol/ui": { "mimeTypes": [MCP_APP_MIME] } });
    }
    TestClient::builder()
        .name("apps-host")
        .capabilities(serde_json::from_value(capabilities).unwrap())
        .elicit(Elicit::Accept(json!({"name": "Ada", "agree": true})))
}

/// The message of the next elicitation the client was asked; fails if another follows it.
async fn only_elicitation(client: &mut Connection) -> String {
    let asked = client
        .event("an elicitation", |e| match e {
            Event::ElicitationAsked { message, .. } => Some(message),
            _ => None,
        })
        .await;
    while let Ok(event) = client.events.try_recv() {
        assert!(
            !matches!(event, Event::ElicitationAsked { .. }),
            "a second elicitation: {event:?}"
        );
    }
    asked
}

/// A gateway with the fixture (`fx.`) and grocery (`grocery.`) apps.
async fn two_apps() -> Gateway {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    Gateway::start(apps, |_| {}).await
}

async fn connect(gateway: &Gateway, path: &str, ui: bool) -> Connection {
    apps_host(ui).http(&format!("{}{path}", gateway.url)).await
}

fn args(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// A tool as `/mcp` must show a tool of app `fx`: prefixed, its UI in the app's namespace.
fn as_on_mcp(tool: &Tool) -> Value {
    let mut tool = serde_json::to_value(tool).unwrap();
    tool["name"] = json!(format!("fx.{}", tool["name"].as_str().unwrap()));
    if let Some(uri) = tool.pointer_mut("/_meta/ui/resourceUri") {
        *uri = json!(uri.as_str().unwrap().replace("ui://", "ui://fx/"));
    }
    if let Some(uri) = tool.pointer_mut("/_meta/ui~1resourceUri") {
        *uri = json!(uri.as_str().unwrap().replace("ui://", "ui://fx/"));
    }
    tool
}

#[tokio::test]
async fn tools_keep_every_field_and_their_ui_is_read_through_the_rewritten_uri() {
    let gateway = two_apps().await;
    let host = connect(&gateway, "/mcp", true).await;
    let plain = connect(&gateway, "/mcp", false).await;
    let app = connect(&gateway, "/apps/mcp/fx", true).await;

    let on_mcp: Vec<Value> = host
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let own = app.list_all_tools().await.unwrap();
    // Every tool of the app a host may use, as the app wrote it (title, annotations, schemas,
    // `_meta`), under its prefixed name; the malformed one is for no one.
    let mut expected = 0;
    for tool in &own {
        let shown = on_mcp
            .iter()
            .find(|t| t["name"] == format!("fx.{}", tool.name));
        if tool.name == "malformed_visibility_tool" {
            assert!(shown.is_none(), "{shown:?}");
            continue;
        }
        expected += 1;
        assert_eq!(shown, Some(&as_on_mcp(tool)), "tool {}", tool.name);
    }
    let fx_tools = on_mcp
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("fx."))
        .count();
    assert_eq!(fx_tools, expected);
    assert!(on_mcp.iter().any(|t| t["name"] == "grocery.get_stores"));
    let ui_tool = on_mcp
        .iter()
        .find(|t| t["name"] == "fx.show_fixture_ui")
        .unwrap();
    assert_eq!(
        ui_tool["_meta"]["ui"]["resourceUri"],
        "ui://fx/fixture/view.html"
    );

    // A client that is no MCP Apps host sees only what a model may use.
    let plain_names: Vec<String> = plain
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        plain_names.contains(&"fx.echo".to_owned()),
        "{plain_names:?}"
    );
    assert!(
        !plain_names.contains(&"fx.app_only_tool".to_owned()),
        "{plain_names:?}"
    );
    assert!(
        plain
            .call_tool(CallToolRequestParams::new("fx.app_only_tool"))
            .await
            .is_err()
    );
    let called = host
        .call_tool(CallToolRequestParams::new("fx.app_only_tool"))
        .await
        .unwrap();
    assert_eq!(called.structured_content.unwrap()["name"], "app_only_tool");
    // A view of the app knows the tool by the app's own name, which only one app has.
    let by_own_name = host
        .call_tool(CallToolRequestParams::new("app_only_tool"))
        .await
        .unwrap();
    assert_eq!(
        by_own_name.structured_content.unwrap()["name"],
        "app_only_tool"
    );
    assert!(
        plain
            .call_tool(CallToolRequestParams::new("app_only_tool"))
            .await
            .is_err()
    );

    // The UI resource, read where the tool points.
    let read = host
        .read_resource(ReadResourceRequestParams::new("ui://fx/fixture/view.html"))
        .await
        .unwrap();
    let direct = app
        .read_resource(ReadResourceRequestParams::new("ui://fixture/view.html"))
        .await
        .unwrap();
    let read = serde_json::to_value(&read).unwrap();
    let mut direct = serde_json::to_value(&direct).unwrap();
    direct["contents"][0]["uri"] = json!("ui://fx/fixture/view.html");
    assert_eq!(read, direct);
    assert_eq!(read["contents"][0]["mimeType"], MCP_APP_MIME);

    // Listings are namespaced the same way, for every app.
    let resources = host.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert!(uris.contains(&"ui://fx/fixture/view.html"), "{uris:?}");
    assert!(
        uris.iter().any(|u| u.starts_with("ui://grocery/")),
        "{uris:?}"
    );
    let templates = host.list_all_resource_templates().await.unwrap();
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template == "inventory://grocery/stores/{storeId}/summary"),
        "{templates:?}"
    );
    // And a templated resource is read through its namespaced expansion.
    let summary = host
        .read_resource(ReadResourceRequestParams::new(
            "inventory://grocery/stores/1/summary",
        ))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&summary).unwrap()["contents"][0]["uri"],
        "inventory://grocery/stores/1/summary"
    );

    for client in [host, plain, app] {
        client.client.cancel().await.unwrap();
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn results_reach_mcp_clients_exactly_as_the_app_sent_them() {
    let gateway = two_apps().await;
    let host = connect(&gateway, "/mcp", true).await;
    let app = connect(&gateway, "/apps/mcp/fx", true).await;
    let through: CallToolResult = host
        .call_tool(CallToolRequestParams::new("fx.image"))
        .await
        .unwrap();
    let direct: CallToolResult = app
        .call_tool(CallToolRequestParams::new("image"))
        .await
        .unwrap();
    let through = serde_json::to_value(&through).unwrap();
    assert_eq!(through, serde_json::to_value(&direct).unwrap());
    assert_eq!(through["content"][1]["type"], "image", "{through}");
    assert_eq!(through["content"][1]["mimeType"], "image/png", "{through}");
    // A tool error is the app's, not a text made by the gateway.
    let failed = host
        .call_tool(
            CallToolRequestParams::new("fx.huge_output")
                .with_arguments(args(json!({"bytes": u64::MAX}))),
        )
        .await
        .unwrap();
    let failed_direct = app
        .call_tool(
            CallToolRequestParams::new("huge_output")
                .with_arguments(args(json!({"bytes": u64::MAX}))),
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&failed).unwrap(),
        serde_json::to_value(&failed_direct).unwrap()
    );
    host.client.cancel().await.unwrap();
    app.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn prompts_and_completions_are_served_under_the_apps_prefix() {
    let gateway = two_apps().await;
    let host = connect(&gateway, "/mcp", true).await;
    let app = connect(&gateway, "/apps/mcp/grocery", true).await;
    let prompts = host.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(names.contains(&"grocery.draft_supplier_order"), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("grocery.")), "{names:?}");

    let arguments = args(json!({"supplierId": "1", "urgency": "urgent"}));
    let through = host
        .get_prompt(
            GetPromptRequestParams::new("grocery.draft_supplier_order")
                .with_arguments(arguments.clone()),
        )
        .await
        .unwrap();
    let direct = app
        .get_prompt(GetPromptRequestParams::new("draft_supplier_order").with_arguments(arguments))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&through).unwrap(),
        serde_json::to_value(&direct).unwrap()
    );

    let complete = |reference: Value, argument: &Value| -> CompleteRequestParams {
        serde_json::from_value(json!({ "ref": reference, "argument": argument })).unwrap()
    };
    // The same completion through /mcp (prefixed names, namespaced URIs) and directly: the
    // answers must be equal; returns /mcp's.
    let completes_alike = async |through: Value, direct: Value, argument: Value| -> Value {
        let through = host.complete(complete(through, &argument)).await.unwrap();
        let direct = app.complete(complete(direct, &argument)).await.unwrap();
        let through = serde_json::to_value(&through).unwrap();
        assert_eq!(through, serde_json::to_value(&direct).unwrap());
        through
    };
    let through = completes_alike(
        json!({"type": "ref/prompt", "name": "grocery.draft_supplier_order"}),
        json!({"type": "ref/prompt", "name": "draft_supplier_order"}),
        json!({"name": "urgency", "value": "ur"}),
    )
    .await;
    assert!(
        through["completion"]["values"]
            .as_array()
            .unwrap()
            .contains(&json!("urgent"))
    );
    completes_alike(
        json!({"type": "ref/resource", "uri": "inventory://grocery/stores/{storeId}/summary"}),
        json!({"type": "ref/resource", "uri": "inventory://stores/{storeId}/summary"}),
        json!({"name": "storeId", "value": ""}),
    )
    .await;
    host.client.cancel().await.unwrap();
    app.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn progress_elicitation_and_cancellation_travel_between_the_app_and_the_mcp_client() {
    let gateway = two_apps().await;
    let mut host = connect(&gateway, "/mcp", true).await;

    let done = host
        .call_tool(
            CallToolRequestParams::new("fx.progress").with_arguments(args(json!({"steps": 3}))),
        )
        .await
        .unwrap();
    assert_eq!(done.structured_content.unwrap()["steps"], 3);
    let mut progress = Vec::new();
    while progress.len() < 3 {
        let step = host
            .event("a progress notification", |e| match e {
                Event::Progress(p) => Some(p),
                _ => None,
            })
            .await;
        progress.push(step);
    }
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0], "{progress:?}");
    // Under the client's own token (the app saw the gateway's, unique on its session).
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == progress[0].progress_token),
        "{progress:?}"
    );

    let answer = tokio::time::timeout(
        PATIENCE,
        host.call_tool(
            CallToolRequestParams::new("fx.elicit")
                .with_arguments(args(json!({"message": "who are you?"}))),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let text = &answer.content[0].as_text().unwrap().text;
    assert!(
        text.starts_with("accepted") && text.contains("Ada"),
        "{text}"
    );
    assert_eq!(only_elicitation(&mut host).await, "who are you?");

    // A cancelled call is cancelled at the app.
    let handle = host
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(rmcp::model::Request::new(CallToolRequestParams::new(
                "fx.hang",
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    // The call is under way at the app once the hub has it; give the request a moment to
    // get there by asking something else on the same session first.
    host.call_tool(
        CallToolRequestParams::new("fx.echo").with_arguments(args(json!({"message": "x"}))),
    )
    .await
    .unwrap();
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    let counted = host
        .call_tool(
            CallToolRequestParams::new("fx.cancellations")
                .with_arguments(args(json!({"waitMs": 30_000}))),
        )
        .await
        .unwrap();
    assert_eq!(counted.structured_content.unwrap()["count"], 1);
    host.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn list_changes_and_resource_updates_reach_a_session_that_outlives_an_apps_restart() {
    let gateway = two_apps().await;
    let mut host = connect(&gateway, "/mcp", true).await;

    host.call_tool(CallToolRequestParams::new("fx.notify_tools_changed"))
        .await
        .unwrap();
    host.event("a tool list change", |e| {
        matches!(e, Event::ToolListChanged).then_some(())
    })
    .await;
    let tools = host.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "fx.added_tool_1"),
        "{tools:?}"
    );

    host.call_tool(CallToolRequestParams::new("fx.notify_resources_changed"))
        .await
        .unwrap();
    host.event("a resource list change", |e| {
        matches!(e, Event::ResourceListChanged).then_some(())
    })
    .await;

    // A 2025-11-25 session subscribes the legacy way.
    #[allow(deprecated)]
    host.subscribe(SubscribeRequestParams::new("ui://fx/fixture/view.html"))
        .await
        .unwrap();
    let touched = host
        .call_tool(
            CallToolRequestParams::new("fx.touch_resource")
                .with_arguments(args(json!({"uri": "ui://fixture/view.html"}))),
        )
        .await
        .unwrap();
    assert_eq!(touched.structured_content.unwrap()["sessions"], 1);
    let updated = host
        .event("the resource update", |e| match e {
            Event::ResourceUpdated(uri) => Some(uri),
            _ => None,
        })
        .await;
    assert_eq!(updated, "ui://fx/fixture/view.html");

    // Grocery restarts: its prompts go and come back, and the session goes on.
    while host.events.try_recv().is_ok() {}
    let restart = reqwest::Client::new()
        .post(format!("{}/apps/grocery/restart", gateway.url))
        .send()
        .await
        .unwrap();
    assert!(restart.status().is_success(), "{restart:?}");
    host.event("a prompt list change", |e| {
        matches!(e, Event::PromptListChanged).then_some(())
    })
    .await;
    let grocery = gateway.supervisor.get("grocery").unwrap().watch();
    wait_watch(grocery, "grocery to run again after its restart", |s| {
        s.restart_count >= 1 && s.state.lifecycle == mcpapp_manifest::Lifecycle::Running
    })
    .await;
    let stores = host
        .call_tool(CallToolRequestParams::new("grocery.get_stores").with_arguments(args(json!({}))))
        .await
        .unwrap();
    assert_ne!(stores.is_error, Some(true), "{stores:?}");
    host.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

/// The same host, pinned to 2026-07-28 (no session: every request on its own).
async fn connect_modern(gateway: &Gateway) -> Connection {
    apps_host(true)
        .discover()
        .http(&format!("{}/mcp", gateway.url))
        .await
}

#[tokio::test]
async fn a_2026_client_gets_the_same_server_with_input_rounds_and_listens() {
    let gateway = two_apps().await;
    let mut modern = connect_modern(&gateway).await;
    let legacy = connect(&gateway, "/mcp", true).await;

    // The same tools, in the client's era.
    let names = |tools: Vec<Tool>| -> Vec<String> {
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(
        names(modern.list_all_tools().await.unwrap()),
        names(legacy.list_all_tools().await.unwrap())
    );

    // An elicitation of the app is an input round for this client, answered by its handler.
    let answer = tokio::time::timeout(
        PATIENCE,
        modern.call_tool(
            CallToolRequestParams::new("fx.elicit")
                .with_arguments(args(json!({"message": "and you?"}))),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let text = &answer.content[0].as_text().unwrap().text;
    assert!(
        text.starts_with("accepted") && text.contains("Ada"),
        "{text}"
    );
    assert_eq!(only_elicitation(&mut modern).await, "and you?");

    // A listen hears a namespaced resource's updates under the client's URI.
    let mut listen = modern
        .listen(
            SubscriptionFilter::builder()
                .resource_subscription("ui://fx/fixture/view.html")
                .build(),
        )
        .await
        .unwrap();
    assert_eq!(
        listen.acknowledged(),
        &SubscriptionFilter::builder()
            .resource_subscription("ui://fx/fixture/view.html")
            .build()
    );
    let touched = modern
        .call_tool(
            CallToolRequestParams::new("fx.touch_resource")
                .with_arguments(args(json!({"uri": "ui://fixture/view.html"}))),
        )
        .await
        .unwrap();
    // A legacy app: the gateway's listen is its subscription on the app's one session.
    assert_eq!(touched.structured_content.unwrap()["sessions"], 1);
    let next = tokio::time::timeout(PATIENCE, listen.next())
        .await
        .unwrap()
        .unwrap();
    match next {
        Some(ServerNotification::ResourceUpdatedNotification(updated)) => {
            assert_eq!(updated.params.uri, "ui://fx/fixture/view.html");
        }
        other => panic!("{other:?}"),
    }
    listen.cancel().await.unwrap();
    modern.client.cancel().await.unwrap();
    legacy.client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn an_own_tool_name_two_apps_share_must_be_called_by_its_mcp_name() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    apps.stdio_app(
        "fy",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fy."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let host = connect(&gateway, "/mcp", true).await;
    let ambiguous = host
        .call_tool(CallToolRequestParams::new("app_only_tool"))
        .await;
    let why = ambiguous.unwrap_err().to_string();
    assert!(
        why.contains("fx.app_only_tool or fy.app_only_tool"),
        "{why}"
    );
    for name in ["fx.app_only_tool", "fy.app_only_tool"] {
        let called = host
            .call_tool(CallToolRequestParams::new(name))
            .await
            .unwrap();
        assert_eq!(called.structured_content.unwrap()["name"], "app_only_tool");
    }
    host.client.cancel().await.unwrap();
    gateway.shutdown().await;
}
