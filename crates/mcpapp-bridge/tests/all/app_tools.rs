//! MCP App tools against the fixture and grocery apps: result conversion (binary content,
//! structured content, a UI tool's whole result, remote errors), call failures (timeouts,
//! stopped apps, JSON-RPC errors), caller cancellation, the session id in `_meta`, and
//! malformed visibility.

use std::sync::Arc;

use base64::Engine as _;
use mcpapp_bridge::{McpAppTool, SyncDiagnosticKind, Tool, ToolContext};
use mcpapp_manifest::Lifecycle;
use mcpapp_testkit::{AppsDir, bin, wait_state};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{Bridge, PATIENCE};

/// A bridge over one fixture app `fx` with prefix `fx.`; `args` are extra command-line flags
/// and `extra` is merged into the manifest.
async fn fixture(args: &[&str], extra: &str) -> Bridge {
    let apps = AppsDir::new();
    let mut arguments = vec!["stdio"];
    arguments.extend_from_slice(args);
    let mut manifest: Value = serde_json::from_str(extra).unwrap();
    manifest["toolNamePrefix"] = json!("fx.");
    apps.stdio_app("fx", &bin("fixture-app"), &arguments, &manifest.to_string());
    Bridge::start(apps).await
}

#[tokio::test]
async fn images_become_placeholders_with_mime_and_size() {
    let bridge = fixture(&[], "{}").await;
    let raw = bridge
        .app("fx")
        .call_tool("image", None, None)
        .await
        .unwrap();
    let data = raw
        .content
        .iter()
        .find_map(|c| c.as_image().map(|i| i.data.clone()))
        .unwrap();
    let size = base64::engine::general_purpose::STANDARD
        .decode(&data)
        .unwrap()
        .len();

    let output = bridge.call("fx.image", "{}").await;
    assert!(!output.is_error);
    assert_eq!(
        output.text,
        format!("a 2x2 PNG image\n\n[image: image/png, {size} bytes]")
    );
    assert!(!output.text.contains(&data[..16]), "{}", output.text);
    bridge.shutdown().await;
}

#[tokio::test]
async fn ui_tools_carry_the_apps_whole_result_beside_the_model_text() {
    let bridge = fixture(&[], "{}").await;
    let direct = bridge
        .app("fx")
        .call_tool("show_media", None, None)
        .await
        .unwrap();
    let direct = serde_json::to_value(&direct).unwrap();
    assert!(direct["_meta"].is_object(), "{direct}");

    let output = bridge.call("fx.show_media", "{}").await;
    assert!(!output.is_error);
    // The view gets the result as the app sent it: every block, _meta, structuredContent.
    assert_eq!(output.raw.as_ref(), Some(&direct));
    // The model gets text and placeholders only: no base64, no _meta, no structured content.
    let image = direct["content"][1]["data"].as_str().unwrap();
    let audio = direct["content"][2]["data"].as_str().unwrap();
    assert_eq!(
        output.text,
        "media: a 2x2 PNG and a 2 ms WAV tone\n\n[image: image/png, 75 bytes]\n\n[audio: audio/wav, 60 bytes]"
    );
    assert!(!output.text.contains(&image[..12]) && !output.text.contains(&audio[..12]));

    // A tool without a UI has no whole result to hand on.
    let plain = bridge.call("fx.image", "{}").await;
    assert_eq!(plain.raw, None);
    bridge.shutdown().await;
}

#[tokio::test]
async fn structured_content_is_appended_once() {
    let bridge = fixture(&[], "{}").await;
    // Text and structured content differ: both reach the model.
    let echo = bridge.call("fx.echo", r#"{"message": "hello"}"#).await;
    assert_eq!(echo.text, "hello\n\n{\"message\":\"hello\"}");
    assert_eq!(echo.structured, Some(json!({"message": "hello"})));
    bridge.shutdown().await;

    // The grocery app sends its structured content as text too; it is not repeated.
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let bridge = Bridge::start(apps).await;
    let stores = bridge.call("grocery.get_stores", "{}").await;
    let parsed: Value = serde_json::from_str(&stores.text).unwrap();
    assert_eq!(Some(parsed), stores.structured);
    assert_eq!(stores.text.matches("Downtown Market").count(), 1);
    bridge.shutdown().await;
}

#[tokio::test]
async fn remote_tool_errors_become_error_texts() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let bridge = Bridge::start(apps).await;
    let raw = bridge
        .app("grocery")
        .call_tool(
            "get_stores",
            Some(json!({"id": 99}).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap();
    assert_eq!(raw.is_error, Some(true), "{raw:?}");
    let remote_text = raw.content[0].as_text().unwrap().text.clone();

    let output = bridge.call("grocery.get_stores", r#"{"id": 99}"#).await;
    assert!(output.is_error);
    assert_eq!(output.text, format!("Error: {remote_text}"));
    bridge.shutdown().await;
}

#[tokio::test]
async fn call_failures_name_the_tool_and_the_app() {
    let bridge = fixture(&[], "{}").await;
    let app = bridge.app("fx");

    // The app answers a call for a tool it does not have with a JSON-RPC error.
    let mut descriptor = app.descriptors().tool("echo").unwrap().clone();
    descriptor.name = "no_such_tool".to_owned();
    let missing: Arc<dyn Tool> = Arc::new(McpAppTool::new(app.clone(), &descriptor, "fx."));
    assert_eq!(missing.name(), "fx.no_such_tool");
    let output = missing.invoke("{}".into(), ToolContext::new()).await;
    assert!(output.is_error);
    assert!(
        output.text.starts_with(
            "Error: MCP App tool 'fx.no_such_tool' from 'fx' failed: the app returned error -32"
        ),
        "{}",
        output.text
    );
    assert!(output.text.contains("no_such_tool"), "{}", output.text);

    // A tool held across a stop fails clearly, and works again once the app is back.
    let echo = bridge.tool("fx.echo");
    app.stop().unwrap();
    wait_state(app.watch(), Lifecycle::Stopped).await;
    let output = echo
        .invoke(r#"{"message":"x"}"#.into(), ToolContext::new())
        .await;
    assert!(output.is_error);
    assert_eq!(
        output.text,
        "Error: MCP App tool 'fx.echo' from 'fx' failed: the app is not running (it is Stopped)"
    );
    app.start().unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    let output = echo
        .invoke(r#"{"message":"back"}"#.into(), ToolContext::new())
        .await;
    assert!(output.text.starts_with("back"), "{output:?}");
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_hanging_tool_times_out_with_a_clear_text() {
    let bridge = fixture(&[], r#"{"requestTimeoutSeconds": 1}"#).await;
    let output = bridge.call("fx.hang", "{}").await;
    assert!(output.is_error);
    assert_eq!(
        output.text,
        "Error: MCP App tool 'fx.hang' from 'fx' timed out after 1 s; the request was cancelled"
    );
    assert!(output.text.contains("timed out"));
    bridge.shutdown().await;
}

#[tokio::test]
async fn caller_cancellation_stops_the_call_and_reaches_the_app() {
    // `--stderr-noise 0`: one stderr line per tool call tells the test the call arrived.
    let bridge = fixture(&["--stderr-noise", "0"], "{}").await;
    let app = bridge.app("fx");
    let cancel = CancellationToken::new();
    let call = tokio::spawn({
        let hang = bridge.tool("fx.hang");
        let ctx = ToolContext::new().with_cancel(cancel.clone());
        async move { hang.invoke("{}".into(), ctx).await }
    });
    let arrived = mcpapp_testkit::eventually(PATIENCE, async || {
        app.stderr_tail().iter().any(|l| l.ends_with(": hang"))
    })
    .await;
    assert!(arrived, "{:?}", app.stderr_tail());
    cancel.cancel();
    let output = tokio::time::timeout(PATIENCE, call).await.unwrap().unwrap();
    assert!(output.is_error);
    assert_eq!(
        output.text,
        "Error: MCP App tool 'fx.hang' from 'fx' was cancelled before it answered"
    );
    // The app was told: `notifications/cancelled` reached it.
    let seen = bridge
        .call("fx.cancellations", r#"{"waitMs": 30000}"#)
        .await;
    assert_eq!(seen.structured.unwrap()["count"], 1);

    // An already cancelled token means no call at all.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let output = bridge
        .call_with(
            "fx.echo",
            r#"{"message": "never"}"#,
            ToolContext::new().with_cancel(cancelled),
        )
        .await;
    assert!(output.is_error, "{output:?}");
    // A later call logs after anything sent before it (one pipe, read in order).
    bridge.call("fx.get_cwd", "{}").await;
    let logged = mcpapp_testkit::eventually(PATIENCE, async || {
        app.stderr_tail().iter().any(|l| l.ends_with(": get_cwd"))
    })
    .await;
    assert!(logged, "{:?}", app.stderr_tail());
    assert!(
        !app.stderr_tail().iter().any(|l| l.ends_with(": echo")),
        "{:?}",
        app.stderr_tail()
    );
    bridge.shutdown().await;
}

#[tokio::test]
async fn the_session_id_reaches_the_app_in_meta() {
    let bridge = fixture(&[], "{}").await;
    let output = bridge
        .call_with(
            "fx.echo_session",
            "",
            ToolContext::new().with_session_id("chat-7f3a"),
        )
        .await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(output.structured.unwrap()["sessionId"], "chat-7f3a");
    let meta = bridge
        .call_with(
            "fx.echo_meta",
            "{}",
            ToolContext::new().with_session_id("s-2"),
        )
        .await;
    assert_eq!(meta.structured.unwrap()["meta"]["sessionId"], "s-2");
    // Without a session, no id is sent.
    let none = bridge.call("fx.echo_session", "{}").await;
    assert_eq!(none.structured.unwrap()["sessionId"], Value::Null);
    bridge.shutdown().await;
}

#[tokio::test]
async fn malformed_visibility_is_hidden_and_reported_once() {
    let bridge = fixture(&[], "{}").await;
    assert!(
        bridge
            .registry
            .resolve("fx.malformed_visibility_tool")
            .is_none(),
        "{:?}",
        bridge.names()
    );
    // Catching up again does not repeat the report.
    bridge.sync.synced().await;
    let diagnostics = bridge.sync.diagnostics();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].kind, SyncDiagnosticKind::MalformedVisibility);
    let json = serde_json::to_value(&diagnostics[0]).unwrap();
    assert_eq!(json["appId"], "fx");
    assert_eq!(json["tool"], "malformed_visibility_tool");
    assert_eq!(json["kind"], "malformedVisibility");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("hidden from the model"),
        "{json}"
    );
    bridge.shutdown().await;
}

#[tokio::test]
async fn descriptions_come_from_the_app_or_name_the_tool() {
    let bridge = fixture(&[], "{}").await;
    let app = bridge.app("fx");
    let listed = app.descriptors().tool("echo").unwrap().clone();
    let echo = bridge.tool("fx.echo");
    assert_eq!(Some(echo.description()), listed.description.as_deref());
    assert_eq!(echo.input_schema(), &listed.input_schema);

    let mut bare = listed.clone();
    bare.description = None;
    let tool = McpAppTool::new(app.clone(), &bare, "fx.");
    assert_eq!(
        tool.description(),
        "Calls the tool 'echo' of the MCP App 'fx'."
    );
    assert_eq!(tool.app_id(), "fx");
    assert_eq!(tool.remote_name(), "echo");
    assert_eq!(tool.ui_resource_uri(), None);
    bridge.shutdown().await;
}
