//! Prompt building from messages and UI events, request parsing, and the exact wire shapes of
//! the events.

use expect_test::expect;
use mcpapp_agent::{AgentEvent, AppEvent, PromptError, TurnRequest};
use serde_json::json;

/// The prompt of a request with `message` and `app_events`.
fn build_prompt(message: Option<&str>, app_events: &[AppEvent]) -> Result<String, PromptError> {
    TurnRequest {
        message: message.map(str::to_owned),
        app_events: app_events.to_vec(),
        ..TurnRequest::default()
    }
    .prompt()
}

fn event(tool: Option<&str>, args: Option<serde_json::Value>, result: Option<&str>) -> AppEvent {
    AppEvent {
        tool: tool.map(str::to_owned),
        args,
        result_text: result.map(str::to_owned),
        count: None,
    }
}

#[test]
fn a_plain_message_is_the_prompt() {
    assert_eq!(build_prompt(Some("hello"), &[]).unwrap(), "hello");
}

#[test]
fn blank_requests_have_no_prompt() {
    assert_eq!(build_prompt(None, &[]), Err(PromptError::Empty));
    assert_eq!(build_prompt(Some(" \n\t"), &[]), Err(PromptError::Empty));
    assert_eq!(TurnRequest::default().prompt(), Err(PromptError::Empty));
}

#[test]
fn ui_events_are_written_before_the_message() {
    let events = [
        event(
            Some("grocery.adjust_stock"),
            Some(json!({"storeId": 1, "delta": -2})),
            Some("ok: 8 left"),
        ),
        event(None, None, None),
        event(Some("grocery.note"), Some(json!("text arg")), Some("saved")),
    ];
    let prompt = build_prompt(Some("What is low now?"), &events).unwrap();
    expect![[r#"
        [UI events] The user performed these tool calls directly in the app's UI, bypassing the agent. Their results are final:
        - Tool grocery.adjust_stock({"storeId":1,"delta":-2}) → ok: 8 left
        - Tool ?({}) → 
        - Tool grocery.note("text arg") → saved

        What is low now?"#]].assert_eq(&prompt);
}

#[test]
fn collapsed_repeats_say_how_many_times() {
    let polled = AppEvent {
        count: Some(16),
        ..event(Some("fx.status"), Some(json!({})), Some("idle"))
    };
    let once = AppEvent {
        count: Some(1),
        ..event(Some("fx.save"), None, Some("saved"))
    };
    let prompt = build_prompt(Some("go on"), &[polled, once]).unwrap();
    let lines: Vec<&str> = prompt.lines().collect();
    assert_eq!(lines[1], "- Tool fx.status({}) → idle (16 times)");
    assert_eq!(lines[2], "- Tool fx.save({}) → saved");

    let request: TurnRequest = serde_json::from_value(json!({
        "message": "m",
        "appEvents": [
            {"tool": "a", "count": 3},
            {"tool": "b", "count": 0},
            {"tool": "c", "count": "many"},
            {"tool": "d", "count": -2},
        ]
    }))
    .unwrap();
    let counts: Vec<Option<u64>> = request.app_events.iter().map(|e| e.count).collect();
    assert_eq!(counts, [Some(3), None, None, None]);
}

#[test]
fn events_without_a_message_ask_for_a_brief_next_step() {
    let events = [event(Some("t"), Some(json!({})), Some("done"))];
    let prompt = build_prompt(Some("   "), &events).unwrap();
    expect![[r#"
        [UI events] The user performed these tool calls directly in the app's UI, bypassing the agent. Their results are final:
        - Tool t({}) → done
        The user sent no message. Decide the next step briefly, call tools when you are ready, and do not repeat what the UI already shows."#]].assert_eq(&prompt);
}

#[test]
fn requests_parse_leniently_from_the_wire() {
    let request: TurnRequest = serde_json::from_value(json!({
        "message": "hi",
        "sessionId": 42,
        "appEvents": [
            {"tool": "a.b", "args": {"x": [1, 2]}, "resultText": "fine"},
            "not an event",
            {"tool": 7, "resultText": null},
        ],
        "modelContext": "The dashboard shows store 1.",
        "unknown": true
    }))
    .unwrap();
    assert_eq!(request.message.as_deref(), Some("hi"));
    assert_eq!(request.session_id, None, "a non-string id counts as absent");
    assert_eq!(request.app_events.len(), 2);
    assert_eq!(
        request.app_events[0],
        event(Some("a.b"), Some(json!({"x": [1, 2]})), Some("fine"))
    );
    assert_eq!(request.app_events[1], event(None, None, None));
    assert_eq!(
        request.model_context.as_deref(),
        Some("The dashboard shows store 1.")
    );

    let empty: TurnRequest = serde_json::from_value(json!({"appEvents": {"no": "array"}})).unwrap();
    assert!(empty.app_events.is_empty());
    assert_eq!(empty.prompt(), Err(PromptError::Empty));
}

#[test]
fn events_serialise_to_the_chat_wire_shapes() {
    let cases = [
        (
            AgentEvent::Session {
                session_id: "apps-1".into(),
            },
            json!({"type": "session", "sessionId": "apps-1"}),
        ),
        (
            AgentEvent::Text { text: "Hi".into() },
            json!({"type": "text", "text": "Hi"}),
        ),
        (
            AgentEvent::Tool {
                id: "t1".into(),
                name: "grocery.get_stores".into(),
                input: json!({"id": 1}),
            },
            json!({"type": "tool", "id": "t1", "name": "grocery.get_stores", "input": {"id": 1}}),
        ),
        (
            AgentEvent::ToolResult {
                id: "t1".into(),
                text: "Error: no".into(),
                is_error: true,
                structured_content: None,
                call_tool_result: None,
            },
            json!({"type": "tool_result", "id": "t1", "text": "Error: no", "isError": true}),
        ),
        (
            AgentEvent::ToolResult {
                id: "t2".into(),
                text: "ok".into(),
                is_error: false,
                structured_content: Some(json!({"stores": []})),
                call_tool_result: None,
            },
            json!({"type": "tool_result", "id": "t2", "text": "ok", "isError": false, "structuredContent": {"stores": []}}),
        ),
        (
            AgentEvent::ToolResult {
                id: "t3".into(),
                text: "shown".into(),
                is_error: false,
                structured_content: None,
                call_tool_result: Some(json!({"content": [], "_meta": {"k": 1}})),
            },
            json!({"type": "tool_result", "id": "t3", "text": "shown", "isError": false, "callToolResult": {"content": [], "_meta": {"k": 1}}}),
        ),
        (
            AgentEvent::Error {
                error: "boom".into(),
            },
            json!({"type": "error", "error": "boom"}),
        ),
        (
            AgentEvent::Result {
                text: "All done".into(),
                is_error: false,
            },
            json!({"type": "result", "text": "All done", "isError": false}),
        ),
        (AgentEvent::Done, json!({"type": "done"})),
    ];
    for (event, expected) in cases {
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            expected
        );
        // Field order on the wire: `type` first, as browser hosts print it.
        assert!(text.starts_with(r#"{"type":""#), "{text}");
        assert_eq!(serde_json::from_str::<AgentEvent>(&text).unwrap(), event);
    }
}
