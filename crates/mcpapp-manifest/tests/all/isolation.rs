//! The sandbox model in documents: a manifest's `permissions` request and the operator's
//! `Isolation` settings, read with positions, validated, and bound case-insensitively in
//! configuration files.

use mcpapp_manifest::{
    ConfigDocument, HostPort, IsolationMode, McpAppManifest, NetworkAccess, ParseError,
    ValidationError,
};

#[test]
fn a_manifest_requests_paths_and_network_with_positions() {
    let text = r#"{
  "id": "notes",
  "command": "node",
  "permissions": {
    "filesystem": {"read": ["~/notes"], "write": ["/srv/notes/out"]},
    "network": {"tcpPorts": [5432], "hosts": ["API.example.com:443"]}
  }
}"#;
    let parsed = McpAppManifest::parse(text).unwrap();
    assert!(parsed.findings.is_empty(), "{:?}", parsed.findings);
    let request = &parsed.manifest.permissions;
    assert_eq!(request.filesystem.read, ["~/notes"]);
    assert_eq!(
        request.network.0,
        NetworkAccess::Limited {
            tcp_ports: [5432].into(),
            hosts: [HostPort::parse("api.example.com:443").unwrap()].into(),
        }
    );
    let position = parsed
        .field_position("permissions.filesystem.write[0]")
        .unwrap();
    assert_eq!((position.line, position.column), (5, 51));
    // Round trip: the request is written back as it was read (host names lower-cased).
    let again = McpAppManifest::parse(&parsed.manifest.to_json_pretty()).unwrap();
    assert_eq!(again.manifest.permissions, *request);
    // No request, nothing written.
    let plain = McpAppManifest::parse(r#"{"id": "x", "command": "y"}"#).unwrap();
    assert!(plain.manifest.permissions.is_empty());
    assert!(!plain.manifest.to_json_pretty().contains("permissions"));
}

#[test]
fn malformed_requests_are_errors_at_their_place() {
    let err = McpAppManifest::parse(
        "{\"id\": \"x\",\n \"permissions\": {\"network\": {\"hosts\": [\"no-port\"]}}}",
    )
    .unwrap_err();
    match &err {
        ParseError::Type {
            field, position, ..
        } => {
            assert_eq!(field, "permissions.network");
            assert_eq!(position.unwrap().line, 2);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("'no-port' has no port"), "{err}");
    let err = McpAppManifest::parse(r#"{"id": "x", "permissions": {"network": "some"}}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown network access \"some\""), "{err}");

    let manifest = McpAppManifest::parse(
        r#"{"id": "x", "command": "y", "permissions": {"filesystem": {
            "read": ["relative/path", "/ok", "/a/../b"]}}}"#,
    )
    .unwrap()
    .manifest;
    let errors = manifest.validate().unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(matches!(
        &errors[0],
        ValidationError::InvalidPermissionPath { list: "read", path, .. } if path == "relative/path"
    ));
    assert_eq!(errors[0].field(), "permissions");
    assert_eq!(
        errors[1].to_string(),
        "'permissions.filesystem.read' entry \"/a/../b\" must not contain '..'"
    );
}

#[test]
fn isolation_settings_bind_case_insensitively_and_name_bad_values() {
    let text = r#"{"McpApps": {"isolation": {
        "mode": "Best-Effort",
        "network": {"tcpports": [443], "HOSTS": ["*.example.com:443"]},
        "Limits": {"OpenFiles": 256},
        "AllowManifestPermissions": {"Read": ["~/notes/**"]}
    }, "Entries": {"a": {"Isolation": {"Network": "all", "UnixSockets": true}}}}}"#;
    let document = ConfigDocument::parse(text).unwrap();
    let section = document.mcp_apps().unwrap();
    let isolation = &section.value.isolation;
    assert_eq!(isolation.mode, Some(IsolationMode::BestEffort));
    assert_eq!(
        isolation.network.as_ref().unwrap().0.to_string(),
        "tcp:443, *.example.com:443"
    );
    assert_eq!(isolation.limits.open_files, Some(256));
    assert_eq!(isolation.allow_manifest_permissions.read, ["~/notes/**"]);
    let entry = &section.value.entries["a"].isolation;
    assert_eq!(entry.network.as_ref().unwrap().0, NetworkAccess::All);
    assert_eq!(entry.unix_sockets, Some(true));
    let position = document
        .value_position(
            "McpApps",
            &["Isolation", "AllowManifestPermissions", "Read", "0"],
        )
        .unwrap();
    assert_eq!((position.line, position.column), (5, 47));

    let err = ConfigDocument::parse("{\"McpApps\": {\"Isolation\": {\"Mode\": \"strict\"}}}")
        .unwrap()
        .mcp_apps()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("McpApps.Isolation.Mode") && err.contains("unknown isolation mode \"strict\""),
        "{err}"
    );
}
