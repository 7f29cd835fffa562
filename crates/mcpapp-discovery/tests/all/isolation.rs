//! The sandbox settings discovery settles: a manifest's `permissions` request is granted only
//! by the operator (patterns or grants, globally or per entry) and never beyond what the
//! sandbox protects; a grant in the configuration that would expose what the sandbox protects
//! stops the configuration, naming the setting, file, line and column.

use std::path::PathBuf;

use mcpapp_discovery::{ConfigError, ConfigFile, Discovery, DiscoveryReport};
use mcpapp_manifest::{
    HostPort, IsolationConfig, IsolationMode, Lifecycle, ManifestPermissionGrants,
    McpAppEntryConfig, McpAppsConfig, NetworkAccess, NetworkGrant, Severity,
};

use crate::{Tree, enabled};

const REQUESTING: &str = r#"{
  "id": "notes",
  "command": "run-notes",
  "permissions": {
    "filesystem": {
      "read": ["~/notes"],
      "write": ["~/notes/out"]
    },
    "network": {
      "tcpPorts": [5432],
      "hosts": ["api.example.com:443"]
    }
  }
}"#;

/// Scans the tree's `apps` with `config`, the gateway's home folder being the tree's `home`.
fn scan_with_home(tree: &Tree, config: McpAppsConfig) -> DiscoveryReport {
    discovery(tree, config).expect("valid configuration").scan()
}

fn discovery(tree: &Tree, config: McpAppsConfig) -> Result<Discovery, ConfigError> {
    let home = tree.path("home").display().to_string();
    std::fs::create_dir_all(tree.path("home/notes/out")).unwrap();
    Discovery::builder(config)
        .discovery_paths(vec![tree.path("apps").display().to_string()], tree.root())
        .env_lookup(move |name| (name == "HOME").then(|| home.clone()))
        .build()
}

fn home(tree: &Tree, rel: &str) -> PathBuf {
    tree.path("home").join(rel)
}

#[test]
fn a_request_nobody_granted_makes_the_app_invalid_at_each_request() {
    let tree = Tree::new();
    let path = tree.manifest("apps/notes", REQUESTING);
    let report = scan_with_home(&tree, enabled());
    let app = report.app("notes").unwrap();
    assert!(app.spec.is_none());
    assert_eq!(app.state.lifecycle, Lifecycle::Discovered);
    assert_eq!(
        app.state.validation_errors.len(),
        4,
        "{:?}",
        app.state.validation_errors
    );
    let diagnostic = |needle: &str| {
        report
            .diagnostics
            .iter()
            .find(|d| d.message.contains(needle))
            .unwrap_or_else(|| panic!("no diagnostic with {needle}: {:#?}", report.diagnostics))
    };
    let read = diagnostic("permissions.filesystem.read[0] requests \"~/notes\"");
    assert_eq!(read.severity, Severity::Error);
    assert_eq!(read.path.as_deref(), Some(path.as_path()));
    assert_eq!((read.line, read.column), (Some(6), Some(16)));
    assert!(
        read.message
            .contains("McpApps.Isolation.AllowManifestPermissions.Read")
            && read
                .message
                .contains("McpApps.Entries.notes.Isolation.AllowManifestPermissions.Read")
            && read
                .message
                .contains("McpApps.Entries.notes.Isolation.Read"),
        "{}",
        read.message
    );
    let write = diagnostic("permissions.filesystem.write[0]");
    assert_eq!(write.line, Some(7));
    assert!(write.message.contains("AllowManifestPermissions.Write"));
    let port = diagnostic("permissions.network.tcpPorts[0] requests TCP port 5432");
    assert_eq!(port.line, Some(10));
    assert!(port.message.contains("\"tcp:5432\""), "{}", port.message);
    let host = diagnostic("permissions.network.hosts[0] requests api.example.com:443");
    assert_eq!(host.line, Some(11));
    assert!(host.message.contains("AllowManifestPermissions.Network"));
}

fn patterns(read: &[&str], write: &[&str], network: &[&str]) -> ManifestPermissionGrants {
    let list = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
    ManifestPermissionGrants {
        read: list(read),
        write: list(write),
        network: list(network),
    }
}

#[test]
fn requests_are_granted_by_global_or_entry_patterns() {
    let tree = Tree::new();
    tree.manifest("apps/notes", REQUESTING);
    let mut global = enabled();
    global.isolation.allow_manifest_permissions = patterns(
        &["~/notes", "~/notes/**"],
        &["~/notes/*"],
        &["*.example.com:443", "tcp:5432"],
    );
    let report = scan_with_home(&tree, global);
    let spec = report.app("notes").unwrap().spec.clone().expect("granted");
    let isolation = &spec.isolation;
    assert_eq!(isolation.mode, IsolationMode::Enforce);
    assert_eq!(isolation.read, [home(&tree, "notes")]);
    assert_eq!(isolation.write, [home(&tree, "notes/out")]);
    assert_eq!(
        isolation.network,
        NetworkAccess::Limited {
            tcp_ports: [5432].into(),
            hosts: [HostPort::parse("api.example.com:443").unwrap()].into(),
        }
    );
    assert_eq!(
        isolation.state_directory.as_deref(),
        Some(home(&tree, ".local/state/mcpapp").as_path())
    );

    // The same patterns in the app's own entry; another entry's patterns grant nothing.
    let mut per_entry = enabled();
    let entry_isolation = IsolationConfig {
        allow_manifest_permissions: patterns(&["~/**"], &["~/notes/out"], &["all"]),
        ..IsolationConfig::default()
    };
    per_entry.entries.insert(
        "other".into(),
        McpAppEntryConfig {
            isolation: entry_isolation.clone(),
            ..McpAppEntryConfig::default()
        },
    );
    assert!(
        scan_with_home(&tree, per_entry.clone())
            .app("notes")
            .unwrap()
            .spec
            .is_none()
    );
    per_entry.entries.insert(
        "notes".into(),
        McpAppEntryConfig {
            isolation: entry_isolation,
            ..McpAppEntryConfig::default()
        },
    );
    let report = scan_with_home(&tree, per_entry);
    let errors = &report.app("notes").unwrap().state.validation_errors;
    // `all` does not match a request for one port or host: patterns match what is asked.
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|e| e.contains("permissions.network.")));
}

#[test]
fn the_operators_own_grants_cover_requests_and_apply_without_one() {
    let tree = Tree::new();
    tree.manifest("apps/notes", REQUESTING);
    tree.app("apps/plain", "plain");
    let mut config = enabled();
    config.isolation.network = Some(NetworkGrant(NetworkAccess::All));
    config.entries.insert(
        "notes".into(),
        McpAppEntryConfig {
            isolation: IsolationConfig {
                read: vec!["~/notes".into()],
                write: vec!["~/notes/out".into()],
                unix_sockets: Some(true),
                ..IsolationConfig::default()
            },
            ..McpAppEntryConfig::default()
        },
    );
    let report = scan_with_home(&tree, config);
    let notes = report.app("notes").unwrap().spec.clone().expect("covered");
    assert_eq!(notes.isolation.read, [home(&tree, "notes")]);
    assert_eq!(notes.isolation.write, [home(&tree, "notes/out")]);
    assert_eq!(notes.isolation.network, NetworkAccess::All);
    assert!(notes.isolation.unix_sockets);
    let plain = report.app("plain").unwrap().spec.clone().unwrap();
    assert!(plain.isolation.read.is_empty());
    assert_eq!(plain.isolation.network, NetworkAccess::All);
    assert!(!plain.isolation.unix_sockets);
}

#[test]
fn a_manifest_not_written_yet_resolves_as_a_scan_would_find_it() {
    // What `install` starts before the manifest exists: the same grants, refusals and spec.
    let tree = Tree::new();
    let manifest = mcpapp_manifest::McpAppManifest::parse(REQUESTING)
        .unwrap()
        .manifest;
    let at = tree.path("apps/notes/openclaw.mcpapp.json");
    let mut config = enabled();
    let refused = discovery(&tree, config.clone())
        .unwrap()
        .resolve_manifest(&manifest, &at);
    let app = &refused.apps[0];
    assert!(app.spec.is_none());
    assert_eq!(app.state.validation_errors.len(), 4, "{refused:?}");
    assert!(
        refused
            .diagnostics
            .iter()
            .all(|d| d.path.as_deref() == Some(at.as_path()))
    );
    assert!(!at.exists(), "nothing is written");

    config.isolation.allow_manifest_permissions = patterns(
        &["~/notes"],
        &["~/notes/out"],
        &["api.example.com:443", "tcp:5432"],
    );
    let discovery = discovery(&tree, config).unwrap();
    let resolved = discovery.resolve_manifest(&manifest, &at);
    let spec = resolved.apps[0].spec.clone().expect("granted");
    // Written as `install` writes it, a scan finds the same app.
    tree.manifest("apps/notes", &manifest.to_json_pretty());
    let scanned = discovery.scan();
    assert_eq!(Some(&spec), scanned.app("notes").unwrap().spec.as_ref());
    assert_eq!(spec.isolation.write, [home(&tree, "notes/out")]);
}

#[test]
fn a_request_for_what_the_sandbox_protects_is_refused_even_when_every_path_is_allowed() {
    let tree = Tree::new();
    tree.manifest(
        "apps/greedy",
        r#"{"id": "greedy", "command": "x", "permissions": {"filesystem": {
            "read": ["~/.ssh/id_ed25519", "/", "/etc/shadow", "~/work"]}}}"#,
    );
    let mut config = enabled();
    config.isolation.allow_manifest_permissions = patterns(&["**", "/"], &[], &[]);
    let report = scan_with_home(&tree, config);
    let app = report.app("greedy").unwrap();
    assert!(app.spec.is_none());
    let errors = &app.state.validation_errors;
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].contains("never granted: it is inside a folder of credentials"));
    assert!(errors[1].contains("never granted: it is the whole file system"));
    assert!(errors[2].contains("never granted: it holds the system's secrets"));
}

#[test]
fn isolation_off_ignores_requests_and_http_apps_get_a_warning() {
    let tree = Tree::new();
    tree.manifest("apps/notes", REQUESTING);
    tree.manifest(
        "apps/web",
        r#"{"id": "web", "transport": "http", "url": "http://127.0.0.1:1/mcp",
            "permissions": {"network": "all"}}"#,
    );
    let mut config = enabled();
    config.entries.insert(
        "notes".into(),
        McpAppEntryConfig {
            isolation: IsolationConfig {
                mode: Some(IsolationMode::Off),
                ..IsolationConfig::default()
            },
            ..McpAppEntryConfig::default()
        },
    );
    let report = scan_with_home(&tree, config);
    let notes = report
        .app("notes")
        .unwrap()
        .spec
        .clone()
        .expect("runs unconfined");
    assert_eq!(notes.isolation.mode, IsolationMode::Off);
    let web = report.app("web").unwrap();
    assert!(web.spec.is_some());
    assert!(
        web.state.warnings[0].starts_with("permissions apply only to stdio apps"),
        "{:?}",
        web.state.warnings
    );
}

/// Reads `text` as the configuration file `conf/appsettings.json` in the tree and builds a
/// discovery from it.
fn from_file(tree: &Tree, text: &str) -> Result<Discovery, ConfigError> {
    let path = tree.write("conf/appsettings.json", text);
    let file = ConfigFile::read(&path).unwrap();
    let config = file.mcp_apps().unwrap().value;
    let home = tree.path("home").display().to_string();
    std::fs::create_dir_all(tree.path("home/.ssh")).unwrap();
    Discovery::builder(config)
        .config_file(&file)
        .env_lookup(move |name| (name == "HOME").then(|| home.clone()))
        .build()
}

#[test]
fn grants_that_expose_what_the_sandbox_protects_are_configuration_errors_with_positions() {
    let tree = Tree::new();
    let state = tree.path("state").display().to_string();
    let cases: Vec<(String, &str)> = vec![
        ("\"/\"".into(), "it is the whole file system"),
        ("\"~\"".into(), "it holds the whole home folder"),
        (
            "\"~/.ssh\"".into(),
            "dot-file or dot-folder of the home folder",
        ),
        ("\"/etc\"".into(), "it is all of /etc"),
        ("\".\"".into(), "the gateway's configuration file"),
        (format!("{state:?}"), "the gateway's state directory"),
        (
            format!("\"{state}/apps/other/home\""),
            "the gateway's state directory",
        ),
        ("\"apps\"".into(), "in a discovery path"),
        ("\"apps/other\"".into(), "in a discovery path"),
        ("\"/var/tmp\"".into(), "shared temporary folder"),
        ("\"/usr/lib\"".into(), "the system's programs"),
        ("\"secrets\"".into(), "the gateway's secret store"),
    ];
    for (value, reason) in cases {
        let text = format!(
            "{{\n  \"McpApps\": {{\n    \"Enabled\": true,\n    \"DiscoveryPaths\": [\"apps\"],\n    \"SecretsFile\": \"secrets/store.json\", \"StateDirectory\": {state:?},\n    \"Entries\": {{\"notes\": {{\"Isolation\": {{\n      \"Write\": [\"data\", {value}]\n    }}}}}}\n  }}\n}}\n"
        );
        let err = from_file(&tree, &text).expect_err(&value).to_string();
        let file = tree.path("conf/appsettings.json").display().to_string();
        assert!(
            err.starts_with(&format!(
                "{file}:7:25: McpApps.Entries.notes.Isolation.Write[1] "
            )),
            "{err}"
        );
        assert!(err.contains(reason), "{value}: {err}");
    }
    // Reading is checked too, and an unset variable is named.
    let err = from_file(
        &tree,
        "{\"McpApps\": {\"Enabled\": true, \"Isolation\": {\"Read\": [\"env:NOPE_DIR\"]}}}",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("McpApps.Isolation.Read[0] \"env:NOPE_DIR\" cannot be resolved: environment variable NOPE_DIR is not set"),
        "{err}"
    );
    // What is not protected is fine, relative to the configuration's folder.
    let ok = from_file(
        &tree,
        "{\"McpApps\": {\"Enabled\": true, \"Isolation\": {\"Read\": [\"data\", \"~/work\", \"/usr/share/dict\"], \"Write\": [\"out\"]}}}",
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
    assert_eq!(ok.unwrap().config().isolation.read.len(), 3);
}

#[test]
fn a_pattern_that_is_not_a_glob_is_a_configuration_error() {
    let tree = Tree::new();
    let mut config = enabled();
    config.isolation.allow_manifest_permissions = patterns(&["[oops"], &[], &[]);
    let err = discovery(&tree, config).unwrap_err().to_string();
    assert!(
        err.starts_with("McpApps.Isolation.AllowManifestPermissions.Read pattern '[oops'"),
        "{err}"
    );
}

#[test]
fn an_interpreter_outside_the_system_folders_is_granted_with_its_app() {
    let tree = Tree::new();
    // A Python of its own (pyenv, uv) that a venv in the app's folder links to.
    let install = tree.path("pythons/3.12");
    std::fs::create_dir_all(install.join("bin")).unwrap();
    std::fs::write(install.join("bin/python3.12"), "binary").unwrap();
    let app = tree.path("apps/timer");
    std::fs::create_dir_all(app.join("venv/bin")).unwrap();
    std::os::unix::fs::symlink(install.join("bin/python3.12"), app.join("venv/bin/python"))
        .unwrap();
    tree.write(
        "apps/timer/venv/bin/timer",
        &format!("#!{}\n", app.join("venv/bin/python").display()),
    );
    tree.manifest(
        "apps/timer",
        r#"{"id": "timer", "command": "venv/bin/timer"}"#,
    );
    let report = scan_with_home(&tree, enabled());
    let spec = report.app("timer").unwrap().spec.clone().unwrap();
    assert_eq!(
        spec.isolation.execute,
        [std::fs::canonicalize(&install).unwrap()]
    );
    // An interpreter in a protected place gets no grant: here, the home folder's dot-folder.
    let hidden = tree.path("home/.tools/bin");
    std::fs::create_dir_all(&hidden).unwrap();
    std::fs::write(hidden.join("python3.12"), "binary").unwrap();
    std::fs::remove_file(app.join("venv/bin/python")).unwrap();
    std::os::unix::fs::symlink(hidden.join("python3.12"), app.join("venv/bin/python")).unwrap();
    let report = scan_with_home(&tree, enabled());
    let spec = report.app("timer").unwrap().spec.clone().unwrap();
    assert_eq!(
        spec.isolation.execute,
        [std::fs::canonicalize(hidden.join("python3.12")).unwrap()],
        "only the file, not the dot-folder"
    );
}
