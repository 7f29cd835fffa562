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
            "mcpapp-affinity",
        ] {
            assert!(allowed.contains(wanted), "{wanted} missing from {allowed}");
        }
    }
    // Simple requests expose the session header, the replica's name and the affinity key.
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
        "mcp-session-id,mcpapp-replica,mcpapp-affinity"
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

#[tokio::test]
async fn host_headers_must_be_exact_authorities_naming_the_gateway() {
    let gateway = Gateway::start(AppsDir::new(), |c| {
        c.allowed_hosts.push("App.Example".into())
    })
    .await;
    let port = gateway.url.rsplit(':').next().unwrap().to_owned();
    let client = reqwest::Client::new();
    let status = |host: String| {
        let request = client
            .get(format!("{}/apps/health", gateway.url))
            .header("Host", host);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    for host in [
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        format!("LocalHost:{port}"),
        "localhost:".to_owned(),
        format!("[::1]:{port}"),
        "[0:0:0:0:0:0:0:1]".to_owned(),
        "app.example".to_owned(),
        "APP.EXAMPLE:8080".to_owned(),
    ] {
        assert_eq!(
            status(host.clone()).await,
            200,
            "{host:?} should be accepted"
        );
    }
    for host in [
        "[::1]evil.example".to_owned(),
        format!("[::1]:{port}evil.example"),
        format!("localhost:{port}x"),
        "localhost:65536".to_owned(),
        "127.0.0.1 .evil".to_owned(),
        "a@localhost".to_owned(),
        "localhost/apps".to_owned(),
        "localhost.evil.example".to_owned(),
        "127.0.0.1.evil.example".to_owned(),
        "127.0.0.01".to_owned(),
        "[::ffff:127.0.0.1]".to_owned(),
        "[::1".to_owned(),
        "evil.example".to_owned(),
        "app.example.evil".to_owned(),
        String::new(),
    ] {
        assert_eq!(
            status(host.clone()).await,
            403,
            "{host:?} should be refused"
        );
    }
    // Two Host headers are one too many, even if both are fine.
    let response = client
        .get(format!("{}/apps/health", gateway.url))
        .header("Host", "localhost")
        .header("Host", "127.0.0.1")
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    gateway.shutdown().await;
}

#[tokio::test]
async fn origins_must_be_exact_and_allowed() {
    let gateway = Gateway::start(AppsDir::new(), |c| {
        c.allowed_origins.push("http://App.Example:3000/".into());
        c.allowed_origins.push("https://secure.example:443".into());
    })
    .await;
    let port = gateway.url.rsplit(':').next().unwrap().to_owned();
    let client = reqwest::Client::new();
    let send = |origin: &str| {
        client
            .get(format!("{}/apps", gateway.url))
            .header("Origin", origin)
            .send()
    };
    for origin in [
        gateway.url.clone(),
        format!("HTTP://LOCALHOST:{port}"),
        format!("http://[::1]:{port}"),
        "http://app.example:3000".to_owned(),
        "https://secure.example".to_owned(),
    ] {
        let response = send(&origin).await.unwrap();
        assert_eq!(response.status(), 200, "{origin:?} should be accepted");
        // CORS agrees with the guard and echoes the origin as sent.
        assert_eq!(
            response.headers()["access-control-allow-origin"],
            origin.as_str()
        );
    }
    for origin in [
        "null".to_owned(),
        format!("{}/", gateway.url),
        format!("{}/apps", gateway.url),
        format!("http://a@127.0.0.1:{port}"),
        format!("http://[::1]evil.example:{port}"),
        format!("http://localhost:{port}x"),
        format!("127.0.0.1:{port}"),
        format!("https://127.0.0.1:{port}"),
        format!("http://127.0.0.1:{}", port.parse::<u32>().unwrap() + 1),
        "http://app.example:3001".to_owned(),
        "http://evil.example".to_owned(),
        String::new(),
    ] {
        let response = send(&origin).await.unwrap();
        assert_eq!(response.status(), 403, "{origin:?} should be refused");
        assert!(
            response
                .headers()
                .get("access-control-allow-origin")
                .is_none()
        );
    }
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let gateway = Gateway::start(AppsDir::new(), |c| c.auth_token = Some("let-me-in".into())).await;
    let client = reqwest::Client::new();
    let status = |authorization: &str| {
        let request = client
            .get(format!("{}/apps", gateway.url))
            .header("Authorization", authorization);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    for good in [
        "Bearer let-me-in",
        "bearer let-me-in",
        "BEARER let-me-in",
        "bEaReR    let-me-in",
    ] {
        assert_eq!(status(good).await, 200, "{good:?} should be accepted");
    }
    for bad in [
        "Bearerlet-me-in",
        "Basic let-me-in",
        "bearer let-me-i",
        "bearer let-me-inn",
        "bearer LET-ME-IN",
        "let-me-in",
        "bearer",
    ] {
        assert_eq!(status(bad).await, 401, "{bad:?} should be refused");
    }
    gateway.shutdown().await;
}
