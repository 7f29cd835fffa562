//! Call metrics counted in the hub, for the gateway's own calls and for ports of each path,
//! with a real fixture app: outcomes, timeouts, cancellations and bounded tool labels.

use std::time::Duration;

use mcpapp_manifest::Lifecycle;
use mcpapp_session::{CallPath, PortReply};
use mcpapp_supervisor::{CallError, Supervisor, SupervisorMetrics};
use mcpapp_testkit::{AppsDir, bin, eventually, wait_state};
use prometheus_client::registry::Registry;
use serde_json::json;

use crate::ports::{exchange, json_of, msg, open};
use crate::{PATIENCE, fast_policy};

/// The registry's text, in the Prometheus format.
fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, registry).unwrap();
    text
}

/// The value of the sample `name{labels}` (labels in the order the series writes them).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let labels = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect::<Vec<_>>()
        .join(",");
    let head = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&head))
        .map(|value| value.parse().unwrap())
}

fn calls(text: &str, tool: &str, path: &str, outcome: &str) -> f64 {
    sample(
        text,
        "mcpapp_tool_calls_total",
        &[
            ("app", "fx"),
            ("tool", tool),
            ("path", path),
            ("outcome", outcome),
        ],
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn calls_of_every_path_and_outcome_are_counted_once() {
    crate::logging();
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"requestTimeoutSeconds": 1}"#,
    );
    let mut registry = Registry::default();
    let metrics = SupervisorMetrics::register(&mut registry);
    let supervisor = Supervisor::builder()
        .policy(fast_policy())
        .metrics(metrics)
        .build();
    supervisor.load(&apps.discover());
    let app = supervisor.get("fx").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;

    // The gateway's own calls: a result, a tool error, an unknown tool, a timeout.
    let args = |v: serde_json::Value| v.as_object().cloned();
    app.call_tool("echo", args(json!({"message": "hi"})), None)
        .await
        .unwrap();
    let result = app
        .call_tool(
            "read_file",
            args(json!({"path": "/no/such/file/anywhere"})),
            None,
        )
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(
        app.call_tool("no_such_tool_xyz", args(json!({})), None)
            .await
            .is_err()
    );
    let timed_out = app.call_tool("hang", args(json!({})), None).await;
    assert!(
        matches!(timed_out, Err(CallError::Timeout { .. })),
        "{timed_out:?}"
    );

    // A port of /mcp, and a port of the proxy.
    let mcp = open(&app, false).await;
    mcp.set_call_path(CallPath::Mcp);
    assert_eq!(mcp.call_path(), CallPath::Mcp);
    let reply = exchange(
        &mcp,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"message": "via mcp"}}}),
    )
    .await;
    assert_eq!(
        json_of(&reply[0])["result"]["structuredContent"]["message"],
        "via mcp"
    );
    let proxy = open(&app, false).await;
    assert_eq!(proxy.call_path(), CallPath::Proxy);
    // Nobody reads this one: the hub's deadline still times it out.
    let PortReply::Stream(unread) = proxy
        .send(msg(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "hang", "arguments": {}}}),
        ))
        .await
        .unwrap()
    else {
        panic!("hang must go upstream");
    };
    // The client of this one goes away: a cancellation.
    let PortReply::Stream(dropped) = proxy
        .send(msg(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "hang", "arguments": {}}}),
        ))
        .await
        .unwrap()
    else {
        panic!("hang must go upstream");
    };
    drop(dropped);

    let settled = eventually(PATIENCE, async || {
        let text = scrape(&registry);
        calls(&text, "hang", "proxy", "timeout") == 1.0
            && calls(&text, "hang", "proxy", "cancelled") == 1.0
    })
    .await;
    let text = scrape(&registry);
    assert!(settled, "{text}");
    assert_eq!(calls(&text, "echo", "agent", "ok"), 1.0, "{text}");
    assert_eq!(calls(&text, "read_file", "agent", "error"), 1.0, "{text}");
    assert_eq!(calls(&text, "other", "agent", "failed"), 1.0, "{text}");
    assert_eq!(calls(&text, "hang", "agent", "timeout"), 1.0, "{text}");
    assert_eq!(calls(&text, "echo", "mcp", "ok"), 1.0, "{text}");
    assert_eq!(calls(&text, "echo", "proxy", "ok"), 0.0, "{text}");
    // The unknown name made no series of its own.
    assert!(!text.contains("no_such_tool_xyz"), "{text}");
    // Two timeouts (the agent's, the unread port request) and one cancellation.
    let app_only = [("app", "fx")];
    assert_eq!(
        sample(&text, "mcpapp_upstream_timeouts_total", &app_only),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "mcpapp_upstream_cancellations_total", &app_only),
        Some(1.0),
        "{text}"
    );
    // Every finished call was timed.
    assert_eq!(
        sample(
            &text,
            "mcpapp_tool_call_duration_seconds_count",
            &[("app", "fx"), ("tool", "hang"), ("path", "proxy")]
        ),
        Some(2.0),
        "{text}"
    );
    let slowest = sample(
        &text,
        "mcpapp_tool_call_duration_seconds_sum",
        &[("app", "fx"), ("tool", "hang"), ("path", "agent")],
    )
    .unwrap();
    assert!(slowest >= 0.9, "a 1 s timeout took {slowest} s");
    drop(unread);
    drop((mcp, proxy));
    tokio::time::timeout(Duration::from_secs(30), supervisor.shutdown())
        .await
        .unwrap();
}
