//! The OpenAI-compatible provider against a scripted Chat Completions server on
//! `127.0.0.1:0`: real HTTP, streamed SSE chunks, tool calls, and the ways a provider fails.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use futures::StreamExt;
use mcpapp_agent::{
    Agent, AgentConfig, AgentEvent, ChatMessage, ChatModel, ChatRequest, FinishReason, ModelError,
    ModelEvent, OpenAiConfig, OpenAiModel, ToolCall, TurnRequest, model_from_config,
};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{LIMIT, error_text, grocery_registry, result_text, run, types};

const KEY: &str = "sk-test-secret-0123456789";

/// One scripted answer.
enum Reply {
    /// An SSE response made of these chunks; with `abort`, the connection breaks after them
    /// once the test says so (so that the chunks reach the client first).
    Sse {
        chunks: Vec<String>,
        abort: Option<Arc<Notify>>,
    },
    /// A plain response with a status and body.
    Plain {
        status: u16,
        content_type: &'static str,
        body: String,
    },
}

/// What the server received.
#[derive(Debug, Clone)]
struct Received {
    authorization: Option<String>,
    body: Value,
}

#[derive(Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
}

struct Server {
    base_url: String,
    script: Arc<Script>,
}

impl Server {
    async fn start(replies: Vec<Reply>) -> Self {
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            received: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            base_url: format!("http://{addr}/v1"),
            script,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.script.received.lock().unwrap().clone()
    }

    fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new("test-model")
            .with_base_url(format!("{}/", self.base_url))
            .with_api_key(KEY)
    }

    fn agent(&self) -> Agent {
        let model = OpenAiModel::new(self.config()).unwrap();
        Agent::new(grocery_registry(), Arc::new(model), AgentConfig::default())
    }
}

async fn chat(State(script): State<Arc<Script>>, headers: HeaderMap, body: String) -> Response {
    script.received.lock().unwrap().push(Received {
        authorization: headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_owned()),
        body: serde_json::from_str(&body).unwrap(),
    });
    let reply = script.replies.lock().unwrap().pop_front();
    match reply {
        Some(Reply::Sse { chunks, abort }) => {
            let items = chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from(c)));
            let breaking = futures::stream::iter(abort).then(|signal| async move {
                signal.notified().await;
                Err(std::io::Error::other(
                    "the scripted server breaks the stream",
                ))
            });
            let stream = futures::stream::iter(items).chain(breaking);
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(stream),
            )
                .into_response()
        }
        Some(Reply::Plain {
            status,
            content_type,
            body,
        }) => (
            StatusCode::from_u16(status).unwrap(),
            [(header::CONTENT_TYPE, content_type)],
            body,
        )
            .into_response(),
        None => (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response(),
    }
}

/// An SSE event carrying `value`.
fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn delta(delta: &Value, finish: Option<&str>) -> String {
    data(&json!({
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    }))
}

const DONE: &str = "data: [DONE]\n\n";

fn tool_call_reply() -> Reply {
    Reply::Sse {
        chunks: vec![
            ": keep-alive\n\n".into(),
            delta(&json!({"role": "assistant", "content": null}), None),
            delta(
                &json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "grocery_get_low_stock", "arguments": ""}}]}),
                None,
            ),
            delta(
                &json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"store"}}]}),
                None,
            ),
            // An event split across two writes.
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,".into(),
            "\"function\":{\"arguments\":\"Id\\\": 1}\"}}]},\"finish_reason\":null}]}\r\n\r\n"
                .into(),
            delta(&json!({}), Some("tool_calls")),
            data(&json!({"choices": [], "usage": {"total_tokens": 12}})),
            DONE.into(),
        ],
        abort: None,
    }
}

fn answer_reply(parts: &[&str]) -> Reply {
    let mut chunks: Vec<String> = parts
        .iter()
        .map(|p| delta(&json!({"content": p}), None))
        .collect();
    chunks.push(delta(&json!({}), Some("stop")));
    chunks.push(DONE.into());
    Reply::Sse {
        chunks,
        abort: None,
    }
}

#[tokio::test]
async fn a_tool_call_then_a_final_answer_over_real_http() {
    let server = Server::start(vec![
        tool_call_reply(),
        answer_reply(&["Apples and ", "milk are low."]),
    ])
    .await;
    let agent = server.agent();
    let events = run(&agent, TurnRequest::message("What is low in store 1?")).await;
    assert_eq!(
        types(&events),
        [
            "session",
            "tool",
            "tool_result",
            "text",
            "text",
            "result",
            "done"
        ]
    );
    let AgentEvent::Tool { id, name, input } = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(name, "grocery.get_low_stock");
    assert_eq!(input, &json!({"storeId": 1}));
    let AgentEvent::ToolResult {
        id: result_id,
        text,
        is_error,
        ..
    } = &events[2]
    else {
        panic!("{events:?}")
    };
    assert_eq!(result_id, id);
    assert!(!is_error);
    assert!(text.contains("Apples"), "{text}");
    assert_eq!(result_text(&events), "Apples and milk are low.");

    let received = server.received();
    assert_eq!(received.len(), 2);
    let first = &received[0];
    assert_eq!(
        first.authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(first.body["model"], "test-model");
    assert_eq!(first.body["stream"], true);
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "grocery_adjust_stock",
            "grocery_get_low_stock",
            "grocery_get_stores",
            "wx_forecast"
        ]
    );
    assert_eq!(first.body["tools"][1]["type"], "function");
    assert_eq!(
        first.body["tools"][1]["function"]["parameters"]["required"],
        json!(["storeId"])
    );
    assert_eq!(first.body["messages"][0]["role"], "system");
    assert_eq!(
        first.body["messages"][1],
        json!({"role": "user", "content": "What is low in store 1?"})
    );

    // The second request carries the assembled call and its result.
    let messages = received[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[2],
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": "call_1",
                "type": "function",
                "function": {"name": "grocery_get_low_stock", "arguments": "{\"storeId\": 1}"}
            }]
        })
    );
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert!(messages[3]["content"].as_str().unwrap().contains("Milk"));
}

#[tokio::test]
async fn parallel_tool_calls_are_assembled_by_index() {
    let server = Server::start(vec![Reply::Sse {
        chunks: vec![
            delta(
                &json!({"tool_calls": [
                    {"index": 1, "id": "b", "function": {"name": "wx_forecast", "arguments": "{\"city\":"}},
                    {"index": 0, "id": "a", "function": {"name": "grocery_get_stores", "arguments": ""}}
                ]}),
                None,
            ),
            delta(
                &json!({"tool_calls": [
                    {"index": 0, "function": {"arguments": "{}"}},
                    {"index": 1, "function": {"arguments": "\"Oslo\"}"}}
                ]}),
                Some("tool_calls"),
            ),
            DONE.into(),
        ],
        abort: None,
    }])
    .await;
    let model = OpenAiModel::new(server.config()).unwrap();
    assert_eq!(model.label(), "openai:test-model");
    let events: Vec<Result<ModelEvent, ModelError>> =
        tokio::time::timeout(LIMIT, model.stream(ChatRequest::default()).collect())
            .await
            .unwrap();
    let call = |id: &str, name: &str, arguments: &str| {
        Ok(ModelEvent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }))
    };
    assert_eq!(
        events,
        [
            call("a", "grocery_get_stores", "{}"),
            call("b", "wx_forecast", "{\"city\":\"Oslo\"}"),
            Ok(ModelEvent::Finish(FinishReason::ToolCalls)),
        ]
    );
    // Without tools, none are sent.
    assert!(server.received()[0].body.get("tools").is_none());
}

#[tokio::test]
async fn a_stream_that_breaks_midway_gives_error_then_done() {
    let signal = Arc::new(Notify::new());
    let server = Server::start(vec![Reply::Sse {
        chunks: vec![delta(&json!({"content": "Partial"}), None)],
        abort: Some(Arc::clone(&signal)),
    }])
    .await;
    let agent = server.agent();
    let mut stream = agent.run_turn(TurnRequest::message("hi"), CancellationToken::new());
    let mut events = Vec::new();
    // Break the connection once the first text has arrived.
    while let Some(event) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        let is_text = matches!(event, AgentEvent::Text { .. });
        events.push(event);
        if is_text {
            signal.notify_one();
            break;
        }
    }
    events.extend(
        tokio::time::timeout(LIMIT, stream.collect::<Vec<_>>())
            .await
            .unwrap(),
    );
    assert_eq!(types(&events), ["session", "text", "error", "done"]);
    assert_eq!(
        events[1],
        AgentEvent::Text {
            text: "Partial".into()
        }
    );
    let error = error_text(&events);
    assert!(error.contains("stream broke"), "{error}");
}

#[tokio::test]
async fn a_stream_that_ends_early_is_an_error() {
    let server = Server::start(vec![Reply::Sse {
        chunks: vec![delta(&json!({"content": "Half an ans"}), None)],
        abort: None,
    }])
    .await;
    let events = run(&server.agent(), TurnRequest::message("hi")).await;
    assert_eq!(types(&events), ["session", "text", "error", "done"]);
    assert!(error_text(&events).contains("ended before the reply was complete"));
}

#[tokio::test]
async fn an_error_inside_the_stream_is_reported() {
    let server = Server::start(vec![Reply::Sse {
        chunks: vec![data(
            &json!({"error": {"message": "the model is overloaded"}}),
        )],
        abort: None,
    }])
    .await;
    let events = run(&server.agent(), TurnRequest::message("hi")).await;
    assert_eq!(types(&events), ["session", "error", "done"]);
    assert_eq!(
        error_text(&events),
        "the model provider reported an error: the model is overloaded"
    );
}

#[tokio::test]
async fn http_401_with_a_json_body_gives_error_then_done_without_the_key() {
    let body = json!({"error": {
        "message": format!("Incorrect API key provided: {KEY}."),
        "type": "invalid_request_error",
        "code": "invalid_api_key"
    }});
    let server = Server::start(vec![Reply::Plain {
        status: 401,
        content_type: "application/json",
        body: body.to_string(),
    }])
    .await;
    let events = run(&server.agent(), TurnRequest::message("hi")).await;
    assert_eq!(types(&events), ["session", "error", "done"]);
    let error = error_text(&events);
    assert_eq!(
        error,
        "the model provider answered HTTP 401: Incorrect API key provided: [redacted]."
    );
    for event in &events {
        assert!(!serde_json::to_string(event).unwrap().contains(KEY));
    }
}

#[tokio::test]
async fn http_errors_without_json_quote_the_body() {
    let server = Server::start(vec![
        Reply::Plain {
            status: 503,
            content_type: "text/plain",
            body: "upstream busy".into(),
        },
        Reply::Plain {
            status: 500,
            content_type: "text/plain",
            body: String::new(),
        },
    ])
    .await;
    let events = run(&server.agent(), TurnRequest::message("hi")).await;
    assert_eq!(
        error_text(&events),
        "the model provider answered HTTP 503: upstream busy"
    );
    let events = run(&server.agent(), TurnRequest::message("hi")).await;
    assert_eq!(
        error_text(&events),
        "the model provider answered HTTP 500: Internal Server Error"
    );
}

#[tokio::test]
async fn a_server_that_does_not_stream_still_works() {
    let server = Server::start(vec![Reply::Plain {
        status: 200,
        content_type: "application/json",
        body: json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Whole answer."}}]})
        .to_string(),
    }])
    .await;
    let events = run(&server.agent(), TurnRequest::message("hi")).await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    assert_eq!(result_text(&events), "Whole answer.");
}

#[tokio::test]
async fn an_unreachable_provider_is_an_error() {
    // A port that was just free: nothing listens there.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = OpenAiConfig::new("m")
        .with_base_url(format!("http://user:pw@{addr}/v1"))
        .with_api_key(KEY);
    let agent = Agent::new(
        grocery_registry(),
        Arc::new(OpenAiModel::new(config).unwrap()),
        AgentConfig::default(),
    );
    let events = run(&agent, TurnRequest::message("hi")).await;
    assert_eq!(types(&events), ["session", "error", "done"]);
    let error = error_text(&events);
    assert!(
        error.starts_with("cannot reach the model provider at http://"),
        "{error}"
    );
    assert!(!error.contains("pw@"), "{error}");
    assert!(!error.contains(KEY), "{error}");
}

#[test]
fn configuration_comes_from_variables_and_hides_the_key() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert!(OpenAiConfig::from_lookup(vars(&[("OPENAI_API_KEY", "k")])).is_none());
    assert!(OpenAiConfig::from_lookup(vars(&[("MCPAPP_MODEL", "  ")])).is_none());

    let config = OpenAiConfig::from_lookup(vars(&[("MCPAPP_MODEL", "llama3.2")])).unwrap();
    assert_eq!(config.model, "llama3.2");
    assert_eq!(config.base_url, "https://api.openai.com/v1");
    assert_eq!(config.api_key, None);

    let config = OpenAiConfig::from_lookup(vars(&[
        ("MCPAPP_MODEL", "qwen"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
        ("OPENAI_API_KEY", "sk-very-secret"),
    ]))
    .unwrap();
    assert_eq!(config.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(config.api_key.as_deref(), Some("sk-very-secret"));
    let debug = format!("{config:?}");
    assert!(!debug.contains("sk-very-secret"), "{debug}");
    assert!(debug.contains("[redacted]"), "{debug}");
    let model = OpenAiModel::new(config).unwrap();
    assert!(!format!("{model:?}").contains("sk-very-secret"));
    let with_user = OpenAiConfig::new("x").with_base_url("http://user:hunter2@127.0.0.1:9/v1");
    assert!(!format!("{with_user:?}").contains("hunter2"));

    // No model means the offline mode; a bad URL is a configuration error.
    assert_eq!(model_from_config(None).unwrap().label(), "offline");
    assert_eq!(
        model_from_config(Some(OpenAiConfig::new("x")))
            .unwrap()
            .label(),
        "openai:x"
    );
    for base in ["not a url", "ftp://host/v1"] {
        let err = OpenAiModel::new(OpenAiConfig::new("x").with_base_url(base)).unwrap_err();
        assert!(matches!(err, ModelError::Config { .. }), "{err}");
    }
}

#[tokio::test]
async fn assistant_history_round_trips_to_the_wire_format() {
    let server = Server::start(vec![answer_reply(&["ok"])]).await;
    let model = OpenAiModel::new(server.config()).unwrap();
    let request = ChatRequest {
        messages: vec![
            ChatMessage::System {
                content: "sys".into(),
            },
            ChatMessage::Assistant {
                content: "Checking.".into(),
                tool_calls: vec![ToolCall {
                    id: "c9".into(),
                    name: "wx_forecast".into(),
                    arguments: String::new(),
                }],
            },
            ChatMessage::Tool {
                tool_call_id: "c9".into(),
                content: "Sunny".into(),
            },
        ],
        tools: Vec::new(),
    };
    let events: Vec<_> = tokio::time::timeout(LIMIT, model.stream(request).collect())
        .await
        .unwrap();
    assert_eq!(
        events,
        [
            Ok(ModelEvent::TextDelta("ok".into())),
            Ok(ModelEvent::Finish(FinishReason::Stop))
        ]
    );
    let messages = &server.received()[0].body["messages"];
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": "Checking.", "tool_calls": [{
            "id": "c9", "type": "function",
            "function": {"name": "wx_forecast", "arguments": "{}"}
        }]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "c9", "content": "Sunny"})
    );
}
