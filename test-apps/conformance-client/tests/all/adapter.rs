//! The adapter hosts the URL it is given through discovery, the supervisor and the tool
//! bridge, calls the scenario's tool through the registry, and reports what it saw.

use crate::support::{Server, run_adapter};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_call_reaches_the_server_through_the_registry() {
    let server = Server::start().await;
    let run = run_adapter(&[&server.url], Some("tools_call")).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let outcome = &run.outcome;
    assert_eq!(outcome["scenario"], "tools_call");
    assert_eq!(outcome["lifecycle"], "Running", "{outcome}");
    // Registered without a prefix, under the server's own name.
    assert_eq!(outcome["tools"], serde_json::json!(["add_numbers"]));
    assert_eq!(outcome["tool"], "add_numbers");
    assert_eq!(outcome["isError"], false);
    assert_eq!(outcome["text"], "The sum of 5 and 3 is 8");
    assert_eq!(outcome["ok"], true);
    assert_eq!(*server.calls.lock().unwrap(), [(5.0, 3.0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flag_wins_over_the_environment_and_initialize_calls_nothing() {
    let server = Server::start().await;
    let run = run_adapter(
        &["--scenario", "initialize", &server.url],
        Some("tools_call"),
    )
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.outcome["scenario"], "initialize");
    assert_eq!(run.outcome["lifecycle"], "Running");
    assert!(run.outcome["tool"].is_null(), "{}", run.outcome);
    assert!(server.calls.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_server_lacks_is_a_failure_naming_it() {
    let server = Server::start().await;
    let run = run_adapter(&[&server.url], Some("sse-retry")).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.outcome["lifecycle"], "Running");
    assert_eq!(run.outcome["tool"], "test_reconnection");
    assert_eq!(
        run.outcome["text"],
        "the registry has no tool `test_reconnection`"
    );
    assert_eq!(run.outcome["ok"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_reported_as_the_apps_failure() {
    // A port that was just free: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let run = run_adapter(&[&url], Some("tools_call")).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.outcome["lifecycle"], "Failed", "{}", run.outcome);
    assert!(
        run.outcome["lastError"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{}",
        run.outcome
    );
    assert!(run.outcome["tool"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_usage_exits_2_with_a_reason() {
    let none = run_adapter(&[], Some("tools_call")).await;
    assert_eq!(none.code, Some(2), "{none:?}");
    assert!(
        none.stderr.contains("usage: conformance-client"),
        "{}",
        none.stderr
    );

    let unnamed = run_adapter(&["http://127.0.0.1:9/mcp"], None).await;
    assert_eq!(unnamed.code, Some(2), "{unnamed:?}");
    assert!(
        unnamed.stderr.contains("MCP_CONFORMANCE_SCENARIO"),
        "{}",
        unnamed.stderr
    );

    let unknown = run_adapter(&["http://127.0.0.1:9/mcp"], Some("auth/basic-cimd")).await;
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("unknown scenario `auth/basic-cimd`"),
        "{}",
        unknown.stderr
    );
    assert!(unknown.outcome.is_null());
}
