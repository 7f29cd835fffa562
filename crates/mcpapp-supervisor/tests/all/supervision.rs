//! Supervision: restarts with backoff, crash loops, timeouts, health checks, environment
//! references, list changes, reloads and leaving no process behind.

use std::time::Duration;

use mcpapp_manifest::{Lifecycle, McpAppEntryConfig, McpAppsConfig, SupervisionConfig};
use mcpapp_supervisor::{AppHandle, CallError, ReloadSummary, Supervisor, SupervisorEvent};
use mcpapp_testkit::{
    AppsDir, HttpApp, bin, eventually, live, live_in_groups, wait_state, wait_watch,
};
use serde_json::json;

use crate::{PATIENCE, fast_policy, first_text, next_event, supervise};

fn is_lifecycle(event: &SupervisorEvent, id: &str, state: Lifecycle) -> bool {
    matches!(event, SupervisorEvent::Lifecycle { app_id, to, .. } if app_id == id && *to == state)
}

#[tokio::test]
async fn a_crashing_app_fails_and_restarts_with_growing_delays() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "crashy",
        &bin("fixture-app"),
        &["stdio", "--exit-after-ms", "200"],
        "{}",
    );
    let mut policy = fast_policy();
    policy.crash_loop_failures = 100;
    let supervisor = Supervisor::builder().policy(policy).build();
    let mut events = supervisor.subscribe();
    supervisor.load(&apps.discover());
    let mut delays = Vec::new();
    for attempt in 1..=3u32 {
        next_event(&mut events, |e| {
            is_lifecycle(e, "crashy", Lifecycle::Running)
        })
        .await;
        let failed = next_event(&mut events, |e| {
            is_lifecycle(e, "crashy", Lifecycle::Failed)
        })
        .await;
        if let SupervisorEvent::Lifecycle { reason, .. } = &failed {
            assert!(
                reason.as_deref().unwrap().contains("exited with status 17"),
                "{failed:?}"
            );
        }
        match next_event(&mut events, |e| {
            matches!(e, SupervisorEvent::RestartScheduled { .. })
        })
        .await
        {
            SupervisorEvent::RestartScheduled {
                attempt: a, delay, ..
            } => {
                assert_eq!(a, attempt);
                delays.push(delay);
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(delays[0] < delays[1] && delays[1] < delays[2], "{delays:?}");
    next_event(&mut events, |e| {
        is_lifecycle(e, "crashy", Lifecycle::Running)
    })
    .await;
    let snapshot = supervisor.get("crashy").unwrap().snapshot();
    assert!(snapshot.restart_count >= 3);
    assert!(snapshot.state.last_error.unwrap().contains("status 17"));
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_crash_loop_stops_the_restarts_until_restarted_by_hand() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "loop",
        &bin("fixture-app"),
        &["stdio", "--exit-at-start", "3"],
        r#"{"startupTimeoutSeconds": 5}"#,
    );
    let mut policy = fast_policy();
    policy.crash_loop_failures = 2;
    let supervisor = Supervisor::builder().policy(policy).build();
    let mut events = supervisor.subscribe();
    supervisor.load(&apps.discover());
    let crash_loop = next_event(&mut events, |e| {
        matches!(e, SupervisorEvent::Lifecycle { app_id, to: Lifecycle::Failed, reason: Some(r), .. }
            if app_id == "loop" && r.starts_with("crash loop"))
    })
    .await;
    if let SupervisorEvent::Lifecycle { reason, .. } = crash_loop {
        let reason = reason.unwrap();
        assert!(
            reason.contains("3 failures") && reason.contains("exited with status 3"),
            "{reason}"
        );
    }
    let app = supervisor.get("loop").unwrap();
    let snapshot = app.snapshot();
    assert!(snapshot.crash_loop);
    assert_eq!(snapshot.next_restart, None);
    // Nothing is scheduled: the next event comes only from the manual restart.
    app.restart().unwrap();
    let next = next_event(&mut events, |e| e.app_id() == "loop").await;
    assert!(is_lifecycle(&next, "loop", Lifecycle::Loaded), "{next:?}");
    assert!(!app.snapshot().crash_loop);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_hanging_tool_times_out_and_is_cancelled_upstream() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "hang",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"requestTimeoutSeconds": 1}"#,
    );
    let supervisor = supervise(&apps.discover(), fast_policy());
    let app = supervisor.get("hang").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    let err = app.call_tool("hang", None, None).await.unwrap_err();
    assert!(
        matches!(err, CallError::Timeout { seconds: 1, .. }),
        "{err:?}"
    );
    let seen = app
        .call_tool(
            "cancellations",
            Some(json!({"waitMs": 900}).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap();
    assert_eq!(seen.structured_content.unwrap()["count"], 1);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_call_the_caller_stops_waiting_for_is_cancelled_upstream() {
    let apps = AppsDir::new();
    // `--stderr-noise 0` logs one stderr line per tool call, which tells the test that the
    // call has reached the app.
    apps.stdio_app(
        "abandon",
        &bin("fixture-app"),
        &["stdio", "--stderr-noise", "0"],
        "{}",
    );
    let supervisor = supervise(&apps.discover(), fast_policy());
    let app = supervisor.get("abandon").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    let call = tokio::spawn({
        let app = app.clone();
        async move { app.call_tool("hang", None, None).await }
    });
    let arrived = mcpapp_testkit::eventually(PATIENCE, async || {
        app.stderr_tail().iter().any(|l| l.ends_with(": hang"))
    })
    .await;
    assert!(
        arrived,
        "the call never reached the app: {:?}",
        app.stderr_tail()
    );
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    let seen = app
        .call_tool(
            "cancellations",
            Some(json!({"waitMs": 30_000}).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap();
    assert_eq!(seen.structured_content.unwrap()["count"], 1);
    supervisor.shutdown().await;
}

#[tokio::test]
async fn slow_starts_and_silent_servers_hit_the_startup_timeout() {
    let apps = AppsDir::new();
    let fixture = bin("fixture-app");
    apps.stdio_app(
        "slow",
        &fixture,
        &["stdio", "--start-delay-ms", "20000"],
        r#"{"startupTimeoutSeconds": 1}"#,
    );
    apps.stdio_app(
        "silent",
        &fixture,
        &["stdio", "--never-initialize"],
        r#"{"startupTimeoutSeconds": 1}"#,
    );
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = supervise(&apps.discover(), policy);
    for id in ["slow", "silent"] {
        let app = supervisor.get(id).unwrap();
        wait_state(app.watch(), Lifecycle::Failed).await;
        let error = app.snapshot().state.last_error.unwrap();
        assert!(
            error.contains("startup timed out after 1 s"),
            "{id}: {error}"
        );
    }
    supervisor.shutdown().await;
}

#[tokio::test]
async fn garbage_on_stdout_fails_with_a_readable_reason() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "garbage",
        &bin("fixture-app"),
        &["stdio", "--garbage-stdout"],
        r#"{"startupTimeoutSeconds": 5}"#,
    );
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = supervise(&apps.discover(), policy);
    let app = supervisor.get("garbage").unwrap();
    wait_state(app.watch(), Lifecycle::Failed).await;
    let error = app.snapshot().state.last_error.unwrap();
    assert!(error.contains("exited with status 1"), "{error}");
    assert!(
        error.contains("not JSON-RPC") && error.contains("'this is not JSON-RPC'"),
        "{error}"
    );
    supervisor.shutdown().await;
}

#[tokio::test]
async fn stderr_is_kept_and_quoted_in_failures() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "noisy",
        &bin("fixture-app"),
        &["stdio", "--stderr-noise", "3"],
        "{}",
    );
    let supervisor = supervise(&apps.discover(), fast_policy());
    let app = supervisor.get("noisy").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    app.call_tool(
        "echo",
        Some(json!({"message": "hi"}).as_object().unwrap().clone()),
        None,
    )
    .await
    .unwrap();
    let tail = app.stderr_tail();
    assert!(
        tail.iter().any(|l| l.contains("start line 3 of 3")),
        "{tail:?}"
    );
    assert!(
        eventually(PATIENCE, async || app
            .stderr_tail()
            .iter()
            .any(|l| l.contains("tool call 1: echo")))
        .await,
        "{:?}",
        app.stderr_tail()
    );
    supervisor.shutdown().await;

    let failing = AppsDir::new();
    failing.stdio_app(
        "dies",
        &bin("fixture-app"),
        &["stdio", "--exit-at-start", "4"],
        r#"{"startupTimeoutSeconds": 5}"#,
    );
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = supervise(&failing.discover(), policy);
    let app = supervisor.get("dies").unwrap();
    wait_state(app.watch(), Lifecycle::Failed).await;
    let error = app.snapshot().state.last_error.unwrap();
    assert!(
        error.contains("status 4") && error.contains("stderr:"),
        "{error}"
    );
    supervisor.shutdown().await;
}

/// The link reports an app closed only once its stderr is read to the end, so a failure's
/// reason always quotes the app's last words, even after a burst of stderr that the reader is
/// still working through when the exit is known.
#[tokio::test]
async fn a_failure_quotes_the_last_stderr_line_even_after_a_burst() {
    let apps = AppsDir::new();
    let ids: Vec<String> = (1..=8).map(|i| format!("burst{i}")).collect();
    for id in &ids {
        apps.stdio_app(
            id,
            &bin("fixture-app"),
            &["stdio", "--stderr-noise", "1000", "--exit-at-start", "4"],
            r#"{"startupTimeoutSeconds": 5}"#,
        );
    }
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = supervise(&apps.discover(), policy);
    for id in &ids {
        let app = supervisor.get(id).unwrap();
        wait_state(app.watch(), Lifecycle::Failed).await;
        let error = app.snapshot().state.last_error.unwrap();
        assert!(
            error.contains("status 4") && error.contains("exiting at start with status 4"),
            "{id}: {error}"
        );
    }
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_failure_quotes_only_its_own_run_and_the_handle_keeps_the_run_before() {
    let apps = AppsDir::new();
    let fixture = bin("fixture-app");
    // First run: numbered start lines and one line per tool call.
    apps.stdio_app("runs", &fixture, &["stdio", "--stderr-noise", "2"], "{}");
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = supervise(&apps.discover(), policy);
    let app = supervisor.get("runs").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    app.call_tool(
        "echo",
        Some(json!({"message": "hi"}).as_object().unwrap().clone()),
        None,
    )
    .await
    .unwrap();
    assert!(
        eventually(PATIENCE, async || app
            .stderr_tail()
            .iter()
            .any(|l| l.contains("tool call 1: echo")))
        .await,
        "{:?}",
        app.stderr_tail()
    );
    let first_run = app.stderr_tail();
    assert!(app.previous_stderr_tail().is_empty());

    // Second run: the reload restarts the same handle with arguments that fail at start.
    apps.stdio_app(
        "runs",
        &fixture,
        &["stdio", "--exit-at-start", "4"],
        r#"{"startupTimeoutSeconds": 5}"#,
    );
    assert_eq!(supervisor.reload(&apps.discover()).await.changed, ["runs"]);
    wait_watch(app.watch(), "runs to fail with status 4", |s| {
        s.state.lifecycle == Lifecycle::Failed
            && s.state
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("status 4"))
    })
    .await;
    let error = app.snapshot().state.last_error.unwrap();
    assert!(
        error.contains("stderr:") && error.contains("exiting at start with status 4"),
        "{error}"
    );
    for line in &first_run {
        assert!(!error.contains(line.as_str()), "{line:?} in {error}");
    }
    assert!(!error.contains("noise"), "{error}");
    // Both runs stay visible through the handle, each on its own (the first process may
    // have logged more on its way out, so its lines so far are a prefix).
    let previous = app.previous_stderr_tail();
    assert!(previous.starts_with(&first_run), "{previous:?}");
    let current = app.stderr_tail();
    assert!(
        current.iter().any(|l| l.contains("exiting at start")),
        "{current:?}"
    );
    assert!(!current.iter().any(|l| l.contains("noise")), "{current:?}");
    supervisor.shutdown().await;
}

#[tokio::test]
async fn env_references_are_resolved_at_launch_and_missing_ones_reported() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "env",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"environment": {"FIXTURE_SECRET": "env:MCPAPP_TEST_SECRET", "PLAIN": "visible"}}"#,
    );
    apps.stdio_app(
        "env-missing",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"environment": {"TOKEN": "env:MCPAPP_UNSET_VAR"}}"#,
    );
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = Supervisor::builder()
        .policy(policy)
        .env_lookup(|name| (name == "MCPAPP_TEST_SECRET").then(|| "hunter2".to_owned()))
        .build();
    // The operator lets these manifests read the two names they refer to.
    supervisor.load(&apps.discover_with(allowing(&["MCPAPP_TEST_SECRET", "MCPAPP_UNSET_VAR"])));
    let app = supervisor.get("env").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    let value = app
        .call_tool(
            "get_env",
            Some(
                json!({"name": "FIXTURE_SECRET"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
            None,
        )
        .await
        .unwrap();
    assert_eq!(value.structured_content.unwrap()["value"], "hunter2");

    let missing = supervisor.get("env-missing").unwrap();
    wait_state(missing.watch(), Lifecycle::Failed).await;
    let error = missing.snapshot().state.last_error.unwrap();
    assert_eq!(
        error,
        "environment variable MCPAPP_UNSET_VAR (for environment TOKEN) is not set"
    );
    // The secret never shows in what the supervisor reports.
    assert!(!format!("{:?}", app.snapshot()).contains("hunter2"));
    supervisor.shutdown().await;
}

#[tokio::test]
async fn http_headers_resolve_env_references() {
    let server = HttpApp::start("fixture-app", &["--require-header", "X-Token=s3cret"]);
    let apps = AppsDir::new();
    apps.http_app(
        "authed",
        &server.url,
        r#"{"headers": {"X-Token": "env:FIXTURE_TOKEN"}}"#,
    );
    apps.http_app("unauthed", &server.url, r#"{"startupTimeoutSeconds": 5}"#);
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = Supervisor::builder()
        .policy(policy)
        .env_lookup(|name| (name == "FIXTURE_TOKEN").then(|| "s3cret".to_owned()))
        .build();
    supervisor.load(&apps.discover_with(allowing(&["FIXTURE_TOKEN"])));
    wait_state(
        supervisor.get("authed").unwrap().watch(),
        Lifecycle::Running,
    )
    .await;
    let unauthed = supervisor.get("unauthed").unwrap();
    wait_state(unauthed.watch(), Lifecycle::Failed).await;
    let error = unauthed.snapshot().state.last_error.unwrap();
    assert!(error.contains("401"), "{error}");
    assert!(!error.contains("s3cret"), "{error}");
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_frozen_app_fails_its_health_checks_and_is_restarted() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "frozen",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"requestTimeoutSeconds": 1}"#,
    );
    let mut policy = fast_policy();
    policy.health_check_interval = Some(Duration::from_millis(200));
    policy.health_check_failures = 2;
    let supervisor = Supervisor::builder().policy(policy).build();
    let mut events = supervisor.subscribe();
    supervisor.load(&apps.discover());
    let app = supervisor.get("frozen").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    let first_pid = app.snapshot().pid.unwrap();
    app.call_tool("freeze", None, None).await.unwrap();
    let failed = next_event(&mut events, |e| {
        is_lifecycle(e, "frozen", Lifecycle::Failed)
    })
    .await;
    if let SupervisorEvent::Lifecycle { reason, .. } = failed {
        assert!(
            reason
                .unwrap()
                .contains("health check failed 2 times in a row")
        );
    }
    next_event(&mut events, |e| {
        is_lifecycle(e, "frozen", Lifecycle::Running)
    })
    .await;
    assert_ne!(app.snapshot().pid.unwrap(), first_pid);
    assert!(
        eventually(PATIENCE, async || live(&[first_pid]).is_empty()).await,
        "the frozen process was not killed"
    );
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_dead_http_server_fails_the_app() {
    let mut server = HttpApp::start("fixture-app", &[]);
    let apps = AppsDir::new();
    apps.http_app("remote", &server.url, "{}");
    let mut policy = fast_policy();
    policy.auto_restart = false;
    let supervisor = supervise(&apps.discover(), policy);
    let app = supervisor.get("remote").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    server.kill();
    wait_state(app.watch(), Lifecycle::Failed).await;
    let error = app.snapshot().state.last_error.unwrap();
    assert!(error.contains("connection"), "{error}");
    supervisor.shutdown().await;
}

#[tokio::test]
async fn tools_list_changed_re_enumerates() {
    let apps = AppsDir::new();
    apps.stdio_app("changing", &bin("fixture-app"), &["stdio"], "{}");
    let supervisor = Supervisor::builder().policy(fast_policy()).build();
    let mut events = supervisor.subscribe();
    supervisor.load(&apps.discover());
    let app = supervisor.get("changing").unwrap();
    wait_state(app.watch(), Lifecycle::Running).await;
    let before = app.descriptors().tools.len();
    assert!(app.descriptors().tool("added_tool_1").is_none());
    app.call_tool("notify_tools_changed", None, None)
        .await
        .unwrap();
    next_event(
        &mut events,
        |e| matches!(e, SupervisorEvent::ToolsChanged { app_id } if app_id == "changing"),
    )
    .await;
    assert!(app.descriptors().tool("added_tool_1").is_some());
    assert_eq!(app.descriptors().tools.len(), before + 1);
    assert_eq!(app.snapshot().state.tool_count, before + 1);
    let result = app
        .call_tool(
            "added_tool_1",
            Some(json!({"message": "new"}).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap();
    assert!(first_text(&result).contains("new"));
    supervisor.shutdown().await;
}

#[tokio::test]
async fn reload_applies_the_difference() {
    let fixture = bin("fixture-app");
    let apps = AppsDir::new();
    apps.stdio_app("same", &fixture, &["stdio"], "{}");
    apps.stdio_app("changed", &fixture, &["stdio"], "{}");
    apps.stdio_app("removed", &fixture, &["stdio"], "{}");
    let supervisor = supervise(&apps.discover(), fast_policy());
    assert!(supervisor.wait_settled(PATIENCE).await);
    let same_pid = supervisor.get("same").unwrap().snapshot().pid;
    let changed = supervisor.get("changed").unwrap();
    let changed_pid = changed.snapshot().pid;
    let removed_pid = supervisor.get("removed").unwrap().snapshot().pid.unwrap();

    apps.stdio_app("changed", &fixture, &["stdio", "--stderr-noise", "1"], "{}");
    std::fs::remove_dir_all(apps.path().join("removed")).unwrap();
    apps.stdio_app("added", &fixture, &["stdio"], "{}");
    let summary = supervisor.reload(&apps.discover()).await;
    assert_eq!(summary.added, ["added"]);
    assert_eq!(summary.removed, ["removed"]);
    assert_eq!(summary.changed, ["changed"]);
    assert_eq!(summary.unchanged, ["same"]);

    assert!(supervisor.get("removed").is_none());
    assert!(eventually(PATIENCE, async || live(&[removed_pid]).is_empty()).await);
    wait_state(supervisor.get("added").unwrap().watch(), Lifecycle::Running).await;
    // The changed app keeps its handle and restarts with the new arguments.
    wait_watch(changed.watch(), "changed to run a new process", |s| {
        s.state.lifecycle == Lifecycle::Running && s.pid != changed_pid && s.pid.is_some()
    })
    .await;
    assert_eq!(supervisor.get("same").unwrap().snapshot().pid, same_pid);
    supervisor.shutdown().await;
}

/// The app's process id once it runs (again) under a process other than `old`.
async fn restarted(app: &AppHandle, old: Option<u32>) -> u32 {
    let restarted = format!("{} to restart", app.id());
    let snapshot = wait_watch(app.watch(), restarted, |s| {
        s.state.lifecycle == Lifecycle::Running && s.pid.is_some() && s.pid != old
    })
    .await;
    snapshot.pid.unwrap()
}

async fn env_value(app: &AppHandle, name: &str) -> serde_json::Value {
    let result = app
        .call_tool(
            "get_env",
            Some(json!({ "name": name }).as_object().unwrap().clone()),
            None,
        )
        .await
        .unwrap();
    result.structured_content.unwrap()["value"].clone()
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// The changed and unchanged apps of a reload, each sorted.
fn difference(summary: &ReloadSummary) -> (Vec<String>, Vec<String>) {
    (
        sorted(summary.changed.clone()),
        sorted(summary.unchanged.clone()),
    )
}

#[tokio::test]
async fn a_reload_with_another_inherit_environment_restarts_only_the_apps_it_concerns() {
    let fixture = bin("fixture-app");
    let apps = AppsDir::new();
    apps.stdio_app("probe", &fixture, &["stdio"], "{}");
    apps.stdio_app("bystander", &fixture, &["stdio"], "{}");
    let mut config = McpAppsConfig {
        enabled: true,
        inherit_environment: vec!["PATH".into()],
        ..McpAppsConfig::default()
    };
    let supervisor = Supervisor::builder()
        .config(&config)
        .policy(fast_policy())
        .inherited_environment([("PATH", "/usr/bin:/bin"), ("DEPLOY_REGION", "eu-1")])
        .build();
    supervisor.load(&apps.discover_with(config.clone()));
    assert!(supervisor.wait_settled(PATIENCE).await);
    let probe = supervisor.get("probe").unwrap();
    let bystander = supervisor.get("bystander").unwrap();
    let (probe_pid, bystander_pid) = (probe.snapshot().pid, bystander.snapshot().pid);
    assert_eq!(env_value(&probe, "DEPLOY_REGION").await, json!(null));

    // The same configuration again: nothing restarts.
    let summary = supervisor
        .reload_with(&config, &apps.discover_with(config.clone()))
        .await;
    assert_eq!(
        difference(&summary),
        (vec![], vec!["bystander".into(), "probe".into()])
    );

    // The probe's entry inherits one more name: only the probe restarts, and sees it.
    config.entries.insert(
        "probe".into(),
        McpAppEntryConfig {
            inherit_environment: vec!["DEPLOY_*".into()],
            ..McpAppEntryConfig::default()
        },
    );
    let summary = supervisor
        .reload_with(&config, &apps.discover_with(config.clone()))
        .await;
    assert_eq!(
        difference(&summary),
        (vec!["probe".into()], vec!["bystander".into()])
    );
    let probe_pid = Some(restarted(&probe, probe_pid).await);
    assert_eq!(env_value(&probe, "DEPLOY_REGION").await, json!("eu-1"));
    assert_eq!(bystander.snapshot().pid, bystander_pid);
    assert_eq!(env_value(&bystander, "DEPLOY_REGION").await, json!(null));

    // The global list: the bystander now inherits it too; the probe's effective list
    // (global plus its entry's) changed as well, so both restart.
    config.inherit_environment.push("DEPLOY_REGION".into());
    let summary = supervisor
        .reload_with(&config, &apps.discover_with(config.clone()))
        .await;
    assert_eq!(
        difference(&summary),
        (vec!["bystander".into(), "probe".into()], vec![])
    );
    restarted(&bystander, bystander_pid).await;
    restarted(&probe, probe_pid).await;
    assert_eq!(env_value(&bystander, "DEPLOY_REGION").await, json!("eu-1"));
    assert_eq!(env_value(&probe, "DEPLOY_REGION").await, json!("eu-1"));
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_reload_with_other_supervision_restarts_only_the_apps_whose_policy_changed() {
    let fixture = bin("fixture-app");
    let apps = AppsDir::new();
    apps.stdio_app("tuned", &fixture, &["stdio"], "{}");
    apps.stdio_app("steady", &fixture, &["stdio"], "{}");
    let mut config = McpAppsConfig {
        enabled: true,
        supervision: SupervisionConfig {
            health_check_interval_ms: Some(0),
            restart_delay_ms: Some(50),
            shutdown_grace_ms: Some(2000),
            ..SupervisionConfig::default()
        },
        ..McpAppsConfig::default()
    };
    let supervisor = Supervisor::builder().config(&config).build();
    supervisor.load(&apps.discover_with(config.clone()));
    assert!(supervisor.wait_settled(PATIENCE).await);
    let tuned = supervisor.get("tuned").unwrap();
    let steady = supervisor.get("steady").unwrap();
    let (tuned_pid, steady_pid) = (tuned.snapshot().pid, steady.snapshot().pid);

    // One entry's supervision: only that app restarts.
    config.entries.insert(
        "tuned".into(),
        McpAppEntryConfig {
            supervision: SupervisionConfig {
                auto_restart: Some(false),
                ..SupervisionConfig::default()
            },
            ..McpAppEntryConfig::default()
        },
    );
    let summary = supervisor
        .reload_with(&config, &apps.discover_with(config.clone()))
        .await;
    assert_eq!(
        difference(&summary),
        (vec!["tuned".into()], vec!["steady".into()])
    );
    let tuned_pid = Some(restarted(&tuned, tuned_pid).await);
    assert_eq!(steady.snapshot().pid, steady_pid);

    // Settings are compared as they take effect: writing out the default for every app,
    // which the tuned app's entry overrides anyway, changes no app's policy.
    config.supervision.auto_restart = Some(true);
    let summary = supervisor
        .reload_with(&config, &apps.discover_with(config.clone()))
        .await;
    assert_eq!(
        difference(&summary),
        (vec![], vec!["steady".into(), "tuned".into()])
    );

    // A global setting no entry overrides: every app restarts.
    config.supervision.restart_delay_ms = Some(60);
    let summary = supervisor
        .reload_with(&config, &apps.discover_with(config.clone()))
        .await;
    assert_eq!(
        difference(&summary),
        (vec!["steady".into(), "tuned".into()], vec![])
    );
    restarted(&steady, steady_pid).await;
    restarted(&tuned, tuned_pid).await;
    supervisor.shutdown().await;
}

#[tokio::test]
async fn no_child_survives_shutdown_or_a_dropped_supervisor() {
    let fixture = bin("fixture-app");
    for drop_without_shutdown in [false, true] {
        let apps = AppsDir::new();
        for i in 0..3 {
            apps.stdio_app(&format!("child{i}"), &fixture, &["stdio"], "{}");
        }
        let supervisor = supervise(&apps.discover(), fast_policy());
        assert!(supervisor.wait_settled(PATIENCE).await);
        let pids: Vec<u32> = supervisor
            .list()
            .iter()
            .filter_map(|a| a.snapshot().pid)
            .collect();
        assert_eq!(pids.len(), 3);
        assert_eq!(live(&pids).len(), 3);
        if drop_without_shutdown {
            drop(supervisor);
        } else {
            supervisor.shutdown().await;
        }
        // Each child leads its own process group: nothing in those groups may remain.
        assert!(
            eventually(PATIENCE, async || live_in_groups(&pids).is_empty()).await,
            "still alive after {}: {:?}",
            if drop_without_shutdown {
                "drop"
            } else {
                "shutdown"
            },
            live_in_groups(&pids)
        );
        assert!(live(&pids).is_empty());
    }
}

/// An enabled configuration whose manifests may read `names`.
fn allowing(names: &[&str]) -> mcpapp_manifest::McpAppsConfig {
    mcpapp_manifest::McpAppsConfig {
        enabled: true,
        allow_manifest_env: names.iter().map(|n| (*n).to_owned()).collect(),
        ..mcpapp_manifest::McpAppsConfig::default()
    }
}
