//! Over-long values in manifests and configuration: every diagnostic and every message of an
//! install state stays small, names the field and says how long the value really is.

use mcpapp_discovery::DiscoveryReport;
use mcpapp_manifest::McpAppsConfig;

use crate::{Tree, enabled, scan};

/// The size of the long values: far beyond anything a message should carry.
const LONG: usize = 900_000;

/// Every message stays under this many bytes.
const BOUND: usize = 400;

fn long(c: char) -> String {
    std::iter::repeat_n(c, LONG).collect()
}

/// Every message of the report: diagnostics, and the validation errors and warnings of every
/// install state.
fn messages(report: &DiscoveryReport) -> Vec<String> {
    let mut all: Vec<String> = report.diagnostics.iter().map(ToString::to_string).collect();
    for app in &report.apps {
        all.extend(app.state.validation_errors.iter().cloned());
        all.extend(app.state.warnings.iter().cloned());
        all.extend(app.state.last_error.iter().cloned());
    }
    all
}

/// Asserts that every message is small and that one of them contains `names` and the size of
/// the long value (at least `LONG` bytes).
fn assert_small_and_named(report: &DiscoveryReport, names: &str) {
    let all = messages(report);
    for message in &all {
        assert!(
            message.len() < BOUND,
            "{} bytes: {}…",
            message.len(),
            &message[..BOUND]
        );
    }
    let named = all
        .iter()
        .find(|m| m.contains(names))
        .unwrap_or_else(|| panic!("no message contains {names:?}: {all:#?}"));
    let (before, _) = named.split_once(" bytes)").expect("the size is shown");
    let size: usize = before.rsplit_once('(').unwrap().1.parse().unwrap();
    assert!(size >= LONG, "{named}");
}

#[test]
fn a_long_id_is_shortened_in_diagnostics_and_the_install_state() {
    let tree = Tree::new();
    let id = long('a');
    let manifest = format!(r#"{{"id": "{id}", "command": "x"}}"#);
    tree.manifest("apps/one", &manifest);
    tree.manifest("apps/two", &manifest);
    let config = McpAppsConfig {
        deny: vec!["a*".into()],
        ..enabled()
    };
    let report = scan(&tree, config, &["apps"]);
    assert_eq!(report.apps.len(), 2);
    let first = &report.apps[0].state;
    assert!(!first.is_valid);
    // Invalid, then denied; the second is a duplicate too.
    assert_eq!(first.validation_errors.len(), 2, "{first:?}");
    assert_eq!(report.apps[1].state.validation_errors.len(), 3);
    assert_small_and_named(&report, "'id' \"aaaa");
    assert_small_and_named(&report, "duplicate app id 'aaaa");
    assert_small_and_named(&report, "is denied by pattern 'a*'");
    // The diagnostic names the field by its position.
    let invalid = report
        .diagnostics
        .iter()
        .find(|d| d.message.starts_with("'id'"))
        .unwrap();
    assert_eq!((invalid.line, invalid.column), (Some(1), Some(8)));
}

#[test]
fn long_urls_transports_and_unknown_fields_are_shortened() {
    let tree = Tree::new();
    tree.manifest(
        "apps/url",
        &format!(
            r#"{{"id": "url", "transport": "http", "url": "http://a b{}"}}"#,
            long('u')
        ),
    );
    tree.manifest(
        "apps/transport",
        &format!(r#"{{"id": "transport", "transport": "{}"}}"#, long('t')),
    );
    tree.manifest(
        "apps/unknown",
        &format!(r#"{{"id": "unknown", "command": "x", "{}": 1}}"#, long('k')),
    );
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(report.apps.len(), 3);
    assert_small_and_named(&report, "'url' \"http://a buuuu");
    assert_small_and_named(&report, "unsupported transport 'tttt");
    assert_small_and_named(&report, "unknown field `kkkk");
    // The unknown field is only a warning: that app is valid.
    assert!(report.app("unknown").unwrap().spec.is_some());
}

#[test]
fn long_entry_keys_patterns_and_suggestions_are_shortened() {
    let tree = Tree::new();
    let id = format!("a{}", "b".repeat(63));
    tree.app("apps/a", &id);
    let near = format!("{id}x");
    let mut config = enabled();
    config.entries.insert(long('e'), Default::default());
    config.entries.insert(near, Default::default());
    config.allowlist_semantics = long('s');
    let report = scan(&tree, config, &["apps"]);
    assert_small_and_named(&report, "McpApps.Entries has a key 'eeee");
    assert_small_and_named(&report, "unsupported allowlist semantics 'ssss");
    let all = messages(&report);
    assert!(
        all.iter()
            .any(|m| m.contains(&format!("did you mean '{id}'?"))),
        "{all:#?}"
    );

    // A long pattern is refused (globset would panic compiling it), a long broken one too.
    for (list, pattern) in [("Allow", long('p')), ("Deny", format!("[{}", long('p')))] {
        let mut config = enabled();
        match list {
            "Allow" => config.allow = vec![pattern],
            _ => config.deny = vec![pattern],
        }
        let err = mcpapp_discovery::Discovery::builder(config)
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.len() < BOUND, "{} bytes", err.len());
        assert!(
            err.starts_with(&format!("McpApps.{list} pattern '")),
            "{err}"
        );
        assert!(
            err.contains(" bytes) is not a valid glob: it is longer than 1024 characters"),
            "{err}"
        );
    }
}
