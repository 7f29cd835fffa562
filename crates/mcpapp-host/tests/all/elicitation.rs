//! Elicitations of the agent's calls: asked on the chat turn's stream, answered with
//! `POST /apps/chat/elicitation/{id}`, checked against the requested schema, declined when no
//! page listens, when the stream ends, or when no answer comes in time. The fixture's `elicit`
//! tool is the app asking, over stdio and over HTTP.

use std::time::Duration;

use futures::StreamExt;
use mcpapp_bridge::ToolContext;
use mcpapp_testkit::{AppsDir, HttpApp, Over, bin, eventually};
use serde_json::{Value, json};

use crate::{Gateway, PATIENCE};

/// A gateway over the fixture app `fx` (prefix `fx.`) over `over`; keep the returned server
/// for HTTP.
async fn fixture_gateway(
    over: Over,
    tweak: impl FnOnce(&mut mcpapp_host::HostConfig) + Send + 'static,
) -> (Gateway, Option<HttpApp>) {
    let apps = AppsDir::new();
    let prefix = r#"{"toolNamePrefix": "fx."}"#;
    let server = match over {
        Over::Stdio => {
            apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], prefix);
            None
        }
        Over::Http => {
            let server = HttpApp::start("fixture-app", &[]);
            apps.http_app("fx", &server.url, prefix);
            Some(server)
        }
    };
    (Gateway::start(apps, tweak).await, server)
}

/// A chat turn's event stream, read as it comes.
struct Turn {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    seen: Vec<Value>,
}

impl Turn {
    async fn start(gateway: &Gateway, message: &str, session: &str) -> Self {
        let response = reqwest::Client::new()
            .post(format!("{}/apps/chat", gateway.url))
            .json(&json!({"message": message, "sessionId": session}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
            seen: Vec::new(),
        }
    }

    /// The next event, or `None` when the stream ends.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                if let Some(data) = frame.trim_end().strip_prefix("data: ") {
                    let event: Value = serde_json::from_str(data).unwrap();
                    self.seen.push(event.clone());
                    return Some(event);
                }
                continue;
            }
            let chunk = tokio::time::timeout(PATIENCE, self.body.next())
                .await
                .expect("the chat stream went quiet")?
                .unwrap();
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Reads until an event of type `kind` comes; panics if the stream ends first.
    async fn until(&mut self, kind: &str) -> Value {
        while let Some(event) = self.next().await {
            if event["type"] == kind {
                return event;
            }
        }
        panic!("the stream ended without a {kind} event: {:?}", self.seen)
    }
}

/// What the fixture's `elicit` said it got: the first piece of the tool's text (its
/// structured content follows).
fn answer_of(tool_result: &Value) -> &str {
    let text = tool_result["text"].as_str().unwrap_or_default();
    text.split("\n\n").next().unwrap_or_default()
}

async fn post_answer(gateway: &Gateway, id: &str, answer: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/apps/chat/elicitation/{id}", gateway.url))
        .json(answer)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn answered_by_the_page(over: Over) {
    let (gateway, _server) = fixture_gateway(over, |_| {}).await;
    let mut turn = Turn::start(
        &gateway,
        r#"/call fx.elicit {"message": "Who are you?"}"#,
        "chat-e1",
    )
    .await;
    let asked = turn.until("elicitation").await;
    assert_eq!(asked["appId"], "fx", "{asked}");
    assert_eq!(asked["params"]["message"], "Who are you?");
    let schema = &asked["params"]["requestedSchema"];
    assert_eq!(schema["properties"]["name"]["type"], "string", "{asked}");
    assert_eq!(schema["properties"]["agree"]["type"], "boolean", "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();

    // A bad answer is refused, saying why, and the elicitation keeps waiting.
    let (status, error) = post_answer(
        &gateway,
        &id,
        &json!({"action": "accept", "content": {"name": "Ada", "agree": "yes"}}),
    )
    .await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(
        error["error"],
        "the answer was refused: content.agree must be a boolean, not a string"
    );
    let (status, error) = post_answer(&gateway, &id, &json!("accept")).await;
    assert_eq!(status, 400, "{error}");
    let (status, _) = post_answer(&gateway, "no-such-id", &json!({"action": "decline"})).await;
    assert_eq!(status, 404);

    let (status, ok) = post_answer(
        &gateway,
        &id,
        &json!({"action": "accept", "content": {"name": "Ada", "agree": true}}),
    )
    .await;
    assert_eq!((status, ok), (200, json!({"ok": true})));
    let result = turn.until("tool_result").await;
    assert_eq!(
        answer_of(&result),
        r#"accepted: {"name":"Ada","agree":true}"#,
        "{result}"
    );
    turn.until("done").await;
    // Answered once: the id is spent.
    let (status, _) = post_answer(&gateway, &id, &json!({"action": "decline"})).await;
    assert_eq!(status, 404);
    gateway.shutdown().await;
}

#[tokio::test]
async fn an_agent_turns_elicitation_is_answered_by_the_page_over_stdio() {
    answered_by_the_page(Over::Stdio).await;
}

#[tokio::test]
async fn an_agent_turns_elicitation_is_answered_by_the_page_over_http() {
    answered_by_the_page(Over::Http).await;
}

#[tokio::test]
async fn declining_and_cancelling_reach_the_app() {
    let (gateway, _server) = fixture_gateway(Over::Stdio, |_| {}).await;
    for (action, text) in [("decline", "declined"), ("cancel", "cancelled")] {
        let mut turn =
            Turn::start(&gateway, r#"/call fx.elicit {"message": "m"}"#, "chat-e2").await;
        let asked = turn.until("elicitation").await;
        let id = asked["id"].as_str().unwrap();
        let (status, _) = post_answer(&gateway, id, &json!({"action": action})).await;
        assert_eq!(status, 200);
        assert_eq!(answer_of(&turn.until("tool_result").await), text);
        turn.until("done").await;
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn an_unanswered_elicitation_is_declined_after_the_timeout() {
    let (gateway, _server) = fixture_gateway(Over::Stdio, |c| {
        c.elicitation_timeout = Some(Duration::from_millis(800));
    })
    .await;
    let mut turn = Turn::start(&gateway, r#"/call fx.elicit {"message": "m"}"#, "chat-e3").await;
    let asked = turn.until("elicitation").await;
    let closed = turn.until("elicitation_closed").await;
    assert_eq!(closed["id"], asked["id"]);
    assert!(
        closed["reason"].as_str().unwrap().contains("in time"),
        "{closed}"
    );
    // The app was told "declined" and finished its call with it.
    assert_eq!(answer_of(&turn.until("tool_result").await), "declined");
    let (status, _) = post_answer(
        &gateway,
        asked["id"].as_str().unwrap(),
        &json!({"action": "decline"}),
    )
    .await;
    assert_eq!(status, 404);
    gateway.shutdown().await;
}

#[tokio::test]
async fn without_a_page_listening_the_elicitation_is_declined() {
    let (gateway, _server) = fixture_gateway(Over::Stdio, |_| {}).await;
    let elicit = gateway.registry.resolve("fx.elicit").unwrap().tool;
    // A session no chat stream is attached to, and no session at all.
    for ctx in [
        ToolContext::new().with_session_id("nobody-here"),
        ToolContext::new(),
    ] {
        let output = elicit.invoke(r#"{"message": "m"}"#.into(), ctx).await;
        assert!(output.text.starts_with("declined\n"), "{}", output.text);
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_chat_stream_that_ends_takes_its_elicitations_with_it() {
    let (gateway, _server) = fixture_gateway(Over::Stdio, |_| {}).await;
    let mut turn = Turn::start(&gateway, r#"/call fx.elicit {"message": "m"}"#, "chat-e4").await;
    let id = turn.until("elicitation").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The page goes away: its elicitation stops waiting.
    drop(turn);
    let gone = eventually(PATIENCE, async || {
        let (status, _) = post_answer(&gateway, &id, &json!({"action": "decline"})).await;
        status == 404
    })
    .await;
    assert!(gone, "the elicitation still waits after its stream ended");
    // The app is free again: its next elicitation is asked and answered as usual.
    let mut turn = Turn::start(&gateway, r#"/call fx.elicit {"message": "m"}"#, "chat-e4").await;
    let asked = turn.until("elicitation").await;
    let (status, _) = post_answer(
        &gateway,
        asked["id"].as_str().unwrap(),
        &json!({"action": "decline"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(answer_of(&turn.until("tool_result").await), "declined");
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_answer_route_checks_the_token_and_the_origin() {
    let (gateway, _server) = fixture_gateway(Over::Stdio, |c| {
        c.auth_token = Some("let-me-in".into());
    })
    .await;
    let client = reqwest::Client::new();
    let url = format!("{}/apps/chat/elicitation/abc", gateway.url);
    let without = client
        .post(&url)
        .json(&json!({"action": "decline"}))
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), 401);
    let foreign = client
        .post(&url)
        .bearer_auth("let-me-in")
        .header("Origin", "http://evil.example")
        .json(&json!({"action": "decline"}))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    let allowed = client
        .post(&url)
        .bearer_auth("let-me-in")
        .json(&json!({"action": "decline"}))
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 404, "nothing waits under 'abc'");
    gateway.shutdown().await;
}
