//! The original module's tool-bridging conformance items (behaviour reference §11.1, items
//! 27–33) against real apps over stdio and Streamable HTTP: remote calls with and without
//! arguments, bad arguments, UI metadata, app-only tools, and UI structured content.

use mcpapp_bridge::ERROR_PREFIX;
use mcpapp_testkit::{AppsDir, HttpApp, bin};
use serde_json::{Value, json};

use crate::{Bridge, PATIENCE};

/// Items 27–30 against one grocery app registered with prefix `grocery.`.
async fn grocery_calls(bridge: &Bridge) {
    // 27: a call without arguments reaches the app.
    let stores = bridge.call("grocery.get_stores", "{}").await;
    assert!(!stores.is_error, "{stores:?}");
    assert!(!stores.text.contains("Error:"), "{}", stores.text);
    assert!(stores.text.contains("Downtown Market"), "{}", stores.text);
    // Blank arguments mean `{}`.
    let blank = bridge.call("grocery.get_stores", "  ").await;
    assert_eq!(blank.text, stores.text);

    // 28: arguments are passed through.
    let row = bridge
        .call("grocery.get_inventory", r#"{"storeId":1,"productId":1}"#)
        .await;
    assert!(!row.text.contains("Error:"), "{}", row.text);
    let structured = row.structured.unwrap();
    assert_eq!(structured["count"], 1, "{structured}");
    assert_eq!(structured["items"][0]["storeId"], 1);
    assert_eq!(structured["items"][0]["productId"], 1);

    // 29 and 30: bad arguments are an `Error:` text, not a panic and not a call.
    let garbage = bridge.call("grocery.get_stores", "not-json-at-all").await;
    assert!(garbage.is_error);
    assert!(
        garbage
            .text
            .starts_with("Error: invalid JSON arguments for tool 'grocery.get_stores': "),
        "{}",
        garbage.text
    );
    assert!(garbage.text.contains("line 1 column"), "{}", garbage.text);
    let array = bridge.call("grocery.get_stores", "[1, 2, 3]").await;
    assert!(array.is_error);
    assert_eq!(
        array.text,
        "Error: invalid JSON arguments for tool 'grocery.get_stores': the arguments must be a \
         JSON object, not an array"
    );
}

#[tokio::test]
async fn grocery_tools_are_called_over_stdio() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery-inventory",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let bridge = Bridge::start(apps).await;
    grocery_calls(&bridge).await;
    bridge.shutdown().await;
}

#[tokio::test]
async fn grocery_tools_are_called_over_http() {
    let server = HttpApp::start("grocery-inventory", &[]);
    let apps = AppsDir::new();
    apps.http_app(
        "grocery-http",
        &server.url,
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let bridge = Bridge::start(apps).await;
    grocery_calls(&bridge).await;
    bridge.shutdown().await;
}

#[tokio::test]
async fn bad_arguments_never_reach_the_app() {
    // `--stderr-noise 0` makes the app log one stderr line per tool call it receives.
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio", "--stderr-noise", "0"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    let bridge = Bridge::start(apps).await;
    for bad in [
        "not-json-at-all",
        "[1, 2, 3]",
        "7",
        "\"text\"",
        "null",
        "{\"a\":",
    ] {
        let output = bridge.call("fx.echo", bad).await;
        assert!(output.is_error, "{bad}: {output:?}");
        assert!(output.text.starts_with(ERROR_PREFIX), "{}", output.text);
    }
    // A good call afterwards is the first call the app sees. Stderr is read apart from the
    // answers, so wait for its line; any earlier call would have logged before it.
    let output = bridge.call("fx.echo", r#"{"message": "first"}"#).await;
    assert!(output.text.starts_with("first"), "{output:?}");
    let app = bridge.app("fx");
    let logged = mcpapp_testkit::eventually(PATIENCE, async || {
        app.stderr_tail().iter().any(|l| l.ends_with(": echo"))
    })
    .await;
    assert!(logged, "{:?}", app.stderr_tail());
    let calls: Vec<String> = app
        .stderr_tail()
        .into_iter()
        .filter(|l| l.contains("tool call"))
        .collect();
    assert_eq!(calls, ["fixture-app noise: tool call 1: echo"]);
    bridge.shutdown().await;
}

/// Items 31–33 against the fixture app registered with prefix `uiapp.`.
async fn ui_tools(bridge: &Bridge) {
    let names = bridge.names();
    // 32: app-only tools are skipped, model-visible ones registered with the prefix.
    assert!(
        names.contains(&"uiapp.show_fixture_ui".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"uiapp.model_only_tool".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"uiapp.legacy_ui_tool".to_owned()),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.ends_with("app_only_tool")),
        "{names:?}"
    );
    assert!(names.iter().all(|n| n.starts_with("uiapp.")), "{names:?}");

    // 31: UI metadata is kept on the registered tool.
    let show = bridge.tool("uiapp.show_fixture_ui");
    let meta = show.meta().unwrap();
    assert!(meta.get("ui").is_some(), "{meta}");
    assert_eq!(meta["ui"]["resourceUri"], "ui://fixture/view.html");
    assert_eq!(
        bridge.tool("uiapp.legacy_ui_tool").meta().unwrap()["ui/resourceUri"],
        "ui://fixture/view.html"
    );

    // 33: a UI tool's structured content stays out of the model's text, but is kept.
    for (name, remote) in [
        ("uiapp.show_fixture_ui", "show_fixture_ui"),
        ("uiapp.legacy_ui_tool", "legacy_ui_tool"),
    ] {
        let output = bridge.call(name, "{}").await;
        assert!(
            output.text.contains(&format!("called:{remote}")),
            "{output:?}"
        );
        assert!(!output.text.contains("\"ok\":true"), "{output:?}");
        assert_eq!(output.structured, Some(json!({"ok": true, "name": remote})));
    }
    // A tool without a UI gets its structured content appended.
    let plain = bridge.call("uiapp.model_only_tool", "{}").await;
    assert!(plain.text.contains("called:model_only_tool"), "{plain:?}");
    assert!(plain.text.contains("\"ok\":true"), "{plain:?}");
}

#[tokio::test]
async fn ui_metadata_visibility_and_suppression_over_stdio() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "uiapp",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "uiapp."}"#,
    );
    let bridge = Bridge::start(apps).await;
    ui_tools(&bridge).await;
    bridge.shutdown().await;
}

#[tokio::test]
async fn ui_metadata_visibility_and_suppression_over_http() {
    let server = HttpApp::start("fixture-app", &[]);
    let apps = AppsDir::new();
    apps.http_app("uiapp", &server.url, r#"{"toolNamePrefix": "uiapp."}"#);
    let bridge = Bridge::start(apps).await;
    ui_tools(&bridge).await;
    bridge.shutdown().await;
}

#[tokio::test]
async fn grocery_visibility_and_dashboard() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery-inventory",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let bridge = Bridge::start(apps).await;
    let names = bridge.names();
    // `refresh_dashboard` is for the view only; `reset_inventory` is for the model only.
    assert!(
        !names.contains(&"grocery.refresh_dashboard".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grocery.reset_inventory".to_owned()),
        "{names:?}"
    );
    let listed = bridge.app("grocery-inventory").descriptors().tools.len();
    assert_eq!(names.len(), listed - 1, "{names:?}");

    // The dashboard's payload is for its view: the model gets the summary text only.
    let dashboard = bridge
        .call(
            "grocery.show_store_inventory_dashboard",
            r#"{"storeId": 1}"#,
        )
        .await;
    assert!(!dashboard.is_error, "{dashboard:?}");
    let structured = dashboard.structured.clone().unwrap();
    assert!(structured["stores"][0]["items"].is_array(), "{structured}");
    assert!(!dashboard.text.contains("\"items\""), "{}", dashboard.text);
    assert!(!dashboard.text.is_empty());
    // The description comes from the app.
    assert!(
        !bridge
            .tool("grocery.get_low_stock")
            .description()
            .is_empty()
    );
    let inventory = bridge.tool("grocery.get_inventory");
    let schema: &Value = inventory.input_schema();
    assert!(schema["properties"]["storeId"].is_object(), "{schema}");
    bridge.shutdown().await;
}
