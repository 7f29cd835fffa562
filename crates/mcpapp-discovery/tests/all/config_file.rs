//! Reading configuration files from disk.

use mcpapp_discovery::{ConfigError, ConfigFile, Discovery};

use crate::{Tree, ids};

#[test]
fn relative_paths_resolve_against_the_config_files_folder() {
    let tree = Tree::new();
    tree.app("etc/mcpapp/apps/a", "a");
    let config = tree.write(
        "etc/mcpapp/appsettings.json",
        r#"{ "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": ["apps"] } } }"#,
    );
    let file = ConfigFile::read(&config).unwrap();
    assert_eq!(file.dir(), tree.path("etc/mcpapp"));
    let section = file.mcp_apps().unwrap();
    assert!(section.diagnostics.is_empty(), "{:?}", section.diagnostics);
    let report = Discovery::builder(section.value)
        .config_file(&file)
        .build()
        .unwrap()
        .scan();
    assert_eq!(ids(&report), ["a"]);
}

#[test]
fn config_diagnostics_name_the_file_line_and_column() {
    let tree = Tree::new();
    let config = tree.write(
        "c.json",
        "{\n  \"McpApps\": {\n    \"Enabld\": true\n  }\n}",
    );
    let section = ConfigFile::read(&config).unwrap().mcp_apps().unwrap();
    let rendered: Vec<String> = section
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        rendered,
        [
            format!(
                "{}:3:5: warning: unknown key `Enabld` in `McpApps`; did you mean `Enabled`?",
                config.display()
            ),
            format!(
                "{}:2:14: warning: `McpApps.Enabled` is not set, so MCP Apps stay disabled (the default is false); set \"Enabled\": true to run them",
                config.display()
            ),
        ]
    );
}

#[test]
fn unreadable_and_malformed_files_are_errors_naming_them() {
    let tree = Tree::new();
    let missing = tree.path("missing.json");
    let err = ConfigFile::read(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }));
    assert!(err.to_string().contains(&missing.display().to_string()));

    let bad = tree.write("bad.json", "{\n  \"McpApps\": {,}\n}");
    let err = ConfigFile::read(&bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}:2:15: unexpected token in object", bad.display())
    );
}

/// The size limit of configuration files, as the crate documents it (16 MiB).
const MAX_CONFIG_FILE_BYTES: u64 = 16 * 1024 * 1024;

#[test]
fn oversized_and_non_utf8_configuration_files_are_errors_naming_them() {
    let tree = Tree::new();
    // A sparse file: larger than the limit without taking the space.
    let big = tree.path("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_CONFIG_FILE_BYTES + 1)
        .unwrap();
    let err = ConfigFile::read(&big).unwrap_err();
    assert!(matches!(err, ConfigError::TooLarge { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "configuration file {} is larger than the 16777216-byte limit",
            big.display()
        )
    );

    let latin1 = tree.path("latin1.json");
    std::fs::write(&latin1, b"{\"McpApps\": {\"Allow\": [\"caf\xe9\"]}}").unwrap();
    let err = ConfigFile::read(&latin1).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert!(
        err.to_string().contains("not valid UTF-8 (at byte 27)"),
        "{err}"
    );
}
