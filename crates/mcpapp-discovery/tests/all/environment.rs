//! `env:NAME` references: a manifest may read only the variables the operator allows, never
//! the gateway's own credentials; the operator's entries read freely.

use mcpapp_manifest::{Lifecycle, McpAppEntryConfig, Severity};

use crate::{Tree, enabled, scan};

const MANIFEST: &str = r#"{
  "id": "reach",
  "command": "run-reach",
  "environment": {
    "PLAIN": "literal",
    "API_KEY": "env:STRIPE_KEY"
  }
}"#;

#[test]
fn a_manifest_reference_to_a_name_nobody_allowed_makes_the_app_invalid() {
    let tree = Tree::new();
    let path = tree.manifest("apps/reach", MANIFEST);
    let report = scan(&tree, enabled(), &["apps"]);
    let app = report.app("reach").unwrap();
    assert!(app.spec.is_none());
    assert!(!app.state.is_valid);
    assert_eq!(app.state.lifecycle, Lifecycle::Discovered);
    let error = &app.state.validation_errors[0];
    assert!(
        error.contains("environment 'API_KEY' refers to env:STRIPE_KEY")
            && error.contains("McpApps.AllowManifestEnv")
            && error.contains("McpApps.Entries.reach.Environment"),
        "{error}"
    );
    let diagnostic = report
        .diagnostics
        .iter()
        .find(|d| d.message == *error)
        .expect("a diagnostic for the reference");
    assert_eq!(diagnostic.severity, Severity::Error);
    assert_eq!(diagnostic.path.as_deref(), Some(path.as_path()));
    // The value's own line: `"API_KEY": "env:STRIPE_KEY"` is line 6.
    assert_eq!(diagnostic.line, Some(6));
}

#[test]
fn allowed_names_resolve_globally_or_per_entry() {
    let tree = Tree::new();
    tree.manifest("apps/reach", MANIFEST);
    let mut global = enabled();
    global.allow_manifest_env = vec!["STRIPE_*".into()];
    assert!(
        scan(&tree, global, &["apps"])
            .app("reach")
            .unwrap()
            .spec
            .is_some()
    );

    let mut per_entry = enabled();
    per_entry.entries.insert(
        "reach".into(),
        McpAppEntryConfig {
            allow_manifest_env: vec!["STRIPE_KEY".into()],
            ..McpAppEntryConfig::default()
        },
    );
    assert!(
        scan(&tree, per_entry, &["apps"])
            .app("reach")
            .unwrap()
            .spec
            .is_some()
    );

    // Another app's entry allows nothing for this one.
    let mut other_entry = enabled();
    other_entry.entries.insert(
        "other".into(),
        McpAppEntryConfig {
            allow_manifest_env: vec!["*".into()],
            ..McpAppEntryConfig::default()
        },
    );
    assert!(
        scan(&tree, other_entry, &["apps"])
            .app("reach")
            .unwrap()
            .spec
            .is_none()
    );
}

#[test]
fn the_gateway_credentials_are_never_readable_from_a_manifest() {
    let tree = Tree::new();
    tree.manifest(
        "apps/greedy",
        r#"{"id":"greedy","transport":"http","url":"http://127.0.0.1:1/mcp",
            "headers":{"Authorization":"env:MCPAPP_TOKEN"},
            "environment":{"K":"env:OPENAI_API_KEY"}}"#,
    );
    let mut config = enabled();
    config.allow_manifest_env = vec!["*".into()];
    let report = scan(&tree, config, &["apps"]);
    let app = report.app("greedy").unwrap();
    assert!(app.spec.is_none());
    let errors = app.state.validation_errors.join("\n");
    assert!(
        errors.contains("headers 'Authorization' refers to env:MCPAPP_TOKEN, one of the gateway's own credentials")
            && errors.contains("McpApps.Entries.greedy.Headers"),
        "{errors}"
    );
    assert!(
        errors.contains(
            "environment 'K' refers to env:OPENAI_API_KEY, one of the gateway's own credentials"
        ),
        "{errors}"
    );
}

#[test]
fn references_written_or_replaced_by_the_operator_resolve_freely() {
    let tree = Tree::new();
    tree.manifest("apps/reach", MANIFEST);
    let mut config = enabled();
    let mut entry = McpAppEntryConfig::default();
    // The entry replaces the manifest's reference and adds one of its own, even to a
    // gateway credential: the operator decides.
    entry
        .environment
        .insert("API_KEY".into(), "env:STRIPE_KEY".into());
    entry
        .environment
        .insert("TOKEN".into(), "env:MCPAPP_TOKEN".into());
    config.entries.insert("reach".into(), entry);
    let report = scan(&tree, config, &["apps"]);
    let app = report.app("reach").unwrap();
    assert!(app.spec.is_some(), "{:?}", app.state.validation_errors);
}

#[test]
fn invalid_patterns_are_configuration_errors() {
    let mut config = enabled();
    config.allow_manifest_env = vec!["[".into()];
    let err = mcpapp_discovery::Discovery::builder(config)
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("McpApps.AllowManifestEnv pattern '['"),
        "{err}"
    );
}
