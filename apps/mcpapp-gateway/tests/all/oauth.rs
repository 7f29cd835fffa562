//! Apps behind OAuth with the real binary: `serve` logging at trace level, `apps authorize`
//! and `apps disconnect` from the CLI, the browser played by the test, and `uninstall`
//! forgetting an app's tokens. Then every log line, API answer, event, CLI output and file the
//! gateway wrote is searched for the tokens, client secrets and codes the authorization
//! servers issued and the pre-registered client's secret: none may be there.

// Tests start the binary under test; that is their job.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpapp_testkit::HttpApp;
use serde_json::{Value, json};

use crate::{GATEWAY, Tree, gateway_command, start_serve, stderr, stdout};

/// The gateway's bearer token.
const TOKEN: &str = "gateway-token-for-the-oauth-test";
/// The pre-registered client of `crm` and its secret (given to the gateway as `env:`).
const CLIENT_ID: &str = "gw-client";
const CLIENT_SECRET: &str = "pre-registered-client-secret-0123456789";

/// Runs the CLI against the gateway at `url`.
fn cli(tree: &Tree, url: &str, args: &[&str]) -> Output {
    Command::new(GATEWAY)
        .args(args)
        .args(["--url", url])
        .current_dir(tree.root())
        .env_remove("RUST_LOG")
        .env("MCPAPP_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .expect("the CLI runs")
}

/// `apps authorize crm` against the gateway at `url` with `extra` arguments, its output
/// piped: it prints the authorization URL first, then waits for the app to run.
fn authorize_crm(url: &str, extra: &[&str]) -> std::process::Child {
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    Command::new(GATEWAY)
        .args(["apps", "authorize", "crm", "--url", url])
        .args(extra)
        .env("MCPAPP_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn manifest(id: &str, url: &str) -> String {
    json!({"id": id, "transport": "http", "url": url, "startupTimeoutSeconds": 30}).to_string()
}

/// What every answer, event and CLI output showed, to search for secrets.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<String>>);

impl Seen {
    fn add(&self, text: &str) {
        self.0.lock().unwrap().push_str(text);
        self.0.lock().unwrap().push('\n');
    }

    fn output(&self, output: &Output) -> String {
        self.add(&stdout(output));
        self.add(&stderr(output));
        stdout(output)
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

/// The user's browser and API client.
struct User {
    url: String,
    http: reqwest::Client,
    seen: Seen,
}

impl User {
    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        let text = response.text().await.unwrap();
        self.seen.add(&text);
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn wait(&self, id: &str, state: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let app = self.get(&format!("/apps/{id}")).await;
            if app["lifecycle"] == state {
                return app;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{id} did not become {state}: {app}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Opens an authorization URL: the authorization server redirects at once to the
    /// gateway's callback, which the browser opens.
    async fn open(&self, url: &str) {
        let response = self.http.get(url).send().await.unwrap();
        assert!(response.status().is_redirection(), "{}", response.status());
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        assert!(
            location.starts_with(&format!("{}/oauth/callback?", self.url)),
            "{location}"
        );
        let page = self.http.get(&location).send().await.unwrap();
        assert_eq!(page.status(), 200);
        self.seen.add(&page.text().await.unwrap());
    }
}

/// Follows `/apps/events` into `seen` until the task is aborted.
async fn record_events(url: String, seen: Seen) {
    let mut response = reqwest::Client::new()
        .get(format!("{url}/apps/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    while let Ok(Some(chunk)) = response.chunk().await {
        seen.add(&String::from_utf8_lossy(&chunk));
    }
}

/// Every token, client secret and authorization code an authorization server issued.
async fn issued(server: &HttpApp) -> Vec<String> {
    let state: Value = reqwest::get(server.url.replace("/mcp", "/admin/state"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    state["seen"]["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// Every file under `dir`, read whole.
fn files(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            let mut bytes = Vec::new();
            if let Ok(mut file) = std::fs::File::open(&path) {
                let _ = file.read_to_end(&mut bytes);
            }
            out.push((path, bytes));
        }
    }
}

/// A running `serve`, killed if the test ends before [`Serving::stop`].
struct Serving(std::process::Child);

impl Serving {
    /// SIGTERM, as a service manager stops it, and the exit.
    fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).unwrap());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_from_the_cli_leaves_no_token_or_secret_in_logs_answers_events_or_files() {
    let crm = HttpApp::start(
        "oauth-server",
        &["--client", &format!("{CLIENT_ID}:{CLIENT_SECRET}")],
    );
    let notes = HttpApp::start("oauth-server", &[]);
    let tree = Tree::new();
    tree.write("apps/crm/openclaw.mcpapp.json", &manifest("crm", &crm.url));
    tree.write(
        "apps/notes/openclaw.mcpapp.json",
        &manifest("notes", &notes.url),
    );
    let settings = json!({"McpApps": {
        "Enabled": true,
        "DiscoveryPaths": ["./apps"],
        "SecretsFile": "./state/secrets.json",
        "StateDirectory": "./state",
        "Supervision": {"HealthCheckIntervalMs": 0},
        "Entries": {"crm": {"OAuth": {
            "ClientId": CLIENT_ID,
            "ClientSecret": "env:CRM_CLIENT_SECRET",
        }}},
    }});
    tree.write("appsettings.json", &settings.to_string());
    // The log lives outside the folder the gateway watches (its configuration's): at trace
    // level the watcher's own lines about the log changing would feed themselves.
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("serve.log");
    let served = start_serve(
        gateway_command(),
        tree.root(),
        &[
            ("RUST_LOG", "trace"),
            ("MCPAPP_TOKEN", TOKEN),
            ("CRM_CLIENT_SECRET", CLIENT_SECRET),
        ],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let url = served.url.clone();
    let mut serving = Serving(served.child);
    let seen = Seen::default();
    let user = User {
        url: url.clone(),
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        seen: seen.clone(),
    };
    let events = tokio::spawn(record_events(url.clone(), seen.clone()));
    user.wait("crm", "NeedsAuthorization").await;
    user.wait("notes", "NeedsAuthorization").await;

    let list = seen.output(&cli(&tree, &url, &["apps", "list"]));
    assert!(list.contains("NeedsAuthorization"), "{list}");
    let show = seen.output(&cli(&tree, &url, &["apps", "show", "crm"]));
    assert!(
        show.contains("authorization:")
            && show.contains("needs authorization at http://127.0.0.1:"),
        "{show}"
    );

    // `apps authorize crm --json`: the URL first, then it waits for the app to run.
    let mut authorize = authorize_crm(&url, &["--json"]);
    let mut lines = BufReader::new(authorize.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    seen.add(&first.to_string());
    assert_eq!(first["scopes"], json!(["mcp:read"]), "{first}");
    user.open(first["url"].as_str().unwrap()).await;
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = authorize.wait().unwrap();
    let rest = rest.join("\n");
    seen.add(&rest);
    assert!(status.success(), "{rest}");
    let app: Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(app["lifecycle"], "Running", "{app}");

    // notes through the API, with a client it registered.
    let response = user
        .http
        .post(format!("{url}/apps/notes/authorize"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let answer: Value = response.json().await.unwrap();
    seen.add(&answer.to_string());
    user.open(answer["url"].as_str().unwrap()).await;
    user.wait("notes", "Running").await;

    // Calls; step-up from the CLI; a renewal after a 401 with the client's secret.
    let call = |args: &[&str]| cli(&tree, &url, args);
    let out = seen.output(&call(&["call", "crm", "whoami"]));
    assert!(out.contains("hello, authorized client"), "{out}");
    let refused = call(&["call", "crm", "write_note", r#"{"text": "x"}"#]);
    seen.output(&refused);
    assert!(!refused.status.success());
    assert!(
        format!("{}{}", stdout(&refused), stderr(&refused)).contains("needs more access"),
        "{}",
        stderr(&refused)
    );
    let mut more = authorize_crm(&url, &[]);
    let mut lines = BufReader::new(more.stdout.take().unwrap()).lines();
    let url = lines.next().unwrap().unwrap();
    seen.add(&url);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    user.open(&url).await;
    let done: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(more.wait().unwrap().success(), "{done:?}");
    let done = done.join("\n");
    seen.add(&done);
    assert!(
        done.contains("crm is connected; it is Running (authorized at")
            && done.contains("scopes: mcp:read mcp:write"),
        "{done}"
    );
    let out = seen.output(&call(&["call", "crm", "write_note", r#"{"text": "x"}"#]));
    assert!(out.contains("noted: x"), "{out}");
    reqwest::Client::new()
        .post(crm.url.replace("/mcp", "/admin/expire-access-tokens"))
        .send()
        .await
        .unwrap();
    let out = seen.output(&call(&["call", "crm", "whoami"]));
    assert!(out.contains("hello, authorized client"), "{out}");

    let out = seen.output(&call(&["apps", "disconnect", "notes"]));
    assert!(
        out.contains("notes: its OAuth tokens are revoked and deleted"),
        "{out}"
    );
    user.wait("notes", "NeedsAuthorization").await;
    user.get("/apps").await;
    events.abort();
    serving.stop();

    // The key file the gateway made (no MCPAPP_OAUTH_KEY) is private, and it said so.
    let key = tree.path("state/oauth/oauth.key");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains("created the OAuth token store's key file"),
        "no warning about the new key file"
    );
    // The log is at trace level: rmcp's and hyper's lines are there.
    assert!(log_text.contains("TRACE"), "the log is not at trace level");

    // Authorization codes too: single-use, but the gateway keeps rmcp's OAuth module (which
    // logs them at debug) at info whatever `RUST_LOG` says.
    let mut secrets = issued(&crm).await;
    secrets.extend(issued(&notes).await);
    secrets.push(CLIENT_SECRET.to_owned());
    assert!(
        secrets
            .iter()
            .filter(|s| s.starts_with("at-") || s.starts_with("rt-"))
            .count()
            >= 6
    );
    let shown = seen.text();
    let mut written = Vec::new();
    files(tree.root(), &mut written);
    files(logs.path(), &mut written);
    assert!(written.iter().any(|(p, _)| p.ends_with("serve.log")));
    for secret in &secrets {
        assert!(
            !shown.contains(secret.as_str()),
            "{secret} in an answer, event or CLI output"
        );
        for (path, bytes) in &written {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} in {}",
                path.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_revokes_and_deletes_the_apps_tokens() {
    let server = HttpApp::start("oauth-server", &[]);
    let tree = Tree::new();
    let settings = json!({"McpApps": {
        "Enabled": true,
        "DiscoveryPaths": ["./apps"],
        "SecretsFile": "./state/secrets.json",
        "StateDirectory": "./state",
    }});
    tree.write("appsettings.json", &settings.to_string());
    let installed = Command::new(GATEWAY)
        .args([
            "install",
            &server.url,
            "--id",
            "crm",
            "--config",
            "appsettings.json",
            "--yes",
            "--no-probe",
        ])
        .current_dir(tree.root())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(installed.status.success(), "{}", stderr(&installed));

    let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let served = start_serve(
        gateway_command(),
        tree.root(),
        &[("MCPAPP_TOKEN", TOKEN), ("MCPAPP_OAUTH_KEY", key)],
        Stdio::null(),
    );
    let url = served.url.clone();
    let mut serving = Serving(served.child);
    let user = User {
        url: url.clone(),
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        seen: Seen::default(),
    };
    user.wait("crm", "NeedsAuthorization").await;
    let answer: Value = user
        .http
        .post(format!("{url}/apps/crm/authorize"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    user.open(answer["url"].as_str().unwrap()).await;
    user.wait("crm", "Running").await;
    serving.stop();
    // With the key in the environment, no key file is written.
    assert!(!tree.path("state/oauth/oauth.key").exists());
    let stored: Vec<PathBuf> = std::fs::read_dir(tree.path("state/oauth"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "oauth"))
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");

    let removed = Command::new(GATEWAY)
        .args(["uninstall", "crm", "--config", "appsettings.json", "--yes"])
        .current_dir(tree.root())
        .env_remove("RUST_LOG")
        .env("MCPAPP_OAUTH_KEY", key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert!(
        stdout(&removed).contains("revoked and deleted the OAuth tokens of crm"),
        "{}",
        stdout(&removed)
    );
    assert!(!stored[0].exists());
    let state: Value = reqwest::get(server.url.replace("/mcp", "/admin/state"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        !state["seen"]["revoke"].as_array().unwrap().is_empty(),
        "{state}"
    );
}
