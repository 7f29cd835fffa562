//! Allow/deny rules applied through a real scan: the original module's cases.

use mcpapp_manifest::{Lifecycle, McpAppEntryConfig, McpAppsConfig};

use crate::{Tree, enabled, scan};

fn scan_ids(ids: &[&str], config: McpAppsConfig) -> mcpapp_discovery::DiscoveryReport {
    let tree = Tree::new();
    for id in ids {
        tree.app(&format!("apps/{id}"), id);
    }
    scan(&tree, config, &["apps"])
}

fn allowed(report: &mcpapp_discovery::DiscoveryReport, id: &str) -> bool {
    let app = report.app(id).unwrap();
    assert_eq!(
        app.spec.is_some(),
        app.state.lifecycle == Lifecycle::Validated
    );
    app.spec.is_some()
}

#[test]
fn allowlist_allows_only_listed_apps() {
    let mut config = enabled();
    config.allow = vec!["allowed-app".into(), "also-allowed".into()];
    let report = scan_ids(&["allowed-app", "also-allowed", "other-app"], config);
    assert!(allowed(&report, "allowed-app") && allowed(&report, "also-allowed"));
    assert!(!allowed(&report, "other-app"));
    let other = report.app("other-app").unwrap();
    assert_eq!(other.state.lifecycle, Lifecycle::Disabled);
    assert!(other.state.validation_errors[0].contains("not in the allowlist"));
}

#[test]
fn wildcard_allowlist_allows_everything() {
    let mut config = enabled();
    config.allow = vec!["*".into()];
    let report = scan_ids(&["a", "b-c", "d.e"], config);
    assert!(["a", "b-c", "d.e"].iter().all(|id| allowed(&report, id)));
}

#[test]
fn deny_wins_over_allow() {
    let mut config = enabled();
    config.allow = vec!["*".into()];
    config.deny = vec!["blocked-one".into(), "blocked-two".into()];
    let report = scan_ids(&["blocked-one", "blocked-two", "fine"], config);
    assert!(!allowed(&report, "blocked-one") && !allowed(&report, "blocked-two"));
    assert!(allowed(&report, "fine"));
    assert!(
        report.app("blocked-one").unwrap().state.validation_errors[0].contains("'blocked-one'")
    );
}

#[test]
fn glob_patterns_match_prefixes_and_substrings() {
    let mut config = enabled();
    config.deny = vec!["test-*".into(), "*danger*".into()];
    let report = scan_ids(
        &["test-anything", "containing-danger-middle", "normal-app"],
        config,
    );
    assert!(!allowed(&report, "test-anything"));
    assert!(!allowed(&report, "containing-danger-middle"));
    assert!(allowed(&report, "normal-app"));
}

#[test]
fn an_entry_can_disable_an_app() {
    let mut config = enabled();
    config.entries.insert(
        "off".into(),
        McpAppEntryConfig {
            enabled: false,
            ..Default::default()
        },
    );
    let report = scan_ids(&["off", "on"], config);
    let off = report.app("off").unwrap();
    assert_eq!(off.state.lifecycle, Lifecycle::Disabled);
    assert!(off.state.validation_errors[0].contains("disabled in McpApps.Entries"));
    // Disabled is not invalid.
    assert!(off.state.is_valid);
    assert!(allowed(&report, "on"));
}

#[test]
fn legacy_semantics_with_empty_lists_allows_all() {
    let report = scan_ids(&["a", "b"], enabled());
    assert!(allowed(&report, "a") && allowed(&report, "b"));
}

#[test]
fn strict_semantics_with_an_empty_allowlist_denies_all() {
    let mut config = enabled();
    config.allowlist_semantics = "strict".into();
    let report = scan_ids(&["a"], config);
    assert!(!allowed(&report, "a"));
    let app = report.app("a").unwrap();
    assert_eq!(app.state.lifecycle, Lifecycle::Disabled);
    assert!(app.state.validation_errors[0].contains("allowlist"));
}

#[test]
fn unsupported_semantics_fail_closed() {
    let mut config = enabled();
    config.allowlist_semantics = "stict".into();
    let report = scan_ids(&["a", "b"], config);
    for id in ["a", "b"] {
        assert!(!allowed(&report, id));
        assert!(report.app(id).unwrap().state.validation_errors[0].contains("allowlist semantics"));
    }
    let warning = report.diagnostics.iter().find(|d| {
        d.message
            .contains("unsupported allowlist semantics 'stict'")
    });
    assert!(warning.is_some(), "{:?}", report.diagnostics);
}

#[test]
fn invalid_apps_can_also_be_disabled() {
    let tree = Tree::new();
    tree.manifest("apps/x", r#"{"id":"denied-and-invalid"}"#);
    let mut config = enabled();
    config.deny = vec!["denied-*".into()];
    let report = scan(&tree, config, &["apps"]);
    let app = &report.apps[0];
    assert!(!app.state.is_valid);
    assert_eq!(app.state.lifecycle, Lifecycle::Disabled);
    assert_eq!(app.state.validation_errors.len(), 2);
}

#[test]
fn a_pattern_that_is_not_a_glob_is_a_configuration_error() {
    let mut config = enabled();
    config.allow = vec!["app-[".into()];
    let err = mcpapp_discovery::Discovery::builder(config)
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("McpApps.Allow pattern 'app-['"),
        "{err}"
    );
}
