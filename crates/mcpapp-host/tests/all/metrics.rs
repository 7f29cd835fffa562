//! `GET /metrics`: the Prometheus text format, behind the token, with counters that move
//! with real calls of a real app through the chat agent, the per-app proxy and `/mcp`.

use std::collections::BTreeMap;

use mcpapp_testkit::{AppsDir, bin, eventually, wait_watch};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::{Gateway, PATIENCE};

const TOKEN: &str = "metrics-token";

/// One sample of the exposition.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text format (version 0.0.4) strictly: every line is a `# HELP`, a
/// `# TYPE` with a known type, or a sample of a family whose type was declared before it,
/// with well-formed names, quoted and escaped label values, and a number.
fn parse(text: &str) -> Vec<Sample> {
    fn is_name(s: &str, colons: bool) -> bool {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colons && c == ':'))
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':'))
    }
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    assert!(text.ends_with('\n'), "the exposition ends with a newline");
    for (n, line) in text.lines().enumerate() {
        let at = || format!("line {}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let (keyword, rest) = rest.split_once(' ').unwrap_or_else(|| panic!("{}", at()));
            let (name, rest) = rest.split_once(' ').unwrap_or_else(|| panic!("{}", at()));
            assert!(is_name(name, true), "{}", at());
            match keyword {
                "HELP" => {}
                "TYPE" => {
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&rest),
                        "{}",
                        at()
                    );
                    assert!(
                        types.insert(name.to_owned(), rest.to_owned()).is_none(),
                        "a second TYPE, {}",
                        at()
                    );
                }
                _ => panic!("unknown comment, {}", at()),
            }
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("{}", at()));
        let name = &line[..name_end];
        assert!(is_name(name, true), "{}", at());
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE before, {}", at());
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if let Some(inner) = rest.strip_prefix('{') {
            let mut chars = inner.char_indices().peekable();
            let end;
            loop {
                // A label name, `=`, a quoted value, then `,` or `}`.
                let start = chars
                    .peek()
                    .map(|(i, _)| *i)
                    .unwrap_or_else(|| panic!("{}", at()));
                if inner[start..].starts_with('}') {
                    end = Some(start + 1);
                    break;
                }
                let eq = inner[start..]
                    .find('=')
                    .unwrap_or_else(|| panic!("{}", at()))
                    + start;
                let key = &inner[start..eq];
                assert!(is_name(key, false), "label name {key:?}, {}", at());
                assert_eq!(inner[eq + 1..].chars().next(), Some('"'), "{}", at());
                let mut value = String::new();
                let mut iter = inner[eq + 2..].char_indices();
                let close = loop {
                    match iter
                        .next()
                        .unwrap_or_else(|| panic!("unterminated, {}", at()))
                    {
                        (i, '"') => break eq + 2 + i,
                        (_, '\\') => match iter.next().map(|(_, c)| c) {
                            Some('\\') => value.push('\\'),
                            Some('"') => value.push('"'),
                            Some('n') => value.push('\n'),
                            other => panic!("bad escape {other:?}, {}", at()),
                        },
                        (_, c) => value.push(c),
                    }
                };
                labels.insert(key.to_owned(), value);
                while chars.peek().is_some_and(|(i, _)| *i <= close) {
                    chars.next();
                }
                match chars.next() {
                    Some((_, ',')) => {}
                    Some((i, '}')) => {
                        end = Some(i + 1);
                        break;
                    }
                    other => panic!("expected , or }} not {other:?}, {}", at()),
                }
            }
            rest = &inner[end.unwrap_or_else(|| panic!("{}", at()))..];
        }
        let value = rest.strip_prefix(' ').unwrap_or_else(|| panic!("{}", at()));
        let mut parts = value.split(' ');
        let value = parts.next().unwrap_or_else(|| panic!("{}", at()));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            other => other.parse().unwrap_or_else(|_| panic!("value, {}", at())),
        };
        if let Some(timestamp) = parts.next() {
            timestamp
                .parse::<i64>()
                .unwrap_or_else(|_| panic!("timestamp, {}", at()));
        }
        assert!(parts.next().is_none(), "{}", at());
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    samples
}

/// The value of the sample `name` whose labels include `labels`; none if no series.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(
        matching.len() <= 1,
        "{name}{labels:?} is ambiguous: {matching:?}"
    );
    matching.first().map(|s| s.value)
}

fn calls(samples: &[Sample], app: &str, tool: &str, path: &str, outcome: &str) -> f64 {
    value(
        samples,
        "mcpapp_tool_calls_total",
        &[
            ("app", app),
            ("tool", tool),
            ("path", path),
            ("outcome", outcome),
        ],
    )
    .unwrap_or(0.0)
}

async fn scrape(gateway: &Gateway) -> Vec<Sample> {
    let response = reqwest::Client::new()
        .get(format!("{}/metrics", gateway.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    parse(&response.text().await.unwrap())
}

/// Runs one offline chat turn (`/call TOOL {json}`) and returns its event types.
async fn chat(gateway: &Gateway, message: &str) -> Vec<String> {
    let text = reqwest::Client::new()
        .post(format!("{}/apps/chat", gateway.url))
        .bearer_auth(TOKEN)
        .header("Content-Type", "application/json")
        .body(json!({ "message": message }).to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .map(|data| serde_json::from_str::<serde_json::Value>(data).unwrap()["type"].to_string())
        .collect()
}

fn fixture(apps: &AppsDir) {
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx.", "requestTimeoutSeconds": 1}"#,
    );
}

#[tokio::test]
async fn metrics_need_the_token_parse_and_move_with_calls_on_every_path() {
    let apps = AppsDir::new();
    fixture(&apps);
    let gateway = Gateway::start(apps, |c| c.auth_token = Some(TOKEN.into())).await;
    // A second gateway in the same process: its series are its own.
    let other_apps = AppsDir::new();
    fixture(&other_apps);
    let other = Gateway::start(other_apps, |c| c.auth_token = Some(TOKEN.into())).await;

    let client = reqwest::Client::new();
    let url = format!("{}/metrics", gateway.url);
    assert_eq!(client.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(
        client
            .get(&url)
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );

    let before = scrape(&gateway).await;
    assert_eq!(
        value(
            &before,
            "mcpapp_app_state",
            &[("app", "fx"), ("state", "Running")]
        ),
        Some(1.0),
        "{before:?}"
    );
    for state in [
        "Discovered",
        "Validated",
        "Loaded",
        "Stopped",
        "Failed",
        "Disabled",
    ] {
        assert_eq!(
            value(
                &before,
                "mcpapp_app_state",
                &[("app", "fx"), ("state", state)]
            ),
            Some(0.0),
            "{state}"
        );
    }
    assert_eq!(
        value(&before, "mcpapp_app_restarts_total", &[("app", "fx")]),
        Some(0.0)
    );
    assert_eq!(
        value(&before, "mcpapp_proxy_sessions", &[("app", "fx")]),
        Some(0.0)
    );
    let build = before
        .iter()
        .find(|s| s.name == "mcpapp_build_info")
        .expect("build info");
    assert_eq!(build.value, 1.0);
    assert_eq!(build.labels["version"], env!("CARGO_PKG_VERSION"));
    assert!(build.labels["mcp_versions"].contains("2025-11-25"));
    assert_eq!(calls(&before, "fx", "echo", "agent", "ok"), 0.0);

    // The agent: a result, then a timeout (the app's request timeout is 1 s).
    let events = chat(&gateway, r#"/call fx.echo {"message": "hello"}"#).await;
    assert!(events.contains(&"\"tool_result\"".to_owned()), "{events:?}");
    chat(&gateway, "/call fx.hang {}").await;

    // The proxy, with rmcp's client: a result, and a name the app does not list.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/apps/mcp/fx", gateway.url))
            .auth_header(TOKEN),
    );
    let client_session = ().serve(transport).await.unwrap();
    let during = scrape(&gateway).await;
    assert_eq!(
        value(&during, "mcpapp_proxy_sessions", &[("app", "fx")]),
        Some(1.0)
    );
    let mut params = CallToolRequestParams::new("echo");
    params = params.with_arguments(
        json!({"message": "from a view"})
            .as_object()
            .unwrap()
            .clone(),
    );
    client_session.call_tool(params).await.unwrap();
    let unknown = client_session
        .call_tool(CallToolRequestParams::new("not_a_listed_tool"))
        .await;
    assert!(unknown.is_err() || unknown.unwrap().is_error == Some(true));

    // `/mcp`, with rmcp's client: a result.
    let aggregate = ()
        .serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", gateway.url))
                .auth_header(TOKEN),
        ))
        .await
        .unwrap();
    aggregate
        .call_tool(
            CallToolRequestParams::new("fx.echo")
                .with_arguments(json!({"message": "from /mcp"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    aggregate.cancel().await.unwrap();

    // A proxied call whose client goes away: cancelled upstream.
    let raw = proxy_session(&gateway).await;
    let hang = client
        .post(format!("{}/apps/mcp/fx", gateway.url))
        .bearer_auth(TOKEN)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &raw)
        .body(
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": "hang", "arguments": {}}})
            .to_string(),
        )
        .send();
    // Well before the 1 s timeout, the client gives up.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(300), hang).await;

    let mut after = Vec::new();
    let moved = eventually(PATIENCE, async || {
        after = scrape(&gateway).await;
        calls(&after, "fx", "hang", "proxy", "cancelled") == 1.0
            && calls(&after, "fx", "hang", "agent", "timeout") == 1.0
    })
    .await;
    assert!(moved, "{after:?}");
    assert_eq!(calls(&after, "fx", "echo", "agent", "ok"), 1.0);
    assert_eq!(calls(&after, "fx", "echo", "proxy", "ok"), 1.0);
    assert_eq!(calls(&after, "fx", "echo", "mcp", "ok"), 1.0, "{after:?}");
    assert_eq!(
        calls(&after, "fx", "other", "proxy", "failed"),
        1.0,
        "{after:?}"
    );
    assert!(
        after
            .iter()
            .all(|s| !s.labels.values().any(|v| v.contains("not_a_listed_tool"))),
        "an unknown name made a series"
    );
    assert_eq!(
        value(&after, "mcpapp_upstream_timeouts_total", &[("app", "fx")]),
        Some(1.0)
    );
    assert_eq!(
        value(
            &after,
            "mcpapp_upstream_cancellations_total",
            &[("app", "fx")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &after,
            "mcpapp_tool_call_duration_seconds_count",
            &[("app", "fx"), ("tool", "echo"), ("path", "proxy")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &after,
            "mcpapp_tool_call_duration_seconds_bucket",
            &[
                ("app", "fx"),
                ("tool", "echo"),
                ("path", "proxy"),
                ("le", "+Inf")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "mcpapp_proxy_sessions", &[("app", "fx")]),
        Some(2.0)
    );

    // The other gateway counted nothing of this.
    let elsewhere = scrape(&other).await;
    assert_eq!(
        calls(&elsewhere, "fx", "echo", "agent", "ok"),
        0.0,
        "{elsewhere:?}"
    );
    assert_eq!(calls(&elsewhere, "fx", "echo", "proxy", "ok"), 0.0);

    // A restart moves the restart counter.
    let restarted = client
        .post(format!("{}/apps/fx/restart", gateway.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(restarted.status().is_success(), "{}", restarted.status());
    let app = gateway.supervisor.get("fx").unwrap();
    wait_watch(app.watch(), "fx to run again after its restart", |s| {
        s.restart_count == 1 && s.state.lifecycle == mcpapp_manifest::Lifecycle::Running
    })
    .await;
    let restarted = scrape(&gateway).await;
    assert_eq!(
        value(&restarted, "mcpapp_app_restarts_total", &[("app", "fx")]),
        Some(1.0)
    );

    client_session.cancel().await.unwrap();
    other.shutdown().await;
    gateway.shutdown().await;
}

/// Opens a raw browser session on `/apps/mcp/fx` and returns its id.
async fn proxy_session(gateway: &Gateway) -> String {
    let response = reqwest::Client::new()
        .post(format!("{}/apps/mcp/fx", gateway.url))
        .bearer_auth(TOKEN)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn metrics_can_be_switched_off() {
    let gateway = Gateway::start(AppsDir::new(), |c| c.serve_metrics = false).await;
    let response = reqwest::get(format!("{}/metrics", gateway.url))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    gateway.shutdown().await;
}

#[test]
fn the_parser_refuses_what_is_not_the_text_format() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"q\\\"uote\"} 3\n";
    assert_eq!(parse(good)[0].labels["x"], "q\"uote");
    for bad in [
        "a_total 1\n",
        "# TYPE a nonsense\na 1\n",
        "# TYPE a gauge\na{x=1} 1\n",
        "# TYPE a gauge\na one\n",
        "# TYPE a gauge\n9a 1\n",
    ] {
        assert!(
            std::panic::catch_unwind(|| parse(bad)).is_err(),
            "accepted {bad:?}"
        );
    }
}
