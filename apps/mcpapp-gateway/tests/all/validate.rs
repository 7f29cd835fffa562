//! `mcpapp-gateway validate`.

use crate::{Tree, gateway, stderr, stdout};

#[test]
fn a_folder_with_a_broken_manifest_exits_1_with_path_line_column() {
    let tree = Tree::new();
    tree.write(
        "apps/good/openclaw.mcpapp.json",
        r#"{"id":"good","command":"x"}"#,
    );
    let broken = tree.write(
        "apps/broken/openclaw.mcpapp.json",
        "{\n  \"id\": \"broken\",\n  \"command\" \"x\"\n}",
    );
    let output = gateway(tree.root(), &["validate", "apps"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let lines: Vec<String> = stdout(&output).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!(
            "{}:3:13: error: ",
            broken.canonicalize().unwrap().display()
        )),
        "{}",
        lines[0]
    );
    assert!(
        stderr(&output).contains("checked 1 manifest: 1 valid"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn validation_errors_point_at_their_fields() {
    let tree = Tree::new();
    let path = tree.write(
        "bad/openclaw.mcpapp.json",
        "{\n  \"id\": \"bad id\",\n  \"transport\": \"http\",\n  \"url\": \"ftp://x\",\n  \"startupTimeoutSeconds\": 0\n}",
    );
    let output = gateway(tree.root(), &["validate", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let shown = path.display();
    let lines: Vec<String> = stdout(&output).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with(&format!(
        "{shown}:2:9: error: 'id' \"bad id\" is not a valid app id"
    )));
    assert!(lines[1].starts_with(&format!("{shown}:4:10: error: 'url' \"ftp://x\"")));
    assert!(lines[2].starts_with(&format!(
        "{shown}:5:28: error: 'startupTimeoutSeconds' is 0"
    )));
}

#[test]
fn valid_manifests_and_warnings_exit_0() {
    let tree = Tree::new();
    tree.write(
        "a/openclaw.mcpapp.json",
        r#"{"id":"a","command":"x","colour":"blue"}"#,
    );
    let output = gateway(tree.root(), &["validate", "a"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).contains(":1:25: warning: unknown field `colour`"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_missing_path_is_an_error() {
    let tree = Tree::new();
    let output = gateway(tree.root(), &["validate", "nowhere"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("nowhere: error:"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn the_committed_examples_are_valid() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mcpapps");
    let output = gateway(&examples, &["validate", "."]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("checked 2 manifests: 2 valid"),
        "{}",
        stderr(&output)
    );
}
