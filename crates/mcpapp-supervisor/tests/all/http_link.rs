//! The gateway's Streamable HTTP link against servers that behave like real-world ones (the
//! fixture's HTTP flags): server requests on the standalone GET stream, response streams ended
//! early and resumed, strict lifecycle ordering, stateless servers without a GET stream, and a
//! JSON-RPC error in an HTTP 400; and keep-alive connections against a server without
//! `TCP_NODELAY`.

use mcpapp_manifest::Lifecycle;
use mcpapp_session::{Port, PortReply, ResponseStream};
use mcpapp_supervisor::mcp::CallToolResult;
use mcpapp_supervisor::{AppHandle, SupervisorEvent};
use mcpapp_testkit::{AppsDir, HttpApp, eventually, wait_state};
use serde_json::{Value, json};

use crate::ports::{exchange, json_of, msg, open, running};
use crate::{PATIENCE, fast_policy, supervise};

async fn call(app: &AppHandle, name: &str, arguments: Value) -> CallToolResult {
    app.call_tool(name, Some(arguments.as_object().unwrap().clone()), None)
        .await
        .unwrap()
}

/// The fixture's `http_counters`, read through the gateway's own client.
async fn counters(app: &AppHandle) -> Value {
    call(app, "http_counters", json!({}))
        .await
        .structured_content
        .unwrap()
}

/// Sends a request on `port` and returns its response stream.
async fn start(port: &Port, request: Value) -> ResponseStream {
    match port.send(msg(request)).await.unwrap() {
        PortReply::Stream(stream) => stream,
        other => panic!("expected a stream, got {other:?}"),
    }
}

async fn next(stream: &mut ResponseStream) -> Value {
    let message = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a message within the patience bound")
        .expect("the stream had another message");
    json_of(&message)
}

fn hang(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "hang"}})
}

fn elicit(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "elicit", "arguments": {"message": "who are you?"}}})
}

#[tokio::test]
async fn an_elicitation_on_the_get_stream_reaches_the_one_busy_port_that_declared_it() {
    let server = HttpApp::start("fixture-app", &["--server-requests-on-get"]);
    let apps = AppsDir::new();
    apps.http_app("asker", &server.url, "{}");
    let (supervisor, app) = running(&apps, "asker").await;
    let a = open(&app, true).await;
    let b = open(&app, false).await;
    // Both ports are busy; only A declared elicitation.
    let mut b_call = start(&b, hang("b-busy")).await;
    let mut a_call = start(&a, elicit("a-asks")).await;

    let asked = next(&mut a_call).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "who are you?");
    a.send(msg(json!({"jsonrpc": "2.0", "id": asked["id"],
                       "result": {"action": "accept", "content": {"name": "Ada", "agree": true}}})))
        .await
        .unwrap();
    let response = next(&mut a_call).await;
    assert_eq!(response["id"], "a-asks");
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("accepted:") && text.contains("Ada"),
        "{response}"
    );
    // The request really came on the GET stream, and B was handed nothing.
    assert_eq!(counters(&app).await["requestsMovedToGet"], 1);
    assert!(
        tokio::time::timeout(std::time::Duration::ZERO, b_call.next())
            .await
            .is_err(),
        "B received something"
    );
    drop((b_call, a, b));
    supervisor.shutdown().await;
}

#[tokio::test]
async fn an_elicitation_on_the_get_stream_with_two_capable_busy_ports_is_refused_with_the_reason() {
    let server = HttpApp::start("fixture-app", &["--server-requests-on-get"]);
    let apps = AppsDir::new();
    apps.http_app("asker", &server.url, "{}");
    let (supervisor, app) = running(&apps, "asker").await;
    let a = open(&app, true).await;
    let c = open(&app, true).await;
    let _c_call = start(&c, hang("c-busy")).await;
    let mut a_call = start(&a, elicit("a-asks")).await;

    // Nobody can tell which session the request is for: the gateway answers it with an error,
    // the tool fails with that error, and neither port is asked.
    let response = next(&mut a_call).await;
    assert_eq!(response["id"], "a-asks", "{response}");
    assert_eq!(response["result"]["isError"], true, "{response}");
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("several client sessions that declared the capability"),
        "{text}"
    );
    assert_eq!(counters(&app).await["requestsMovedToGet"], 1);
    drop((a_call, a, c));
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_response_stream_ended_early_is_resumed_and_still_answers_its_request() {
    let server = HttpApp::start("fixture-app", &["--resumable-after-ms", "100"]);
    let apps = AppsDir::new();
    apps.http_app("resumer", &server.url, "{}");
    let (supervisor, app) = running(&apps, "resumer").await;
    let port = open(&app, false).await;
    // Three steps 300 ms apart: the response comes after at least 900 ms, so the server ends
    // the POST's stream (at 100 ms) before it.
    let replies = exchange(
        &port,
        json!({"jsonrpc": "2.0", "id": "p", "method": "tools/call",
               "params": {"name": "progress", "arguments": {"steps": 3, "delayMs": 300},
                          "_meta": {"progressToken": "tok"}}}),
    )
    .await;
    let replies: Vec<Value> = replies.iter().map(json_of).collect();
    let steps: Vec<&Value> = replies
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .inspect(|m| assert_eq!(m["params"]["progressToken"], "tok", "{m}"))
        .map(|m| &m["params"]["progress"])
        .collect();
    assert_eq!(steps, [1.0, 2.0, 3.0], "{replies:?}");
    let response = replies.last().unwrap();
    assert_eq!(response["id"], "p", "{replies:?}");
    assert_eq!(response["result"]["structuredContent"]["steps"], 3);
    let counters = counters(&app).await;
    assert_eq!(counters["streamsClosedEarly"], 1, "{counters}");
    assert_eq!(counters["streamsResumed"], 1, "{counters}");
    assert_eq!(app.snapshot().restart_count, 0);
    drop(port);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn notifications_initialized_precedes_the_first_listing_on_strict_servers() {
    let servers: Vec<HttpApp> = (0..20)
        .map(|_| HttpApp::start("fixture-app", &["--strict-lifecycle"]))
        .collect();
    let apps = AppsDir::new();
    for (i, server) in servers.iter().enumerate() {
        apps.http_app(&format!("strict{i:02}"), &server.url, "{}");
    }
    // A refused listing must show as a failure, not be healed by a restart.
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = supervise(&apps.discover(), policy);
    assert!(supervisor.wait_settled(PATIENCE).await);
    let listed = supervisor.list();
    assert_eq!(listed.len(), 20);
    for app in listed {
        let snapshot = app.snapshot();
        assert_eq!(
            snapshot.state.lifecycle,
            Lifecycle::Running,
            "{}: {:?}",
            app.id(),
            snapshot.state.last_error
        );
        assert!(app.descriptors().tool("echo").is_some(), "{}", app.id());
    }
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_stateless_server_without_a_get_stream_stays_running() {
    for status in ["404", "405"] {
        let server = HttpApp::start("fixture-app", &["--stateless-get-status", status]);
        let apps = AppsDir::new();
        apps.http_app("stateless", &server.url, "{}");
        let supervisor = supervise(&apps.discover(), fast_policy());
        let mut events = supervisor.subscribe();
        let app = supervisor.get("stateless").unwrap();
        wait_state(app.watch(), Lifecycle::Running).await;
        // The GET stream is opened after the handshake, beside the first listing: wait until
        // the server has refused it.
        assert!(
            eventually(PATIENCE, async || counters(&app).await["getsRefused"] != 0).await,
            "the gateway asked for a GET stream"
        );
        // Calls still work, through the agent's client and through a port, on the same session.
        let echoed = call(&app, "echo", json!({"message": "still here"})).await;
        assert_eq!(echoed.structured_content.unwrap()["message"], "still here");
        let port = open(&app, false).await;
        let replies = exchange(
            &port,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"message": "port"}}}),
        )
        .await;
        assert_eq!(
            json_of(&replies[0])["result"]["structuredContent"]["message"],
            "port"
        );
        let snapshot = app.snapshot();
        assert_eq!(snapshot.state.lifecycle, Lifecycle::Running, "{status}");
        assert_eq!(snapshot.restart_count, 0, "{status}: {snapshot:?}");
        while let Ok(event) = events.try_recv() {
            assert!(
                !matches!(
                    &event,
                    SupervisorEvent::Lifecycle {
                        from: Lifecycle::Running,
                        ..
                    }
                ),
                "{status}: {event:?}"
            );
        }
        assert_eq!(counters(&app).await["getsRefused"], 1, "{status}");
        drop(port);
        supervisor.shutdown().await;
    }
}

#[tokio::test]
async fn a_json_rpc_error_in_an_http_400_reaches_the_caller_as_that_error() {
    let server = HttpApp::start("fixture-app", &[]);
    let apps = AppsDir::new();
    apps.http_app("refuser", &server.url, "{}");
    let (supervisor, app) = running(&apps, "refuser").await;
    let port = open(&app, false).await;
    // rmcp's server refuses, with HTTP 400 and a JSON-RPC error, a request of an era it does
    // not speak (this one names 2026-07-28 in its _meta, so it goes as a 2026 request).
    let replies = exchange(
        &port,
        json!({"jsonrpc": "2.0", "id": "bad", "method": "tools/call", "params": {
            "name": "echo", "arguments": {"message": "x"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
    )
    .await;
    assert_eq!(replies.len(), 1, "{replies:?}");
    let error = json_of(&replies[0]);
    assert_eq!(error["id"], "bad", "{error}");
    assert_eq!(
        error["error"]["code"], -32022,
        "the server's own error: {error}"
    );
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Unsupported protocol version"),
        "{message}"
    );
    // The session is unharmed.
    let echoed = call(&app, "echo", json!({"message": "after"})).await;
    assert_eq!(echoed.structured_content.unwrap()["message"], "after");
    assert_eq!(app.snapshot().restart_count, 0);
    drop(port);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn sequential_calls_share_one_kept_alive_connection_even_without_tcp_nodelay() {
    // A server without TCP_NODELAY is the one a reused connection used to stall against
    // (docs/performance.md, "The 44 ms stall"), so it is the one keep-alive must hold for.
    let server = HttpApp::start("fixture-app", &["--nagle"]);
    let apps = AppsDir::new();
    apps.http_app("kept", &server.url, "{}");
    let (supervisor, app) = running(&apps, "kept").await;
    let before = counters(&app).await["connectionsAccepted"]
        .as_u64()
        .unwrap();
    let port = open(&app, false).await;
    for i in 0..10 {
        let echoed = call(&app, "echo", json!({"message": format!("agent {i}")})).await;
        assert_eq!(
            echoed.structured_content.unwrap()["message"],
            format!("agent {i}")
        );
        let replies = exchange(
            &port,
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"message": format!("port {i}")}}}),
        )
        .await;
        assert_eq!(
            json_of(&replies[0])["result"]["structuredContent"]["message"],
            format!("port {i}")
        );
    }
    let after = counters(&app).await["connectionsAccepted"]
        .as_u64()
        .unwrap();
    // One connection per POST would have made 21 more (20 calls and the counters' own). A
    // call may still open one when it starts before the connection its predecessor used is
    // back in the pool (that happens on the connection's own task), so a few are allowed.
    let opened = after - before;
    assert!(
        opened <= 3,
        "{opened} connections opened for 20 sequential calls"
    );
    drop(port);
    supervisor.shutdown().await;
}

/// A 2026-07-28 request as a modern client sends it.
fn modern(id: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn newline_delimited_json_answers_are_read_as_they_arrive() {
    // A 2026-07-28 server that answers its event streams as application/json, one message
    // per line, as the conformance suite's reference server does; a listen's body never ends.
    let server = HttpApp::start("fixture-app", &["--era", "modern", "--json-lines"]);
    let apps = AppsDir::new();
    apps.http_app("lines", &server.url, "{}");
    let supervisor = supervise(&apps.discover(), fast_policy());
    let mut events = supervisor.subscribe();
    let app = supervisor.get("lines").unwrap();
    mcpapp_testkit::wait_state(app.watch(), Lifecycle::Running).await;

    // Progress, then the response, on one body.
    let mut progress = modern(
        "p",
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 2}}),
    );
    progress["params"]["_meta"]["progressToken"] = json!("tok");
    let port = app.open_modern_port(&msg(progress.clone())).unwrap();
    let replies: Vec<Value> = exchange(&port, progress)
        .await
        .iter()
        .map(json_of)
        .collect();
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert_eq!(replies[0]["method"], "notifications/progress");
    assert_eq!(replies[0]["params"]["progressToken"], "tok");
    assert_eq!(replies[2]["id"], "p");
    assert_eq!(replies[2]["result"]["structuredContent"]["steps"], 2);

    // A client's listen: the acknowledgement arrives while the body goes on, then a change.
    let listen = modern(
        "l",
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let port = app.open_modern_port(&msg(listen.clone())).unwrap();
    let mut stream = start(&port, listen).await;
    let ack = next(&mut stream).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "l"
    );
    call(&app, "notify_tools_changed", json!({})).await;
    let changed = next(&mut stream).await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "l"
    );

    // The gateway's own listen saw it too, and listed the tools again.
    crate::next_event(
        &mut events,
        |e| matches!(e, SupervisorEvent::ToolsChanged { app_id } if app_id == "lines"),
    )
    .await;
    assert!(app.descriptors().tool("added_tool_1").is_some());
    drop(stream);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn legacy_clients_of_a_dual_era_app_get_a_legacy_session_of_their_own() {
    // A dual-era app serves a legacy client by its legacy rules on a session of the
    // gateway's; a 2026-07-28-only app refuses one, and its legacy clients are translated, as
    // are those of an app whose manifest asks for 2026-07-28.
    for (era, manifest, legacy_served) in [
        ("both", "{}", "2025-11-25"),
        ("modern", "{}", "2026-07-28"),
        ("both", r#"{"protocolVersion": "2026-07-28"}"#, "2026-07-28"),
    ] {
        let server = HttpApp::start("fixture-app", &["--era", era]);
        let apps = AppsDir::new();
        apps.http_app("eras", &server.url, manifest);
        let (supervisor, app) = running(&apps, "eras").await;
        let client_info = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                 "params": {"name": "client_info", "arguments": {}}});
        let served = |replies: Vec<mcpapp_session::RawMessage>| {
            json_of(replies.last().unwrap())["result"]["structuredContent"]
                ["negotiatedProtocolVersion"]
                .clone()
        };

        let legacy = open(&app, true).await;
        let replies = exchange(&legacy, client_info.clone()).await;
        assert_eq!(served(replies), legacy_served, "--era {era}, {manifest}");
        // A legacy port of a dual-era app is on the legacy session, not the modern one.
        let stats = app.session_stats().await.unwrap();
        let translated = legacy_served == "2026-07-28";
        assert_eq!(
            stats.ports,
            usize::from(translated),
            "--era {era}, {manifest}: {stats:?}"
        );

        // Modern clients and the gateway's own calls stay on the modern session.
        let request = modern("m", "tools/call", json!({"name": "client_info"}));
        let port = app.open_modern_port(&msg(request.clone())).unwrap();
        assert_eq!(served(exchange(&port, request).await), "2026-07-28");
        let own = call(&app, "client_info", json!({})).await;
        assert_eq!(
            own.structured_content.unwrap()["negotiatedProtocolVersion"],
            "2026-07-28"
        );
        drop(legacy);
        supervisor.shutdown().await;
    }
}
