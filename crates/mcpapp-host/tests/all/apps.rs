//! `/apps/health`, `/apps`, `/apps/{id}`, control and reload.

use mcpapp_manifest::Lifecycle;
use mcpapp_testkit::{AppsDir, bin, wait_state, wait_watch};
use serde_json::json;

use crate::{Gateway, PATIENCE};

#[tokio::test]
async fn health_names_the_ui_app_and_its_proxy_url() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "plain",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"hasUi": false}"#,
    );
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"hasUi": true}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let (status, body) = gateway.get_json("/apps/health").await;
    assert_eq!(status, 200);
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["ok", "name", "mcp", "sandbox"]);
    assert_eq!(body["ok"], true);
    assert_eq!(body["name"], "grocery");
    assert_eq!(body["mcp"], format!("{}/apps/mcp/grocery", gateway.url));
    assert_eq!(
        body["sandbox"],
        format!("{}/sandbox.html", gateway.sandbox_url)
    );

    let (_, picked) = gateway.get_json("/apps/health?appId=plain").await;
    assert_eq!(picked["name"], "plain");
    assert!(picked["mcp"].as_str().unwrap().ends_with("/apps/mcp/plain"));
    let (status, _) = gateway.get_json("/apps/health?appId=nope").await;
    assert_eq!(status, 404);
    gateway.shutdown().await;
}

#[tokio::test]
async fn health_without_running_apps_says_so() {
    let gateway = Gateway::start(AppsDir::new(), |_| {}).await;
    let (_, body) = gateway.get_json("/apps/health").await;
    assert_eq!(
        body,
        json!({"ok": false, "name": "mcpapp", "mcp": null, "sandbox": format!("{}/sandbox.html", gateway.sandbox_url)})
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn apps_lists_every_app_without_secrets() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"environment": {"API_KEY": "super-secret-value"}, "toolNamePrefix": "fx."}"#,
    );
    apps.http_app(
        "remote",
        "http://127.0.0.1:9/mcp",
        r#"{"headers": {"Authorization": "Bearer hidden-token"}, "startupTimeoutSeconds": 1}"#,
    );
    apps.manifest("broken", &json!({"id": "broken"}));
    apps.manifest("no-id", &json!({"command": "x"}));
    let gateway = Gateway::start(apps, |_| {}).await;
    // The unreachable app is restarted with backoff, so it is Failed only between attempts;
    // look until it is seen there.
    let deadline = tokio::time::Instant::now() + crate::PATIENCE;
    let (status, body) = loop {
        let (status, body) = gateway.get_json("/apps").await;
        let failed = body["apps"].as_array().is_some_and(|l| {
            l.iter()
                .any(|a| a["id"] == "remote" && a["lifecycle"] == "Failed")
        });
        if failed || tokio::time::Instant::now() > deadline {
            break (status, body);
        }
        let mut events = gateway.supervisor.subscribe();
        let _ = tokio::time::timeout(crate::PATIENCE, events.recv()).await;
    };
    assert_eq!(status, 200);
    let text = body.to_string();
    assert!(
        !text.contains("super-secret-value") && !text.contains("hidden-token"),
        "{text}"
    );
    let list = body["apps"].as_array().unwrap();
    assert_eq!(list.len(), 4);
    let fx = list.iter().find(|a| a["id"] == "fx").unwrap();
    assert_eq!(fx["lifecycle"], "Running");
    assert_eq!(fx["transport"], "stdio");
    assert!(fx["toolCount"].as_u64().unwrap() > 10);
    assert_eq!(fx["restartCount"], 0);
    assert_eq!(fx["hasUi"], true);
    assert_eq!(fx["uiResourceUri"], "ui://fixture/view.html");
    assert_eq!(fx["mcp"], format!("{}/apps/mcp/fx", gateway.url));
    assert!(fx["stateChangedAt"].as_str().unwrap().ends_with('Z'));
    let remote = list.iter().find(|a| a["id"] == "remote").unwrap();
    assert_eq!(remote["lifecycle"], "Failed");
    assert!(
        remote["lastError"]
            .as_str()
            .unwrap()
            .contains("cannot reach"),
        "{remote}"
    );
    let broken = list.iter().find(|a| a["id"] == "broken").unwrap();
    assert_eq!(broken["isValid"], false);
    assert!(
        broken["validationErrors"][0]
            .as_str()
            .unwrap()
            .contains("command")
    );
    assert!(list.iter().any(|a| a["id"].is_null()));
    gateway.shutdown().await;
}

#[tokio::test]
async fn app_detail_shows_tools_resources_prompts_and_stderr() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let (status, body) = gateway.get_json("/apps/grocery").await;
    assert_eq!(status, 200);
    let tools = body["tools"].as_array().unwrap();
    let refresh = tools
        .iter()
        .find(|t| t["name"] == "refresh_dashboard")
        .unwrap();
    assert_eq!(
        refresh["visibility"],
        json!({"model": false, "app": true, "malformed": false})
    );
    let dashboard = tools
        .iter()
        .find(|t| t["name"] == "show_store_inventory_dashboard")
        .unwrap();
    assert_eq!(
        dashboard["uiResourceUri"],
        "ui://grocery/store-dashboard.html"
    );
    assert_eq!(body["resourceTemplates"].as_array().unwrap().len(), 2);
    assert_eq!(body["prompts"].as_array().unwrap().len(), 3);
    assert!(body["stderrTail"].is_array());
    let (status, _) = gateway.get_json("/apps/unknown").await;
    assert_eq!(status, 404);
    gateway.shutdown().await;
}

#[tokio::test]
async fn app_detail_keeps_the_stderr_of_the_current_and_the_previous_run_apart() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "tails",
        &bin("fixture-app"),
        &["stdio", "--stderr-noise", "1"],
        "{}",
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let app = gateway.supervisor.get("tails").unwrap();
    // Only the first run sees a tool call.
    app.call_tool("echo", None, None).await.unwrap();
    assert!(
        mcpapp_testkit::eventually(PATIENCE, async || app
            .stderr_tail()
            .iter()
            .any(|l| l.ends_with("tool call 1: echo")))
        .await,
        "{:?}",
        app.stderr_tail()
    );
    let (_, before) = gateway.get_json("/apps/tails").await;
    assert_eq!(before["previousStderrTail"], json!([]));

    let (status, _) = gateway.post_json("/apps/tails/restart").await;
    assert_eq!(status, 202);
    wait_watch(app.watch(), "tails to run again after its restart", |s| {
        s.restart_count == 1 && s.state.lifecycle == Lifecycle::Running
    })
    .await;
    let (status, body) = gateway.get_json("/apps/tails").await;
    assert_eq!(status, 200);
    let lines = |key: &str| -> Vec<String> {
        body[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key} is not an array: {body}"))
            .iter()
            .map(|l| l.as_str().unwrap().to_owned())
            .collect()
    };
    let current = lines("stderrTail");
    let previous = lines("previousStderrTail");
    assert!(
        previous.iter().any(|l| l.ends_with("tool call 1: echo")),
        "{previous:?}"
    );
    assert!(
        !current.iter().any(|l| l.contains("tool call")),
        "{current:?}"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn control_routes_stop_start_and_restart() {
    let apps = AppsDir::new();
    apps.stdio_app("ctl", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    let app = gateway.supervisor.get("ctl").unwrap();
    let (status, body) = gateway.post_json("/apps/ctl/stop").await;
    assert_eq!((status, &body["ok"]), (202, &json!(true)));
    wait_state(app.watch(), Lifecycle::Stopped).await;
    let (status, _) = gateway.post_json("/apps/ctl/start").await;
    assert_eq!(status, 202);
    wait_state(app.watch(), Lifecycle::Running).await;
    let (status, _) = gateway.post_json("/apps/ctl/explode").await;
    assert_eq!(status, 404);
    let (status, _) = gateway.post_json("/apps/nope/start").await;
    assert_eq!(status, 404);
    gateway.shutdown().await;
}

#[tokio::test]
async fn reload_picks_up_a_new_manifest() {
    let apps = AppsDir::new();
    apps.stdio_app("first", &bin("fixture-app"), &["stdio"], "{}");
    let gateway = Gateway::start(apps, |_| {}).await;
    gateway
        .apps
        .stdio_app("second", &bin("fixture-app"), &["stdio"], "{}");
    let (status, body) = gateway.post_json("/apps/reload").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["added"], json!(["second"]));
    assert_eq!(body["unchanged"], json!(["first"]));
    let second = gateway.supervisor.get("second").unwrap();
    wait_state(second.watch(), Lifecycle::Running).await;
    let (_, list) = gateway.get_json("/apps").await;
    assert_eq!(list["apps"].as_array().unwrap().len(), 2);
    gateway.shutdown().await;
}

#[tokio::test]
async fn tool_name_collisions_show_in_the_app_list() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "first",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    apps.stdio_app(
        "second",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let (_, body) = gateway.get_json("/apps").await;
    let collisions: Vec<&serde_json::Value> = body["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["kind"] == "nameCollision"
                || d["message"].as_str().unwrap_or_default().contains("collid")
        })
        .collect();
    assert!(!collisions.is_empty(), "{body}");
    assert!(
        collisions.iter().any(|d| d["tool"] == "fx.echo"),
        "{collisions:?}"
    );
    gateway.shutdown().await;
}
