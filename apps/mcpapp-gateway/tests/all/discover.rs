//! `mcpapp-gateway discover` and `schema`.

use serde_json::{Value, json};

use crate::{Tree, gateway, stderr, stdout};

fn discover_json(tree: &Tree, args: &[&str]) -> Value {
    let mut all = vec!["discover", "--json"];
    all.extend_from_slice(args);
    let output = gateway(tree.root(), &all);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_str(&stdout(&output)).unwrap()
}

#[test]
fn discover_json_prints_the_contract() {
    let tree = Tree::new();
    tree.write(
        "apps/grocery/openclaw.mcpapp.json",
        r#"{"id":"grocery-inventory","name":"Grocery","version":"1.0.0","transport":"Streamable-HTTP",
            "url":"http://127.0.0.1:5001/mcp","comand":"x"}"#,
    );
    tree.write(
        "apps/broken/openclaw.mcpapp.json",
        "{\n  \"id\": \"broken\",\n  \"transport\": \"sse\"\n}",
    );
    tree.write("apps/garbage/openclaw.mcpapp.json", "{ nope");
    let report = discover_json(&tree, &["--path", "apps", "--path", "missing"]);

    let apps = report["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 2);
    let keys: Vec<&str> = apps[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "version",
            "transport",
            "manifestPath",
            "rootPath",
            "lifecycle",
            "isValid",
            "validationErrors",
            "warnings"
        ]
    );
    let root = tree.root().canonicalize().unwrap();
    let broken = &apps[0];
    assert_eq!(broken["id"], "broken");
    assert_eq!(broken["lifecycle"], "Discovered");
    assert_eq!(broken["isValid"], false);
    assert_eq!(broken["transport"], "sse");
    assert!(
        broken["validationErrors"][0]
            .as_str()
            .unwrap()
            .contains("legacy HTTP+SSE")
    );
    let grocery = &apps[1];
    assert_eq!(
        grocery,
        &json!({
            "id": "grocery-inventory",
            "name": "Grocery",
            "version": "1.0.0",
            "transport": "http",
            "manifestPath": root.join("apps/grocery/openclaw.mcpapp.json"),
            "rootPath": root.join("apps/grocery"),
            "lifecycle": "Validated",
            "isValid": true,
            "validationErrors": [],
            "warnings": ["line 2, column 47: unknown field `comand`; did you mean `command`?"],
        })
    );

    let diagnostics = report["diagnostics"].as_array().unwrap();
    for d in diagnostics {
        let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["path", "line", "column", "severity", "message"]);
        assert!(std::path::Path::new(d["path"].as_str().unwrap()).is_absolute());
    }
    let missing = diagnostics
        .iter()
        .find(|d| d["message"] == "discovery path does not exist")
        .unwrap();
    assert_eq!(
        (&missing["line"], &missing["column"], &missing["severity"]),
        (&Value::Null, &Value::Null, &json!("debug"))
    );
    let garbage = diagnostics
        .iter()
        .find(|d| {
            d["path"]
                .as_str()
                .unwrap()
                .ends_with("garbage/openclaw.mcpapp.json")
        })
        .unwrap();
    assert_eq!(
        (&garbage["line"], &garbage["column"], &garbage["severity"]),
        (&json!(1), &json!(3), &json!("error"))
    );
}

#[test]
fn discover_reads_a_config_file_and_resolves_paths_against_its_folder() {
    let tree = Tree::new();
    tree.write(
        "etc/apps/a/openclaw.mcpapp.json",
        r#"{"id":"a","command":"x"}"#,
    );
    tree.write(
        "etc/apps/b/openclaw.mcpapp.json",
        r#"{"id":"b","command":"x"}"#,
    );
    tree.write(
        "etc/appsettings.json",
        r#"{ // comments are fine
            "OpenClaw": { "McpApps": { "enabled": true, "discoveryPaths": ["./apps"], "deny": ["b"] } } }"#,
    );
    // Run from elsewhere: the config's folder is the base, not the current folder.
    std::fs::create_dir_all(tree.path("elsewhere")).unwrap();
    let output = gateway(
        &tree.path("elsewhere"),
        &["discover", "--json", "--config", "../etc/appsettings.json"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let states: Vec<(&str, &str)> = report["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_str().unwrap(), a["lifecycle"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("a", "Validated"), ("b", "Disabled")]);
}

#[test]
fn a_config_without_enabled_keeps_apps_off_and_warns() {
    let tree = Tree::new();
    tree.write("apps/a/openclaw.mcpapp.json", r#"{"id":"a","command":"x"}"#);
    let config = tree.write("c.json", r#"{"McpApps": {"DiscoveryPaths": ["apps"]}}"#);
    let report = discover_json(&tree, &["--config", config.to_str().unwrap()]);
    assert_eq!(report["apps"], json!([]));
    let messages: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("`McpApps.Enabled` is not set")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("MCP Apps are disabled")),
        "{messages:?}"
    );
}

#[test]
fn without_a_config_apps_are_enabled_and_mcpapps_is_scanned() {
    let tree = Tree::new();
    tree.write(
        "mcpapps/a/openclaw.mcpapp.json",
        r#"{"id":"default-path-app","command":"x"}"#,
    );
    let output = gateway(tree.root(), &["discover"]);
    assert!(output.status.success());
    let table = stdout(&output);
    assert!(table.lines().next().unwrap().starts_with("ID"), "{table}");
    assert!(
        table.contains("default-path-app") && table.contains("Validated"),
        "{table}"
    );
    assert!(table.contains("1 app found, 1 ready to run"), "{table}");
}

#[test]
fn an_unusable_config_exits_2_with_the_reason() {
    let tree = Tree::new();
    let bad = tree.write(
        "bad.json",
        "{\n  \"McpApps\": {\n    \"Enabled\": yes\n  }\n}",
    );
    let output = gateway(tree.root(), &["discover", "--config", "bad.json"]);
    assert_eq!(output.status.code(), Some(2));
    let canonical = bad.canonicalize().unwrap();
    assert!(
        stderr(&output).contains(&format!("{}:3:16:", canonical.display())),
        "{}",
        stderr(&output)
    );

    tree.write(
        "pattern.json",
        r#"{"McpApps": {"Enabled": true, "Allow": ["[oops"]}}"#,
    );
    let output = gateway(tree.root(), &["discover", "--config", "pattern.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("McpApps.Allow pattern '[oops'"),
        "{}",
        stderr(&output)
    );

    let output = gateway(tree.root(), &["discover", "--config", "missing.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot read configuration file"));
}

#[test]
fn schema_prints_the_committed_schemas() {
    let tree = Tree::new();
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema");
    for (arg, file) in [
        ("manifest", "manifest.schema.json"),
        ("config", "config.schema.json"),
    ] {
        let output = gateway(tree.root(), &["schema", arg]);
        assert!(output.status.success());
        assert_eq!(
            stdout(&output),
            std::fs::read_to_string(docs.join(file)).unwrap()
        );
    }
}

/// A folder nobody may read is reported and the rest is still scanned. As root the gateway
/// would read it anyway, so then it runs as `nobody` (through `setpriv`).
#[cfg(unix)]
#[test]
fn an_unreadable_folder_is_a_diagnostic_and_the_rest_is_scanned() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    tree.write("apps/a/openclaw.mcpapp.json", r#"{"id":"a","command":"x"}"#);
    tree.write(
        "apps/locked/inner/openclaw.mcpapp.json",
        r#"{"id":"locked","command":"x"}"#,
    );
    tree.write("apps/z/openclaw.mcpapp.json", r#"{"id":"z","command":"x"}"#);
    for dir in [
        tree.root().to_path_buf(),
        tree.path("apps"),
        tree.path("apps/a"),
        tree.path("apps/z"),
    ] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for file in ["apps/a/openclaw.mcpapp.json", "apps/z/openclaw.mcpapp.json"] {
        std::fs::set_permissions(tree.path(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(
        tree.path("apps/locked"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();

    let apps = tree.path("apps").display().to_string();
    let is_root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    #[allow(clippy::disallowed_methods)]
    let output = if is_root {
        std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                crate::GATEWAY,
            ])
            .args(["discover", "--json", "--path", &apps])
            .current_dir("/")
            .output()
            .expect("setpriv runs")
    } else {
        std::process::Command::new(crate::GATEWAY)
            .args(["discover", "--json", "--path", &apps])
            .output()
            .unwrap()
    };
    std::fs::set_permissions(
        tree.path("apps/locked"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let ids: Vec<&str> = report["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "z"]);
    let problem = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"].as_str().unwrap().ends_with("apps/locked"))
        .unwrap_or_else(|| panic!("no diagnostic for the locked folder: {report}"));
    assert_eq!(problem["severity"], "warning");
    assert!(
        problem["message"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{problem}"
    );
}

/// A reader that stops early (`mcpapp-gateway discover | head -1`) gets no panic.
#[test]
fn a_closed_stdout_is_not_a_crash() {
    use std::io::{BufRead, BufReader};
    let tree = Tree::new();
    for i in 0..2000 {
        tree.write(
            &format!("apps/a{i}/openclaw.mcpapp.json"),
            &format!(r#"{{"id":"a{i}","command":"x"}}"#),
        );
    }
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let mut child = std::process::Command::new(crate::GATEWAY)
        .args(["discover", "--path", "apps"])
        .current_dir(tree.root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("ID"), "{first}");
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{:?}", output.status);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("panicked"));
}
