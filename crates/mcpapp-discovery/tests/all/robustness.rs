//! Hostile trees: link loops, dangling links, unreadable and oversized files. The scan
//! reports each and carries on with the rest of the root.

use mcpapp_manifest::{McpAppsConfig, Severity};

use crate::{Tree, enabled, ids, scan};

#[cfg(unix)]
#[test]
fn symlink_loops_are_reported_and_the_rest_is_scanned() {
    let tree = Tree::new();
    tree.app("apps/a/app", "before-loop");
    std::os::unix::fs::symlink(tree.path("apps"), tree.path("apps/a/back-to-top")).unwrap();
    std::os::unix::fs::symlink(tree.path("apps/z/self"), tree.path("apps/z-self")).ok();
    tree.app("apps/z/app", "after-loop");
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(ids(&report), ["before-loop", "after-loop"]);
    let loops: Vec<_> = report
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("symbolic link loop"))
        .collect();
    assert_eq!(loops.len(), 1, "{:?}", report.diagnostics);
    assert_eq!(loops[0].severity, Severity::Warning);
}

#[cfg(unix)]
#[test]
fn followed_links_reach_apps_outside_the_root() {
    let tree = Tree::new();
    tree.app("elsewhere/linked", "linked-app");
    std::fs::create_dir_all(tree.path("apps")).unwrap();
    std::os::unix::fs::symlink(tree.path("elsewhere"), tree.path("apps/link")).unwrap();
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(ids(&report), ["linked-app"]);
    assert_eq!(
        report.apps[0].state.root_path,
        tree.path("apps/link/linked")
    );
}

#[cfg(unix)]
#[test]
fn an_unresolvable_folder_link_is_reported_and_the_rest_is_scanned() {
    let tree = Tree::new();
    tree.app("apps/a", "a");
    std::fs::create_dir_all(tree.path("apps/m")).unwrap();
    // A link that points at itself cannot be opened by anyone, root included.
    std::os::unix::fs::symlink(tree.path("apps/m/self"), tree.path("apps/m/self")).unwrap();
    tree.app("apps/z", "z");
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(ids(&report), ["a", "z"]);
    let problem = report
        .diagnostics
        .iter()
        .find(|d| d.path.as_deref() == Some(tree.path("apps/m/self").as_path()))
        .unwrap_or_else(|| panic!("no diagnostic for the link: {:?}", report.diagnostics));
    assert_eq!(problem.severity, Severity::Warning);
    assert!(
        problem.message.starts_with("cannot read"),
        "{}",
        problem.message
    );
}

#[test]
fn oversized_and_non_utf8_manifests_are_skipped_with_errors() {
    let tree = Tree::new();
    let big = format!(
        r#"{{"id":"big","command":"x","metadata":{{"pad":"{}"}}}}"#,
        "x".repeat(1_100_000)
    );
    tree.manifest("apps/big", &big);
    let bin = tree.path("apps/bin/openclaw.mcpapp.json");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, b"{\"id\":\"\xff\xfe\"}").unwrap();
    tree.app("apps/ok", "ok");
    let report = scan(&tree, enabled(), &["apps"]);
    assert_eq!(ids(&report), ["ok"]);
    let messages: Vec<_> = report
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("byte limit")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("not valid UTF-8")),
        "{messages:?}"
    );
}

#[test]
fn a_discovery_path_may_name_a_manifest_file_directly() {
    let tree = Tree::new();
    tree.write("custom-name.json", r#"{"id":"direct","command":"x"}"#);
    tree.write("notes.txt", "not json");
    let report = scan(&tree, enabled(), &["custom-name.json", "notes.txt"]);
    assert_eq!(ids(&report), ["direct"]);
    assert_eq!(report.apps[0].state.root_path, tree.root());
    assert_eq!(report.diagnostics.len(), 1);
    assert_eq!(report.diagnostics[0].severity, Severity::Error);
    assert_eq!(
        report.diagnostics[0].path.as_deref(),
        Some(tree.path("notes.txt").as_path())
    );
}

/// Runs `scan` on another thread and fails the test if it has not finished within a generous
/// bound: a scan that opened a named pipe would block forever.
fn finishes<T: Send + 'static>(scan: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(scan());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the scan finished")
}

#[cfg(unix)]
#[test]
fn manifest_names_that_are_not_files_are_reported_and_never_opened() {
    use std::os::unix::fs::symlink;

    let tree = Tree::new();
    tree.app("apps/a-ok", "ok");
    let fifo = tree.path("apps/fifo/openclaw.mcpapp.json");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A directory with the name; an app inside it is still found.
    tree.app("apps/folder/openclaw.mcpapp.json", "inside");
    let socket = tree.path("apps/socket/openclaw.mcpapp.json");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let dangling = tree.path("apps/dangling/openclaw.mcpapp.json");
    std::fs::create_dir_all(dangling.parent().unwrap()).unwrap();
    symlink(tree.path("nowhere.json"), &dangling).unwrap();
    let to_fifo = tree.path("apps/to-fifo/openclaw.mcpapp.json");
    std::fs::create_dir_all(to_fifo.parent().unwrap()).unwrap();
    symlink(&fifo, &to_fifo).unwrap();
    let to_file = tree.path("apps/to-file/openclaw.mcpapp.json");
    std::fs::create_dir_all(to_file.parent().unwrap()).unwrap();
    symlink(tree.app("elsewhere", "linked"), &to_file).unwrap();

    let report = finishes({
        let root = tree.path("apps");
        move || {
            mcpapp_discovery::Discovery::builder(enabled())
                .discovery_paths(vec![root.display().to_string()], &root)
                .build()
                .unwrap()
                .scan()
        }
    });
    assert_eq!(ids(&report), ["ok", "inside", "linked"]);
    let message = |path: &std::path::Path| {
        let found: Vec<_> = report
            .diagnostics
            .iter()
            .filter(|d| d.path.as_deref() == Some(path))
            .collect();
        assert_eq!(found.len(), 1, "{path:?}: {:?}", report.diagnostics);
        assert_eq!(found[0].severity, Severity::Warning);
        found[0].message.clone()
    };
    assert_eq!(
        message(&fifo),
        "is a named pipe (FIFO), not a file; skipped"
    );
    assert_eq!(
        message(&tree.path("apps/folder/openclaw.mcpapp.json")),
        "is a directory, not a file; skipped"
    );
    assert_eq!(message(&socket), "is a socket, not a file; skipped");
    assert_eq!(
        message(&to_fifo),
        "is a symbolic link to a named pipe (FIFO), not a file; skipped"
    );
    let text = message(&dangling);
    assert!(
        text.starts_with("is a dangling symbolic link (")
            && text.contains("nowhere.json does not exist"),
        "{text}"
    );
    assert_eq!(report.diagnostics.len(), 5, "{:?}", report.diagnostics);
}

#[cfg(unix)]
#[test]
fn a_discovery_path_naming_a_named_pipe_is_reported_and_never_opened() {
    let tree = Tree::new();
    let fifo = tree.path("pipe.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let report = finishes({
        let path = fifo.display().to_string();
        let base = tree.root().to_path_buf();
        move || {
            mcpapp_discovery::Discovery::builder(enabled())
                .discovery_paths(vec![path], base)
                .build()
                .unwrap()
                .scan()
        }
    });
    assert!(report.apps.is_empty());
    assert_eq!(report.diagnostics.len(), 1, "{:?}", report.diagnostics);
    assert_eq!(report.diagnostics[0].path.as_deref(), Some(fifo.as_path()));
    assert_eq!(
        report.diagnostics[0].message,
        "is a named pipe (FIFO), not a file; skipped"
    );
}

#[test]
fn the_manifest_size_limit_is_configurable() {
    let tree = Tree::new();
    tree.app("apps/small", "small");
    let padded = format!(
        r#"{{"id":"padded","command":"x","description":"{}"}}"#,
        "x".repeat(200)
    );
    tree.manifest("apps/padded", &padded);
    let config = McpAppsConfig {
        max_manifest_bytes: 100,
        ..enabled()
    };
    let report = scan(&tree, config, &["apps"]);
    assert_eq!(ids(&report), ["small"]);
    assert_eq!(report.diagnostics.len(), 1, "{:?}", report.diagnostics);
    assert_eq!(
        report.diagnostics[0].message,
        format!(
            "manifest is {} bytes, larger than the 100-byte limit (McpApps.MaxManifestBytes); skipped",
            padded.len()
        )
    );
    // With the default limit both are read.
    assert_eq!(ids(&scan(&tree, enabled(), &["apps"])), ["padded", "small"]);

    let zero = McpAppsConfig {
        max_manifest_bytes: 0,
        ..enabled()
    };
    let err = mcpapp_discovery::Discovery::builder(zero)
        .build()
        .unwrap_err();
    assert!(
        err.to_string().starts_with("McpApps.MaxManifestBytes is 0"),
        "{err}"
    );
}

/// `/proc` files report a length of 0 whatever they hold: the limit must hold on the bytes
/// read, not on the reported length.
#[cfg(target_os = "linux")]
#[test]
fn the_size_limit_holds_when_the_reported_length_is_wrong() {
    let status = std::path::Path::new("/proc/self/status");
    assert_eq!(std::fs::metadata(status).unwrap().len(), 0);
    let config = McpAppsConfig {
        max_manifest_bytes: 64,
        ..enabled()
    };
    let report = mcpapp_discovery::Discovery::builder(config)
        .discovery_paths(vec![status.display().to_string()], "/")
        .build()
        .unwrap()
        .scan();
    assert!(report.apps.is_empty());
    assert_eq!(report.diagnostics.len(), 1, "{:?}", report.diagnostics);
    assert_eq!(
        report.diagnostics[0].message,
        "manifest is larger than the 64-byte limit (McpApps.MaxManifestBytes); skipped"
    );
}
