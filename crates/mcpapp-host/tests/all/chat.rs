//! `POST /apps/chat`: the event stream, a UI tool's whole result on it, UI events in the
//! prompt, and bad requests.

use std::sync::{Arc, Mutex};

use axum::routing::post;
use futures::future::BoxFuture;
use mcpapp_agent::{OpenAiConfig, OpenAiModel};
use mcpapp_bridge::{Tool, ToolContext, ToolOutput, ToolSource};
use mcpapp_testkit::AppsDir;
use serde_json::{Value, json};

use crate::Gateway;

/// Posts to /apps/chat and parses the `data:` frames.
async fn chat(gateway: &Gateway, body: Value) -> (u16, String, Vec<Value>) {
    let response = reqwest::Client::new()
        .post(format!("{}/apps/chat", gateway.url))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let events = text
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    (status, content_type, events)
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

struct LowStock(Value);

impl Tool for LowStock {
    fn name(&self) -> &str {
        "inventory.lookup"
    }
    fn description(&self) -> &str {
        "Look up a product by SKU"
    }
    fn input_schema(&self) -> &Value {
        &self.0
    }
    fn invoke(&self, arguments: String, _ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move { ToolOutput::text(format!("found {arguments}")) })
    }
}

#[tokio::test]
async fn offline_chat_streams_the_full_event_sequence() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    gateway
        .registry
        .register(
            "test",
            ToolSource::Native,
            vec![Arc::new(LowStock(json!({"type": "object"})))],
        )
        .unwrap();
    let (status, content_type, events) = chat(
        &gateway,
        json!({"message": "inventory.lookup, sku=ABC-001", "sessionId": "apps-session-1"}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
    );
    assert_eq!(events[0]["sessionId"], "apps-session-1");
    assert_eq!(events[1]["name"], "inventory.lookup");
    assert_eq!(events[1]["input"]["sku"], "ABC-001");
    assert_eq!(events[2]["id"], events[1]["id"]);
    assert!(events[2]["text"].as_str().unwrap().contains("ABC-001"));
    assert_eq!(events[4]["isError"], false);
    gateway.shutdown().await;
}

#[tokio::test]
async fn empty_and_malformed_requests_get_400_with_a_json_error() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    let client = reqwest::Client::new();
    for body in ["", "not json", r#"{"message": "   "}"#, "{}"] {
        let response = client
            .post(format!("{}/apps/chat", gateway.url))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{body:?}");
        let error: Value = response.json().await.unwrap();
        assert!(error["error"].is_string(), "{body:?}: {error}");
    }
    gateway.shutdown().await;
}

/// A scripted OpenAI-compatible server that answers with a short streamed text and keeps the
/// requests it received.
async fn scripted_model() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |body: axum::Json<Value>| {
            let recorder = recorder.clone();
            async move {
                recorder.lock().unwrap().push(body.0);
                let chunk = |delta: Value, finish: Value| {
                    format!(
                        "data: {}\n\n",
                        json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                    )
                };
                let body = [
                    chunk(json!({"role": "assistant", "content": "已收到"}), Value::Null),
                    chunk(json!({}), json!("stop")),
                    "data: [DONE]\n\n".to_owned(),
                ]
                .concat();
                ([("content-type", "text/event-stream")], body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test]
async fn ui_events_are_written_into_the_prompt_of_a_real_model() {
    let (base, seen) = scripted_model().await;
    let model = OpenAiModel::new(OpenAiConfig::new("scripted").with_base_url(base)).unwrap();
    let gateway = Gateway::start_with_model(AppsDir::new(), Arc::new(model), |_| {}).await;
    let (status, _, events) = chat(
        &gateway,
        json!({
            "message": "what now?",
            "sessionId": "apps-session-1",
            "appEvents": [{"tool": "inventory.lookup", "args": {"sku": "ABC-001"}, "resultText": "3 in stock"}]
        }),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    assert_eq!(events[1]["text"], "已收到");
    assert_eq!(events[2]["text"], "已收到");
    let requests = seen.lock().unwrap().clone();
    let prompt = requests[0]["messages"].to_string();
    assert!(prompt.contains("[UI events]"), "{prompt}");
    assert!(
        prompt.contains("inventory.lookup")
            && prompt.contains("3 in stock")
            && prompt.contains("what now?"),
        "{prompt}"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn offline_chat_calls_a_real_app_tool() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery",
        &mcpapp_testkit::bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let (status, _, events) = chat(&gateway, json!({"message": "get_low_stock, storeId=1"})).await;
    assert_eq!(status, 200);
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
    );
    assert_eq!(events[1]["name"], "grocery.get_low_stock");
    assert_eq!(events[1]["input"], json!({"storeId": 1}));
    assert_eq!(events[2]["isError"], false);
    assert!(
        events[2]["text"]
            .as_str()
            .unwrap()
            .contains("Downtown Market"),
        "{}",
        events[2]
    );
    // The dashboard tool's structured content rides along for views, not in the model text.
    let (_, _, events) = chat(
        &gateway,
        json!({"message": "/call grocery.show_store_inventory_dashboard {}"}),
    )
    .await;
    assert!(
        events[2]["structuredContent"]["stores"].is_array(),
        "{}",
        events[2]
    );
    assert!(
        !events[2]["text"].as_str().unwrap().contains("\"stores\""),
        "{}",
        events[2]
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_ui_tools_result_reaches_the_chat_stream_whole_and_the_model_as_text() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &mcpapp_testkit::bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let direct = gateway
        .supervisor
        .get("fx")
        .unwrap()
        .call_tool("show_media", None, None)
        .await
        .unwrap();
    let direct = serde_json::to_value(&direct).unwrap();
    let (status, _, events) = chat(
        &gateway,
        json!({"message": "/call fx.show_media {}", "sessionId": "media-1"}),
    )
    .await;
    assert_eq!(status, 200);
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    // The view's copy: exactly what the app returns, blocks, _meta and all.
    assert_eq!(result["callToolResult"], direct);
    assert_eq!(result["callToolResult"]["content"][2]["type"], "audio");
    // The model's copy: text and placeholders, no base64.
    let text = result["text"].as_str().unwrap();
    assert!(text.contains("[audio: audio/wav, 60 bytes]"), "{text}");
    let audio = direct["content"][2]["data"].as_str().unwrap();
    assert!(!text.contains(&audio[..12]), "{text}");

    // A tool without a UI sends no whole result.
    let (_, _, events) = chat(
        &gateway,
        json!({"message": "/call fx.image {}", "sessionId": "media-1"}),
    )
    .await;
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert!(result.get("callToolResult").is_none(), "{result}");
    gateway.shutdown().await;
}
