//! Turns and sessions with scripted models: session ids, resumed history, serialised turns,
//! cancellation, the step limit, unknown and misbehaving tools, and the session store's bounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use mcpapp_agent::{
    Agent, AgentConfig, AgentEvent, ChatMessage, ChatModel, ChatRequest, FinishReason, ModelError,
    ModelEvent, ModelStream, ToolCall, TurnRequest,
};
use mcpapp_bridge::{Tool, ToolContext, ToolOutput, ToolRegistry, ToolSource};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::{LIMIT, Scripted, error_text, grocery_registry, result_text, run, types};

fn text(t: &str) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::TextDelta(t.to_owned()))
}

fn finish(reason: FinishReason) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::Finish(reason))
}

fn tool_call(id: &str, name: &str, arguments: &str) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::ToolCall(ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }))
}

fn agent_with(model: Arc<dyn ChatModel>, registry: ToolRegistry, config: AgentConfig) -> Agent {
    Agent::new(registry, model, config)
}

#[tokio::test]
async fn new_sessions_get_an_apps_id_and_requested_ids_are_kept() {
    let model = Scripted::new(vec![vec![text("one"), finish(FinishReason::Stop)]; 3]);
    let agent = agent_with(model, grocery_registry(), AgentConfig::default());
    let events = run(&agent, TurnRequest::message("hi")).await;
    let AgentEvent::Session { session_id } = &events[0] else {
        panic!("{events:?}")
    };
    let hex = session_id.strip_prefix("apps-").unwrap();
    assert_eq!(hex.len(), 32);
    assert!(
        hex.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );

    let events = run(&agent, TurnRequest::message("hi").in_session("  ")).await;
    let AgentEvent::Session { session_id: other } = &events[0] else {
        panic!("{events:?}")
    };
    assert!(other.starts_with("apps-") && other != session_id);

    let stream = agent.run_turn(
        TurnRequest::message("hi").in_session("mine"),
        CancellationToken::new(),
    );
    assert_eq!(stream.session_id(), "mine");
    let events: Vec<AgentEvent> = stream.collect().await;
    assert_eq!(
        events[0],
        AgentEvent::Session {
            session_id: "mine".into()
        }
    );
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
}

#[tokio::test]
async fn a_resumed_session_keeps_its_history() {
    let model = Scripted::new(vec![
        vec![
            tool_call("c1", "grocery_get_low_stock", r#"{"storeId":1}"#),
            finish(FinishReason::ToolCalls),
        ],
        vec![
            text("Apples and "),
            text("milk are low."),
            finish(FinishReason::Stop),
        ],
        vec![text("You asked about store 1."), finish(FinishReason::Stop)],
    ]);
    let config = AgentConfig {
        system_prompt: "Be brief.".into(),
        ..AgentConfig::default()
    };
    let agent = agent_with(model.clone(), grocery_registry(), config);

    let first = run(
        &agent,
        TurnRequest::message("What is low in store 1?").in_session("s"),
    )
    .await;
    assert_eq!(
        types(&first),
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
    assert_eq!(result_text(&first), "Apples and milk are low.");
    let mut second_request = TurnRequest::message("Which store was that?").in_session("s");
    second_request.model_context = Some("The dashboard shows store 1.".into());
    let second = run(&agent, second_request).await;
    assert_eq!(result_text(&second), "You asked about store 1.");

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // Tools are offered under their safe names.
    let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "grocery_adjust_stock",
            "grocery_get_low_stock",
            "grocery_get_stores",
            "wx_forecast"
        ]
    );
    assert_eq!(
        requests[0].tools[1].registered_name,
        "grocery.get_low_stock"
    );
    // The second step of the first turn carries the tool call and its result.
    let step_two = &requests[1].messages;
    assert_eq!(
        step_two[0],
        ChatMessage::System {
            content: "Be brief.".into()
        }
    );
    assert!(
        matches!(&step_two[2], ChatMessage::Assistant { tool_calls, .. } if tool_calls[0].id == "c1")
    );
    let ChatMessage::Tool {
        tool_call_id,
        content,
    } = &step_two[3]
    else {
        panic!("{step_two:?}")
    };
    assert_eq!(tool_call_id, "c1");
    assert!(content.contains("Apples"));
    // The second turn starts from the whole first turn, plus this turn's context.
    let resumed = &requests[2].messages;
    assert_eq!(resumed.len(), 7, "{resumed:#?}");
    assert_eq!(
        resumed[1],
        ChatMessage::System {
            content: "The dashboard shows store 1.".into()
        }
    );
    assert_eq!(
        resumed[2],
        ChatMessage::User {
            content: "What is low in store 1?".into()
        }
    );
    assert_eq!(
        resumed[5],
        ChatMessage::Assistant {
            content: "Apples and milk are low.".into(),
            tool_calls: vec![]
        }
    );
    assert_eq!(
        resumed[6],
        ChatMessage::User {
            content: "Which store was that?".into()
        }
    );

    // The context is for one turn only; the history keeps the conversation.
    let history = agent.history("s").await.unwrap();
    assert_eq!(history.len(), 6);
    assert!(
        history
            .iter()
            .all(|m| !matches!(m, ChatMessage::System { .. }))
    );
    assert!(agent.history("unknown").await.is_none());
}

/// What a gated model shares with its streams and the test.
#[derive(Default)]
struct Gate {
    calls: AtomicUsize,
    entered: Notify,
    release: Notify,
    seen: std::sync::Mutex<Vec<ChatRequest>>,
}

/// A model whose first reply waits for the test's signal.
struct Gated(Arc<Gate>);

impl ChatModel for Gated {
    fn label(&self) -> &str {
        "gated"
    }

    fn stream(&self, request: ChatRequest) -> ModelStream {
        let gate = Arc::clone(&self.0);
        let n = gate.calls.fetch_add(1, Ordering::SeqCst);
        gate.seen.lock().unwrap().push(request);
        gate.entered.notify_one();
        futures::stream::once(async move {
            if n == 0 {
                gate.release.notified().await;
            }
            ModelEvent::TextDelta(format!("reply {n}"))
        })
        .map(Ok)
        .chain(futures::stream::iter([finish(FinishReason::Stop)]))
        .boxed()
    }
}

#[tokio::test]
async fn turns_on_one_session_run_one_at_a_time() {
    let gated = Arc::new(Gate::default());
    let agent = agent_with(
        Arc::new(Gated(Arc::clone(&gated))),
        grocery_registry(),
        AgentConfig::default(),
    );

    let mut first = agent.run_turn(
        TurnRequest::message("one").in_session("s"),
        CancellationToken::new(),
    );
    assert!(matches!(
        first.next().await,
        Some(AgentEvent::Session { .. })
    ));
    tokio::time::timeout(LIMIT, gated.entered.notified())
        .await
        .unwrap();

    let mut second = agent.run_turn(
        TurnRequest::message("two").in_session("s"),
        CancellationToken::new(),
    );
    assert!(matches!(
        second.next().await,
        Some(AgentEvent::Session { .. })
    ));
    // On this single-threaded runtime, yielding lets the second turn run as far as it can.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        gated.calls.load(Ordering::SeqCst),
        1,
        "the second turn waited"
    );
    // Another session is not held up.
    let other = run(&agent, TurnRequest::message("three").in_session("t")).await;
    assert_eq!(result_text(&other), "reply 1");

    gated.release.notify_one();
    let first: Vec<AgentEvent> = tokio::time::timeout(LIMIT, first.collect()).await.unwrap();
    let second: Vec<AgentEvent> = tokio::time::timeout(LIMIT, second.collect()).await.unwrap();
    assert_eq!(result_text(&first), "reply 0");
    assert_eq!(result_text(&second), "reply 2");
    // The second turn saw the first one's whole exchange.
    let seen = gated.seen.lock().unwrap();
    let messages = &seen[2].messages;
    assert_eq!(
        messages[messages.len() - 2],
        ChatMessage::Assistant {
            content: "reply 0".into(),
            tool_calls: vec![]
        }
    );
}

/// A tool that reports when it starts and when its token fires, and otherwise never ends.
struct Blocking {
    schema: Value,
    started: mpsc::UnboundedSender<()>,
    cancelled: mpsc::UnboundedSender<()>,
}

impl Tool for Blocking {
    fn name(&self) -> &str {
        "slow.wait"
    }

    fn description(&self) -> &str {
        "Waits forever"
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn invoke(&self, _arguments_json: String, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let started = self.started.clone();
        let cancelled = self.cancelled.clone();
        Box::pin(async move {
            let _ = started.send(());
            ctx.cancel.cancelled().await;
            let _ = cancelled.send(());
            ToolOutput::error("cancelled")
        })
    }
}

fn blocking_registry() -> (
    ToolRegistry,
    mpsc::UnboundedReceiver<()>,
    mpsc::UnboundedReceiver<()>,
) {
    let (started_tx, started) = mpsc::unbounded_channel();
    let (cancelled_tx, cancelled) = mpsc::unbounded_channel();
    let registry = ToolRegistry::new();
    registry
        .register(
            "builtin",
            ToolSource::BuiltIn,
            vec![Arc::new(Blocking {
                schema: json!({"type": "object"}),
                started: started_tx,
                cancelled: cancelled_tx,
            })],
        )
        .unwrap();
    (registry, started, cancelled)
}

#[tokio::test]
async fn cancelling_stops_a_running_tool_and_still_ends_with_done() {
    let (registry, mut started, mut cancelled) = blocking_registry();
    let model = Scripted::new(vec![
        vec![
            tool_call("c1", "slow_wait", "{}"),
            finish(FinishReason::ToolCalls),
        ],
        vec![text("never asked"), finish(FinishReason::Stop)],
    ]);
    let agent = agent_with(model.clone(), registry, AgentConfig::default());
    let cancel = CancellationToken::new();
    let mut stream = agent.run_turn(TurnRequest::message("wait").in_session("c"), cancel.clone());

    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        let is_tool = matches!(event, AgentEvent::Tool { .. });
        events.push(event);
        if is_tool {
            break;
        }
    }
    tokio::time::timeout(LIMIT, started.recv())
        .await
        .unwrap()
        .unwrap();
    cancel.cancel();
    let rest: Vec<AgentEvent> = tokio::time::timeout(LIMIT, stream.collect()).await.unwrap();
    events.extend(rest);
    assert_eq!(types(&events), ["session", "tool", "error", "done"]);
    assert!(error_text(&events).contains("cancelled"));
    // The tool saw its token fire, and the model was not asked again.
    tokio::time::timeout(LIMIT, cancelled.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(model.requests().len(), 1);
    // The interrupted exchange is not kept; the user's message is.
    let history = agent.history("c").await.unwrap();
    assert_eq!(
        history,
        [ChatMessage::User {
            content: "wait".into()
        }]
    );
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_turn() {
    let (registry, mut started, mut cancelled) = blocking_registry();
    let model = Scripted::new(vec![vec![
        tool_call("c1", "slow_wait", "{}"),
        finish(FinishReason::ToolCalls),
    ]]);
    let agent = agent_with(model, registry, AgentConfig::default());
    let stream = agent.run_turn(
        TurnRequest::message("wait").in_session("d"),
        CancellationToken::new(),
    );
    tokio::time::timeout(LIMIT, started.recv())
        .await
        .unwrap()
        .unwrap();
    drop(stream);
    tokio::time::timeout(LIMIT, cancelled.recv())
        .await
        .unwrap()
        .unwrap();
    // The session is released: its history can be read (this waits for the turn's lock).
    let history = tokio::time::timeout(LIMIT, agent.history("d"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(history.len(), 1);
}

#[tokio::test]
async fn a_cancelled_token_before_the_turn_gives_error_and_done() {
    let model = Scripted::new(vec![vec![text("unused"), finish(FinishReason::Stop)]]);
    let agent = agent_with(model.clone(), grocery_registry(), AgentConfig::default());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let events: Vec<AgentEvent> = tokio::time::timeout(
        LIMIT,
        agent.run_turn(TurnRequest::message("hi"), cancel).collect(),
    )
    .await
    .unwrap();
    assert_eq!(types(&events), ["session", "error", "done"]);
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn the_step_limit_stops_a_model_that_keeps_calling_tools() {
    let step = vec![
        tool_call("", "grocery_get_stores", r#"{"id":1}"#),
        finish(FinishReason::ToolCalls),
    ];
    let model = Scripted::new(vec![step; 5]);
    let config = AgentConfig {
        step_limit: 3,
        ..AgentConfig::default()
    };
    let agent = agent_with(model.clone(), grocery_registry(), config);
    let events = run(&agent, TurnRequest::message("loop")).await;
    assert_eq!(
        types(&events),
        [
            "session",
            "tool",
            "tool_result",
            "tool",
            "tool_result",
            "error",
            "done"
        ]
    );
    assert!(error_text(&events).contains("step limit"), "{events:?}");
    assert_eq!(model.requests().len(), 3);
    // Calls without an id got one, so each result answers its call.
    let last = &model.requests()[2].messages;
    let ChatMessage::Assistant { tool_calls, .. } = &last[last.len() - 2] else {
        panic!("{last:?}")
    };
    assert!(tool_calls[0].id.starts_with("call_"));
    assert!(
        matches!(&last[last.len() - 1], ChatMessage::Tool { tool_call_id, .. } if *tool_call_id == tool_calls[0].id)
    );
}

#[tokio::test]
async fn unknown_tools_and_unparsable_arguments_are_answered_not_fatal() {
    let model = Scripted::new(vec![
        vec![
            tool_call("a", "no_such_tool", "{}"),
            tool_call("b", "grocery.get_stores", "not json"),
            finish(FinishReason::ToolCalls),
        ],
        vec![text("Sorry."), finish(FinishReason::Length)],
    ]);
    let agent = agent_with(model, grocery_registry(), AgentConfig::default());
    let events = run(&agent, TurnRequest::message("x").in_session("u")).await;
    assert_eq!(
        types(&events),
        [
            "session",
            "tool",
            "tool_result",
            "tool",
            "tool_result",
            "text",
            "result",
            "done"
        ]
    );
    let AgentEvent::ToolResult { text, is_error, .. } = &events[2] else {
        panic!("{events:?}")
    };
    assert!(is_error);
    assert_eq!(text, "Error: there is no tool named 'no_such_tool'");
    // A registered (dotted) name is accepted too, and bad arguments show as `{}`.
    let AgentEvent::Tool { name, input, .. } = &events[3] else {
        panic!("{events:?}")
    };
    assert_eq!(name, "grocery.get_stores");
    assert_eq!(input, &json!({}));
    let AgentEvent::ToolResult { text, .. } = &events[4] else {
        panic!("{events:?}")
    };
    assert_eq!(text, "grocery.get_stores in u got not json");
    // A reply cut at the token limit is an incomplete result.
    assert_eq!(
        events[6],
        AgentEvent::Result {
            text: "Sorry.".into(),
            is_error: true
        }
    );
}

struct Panics(Value);

impl Tool for Panics {
    fn name(&self) -> &str {
        "bad.panic"
    }
    fn description(&self) -> &str {
        "Panics"
    }
    fn input_schema(&self) -> &Value {
        &self.0
    }
    fn invoke(&self, arguments_json: String, _ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        if arguments_json == "now" {
            panic!("panics before returning a future");
        }
        Box::pin(async move { panic!("panics while running") })
    }
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result() {
    let registry = ToolRegistry::new();
    registry
        .register(
            "plugin:bad",
            ToolSource::Plugin,
            vec![Arc::new(Panics(json!({"type": "object"})))],
        )
        .unwrap();
    let model = Scripted::new(vec![
        vec![
            tool_call("a", "bad_panic", "{}"),
            tool_call("b", "bad_panic", "now"),
            finish(FinishReason::ToolCalls),
        ],
        vec![text("ok"), finish(FinishReason::Stop)],
    ]);
    let agent = agent_with(model, registry, AgentConfig::default());
    let events = run(&agent, TurnRequest::message("x")).await;
    assert_eq!(
        types(&events),
        [
            "session",
            "tool",
            "tool_result",
            "tool",
            "tool_result",
            "text",
            "result",
            "done"
        ]
    );
    for i in [2, 4] {
        let AgentEvent::ToolResult { text, is_error, .. } = &events[i] else {
            panic!("{events:?}")
        };
        assert!(is_error);
        assert!(text.contains("failed unexpectedly"), "{text}");
    }
}

#[tokio::test]
async fn a_model_error_ends_the_turn_with_error_then_done() {
    let model = Scripted::new(vec![vec![
        text("partial"),
        Err(ModelError::Stream {
            message: "connection reset".into(),
        }),
    ]]);
    let agent = agent_with(model, grocery_registry(), AgentConfig::default());
    let events = run(&agent, TurnRequest::message("x")).await;
    assert_eq!(types(&events), ["session", "text", "error", "done"]);
    assert!(error_text(&events).contains("connection reset"));
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire_and_the_store_is_bounded() {
    let reply = vec![text("ok"), finish(FinishReason::Stop)];
    let model = Scripted::new(vec![reply; 6]);
    let config = AgentConfig {
        session_capacity: 2,
        idle_expiry: Duration::from_secs(60),
        ..AgentConfig::default()
    };
    let agent = agent_with(model.clone(), grocery_registry(), config);

    run(&agent, TurnRequest::message("a1").in_session("a")).await;
    run(&agent, TurnRequest::message("b1").in_session("b")).await;
    assert_eq!(agent.session_count(), 2);
    tokio::time::advance(Duration::from_secs(1)).await;
    run(&agent, TurnRequest::message("a2").in_session("a")).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    // The store is full: the least recently used session (b) makes room.
    run(&agent, TurnRequest::message("c1").in_session("c")).await;
    assert_eq!(agent.session_count(), 2);
    assert!(agent.history("b").await.is_none());
    assert_eq!(agent.history("a").await.unwrap().len(), 4);

    // After the idle expiry, a session starts over.
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(agent.history("a").await.is_none());
    run(&agent, TurnRequest::message("a3").in_session("a")).await;
    let history = agent.history("a").await.unwrap();
    assert_eq!(
        history[0],
        ChatMessage::User {
            content: "a3".into()
        }
    );
    assert_eq!(history.len(), 2);
    assert!(agent.remove_session("a"));
    assert!(!agent.remove_session("a"));
}

#[tokio::test]
async fn a_full_store_of_busy_sessions_refuses_new_ones() {
    let (registry, mut started, _cancelled) = blocking_registry();
    let model = Scripted::new(vec![vec![
        tool_call("c1", "slow_wait", "{}"),
        finish(FinishReason::ToolCalls),
    ]]);
    let config = AgentConfig {
        session_capacity: 1,
        ..AgentConfig::default()
    };
    let agent = agent_with(model, registry, config);
    let busy = agent.run_turn(
        TurnRequest::message("wait").in_session("busy"),
        CancellationToken::new(),
    );
    tokio::time::timeout(LIMIT, started.recv())
        .await
        .unwrap()
        .unwrap();
    let events = run(&agent, TurnRequest::message("hi").in_session("new")).await;
    assert_eq!(types(&events), ["session", "error", "done"]);
    assert!(error_text(&events).contains("too many active chat sessions"));
    drop(busy);
}

#[test]
fn without_a_runtime_the_stream_reports_the_problem() {
    let model = Scripted::new(Vec::new());
    let agent = agent_with(model, ToolRegistry::new(), AgentConfig::default());
    let stream = agent.run_turn(TurnRequest::message("hi"), CancellationToken::new());
    let events: Vec<AgentEvent> = futures::executor::block_on(stream.collect());
    assert_eq!(types(&events), ["session", "error", "done"]);
    assert!(error_text(&events).contains("Tokio runtime"));
}

#[tokio::test]
async fn tools_registered_between_turns_are_offered() {
    let registry = ToolRegistry::new();
    let model = Scripted::new(vec![
        vec![text("none yet"), finish(FinishReason::Stop)],
        vec![text("now one"), finish(FinishReason::Stop)],
    ]);
    let agent = agent_with(model.clone(), registry.clone(), AgentConfig::default());
    run(&agent, TurnRequest::message("1")).await;
    registry
        .register(
            "mcpapp:late",
            ToolSource::Native,
            vec![crate::echo("late.tool", "Late")],
        )
        .unwrap();
    run(&agent, TurnRequest::message("2")).await;
    let requests = model.requests();
    assert!(requests[0].tools.is_empty());
    assert_eq!(requests[1].tools[0].name, "late_tool");
}

#[test]
fn agents_and_streams_can_move_between_tasks() {
    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
    fn assert_stream<T: futures::Stream<Item = AgentEvent> + Send + Unpin + 'static>() {}
    assert_shareable::<Agent>();
    assert_shareable::<ToolRegistry>();
    assert_stream::<mcpapp_agent::TurnStream>();
}
