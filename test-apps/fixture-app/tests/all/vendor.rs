//! The vendor fields of `tools/list`, checked on the raw bytes over stdio and over HTTP (a typed
//! rmcp client would drop them).

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use mcpapp_testkit::within;

use crate::support::{Fixture, fixture_command};

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-bytes", "version": "1"}}})
}

fn assert_vendor_fields(result: &Value) {
    assert_eq!(result["x-fixture-page"], 1, "{result}");
    let tools = result["tools"].as_array().expect("tools array");
    assert!(tools.len() >= 20, "{}", tools.len());
    for tool in tools {
        assert_eq!(tool["x-vendor"], json!({"fixture": true}), "{tool}");
        assert!(tool["name"].is_string());
    }
    assert!(
        result.get("resultType").is_none(),
        "no 2026 fields for a 2025 peer"
    );
}

#[tokio::test]
async fn stdio_tools_list_carries_vendor_fields() {
    let (_fixture, stdout, mut stdin) = Fixture::spawn(fixture_command(&["stdio"]));
    let mut lines = BufReader::new(stdout).lines();
    let mut next_message = async || -> Value {
        let line = within("a stdout line", lines.next_line())
            .await
            .unwrap()
            .expect("stdout open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    for message in [
        initialize(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    let first = next_message().await;
    assert_eq!(first["id"], 1);
    assert_eq!(first["result"]["protocolVersion"], "2025-11-25");
    let listed = next_message().await;
    assert_eq!(listed["id"], 2);
    assert_vendor_fields(&listed["result"]);
    // Other results are untouched.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}\n")
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let resources = next_message().await;
    assert_eq!(resources["id"], 3);
    assert!(resources["result"].get("x-fixture-page").is_none());
}

/// POSTs one JSON-RPC message and returns the JSON-RPC messages of the SSE (or JSON) reply.
async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    message: &Value,
) -> (reqwest::header::HeaderMap, Vec<Value>) {
    let mut request = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(message);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let response = within("POST /mcp", request.send()).await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let headers = response.headers().clone();
    let body = within("the response body", response.text()).await.unwrap();
    let messages = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    (headers, messages)
}

#[tokio::test]
async fn http_tools_list_carries_vendor_fields() {
    let fixture = Fixture::http(&[]).await;
    let http = reqwest::Client::new();
    let (headers, init) = post(&http, &fixture.mcp_url, None, &initialize()).await;
    assert_eq!(init[0]["result"]["serverInfo"]["name"], "fixture-app");
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let accepted = within(
        "notifications/initialized",
        http.post(&fixture.mcp_url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(accepted.status(), 202);
    let (_, listed) = post(
        &http,
        &fixture.mcp_url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], 2);
    assert_vendor_fields(&listed[0]["result"]);
    let (_, called) = post(
        &http,
        &fixture.mcp_url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": "raw"}}}),
    )
    .await;
    assert_eq!(
        called[0]["result"]["structuredContent"],
        json!({"message": "raw"})
    );
    assert!(called[0]["result"].get("x-fixture-page").is_none());
}
