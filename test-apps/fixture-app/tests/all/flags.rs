//! One test per command-line flag, each showing the flag does what the crate doc says.

use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use mcpapp_testkit::{Over, call_params, over_both_transports, structured, text, within};

use crate::support::{Fixture, connect, fixture_command, http_args};

/// Starts the fixture with `args` in `kind` mode without connecting a client.
fn spawn(
    kind: Over,
    args: &[&str],
) -> (
    Fixture,
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
) {
    let mut all = match kind {
        Over::Stdio => vec!["stdio"],
        Over::Http => http_args(&[]),
    };
    all.extend_from_slice(args);
    Fixture::spawn(fixture_command(&all))
}

over_both_transports!(
    exit_at_start_exits_with_the_code_before_serving,
    exit_after_ms_serves_then_exits_17,
    crash_after_calls_answers_the_nth_call_then_exits_17,
    start_delay_ms_delays_serving,
    never_initialize_reads_but_never_answers,
    garbage_stdout_prints_three_non_json_lines_and_exits_1,
    stderr_noise_writes_numbered_lines_and_one_per_call,
);

async fn exit_at_start_exits_with_the_code_before_serving(kind: Over) {
    let (mut fixture, stdout, _stdin) = spawn(kind, &["--exit-at-start", "3"]);
    let line = fixture.stderr_line("exiting at start").await;
    assert!(line.contains("status 3"), "{line}");
    assert_eq!(fixture.exit_status().await.code(), Some(3));
    let mut lines = BufReader::new(stdout).lines();
    assert_eq!(lines.next_line().await.unwrap(), None, "nothing on stdout");
}

async fn exit_after_ms_serves_then_exits_17(kind: Over) {
    // Long enough for a slow machine to connect and call a tool first.
    let mut session = connect(kind, &["--exit-after-ms", "3000"]).await;
    let echoed = session.call("echo", json!({"message": "still here"})).await;
    assert_eq!(text(&echoed), "still here");
    assert_eq!(session.app.exit_status().await.code(), Some(17));
    session.app.stderr_line("exiting after 3000 ms").await;
}

async fn crash_after_calls_answers_the_nth_call_then_exits_17(kind: Over) {
    let mut session = connect(kind, &["--crash-after-calls", "2"]).await;
    // Other requests do not count.
    within("tools/list", session.client.list_all_tools())
        .await
        .unwrap();
    let first = session.call("echo", json!({"message": "one"})).await;
    assert_eq!(structured(&first)["message"], "one");
    let second = session.call("echo", json!({"message": "two"})).await;
    assert_eq!(
        structured(&second)["message"],
        "two",
        "the Nth response arrives whole"
    );
    assert_eq!(session.app.exit_status().await.code(), Some(17));
    session.app.stderr_line("crashing after").await;
    assert!(
        session
            .try_call("echo", json!({"message": "three"}))
            .await
            .is_err(),
        "no answers after the crash"
    );
}

async fn start_delay_ms_delays_serving(kind: Over) {
    // A sleep can only make start-up later, so a lower bound cannot flake.
    let started = Instant::now();
    let session = connect(kind, &["--start-delay-ms", "400"]).await;
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "served after {:?}",
        started.elapsed()
    );
    let echoed = session.call("echo", json!({"message": "late"})).await;
    assert_eq!(text(&echoed), "late");
}

async fn never_initialize_reads_but_never_answers(kind: Over) {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    match kind {
        Over::Stdio => {
            let (mut fixture, stdout, mut stdin) = spawn(kind, &["--never-initialize"]);
            stdin
                .write_all(format!("{initialize}\n").as_bytes())
                .await
                .unwrap();
            stdin.flush().await.unwrap();
            let mut lines = BufReader::new(stdout).lines();
            // Proving a negative takes a bounded wait; the fixture never answers.
            let answer = tokio::time::timeout(Duration::from_millis(700), lines.next_line()).await;
            assert!(answer.is_err(), "unexpected answer {answer:?}");
            // Closing stdin does not end it either.
            drop(stdin);
            let exited =
                tokio::time::timeout(Duration::from_millis(300), fixture.exit_status()).await;
            assert!(exited.is_err(), "exited after stdin closed: {exited:?}");
            assert!(fixture.is_alive());
        }
        Over::Http => {
            let mut fixture = Fixture::http(&["--never-initialize"]).await;
            let response = reqwest::Client::new()
                .post(&fixture.mcp_url)
                .header("accept", "application/json, text/event-stream")
                .json(&initialize)
                .timeout(Duration::from_millis(700))
                .send()
                .await;
            let error = response.expect_err("no answer");
            assert!(error.is_timeout(), "{error}");
            assert!(fixture.is_alive());
            // An rmcp client cannot complete the handshake either.
            let transport =
                rmcp::transport::StreamableHttpClientTransport::from_uri(fixture.mcp_url.clone());
            let handshake =
                tokio::time::timeout(Duration::from_millis(700), ().serve(transport)).await;
            assert!(handshake.is_err(), "the handshake must not complete");
        }
    }
}

async fn garbage_stdout_prints_three_non_json_lines_and_exits_1(kind: Over) {
    let (mut fixture, stdout, _stdin) = spawn(kind, &["--garbage-stdout"]);
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    while let Some(line) = within("stdout", lines.next_line()).await.unwrap() {
        seen.push(line);
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0], "this is not JSON-RPC");
    assert!(
        seen.iter()
            .all(|l| serde_json::from_str::<Value>(l).is_err()),
        "{seen:?}"
    );
    assert_eq!(fixture.exit_status().await.code(), Some(1));
}

async fn stderr_noise_writes_numbered_lines_and_one_per_call(kind: Over) {
    let mut session = connect(kind, &["--stderr-noise", "3"]).await;
    for i in 1..=3 {
        let line = session
            .app
            .stderr_line(&format!("start line {i} of 3"))
            .await;
        assert!(line.starts_with("fixture-app noise:"), "{line}");
    }
    session.call("echo", json!({"message": "x"})).await;
    session.call("get_cwd", json!({})).await;
    session.app.stderr_line("noise: tool call 1: echo").await;
    session.app.stderr_line("noise: tool call 2: get_cwd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_header_rejects_requests_without_it() {
    let fixture = Fixture::http(&["--require-header", "x-fixture-token=s3cret"]).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    for token in [None, Some("wrong")] {
        let mut request = reqwest::Client::new()
            .post(&fixture.mcp_url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.header("x-fixture-token", token);
        }
        let response = within("POST /mcp", request.send()).await.unwrap();
        assert_eq!(response.status(), 401);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "unauthorized");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("x-fixture-token"), "{message}");
        assert!(
            !message.contains("s3cret"),
            "the value is a secret: {message}"
        );
    }

    // An rmcp client that sends the header gets through.
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            fixture.mcp_url.clone(),
        )
        .custom_headers(
            [(
                axum::http::HeaderName::from_static("x-fixture-token"),
                axum::http::HeaderValue::from_static("s3cret"),
            )]
            .into_iter()
            .collect(),
        );
    let client = within(
        "initialize with the header",
        ().serve(rmcp::transport::StreamableHttpClientTransport::from_config(
            config,
        )),
    )
    .await
    .unwrap();
    let result = within(
        "echo",
        client.call_tool(call_params("echo", json!({"message": "in"}))),
    )
    .await
    .unwrap();
    assert_eq!(text(&result), "in");
}

#[tokio::test]
async fn http_only_flags_are_refused_in_stdio_mode() {
    for args in [
        &["--require-header", "a=b"][..],
        &["--server-requests-on-get"],
        &["--resumable-after-ms", "100"],
        &["--stateless-get-status", "404"],
        &["--strict-lifecycle"],
    ] {
        let (mut fixture, _stdout, _stdin) = spawn(Over::Stdio, args);
        fixture
            .stderr_line(&format!("{} only applies to http mode", args[0]))
            .await;
        assert!(!fixture.exit_status().await.success(), "{args:?}");
    }
}

#[tokio::test]
async fn stateless_get_status_takes_only_error_statuses_and_no_session_flags() {
    for args in [
        &["--stateless-get-status", "200"][..],
        &["--stateless-get-status", "nope"],
        &["--stateless-get-status", "404", "--strict-lifecycle"],
        &["--stateless-get-status", "405", "--server-requests-on-get"],
        &[
            "--stateless-get-status",
            "404",
            "--resumable-after-ms",
            "10",
        ],
    ] {
        let (mut fixture, _stdout, _stdin) = spawn(Over::Http, args);
        let line = fixture.stderr_line("error").await;
        assert!(line.contains("--stateless-get-status"), "{args:?}: {line}");
        assert!(!fixture.exit_status().await.success(), "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nagle_still_serves_every_call() {
    // What the flag changes (Nagle's algorithm on the server's side) shows only in timing,
    // which tests never assert (`cargo xtask bench proxy` measures it); the server must
    // still answer every call whole.
    let session = connect(Over::Http, &["--nagle"]).await;
    for message in ["one", "two", "three"] {
        let echoed = session.call("echo", json!({"message": message})).await;
        assert_eq!(structured(&echoed)["message"], message);
    }
}

#[tokio::test]
async fn nagle_is_refused_in_stdio_mode() {
    let (mut fixture, _stdout, _stdin) = spawn(Over::Stdio, &["--nagle"]);
    fixture
        .stderr_line("--nagle only applies to http mode")
        .await;
    assert!(!fixture.exit_status().await.success());
}
