//! `--era`: the fixture as a 2026-07-28-only app, as a dual-era app, and as today's legacy app,
//! driven by real rmcp clients pinned to either era and by raw bytes.

use std::collections::BTreeSet;

use rmcp::model::{
    CallToolRequest, CallToolResponse, ClientRequest, ElicitRequestParams, ErrorCode, InputRequest,
    InputResponses, ProtocolVersion, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{ClientInitializeError, PeerRequestOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use mcpapp_testkit::{
    Elicit, Event, Over, PATIENCE, call_params, eventually, over_both_transports, structured, text,
    within,
};

use crate::support::{
    Fixture, Options, Session, client, connect_with, fixture_command, try_connect_with,
};

/// The `_meta` a 2026-07-28 request carries, declaring form elicitation.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-tests", "version": "0.0.1"},
    })
}

/// Starts the fixture with `--era ERA` and connects a client pinned to 2026-07-28.
async fn modern(kind: Over, era: &str, elicit: Elicit, extra: &[&str]) -> Session {
    let mut args = vec!["--era".to_owned(), era.to_owned()];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    connect_with(
        kind,
        Options {
            client: client(elicit).discover(),
            args,
            ..Options::default()
        },
    )
    .await
}

/// Starts the fixture with `args` and connects a legacy client asking for 2025-11-25.
async fn legacy(kind: Over, elicit: Elicit, args: &[&str]) -> Session {
    connect_with(
        kind,
        Options {
            client: client(elicit),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..Options::default()
        },
    )
    .await
}

over_both_transports!(
    modern_client_lists_and_calls_tools_on_modern,
    modern_client_lists_and_calls_tools_on_both,
    modern_elicitation_runs_through_input_required_rounds,
    modern_input_required_rounds_by_hand,
    modern_listen_receives_list_changes_and_resource_updates,
    modern_cancelled_calls_are_counted,
    modern_progress_and_log_travel_on_the_request,
    legacy_client_is_refused_by_modern,
    legacy_era_refuses_a_2026_client,
    both_serves_a_legacy_client_as_today,
    legacy_sessions_subscribe_and_hear_touch_resource,
);

async fn lists_and_calls_tools(kind: Over, era: &str) {
    let s = modern(kind, era, Elicit::Decline, &[]).await;
    let tools = within("tools/list", s.client.list_all_tools())
        .await
        .unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for name in ["echo", "elicit", "hang", "touch_resource", "client_info"] {
        assert!(names.contains(name), "{name} missing from {names:?}");
    }
    let echoed = s.call("echo", json!({"message": "héllo 2026"})).await;
    assert_eq!(text(&echoed), "héllo 2026");
    assert_eq!(structured(&echoed), &json!({"message": "héllo 2026"}));

    // client_info reports the request's own metadata, not a handshake's.
    let info = s.call("client_info", json!({})).await;
    let info = structured(&info);
    assert_eq!(info["clientInfo"]["name"], "fixture-tests", "{info}");
    assert_eq!(info["clientInfo"]["version"], "2.5.0");
    assert_eq!(info["protocolVersion"], "2026-07-28");
    assert_eq!(info["negotiatedProtocolVersion"], "2026-07-28");
    assert!(info["capabilities"]["elicitation"].is_object(), "{info}");

    // Capabilities are the same in every era.
    let server = s.client.peer_info().expect("the discover result");
    let capabilities = serde_json::to_value(&server.capabilities).unwrap();
    assert_eq!(capabilities["tools"]["listChanged"], true, "{capabilities}");
    assert_eq!(capabilities["resources"]["listChanged"], true);
    assert_eq!(capabilities["resources"]["subscribe"], true);
}

async fn modern_client_lists_and_calls_tools_on_modern(kind: Over) {
    lists_and_calls_tools(kind, "modern").await;
}

async fn modern_client_lists_and_calls_tools_on_both(kind: Over) {
    lists_and_calls_tools(kind, "both").await;
}

async fn modern_elicitation_runs_through_input_required_rounds(kind: Over) {
    for era in ["modern", "both"] {
        let mut s = modern(
            kind,
            era,
            Elicit::Accept(json!({"name": "Ada", "agree": true})),
            &[],
        )
        .await;
        // RunningService::call_tool answers the input request through the handler and retries.
        let accepted = s.call("elicit", json!({"message": "Who are you?"})).await;
        assert_eq!(text(&accepted), r#"accepted: {"name":"Ada","agree":true}"#);
        assert_eq!(
            structured(&accepted),
            &json!({"action": "accept", "content": {"name": "Ada", "agree": true}})
        );
        let Event::ElicitationAsked { message, schema } = s.next_event().await else {
            panic!("expected the elicitation");
        };
        assert_eq!(message, "Who are you?");
        assert_eq!(schema["properties"]["agree"]["type"], "boolean");

        let cancelling = modern(kind, era, Elicit::Cancel, &[]).await;
        let cancelled = cancelling.call("elicit", json!({"message": "?"})).await;
        assert_eq!(text(&cancelled), "cancelled");

        // No elicitation capability in the request: a tool error, never an input request.
        let unable = modern(kind, era, Elicit::Unsupported, &[]).await;
        let refused = unable.call("elicit", json!({"message": "?"})).await;
        assert_eq!(refused.is_error, Some(true));
        assert!(text(&refused).contains("did not declare form elicitation"));
    }
}

async fn modern_input_required_rounds_by_hand(kind: Over) {
    let s = modern(kind, "modern", Elicit::Decline, &[]).await;
    let once = |p| async {
        within("tools/call once", s.client.call_tool_once(p))
            .await
            .unwrap()
    };
    let first = call_params("elicit", json!({"message": "Name?"}));
    let CallToolResponse::InputRequired(asked) = once(first.clone()).await else {
        panic!("the first round is not input-required");
    };
    let requests = asked.input_requests.as_ref().expect("inputRequests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["form"]);
    let InputRequest::Elicitation(form) = &requests["form"] else {
        panic!("the form is not an elicitation: {requests:?}");
    };
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = &form.params
    else {
        panic!("not a form elicitation");
    };
    assert_eq!(message, "Name?");
    let schema = serde_json::to_value(requested_schema).unwrap();
    assert_eq!(schema["properties"]["name"]["type"], "string");
    let state = asked.request_state.clone().expect("requestState");
    let reason = |r: &rmcp::model::InputRequiredResult| {
        r.meta
            .as_ref()
            .and_then(|m| m.get("fixture/askedBecause"))
            .cloned()
    };
    assert_eq!(reason(&asked), Some(json!("first round")));

    let declined = InputResponses::from([("form".to_owned(), json!({"action": "decline"}))]);
    // The echoed state and the answer complete the call.
    let retry = first
        .clone()
        .with_request_state(state.clone())
        .with_input_responses(declined.clone());
    let CallToolResponse::Complete(done) = once(retry).await else {
        panic!("the retry did not complete");
    };
    assert_eq!(text(&done), "declined");

    // A state that belongs to another call, no state, or no answer: asked again.
    let wrong = first
        .clone()
        .with_request_state(format!("{state}x"))
        .with_input_responses(declined.clone());
    let CallToolResponse::InputRequired(again) = once(wrong).await else {
        panic!("a wrong requestState was accepted");
    };
    assert_eq!(
        reason(&again),
        Some(json!("requestState does not match this call"))
    );
    assert_eq!(again.request_state.as_deref(), Some(state.as_str()));
    let stateless = first.clone().with_input_responses(declined);
    let CallToolResponse::InputRequired(again) = once(stateless).await else {
        panic!("a missing requestState was accepted");
    };
    assert_eq!(reason(&again), Some(json!("requestState missing")));
    let unanswered = first.clone().with_request_state(state.clone());
    let CallToolResponse::InputRequired(again) = once(unanswered).await else {
        panic!("a retry without the answer completed");
    };
    assert_eq!(
        reason(&again),
        Some(json!("inputResponses has no form answer"))
    );

    // An answer that is no elicitation result is a protocol error.
    let garbage = first
        .with_request_state(state)
        .with_input_responses(InputResponses::from([(
            "form".to_owned(),
            json!({"action": "shrug"}),
        )]));
    let error = within("tools/call once", s.client.call_tool_once(garbage))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("expected a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(
        error.message.contains("not an elicitation result"),
        "{error:?}"
    );
}

/// The next notification on a listen stream.
async fn next_on(sub: &mut rmcp::service::Subscription) -> ServerNotification {
    within("a notification on the listen stream", sub.next())
        .await
        .expect("the listen stream works")
        .expect("the listen stream is open")
}

async fn modern_listen_receives_list_changes_and_resource_updates(kind: Over) {
    let s = modern(kind, "modern", Elicit::Unsupported, &[]).await;
    let watched = "fixture://watched";
    let mut all = within(
        "listen",
        s.client.listen(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .resource_subscription(watched)
                .build(),
        ),
    )
    .await
    .unwrap();
    // No prompts capability, so no prompt notifications are promised.
    assert_eq!(
        all.acknowledged(),
        &SubscriptionFilter::builder()
            .tools_list_changed()
            .resources_list_changed()
            .resource_subscription(watched)
            .build()
    );
    let mut tools_only = within(
        "listen",
        s.client
            .listen(SubscriptionFilter::builder().tools_list_changed().build()),
    )
    .await
    .unwrap();

    let added = s.call("notify_tools_changed", json!({})).await;
    assert_eq!(structured(&added)["added"], "added_tool_1");
    for sub in [&mut all, &mut tools_only] {
        assert!(matches!(
            next_on(sub).await,
            ServerNotification::ToolListChangedNotification(_)
        ));
    }
    let tools = within("tools/list", s.client.list_all_tools())
        .await
        .unwrap();
    assert!(tools.iter().any(|t| t.name == "added_tool_1"));

    s.call("notify_resources_changed", json!({})).await;
    assert!(matches!(
        next_on(&mut all).await,
        ServerNotification::ResourceListChangedNotification(_)
    ));
    let other = s
        .call("touch_resource", json!({"uri": "fixture://other"}))
        .await;
    assert_eq!(
        structured(&other),
        &json!({"uri": "fixture://other", "sessions": 0, "listens": 0})
    );
    let touched = s.call("touch_resource", json!({"uri": watched})).await;
    assert_eq!(
        structured(&touched),
        &json!({"uri": watched, "sessions": 0, "listens": 1})
    );
    let ServerNotification::ResourceUpdatedNotification(updated) = next_on(&mut all).await else {
        panic!("expected the resource update");
    };
    assert_eq!(updated.params.uri, watched);

    // The tools-only stream got neither resource notification: its next one is the next
    // tools change.
    s.call("notify_tools_changed", json!({})).await;
    assert!(matches!(
        next_on(&mut tools_only).await,
        ServerNotification::ToolListChangedNotification(_)
    ));

    // A closed stream is no longer a target.
    within("cancel the listen", all.cancel()).await.unwrap();
    let mut after = Value::Null;
    let gone = eventually(PATIENCE, async || {
        let touched = s.call("touch_resource", json!({"uri": watched})).await;
        after = structured(&touched).clone();
        after["listens"] == 0
    })
    .await;
    assert!(gone, "the cancelled listen is still a target: {after}");
    assert_eq!(after["sessions"], 0);
}

async fn modern_cancelled_calls_are_counted(kind: Over) {
    let calls = [("hang", json!({})), ("slow", json!({"ms": 600_000}))];
    for era in ["modern", "both"] {
        for (tool, args) in &calls {
            // The noise line for the call tells us the server is inside the tool.
            let mut s = modern(kind, era, Elicit::Unsupported, &["--stderr-noise", "0"]).await;
            let none = s.call("cancellations", json!({})).await;
            assert_eq!(structured(&none), &json!({"count": 0}));
            let handle = within(
                "send the call",
                s.client.peer().send_cancellable_request(
                    ClientRequest::CallToolRequest(CallToolRequest::new(call_params(
                        tool,
                        args.clone(),
                    ))),
                    PeerRequestOptions::no_options(),
                ),
            )
            .await
            .unwrap();
            s.app.stderr_line(&format!("tool call 2: {tool}")).await;
            // stdio: notifications/cancelled; HTTP at 2026-07-28: the response stream closes.
            within(
                "cancel the call",
                handle.cancel(Some("test cancels".into())),
            )
            .await
            .unwrap();
            let counted = s.call("cancellations", json!({"waitMs": 20000})).await;
            assert_eq!(
                structured(&counted),
                &json!({"count": 1}),
                "{tool} on era {era}"
            );
        }
    }
}

async fn modern_progress_and_log_travel_on_the_request(kind: Over) {
    let mut s = modern(kind, "modern", Elicit::Unsupported, &[]).await;
    let result = s.call("progress", json!({"steps": 3, "delayMs": 5})).await;
    let token = structured(&result)["progressToken"].clone();
    assert_ne!(token, Value::Null, "rmcp always sends a progressToken");
    // rmcp's client hands each notification to its handler in a task of its own, so the
    // three may reach the test in any order; what matters is that all three travel with the
    // request's token.
    let mut steps = Vec::new();
    for _ in 1..=3 {
        let Event::Progress(p) = s.next_event().await else {
            panic!("expected progress");
        };
        assert_eq!(serde_json::to_value(&p.progress_token).unwrap(), token);
        steps.push(p.progress);
    }
    steps.sort_by(f64::total_cmp);
    assert_eq!(steps, [1.0, 2.0, 3.0]);

    // Without a logLevel in the request, 2026-07-28 sends no log messages.
    let silent = s
        .call("log", json!({"level": "error", "message": "unheard"}))
        .await;
    assert_eq!(structured(&silent)["sent"], false);
    let quiet = s
        .call_with_meta(
            "log",
            json!({"level": "info", "message": "too quiet"}),
            json!({"io.modelcontextprotocol/logLevel": "warning"}),
        )
        .await;
    assert_eq!(structured(&quiet)["sent"], false);
    let loud = s
        .call_with_meta(
            "log",
            json!({"level": "warning", "message": "disk almost full"}),
            json!({"io.modelcontextprotocol/logLevel": "info"}),
        )
        .await;
    assert_eq!(structured(&loud)["sent"], true);
    // The first event after the progress is the one sent log message.
    let Event::Log { level, data } = s.next_event().await else {
        panic!("expected a log message");
    };
    assert_eq!(
        (level.as_str(), data),
        ("warning", json!("disk almost full"))
    );
}

async fn legacy_client_is_refused_by_modern(kind: Over) {
    let refused = try_connect_with(
        kind,
        Options {
            args: vec!["--era".into(), "modern".into()],
            ..Options::default()
        },
    )
    .await;
    let Err(ClientInitializeError::JsonRpcError(error)) = refused else {
        panic!("a legacy client was not refused with a JSON-RPC error");
    };
    assert_eq!(error.code, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION);
    assert_eq!(error.code.0, -32022);
    let data = error.data.expect("error data");
    assert_eq!(data["supported"], json!(["2026-07-28"]));
    assert_eq!(data["requested"], "2025-11-25");
}

async fn legacy_era_refuses_a_2026_client(kind: Over) {
    // The default era is capped at 2025-11-25, so a 2026-only client finds nothing in common.
    let refused = try_connect_with(
        kind,
        Options {
            client: client(Elicit::Unsupported).discover(),
            ..Options::default()
        },
    )
    .await;
    let Err(ClientInitializeError::NoCompatibleProtocolVersion {
        server_supported, ..
    }) = refused
    else {
        panic!("a 2026 client was not refused for want of a common version");
    };
    assert_eq!(
        server_supported,
        ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
    );
}

async fn both_serves_a_legacy_client_as_today(kind: Over) {
    let mut s = legacy(
        kind,
        Elicit::Accept(json!({"name": "Ada", "agree": true})),
        &["--era", "both"],
    )
    .await;
    assert_eq!(
        s.client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2025_11_25
    );
    // The elicitation is a server request inside the call: the single response is complete.
    let once = within(
        "tools/call once",
        s.client
            .call_tool_once(call_params("elicit", json!({"message": "Who?"}))),
    )
    .await
    .unwrap();
    let CallToolResponse::Complete(done) = once else {
        panic!("a legacy session got an input-required result");
    };
    assert_eq!(text(&done), r#"accepted: {"name":"Ada","agree":true}"#);
    assert!(matches!(
        s.next_event().await,
        Event::ElicitationAsked { .. }
    ));
    let info = s.call("client_info", json!({})).await;
    assert_eq!(structured(&info)["protocolVersion"], "2025-11-25");
    assert_eq!(structured(&info)["negotiatedProtocolVersion"], "2025-11-25");
    s.call("notify_tools_changed", json!({})).await;
    assert!(matches!(s.next_event().await, Event::ToolListChanged));
    s.call("log", json!({"level": "debug", "message": "legacy logs"}))
        .await;
    let Event::Log { data, .. } = s.next_event().await else {
        panic!("expected the log message");
    };
    assert_eq!(data, json!("legacy logs"));
}

// resources/subscribe is deprecated by 2026-07-28 but is how legacy sessions subscribe.
#[allow(deprecated)]
async fn legacy_sessions_subscribe_and_hear_touch_resource(kind: Over) {
    for args in [&[][..], &["--era", "both"][..]] {
        let mut s = legacy(kind, Elicit::Unsupported, args).await;
        let capabilities = &s.client.peer_info().unwrap().capabilities;
        assert_eq!(
            capabilities.resources.as_ref().and_then(|r| r.subscribe),
            Some(true)
        );
        let uri = "fixture://watched";
        let unheard = s.call("touch_resource", json!({"uri": uri})).await;
        assert_eq!(structured(&unheard)["sessions"], 0, "not subscribed yet");
        within(
            "resources/subscribe",
            s.client
                .subscribe(rmcp::model::SubscribeRequestParams::new(uri)),
        )
        .await
        .unwrap();
        let touched = s.call("touch_resource", json!({"uri": uri})).await;
        assert_eq!(
            structured(&touched),
            &json!({"uri": uri, "sessions": 1, "listens": 0})
        );
        let Event::ResourceUpdated(updated) = s.next_event().await else {
            panic!("expected the resource update");
        };
        assert_eq!(updated, uri);
        within(
            "resources/unsubscribe",
            s.client
                .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(uri)),
        )
        .await
        .unwrap();
        let after = s.call("touch_resource", json!({"uri": uri})).await;
        assert_eq!(structured(&after)["sessions"], 0, "{args:?}");
    }
}

/// Both kinds of client on one dual-era HTTP process: a change made by either reaches the
/// other's way of hearing about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)]
async fn both_era_changes_reach_legacy_sessions_and_listen_streams() {
    let modern_s = modern(Over::Http, "both", Elicit::Unsupported, &[]).await;
    let url = modern_s.app.mcp_url.clone();
    let mut legacy_c = client(Elicit::Unsupported).http(&url).await;
    let uri = "fixture://shared";
    within(
        "resources/subscribe",
        legacy_c
            .client
            .subscribe(rmcp::model::SubscribeRequestParams::new(uri)),
    )
    .await
    .unwrap();
    let mut sub = within(
        "listen",
        modern_s.client.listen(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .resource_subscription(uri)
                .build(),
        ),
    )
    .await
    .unwrap();

    // The legacy session adds a tool: it hears of it itself, and so does the listen stream.
    legacy_c.call("notify_tools_changed", json!({})).await;
    assert!(matches!(
        legacy_c.next_event().await,
        Event::ToolListChanged
    ));
    assert!(matches!(
        next_on(&mut sub).await,
        ServerNotification::ToolListChangedNotification(_)
    ));

    // The modern client touches the resource: both subscribers hear of it.
    let touched = modern_s.call("touch_resource", json!({"uri": uri})).await;
    assert_eq!(
        structured(&touched),
        &json!({"uri": uri, "sessions": 1, "listens": 1})
    );
    let ServerNotification::ResourceUpdatedNotification(updated) = next_on(&mut sub).await else {
        panic!("expected the resource update on the listen stream");
    };
    assert_eq!(updated.params.uri, uri);
    assert!(matches!(
        legacy_c.next_event().await,
        Event::ResourceUpdated(u) if u == uri
    ));
}

/// Raw stdio against `--era modern`: `initialize` is refused with `-32022` naming the
/// supported versions, and the same pipes then serve 2026-07-28 requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_stdio_refuses_initialize_and_keeps_serving() {
    let (mut fixture, stdout, mut stdin) =
        Fixture::spawn(fixture_command(&["stdio", "--era", "modern"]));
    let mut lines = BufReader::new(stdout).lines();
    let mut exchange = async |request: Value| -> Value {
        let mut line = request.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.unwrap();
        let answer = within("a stdout line", lines.next_line())
            .await
            .unwrap()
            .expect("stdout open");
        serde_json::from_str(&answer).unwrap()
    };
    let refused = exchange(json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    }))
    .await;
    assert_eq!(refused["id"], 1);
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["supported"], json!(["2026-07-28"]));

    let discovered = exchange(json!({
        "jsonrpc": "2.0", "id": 2, "method": "server/discover",
        "params": {"_meta": modern_meta()},
    }))
    .await;
    let result = &discovered["result"];
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28"]),
        "{discovered}"
    );
    assert_eq!(result["capabilities"]["resources"]["subscribe"], true);
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);

    // The input-required result on the wire.
    let asked = exchange(json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"_meta": modern_meta(), "name": "elicit", "arguments": {"message": "Name?"}},
    }))
    .await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert_eq!(
        result["inputRequests"]["form"]["method"],
        "elicitation/create"
    );
    assert_eq!(
        result["inputRequests"]["form"]["params"]["message"],
        "Name?"
    );
    let state = result["requestState"].as_str().expect("requestState");
    let answered = exchange(json!({
        "jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"_meta": modern_meta(), "name": "elicit", "arguments": {"message": "Name?"},
                   "inputResponses": {"form": {"action": "accept", "content": {"name": "Bo", "agree": false}}},
                   "requestState": state},
    }))
    .await;
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    assert_eq!(
        answered["result"]["content"][0]["text"],
        r#"accepted: {"name":"Bo","agree":false}"#
    );
    assert!(fixture.is_alive());
}

/// Raw HTTP against `--era modern` and `--era both`: what a 2026-only server looks like from
/// outside (no session, GET and DELETE 405), and what each era's discovery lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_http_has_no_sessions_and_discovery_lists_the_era() {
    let http = reqwest::Client::new();
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                          "params": {"_meta": modern_meta()}});
    let post = |url: &str, body: &Value, modern: bool| {
        let mut request = http
            .post(url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if modern {
            let method = body["method"].as_str().unwrap_or_default().to_owned();
            request = request
                .header("MCP-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", method);
        }
        request.send()
    };
    let body_json = async |response: reqwest::Response| -> Value {
        let text = response.text().await.unwrap();
        // An event stream carries the message on a `data:` line.
        let payload = text
            .lines()
            .find_map(|l| l.strip_prefix("data:").filter(|d| !d.trim().is_empty()))
            .unwrap_or(&text);
        serde_json::from_str(payload.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
    };

    let fixture = Fixture::http(&["--era", "modern"]).await;
    let url = fixture.mcp_url.clone();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}});
    let refused = within("initialize", post(&url, &init, false))
        .await
        .unwrap();
    assert!(
        refused.headers().get("mcp-session-id").is_none(),
        "a 2026-only server minted a session"
    );
    let refused = body_json(refused).await;
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["supported"], json!(["2026-07-28"]));
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let answer = within(
            "GET/DELETE",
            http.request(method.clone(), &url)
                .header("Accept", "text/event-stream")
                .header("MCP-Protocol-Version", "2026-07-28")
                .send(),
        )
        .await
        .unwrap();
        assert_eq!(answer.status(), 405, "{method}");
    }
    // A request with neither the header nor the _meta version is not served as 2025-03-26.
    let bare = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let bare = within("bare tools/list", post(&url, &bare, false))
        .await
        .unwrap();
    assert_eq!(bare.status(), 400);
    let found = within("discover", post(&url, &discover, true))
        .await
        .unwrap();
    assert_eq!(found.status(), 200);
    assert_eq!(
        body_json(found).await["result"]["supportedVersions"],
        json!(["2026-07-28"])
    );

    let both = Fixture::http(&["--era", "both"]).await;
    let found = within("discover", post(&both.mcp_url, &discover, true))
        .await
        .unwrap();
    let versions: Vec<String> = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        body_json(found).await["result"]["supportedVersions"],
        json!(versions)
    );
}

/// Flags that need legacy sessions are refused with `--era modern`, naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_refuses_session_flags() {
    let (mut fixture, _stdout, _stdin) = Fixture::spawn(fixture_command(&[
        "http",
        "--era",
        "modern",
        "--strict-lifecycle",
    ]));
    let line = fixture.stderr_line("--strict-lifecycle").await;
    assert!(line.contains("--era modern"), "{line}");
    assert_eq!(fixture.exit_status().await.code(), Some(1));
}

/// `--strict-lifecycle` with `--era both` keeps refusing early legacy requests but lets
/// 2026-07-28 requests, which have no lifecycle, through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_lifecycle_leaves_modern_requests_alone() {
    let s = modern(
        Over::Http,
        "both",
        Elicit::Unsupported,
        &["--strict-lifecycle"],
    )
    .await;
    let echoed = s.call("echo", json!({"message": "no lifecycle"})).await;
    assert_eq!(text(&echoed), "no lifecycle");
}

/// A change caused right after a listen request reaches its stream even when rmcp hands the
/// stream to the fixture only after the change (the listen and the call are written together,
/// so the call need not wait for the acknowledgment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_hears_changes_made_before_it_is_set_up() {
    for round in 0..5 {
        let (_fixture, stdout, mut stdin) =
            Fixture::spawn(fixture_command(&["stdio", "--era", "modern"]));
        let listen = json!({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
            "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": true}}});
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"_meta": modern_meta(), "name": "notify_tools_changed", "arguments": {}}});
        let both = format!("{listen}\n{call}\n");
        stdin.write_all(both.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let (mut acked, mut answered, mut heard) = (false, false, false);
        within("the ack, the answer and the notification", async {
            while !(acked && answered && heard) {
                let line = lines.next_line().await.unwrap().expect("stdout open");
                let message: Value = serde_json::from_str(&line).unwrap();
                let subscription =
                    &message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"];
                match message["method"].as_str() {
                    Some("notifications/subscriptions/acknowledged") => {
                        assert_eq!(subscription, "L");
                        acked = true;
                    }
                    Some("notifications/tools/list_changed") => {
                        assert!(acked, "round {round}: the change came before the ack");
                        assert_eq!(subscription, "L");
                        assert!(!heard, "round {round}: the change came twice");
                        heard = true;
                    }
                    _ if message["id"] == 2 => answered = true,
                    _ => panic!("unexpected {message}"),
                }
            }
        })
        .await;
    }
}
