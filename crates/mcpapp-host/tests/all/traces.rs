//! Traces: a proxied call and an agent call reach the OpenTelemetry SDK's in-memory exporter
//! as nested spans, and the app receives the upstream span's `traceparent` in `_meta`.

use mcpapp_testkit::{AppsDir, bin, eventually};
use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::{Gateway, PATIENCE};

/// The value of a span attribute as text.
fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// Waits until the exporter holds a span named `name` with `method`, and returns it.
async fn finished(exporter: &InMemorySpanExporter, name: &str, method: &str) -> SpanData {
    let mut spans = Vec::new();
    let mut found = None;
    eventually(PATIENCE, async || {
        spans = exporter.get_finished_spans().unwrap();
        found = spans
            .iter()
            .find(|s| s.name == name && attribute(s, "method").as_deref() == Some(method))
            .cloned();
        found.is_some()
    })
    .await;
    found.unwrap_or_else(|| {
        panic!(
            "no {name} span for {method}: {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

fn traceparent_of(span: &SpanData) -> String {
    format!(
        "00-{}-{}-01",
        span.span_context.trace_id(),
        span.span_context.span_id()
    )
}

/// POSTs one message on a raw browser session and returns the JSON reply.
async fn post(url: &str, session: Option<&str>, body: Value) -> (Option<String>, Value) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (session, response.json().await.unwrap())
}

// A current-thread runtime: every task of the gateway runs on this thread, under the
// subscriber set for it here (libraries never install one).
#[tokio::test(flavor = "current_thread")]
async fn proxied_and_agent_calls_are_traced_into_the_apps_meta() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("mcpapp-host-tests")));
    let _default = tracing::subscriber::set_default(subscriber);

    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let url = format!("{}/apps/mcp/fx", gateway.url);
    let (session, _) = post(
        &url,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    let session = session.unwrap();

    // A proxied call: the app sees the upstream span's context.
    let (_, reply) = post(
        &url,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo_meta", "arguments": {}}}),
    )
    .await;
    let meta = &reply["result"]["structuredContent"]["meta"];
    let seen = meta["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));
    let proxied = finished(&exporter, "mcp_proxy_request", "tools/call").await;
    let upstream = finished(&exporter, "mcp_upstream_request", "tools/call").await;
    assert_eq!(
        proxied.parent_span_id,
        SpanId::INVALID,
        "a trace of its own"
    );
    assert_eq!(upstream.parent_span_id, proxied.span_context.span_id());
    assert_eq!(
        upstream.span_context.trace_id(),
        proxied.span_context.trace_id()
    );
    assert_eq!(attribute(&upstream, "app").as_deref(), Some("fx"));
    assert_eq!(attribute(&upstream, "path").as_deref(), Some("proxy"));
    assert_eq!(seen, traceparent_of(&upstream), "{meta}");

    // A traceparent the client sent is the one the app gets.
    let theirs = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (_, reply) = post(
        &url,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "echo_meta", "arguments": {},
                          "_meta": {"traceparent": theirs, "tracestate": "vendor=1"}}}),
    )
    .await;
    let meta = &reply["result"]["structuredContent"]["meta"];
    assert_eq!(meta["traceparent"], theirs, "{reply}");
    assert_eq!(meta["tracestate"], "vendor=1", "{reply}");

    // The agent: chat turn → tool → upstream request, one trace, the app in it.
    let text = reqwest::Client::new()
        .post(format!("{}/apps/chat", gateway.url))
        .header("Content-Type", "application/json")
        .body(json!({"message": "/call fx.echo_meta {}"}).to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let result = text
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .map(|data| serde_json::from_str::<Value>(data).unwrap())
        .find(|event| event["type"] == "tool_result")
        .unwrap_or_else(|| panic!("{text}"));
    let mut turn = None;
    eventually(PATIENCE, async || {
        turn = exporter
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .find(|s| s.name == "chat_turn");
        turn.is_some()
    })
    .await;
    let turn = turn.expect("a chat_turn span");
    let spans = exporter.get_finished_spans().unwrap();
    let tool = spans
        .iter()
        .find(|s| s.name == "mcpapp_tool")
        .expect("a tool span");
    let agent_call = spans
        .iter()
        .find(|s| {
            s.name == "mcp_upstream_request" && attribute(s, "path").as_deref() == Some("agent")
        })
        .expect("the agent's upstream request");
    assert_eq!(tool.parent_span_id, turn.span_context.span_id());
    assert_eq!(agent_call.parent_span_id, tool.span_context.span_id());
    assert_eq!(
        agent_call.span_context.trace_id(),
        turn.span_context.trace_id()
    );
    let output = result["text"].as_str().unwrap_or_default();
    assert!(
        output.contains(&traceparent_of(agent_call)),
        "the app's _meta has no traceparent of the agent's call: {output}"
    );

    gateway.shutdown().await;
    provider.shutdown().unwrap();
}
