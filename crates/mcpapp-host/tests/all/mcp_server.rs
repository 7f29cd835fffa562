//! `/mcp` as a full MCP server over several apps, checked with rmcp's client against what the
//! same apps say through their own endpoints (`/apps/mcp/{appId}`, which is faithful to each
//! app): tools with every field, UI resources readable through their rewritten URIs,
//! results unchanged, prompts and completions, progress, elicitation answered by the `/mcp`
//! client, cancellation, list changes and resource updates, and a session that outlives one
//! app's restart.

use std::sync::{Arc, Mutex};

use mcpapp_manifest::MCP_APP_MIME_TYPE as MCP_APP_MIME;
use mcpapp_testkit::{AppsDir, bin};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    CompleteRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction,
    GetPromptRequestParams, Implementation, ProgressNotificationParam, ProtocolVersion,
    ReadResourceRequestParams, ResourceUpdatedNotificationParam, ServerNotification,
    SubscribeRequestParams, SubscriptionFilter, Tool,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RoleClient, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::{Gateway, PATIENCE};

/// What a test client heard, and a bell for every change.
#[derive(Default)]
struct Heard {
    progress: Mutex<Vec<ProgressNotificationParam>>,
    updated: Mutex<Vec<String>>,
    tools_changed: Mutex<u32>,
    resources_changed: Mutex<u32>,
    prompts_changed: Mutex<u32>,
    elicitations: Mutex<Vec<String>>,
    bell: Notify,
}

impl Heard {
    /// Waits until `done` holds of what was heard.
    async fn until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let waited = tokio::time::timeout(PATIENCE, async {
            loop {
                let rung = self.bell.notified();
                tokio::pin!(rung);
                rung.as_mut().enable();
                if done(self) {
                    return;
                }
                rung.await;
            }
        })
        .await;
        assert!(waited.is_ok(), "never heard {what}");
    }
}

/// A client like an MCP Apps host: it declares the UI extension and form elicitation, and
/// answers every elicitation with a fixed form.
#[derive(Clone)]
struct AppsHost {
    heard: Arc<Heard>,
    ui: bool,
}

impl AppsHost {
    fn new(ui: bool) -> Self {
        Self {
            heard: Arc::default(),
            ui,
        }
    }
}

impl rmcp::ClientHandler for AppsHost {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = json!({ "elicitation": { "form": {} } });
        if self.ui {
            capabilities["extensions"] =
                json!({ "io.modelcontextprotocol/ui": { "mimeTypes": [MCP_APP_MIME] } });
        }
        let capabilities: ClientCapabilities = serde_json::from_value(capabilities).unwrap();
        ClientConfig::new(capabilities, Implementation::new("apps-host", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let asked = serde_json::to_value(&request).unwrap();
        self.heard
            .elicitations
            .lock()
            .unwrap()
            .push(asked["message"].as_str().unwrap_or_default().to_owned());
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({"name": "Ada", "agree": true}));
        Ok(result)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.heard.progress.lock().unwrap().push(params);
        self.heard.bell.notify_waiters();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.heard.updated.lock().unwrap().push(params.uri);
        self.heard.bell.notify_waiters();
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        *self.heard.tools_changed.lock().unwrap() += 1;
        self.heard.bell.notify_waiters();
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        *self.heard.resources_changed.lock().unwrap() += 1;
        self.heard.bell.notify_waiters();
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        *self.heard.prompts_changed.lock().unwrap() += 1;
        self.heard.bell.notify_waiters();
    }
}

type Client = RunningService<RoleClient, AppsHost>;

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

async fn connect(gateway: &Gateway, path: &str, ui: bool) -> Client {
    AppsHost::new(ui)
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}{path}",
            gateway.url
        )))
        .await
        .unwrap()
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
        client.cancel().await.unwrap();
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
    host.cancel().await.unwrap();
    app.cancel().await.unwrap();
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
    host.cancel().await.unwrap();
    app.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn progress_elicitation_and_cancellation_travel_between_the_app_and_the_mcp_client() {
    let gateway = two_apps().await;
    let host = connect(&gateway, "/mcp", true).await;
    let heard = host.service().heard.clone();

    let done = host
        .call_tool(
            CallToolRequestParams::new("fx.progress").with_arguments(args(json!({"steps": 3}))),
        )
        .await
        .unwrap();
    assert_eq!(done.structured_content.unwrap()["steps"], 3);
    heard
        .until("three progress notifications", |h| {
            h.progress.lock().unwrap().len() >= 3
        })
        .await;
    let progress = heard.progress.lock().unwrap().clone();
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
    assert_eq!(*heard.elicitations.lock().unwrap(), ["who are you?"]);

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
    host.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn list_changes_and_resource_updates_reach_a_session_that_outlives_an_apps_restart() {
    let gateway = two_apps().await;
    let host = connect(&gateway, "/mcp", true).await;
    let heard = host.service().heard.clone();

    host.call_tool(CallToolRequestParams::new("fx.notify_tools_changed"))
        .await
        .unwrap();
    heard
        .until("a tool list change", |h| {
            *h.tools_changed.lock().unwrap() >= 1
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
    heard
        .until("a resource list change", |h| {
            *h.resources_changed.lock().unwrap() >= 1
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
    heard
        .until("the resource update", |h| {
            !h.updated.lock().unwrap().is_empty()
        })
        .await;
    assert_eq!(
        *heard.updated.lock().unwrap(),
        ["ui://fx/fixture/view.html"]
    );

    // Grocery restarts: its prompts go and come back, and the session goes on.
    let before = *heard.prompts_changed.lock().unwrap();
    let restart = reqwest::Client::new()
        .post(format!("{}/apps/grocery/restart", gateway.url))
        .send()
        .await
        .unwrap();
    assert!(restart.status().is_success(), "{restart:?}");
    heard
        .until("a prompt list change", |h| {
            *h.prompts_changed.lock().unwrap() > before
        })
        .await;
    let mut grocery = gateway.supervisor.get("grocery").unwrap().watch();
    tokio::time::timeout(
        PATIENCE,
        grocery.wait_for(|s| {
            s.restart_count >= 1 && s.state.lifecycle == mcpapp_manifest::Lifecycle::Running
        }),
    )
    .await
    .unwrap()
    .unwrap();
    let stores = host
        .call_tool(CallToolRequestParams::new("grocery.get_stores").with_arguments(args(json!({}))))
        .await
        .unwrap();
    assert_ne!(stores.is_error, Some(true), "{stores:?}");
    host.cancel().await.unwrap();
    gateway.shutdown().await;
}

/// The same host, pinned to 2026-07-28 (no session: every request on its own).
async fn connect_modern(gateway: &Gateway) -> Client {
    AppsHost::new(true)
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(format!("{}/mcp", gateway.url)),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn a_2026_client_gets_the_same_server_with_input_rounds_and_listens() {
    let gateway = two_apps().await;
    let modern = connect_modern(&gateway).await;
    let legacy = connect(&gateway, "/mcp", true).await;
    let heard = modern.service().heard.clone();

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
    assert_eq!(*heard.elicitations.lock().unwrap(), ["and you?"]);

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
    modern.cancel().await.unwrap();
    legacy.cancel().await.unwrap();
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
    host.cancel().await.unwrap();
    gateway.shutdown().await;
}
