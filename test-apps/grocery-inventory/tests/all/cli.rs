//! The command line and the manifests shipped with the app.

use std::path::Path;
use std::process::Stdio;

use mcpapp_manifest::{Launch, McpAppManifest, Transport};
use tokio::io::AsyncReadExt as _;

use mcpapp_testkit::within;

use crate::support::{app_command, start_http};

#[tokio::test]
async fn http_prints_exactly_one_stdout_line_and_stdio_prints_nothing() {
    // start_http asserts the shape of the line; the index page proves it was listening.
    let app = start_http(&[]).await;
    let index = within("GET /", reqwest::get(format!("{}/", app.base_url)))
        .await
        .unwrap();
    assert_eq!(index.status(), 200);
    assert!(index.text().await.unwrap().contains("/mcp"));

    // stdio with stdin closed: the handshake never happens, nothing reaches stdout.
    let output = within(
        "grocery-inventory stdio with closed stdin",
        app_command(&["stdio"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output(),
    )
    .await
    .unwrap();
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
    assert!(!output.status.success(), "no client means no session");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("MCP handshake over stdio failed"),
        "{stderr}"
    );
}

#[tokio::test]
async fn bad_arguments_fail_with_a_clear_message() {
    for (args, needle) in [
        (
            vec!["http", "--bind", "not-an-address"],
            "cannot listen on not-an-address",
        ),
        (
            vec!["--csp-connect-domain", "nope", "stdio"],
            "--csp-connect-domain \"nope\" is not an origin",
        ),
        (vec!["ftp"], "unrecognized subcommand 'ftp'"),
    ] {
        let mut child = app_command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .await
            .unwrap();
        let status = within("the process to exit", child.wait()).await.unwrap();
        assert!(!status.success(), "{args:?} should fail");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn manifests_parse_and_validate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let http =
        McpAppManifest::parse(&std::fs::read_to_string(root.join("openclaw.mcpapp.json")).unwrap())
            .unwrap();
    assert!(http.findings.is_empty(), "{:?}", http.findings);
    let spec = http.manifest.validate().unwrap();
    assert_eq!(spec.id.as_str(), "grocery-inventory");
    assert_eq!(spec.launch.transport(), Transport::Http);
    assert_eq!(spec.tool_name_prefix, "grocery.");
    assert!(spec.has_ui);
    assert_eq!(
        spec.ui_resource_uri.as_deref(),
        Some("ui://grocery/store-dashboard.html")
    );
    assert!(
        http.manifest
            .capabilities
            .iter()
            .any(|c| c == "completions")
    );

    let stdio = McpAppManifest::parse(
        &std::fs::read_to_string(root.join("stdio/openclaw.mcpapp.json")).unwrap(),
    )
    .unwrap();
    assert!(stdio.findings.is_empty(), "{:?}", stdio.findings);
    let spec = stdio.manifest.validate().unwrap();
    assert_eq!(spec.id.as_str(), "grocery-inventory-stdio");
    match spec.launch {
        Launch::Stdio {
            command, arguments, ..
        } => {
            assert_eq!(command, "grocery-inventory");
            assert_eq!(arguments, ["stdio"]);
        }
        other => panic!("expected stdio, got {other:?}"),
    }
    assert_eq!(spec.tool_name_prefix, "grocery.");
}
