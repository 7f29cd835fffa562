//! What `deploy/` ships and what running behind a balancer needs of `serve`: the replica's
//! name from the configuration, the probes, refused public origins, and configuration files
//! in `deploy/` that the gateway reads without a complaint.

use std::path::Path;
use std::process::Stdio;

use mcpapp_testkit::{PATIENCE, bin, eventually_blocking};
use serde_json::json;

use crate::{Tree, gateway, http_get, stderr, stdout};

/// The repository's root (two levels above this crate).
fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
}

#[test]
fn serve_names_its_replica_and_answers_the_probes_without_the_token() {
    let tree = Tree::new();
    tree.write(
        "apps/one/openclaw.mcpapp.json",
        &json!({"id": "one", "command": bin("fixture-app"), "arguments": ["stdio"]}).to_string(),
    );
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"]},
            "Gateway": {"ReplicaName": "replica-7", "AuthToken": "t0ken"}}"#,
    );
    let crate::Started { mut child, url, .. } =
        crate::start_serve(crate::gateway_command(), tree.root(), &[], Stdio::null());

    let (head, body) = http_get(&format!("{url}/healthz"));
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("\r\nmcpapp-replica: replica-7"), "{head}");
    assert_eq!(body, r#"{"status":"ok"}"#);
    let (head, _) = http_get(&format!("{url}/apps"));
    assert!(head.starts_with("http/1.1 401"), "{head}");
    assert!(head.contains("\r\nmcpapp-replica: replica-7"), "{head}");
    // Ready once the one app has settled (polled, as a probe would be).
    let (mut head, mut body) = (String::new(), String::new());
    eventually_blocking(PATIENCE, || {
        (head, body) = http_get(&format!("{url}/readyz"));
        assert!(
            head.starts_with("http/1.1 200") || head.starts_with("http/1.1 503"),
            "{head}"
        );
        head.starts_with("http/1.1 200")
    });
    assert!(head.starts_with("http/1.1 200"), "never ready: {body}");
    assert_eq!(
        body,
        r#"{"status":"ready","apps":1,"needsAuthorization":0}"#
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn serve_refuses_public_origins_that_are_not_origins() {
    for (settings, expected) in [
        (
            r#"{"PublicOrigin": "mcpapp.example.com"}"#,
            "Gateway.PublicOrigin 'mcpapp.example.com' is not an origin",
        ),
        (
            r#"{"SandboxOrigin": "ftp://sandbox.example.com"}"#,
            "Gateway.SandboxOrigin 'ftp://sandbox.example.com' is not an origin",
        ),
        (
            r#"{"ReplicaName": ""}"#,
            "Gateway.ReplicaName '' is not usable: it is empty",
        ),
    ] {
        let tree = Tree::new();
        tree.write(
            "appsettings.json",
            &format!(r#"{{"McpApps": {{"Enabled": true}}, "Gateway": {settings}}}"#),
        );
        let output = gateway(
            tree.root(),
            &[
                "serve",
                "--config",
                "appsettings.json",
                "--bind",
                "127.0.0.1:0",
            ],
        );
        assert!(!output.status.success(), "{settings}");
        assert!(stderr(&output).contains(expected), "{}", stderr(&output));
    }
}

/// The `appsettings.json` block of `deploy/kubernetes/configmap.yaml`, dedented.
fn configmap_settings() -> String {
    let text =
        std::fs::read_to_string(repo_root().join("deploy/kubernetes/configmap.yaml")).unwrap();
    let (_, block) = text.split_once("appsettings.json: |\n").unwrap();
    block
        .lines()
        .take_while(|line| line.is_empty() || line.starts_with("    "))
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_shipped_configurations_have_only_known_keys() {
    let tree = Tree::new();
    let demo = std::fs::read_to_string(repo_root().join("deploy/demo/appsettings.json")).unwrap();
    for (name, text) in [
        ("demo.json", demo),
        ("configmap.json", configmap_settings()),
    ] {
        tree.write(name, &text);
        let output = gateway(tree.root(), &["discover", "--config", name, "--json"]);
        assert!(output.status.success(), "{name}: {}", stderr(&output));
        let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        let diagnostics = report["diagnostics"].to_string();
        assert!(
            !diagnostics.contains("unknown key"),
            "{name}: {diagnostics}"
        );
        assert!(!diagnostics.contains("error"), "{name}: {diagnostics}");
    }
    let manifest = repo_root().join("deploy/demo/grocery/openclaw.mcpapp.json");
    let output = gateway(tree.root(), &["validate", &manifest.display().to_string()]);
    assert!(output.status.success(), "{}", stdout(&output));
}
