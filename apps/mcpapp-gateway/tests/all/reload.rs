//! Hot reload with a real `serve`: manifests and the configuration file changed on disk take
//! effect without a request, only the changed app's process is replaced, broken files are
//! diagnostics, and `GET /apps/events` tells it all in order.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use mcpapp_testkit::{PATIENCE, bin, children_of, eventually_blocking};
use serde_json::{Value, json};

use crate::{GATEWAY, Served, Tree};

fn serve(tree: &Tree) -> Served {
    serve_with(tree, &[])
}

/// `serve` with `env` in its environment besides `PATH`.
fn serve_with(tree: &Tree, env: &[(&str, &str)]) -> Served {
    crate::start_serve(crate::gateway_command(), tree.root(), env, Stdio::null()).into()
}

/// One server-sent event.
#[derive(Debug, Clone)]
struct Sse {
    id: Option<u64>,
    kind: String,
    data: Value,
}

/// An open `GET /apps/events`, read on a thread of its own.
struct Events {
    rx: mpsc::Receiver<Sse>,
    /// Every event received so far, in order.
    seen: Vec<Sse>,
}

impl Events {
    /// Opens the stream and waits for its `ready` event: from then on nothing is missed.
    fn open(url: &str) -> Self {
        let authority = url.strip_prefix("http://").unwrap().to_owned();
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        // HTTP/1.0: the body is the stream itself, without chunked framing.
        write!(
            stream,
            "GET /apps/events HTTP/1.0\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || read_events(stream, &tx));
        let mut events = Self {
            rx,
            seen: Vec::new(),
        };
        events.wait_for("the ready event", |e| e.kind == "ready");
        events
    }

    /// Waits for an event that satisfies `want`; returns it.
    fn wait_for(&mut self, what: &str, mut want: impl FnMut(&Sse) -> bool) -> Sse {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(event) => {
                    self.seen.push(event.clone());
                    if want(&event) {
                        return event;
                    }
                }
                Err(_) => panic!("no {what} within {PATIENCE:?}; seen: {:#?}", self.seen),
            }
        }
    }

    /// Waits until `app` has reached `state` (an event after the call).
    fn wait_state(&mut self, app: &str, state: &str) -> Sse {
        self.wait_for(&format!("{app} reaching {state}"), |e| {
            e.kind == "lifecycle" && e.data["appId"] == app && e.data["to"] == state
        })
    }

    /// Waits until `app` has reached `state` in an event after the first `mark` seen (which
    /// may have arrived already, while waiting for something else).
    fn wait_state_since(&mut self, mark: usize, app: &str, state: &str) -> Sse {
        let reached =
            |e: &Sse| e.kind == "lifecycle" && e.data["appId"] == app && e.data["to"] == state;
        if let Some(event) = self.seen[mark..].iter().find(|e| reached(e)) {
            return event.clone();
        }
        self.wait_for(&format!("{app} reaching {state}"), reached)
    }

    /// Waits for a reload whose outcome has `key` equal to `value` (an editor's save may
    /// make more than one burst, and so more than one reload).
    fn wait_reload(&mut self, key: &str, value: &Value) -> Sse {
        self.wait_for(&format!("a reload with {key} = {value}"), |e| {
            e.kind == "reload" && &e.data[key] == value
        })
    }
}

fn read_events(stream: std::net::TcpStream, tx: &mpsc::Sender<Sse>) {
    let mut reader = BufReader::new(stream);
    // The response head.
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
    }
    let (mut id, mut kind, mut data) = (None, String::new(), String::new());
    for line in reader.lines() {
        let Ok(line) = line else { return };
        if line.is_empty() {
            if !data.is_empty() {
                let event = Sse {
                    id,
                    kind: std::mem::take(&mut kind),
                    data: serde_json::from_str(&data).unwrap(),
                };
                if tx.send(event).is_err() {
                    return;
                }
            }
            (id, data) = (None, String::new());
        } else if let Some(value) = line.strip_prefix("id: ").or(line.strip_prefix("id:")) {
            id = value.trim().parse().ok();
        } else if let Some(value) = line.strip_prefix("event: ").or(line.strip_prefix("event:")) {
            value.trim().clone_into(&mut kind);
        } else if let Some(value) = line.strip_prefix("data: ").or(line.strip_prefix("data:")) {
            data.push_str(value);
        }
    }
}

fn get_json(url: &str) -> Value {
    let body = crate::get(url);
    serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}"))
}

/// The lifecycle of each app in `GET /apps`.
fn lifecycles(url: &str) -> BTreeMap<String, String> {
    get_json(&format!("{url}/apps"))["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap_or_default().to_owned(),
                a["lifecycle"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The gateway's app processes by app folder name (each app runs in its own folder).
fn pids(served: &Served) -> BTreeMap<String, u32> {
    children_of(served.child.id())
        .into_iter()
        .filter_map(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
            let parent = cwd.parent()?.file_name()?.to_str()?;
            let name = cwd.file_name()?.to_str()?.to_owned();
            matches!(parent, "apps" | "more").then_some((name, pid))
        })
        .collect()
}

fn manifest(id: &str, extra_args: &[&str]) -> String {
    let mut arguments = vec!["stdio"];
    arguments.extend_from_slice(extra_args);
    json!({"id": id, "command": bin("fixture-app"), "arguments": arguments, "toolNamePrefix": format!("{id}.")})
        .to_string()
}

/// Writes a file as editors do: a new file beside it, renamed over the old one.
fn save_by_rename(path: &Path, text: &str) {
    let temp = path.with_extension("json.tmp~");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// Every app's lifecycle events chain (each starts where the previous one ended, except
/// the first of a new handle, which starts from discovery) and ids only grow: the stream
/// delivered the transitions in order.
fn assert_in_order(seen: &[Sse]) {
    let ids: Vec<u64> = seen.iter().filter_map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    for event in seen.iter().filter(|e| e.kind == "lifecycle") {
        let app = event.data["appId"].as_str().unwrap().to_owned();
        let from = event.data["from"].as_str().unwrap();
        let fresh = matches!(from, "Discovered" | "Validated");
        if let Some(previous) = last.get(&app).filter(|_| !fresh) {
            assert_eq!(previous, from, "{app}: {seen:#?}");
        }
        last.insert(app, event.data["to"].as_str().unwrap().to_owned());
    }
}

fn wait_all_running(url: &str, count: usize) {
    let mut states = BTreeMap::new();
    let running = eventually_blocking(PATIENCE, || {
        states = lifecycles(url);
        states.len() == count && states.values().all(|s| s == "Running")
    });
    assert!(running, "{states:?}");
}

#[test]
fn manifests_added_changed_removed_and_broken_apply_without_a_request() {
    let tree = Tree::new();
    tree.write("apps/one/openclaw.mcpapp.json", &manifest("one", &[]));
    tree.write("apps/two/openclaw.mcpapp.json", &manifest("two", &[]));
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"], "Supervision": {"HealthCheckIntervalMs": 0}}}"#,
    );
    let served = serve(&tree);
    wait_all_running(&served.url, 2);
    let mut events = Events::open(&served.url);
    let before = pids(&served);
    assert_eq!(before.len(), 2, "{before:?}");

    // Added, in a subfolder of an app folder's depth: discovered and started.
    let started = Instant::now();
    tree.write("apps/three/openclaw.mcpapp.json", &manifest("three", &[]));
    events.wait_for("three added", |e| {
        e.kind == "app_added" && e.data["appId"] == "three"
    });
    events.wait_state("three", "Running");
    eprintln!("added app running after {:?}", started.elapsed());
    let now = pids(&served);
    assert_eq!(now.get("one"), before.get("one"));
    assert_eq!(now.get("two"), before.get("two"));
    let three = now["three"];

    // Changed (saved by rename): only that app restarts.
    let started = Instant::now();
    save_by_rename(
        &tree.path("apps/two/openclaw.mcpapp.json"),
        &manifest("two", &["--stderr-noise", "1"]),
    );
    events.wait_reload("changed", &json!(["two"]));
    events.wait_state("two", "Running");
    eprintln!("changed app running again after {:?}", started.elapsed());
    let now = pids(&served);
    assert_eq!(now.get("one"), before.get("one"));
    assert_eq!(now.get("three"), Some(&three));
    assert_ne!(now.get("two"), before.get("two"));
    assert!(now.contains_key("two"), "{now:?}");
    let two = now["two"];

    // Removed: stopped and gone from /apps.
    let started = Instant::now();
    std::fs::remove_dir_all(tree.path("apps/three")).unwrap();
    events.wait_for("three removed", |e| {
        e.kind == "app_removed" && e.data["appId"] == "three"
    });
    eprintln!("removed app gone after {:?}", started.elapsed());
    assert!(!lifecycles(&served.url).contains_key("three"));
    let now = pids(&served);
    assert_eq!(now.get("one"), before.get("one"));
    assert_eq!(now.get("two"), Some(&two));
    assert!(!now.contains_key("three"), "{now:?}");

    // Broken: a diagnostic with the file's position, and the app keeps running as it was.
    tree.write(
        "apps/one/openclaw.mcpapp.json",
        "{\"id\": \"one\",\n  \"command\": ",
    );
    let reload = events.wait_reload("kept", &json!(["one"]));
    let diagnostics = reload.data["diagnostics"].as_array().unwrap();
    assert!(
        diagnostics.iter().any(|d| d["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("apps/one/openclaw.mcpapp.json"))
            && d["severity"] == "error"
            && d["line"].is_u64()),
        "{diagnostics:#?}"
    );
    assert_eq!(lifecycles(&served.url)["one"], "Running");
    let now = pids(&served);
    assert_eq!(now.get("one"), before.get("one"));
    assert_eq!(now.get("two"), Some(&two));

    // Fixed again: the same spec as before, so nothing restarts.
    tree.write("apps/one/openclaw.mcpapp.json", &manifest("one", &[]));
    events.wait_reload("kept", &json!([]));
    assert_eq!(pids(&served).get("one"), before.get("one"));

    assert_in_order(&events.seen);
    let three_states: Vec<&str> = events
        .seen
        .iter()
        .filter(|e| e.kind == "lifecycle" && e.data["appId"] == "three")
        .map(|e| e.data["to"].as_str().unwrap())
        .collect();
    assert!(three_states.contains(&"Running"), "{three_states:?}");
    assert_eq!(three_states.last(), Some(&"Stopped"), "{three_states:?}");
}

#[test]
fn configuration_changes_apply_their_difference_and_a_broken_file_keeps_the_last_good_one() {
    let tree = Tree::new();
    tree.write("apps/one/openclaw.mcpapp.json", &manifest("one", &[]));
    tree.write("apps/two/openclaw.mcpapp.json", &manifest("two", &[]));
    let settings = |extra: &str| {
        format!(
            r#"{{"McpApps": {{"Enabled": true, "DiscoveryPaths": ["apps", "more"], "Supervision": {{"HealthCheckIntervalMs": 0}}{extra}}}}}"#
        )
    };
    tree.write("appsettings.json", &settings(""));
    let served = serve(&tree);
    wait_all_running(&served.url, 2);
    let mut events = Events::open(&served.url);
    let before = pids(&served);

    // A deny rule: two stops, one is untouched.
    save_by_rename(
        &tree.path("appsettings.json"),
        &settings(r#", "Deny": ["two"]"#),
    );
    let reload = events.wait_reload("changed", &json!(["two"]));
    assert_eq!(reload.data["configReloaded"], true, "{reload:?}");
    assert_eq!(lifecycles(&served.url)["two"], "Disabled");
    assert_eq!(pids(&served).get("one"), before.get("one"));
    assert!(!pids(&served).contains_key("two"));

    // A discovery path that did not exist when the gateway started: made now, it is
    // watched, and an app written into it starts.
    tree.write("more/four/openclaw.mcpapp.json", &manifest("four", &[]));
    events.wait_state("four", "Running");
    assert_eq!(pids(&served).get("one"), before.get("one"));

    // A broken configuration: a diagnostic naming the file and position; nothing changes.
    tree.write("appsettings.json", "{\"McpApps\": {\n  \"Enabled\": tru");
    // The outcome of the scan that found `four` may still be on its way (it follows the
    // supervisor's events): wait for the reload that reports the broken file itself.
    let reload = events.wait_for("a reload reporting the broken configuration", |e| {
        e.kind == "reload"
            && e.data["configReloaded"] == json!(false)
            && e.data["diagnostics"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["severity"] == "error"))
    });
    let diagnostics = reload.data["diagnostics"].as_array().unwrap();
    let broken = diagnostics
        .iter()
        .find(|d| d["severity"] == "error")
        .unwrap_or_else(|| panic!("{diagnostics:#?}"));
    assert!(
        broken["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("appsettings.json")),
        "{broken}"
    );
    assert!(broken["line"].is_u64(), "{broken}");
    assert!(
        broken["message"]
            .as_str()
            .unwrap()
            .contains("the last good one stays"),
        "{broken}"
    );
    let states = lifecycles(&served.url);
    assert_eq!(states["one"], "Running");
    assert_eq!(states["two"], "Disabled");
    assert_eq!(states["four"], "Running");

    // The deny rule lifted: two runs again, one still untouched.
    tree.write("appsettings.json", &settings(""));
    events.wait_state("two", "Running");
    assert_eq!(pids(&served).get("one"), before.get("one"));
    assert_in_order(&events.seen);
}

#[test]
fn events_need_the_token_and_say_resync_for_an_unknown_last_event_id() {
    let tree = Tree::new();
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"]}, "Gateway": {"AuthToken": "s3cret"}}"#,
    );
    let served = serve(&tree);
    let authority = served.url.strip_prefix("http://").unwrap().to_owned();
    let request = |extra: &str| {
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        write!(
            stream,
            "GET /apps/events HTTP/1.0\r\nHost: {authority}\r\n{extra}\r\n"
        )
        .unwrap();
        let mut reader = BufReader::new(stream);
        let mut text = String::new();
        // The status line, the head, and the first events (ready, then resync).
        while !text.contains("\"reason\"") && !text.contains(" 401 ") {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            text.push_str(&line);
        }
        text
    };
    assert!(request("").starts_with("HTTP/1.0 401"), "{}", request(""));
    let text = request("Authorization: Bearer s3cret\r\nLast-Event-ID: 999\r\n");
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
    assert!(text.contains("content-type: text/event-stream"), "{text}");
    assert!(text.contains("event: ready"), "{text}");
    assert!(text.contains(r#""reason":"unknown_id""#), "{text}");
}

/// `get_env NAME` of `app`, through the CLI against the running gateway.
fn app_env(served: &Served, app: &str, name: &str) -> Value {
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(GATEWAY)
        .args(["call", app, "get_env", &json!({ "name": name }).to_string()])
        .args(["--json", "--url", &served.url])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    result["structuredContent"]["value"].clone()
}

#[test]
fn inherited_environment_and_supervision_apply_on_reload_app_by_app() {
    let tree = Tree::new();
    tree.write("apps/one/openclaw.mcpapp.json", &manifest("one", &[]));
    tree.write("apps/two/openclaw.mcpapp.json", &manifest("two", &[]));
    let settings = |entries: &str, gateway: &str| {
        format!(
            r#"{{"McpApps": {{"Enabled": true, "DiscoveryPaths": ["apps"], "InheritEnvironment": ["PATH"], "Supervision": {{"HealthCheckIntervalMs": 0}}, "Entries": {{{entries}}}}}, "Gateway": {{{gateway}}}}}"#
        )
    };
    tree.write("appsettings.json", &settings("", ""));
    let served = serve_with(&tree, &[("DEPLOY_REGION", "eu-1")]);
    wait_all_running(&served.url, 2);
    let mut events = Events::open(&served.url);
    let before = pids(&served);
    assert_eq!(before.len(), 2, "{before:?}");
    assert_eq!(app_env(&served, "one", "DEPLOY_REGION"), Value::Null);

    // One entry inherits one more name: only its app restarts, and its new process sees it.
    let one_inherits = r#""one": {"InheritEnvironment": ["DEPLOY_*"]}"#;
    let mark = events.seen.len();
    save_by_rename(&tree.path("appsettings.json"), &settings(one_inherits, ""));
    let reload = events.wait_reload("changed", &json!(["one"]));
    assert_eq!(reload.data["configReloaded"], true, "{reload:?}");
    events.wait_state_since(mark, "one", "Running");
    let now = pids(&served);
    assert_ne!(now.get("one"), before.get("one"));
    assert!(now.contains_key("one"), "{now:?}");
    assert_eq!(now.get("two"), before.get("two"));
    assert_eq!(app_env(&served, "one", "DEPLOY_REGION"), json!("eu-1"));
    assert_eq!(app_env(&served, "two", "DEPLOY_REGION"), Value::Null);
    let one = now["one"];

    // The other entry's supervision: only that app restarts.
    let both = format!(r#"{one_inherits}, "two": {{"Supervision": {{"RestartDelayMs": 250}}}}"#);
    let mark = events.seen.len();
    save_by_rename(&tree.path("appsettings.json"), &settings(&both, ""));
    events.wait_reload("changed", &json!(["two"]));
    events.wait_state_since(mark, "two", "Running");
    let now = pids(&served);
    assert_eq!(now.get("one"), Some(&one));
    assert_ne!(now.get("two"), before.get("two"));
    assert!(now.contains_key("two"), "{now:?}");
    let two = now["two"];

    // The Gateway section applies on restart: a warning names the keys (never a value),
    // and no app restarts.
    save_by_rename(
        &tree.path("appsettings.json"),
        &settings(&both, r#""MaxBodyBytes": 1000, "AuthToken": "s3cret""#),
    );
    let reload = events.wait_for("a reload warning about the Gateway section", |e| {
        e.kind == "reload"
            && e.data["diagnostics"].as_array().is_some_and(|d| {
                d.iter().any(|d| {
                    d["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("Gateway.")
                })
            })
    });
    assert_eq!(reload.data["changed"], json!([]), "{reload:?}");
    let warning = reload.data["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| {
            d["message"]
                .as_str()
                .unwrap_or_default()
                .contains("Gateway.")
        })
        .unwrap()
        .clone();
    assert_eq!(warning["severity"], "warning", "{warning}");
    assert_eq!(
        warning["message"],
        "Gateway.AuthToken, Gateway.MaxBodyBytes changed; the Gateway section applies when the gateway is restarted"
    );
    assert!(!reload.data.to_string().contains("s3cret"), "{reload:?}");
    let now = pids(&served);
    assert_eq!(now.get("one"), Some(&one));
    assert_eq!(now.get("two"), Some(&two));
    assert_in_order(&events.seen);
}
