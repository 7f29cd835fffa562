//! The scan itself: enabled switch, paths, nesting, validity, ordering and path resolution.

use mcpapp_discovery::Discovery;
use mcpapp_manifest::{Era, Lifecycle, McpAppEntryConfig, McpAppsConfig, Severity};

use crate::{Tree, enabled, ids, scan};

#[test]
fn disabled_discovery_returns_no_apps() {
    let tree = Tree::new();
    tree.app("a", "a");
    let report = scan(&tree, McpAppsConfig::default(), &["."]);
    assert!(report.apps.is_empty());
    assert_eq!(report.diagnostics.len(), 1);
    assert!(report.diagnostics[0].message.contains("disabled"));
}

#[test]
fn a_missing_path_is_a_debug_diagnostic_not_an_error() {
    let tree = Tree::new();
    let report = scan(&tree, enabled(), &["does-not-exist"]);
    assert!(report.apps.is_empty());
    assert_eq!(report.diagnostics.len(), 1);
    assert_eq!(report.diagnostics[0].severity, Severity::Debug);
    assert_eq!(
        report.diagnostics[0].path.as_deref(),
        Some(tree.path("does-not-exist").as_path())
    );
}

#[test]
fn a_valid_manifest_is_discovered_and_validated() {
    let tree = Tree::new();
    let manifest = tree.app("apps/one", "one");
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(ids(&report), ["one"]);
    let app = &report.apps[0];
    assert!(app.state.is_valid);
    assert!(app.state.validation_errors.is_empty());
    assert_eq!(app.state.lifecycle, Lifecycle::Validated);
    assert_eq!(app.state.root_path, tree.path("apps/one"));
    assert_eq!(app.state.manifest_path, manifest);
    assert!(app.spec.is_some());
    assert!(report.diagnostics.is_empty(), "{:?}", report.diagnostics);
}

#[test]
fn nested_folders_are_scanned_and_the_root_itself_counts() {
    let tree = Tree::new();
    tree.app("apps", "at-root");
    tree.app("apps/app1", "app1");
    tree.app("apps/nested/deeper/app2", "app2");
    tree.app("apps/.hidden/app3", "hidden-app");
    // .gitignore rules are not applied.
    tree.write("apps/.gitignore", "app1/\n");
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(ids(&report), ["at-root", "hidden-app", "app1", "app2"]);
}

#[test]
fn vendored_runtime_folders_are_not_entered() {
    let tree = Tree::new();
    tree.app("apps/one", "one");
    // What `install` vendors (npm packages may ship any file) is never scanned.
    tree.app(
        "apps/one/.mcpapp-runtime/1.0.0/node_modules/pkg",
        "from-a-package",
    );
    // A discovery path that is itself such a folder is still scanned, and so is a file of
    // that name.
    tree.app("only/.mcpapp-runtime", "named-root");
    tree.write("apps/two/.mcpapp-runtime", "not a folder");
    tree.app("apps/two", "two");
    let report = scan(&tree, enabled(), &["apps", "only/.mcpapp-runtime"]);
    assert_eq!(ids(&report), ["one", "two", "named-root"]);
}

#[test]
fn only_the_exact_file_name_counts() {
    let tree = Tree::new();
    tree.write(
        "apps/a/OpenClaw.McpApp.json",
        r#"{"id":"upper","command":"x"}"#,
    );
    tree.write(
        "apps/b/openclaw.mcpapp.json.bak",
        r#"{"id":"bak","command":"x"}"#,
    );
    std::fs::create_dir_all(tree.path("apps/c/openclaw.mcpapp.json")).unwrap();
    let report = scan(&tree, enabled(), &["apps"]);
    assert!(report.apps.is_empty(), "{:?}", ids(&report));
}

#[test]
fn missing_fields_make_an_invalid_app_that_is_still_returned() {
    let tree = Tree::new();
    tree.manifest("apps/broken", r#"{"id":"","transport":"stdio"}"#);
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(report.apps.len(), 1);
    let app = &report.apps[0];
    assert!(!app.state.is_valid);
    assert_eq!(app.state.lifecycle, Lifecycle::Discovered);
    assert!(app.spec.is_none());
    let errors = app.state.validation_errors.join("\n");
    assert!(
        errors.contains("id") && errors.contains("command"),
        "{errors}"
    );
    let diagnostics: Vec<_> = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert_eq!(diagnostics.len(), 2);
    assert_eq!(
        (diagnostics[0].line, diagnostics[0].column),
        (Some(1), Some(7))
    );
}

#[test]
fn null_ids_do_not_crash_the_scan() {
    let tree = Tree::new();
    tree.manifest("apps/a", r#"{"id":null,"command":"x"}"#);
    tree.app("apps/b", "fine");
    let mut config = enabled();
    config.deny = vec!["*x*".into()];
    let report = scan(&tree, config, &["apps"]);
    assert_eq!(report.apps.len(), 2);
    assert_eq!(report.apps[0].state.validation_errors, ["'id' is required"]);
    assert!(report.apps[1].spec.is_some());
}

#[test]
fn unsupported_transports_are_validation_errors() {
    let tree = Tree::new();
    tree.manifest(
        "apps/ws",
        r#"{"id":"ws","transport":"websocket","command":"x"}"#,
    );
    tree.manifest(
        "apps/inproc",
        r#"{"id":"inproc","transport":"inprocess","command":"x"}"#,
    );
    tree.manifest(
        "apps/sse",
        r#"{"id":"sse","transport":"sse","url":"http://h/sse"}"#,
    );
    let report = scan(&tree, enabled(), &["apps"]);
    let errors = |id: &str| report.app(id).unwrap().state.validation_errors.join("\n");
    assert!(errors("ws").contains("transport"));
    assert!(errors("inproc").contains("stdio") && errors("inproc").contains("http"));
    assert!(errors("sse").contains("Streamable HTTP"));
}

#[test]
fn invalid_json_is_skipped_with_a_positioned_diagnostic() {
    let tree = Tree::new();
    let bad = tree.manifest("apps/bad", "{\n  \"id\": \"bad\",\n  garbage\n}");
    tree.app("apps/good", "good");
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(ids(&report), ["good"]);
    assert_eq!(report.diagnostics.len(), 1);
    let d = &report.diagnostics[0];
    assert_eq!(d.path.as_deref(), Some(bad.as_path()));
    assert_eq!((d.line, d.column), (Some(3), Some(3)));
    assert_eq!(d.severity, Severity::Error);
    assert!(
        d.to_string()
            .starts_with(&format!("{}:3:3: error: invalid manifest", bad.display()))
    );
}

#[test]
fn unknown_fields_become_warnings_on_the_app_and_in_diagnostics() {
    let tree = Tree::new();
    let path = tree.manifest(
        "apps/a",
        "{\n  \"id\": \"a\",\n  \"command\": \"x\",\n  \"comand\": \"y\"\n}",
    );
    let report = scan(&tree, enabled(), &["apps"]);
    let app = &report.apps[0];
    assert!(app.state.is_valid);
    assert_eq!(
        app.state.warnings,
        ["line 4, column 3: unknown field `comand`; did you mean `command`?"]
    );
    assert_eq!(report.diagnostics[0].path.as_deref(), Some(path.as_path()));
    assert_eq!(report.diagnostics[0].severity, Severity::Warning);
}

#[test]
fn results_are_in_path_order_within_each_root_and_roots_in_config_order() {
    let tree = Tree::new();
    for name in ["zeta", "alpha", "mid", "beta/inner", "Alpha2"] {
        tree.app(&format!("second/{name}"), &name.replace('/', "-"));
    }
    tree.app("first/only", "first-only");
    let report = scan(&tree, enabled(), &["first", "second"]);
    assert_eq!(
        ids(&report),
        ["first-only", "Alpha2", "alpha", "beta-inner", "mid", "zeta"]
    );
    // Any number of walker threads gives the same order.
    for threads in [1, 4, 8] {
        let again = Discovery::builder(enabled())
            .discovery_paths(
                vec![
                    tree.path("first").display().to_string(),
                    tree.path("second").display().to_string(),
                ],
                tree.root(),
            )
            .threads(threads)
            .build()
            .unwrap()
            .scan();
        assert_eq!(ids(&again), ids(&report), "{threads} threads");
        let paths = |r: &mcpapp_discovery::DiscoveryReport| {
            r.apps
                .iter()
                .map(|a| a.state.manifest_path.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(paths(&again), paths(&report));
    }
}

#[test]
fn duplicate_ids_first_wins_and_later_ones_name_it() {
    let tree = Tree::new();
    let first = tree.app("apps/a", "same");
    tree.app("apps/b", "same");
    tree.app("more/c", "same");
    let report = scan(&tree, enabled(), &["apps", "more"]);
    assert_eq!(report.apps.len(), 3);
    assert!(report.apps[0].spec.is_some());
    for later in &report.apps[1..] {
        assert!(!later.state.is_valid);
        assert!(later.spec.is_none());
        let error = &later.state.validation_errors[0];
        assert!(error.contains("duplicate app id 'same'"), "{error}");
        assert!(error.contains(&first.display().to_string()), "{error}");
    }
}

#[test]
fn overlapping_roots_count_each_manifest_once() {
    let tree = Tree::new();
    tree.app("apps/inner/x", "x");
    let report = scan(&tree, enabled(), &["apps", "apps/inner"]);
    assert_eq!(ids(&report), ["x"]);
    assert!(report.apps[0].state.is_valid);
}

#[test]
fn env_paths_read_the_variable_and_missing_ones_are_reported() {
    let tree = Tree::new();
    tree.app("from-env/a", "env-app");
    let dir = tree.path("from-env").display().to_string();
    let mut config = enabled();
    config.discovery_paths = vec!["env:MCPAPP_TEST_DIR".into(), "env:MCPAPP_TEST_UNSET".into()];
    let report = Discovery::builder(config)
        .base_dir(tree.root())
        .env_lookup(move |name| (name == "MCPAPP_TEST_DIR").then(|| dir.clone()))
        .build()
        .unwrap()
        .scan();
    assert_eq!(ids(&report), ["env-app"]);
    assert_eq!(report.diagnostics.len(), 1);
    assert!(
        report.diagnostics[0]
            .message
            .contains("'MCPAPP_TEST_UNSET' is not set")
    );
}

#[test]
fn relative_paths_resolve_against_the_base_folder_not_the_current_one() {
    let tree = Tree::new();
    tree.app("conf/mcpapps/a", "relative-app");
    let mut config = enabled();
    config.discovery_paths = vec!["./mcpapps".into()];
    let report = Discovery::builder(config)
        .base_dir(tree.path("conf"))
        .build()
        .unwrap()
        .scan();
    assert_eq!(ids(&report), ["relative-app"]);
    assert_eq!(report.apps[0].state.root_path, tree.path("conf/mcpapps/a"));
}

#[test]
fn entries_override_before_validation() {
    let tree = Tree::new();
    // Invalid on its own: stdio without a command.
    tree.manifest(
        "apps/a",
        r#"{"id":"needs-entry","transport":"stdio","toolNamePrefix":"m."}"#,
    );
    let mut config = enabled();
    config.entries.insert(
        "needs-entry".into(),
        McpAppEntryConfig {
            transport: Some("streamable-http".into()),
            url: Some("http://127.0.0.1:9/mcp".into()),
            tool_name_prefix: Some("e.".into()),
            ..Default::default()
        },
    );
    let report = scan(&tree, config, &["apps"]);
    let app = &report.apps[0];
    assert!(app.state.is_valid, "{:?}", app.state.validation_errors);
    assert_eq!(app.state.manifest.transport, "streamable-http");
    let spec = app.spec.as_ref().unwrap();
    assert_eq!(spec.tool_name_prefix, "e.");
    assert_eq!(spec.launch.transport(), mcpapp_manifest::Transport::Http);
}

#[test]
fn entries_that_match_no_app_are_warned_about() {
    let tree = Tree::new();
    tree.app("apps/a", "grocery-inventory");
    let mut config = enabled();
    config
        .entries
        .insert("grocery-inventry".into(), McpAppEntryConfig::default());
    config
        .entries
        .insert("grocery-inventory".into(), McpAppEntryConfig::default());
    let report = scan(&tree, config, &["apps"]);
    let warnings: Vec<_> = report
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        warnings,
        [
            "McpApps.Entries has a key 'grocery-inventry' that matches no discovered app; did you mean 'grocery-inventory'?"
        ]
    );
}

#[test]
fn roots_are_the_resolved_discovery_paths_whether_they_exist_or_not() {
    let tree = Tree::new();
    let config = McpAppsConfig {
        discovery_paths: vec![
            "apps".into(),
            "./later/apps".into(),
            "env:MCPAPP_TEST_UNSET_ROOT".into(),
        ],
        ..enabled()
    };
    let discovery = Discovery::builder(config.clone())
        .base_dir(tree.root())
        .env_lookup(|_| None)
        .build()
        .unwrap();
    // The unusable `env:` path is left out: the scan reports it.
    assert_eq!(
        discovery.roots(),
        vec![tree.path("apps"), tree.path("later/apps")]
    );
    let disabled = Discovery::builder(McpAppsConfig {
        enabled: false,
        ..config
    })
    .base_dir(tree.root())
    .build()
    .unwrap();
    assert!(disabled.roots().is_empty());
}

#[test]
fn a_declared_protocol_version_decides_the_era_and_none_leaves_it_to_the_app() {
    let tree = Tree::new();
    tree.app("apps/ask", "ask");
    tree.manifest(
        "apps/legacy",
        r#"{"id":"legacy","command":"run","protocolVersion":"2025-06-18"}"#,
    );
    tree.manifest(
        "apps/modern",
        r#"{"id":"modern","command":"run","protocolVersion":" 2026-07-28 "}"#,
    );
    let report = scan(&tree, enabled(), &["apps"]);
    let era = |id: &str| report.app(id).unwrap().spec.as_ref().unwrap().protocol_era;
    assert_eq!(era("ask"), None);
    assert_eq!(era("legacy"), Some(Era::Legacy));
    assert_eq!(era("modern"), Some(Era::Modern));
}
