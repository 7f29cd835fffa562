//! The driver starts a real gateway hosting the URL it is given, drives the scenario with its
//! end client through `/apps/mcp/conformance` or `/mcp` (or straight at the URL), and reports
//! what it did; what reaches the server is what the gateway made of it.

use mcpapp_testkit::{HttpApp, bin};

use crate::support::{Server, run_driver};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_call_reaches_the_server_through_either_endpoint_in_either_era() {
    let gateway = bin("mcpapp-gateway");
    let gateway = gateway.to_str().unwrap();
    for (via, revision, era) in [
        ("proxy", "2025-11-25", "legacy 2025-11-25"),
        ("mcp", "2026-07-28", "modern 2026-07-28"),
    ] {
        let server = Server::start().await;
        let run = run_driver(
            &["--via", via, "--gateway", gateway, &server.url],
            &[
                ("MCP_CONFORMANCE_SCENARIO", Some("tools_call")),
                ("MCP_CONFORMANCE_PROTOCOL_VERSION", Some(revision)),
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{via}: {run:?}");
        let outcome = &run.outcome;
        assert_eq!(outcome["via"], via);
        assert_eq!(outcome["era"], era);
        assert_eq!(outcome["app"]["lifecycle"], "Running", "{outcome}");
        let steps: Vec<&str> = outcome["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["step"].as_str().unwrap())
            .collect();
        assert_eq!(steps, ["connect", "tools/list", "tools/call add_numbers"]);
        assert_eq!(
            outcome["steps"][2]["result"]["content"][0]["text"], "The sum of 5 and 3 is 8",
            "{outcome}"
        );
        // Through the gateway's own session with the server, once.
        assert_eq!(*server.calls.lock().unwrap(), [(5.0, 3.0)], "{via}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_needs_no_gateway_and_a_failed_call_fails_the_run() {
    let server = Server::start().await;
    let run = run_driver(
        &["--via", "direct", "--gateway", "/nonexistent", &server.url],
        &[
            ("MCP_CONFORMANCE_SCENARIO", Some("sse-retry")),
            ("MCP_CONFORMANCE_PROTOCOL_VERSION", None),
        ],
    )
    .await;
    // The server has no `test_reconnection`: the call fails, and so does the run.
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.outcome["app"].is_null(), "{}", run.outcome);
    assert_eq!(run.outcome["era"], "legacy 2025-11-25");
    let last = run.outcome["steps"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["step"], "tools/call test_reconnection");
    assert_eq!(last["ok"], false, "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_without_a_family_are_refused_and_the_list_names_the_families() {
    let run = run_driver(
        &["--via", "proxy", "http://127.0.0.1:9/mcp"],
        &[("MCP_CONFORMANCE_SCENARIO", Some("auth/dpop"))],
    )
    .await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("no family drives scenario `auth/dpop`"),
        "{}",
        run.stderr
    );

    // Tests start the binary under test; that is what they are for.
    #[allow(clippy::disallowed_methods)]
    let list = tokio::process::Command::new(env!("CARGO_BIN_EXE_conformance-driver"))
        .arg("--list")
        .output()
        .await
        .unwrap();
    let text = String::from_utf8(list.stdout).unwrap();
    assert!(text.lines().any(|l| l == "protocol tools_call"), "{text}");
    assert!(
        text.lines().any(|l| l == "protocol http-custom-headers"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l == "auth auth/metadata-default"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 35, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_family_connects_the_app_through_the_gateways_callback() {
    // test-apps/oauth-server: an authorization server that redirects at once, like the
    // suite's, and the MCP app it protects (which has no `test-tool`).
    let server = HttpApp::start("oauth-server", &[]);
    let gateway = bin("mcpapp-gateway");
    let run = run_driver(
        &[
            "--via",
            "mcp",
            "--gateway",
            gateway.to_str().unwrap(),
            &server.url,
        ],
        &[
            ("MCP_CONFORMANCE_SCENARIO", Some("auth/metadata-default")),
            ("MCP_CONFORMANCE_PROTOCOL_VERSION", Some("2025-11-25")),
            ("MCP_CONFORMANCE_CONTEXT", None),
        ],
    )
    .await;
    let outcome = &run.outcome;
    assert_eq!(outcome["family"], "auth", "{outcome}");
    assert_eq!(
        outcome["app"]["lifecycle"], "NeedsAuthorization",
        "{outcome}"
    );
    let steps = outcome["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "authorize",
            "callback",
            "app",
            "connect",
            "tools/list",
            "tools/call test-tool"
        ],
        "{outcome}"
    );
    // The authorization server is oauth-server's own listener, not the app's.
    let issuer = steps[0]["result"]["issuer"].as_str().unwrap();
    assert!(
        issuer.starts_with("http://127.0.0.1:") && !server.url.starts_with(issuer),
        "{outcome}"
    );
    assert_eq!(steps[1]["result"], "conformance is connected.", "{outcome}");
    assert_eq!(steps[2]["result"]["lifecycle"], "Running", "{outcome}");
    assert_eq!(
        steps[2]["result"]["authorization"]["state"], "authorized",
        "{outcome}"
    );
    assert!(
        steps[4]["result"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("whoami")),
        "{outcome}"
    );
    // The server has no `test-tool`: the run fails there, after connecting.
    assert_eq!(steps[5]["ok"], false, "{outcome}");
    assert_eq!(run.code, Some(1), "{run:?}");
}
