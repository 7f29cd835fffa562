//! Running behind a balancer: the probes, the replica's name on every response, the affinity
//! key on the chat and in the sandbox URL, and the public origins.

use std::time::Duration;

use mcpapp_discovery::Discovery;
use mcpapp_host::{GatewaySettings, StartError};
use mcpapp_manifest::McpAppsConfig;
use mcpapp_testkit::{AppsDir, bin, wait_watch};
use serde_json::{Value, json};

use crate::{Gateway, PATIENCE, policy};

fn discovery(apps: &AppsDir) -> Discovery {
    let config = McpAppsConfig {
        enabled: true,
        ..McpAppsConfig::default()
    };
    Discovery::builder(config)
        .discovery_paths(vec![apps.path().display().to_string()], apps.path())
        .build()
        .unwrap()
}

async fn get(url: &str, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = reqwest::Client::new().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (
        status,
        headers,
        response.json().await.unwrap_or(Value::Null),
    )
}

fn replica(headers: &reqwest::header::HeaderMap) -> &str {
    headers
        .get("mcpapp-replica")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_probes_need_no_token_and_readyz_waits_for_every_app() {
    let apps = AppsDir::new();
    apps.stdio_app("quick", &bin("fixture-app"), &["stdio"], "{}");
    // Never ready on its own: it waits ten minutes before serving.
    apps.stdio_app(
        "slow",
        &bin("fixture-app"),
        &["--start-delay-ms", "600000", "stdio"],
        r#"{"startupTimeoutSeconds": 3600}"#,
    );
    let gateway = mcpapp_host::Gateway::builder(discovery(&apps))
        .bind("127.0.0.1:0".parse().unwrap())
        .token(Some("s3cret".into()))
        .policy(policy())
        .drain(Duration::ZERO)
        .start()
        .await
        .unwrap();
    let url = format!("http://{}", gateway.local_addr());
    let quick = gateway.supervisor().get("quick").unwrap();
    wait_watch(quick.watch(), "quick to settle", |s| {
        s.state.lifecycle.is_settled()
    })
    .await;

    let (status, _, body) = get(&format!("{url}/healthz"), &[]).await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));
    // The token still guards everything else.
    let (status, _, _) = get(&format!("{url}/apps"), &[]).await;
    assert_eq!(status, 401);

    let (status, headers, body) = get(&format!("{url}/readyz"), &[]).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(body["status"], "starting");
    assert_eq!(body["apps"], 2);
    assert_eq!(body["unsettledCount"], 1);
    let unsettled = body["unsettled"].as_array().unwrap();
    assert_eq!(unsettled.len(), 1);
    assert_eq!(unsettled[0]["id"], "slow");
    assert!(
        matches!(
            unsettled[0]["lifecycle"].as_str(),
            Some("Validated" | "Loaded")
        ),
        "{body}"
    );
    // Only ids and states: nothing an app wrote, nothing about paths.
    assert_eq!(
        unsettled[0].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["id", "lifecycle"]
    );

    // A stopped app has settled as much as a failed one.
    gateway.supervisor().get("slow").unwrap().stop().unwrap();
    assert!(gateway.wait_settled(PATIENCE).await);
    let (status, _, body) = get(&format!("{url}/readyz"), &[]).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "ready", "apps": 2, "needsAuthorization": 0})
        )
    );

    // Once shutdown begins the replica is no longer ready, while it still serves.
    gateway.host().begin_shutdown();
    let (status, _, body) = get(&format!("{url}/readyz"), &[]).await;
    assert_eq!((status, body), (503, json!({"status": "stopping"})));
    let (status, _, _) = get(&format!("{url}/healthz"), &[]).await;
    assert_eq!(status, 200);
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_probes_keep_the_host_check() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    for path in ["/healthz", "/readyz"] {
        let (status, _, _) = get(
            &format!("{}{path}", gateway.url),
            &[("Host", "rebound.example")],
        )
        .await;
        assert_eq!(status, 403, "{path}");
    }
    let (status, _, body) = get(&format!("{}/readyz", gateway.url), &[]).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "ready", "apps": 0, "needsAuthorization": 0})
        )
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn every_response_names_the_replica() {
    let gateway = Gateway::start(AppsDir::new(), |config| {
        config.replica_name = "replica-a".into();
        config.auth_token = Some("s3cret".into());
    })
    .await;
    for (path, headers, expected) in [
        ("/healthz", vec![], 200),
        ("/apps", vec![], 401),
        ("/apps", vec![("Authorization", "Bearer s3cret")], 200),
        ("/", vec![], 200),
        ("/apps", vec![("Origin", "http://elsewhere.example")], 403),
    ] {
        let (status, response, _) = get(&format!("{}{path}", gateway.url), &headers).await;
        assert_eq!(status, expected, "{path} {headers:?}");
        assert_eq!(replica(&response), "replica-a", "{path} {headers:?}");
    }
    let (status, response, _) = get(
        &format!("{}/sandbox.html?view=nope", gateway.sandbox_url),
        &[],
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(replica(&response), "replica-a");
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_default_replica_name_is_the_host_name() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    let (_, headers, _) = get(&format!("{}/healthz", gateway.url), &[]).await;
    let expected = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(replica(&headers), expected.trim());
    gateway.shutdown().await;
}

async fn chat(
    gateway: &Gateway,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/apps/chat", gateway.url))
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn session_of(stream: &str) -> Value {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|e| e["type"] == "session")
        .map(|e| e["sessionId"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn the_affinity_key_is_the_chat_session_id() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    let key = ("Mcpapp-Affinity", "page-5f0c2a");

    // The key alone names the session, and the answer names the key.
    let (status, headers, stream) = chat(&gateway, &[key], json!({"message": "/tools"})).await;
    assert_eq!(status, 200, "{stream}");
    assert_eq!(session_of(&stream), "page-5f0c2a");
    assert_eq!(headers["mcpapp-affinity"], "page-5f0c2a");
    // The same session, named in both places.
    let (status, _, stream) = chat(
        &gateway,
        &[key],
        json!({"message": "/tools", "sessionId": "page-5f0c2a"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(session_of(&stream), "page-5f0c2a");

    // A body naming another session than the key would be routed by the wrong key.
    let (status, _, body) = chat(
        &gateway,
        &[key],
        json!({"message": "/tools", "sessionId": "page-other"}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("Mcpapp-Affinity"), "{body}");
    for bad in ["page 1", "page/1"] {
        let (status, _, body) = chat(
            &gateway,
            &[("Mcpapp-Affinity", bad)],
            json!({"message": "/tools"}),
        )
        .await;
        assert_eq!(status, 400, "{bad}");
        assert!(body.contains("1 to 128"), "{body}");
    }

    // Without a key the gateway picks the session id and says which key to send.
    let (status, headers, stream) = chat(&gateway, &[], json!({"message": "/tools"})).await;
    assert_eq!(status, 200);
    let picked = session_of(&stream);
    assert!(picked.as_str().unwrap().starts_with("apps-"), "{picked}");
    assert_eq!(headers["mcpapp-affinity"], picked.as_str().unwrap());
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_sandbox_url_carries_the_affinity_key() {
    let apps = AppsDir::new();
    apps.stdio_app("grocery", &bin("grocery-inventory"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let prepare = |headers: Vec<(&'static str, &'static str)>| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/apps/grocery/views", gateway.url))
            .json(&json!({ "uri": "ui://grocery/store-dashboard.html" }));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move {
            let response = request.send().await.unwrap();
            let view: Value = response.json().await.unwrap();
            view["sandboxUrl"].as_str().unwrap().to_owned()
        }
    };
    let with_key = prepare(vec![("Mcpapp-Affinity", "page-77")]).await;
    assert!(
        with_key.starts_with(&format!("{}/sandbox.html?view=", gateway.sandbox_url)),
        "{with_key}"
    );
    assert!(with_key.ends_with("&affinity=page-77"), "{with_key}");
    // The sandbox ignores the key and serves the view.
    let response = reqwest::get(&with_key).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("content-security-policy"));
    let without = prepare(vec![]).await;
    assert!(!without.contains("affinity"), "{without}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn public_origins_are_what_browsers_see_behind_a_balancer() {
    let apps = AppsDir::new();
    apps.stdio_app("grocery", &bin("grocery-inventory"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |config| {
        config.public_origin = Some("https://mcpapp.example.com".into());
        config.sandbox_origin = Some("https://sandbox.example.com".into());
    })
    .await;
    // The balancer's names pass the Host check (no token here), the page's origin the
    // Origin check, and the URLs handed out use them.
    let (status, _, body) = get(
        &format!("{}/apps", gateway.url),
        &[
            ("Host", "mcpapp.example.com"),
            ("Origin", "https://mcpapp.example.com"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["apps"][0]["mcp"],
        "https://mcpapp.example.com/apps/mcp/grocery"
    );
    let (_, _, health) = get(&format!("{}/apps/health", gateway.url), &[]).await;
    assert_eq!(
        health["sandbox"],
        "https://sandbox.example.com/sandbox.html"
    );
    let page = reqwest::get(format!("{}/", gateway.url)).await.unwrap();
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("frame-src https://sandbox.example.com;"),
        "{csp}"
    );
    let (status, _, _) = get(
        &format!("{}/sandbox.html?view=nope", gateway.sandbox_url),
        &[("Host", "sandbox.example.com")],
    )
    .await;
    assert_eq!(
        status, 404,
        "the sandbox's public name passes the Host check"
    );
    let (status, _, _) = get(
        &format!("{}/apps", gateway.url),
        &[("Host", "other.example.com")],
    )
    .await;
    assert_eq!(status, 403);

    // One port for both origins: under the sandbox's name the main listener serves the
    // sandbox, and nothing of the page.
    let view: Value = reqwest::Client::new()
        .post(format!("{}/apps/grocery/views", gateway.url))
        .json(&json!({ "uri": "ui://grocery/store-dashboard.html" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sandbox_url = view["sandboxUrl"].as_str().unwrap();
    let query = sandbox_url
        .strip_prefix("https://sandbox.example.com/sandbox.html")
        .unwrap();
    let frame = reqwest::Client::new()
        .get(format!("{}/sandbox.html{query}", gateway.url))
        .header("Host", "sandbox.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(frame.status(), 200);
    assert!(frame.headers().contains_key("content-security-policy"));
    for path in ["/apps", "/", "/healthz", "/apps/mcp/grocery"] {
        let (status, _, _) = get(
            &format!("{}{path}", gateway.url),
            &[("Host", "sandbox.example.com")],
        )
        .await;
        assert_eq!(status, 404, "{path} under the sandbox's name");
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn public_settings_are_checked_at_start() {
    let cases = [
        (
            json!({"PublicOrigin": "mcpapp.example.com"}),
            "Gateway.PublicOrigin 'mcpapp.example.com' is not an origin",
        ),
        (
            json!({"SandboxOrigin": "https://sandbox.example.com/path"}),
            "Gateway.SandboxOrigin 'https://sandbox.example.com/path' is not an origin",
        ),
        (
            json!({"PublicOrigin": "https://a.example", "SandboxOrigin": "https://A.example/"}),
            "app views need an origin of their own",
        ),
        (
            json!({"ReplicaName": "replica a"}),
            "Gateway.ReplicaName 'replica a' is not usable",
        ),
    ];
    for (settings, expected) in cases {
        let settings: GatewaySettings = serde_json::from_value(settings).unwrap();
        let result = mcpapp_host::Gateway::builder(discovery(&AppsDir::new()))
            .bind("127.0.0.1:0".parse().unwrap())
            .settings(settings)
            .start()
            .await;
        let err: StartError = result.map(|_| ()).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[tokio::test]
async fn a_public_origin_alone_leaves_loopback_requests_to_the_page() {
    // Without Gateway.SandboxOrigin the sandbox's origin is its own listener's loopback
    // address: a request to the main listener on that host (a health check, the CLI) is the
    // page's, not the sandbox's.
    let apps = AppsDir::new();
    apps.stdio_app("grocery", &bin("grocery-inventory"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |config| {
        config.public_origin = Some("https://mcpapp.example.com".into());
    })
    .await;
    for path in ["/readyz", "/apps", "/"] {
        let (status, _, body) = get(&format!("{}{path}", gateway.url), &[]).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (_, _, health) = get(&format!("{}/apps/health", gateway.url), &[]).await;
    assert_eq!(
        health["sandbox"],
        format!("{}/sandbox.html", gateway.sandbox_url)
    );
    gateway.shutdown().await;
}
