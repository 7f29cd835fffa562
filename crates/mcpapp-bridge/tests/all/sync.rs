//! The live sync between the supervisor and the registry: tools follow their app through
//! stops, restarts, tool-list changes and reloads; collisions between apps go to discovery
//! order and are reported; registered app tools map to safe model names and back.

use std::collections::HashSet;

use mcpapp_bridge::{
    AppToolSync, CollisionReason, SyncDiagnosticKind, ToolContext, ToolRegistry, ToolSource,
    app_registration_id,
};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::Supervisor;
use mcpapp_testkit::{AppsDir, bin, wait_watch};
use serde_json::json;

use crate::{Bridge, LogCapture, PATIENCE, provider_accepts, wait_registry};

/// A fixture app with `prefix` whose `get_env WHO` answers `who`.
fn fixture_app(apps: &AppsDir, id: &str, prefix: &str, who: &str, args: &[&str]) {
    let mut arguments = vec!["stdio"];
    arguments.extend_from_slice(args);
    let extra = json!({"toolNamePrefix": prefix, "environment": {"WHO": who}});
    apps.stdio_app(id, &bin("fixture-app"), &arguments, &extra.to_string());
}

/// Which app answered a call of `get_env` registered as `name`.
async fn who(bridge: &Bridge, name: &str) -> String {
    let output = bridge.call(name, r#"{"name": "WHO"}"#).await;
    assert!(!output.is_error, "{output:?}");
    output.structured.unwrap()["value"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn tools_follow_their_app_through_stop_and_restart() {
    let apps = AppsDir::new();
    fixture_app(&apps, "fx", "fx.", "fx", &[]);
    let bridge = Bridge::start(apps).await;
    let app = bridge.app("fx");
    let registry = &bridge.registry;
    assert!(registry.resolve("fx.echo").is_some());
    let entry = registry.resolve("fx.echo").unwrap();
    assert_eq!(entry.registration_id, "mcpapp:fx");
    assert_eq!(entry.source, ToolSource::Native);

    // No `synced()` here: the background task alone moves the registry.
    app.stop().unwrap();
    wait_registry(registry, |r| r.resolve("fx.echo").is_none()).await;
    assert!(registry.list().is_empty(), "{:?}", bridge.names());
    // The registration stays (empty) so the app keeps its place in discovery order.
    assert_eq!(registry.registration_ids(), [app_registration_id("fx")]);

    app.start().unwrap();
    wait_registry(registry, |r| r.resolve("fx.echo").is_some()).await;
    let output = bridge.call("fx.echo", r#"{"message": "again"}"#).await;
    assert!(output.text.starts_with("again"), "{output:?}");

    // A restart withdraws the tools and brings them back from the new process.
    let pid = app.snapshot().pid;
    app.restart().unwrap();
    wait_watch(app.watch(), "fx to run again after its restart", |s| {
        s.restart_count == 1 && s.state.lifecycle == Lifecycle::Running
    })
    .await;
    bridge.sync.synced().await;
    assert_ne!(app.snapshot().pid, pid);
    let output = bridge.call("fx.echo", r#"{"message": "restarted"}"#).await;
    assert!(output.text.starts_with("restarted"), "{output:?}");
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_changed_tool_list_is_replaced_as_a_whole() {
    let apps = AppsDir::new();
    fixture_app(&apps, "fx", "fx.", "fx", &[]);
    let bridge = Bridge::start(apps).await;
    let registry = &bridge.registry;
    let before = registry.version();
    let count = bridge.names().len();
    assert!(registry.resolve("fx.added_tool_1").is_none());

    let changes = registry.subscribe();
    let output = bridge.call("fx.notify_tools_changed", "{}").await;
    assert!(!output.is_error, "{output:?}");
    wait_registry(registry, |r| r.resolve("fx.added_tool_1").is_some()).await;
    // One atomic replacement: the new list appears in a single change.
    assert!(changes.has_changed().unwrap());
    assert_eq!(registry.version(), before + 1);
    assert_eq!(bridge.names().len(), count + 1);
    let added = bridge
        .call("fx.added_tool_1", r#"{"message": "new"}"#)
        .await;
    assert!(added.text.starts_with("new"), "{added:?}");
    bridge.shutdown().await;
}

#[tokio::test]
async fn apps_running_before_the_sync_starts_are_registered() {
    let apps = AppsDir::new();
    fixture_app(&apps, "early", "early.", "early", &[]);
    let supervisor = Supervisor::builder().build();
    supervisor.load(&apps.discover());
    assert!(supervisor.wait_settled(PATIENCE).await);
    let registry = ToolRegistry::new();
    let sync = AppToolSync::start(&supervisor, &registry);
    sync.synced().await;
    assert!(registry.resolve("early.echo").is_some());

    // Dropping the sync withdraws what it registered.
    drop(sync);
    assert!(registry.list().is_empty());
    assert!(registry.registration_ids().is_empty());
    supervisor.shutdown().await;
}

#[tokio::test]
async fn reloads_add_and_remove_registrations() {
    let apps = AppsDir::new();
    fixture_app(&apps, "stay", "stay.", "stay", &[]);
    fixture_app(&apps, "leave", "leave.", "leave", &[]);
    let bridge = Bridge::start(apps).await;
    assert!(bridge.registry.resolve("leave.echo").is_some());

    std::fs::remove_dir_all(bridge.apps.path().join("leave")).unwrap();
    fixture_app(&bridge.apps, "join", "join.", "join", &[]);
    let summary = bridge.supervisor.reload(&bridge.apps.discover()).await;
    assert_eq!(summary.removed, ["leave"]);
    assert_eq!(summary.added, ["join"]);
    wait_registry(&bridge.registry, |r| {
        r.resolve("join.echo").is_some() && r.resolve("leave.echo").is_none()
    })
    .await;
    // The reload has published `Removed`; once handled, the registration itself is gone.
    bridge.sync.synced().await;
    let ids = bridge.registry.registration_ids();
    assert_eq!(ids, ["mcpapp:join", "mcpapp:stay"]);
    assert_eq!(who(&bridge, "join.get_env").await, "join");
    bridge.shutdown().await;
}

#[tokio::test]
async fn a_collision_between_apps_goes_to_discovery_order() {
    // Both apps use the prefix `fx.`. `a-first` is discovered first but starts a second later,
    // so `b-second` registers its tools first.
    let apps = AppsDir::new();
    fixture_app(&apps, "a-first", "fx.", "a", &["--start-delay-ms", "1000"]);
    fixture_app(&apps, "b-second", "fx.", "b", &[]);
    let bridge = Bridge::start(apps).await;
    let registry = &bridge.registry;

    let entry = registry.resolve("fx.echo").unwrap();
    assert_eq!(entry.registration_id, "mcpapp:a-first");
    assert_eq!(who(&bridge, "fx.get_env").await, "a");
    let collisions = registry.collisions();
    let echo = collisions.iter().find(|c| c.name == "fx.echo").unwrap();
    assert_eq!(echo.winner, "mcpapp:a-first");
    assert_eq!(echo.loser, "mcpapp:b-second");
    assert_eq!(echo.reason, CollisionReason::RegistrationOrder);
    let diagnostics = bridge.sync.diagnostics();
    let reported = diagnostics
        .iter()
        .find(|d| d.kind == SyncDiagnosticKind::NameCollision && d.tool == "fx.echo")
        .unwrap();
    assert_eq!(reported.app_id, "b-second");
    assert!(reported.message.contains("mcpapp:a-first"), "{reported:?}");
    // Every tool of the second app collides, and is reported, once.
    let collided: Vec<&str> = diagnostics
        .iter()
        .filter(|d| d.kind == SyncDiagnosticKind::NameCollision)
        .map(|d| d.tool.as_str())
        .collect();
    assert_eq!(collided.len(), bridge.names().len(), "{collided:?}");

    // While the first app is stopped the second holds the names; the first gets them back
    // when it runs again.
    let first = bridge.app("a-first");
    first.stop().unwrap();
    wait_registry(registry, |r| {
        r.resolve("fx.echo")
            .is_some_and(|e| e.registration_id == "mcpapp:b-second")
    })
    .await;
    assert!(registry.collisions().is_empty());
    assert_eq!(who(&bridge, "fx.get_env").await, "b");
    first.start().unwrap();
    wait_registry(registry, |r| {
        r.resolve("fx.echo")
            .is_some_and(|e| e.registration_id == "mcpapp:a-first")
    })
    .await;
    assert_eq!(who(&bridge, "fx.get_env").await, "a");
    bridge.shutdown().await;
}

#[tokio::test]
async fn registered_app_tools_map_to_safe_model_names_and_back() {
    // `x.` and `x/` give names that sanitise to the same text; the long prefix gives
    // 65-character names (`long.echo` → 61 + 4 characters).
    let long_prefix = format!("{}.", "l".repeat(60));
    let apps = AppsDir::new();
    fixture_app(&apps, "dot", "x.", "dot", &[]);
    fixture_app(&apps, "slash", "x/", "slash", &[]);
    fixture_app(&apps, "long", &long_prefix, "long", &[]);
    let bridge = Bridge::start(apps).await;
    let snapshot = bridge.registry.snapshot();
    let names = snapshot.model_names();

    let long_echo = format!("{long_prefix}echo");
    assert_eq!(long_echo.chars().count(), 65);
    let mut seen = HashSet::new();
    for entry in snapshot.entries() {
        let model = names.to_model(&entry.name).unwrap();
        assert!(provider_accepts(model), "{model}");
        assert_eq!(names.from_model(model), Some(entry.name.as_str()));
        assert!(seen.insert(model.to_owned()), "{model} is used twice");
    }
    assert_eq!(seen.len(), snapshot.entries().len());

    let dot = names.to_model("x.echo").unwrap();
    let slash = names.to_model("x/echo").unwrap();
    assert_ne!(dot, slash);
    for model in [dot, slash] {
        assert!(
            model.starts_with("x_echo_") && model.len() == "x_echo_".len() + 8,
            "{model}"
        );
    }
    let long = names.to_model(&long_echo).unwrap();
    assert_eq!(long.len(), 64);
    assert!(long.starts_with(&"l".repeat(55)), "{long}");

    // Each model name reaches its own app.
    for (model_name, expected) in [
        (names.to_model("x.get_env").unwrap(), "dot"),
        (names.to_model("x/get_env").unwrap(), "slash"),
        (
            names.to_model(&format!("{long_prefix}get_env")).unwrap(),
            "long",
        ),
    ] {
        let entry = snapshot.resolve_model_name(model_name).unwrap();
        let output = entry
            .tool
            .invoke(r#"{"name": "WHO"}"#.into(), ToolContext::new())
            .await;
        assert_eq!(
            output.structured.unwrap()["value"],
            expected,
            "{model_name}"
        );
    }
    bridge.shutdown().await;
}

/// Apps that stop and start again (as a crash loop does) bring back the same collisions and
/// the same malformed visibility each time: each is a warning once, then debug events.
#[tokio::test]
async fn restarts_warn_about_each_collision_and_hidden_tool_once() {
    let capture = LogCapture::default();
    // The test runtime has one thread, so the sync task logs on this one.
    let _guard = capture.install();
    let apps = AppsDir::new();
    fixture_app(&apps, "a-first", "fx.", "a", &[]);
    fixture_app(&apps, "b-second", "fx.", "b", &[]);
    let bridge = Bridge::start(apps).await;
    let registry = &bridge.registry;
    let names = bridge.names().len();
    assert_eq!(registry.collisions().len(), names);

    let rounds = 4;
    for round in 0..rounds {
        let app = bridge.app(if round % 2 == 0 {
            "b-second"
        } else {
            "a-first"
        });
        app.stop().unwrap();
        wait_registry(registry, |r| r.collisions().is_empty()).await;
        app.start().unwrap();
        wait_registry(registry, |r| r.collisions().len() == names).await;
    }
    bridge.sync.synced().await;

    let registry_target = "mcpapp_bridge::registry";
    let warned = capture.matching(tracing::Level::WARN, registry_target, "tool name collision");
    assert_eq!(warned.len(), names, "{warned:#?}");
    let again = capture.matching(
        tracing::Level::DEBUG,
        registry_target,
        "tool name collision again",
    );
    assert!(again.len() >= rounds * names, "{}", again.len());

    let sync_target = "mcpapp_bridge::sync";
    let hidden = capture.matching(tracing::Level::WARN, sync_target, "hidden from the model");
    assert_eq!(hidden.len(), 2, "one per app: {hidden:#?}");
    let hidden_again =
        capture.matching(tracing::Level::DEBUG, sync_target, "hidden from the model");
    assert!(hidden_again.len() >= rounds, "{hidden_again:#?}");
    // The diagnostics still report the current problems.
    let diagnostics = bridge.sync.diagnostics();
    let count = |kind| diagnostics.iter().filter(|d| d.kind == kind).count();
    assert_eq!(count(SyncDiagnosticKind::NameCollision), names);
    assert_eq!(count(SyncDiagnosticKind::MalformedVisibility), 2);
    bridge.shutdown().await;
}
