//! `mcpapp-gateway serve`: starts, serves, and on SIGTERM stops every app it started.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcpapp_testkit::{bin, children_of, live_in_groups};
use serde_json::json;

use crate::{GATEWAY, Tree};

/// Reads one HTTP/1.1 response body from a loopback URL (a `Connection: close` GET).
fn get(url: &str) -> String {
    use std::io::Write;
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn serve_runs_apps_and_stops_them_all_on_sigterm() {
    let tree = Tree::new();
    let fixture = bin("fixture-app");
    for id in ["one", "two"] {
        tree.write(
            &format!("apps/{id}/openclaw.mcpapp.json"),
            &json!({"id": id, "command": fixture, "arguments": ["stdio"], "toolNamePrefix": format!("{id}.")}).to_string(),
        );
    }
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"], "Supervision": {"HealthCheckIntervalMs": 0}}}"#,
    );
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let mut child = Command::new(GATEWAY)
        .args([
            "serve",
            "--config",
            "appsettings.json",
            "--bind",
            "127.0.0.1:0",
        ])
        .current_dir(tree.root())
        .env_remove("RUST_LOG")
        .env_remove("MCPAPP_MODEL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let sandbox = lines.next().unwrap().unwrap();
    assert!(
        sandbox.starts_with("sandbox on http://127.0.0.1:"),
        "{sandbox}"
    );

    let mut apps = serde_json::Value::Null;
    assert!(
        wait_until(Duration::from_secs(60), || {
            apps = serde_json::from_str(&get(&format!("{url}/apps"))).unwrap_or_default();
            apps["apps"]
                .as_array()
                .is_some_and(|a| a.len() == 2 && a.iter().all(|a| a["lifecycle"] == "Running"))
        }),
        "{apps}"
    );
    let detail: serde_json::Value = serde_json::from_str(&get(&format!("{url}/apps/one"))).unwrap();
    let registered = detail["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["registeredName"] == "one.echo");
    assert!(
        registered
            || wait_until(Duration::from_secs(30), || get(&format!("{url}/apps/one"))
                .contains("\"one.echo\""))
    );

    // Each app leads its own process group (its pid); remember them to check nothing survives.
    let gateway_pid = child.id();
    let groups = children_of(gateway_pid);
    assert_eq!(groups.len(), 2, "the gateway should have two children");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(gateway_pid).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        wait_until(Duration::from_secs(10), || live_in_groups(&groups)
            .is_empty()),
        "{:?}",
        live_in_groups(&groups)
    );
}

#[test]
fn serve_refuses_a_remote_address_without_a_token() {
    let tree = Tree::new();
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(GATEWAY)
        .args(["serve", "--bind", "0.0.0.0:0", "--path", "apps"])
        .current_dir(tree.root())
        .env_remove("MCPAPP_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without an auth token"),
        "{stderr}"
    );
}

#[test]
fn serve_refuses_a_zero_connection_limit_naming_the_key_and_position() {
    let tree = Tree::new();
    tree.write(
        "appsettings.json",
        "{\n  \"McpApps\": {\"Enabled\": true},\n  \"Gateway\": {\n    \"MaxConnections\": 0\n  }\n}\n",
    );
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(GATEWAY)
        .args([
            "serve",
            "--config",
            "appsettings.json",
            "--bind",
            "127.0.0.1:0",
        ])
        .current_dir(tree.root())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("appsettings.json:4:23"), "{stderr}");
    assert!(stderr.contains("Gateway.MaxConnections"), "{stderr}");
    assert!(stderr.contains("nonzero"), "{stderr}");
}
