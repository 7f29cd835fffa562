//! Permissions and grants at install time, end to end: an MCPB bundle whose `directory` input
//! makes it request its folder, installed with `--grant-requested` (the grant recorded in the
//! operator's hand-written configuration file, nothing else in it touched) and then reading a
//! file there under a real `serve`'s sandbox, and nothing outside it; the same bundle
//! installed without grants (invalid, the gateway naming the setting) and granted later with
//! `grant` while the gateway runs; and grants the gateway would refuse, refused before
//! anything is written.

use std::time::Duration;

use expect_test::expect;
use mcpapp_testkit::{TinyBundle, eventually_blocking};
use serde_json::{Value, json};

use crate::install::{call, cli, ok, serve, wait_for};
use crate::{Tree, get, stderr, stdout};

/// The operator's configuration, as a person writes it: comments, their own layout.
const CONFIG: &str = r#"{
  // The operator's gateway, written by hand.
  "McpApps": {
    "Enabled": true,
    "DiscoveryPaths": [ "apps" ],   // installed apps go here
    "SecretsFile": "state/secrets.json",
    "StateDirectory": "state",
    "Supervision": { "HealthCheckIntervalMs": 0, "AutoRestart": false },
    "Entries": {
      /* an app of its own */
      "notes": { "StartupTimeoutMs": 20000 }
    }
  }
}
"#;

/// A tree with [`CONFIG`], a folder of notes, a private file beside it, and `notes.mcpb`: the
/// tiny node server asking for a `directory` (its notes folder).
fn tree() -> Tree {
    let tree = Tree::new();
    tree.write("appsettings.json", CONFIG);
    tree.write("notes/todo.txt", "buy milk\n");
    tree.write("private.txt", "not for apps\n");
    TinyBundle::new("notes")
        .description("Reads your notes")
        .args(&["${user_config.notes_dir}"])
        .user_config(
            json!({"notes_dir": {"type": "directory", "title": "Notes folder", "required": true}}),
        )
        .write(&tree.path("notes.mcpb"));
    tree
}

fn config(tree: &Tree) -> String {
    std::fs::read_to_string(tree.path("appsettings.json")).unwrap()
}

/// `install notes.mcpb` with `notes_dir` set to the notes folder, `--yes`, `grant`'s options,
/// and (when `config`) `--config appsettings.json`.
fn install(tree: &Tree, grant: &[&str], config: bool) -> std::process::Output {
    let notes = format!("notes_dir={}", tree.path("notes").display());
    let mut args = vec!["install", "notes.mcpb", "--set", &notes, "--yes"];
    args.extend(grant);
    if config {
        args.extend(["--config", "appsettings.json"]);
    }
    cli(tree, &args)
}

/// `grant notes --requested --config appsettings.json`, which must succeed; its output.
fn grant_requested(tree: &Tree) -> String {
    ok(&cli(
        tree,
        &[
            "grant",
            "notes",
            "--requested",
            "--config",
            "appsettings.json",
        ],
    ))
}

/// `read_file` through the running gateway: the file's text, or the error the app got.
fn read_through(served: &crate::Served, tree: &Tree, path: &std::path::Path) -> Value {
    call(
        served,
        tree,
        "notes",
        "read_file",
        &json!({"path": path.display().to_string()}),
    )["structuredContent"]
        .clone()
}

#[test]
fn a_granted_folder_is_recorded_in_the_configuration_and_readable_in_the_sandbox() {
    let tree = tree();
    let notes = tree.path("notes").display().to_string();
    // A configuration that holds a token is kept private; the rewrite keeps it so.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            tree.path("appsettings.json"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }
    let out = ok(&install(&tree, &["--grant-requested"], true));
    let shown = out.replace(&tree.root().display().to_string(), "<TREE>");
    assert!(
        shown.contains("  write=<TREE>/notes  (input notes_dir, a folder the app works in)"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "recorded in appsettings.json under McpApps.Entries.notes.Isolation:\n  write=<TREE>/notes"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("every permission notes requests is granted"),
        "{shown}"
    );
    // Exactly the grant was added; every other byte is the operator's.
    expect![[r#"
        {
          // The operator's gateway, written by hand.
          "McpApps": {
            "Enabled": true,
            "DiscoveryPaths": [ "apps" ],   // installed apps go here
            "SecretsFile": "state/secrets.json",
            "StateDirectory": "state",
            "Supervision": { "HealthCheckIntervalMs": 0, "AutoRestart": false },
            "Entries": {
              /* an app of its own */
              "notes": {
                "StartupTimeoutMs": 20000,
                "Isolation": {
                  "Write": ["<TREE>/notes"]
                }
              }
            }
          }
        }
    "#]]
    .assert_eq(&config(&tree).replace(&tree.root().display().to_string(), "<TREE>"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tree.path("appsettings.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // No temporary file is left beside it.
    let beside: Vec<String> = std::fs::read_dir(tree.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("appsettings"))
        .collect();
    assert_eq!(beside, ["appsettings.json"]);
    // The request belongs to the app: it is in its manifest; the grant is not in its folder.
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(tree.path("apps/notes/openclaw.mcpapp.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["permissions"],
        json!({"filesystem": {"write": [notes]}})
    );
    assert_eq!(
        mcpapp_testkit::files_containing(&tree.path("apps"), "Isolation"),
        Vec::<std::path::PathBuf>::new()
    );

    // Under a real gateway the app runs sandboxed: the granted folder is open, the rest not.
    let served = serve(&tree);
    wait_for(&served, "notes", "Running");
    let read = read_through(&served, &tree, &tree.path("notes/todo.txt"));
    assert_eq!(read["text"], "buy milk\n", "{read}");
    let denied = read_through(&served, &tree, &tree.path("private.txt"));
    assert_eq!(denied["error"], "EACCES", "{denied}");
}

#[test]
fn without_grants_the_app_is_invalid_until_granted_and_a_running_gateway_applies_the_grant() {
    let tree = tree();
    let before = config(&tree);
    let out = ok(&install(&tree, &[], true));
    assert!(out.contains("Granted: nothing."), "{out}");
    assert!(
        out.contains("notes is invalid and does not run until these are granted"),
        "{out}"
    );
    assert!(
        out.contains("grant it in McpApps.Entries.notes.Isolation.Write"),
        "{out}"
    );
    assert!(
        out.contains(
            "grant them with: mcpapp-gateway grant notes --requested --config appsettings.json"
        ),
        "{out}"
    );
    assert_eq!(config(&tree), before, "nothing granted, nothing written");

    // The gateway says the same, at the request, and does not start the app.
    let served = serve(&tree);
    let mut detail = Value::Null;
    let said = eventually_blocking(Duration::from_secs(30), || {
        detail =
            serde_json::from_str(&get(&format!("{}/apps/notes", served.url))).unwrap_or_default();
        detail["validationErrors"]
            .to_string()
            .contains("McpApps.Entries.notes.Isolation.Write")
    });
    assert!(said, "{detail}");
    assert_ne!(detail["lifecycle"], "Running", "{detail}");

    // Granted later while it runs: the reload applies it.
    let out = grant_requested(&tree);
    assert!(out.contains("(not granted)"), "{out}");
    assert!(
        out.contains("recorded in appsettings.json under McpApps.Entries.notes.Isolation"),
        "{out}"
    );
    wait_for(&served, "notes", "Running");
    let read = read_through(&served, &tree, &tree.path("notes/todo.txt"));
    assert_eq!(read["text"], "buy milk\n", "{read}");

    // Granting again changes nothing.
    let again = config(&tree);
    let out = grant_requested(&tree);
    assert!(out.contains("nothing granted"), "{out}");
    assert_eq!(config(&tree), again);
}

#[test]
fn grants_the_gateway_would_refuse_are_refused_before_anything_is_written() {
    let tree = tree();
    let before = config(&tree);
    let refused = |output: &std::process::Output| {
        assert_eq!(output.status.code(), Some(2), "{}", stdout(output));
        assert!(!tree.path("apps").exists() && !tree.path("mcpapps").exists());
        assert_eq!(config(&tree), before);
        stderr(output).replace(&tree.root().display().to_string(), "<TREE>")
    };

    let root = install(&tree, &["--grant", "read=/"], true);
    let said = refused(&root);
    assert!(
        said.contains(
            r#"grant read=/ is refused: McpApps.Entries.notes.Isolation.Read[0] "/" is refused: it is the whole file system; nothing was installed or written"#
        ),
        "{said}"
    );
    let own = install(&tree, &["--grant", "write=."], true);
    let said = refused(&own);
    assert!(
        said.contains(r#"grant write=<TREE> is refused: McpApps.Entries.notes.Isolation.Write[0] "<TREE>" is refused: it holds the gateway's configuration file"#),
        "{said}"
    );
    let apps = install(&tree, &["--grant", "read=apps/other"], true);
    let said = refused(&apps);
    assert!(
        said.contains("it is in a discovery path, among apps' folders"),
        "{said}"
    );

    // Without a configuration file there is nowhere to keep grants: say where they go.
    let nowhere = install(&tree, &["--grant-requested"], false);
    let said = refused(&nowhere);
    assert!(
        said.contains("grants are kept in the gateway's configuration file (McpApps.Entries.notes.Isolation), never in the app's folder, and no --config names one"),
        "{said}"
    );
    assert!(said.contains(r#""Write": ["<TREE>/notes"]"#), "{said}");
}
