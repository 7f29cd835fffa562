//! `mcpapp-gateway serve`: starts, serves, and on SIGTERM stops every app it started.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcpapp_testkit::{PATIENCE, bin, children_of, eventually_blocking, live, live_in_groups};
use serde_json::{Value, json};

use crate::{GATEWAY, Served, Tree, get};

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
    let crate::Started {
        mut child,
        url,
        mut lines,
    } = crate::start_serve(crate::gateway_command(), tree.root(), &[], Stdio::null());
    let sandbox = lines.next().unwrap().unwrap();
    assert!(
        sandbox.starts_with("sandbox on http://127.0.0.1:"),
        "{sandbox}"
    );

    let mut apps = serde_json::Value::Null;
    assert!(
        eventually_blocking(PATIENCE, || {
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
            || eventually_blocking(PATIENCE, || get(&format!("{url}/apps/one"))
                .contains("\"one.echo\""))
    );

    // Each app leads its own process group (its pid); remember them to check nothing survives.
    let gateway_pid = child.id();
    let (keepers, groups): (Vec<u32>, Vec<u32>) = children_of(gateway_pid)
        .into_iter()
        .partition(|pid| is_keeper(*pid));
    assert_eq!(groups.len(), 2, "the gateway should have two apps");
    assert_eq!(keepers.len(), 1, "the gateway should have one keeper");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(gateway_pid).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        eventually_blocking(Duration::from_secs(10), || live_in_groups(&groups)
            .is_empty()),
        "{:?}",
        live_in_groups(&groups)
    );
    assert!(
        eventually_blocking(Duration::from_secs(10), || live(&keepers).is_empty()),
        "the keeper outlived a clean shutdown"
    );
}

/// The first argument of a keeper process (the supervisor's `KEEPER_ARG`, which only this
/// test needs to name).
const KEEPER_ARG: &str = "--mcpapp-keeper";

/// Whether `pid` is a gateway's keeper process (its first argument says so).
pub(crate) fn is_keeper(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        cmdline
            .split(|b| *b == 0)
            .nth(1)
            .is_some_and(|arg| arg == KEEPER_ARG.as_bytes())
    })
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
        .env_remove("XDG_STATE_HOME")
        .env("HOME", tree.path("home"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without an auth token"),
        "{stderr}"
    );
    // Refused before anything was made in the default state directory (the OAuth store's
    // key, for one).
    assert!(!tree.path("home").exists(), "{stderr}");
}

/// Starts `serve --config appsettings.json` in `tree` with `env` added to a clean environment.
fn serve(tree: &Tree, env: &[(&str, &str)]) -> Served {
    serve_as(tree, env, false)
}

/// Whether the tests run as root (as CI does).
pub(crate) fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// Like [`serve`]; with `unprivileged` and when running as root, the gateway (and so its
/// apps) runs as `nobody`, as a gateway should, so that root's powers do not hide a leak.
pub(crate) fn serve_as(tree: &Tree, env: &[(&str, &str)], unprivileged: bool) -> Served {
    let unprivileged = unprivileged && is_root();
    // A home folder of the gateway's own, where its default state directory (the apps' HOME
    // and TMPDIR) goes, writable by the user it runs as.
    let home = tree.path("home");
    std::fs::create_dir_all(&home).unwrap();
    if unprivileged {
        std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    }
    let home = home.display().to_string();
    let mut env = env.to_vec();
    env.push(("HOME", &home));
    let env = env.as_slice();
    if unprivileged {
        // nobody must be able to read the configuration and the apps' folders.
        #[allow(clippy::disallowed_methods)]
        let status = Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(tree.root())
            .status()
            .unwrap();
        assert!(status.success());
    }
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let command = if unprivileged {
        let mut command = Command::new("setpriv");
        command.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            GATEWAY,
        ]);
        command
    } else {
        Command::new(GATEWAY)
    };
    crate::start_serve(command, tree.root(), env, Stdio::null()).into()
}

/// Writes `appsettings.json`: `section` with `mcp_apps`' keys set over it as `McpApps`, and a
/// `Gateway` section with `token` and no file watcher (a test that reloads applies its change
/// itself).
pub(crate) fn write_settings(tree: &Tree, mut section: Value, mcp_apps: &Value, token: &str) {
    for (key, value) in mcp_apps.as_object().unwrap() {
        section[key] = value.clone();
    }
    tree.write(
        "appsettings.json",
        &serde_json::to_string_pretty(
            &json!({"McpApps": section, "Gateway": {"AuthToken": token, "Watch": false}}),
        )
        .unwrap(),
    );
}

/// One HTTP/1.1 request with a JSON body; returns the response headers and body.
pub(crate) fn post(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: &str,
) -> (String, String) {
    use std::io::Write;
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let mut head = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some(session) = session {
        head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
    }
    write!(stream, "{head}\r\n{body}").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (headers, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (headers.to_owned(), body.to_owned())
}

/// Calls `tool` of `app` through its proxy session and returns the result's
/// `structuredContent`.
pub(crate) fn call_tool(
    served: &Served,
    token: &str,
    app: &str,
    tool: &str,
    args: &serde_json::Value,
) -> serde_json::Value {
    call_reply(served, token, app, tool, args)["result"]["structuredContent"].clone()
}

/// `tools/call` of `tool` of `app` through a new proxy session; the whole JSON-RPC reply.
pub(crate) fn call_reply(
    served: &Served,
    token: &str,
    app: &str,
    tool: &str,
    args: &serde_json::Value,
) -> serde_json::Value {
    let endpoint = format!("{}/apps/mcp/{app}", served.url);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (headers, _) = post(&endpoint, Some(token), None, &init.to_string());
    let session = headers
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session: {headers}"));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}});
    let (_, body) = post(&endpoint, Some(token), Some(&session), &call.to_string());
    serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}"))
}

pub(crate) fn wait_running(served: &Served, token: Option<&str>, count: usize) {
    let _ = token;
    let mut apps = serde_json::Value::Null;
    assert!(
        eventually_blocking(PATIENCE, || {
            let (_, body) = get_with_token(&format!("{}/apps", served.url), token);
            apps = serde_json::from_str(&body).unwrap_or_default();
            apps["apps"]
                .as_array()
                .is_some_and(|a| a.len() == count && a.iter().all(|a| a["lifecycle"] == "Running"))
        }),
        "{apps}"
    );
}

pub(crate) fn get_with_token(url: &str, token: Option<&str>) -> (String, String) {
    use std::io::Write;
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{auth}\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (headers, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (headers.to_owned(), body.to_owned())
}

#[test]
fn apps_never_see_the_gateway_token_the_model_key_or_a_neighbours_secret() {
    let tree = Tree::new();
    let fixture = bin("fixture-app");
    for id in ["probe", "neighbour"] {
        tree.write(
            &format!("apps/{id}/openclaw.mcpapp.json"),
            &json!({"id": id, "command": fixture, "arguments": ["stdio"], "toolNamePrefix": format!("{id}.")}).to_string(),
        );
    }
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"],
            "Supervision": {"HealthCheckIntervalMs": 0},
            "Entries": {"neighbour": {"Environment": {"NEIGHBOUR_SECRET": "env:OTHER_SECRET"}}}}}"#,
    );
    let token = "gateway-token-value";
    let served = serve(
        &tree,
        &[
            ("MCPAPP_TOKEN", token),
            ("OPENAI_API_KEY", "model-key-value"),
            ("OTHER_SECRET", "neighbour-secret-value"),
            ("UNLISTED", "x"),
        ],
    );
    wait_running(&served, Some(token), 2);

    let names = call_tool(&served, token, "probe", "list_env", &json!({}));
    let names: Vec<&str> = names["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    // PATH is inherited; HOME and TMPDIR are the app's own folders in its sandbox; the
    // keeper's tag is the gateway's, not a secret.
    assert_eq!(
        names,
        ["HOME", "MCPAPP_KEEPER", "PATH", "TMPDIR"],
        "{names:?}"
    );
    let secret = call_tool(
        &served,
        token,
        "neighbour",
        "get_env",
        &json!({"name": "NEIGHBOUR_SECRET"}),
    );
    assert_eq!(secret["value"], "neighbour-secret-value");
    for name in ["MCPAPP_TOKEN", "OPENAI_API_KEY", "OTHER_SECRET", "UNLISTED"] {
        let got = call_tool(
            &served,
            token,
            "neighbour",
            "get_env",
            &json!({ "name": name }),
        );
        assert_eq!(got["value"], serde_json::Value::Null, "{name}");
    }
}

#[test]
fn after_sigkill_of_the_gateway_no_app_process_or_descendant_survives() {
    let tree = Tree::new();
    let fixture = bin("fixture-app");
    // The app may write only where it is granted: its pid file goes to a granted folder.
    std::fs::create_dir_all(tree.path("out")).unwrap();
    let pid_file = tree.path("out/descendants.pids");
    let apps = [
        ("lingerer", json!(["stdio", "--linger"])),
        (
            "parent",
            json!(["stdio", "--linger", "--spawn-descendants", pid_file]),
        ),
        ("plain", json!(["stdio"])),
    ];
    for (id, args) in &apps {
        tree.write(
            &format!("apps/{id}/openclaw.mcpapp.json"),
            &json!({"id": id, "command": fixture, "arguments": args, "toolNamePrefix": format!("{id}.")}).to_string(),
        );
    }
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"], "Supervision": {"HealthCheckIntervalMs": 0},
            "Entries": {"parent": {"Isolation": {"Write": ["out"]}}}}}"#,
    );
    let mut served = serve(&tree, &[]);
    wait_running(&served, None, 3);
    // Every app runs in its sandbox: the keeper must reach them there.
    for (id, _) in &apps {
        let detail: serde_json::Value =
            serde_json::from_str(&get(&format!("{}/apps/{id}", served.url))).unwrap();
        assert_eq!(detail["sandbox"]["status"], "enforced", "{detail}");
    }
    let gateway = served.child.id();
    let children = children_of(gateway);
    // Three apps and the keeper.
    assert_eq!(children.len(), 4, "{children:?}");
    assert_eq!(children.iter().filter(|p| is_keeper(**p)).count(), 1);
    let mut doomed: Vec<u32> = children;
    let descendants: Vec<u32> = std::fs::read_to_string(&pid_file)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(descendants.len(), 3, "{descendants:?}");
    doomed.extend(&descendants);
    doomed.sort_unstable();
    doomed.dedup();
    assert_eq!(
        live(&doomed).len(),
        doomed.len(),
        "all alive before the kill"
    );

    served.child.kill().unwrap();
    served.child.wait().unwrap();
    assert!(
        eventually_blocking(Duration::from_secs(2), || live(&doomed).is_empty()),
        "still alive 2 s after SIGKILL of the gateway: {:?}",
        live(&doomed)
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

#[test]
fn an_app_cannot_read_the_gateways_environment_through_proc() {
    let tree = Tree::new();
    let fixture = bin("fixture-app");
    tree.write(
        "apps/snoop/openclaw.mcpapp.json",
        &json!({"id": "snoop", "command": fixture, "arguments": ["stdio"]}).to_string(),
    );
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"], "Supervision": {"HealthCheckIntervalMs": 0}}}"#,
    );
    let token = "gateway-token-value";
    let served = serve_as(&tree, &[("MCPAPP_TOKEN", token)], true);
    wait_running(&served, Some(token), 1);
    let gateway = served.child.id();
    // The app runs as the gateway's user, and its parent is the gateway.
    let endpoint = format!("{}/apps/mcp/snoop", served.url);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (headers, _) = post(&endpoint, Some(token), None, &init.to_string());
    let session = headers
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "read_file", "arguments": {"path": format!("/proc/{gateway}/environ")}}});
    let (_, body) = post(&endpoint, Some(token), Some(&session), &call.to_string());
    assert!(
        !body.contains(token),
        "the app read the gateway's token: {body}"
    );
    let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ermission denied"),
        "{reply}"
    );
}

/// A gateway with one fixture app, started with `env`.
fn serve_fixture(tree: &Tree, token: &str, env: &[(&str, &str)]) -> Served {
    let fixture = bin("fixture-app");
    tree.write(
        "apps/fx/openclaw.mcpapp.json",
        &json!({"id": "fx", "command": fixture, "arguments": ["stdio"], "toolNamePrefix": "fx."})
            .to_string(),
    );
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"], "Supervision": {"HealthCheckIntervalMs": 0}}}"#,
    );
    let mut env = env.to_vec();
    env.push(("MCPAPP_TOKEN", token));
    let served = serve(tree, &env);
    wait_running(&served, Some(token), 1);
    served
}

#[test]
fn serve_exposes_metrics_behind_the_token() {
    let tree = Tree::new();
    let token = "scrape-token";
    let served = serve_fixture(&tree, token, &[]);
    let url = format!("{}/metrics", served.url);
    let (headers, _) = get_with_token(&url, None);
    assert!(headers.starts_with("HTTP/1.1 401"), "{headers}");
    call_tool(&served, token, "fx", "echo", &json!({"message": "m"}));
    let (headers, body) = get_with_token(&url, Some(token));
    assert!(headers.starts_with("HTTP/1.1 200"), "{headers}");
    assert!(body.contains("# TYPE mcpapp_build_info gauge"), "{body}");
    assert!(
        body.contains(r#"mcpapp_app_state{app="fx",state="Running"} 1"#),
        "{body}"
    );
    assert!(
        body.contains(
            r#"mcpapp_tool_calls_total{app="fx",tool="echo",path="proxy",outcome="ok"} 1"#
        ),
        "{body}"
    );
}

/// With the `otel` feature, a real `serve` exports the spans of a proxied call over OTLP/HTTP
/// to a collector (here a loopback listener that records what it is sent), and the app gets
/// a `traceparent` of the same trace.
#[cfg(feature = "otel")]
#[test]
fn serve_exports_traces_over_otlp_when_an_endpoint_is_set() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};

    let collector = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", collector.local_addr().unwrap());
    /// Each request's line and body, as the collector received them.
    type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;
    let received: Received = Arc::default();
    let record = received.clone();
    std::thread::spawn(move || {
        for stream in collector.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            record.lock().unwrap().push((request_line, body));
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });

    let tree = Tree::new();
    let token = "trace-token";
    let served = serve_fixture(
        &tree,
        token,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let got = call_tool(&served, token, "fx", "echo_meta", &json!({}));
    let traceparent = got["meta"]["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("no traceparent: {got}"))
        .to_owned();
    let trace_id: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&traceparent[3 + 2 * i..5 + 2 * i], 16).unwrap())
        .collect();
    let exported = |needle: &[u8]| {
        received.lock().unwrap().iter().any(|(line, body)| {
            line.starts_with("POST /v1/traces ") && body.windows(needle.len()).any(|w| w == needle)
        })
    };
    assert!(
        eventually_blocking(PATIENCE, || exported(&trace_id)
            && exported(b"mcp_proxy_request")
            && exported(b"mcp_upstream_request")),
        "the collector got no spans of trace {traceparent}: {:?}",
        received
            .lock()
            .unwrap()
            .iter()
            .map(|(line, body)| (line.clone(), body.len()))
            .collect::<Vec<_>>()
    );
    drop(served);
}
