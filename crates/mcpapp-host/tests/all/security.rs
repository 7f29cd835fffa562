//! CORS, Host and Origin checks, the bearer token and the body limit.

use mcpapp_testkit::AppsDir;
use reqwest::Method;

use crate::Gateway;

#[tokio::test]
async fn preflight_from_an_allowed_origin_gets_the_mcp_headers() {
    let gateway = Gateway::start(AppsDir::new(), |c| {
        c.allowed_origins.push("http://app.example:3000".into())
    })
    .await;
    let client = reqwest::Client::new();
    for origin in [gateway.url.clone(), "http://app.example:3000".to_owned()] {
        let response = client
            .request(Method::OPTIONS, format!("{}/apps/mcp/x", gateway.url))
            .header("Origin", &origin)
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "content-type,mcp-session-id,mcp-protocol-version",
            )
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        let headers = response.headers();
        assert_eq!(headers["access-control-allow-origin"], origin.as_str());
        let allowed = headers["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .to_ascii_lowercase();
        for wanted in [
            "content-type",
            "authorization",
            "mcp-protocol-version",
            "mcp-session-id",
            "last-event-id",
        ] {
            assert!(allowed.contains(wanted), "{wanted} missing from {allowed}");
        }
    }
    // Simple requests expose the session header.
    let response = client
        .get(format!("{}/apps", gateway.url))
        .header("Origin", &gateway.url)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .to_ascii_lowercase(),
        "mcp-session-id"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_disallowed_origin_gets_no_cors_headers() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    let client = reqwest::Client::new();
    let response = client
        .request(Method::OPTIONS, format!("{}/apps/chat", gateway.url))
        .header("Origin", "http://evil.example")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    assert!(
        response
            .headers()
            .keys()
            .all(|k| !k.as_str().starts_with("access-control-")),
        "{:?}",
        response.headers()
    );
    let response = client
        .post(format!("{}/apps/reload", gateway.url))
        .header("Origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    gateway.shutdown().await;
}

#[tokio::test]
async fn foreign_host_headers_are_refused() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    let client = reqwest::Client::new();
    let response = client
        .get(format!("{}/apps", gateway.url))
        .header("Host", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let response = client
        .get(format!("{}/apps", gateway.url).replace("127.0.0.1", "localhost"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_token_is_required_when_configured() {
    let gateway = Gateway::start(AppsDir::new(), |c| c.auth_token = Some("let-me-in".into())).await;
    let client = reqwest::Client::new();
    for path in ["/apps", "/apps/health", "/mcp"] {
        let response = client
            .get(format!("{}{path}", gateway.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path}");
        let response = client
            .get(format!("{}{path}", gateway.url))
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path}");
    }
    let response = client
        .get(format!("{}/apps", gateway.url))
        .bearer_auth("let-me-in")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    gateway.shutdown().await;
}

#[tokio::test]
async fn bodies_over_the_limit_get_413() {
    let gateway = Gateway::start(AppsDir::new(), |c| c.max_body_bytes = 1024).await;
    let client = reqwest::Client::new();
    for path in ["/apps/chat", "/apps/mcp/anything", "/mcp"] {
        let response = client
            .post(format!("{}{path}", gateway.url))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(format!(r#"{{"message": "{}"}}"#, "x".repeat(4096)))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 413, "{path}");
    }
    gateway.shutdown().await;
}
