//! `/apps/mcp/{appId}`: raw pass-through onto the app's shared session.

use std::time::Duration;

use futures::StreamExt;
use mcpapp_manifest::Lifecycle;
use mcpapp_testkit::{
    AppsDir, Elicit, Over, TestClient, bin, eventually, structured, text, wait_state,
};
use serde_json::{Value, json};

use crate::{Gateway, PATIENCE};

/// A minimal hand-written Streamable HTTP client session.
struct Session {
    client: reqwest::Client,
    url: String,
    id: String,
}

impl Session {
    async fn open(gateway: &Gateway, app: &str, query: &str) -> Self {
        let client = reqwest::Client::new();
        let url = format!("{}/apps/mcp/{app}{query}", gateway.url);
        let response = client
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let init: Value = response.json().await.unwrap();
        assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
        Self { client, url, id }
    }

    /// POSTs one message and returns the status and every JSON message of the reply.
    async fn post(&self, body: Value) -> (u16, Vec<Value>) {
        let response = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.id)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let sse = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
        let text = response.text().await.unwrap();
        let messages = if sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| serde_json::from_str(d.trim()).unwrap())
                .collect()
        } else if text.is_empty() {
            Vec::new()
        } else {
            vec![serde_json::from_str(&text).unwrap()]
        };
        (status, messages)
    }

    async fn raw_post(&self, body: Value) -> String {
        self.client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.id)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

#[tokio::test]
async fn tools_list_is_raw_with_app_only_tools_vendor_fields_and_no_prefix() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "inventory."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let session = Session::open(&gateway, "fx", "").await;
    let text = session
        .raw_post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert!(text.contains(r#""x-vendor":{"fixture":true}"#), "{text}");
    assert!(text.contains(r#""x-fixture-page":1"#));
    let list: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"app_only_tool") && names.contains(&"echo_session"),
        "{names:?}"
    );
    assert!(names.iter().all(|n| !n.starts_with("inventory.")));
    gateway.shutdown().await;
}

#[tokio::test]
async fn session_id_from_the_query_reaches_the_app() {
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let session = Session::open(&gateway, "fx", "?sessionId=abc123").await;
    let (status, replies) = session.post(call(2, "echo_session", json!({}))).await;
    assert_eq!(status, 200);
    assert_eq!(replies[0]["id"], 2);
    assert_eq!(
        replies[0]["result"]["structuredContent"]["sessionId"],
        "abc123"
    );
    assert_ne!(replies[0]["result"]["isError"], true);
    // A client's own _meta.sessionId is replaced by the query's.
    let (_, replies) = session
        .post(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "echo_session", "arguments": {}, "_meta": {"sessionId": "forged"}}}))
        .await;
    assert_eq!(
        replies[0]["result"]["structuredContent"]["sessionId"],
        "abc123"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn model_only_tools_are_refused_to_views() {
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let session = Session::open(&gateway, "fx", "").await;
    for tool in ["model_only_tool", "malformed_visibility_tool"] {
        let (status, replies) = session.post(call(4, tool, json!({}))).await;
        assert_eq!(status, 200);
        assert_eq!(replies[0]["error"]["code"], -32602, "{tool}: {replies:?}");
        assert!(
            replies[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cannot be called from an app view")
        );
    }
    let (_, replies) = session.post(call(5, "app_only_tool", json!({}))).await;
    assert_eq!(
        replies[0]["result"]["content"][0]["text"],
        "called:app_only_tool"
    );
    gateway.shutdown().await;

    // Switched off, the check lets everything through.
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |c| c.enforce_app_visibility = false).await;
    let session = Session::open(&gateway, "fx", "").await;
    let (_, replies) = session.post(call(6, "model_only_tool", json!({}))).await;
    assert_eq!(
        replies[0]["result"]["content"][0]["text"],
        "called:model_only_tool"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn unknown_apps_get_404_and_stopped_apps_503() {
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let client = reqwest::Client::new();
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let send = |app: &str| {
        client
            .post(format!("{}/apps/mcp/{app}", gateway.url))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(initialize)
            .send()
    };
    let response = send("nonexistent").await.unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no app 'nonexistent'")
    );
    // The gateway is still fine.
    assert_eq!(send("fx").await.unwrap().status(), 200);

    let app = gateway.supervisor.get("fx").unwrap();
    app.stop().unwrap();
    wait_state(app.watch(), Lifecycle::Stopped).await;
    let response = send("fx").await.unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Stopped"),
        "{body}"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn protocol_errors_have_the_right_statuses() {
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let client = reqwest::Client::new();
    let url = format!("{}/apps/mcp/fx", gateway.url);
    let status = |r: reqwest::Response| r.status().as_u16();
    let wrong_accept = client
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(status(wrong_accept), 406);
    let wrong_type = client
        .post(&url)
        .header("Content-Type", "text/plain")
        .header("Accept", "application/json, text/event-stream")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(status(wrong_type), 415);
    let batch = client
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body("[]")
        .send()
        .await
        .unwrap();
    assert_eq!(status(batch), 400);
    let no_session = client
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(status(no_session), 400);
    let session = Session::open(&gateway, "fx", "").await;
    // One GET stream per session; DELETE ends the session.
    let get = || {
        client
            .get(&url)
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", &session.id)
            .send()
    };
    let first = get().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(get().await.unwrap().status(), 409);
    let deleted = client
        .delete(&url)
        .header("Mcp-Session-Id", &session.id)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let (status, _) = session
        .post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert_eq!(status, 404);
    gateway.shutdown().await;
}

#[tokio::test]
async fn resources_updated_arrives_on_the_browser_get_stream() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("grocery", "grocery-inventory", over);
        let gateway = Gateway::start(apps, |_| {}).await;
        let session = Session::open(&gateway, "grocery", "").await;
        // Updates go to the sessions that subscribed to the resource.
        let (status, _) = session
            .post(
                json!({"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe",
                "params": {"uri": "inventory://products/2/details"}}),
            )
            .await;
        assert_eq!(status, 200);
        let stream = session
            .client
            .get(&session.url)
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", &session.id)
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), 200);
        let mut body = stream.bytes_stream();
        // The agent's call (not the browser's) changes stock; the browser hears of it.
        gateway
            .supervisor
            .get("grocery")
            .unwrap()
            .call_tool(
                "adjust_stock",
                Some(
                    json!({"storeId": 1, "productId": 2, "delta": 1})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
                None,
            )
            .await
            .unwrap();
        let mut seen = String::new();
        let found = tokio::time::timeout(PATIENCE, async {
            while let Some(chunk) = body.next().await {
                seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
                if seen.contains("notifications/resources/updated") {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap();
        assert!(found, "{seen}");
        assert!(seen.contains("inventory://products/2/details"), "{seen}");
        gateway.shutdown().await;
    }
}

#[tokio::test]
async fn rmcp_clients_work_through_the_proxy_including_elicitation() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("fx", "fixture-app", over);
        let gateway = Gateway::start(apps, |_| {}).await;
        let client = TestClient::builder()
            .name("browser")
            .elicit(Elicit::Accept(json!({"name": "Grace", "agree": true})))
            .http(&format!("{}/apps/mcp/fx", gateway.url))
            .await;
        let info = client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "fixture-app");
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "app_only_tool"));
        let echo = client.call("echo", json!({"message": "hi"})).await;
        assert_eq!(structured(&echo)["message"], "hi");
        let answer = client.call("elicit", json!({"message": "name?"})).await;
        let text = text(&answer);
        assert!(
            text.starts_with("accepted:") && text.contains("Grace"),
            "{text}"
        );
        client.client.cancel().await.unwrap();
        gateway.shutdown().await;
    }
}

#[tokio::test]
async fn slow_answers_switch_to_an_event_stream() {
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let session = Session::open(&gateway, "fx", "").await;
    let started = std::time::Instant::now();
    let (status, replies) = session.post(call(9, "slow", json!({"ms": 1500}))).await;
    assert_eq!(status, 200);
    assert_eq!(replies.last().unwrap()["id"], 9);
    assert!(started.elapsed() >= Duration::from_millis(1500));
    gateway.shutdown().await;
}

/// A bare `initialize` on `/apps/mcp/{app}`: the status, the body and the session id.
async fn initialize(gateway: &Gateway, app: &str) -> (u16, Value, Option<String>) {
    let response = reqwest::Client::new()
        .post(format!("{}/apps/mcp/{app}", gateway.url))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, response.json().await.unwrap_or(Value::Null), id)
}

/// Retries `initialize` until it is accepted (a busy session may take a moment to be
/// noticed as idle again); the session it opened.
async fn initialize_eventually(gateway: &Gateway, app: &str) -> Session {
    let mut opened = None;
    let mut last = Value::Null;
    eventually(PATIENCE, async || {
        let (status, body, id) = initialize(gateway, app).await;
        if status == 200 {
            opened = Some(id.unwrap());
        } else {
            assert_eq!(status, 503, "{body}");
        }
        last = body;
        opened.is_some()
    })
    .await;
    Session {
        client: reqwest::Client::new(),
        url: format!("{}/apps/mcp/{app}", gateway.url),
        id: opened.unwrap_or_else(|| panic!("still refused: {last}")),
    }
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

async fn browser_sessions(gateway: &Gateway, app: &str) -> u64 {
    let (status, detail) = gateway.get_json(&format!("/apps/{app}")).await;
    assert_eq!(status, 200, "{detail}");
    detail["browserSessions"].as_u64().unwrap()
}

#[tokio::test]
async fn a_new_session_evicts_the_least_recently_used_idle_one() {
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |c| c.max_proxy_sessions_per_app = 2).await;
    let older = Session::open(&gateway, "fx", "").await;
    let newer = Session::open(&gateway, "fx", "").await;
    // Using the older one makes the newer one the least recently used.
    assert_eq!(older.post(ping(1)).await.0, 200);
    assert_eq!(browser_sessions(&gateway, "fx").await, 2);
    let third = Session::open(&gateway, "fx", "").await;
    assert_eq!(browser_sessions(&gateway, "fx").await, 2);
    assert_eq!(older.post(ping(2)).await.0, 200);
    assert_eq!(third.post(ping(3)).await.0, 200);
    let (status, replies) = newer.post(ping(4)).await;
    assert_eq!(status, 404, "{replies:?}");
    assert_eq!(replies[0]["error"]["code"], -32001);
    gateway.shutdown().await;
}

#[tokio::test]
async fn busy_sessions_are_kept_and_a_new_one_gets_503() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"requestTimeoutSeconds": 600}"#,
    );
    let gateway = Gateway::start(apps, |c| c.max_proxy_sessions_per_app = 1).await;

    // A request in flight keeps the session busy: the reply turns into an event stream
    // after a second and stays open while `hang` waits.
    let first = Session::open(&gateway, "fx", "").await;
    let hanging = first
        .client
        .post(&first.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &first.id)
        .body(call(1, "hang", json!({})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(hanging.status(), 200);
    let (status, body, id) = initialize(&gateway, "fx").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["error"]["code"], -32002);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("all busy"), "{message}");
    assert!(id.is_none());
    assert_eq!(first.post(ping(2)).await.0, 200);

    // Once the request is gone the session is idle, and the next one evicts it.
    drop(hanging);
    let second = initialize_eventually(&gateway, "fx").await;
    assert_eq!(first.post(ping(3)).await.0, 404);

    // An open GET stream keeps a session busy too.
    let stream = second
        .client
        .get(&second.url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &second.id)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let (status, body, _) = initialize(&gateway, "fx").await;
    assert_eq!(status, 503, "{body}");
    drop(stream);
    let third = initialize_eventually(&gateway, "fx").await;
    assert_eq!(second.post(ping(4)).await.0, 404);
    assert_eq!(third.post(ping(5)).await.0, 200);
    gateway.shutdown().await;
}

#[tokio::test]
async fn idle_sessions_are_swept_without_a_new_initialize() {
    let apps = AppsDir::new();
    apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |c| {
        c.proxy_session_idle = Duration::from_millis(300);
    })
    .await;
    let idle = Session::open(&gateway, "fx", "").await;
    assert_eq!(idle.post(ping(1)).await.0, 200);
    // This one listens on its GET stream all along, so it is never idle.
    let listening = Session::open(&gateway, "fx", "").await;
    let stream = listening
        .client
        .get(&listening.url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &listening.id)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // Watched through the app's detail, which does not touch the sessions.
    assert!(
        eventually(PATIENCE, async || browser_sessions(&gateway, "fx").await
            == 1)
        .await,
        "the idle session was never swept"
    );
    let (status, replies) = idle.post(ping(2)).await;
    assert_eq!(status, 404, "{replies:?}");
    assert_eq!(listening.post(ping(3)).await.0, 200);
    drop(stream);
    gateway.shutdown().await;
}
