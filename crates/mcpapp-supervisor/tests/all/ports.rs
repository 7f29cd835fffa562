//! Ports: browser sessions sharing an app's one upstream session with the gateway, byte for
//! byte, over stdio and HTTP.

use std::time::Duration;

use mcpapp_manifest::Lifecycle;
use mcpapp_session::{Port, PortError, PortReply, RawMessage};
use mcpapp_supervisor::{AppHandle, Supervisor};
use mcpapp_testkit::{AppsDir, Over, bin, wait_state};
use serde_json::{Value, json};

use crate::{PATIENCE, fast_policy, supervise};

pub(crate) fn msg(value: Value) -> RawMessage {
    RawMessage::from_value(&value).unwrap()
}

/// Sends a request and collects everything that comes back for it.
pub(crate) async fn exchange(port: &Port, request: Value) -> Vec<RawMessage> {
    match port.send(msg(request)).await.unwrap() {
        PortReply::Response(response) => vec![response],
        PortReply::Accepted => Vec::new(),
        PortReply::Stream(mut stream) => {
            let mut out = Vec::new();
            while let Some(message) = tokio::time::timeout(PATIENCE, stream.next()).await.unwrap() {
                out.push(message);
            }
            out
        }
    }
}

pub(crate) fn json_of(message: &RawMessage) -> Value {
    serde_json::from_str(message.as_str()).unwrap()
}

/// An `initialize` request as a browser client sends it.
fn initialize(version: &str, elicitation: bool) -> RawMessage {
    msg(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": if elicitation { json!({"elicitation": {}}) } else { json!({}) },
        "clientInfo": {"name": "browser", "version": "1"}}}),
    )
}

pub(crate) async fn open(app: &AppHandle, elicitation: bool) -> Port {
    let (port, init) = app
        .open_port(&initialize("2025-11-25", elicitation))
        .await
        .unwrap();
    let init = json_of(&init);
    assert_eq!(init["id"], 0);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    port
}

pub(crate) async fn running(apps: &AppsDir, id: &str) -> (Supervisor, AppHandle) {
    let supervisor = supervise(&apps.discover(), fast_policy());
    let app = supervisor.get(id).unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    (supervisor, app)
}

/// Twenty echo calls through a port, with ids 0..20 that collide with every other caller's.
async fn port_calls(port: &Port, who: &str) {
    for i in 0..20 {
        let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"message": format!("{who}-{i}")}}});
        let replies = exchange(port, call).await;
        assert_eq!(replies.len(), 1);
        let reply = json_of(&replies[0]);
        assert_eq!(reply["id"], i, "{who}: {reply}");
        assert_eq!(
            reply["result"]["structuredContent"]["message"],
            format!("{who}-{i}")
        );
    }
}

#[tokio::test]
async fn two_ports_and_the_agent_share_one_session_and_see_only_their_own_answers() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("shared", "fixture-app", over);
        let (supervisor, app) = running(&apps, "shared").await;
        let a = open(&app, false).await;
        let b = open(&app, false).await;
        let agent_calls = async {
            for i in 0..20 {
                let result = app
                    .call_tool(
                        "echo",
                        Some(
                            json!({"message": format!("agent-{i}")})
                                .as_object()
                                .unwrap()
                                .clone(),
                        ),
                        None,
                    )
                    .await
                    .unwrap();
                assert_eq!(
                    result.structured_content.unwrap()["message"],
                    format!("agent-{i}")
                );
            }
        };
        tokio::join!(port_calls(&a, "a"), port_calls(&b, "b"), agent_calls);
        // One session: for stdio, one process served everyone.
        if over == Over::Stdio {
            assert_eq!(app.snapshot().restart_count, 0);
        }
        drop((a, b));
        supervisor.shutdown().await;
    }
}

/// Messages far larger than a pipe's buffer (64 KiB) cannot be written to the child's stdin
/// in one write: four ports sending such calls at the same time must each get their own
/// message back, whole (no line split by another, none reordered or lost).
#[tokio::test]
async fn messages_larger_than_the_pipe_reach_a_stdio_app_whole_and_in_order() {
    let apps = AppsDir::new();
    let _server = apps.test_app("big", "fixture-app", Over::Stdio);
    let (supervisor, app) = running(&apps, "big").await;
    let mut ports = Vec::new();
    for _ in 0..4 {
        ports.push(open(&app, false).await);
    }
    let calls = ports.iter().enumerate().map(|(p, port)| async move {
        for i in 0..5 {
            // A different letter per port and call, so a line spliced into another would show.
            let letter = char::from(b'a' + u8::try_from(p * 5 + i).unwrap());
            let message: String = std::iter::repeat_n(letter, 300 * 1024 + p * 7 + i).collect();
            let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": "echo", "arguments": {"message": message}}});
            let replies = exchange(port, call).await;
            assert_eq!(replies.len(), 1);
            let reply = json_of(&replies[0]);
            assert_eq!(reply["id"], i);
            assert!(
                reply["result"]["structuredContent"]["message"] == message.as_str(),
                "port {p}, call {i}: the echo differs from the {} bytes sent",
                message.len()
            );
        }
    });
    futures::future::join_all(calls).await;
    assert_eq!(app.snapshot().restart_count, 0);
    drop(ports);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn vendor_fields_and_number_spelling_survive_the_round_trip() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("vendor", "fixture-app", over);
        let (supervisor, app) = running(&apps, "vendor").await;
        let port = open(&app, false).await;
        let replies = exchange(
            &port,
            json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}),
        )
        .await;
        let text = replies[0].as_str();
        assert!(text.contains(r#""x-vendor":{"fixture":true}"#), "{text}");
        assert!(text.contains(r#""x-fixture-page":1"#), "{text}");
        assert!(text.contains(r#""id":"list""#), "{text}");
        // Arguments reach the app as written: 1.50 stays 1.50.
        let request = RawMessage::parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo_meta","arguments":{},"_meta":{"n":1.50,"x-keep":[1, 2]}}}"#,
        )
        .unwrap();
        let PortReply::Stream(mut stream) = port.send(request).await.unwrap() else {
            panic!("expected a stream")
        };
        let reply = stream.next().await.unwrap();
        let value = json_of(&reply);
        assert_eq!(
            value["result"]["structuredContent"]["meta"]["x-keep"],
            json!([1, 2]),
            "{value}"
        );
        assert_eq!(value["id"], 7);
        drop(port);
        supervisor.shutdown().await;
    }
}

/// The next `resources/updated` on `events`, if one comes within `limit`.
async fn next_update(
    events: &mut tokio::sync::mpsc::Receiver<RawMessage>,
    limit: std::time::Duration,
) -> Option<RawMessage> {
    tokio::time::timeout(limit, async {
        loop {
            let m = events.recv().await?;
            if m.method().as_deref() == Some("notifications/resources/updated") {
                return Some(m);
            }
        }
    })
    .await
    .ok()
    .flatten()
}

#[tokio::test]
async fn resources_updated_reaches_the_subscribed_ports_only() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("grocery", "grocery-inventory", over);
        let (supervisor, app) = running(&apps, "grocery").await;
        let a = open(&app, false).await;
        let b = open(&app, false).await;
        let c = open(&app, false).await;
        let mut a_events = a.take_notifications().unwrap();
        let mut b_events = b.take_notifications().unwrap();
        let mut c_events = c.take_notifications().unwrap();
        assert!(a.take_notifications().is_none());
        let uri = "inventory://stores/1/summary";
        for (port, id) in [(&a, 1), (&b, 2)] {
            let reply = exchange(
                port,
                json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe", "params": {"uri": uri}}),
            )
            .await;
            assert_eq!(json_of(&reply[0])["result"], json!({}), "{reply:?}");
        }
        let adjust = || async {
            app.call_tool(
                "adjust_stock",
                Some(
                    json!({"storeId": 1, "productId": 1, "delta": 2})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
                None,
            )
            .await
            .unwrap();
        };
        adjust().await;
        for events in [&mut a_events, &mut b_events] {
            let updated = next_update(events, PATIENCE).await.expect("an update");
            assert!(updated.as_str().contains(uri), "{}", updated.as_str());
        }
        // One session's unsubscribe leaves the other's subscription alone.
        let reply = exchange(
            &a,
            json!({"jsonrpc": "2.0", "id": 3, "method": "resources/unsubscribe", "params": {"uri": uri}}),
        )
        .await;
        assert_eq!(json_of(&reply[0])["result"], json!({}));
        adjust().await;
        let updated = next_update(&mut b_events, PATIENCE)
            .await
            .expect("b still subscribed");
        assert!(updated.as_str().contains(uri));
        // The hub hands one update to every recipient at once, so by the time b has its second
        // one, anything for a (unsubscribed) or c (never subscribed) would already be queued.
        assert!(
            next_update(&mut a_events, std::time::Duration::ZERO)
                .await
                .is_none()
        );
        assert!(
            next_update(&mut c_events, std::time::Duration::ZERO)
                .await
                .is_none()
        );
        drop((a, b, c));
        supervisor.shutdown().await;
    }
}

#[tokio::test]
async fn an_elicitation_caused_by_a_port_reaches_that_port() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("asker", "fixture-app", over);
        let (supervisor, app) = running(&apps, "asker").await;
        let port = open(&app, true).await;
        let bystander = open(&app, true).await;
        let call = json!({"jsonrpc": "2.0", "id": "ask", "method": "tools/call",
                          "params": {"name": "elicit", "arguments": {"message": "who are you?"}}});
        let PortReply::Stream(mut stream) = port.send(msg(call)).await.unwrap() else {
            panic!("expected a stream")
        };
        let request = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            request.method().as_deref(),
            Some("elicitation/create"),
            "{}",
            request.as_str()
        );
        let id: Value = serde_json::from_str(request.id().unwrap().get()).unwrap();
        // Another session cannot answer it.
        assert!(matches!(
            bystander
                .send(msg(
                    json!({"jsonrpc": "2.0", "id": id, "result": {"action": "decline"}})
                ))
                .await
                .unwrap(),
            PortReply::Accepted
        ));
        port.send(msg(json!({"jsonrpc": "2.0", "id": id,
                              "result": {"action": "accept", "content": {"name": "Ada", "agree": true}}})))
            .await
            .unwrap();
        let response = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .unwrap()
            .unwrap();
        let response = json_of(&response);
        assert_eq!(response["id"], "ask");
        let text = response["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("accepted:") && text.contains("Ada"),
            "{response} ({over:?})"
        );
        drop((port, bystander));
        supervisor.shutdown().await;
    }
}

#[tokio::test]
async fn progress_tokens_are_restored() {
    let apps = AppsDir::new();
    apps.stdio_app("progress", &bin("fixture-app"), &["stdio"], "{}");
    let (supervisor, app) = running(&apps, "progress").await;
    let port = open(&app, false).await;
    let replies = exchange(
        &port,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "tokA"}}}),
    )
    .await;
    let progress: Vec<Value> = replies
        .iter()
        .map(json_of)
        .filter(|v| v["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3);
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "tokA"),
        "{progress:?}"
    );
    let last = json_of(replies.last().unwrap());
    assert_eq!(last["id"], 3);
    // The app saw the gateway's token, not the browser's.
    assert_ne!(last["result"]["structuredContent"]["progressToken"], "tokA");
    drop(port);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn port_requests_time_out_and_are_cancelled_upstream() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "slowpoke",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"requestTimeoutSeconds": 1}"#,
    );
    let (supervisor, app) = running(&apps, "slowpoke").await;
    let port = open(&app, false).await;
    let replies = exchange(
        &port,
        json!({"jsonrpc": "2.0", "id": "h", "method": "tools/call", "params": {"name": "hang"}}),
    )
    .await;
    let error = json_of(&replies[0]);
    assert_eq!(error["id"], "h");
    assert_eq!(error["error"]["code"], -32001);
    let seen = app
        .call_tool(
            "cancellations",
            Some(json!({"waitMs": 900}).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap();
    assert_eq!(seen.structured_content.unwrap()["count"], 1);
    drop(port);
    supervisor.shutdown().await;
}

/// The fixture's count of cancelled calls, once it is at least 1 (asked in rounds shorter
/// than the app's request timeout, within the test's patience).
async fn cancellations(app: &AppHandle) -> u64 {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let seen = app
            .call_tool(
                "cancellations",
                Some(json!({ "waitMs": 500 }).as_object().unwrap().clone()),
                None,
            )
            .await
            .unwrap();
        let count = seen.structured_content.unwrap()["count"].as_u64().unwrap();
        if count > 0 || tokio::time::Instant::now() > deadline {
            return count;
        }
    }
}

#[tokio::test]
async fn an_unread_request_still_times_out_and_is_cancelled_upstream() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "slowpoke",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"requestTimeoutSeconds": 1}"#,
    );
    let (supervisor, app) = running(&apps, "slowpoke").await;
    let port = open(&app, false).await;
    let reply = port
        .send(msg(json!({"jsonrpc": "2.0", "id": "h", "method": "tools/call", "params": {"name": "hang"}})))
        .await
        .unwrap();
    let PortReply::Stream(mut stream) = reply else {
        panic!("expected a stream")
    };
    // Nobody reads the stream, yet the request timeout holds: the app hears the
    // cancellation (the fixture answers as soon as it has counted one).
    assert_eq!(cancellations(&app).await, 1);
    let error = json_of(&stream.next().await.unwrap());
    assert_eq!(error["id"], "h");
    assert_eq!(error["error"]["code"], -32001);
    assert!(stream.next().await.is_none());
    drop(port);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_request_whose_caller_goes_away_is_cancelled_upstream_at_once() {
    for over in Over::BOTH {
        let apps = AppsDir::new();
        let _server = apps.test_app("abandoned", "fixture-app", over);
        let (supervisor, app) = running(&apps, "abandoned").await;
        let port = open(&app, false).await;
        let reply = port
            .send(msg(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang"}})))
            .await
            .unwrap();
        let PortReply::Stream(stream) = reply else {
            panic!("expected a stream")
        };
        // The caller leaves without an answer (its HTTP client went away).
        drop(stream);
        assert_eq!(cancellations(&app).await, 1, "{over:?}");
        drop(port);
        supervisor.shutdown().await;
    }
}

#[tokio::test]
async fn a_client_gets_the_protocol_version_it_asked_for_when_the_session_can_serve_it() {
    let apps = AppsDir::new();
    apps.stdio_app("versions", &bin("fixture-app"), &["stdio"], "{}");
    let (supervisor, app) = running(&apps, "versions").await;
    for (asked, agreed) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        // Older than Streamable HTTP, or unknown: the server's own version, as a server
        // would answer.
        ("2024-11-05", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let (port, answer) = app.open_port(&initialize(asked, false)).await.unwrap();
        let answer = json_of(&answer);
        assert_eq!(answer["result"]["protocolVersion"], agreed, "asked {asked}");
        assert_eq!(port.protocol_version(), agreed);
        // The rest of the upstream's answer is untouched.
        assert!(
            answer["result"]["serverInfo"]["name"].is_string(),
            "{answer}"
        );
        let again = exchange(
            &port,
            json!({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {}}),
        )
        .await;
        assert_eq!(json_of(&again[0])["error"]["code"], -32600);
    }
    supervisor.shutdown().await;
}

#[tokio::test]
async fn ports_end_with_their_session() {
    let apps = AppsDir::new();
    apps.stdio_app("ending", &bin("fixture-app"), &["stdio"], "{}");
    let (supervisor, app) = running(&apps, "ending").await;
    let port = open(&app, false).await;
    let mut events = supervisor.subscribe();
    app.restart().unwrap();
    crate::next_event(&mut events, |e| {
        matches!(
            e,
            mcpapp_supervisor::SupervisorEvent::Lifecycle {
                to: Lifecycle::Running,
                ..
            }
        )
    })
    .await;
    let sent = port
        .send(msg(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ))
        .await;
    let gone = match sent {
        Err(PortError::SessionGone) => true,
        Ok(PortReply::Stream(mut s)) => {
            let reply = tokio::time::timeout(Duration::from_secs(5), s.next())
                .await
                .unwrap();
            reply.is_none_or(|r| json_of(&r)["error"].is_object())
        }
        other => panic!("{other:?}"),
    };
    assert!(gone);
    wait_state(app.watch(), Lifecycle::Running).await;
    // A new session works again.
    let fresh = open(&app, false).await;
    let replies = exchange(
        &fresh,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert!(json_of(&replies[0])["result"]["tools"].is_array());
    drop(fresh);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn malformed_messages_are_refused() {
    let apps = AppsDir::new();
    apps.stdio_app("strict", &bin("fixture-app"), &["stdio"], "{}");
    let (supervisor, app) = running(&apps, "strict").await;
    let port = open(&app, false).await;
    let bad = RawMessage::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","x-top":true}"#)
        .unwrap();
    match port.send(bad).await.unwrap() {
        PortReply::Response(response) => assert_eq!(json_of(&response)["error"]["code"], -32600),
        other => panic!("{other:?}"),
    }
    drop(port);
    supervisor.shutdown().await;
}
