//! The host page, view preparation and the sandbox listener.

use mcpapp_testkit::{AppsDir, bin};
use serde_json::{Value, json};

use crate::Gateway;

async fn prepare(gateway: &Gateway, app: &str, uri: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/apps/{app}/views", gateway.url))
        .json(&json!({ "uri": uri }))
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_without_a_token() {
    let gateway = Gateway::start(AppsDir::new(), |c| c.auth_token = Some("t".into())).await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/assets/host.js", "text/javascript"),
        ("/assets/state.js", "text/javascript"),
        ("/assets/dom.js", "text/javascript"),
        ("/assets/notices.js", "text/javascript"),
        ("/assets/theme.js", "text/javascript"),
        ("/assets/catalog.js", "text/javascript"),
        ("/assets/apps-panel.js", "text/javascript"),
        ("/assets/transcript.js", "text/javascript"),
        ("/assets/views.js", "text/javascript"),
        ("/assets/ui-events.js", "text/javascript"),
        ("/assets/chat.js", "text/javascript"),
        ("/assets/elicitation.js", "text/javascript"),
        ("/assets/api.js", "text/javascript"),
        ("/assets/mcp-client.js", "text/javascript"),
        ("/assets/view-bridge.js", "text/javascript"),
        ("/assets/host.css", "text/css"),
    ] {
        let response = reqwest::get(format!("{}{path}", gateway.url))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind),
            "{path}"
        );
    }
    assert_eq!(
        reqwest::get(format!("{}/assets/nope.js", gateway.url))
            .await
            .unwrap()
            .status(),
        404
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_page_frames_only_the_sandbox_and_cannot_be_framed() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    let response = reqwest::get(format!("{}/", gateway.url)).await.unwrap();
    let header = |name: &str| {
        response.headers()[name]
            .to_str()
            .unwrap_or_default()
            .to_owned()
    };
    let csp = header("content-security-policy");
    assert!(
        csp.contains(&format!("frame-src {};", gateway.sandbox_url)),
        "{csp}"
    );
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert_eq!(header("referrer-policy"), "no-referrer");
    let html = response.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="/assets/host.js">"#));
    // Every module a served script imports is served too, so the page loads whole.
    let mut pending = vec!["host.js".to_owned()];
    let mut seen = Vec::new();
    while let Some(file) = pending.pop() {
        if seen.contains(&file) {
            continue;
        }
        let response = reqwest::get(format!("{}/assets/{file}", gateway.url))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{file} is imported but not served");
        let source = response.text().await.unwrap();
        // An import's last line (a long one spans several) names the module.
        for line in source
            .lines()
            .filter(|l| l.starts_with("import ") || l.starts_with("} from "))
            .filter(|l| l.contains(" from "))
        {
            let target = line
                .split(" from \"./")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("{file}: unexpected import {line}"));
            pending.push(target.to_owned());
        }
        seen.push(file);
    }
    // The entry and its seventeen modules.
    assert_eq!(seen.len(), 18, "{seen:?}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_prepared_view_gets_its_csp_from_the_server_on_another_origin() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["--csp-connect-domain", "http://127.0.0.1:9", "stdio"],
        "{}",
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let (status, view) = prepare(&gateway, "grocery", "ui://grocery/store-dashboard.html").await;
    assert_eq!(status, 200, "{view}");
    let sandbox_url = view["sandboxUrl"].as_str().unwrap();
    assert!(
        sandbox_url.starts_with(&format!("{}/sandbox.html?view=", gateway.sandbox_url)),
        "{sandbox_url}"
    );
    assert_ne!(gateway.sandbox_url, gateway.url);
    assert_eq!(
        view["policy"]["connectDomains"],
        json!(["http://127.0.0.1:9"])
    );
    assert_eq!(view["policy"]["prefersBorder"], true);

    let response = reqwest::get(sandbox_url).await.unwrap();
    assert_eq!(response.status(), 200);
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(csp, view["csp"].as_str().unwrap());
    assert!(
        csp.contains("connect-src 'self' http://127.0.0.1:9;"),
        "{csp}"
    );
    assert!(
        csp.contains("frame-src 'none'") && csp.contains("object-src 'none'"),
        "{csp}"
    );
    let html = response.text().await.unwrap();
    assert!(
        html.contains(&format!("const HOST_ORIGIN = \"{}\";", gateway.url)),
        "the host origin is pinned"
    );
    assert!(html.contains("sandbox-proxy-ready"));

    // The sandbox serves nothing else, and not for unknown views.
    assert_eq!(
        reqwest::get(format!("{}/sandbox.html?view=nope", gateway.sandbox_url))
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        reqwest::get(format!("{}/apps", gateway.sandbox_url))
            .await
            .unwrap()
            .status(),
        404
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn only_mcp_app_resources_can_be_views() {
    let apps = AppsDir::new();
    apps.stdio_app("grocery", &bin("grocery-inventory"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let (status, body) = prepare(&gateway, "grocery", "inventory://stores/1/summary").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not an MCP App view")
    );
    let (status, _) = prepare(&gateway, "nope", "ui://x").await;
    assert_eq!(status, 404);
    // Without declared domains the policy is the restrictive default.
    let (status, view) = prepare(&gateway, "grocery", "ui://grocery/store-dashboard.html").await;
    assert_eq!(status, 200);
    assert!(view["csp"].as_str().unwrap().contains("connect-src 'none'"));
    gateway.shutdown().await;
}
