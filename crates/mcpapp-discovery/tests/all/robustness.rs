//! Hostile trees: link loops, dangling links, unreadable and oversized files. The scan
//! reports each and carries on with the rest of the root.

use mcpapp_manifest::Severity;

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
