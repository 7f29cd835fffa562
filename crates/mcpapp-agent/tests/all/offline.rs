//! The offline command mode against in-test tools: `/tools`, `/call`, `name, key=value`, help,
//! and UI events, through real agent turns.

use mcpapp_agent::{AgentEvent, AppEvent, TurnRequest};
use serde_json::json;

use crate::{error_text, grocery_registry, offline_agent, result_text, run, types};

#[tokio::test]
async fn tools_lists_registered_names_and_descriptions() {
    let agent = offline_agent(grocery_registry());
    let events = run(&agent, TurnRequest::message("/tools")).await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    let text = result_text(&events);
    assert!(text.starts_with("[offline mode]"), "{text}");
    assert!(text.contains("4 tool(s)"), "{text}");
    assert!(
        text.contains(
            "- grocery.get_low_stock: List inventory items at or below their reorder threshold"
        ),
        "{text}"
    );
    assert!(
        text.contains("- wx.forecast: Weather forecast for a city"),
        "{text}"
    );
    // The streamed text and the result agree.
    assert_eq!(events[1], AgentEvent::Text { text });
}

#[tokio::test]
async fn call_with_json_runs_the_tool_and_summarises_its_result() {
    let agent = offline_agent(grocery_registry());
    let events = run(
        &agent,
        TurnRequest::message(r#"/call grocery.get_low_stock {"storeId": 1}"#),
    )
    .await;
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
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
    assert!(text.contains(r#""product":"Apples""#), "{text}");
    let summary = result_text(&events);
    assert!(
        summary.starts_with("[offline mode] grocery.get_low_stock returned:"),
        "{summary}"
    );
    assert!(summary.contains("Milk"), "{summary}");
}

#[tokio::test]
async fn call_accepts_an_unprefixed_name_and_no_arguments() {
    let agent = offline_agent(grocery_registry());
    let events = run(
        &agent,
        TurnRequest::message("/call get_stores").in_session("s1"),
    )
    .await;
    let AgentEvent::Tool { name, input, .. } = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(name, "grocery.get_stores");
    assert_eq!(input, &json!({}));
    // The tool sees the session id of the turn.
    assert!(result_text(&events).contains("grocery.get_stores in s1 got {}"));
}

#[tokio::test]
async fn call_reports_bad_json_and_unknown_tools_without_calling() {
    let agent = offline_agent(grocery_registry());
    let events = run(
        &agent,
        TurnRequest::message("/call get_low_stock {storeId: 1}"),
    )
    .await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    assert!(result_text(&events).contains("not valid JSON"));

    let events = run(&agent, TurnRequest::message("/call nothing.here {}")).await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    assert!(result_text(&events).contains("no tool named 'nothing.here'"));
}

#[tokio::test]
async fn name_and_pairs_call_with_typed_values() {
    let agent = offline_agent(grocery_registry());
    let events = run(&agent, TurnRequest::message("get_low_stock, storeId=1")).await;
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
    );
    let AgentEvent::Tool { input, .. } = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(input, &json!({"storeId": 1}));
    assert!(result_text(&events).contains("Apples"));

    let events = run(
        &agent,
        TurnRequest::message(
            r#"grocery.adjust_stock, storeId=2, delta=-1.5, dry=true, note="a, b", who=Ann Lee, x=null"#,
        ),
    )
    .await;
    let AgentEvent::Tool { name, input, .. } = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(name, "grocery.adjust_stock");
    assert_eq!(
        input,
        &json!({"storeId": 2, "delta": -1.5, "dry": true, "note": "a, b", "who": "Ann Lee", "x": null})
    );
}

#[tokio::test]
async fn failing_tools_are_reported_as_failures() {
    let agent = offline_agent(grocery_registry());
    let events = run(&agent, TurnRequest::message("get_low_stock, storeId=one")).await;
    let AgentEvent::ToolResult { text, is_error, .. } = &events[2] else {
        panic!("{events:?}")
    };
    assert!(is_error);
    assert!(text.starts_with("Error: "), "{text}");
    let summary = result_text(&events);
    assert!(
        summary.contains("grocery.get_low_stock failed"),
        "{summary}"
    );
}

#[tokio::test]
async fn other_messages_get_help_naming_matching_tools() {
    let agent = offline_agent(grocery_registry());
    let events = run(
        &agent,
        TurnRequest::message("Which items are low on stock?"),
    )
    .await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    let text = result_text(&events);
    assert!(text.starts_with("[offline mode]"), "{text}");
    assert!(text.contains("/tools"), "{text}");
    assert!(text.contains("/call TOOL {json}"), "{text}");
    let matches = text.lines().last().unwrap();
    assert!(matches.contains("grocery.get_low_stock"), "{text}");
    assert!(matches.contains("grocery.adjust_stock"), "{text}");
    assert!(!matches.contains("wx.forecast"), "{text}");

    let events = run(&agent, TurnRequest::message("weather tomorrow")).await;
    let text = result_text(&events);
    assert!(
        text.lines().last().unwrap().contains("wx.forecast"),
        "{text}"
    );
    assert!(!text.contains("grocery"), "{text}");

    // A tool name followed by prose is not a call.
    let events = run(&agent, TurnRequest::message("get_stores is it working")).await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
}

#[tokio::test]
async fn ambiguous_short_names_are_not_guessed() {
    let registry = grocery_registry();
    registry
        .register(
            "mcpapp:other",
            mcpapp_bridge::ToolSource::Native,
            vec![crate::echo("other.get_stores", "Other stores")],
        )
        .unwrap();
    let agent = offline_agent(registry);
    let events = run(&agent, TurnRequest::message("/call get_stores {}")).await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    let text = result_text(&events);
    assert!(
        text.contains("grocery.get_stores, other.get_stores"),
        "{text}"
    );
}

#[tokio::test]
async fn ui_events_with_or_without_a_command() {
    let agent = offline_agent(grocery_registry());
    let ui = AppEvent {
        tool: Some("grocery.adjust_stock".into()),
        args: Some(json!({"storeId": 1, "delta": 5})),
        result_text: Some("ok\n8 on hand".into()),
        count: None,
    };
    let request = TurnRequest {
        app_events: vec![ui.clone()],
        ..TurnRequest::default()
    };
    let events = run(&agent, request).await;
    assert_eq!(types(&events), ["session", "text", "result", "done"]);
    assert!(result_text(&events).contains("Noted 1 UI event(s)"));

    let request = TurnRequest {
        message: Some("get_low_stock, storeId=1".into()),
        app_events: vec![ui],
        ..TurnRequest::default()
    };
    let events = run(&agent, request).await;
    assert_eq!(
        types(&events),
        ["session", "tool", "tool_result", "text", "result", "done"]
    );
}

#[tokio::test]
async fn an_empty_request_is_an_error_that_still_ends_with_done() {
    let agent = offline_agent(grocery_registry());
    let events = run(&agent, TurnRequest::message("  ")).await;
    assert_eq!(types(&events), ["session", "error", "done"]);
    assert!(error_text(&events).contains("neither a message nor UI events"));
    assert_eq!(
        agent.session_count(),
        0,
        "no session for a rejected request"
    );
}
