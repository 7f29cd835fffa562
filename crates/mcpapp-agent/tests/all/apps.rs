//! The agent against a real MCP App: `grocery-inventory` run by the supervisor over stdio,
//! its tools registered with the prefix `grocery.` by the bridge's live sync, and the offline
//! model's commands (`/tools`, `/call`, `name, key=value`) as whole turns.

use std::sync::Arc;
use std::time::Duration;

use mcpapp_agent::{Agent, AgentConfig, AgentEvent, OfflineModel, TurnRequest};
use mcpapp_bridge::{AppToolSync, ToolRegistry};
use mcpapp_supervisor::Supervisor;
use mcpapp_testkit::{AppsDir, bin, wait_state};
use serde_json::{Value, json};

use crate::{result_text, run, types};

/// A supervised grocery app bridged into an agent's registry.
struct Grocery {
    supervisor: Supervisor,
    registry: ToolRegistry,
    sync: AppToolSync,
    agent: Agent,
    _apps: AppsDir,
}

impl Grocery {
    async fn start() -> Self {
        let apps = AppsDir::new();
        apps.stdio_app(
            "grocery-inventory",
            &bin("grocery-inventory"),
            &["stdio"],
            r#"{"toolNamePrefix": "grocery."}"#,
        );
        let supervisor = Supervisor::builder().build();
        let registry = ToolRegistry::new();
        let sync = AppToolSync::start(&supervisor, &registry);
        supervisor.load(&apps.discover());
        assert!(supervisor.wait_settled(Duration::from_secs(60)).await);
        sync.synced().await;
        let agent = Agent::new(
            registry.clone(),
            Arc::new(OfflineModel::new()),
            AgentConfig::default(),
        );
        Self {
            supervisor,
            registry,
            sync,
            agent,
            _apps: apps,
        }
    }

    async fn shutdown(self) {
        drop(self.sync);
        self.supervisor.shutdown().await;
    }
}

/// The `tool` and `tool_result` events of a turn that made one call.
fn tool_events(events: &[AgentEvent]) -> (&str, &Value, &str, bool) {
    let AgentEvent::Tool { id, name, input } = &events[1] else {
        panic!("no tool event: {events:?}")
    };
    let AgentEvent::ToolResult {
        id: result_id,
        text,
        is_error,
        ..
    } = &events[2]
    else {
        panic!("no tool_result event: {events:?}")
    };
    assert_eq!(result_id, id);
    (name, input, text, *is_error)
}

#[tokio::test]
async fn offline_commands_drive_the_supervised_grocery_app() {
    let grocery = Grocery::start().await;
    let agent = &grocery.agent;

    // `/tools` lists what the sync registered: prefixed, model-visible only.
    let events = run(agent, TurnRequest::message("/tools").in_session("shop-1")).await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    assert_eq!(
        events[0],
        AgentEvent::Session {
            session_id: "shop-1".into()
        }
    );
    let listing = result_text(&events);
    let registered = grocery.registry.list().len();
    assert!(
        listing.starts_with(&format!("[offline mode] {registered} tool(s) available:")),
        "{listing}"
    );
    assert!(listing.contains("\n- grocery.get_stores: "), "{listing}");
    assert!(listing.contains("\n- grocery.get_low_stock: "), "{listing}");
    assert!(!listing.contains("refresh_dashboard"), "{listing}");
    assert_eq!(events[1], AgentEvent::Text { text: listing });

    // `/call grocery.get_stores {}` calls the app.
    let events = run(
        agent,
        TurnRequest::message("/call grocery.get_stores {}").in_session("shop-1"),
    )
    .await;
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
    );
    let (name, input, text, is_error) = tool_events(&events);
    assert_eq!(name, "grocery.get_stores");
    assert_eq!(input, &json!({}));
    assert!(!is_error, "{text}");
    for store in ["Downtown Market", "Uptown Grocery", "Harbor Foods"] {
        assert!(text.contains(store), "{text}");
    }
    let summary = result_text(&events);
    assert!(
        summary.starts_with("[offline mode] grocery.get_stores returned:\n"),
        "{summary}"
    );
    assert!(summary.contains("Downtown Market"), "{summary}");

    // `get_low_stock, storeId=1`: the unprefixed name and a typed argument.
    let truth = grocery
        .supervisor
        .get("grocery-inventory")
        .unwrap()
        .call_tool(
            "get_low_stock",
            Some(json!({"storeId": 1}).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap()
        .structured_content
        .unwrap();
    let rows = truth["items"].as_array().unwrap();
    assert!(!rows.is_empty(), "{truth}");
    assert!(rows.iter().all(|r| r["storeId"] == 1), "{truth}");

    let events = run(
        agent,
        TurnRequest::message("get_low_stock, storeId=1").in_session("shop-1"),
    )
    .await;
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
    );
    let (name, input, text, is_error) = tool_events(&events);
    assert_eq!(name, "grocery.get_low_stock");
    assert_eq!(input, &json!({"storeId": 1}));
    assert!(!is_error, "{text}");
    // The model reads exactly store 1's low-stock rows, once.
    let seen: Value = serde_json::from_str(text).unwrap();
    assert_eq!(seen, truth);
    assert!(text.contains("Organic Milk"), "{text}");
    for row in rows {
        assert!(
            text.contains(row["productName"].as_str().unwrap()),
            "{row} is missing from {text}"
        );
    }
    let summary = result_text(&events);
    assert!(
        summary.starts_with("[offline mode] grocery.get_low_stock returned:\n"),
        "{summary}"
    );
    assert!(summary.contains("Organic Milk"), "{summary}");
    grocery.shutdown().await;
}

#[tokio::test]
async fn app_errors_reach_the_turn_as_failed_tool_results() {
    let grocery = Grocery::start().await;
    let events = run(&grocery.agent, TurnRequest::message("get_stores, id=99")).await;
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
    );
    let (name, input, text, is_error) = tool_events(&events);
    assert_eq!(name, "grocery.get_stores");
    assert_eq!(input, &json!({"id": 99}));
    assert!(is_error);
    assert!(text.starts_with("Error: "), "{text}");
    assert!(result_text(&events).contains("grocery.get_stores failed"));

    // The app stopped: its tools are gone, and the offline model says so.
    let app = grocery.supervisor.get("grocery-inventory").unwrap();
    app.stop().unwrap();
    wait_state(app.watch(), mcpapp_manifest::Lifecycle::Stopped).await;
    grocery.sync.synced().await;
    let events = run(
        &grocery.agent,
        TurnRequest::message("/call grocery.get_stores {}"),
    )
    .await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    assert!(
        result_text(&events).contains("no tool named 'grocery.get_stores'"),
        "{events:?}"
    );
    grocery.shutdown().await;
}
