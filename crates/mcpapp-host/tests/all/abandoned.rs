//! Abandoned calls under load (issue 22): many browser calls in flight on `/apps/mcp/{appId}`
//! (300, on 30 sessions) whose clients all go away at once, once every call waits in the app
//! and again while half of them are still on their way, and each on its own shortly after
//! sending, over stdio and HTTP. Each call that reached the app must be cancelled upstream
//! within its deadline (at once when its response stream closes, at the latest when the
//! app's request timeout runs out), because its client left (the hub's call counters tell a
//! cancellation from a timeout), and nothing may be left behind: no call still waiting in the
//! app, no request, stream or deadline in the session's tables once the clients left, and
//! no port or anything else of theirs once the sessions are deleted
//! (`AppHandle::session_stats`).

use std::time::Duration;

use mcpapp_testkit::{AppsDir, HttpApp, Over, bin};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::{Gateway, PATIENCE};

/// Browser sessions, and calls in flight on each.
const SESSIONS: usize = 30;
const CALLS_PER_SESSION: usize = 10;
const CALLS: u64 = (SESSIONS * CALLS_PER_SESSION) as u64;
/// The app's request timeout: the latest an abandoned call may be cancelled upstream.
const REQUEST_TIMEOUT_SECONDS: u64 = 10;
/// Added to that deadline for a loaded machine to deliver what was sent in time.
const GRACE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn abandoned_calls_are_cancelled_upstream_and_leave_nothing_behind() {
    let mut failures = Vec::new();
    for over in Over::BOTH {
        for leave in [Leave::Arrived, Leave::Arriving, Leave::Scattered] {
            if let Err(failure) = abandon(over, leave).await {
                failures.push(format!("{over:?}, {leave:?}: {failure}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// When the clients go away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leave {
    /// Once every call waits in the app.
    Arrived,
    /// Once half of them do: the rest are somewhere between the client and the app.
    Arriving,
    /// Each on its own, 0 to 40 ms after sending it (spread over the call's way in: the
    /// host, the session's hub, the link, the app).
    Scattered,
}

/// One round over `over`: the calls, the clients leaving, and what is left; `Err` says what
/// was not cancelled or not cleaned up.
async fn abandon(over: Over, leave: Leave) -> Result<(), String> {
    let apps = AppsDir::new();
    let extra = json!({"requestTimeoutSeconds": REQUEST_TIMEOUT_SECONDS}).to_string();
    let _server: Option<HttpApp> = match over {
        Over::Stdio => {
            apps.stdio_app("fx", &bin("fixture-app"), &["stdio"], &extra);
            None
        }
        Over::Http => {
            let server = HttpApp::start("fixture-app", &[]);
            apps.http_app("fx", &server.url, &extra);
            Some(server)
        }
    };
    let gateway = Gateway::start(apps, |_| {}).await;
    let client = reqwest::Client::new();
    let url = format!("{}/apps/mcp/fx", gateway.url);
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(open_session(&client, &url).await);
    }

    // Every call in flight, each on a connection of its own, reading its event stream.
    let mut calls: Vec<JoinHandle<()>> = Vec::new();
    for (s, session) in sessions.iter().enumerate() {
        for c in 0..CALLS_PER_SESSION {
            let request = client
                .post(&url)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .header("Mcp-Session-Id", session)
                .body(
                    json!({"jsonrpc": "2.0", "id": s * 1000 + c, "method": "tools/call",
                           "params": {"name": "hang", "arguments": {}}})
                    .to_string(),
                );
            let call = async move {
                if let Ok(mut response) = request.send().await {
                    while let Ok(Some(_)) = response.chunk().await {}
                }
            };
            let leave_after =
                Duration::from_millis(((s * CALLS_PER_SESSION + c) * 7919 % 41) as u64);
            calls.push(tokio::spawn(async move {
                if leave == Leave::Scattered {
                    // Dropping the call is its client going away.
                    let _ = tokio::time::timeout(leave_after, call).await;
                } else {
                    call.await;
                }
            }));
        }
    }
    // The app has all of them, or half.
    let arrived = match leave {
        Leave::Arrived => CALLS,
        Leave::Arriving => CALLS / 2,
        // They leave by themselves; wait for the last of them to be gone.
        Leave::Scattered => 0,
    };
    if leave == Leave::Scattered {
        for call in &mut calls {
            let _ = call.await;
        }
    }
    let started = Instant::now();
    loop {
        let hangs = tool(
            &gateway,
            "hangs",
            json!({"atLeast": arrived, "waitMs": 2000}),
        )
        .await;
        if hangs["hanging"].as_u64() >= Some(arrived) {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{over:?}: the calls did not reach the app: {hangs}"
        );
    }

    // Every client goes away at once.
    for call in &calls {
        call.abort();
    }
    let abandoned = Instant::now();
    let deadline = Duration::from_secs(REQUEST_TIMEOUT_SECONDS) + GRACE;
    // Every call that reached the app is cancelled (a call that never reached it needs no
    // cancellation): wait until nothing waits there, or the deadline.
    let mut hangs;
    loop {
        hangs = tool(&gateway, "hangs", json!({})).await;
        if hangs["hanging"] == 0 || abandoned.elapsed() >= deadline {
            break;
        }
        let _ = tool(
            &gateway,
            "cancellations",
            json!({"atLeast": hangs["started"], "waitMs": 2000}),
        )
        .await;
    }
    let mut problems = Vec::new();
    let reached = hangs["started"].as_u64().unwrap_or(0);
    if hangs["cancellations"] != reached || hangs["hanging"] != 0 {
        problems.push(format!(
            "{} s after the clients left (the deadline is the {REQUEST_TIMEOUT_SECONDS} s \
             request timeout), the app had {} of the {reached} calls that reached it \
             cancelled and {} still waiting",
            deadline.as_secs(),
            hangs["cancellations"],
            hangs["hanging"]
        ));
    }

    // The hub ended every call that reached the app, because its client went away: a call
    // that ran into its request timeout instead was not cancelled when its client left.
    let (cancelled, timed_out) = ended_calls(&gateway).await;
    let enough = match leave {
        Leave::Arrived => cancelled + timed_out == CALLS,
        Leave::Arriving | Leave::Scattered => {
            cancelled + timed_out >= reached && cancelled + timed_out <= CALLS
        }
    };
    if !enough {
        problems.push(format!(
            "the session's hub ended {} calls of the {CALLS} sent, {reached} of which reached \
             the app (mcpapp_tool_calls_total, tool hang, path proxy, cancelled or timeout)",
            cancelled + timed_out
        ));
    }
    if timed_out > 0 {
        problems.push(format!(
            "{timed_out} calls were cancelled upstream only when their request timeout ran \
             out, not when their clients left"
        ));
    }

    // Nothing of the calls is left in the session: the ports (the sessions) remain.
    let stats = session_stats(&gateway).await;
    if stats.port_requests + stats.in_flight + stats.streams + stats.deadlines + stats.calls > 0 {
        problems.push(format!(
            "the session still holds calls whose clients left: {stats:?}"
        ));
    }

    // Deleting the sessions leaves none, and a call left behind must now be gone too.
    for session in &sessions {
        let _ = client
            .delete(&url)
            .header("Mcp-Session-Id", session)
            .send()
            .await;
    }
    let (_, detail) = gateway.get_json("/apps/fx").await;
    if detail["browserSessions"] != 0 {
        problems.push(format!(
            "{} browser sessions remain after every one was deleted",
            detail["browserSessions"]
        ));
    }
    let after = tool(&gateway, "hangs", json!({})).await;
    if after["hanging"] != 0 {
        problems.push(format!(
            "{} calls still wait in the app after every session was deleted",
            after["hanging"]
        ));
    }
    // The routing tables are empty: the deleted sessions' ports are closed (each closes as
    // its last holder lets go), and nothing of theirs remains.
    let emptied = Instant::now();
    let mut stats = session_stats(&gateway).await;
    while !stats.is_idle() && emptied.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(20)).await;
        stats = session_stats(&gateway).await;
    }
    if !stats.is_idle() {
        problems.push(format!(
            "the session's tables are not empty after every session was deleted: {stats:?}"
        ));
    }
    gateway.shutdown().await;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// `initialize` and `notifications/initialized` on `url`; the session id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let response = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "abandoning-browser", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.bytes().await.unwrap();
    let initialized = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &id)
        .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(initialized.status(), 202);
    id
}

/// Calls one of the fixture's tools on the gateway's own path (not a browser's); its
/// structured result.
async fn tool(gateway: &Gateway, name: &str, arguments: Value) -> Value {
    let result = gateway
        .supervisor
        .get("fx")
        .unwrap()
        .call_tool(name, arguments.as_object().cloned(), None)
        .await
        .unwrap();
    result.structured_content.unwrap_or(Value::Null)
}

/// The `hang` calls of browser sessions the hub counted as ended: (cancelled, timed out).
async fn ended_calls(gateway: &Gateway) -> (u64, u64) {
    let text = reqwest::get(format!("{}/metrics", gateway.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let count = |outcome: &str| {
        let series = format!(
            r#"mcpapp_tool_calls_total{{app="fx",tool="hang",path="proxy",outcome="{outcome}"}} "#
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or(0.0) as u64
    };
    (count("cancelled"), count("timeout"))
}

/// The sizes of the app's session tables.
async fn session_stats(gateway: &Gateway) -> mcpapp_session::SessionStats {
    gateway
        .supervisor
        .get("fx")
        .unwrap()
        .session_stats()
        .await
        .unwrap()
}
