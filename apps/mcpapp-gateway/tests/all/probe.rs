//! The probe start of an install runs the new app in the sandbox `serve` would give it: a
//! bundle of the tiny node server that reports, in the UI resource of a tool, how it was
//! confined when it started (its `NoNewPrivs` and `Seccomp` lines, and whether it could read a
//! file beside the configuration); the probe records that resource in the manifest. Through
//! `install`, with a grant given at install time, under `enforce` on a kernel that lacks what
//! the policy needs, and through a running `serve`'s "Add apps" routes. These tests fail, never
//! skip, on a kernel without what the default policy needs.

use std::time::Duration;

use mcpapp_testkit::{TinyBundle, eventually_blocking};
use serde_json::{Value, json};

use crate::install::{cli, ok};
use crate::serve::{get_with_token, post, serve_as, write_settings};
use crate::{Tree, stderr, stdout};

const TOKEN: &str = "probe-token-value";

/// What the tiny server reports when the default sandbox confines it: `no_new_privs`, a
/// seccomp filter, and the file beside the configuration out of reach.
const CONFINED: &str = "ui://tiny/confinement/nnp-1/seccomp-2/read-EACCES";

/// A tree with a configuration (a state directory of its own, `mcp_apps` merged into
/// `McpApps`), a private file beside it, a folder of notes, and `confined.mcpb`: the tiny node
/// server started with `--confinement FILE`.
fn tree(mcp_apps: &Value, file: &str) -> Tree {
    let tree = Tree::new();
    let section = json!({
        "Enabled": true,
        "DiscoveryPaths": ["apps"],
        "SecretsFile": "secrets/secrets.json",
        "StateDirectory": "state",
        "Supervision": {"HealthCheckIntervalMs": 0, "AutoRestart": false},
    });
    write_settings(&tree, section, mcp_apps, TOKEN);
    tree.write("private.txt", "not for apps\n");
    tree.write("notes/todo.txt", "buy milk\n");
    TinyBundle::new("confined")
        .description("Says how it was confined")
        .args(&["--confinement", &tree.path(file).display().to_string()])
        .write(&tree.path("confined.mcpb"));
    tree
}

/// The UI resource the probe recorded in the installed manifest.
fn recorded(tree: &Tree) -> Value {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(tree.path("apps/confined/openclaw.mcpapp.json")).unwrap(),
    )
    .unwrap();
    manifest["uiResourceUri"].clone()
}

#[test]
fn the_probe_start_of_an_install_is_confined_by_the_sandbox() {
    let tree = tree(&json!({}), "private.txt");
    let out = ok(&cli(
        &tree,
        &[
            "install",
            "confined.mcpb",
            "--yes",
            "--config",
            "appsettings.json",
        ],
    ));
    assert!(
        out.contains(&format!(
            "it started, with 4 tools and an MCP App view ({CONFINED})"
        )),
        "{out}"
    );
    assert_eq!(recorded(&tree), CONFINED);
    // Its HOME and TMPDIR were the state folder serve gives it, under McpApps.StateDirectory.
    assert!(tree.path("state/apps/confined").is_dir());
}

#[test]
fn grants_given_at_install_time_apply_to_the_probe_start() {
    let tree = tree(&json!({}), "notes/todo.txt");
    let notes = format!("read={}", tree.path("notes").display());
    let out = ok(&cli(
        &tree,
        &[
            "install",
            "confined.mcpb",
            "--grant",
            &notes,
            "--yes",
            "--config",
            "appsettings.json",
        ],
    ));
    // Confined, and the granted folder open to it before the grant is even recorded.
    assert_eq!(
        recorded(&tree),
        "ui://tiny/confinement/nnp-1/seccomp-2/read-ok",
        "{out}"
    );
    assert!(
        out.contains("recorded in appsettings.json under McpApps.Entries.confined.Isolation"),
        "{out}"
    );
}

#[test]
fn under_enforce_a_kernel_without_what_the_policy_needs_fails_the_install_naming_the_setting() {
    let tree = tree(&json!({"Isolation": {"Mode": "enforce"}}), "private.txt");
    // The kernel as one without Landlock: the sandbox refuses, as it would under serve.
    #[allow(clippy::disallowed_methods)]
    let output = std::process::Command::new(crate::GATEWAY)
        .args([
            "install",
            "confined.mcpb",
            "--yes",
            "--config",
            "appsettings.json",
        ])
        .current_dir(tree.root())
        .env_remove("RUST_LOG")
        .env(mcpapp_sandbox::ASSUME_ABI_ENV, "0")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{}\n{said}", stdout(&output));
    assert!(
        said.contains("the installed app 'confined' did not start: isolation mode enforce needs what this system lacks"),
        "{said}"
    );
    assert!(said.contains("McpApps.Isolation.Mode"), "{said}");
    assert!(
        said.contains("McpApps.Entries.confined.Isolation.Mode"),
        "{said}"
    );
    // Nothing of the failed install is left.
    assert!(!tree.path("apps/confined").exists());
}

#[test]
fn the_add_apps_view_of_a_running_gateway_probes_in_its_sandbox() {
    let tree = tree(&json!({}), "private.txt");
    let served = serve_as(&tree, &[("MCPAPP_TOKEN", TOKEN)], false);
    let source = tree.path("confined.mcpb").display().to_string();
    let (_, plan) = post(
        &format!("{}/installer/plan", served.url),
        Some(TOKEN),
        None,
        &json!({"source": source}).to_string(),
    );
    let plan: Value = serde_json::from_str(&plan).unwrap_or_else(|_| panic!("{plan}"));
    let (_, job) = post(
        &format!("{}/installer/jobs", served.url),
        Some(TOKEN),
        None,
        &json!({"planId": plan["planId"], "values": {}}).to_string(),
    );
    let job: Value = serde_json::from_str(&job).unwrap_or_else(|_| panic!("{job}"));
    let url = format!(
        "{}/installer/jobs/{}",
        served.url,
        job["job"].as_str().unwrap()
    );
    let mut state = Value::Null;
    let ended = eventually_blocking(Duration::from_secs(60), || {
        state = serde_json::from_str(&get_with_token(&url, Some(TOKEN)).1).unwrap_or_default();
        state["state"] != "running" && !state.is_null()
    });
    assert!(ended, "{state}");
    assert_eq!(state["state"], "done", "{state}");
    assert_eq!(state["result"]["hasUi"], true, "{state}");
    assert_eq!(recorded(&tree), CONFINED);
}
