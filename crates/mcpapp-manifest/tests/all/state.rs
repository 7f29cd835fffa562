//! The lifecycle enum and the install state.

use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use mcpapp_manifest::{InstallState, Lifecycle, McpAppManifest, Timestamp};

fn state() -> InstallState {
    let manifest = McpAppManifest {
        id: Some("app".into()),
        ..Default::default()
    };
    InstallState::new(
        manifest,
        PathBuf::from("/apps/app/openclaw.mcpapp.json"),
        PathBuf::from("/apps/app"),
    )
}

#[test]
fn a_new_state_has_the_documented_defaults() {
    let s = state();
    assert_eq!(
        s.manifest_path,
        PathBuf::from("/apps/app/openclaw.mcpapp.json")
    );
    assert_eq!(s.root_path, PathBuf::from("/apps/app"));
    assert!(s.is_valid);
    assert!(s.validation_errors.is_empty() && s.warnings.is_empty());
    assert_eq!(s.lifecycle, Lifecycle::Discovered);
    assert_eq!(s.last_error, None);
    assert_eq!(
        (
            s.tool_count,
            s.resource_count,
            s.resource_template_count,
            s.prompt_count
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(s.discovered_at, s.state_changed_at);
    assert_eq!(s.id(), "app");
}

#[test]
fn transitions_update_the_state_timestamp_only() {
    let mut s = state();
    let discovered = s.discovered_at;
    let later = Timestamp::from_system_time(discovered.system_time() + Duration::from_secs(5));
    s.transition_at(Lifecycle::Validated, later);
    assert_eq!(s.lifecycle, Lifecycle::Validated);
    assert_eq!(s.state_changed_at, later);
    assert_ne!(s.state_changed_at, s.discovered_at);
    assert_eq!(s.discovered_at, discovered);
}

#[test]
fn validation_errors_make_a_state_invalid() {
    let mut s = state();
    s.invalidate("'id' is required");
    assert!(!s.is_valid);
    assert_eq!(s.validation_errors, ["'id' is required"]);
    assert_eq!(s.lifecycle, Lifecycle::Discovered);
    s.disable("app 'app' is disabled in McpApps.Entries");
    assert_eq!(s.lifecycle, Lifecycle::Disabled);
    assert_eq!(s.validation_errors.len(), 2);
}

#[test]
fn lifecycle_names_and_numbers_are_stable() {
    let names: Vec<(u8, &str)> = Lifecycle::ALL
        .iter()
        .map(|l| (*l as u8, l.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (0, "Discovered"),
            (1, "Validated"),
            (2, "Loaded"),
            (3, "Running"),
            (4, "Stopped"),
            (5, "Failed"),
            (6, "Disabled"),
            (7, "NeedsAuthorization"),
        ]
    );
    assert_eq!(serde_json::to_value(Lifecycle::Running).unwrap(), "Running");
}

#[test]
fn counts_are_plain_fields_and_serialize_in_camel_case() {
    let mut s = state();
    s.tool_count = 3;
    s.resource_count = 2;
    s.prompt_count = 1;
    s.state_changed_at = Timestamp::from_system_time(UNIX_EPOCH + Duration::from_secs(60));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["toolCount"], 3);
    assert_eq!(json["resourceCount"], 2);
    assert_eq!(json["promptCount"], 1);
    assert_eq!(json["lifecycle"], "Discovered");
    assert_eq!(json["stateChangedAt"], "1970-01-01T00:01:00.000Z");
    assert_eq!(json["manifestPath"], "/apps/app/openclaw.mcpapp.json");
    assert_eq!(json["isValid"], true);
}
