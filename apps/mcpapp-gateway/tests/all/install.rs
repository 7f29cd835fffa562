//! `install`, `installed`, `update` and `uninstall` end to end: real packages from npm and
//! PyPI reaching Running under a real `serve` and answering a tool call; a local MCP Registry
//! (`test-apps/mcp-registry`) driving install by name, `installed`, `update --check` and an
//! update picked up by a running gateway; and a secret input that no file under a discovery
//! path, no API answer and no log line holds, that the app receives and another app cannot
//! resolve.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use mcpapp_testkit::{PATIENCE, TinyBundle, bin, eventually_blocking, files_containing};
use serde_json::{Value, json};

use crate::{GATEWAY, Served, Tree, get, stderr, stdout};

/// Downloads of npm and pip are cached here across runs.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/install-cache")
}

/// Runs the gateway's CLI in `tree` with `args`.
pub(crate) fn cli(tree: &Tree, args: &[&str]) -> Output {
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(GATEWAY)
        .args(args)
        .current_dir(tree.root())
        .env_remove("RUST_LOG")
        .env("MCPAPP_INSTALL_CACHE", cache_dir())
        .stdin(Stdio::null())
        .output()
        .expect("the gateway binary runs");
    output
}

pub(crate) fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
    stdout(output)
}

/// A running `serve` whose stderr goes to `serve.log` in its folder.
pub(crate) fn serve(tree: &Tree) -> Served {
    let log = tree.path("serve.log");
    let file = std::fs::File::create(&log).unwrap();
    let started = crate::start_serve(
        crate::gateway_command(),
        tree.root(),
        &[],
        Stdio::from(file),
    );
    started.into()
}

/// Waits until app `id` is `state`; returns its detail.
pub(crate) fn wait_for(served: &Served, id: &str, state: &str) -> Value {
    let mut detail = Value::Null;
    let reached = eventually_blocking(Duration::from_secs(90), || {
        detail =
            serde_json::from_str(&get(&format!("{}/apps/{id}", served.url))).unwrap_or_default();
        detail["lifecycle"] == state
    });
    assert!(reached, "{id} did not become {state}: {detail}");
    detail
}

/// `call APP TOOL JSON --json` against `served`: the whole result.
pub(crate) fn call(
    served: &Served,
    tree: &Tree,
    app: &str,
    tool: &str,
    arguments: &Value,
) -> Value {
    let output = cli(
        tree,
        &[
            "call",
            app,
            tool,
            &arguments.to_string(),
            "--json",
            "--url",
            &served.url,
        ],
    );
    serde_json::from_str(&ok(&output)).unwrap()
}

/// The text of a tool result's first block.
pub(crate) fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn real_packages_from_npm_and_pypi_install_and_answer_under_serve() {
    let tree = Tree::new();
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"], "SecretsFile": "state/secrets.json",
            "StateDirectory": "state", "Supervision": {"HealthCheckIntervalMs": 0}}}"#,
    );
    let sources: [(&str, &[&str]); 3] = [
        (
            "npm:@modelcontextprotocol/server-everything@2026.8.31",
            &["--", "stdio"],
        ),
        (
            "npm:@modelcontextprotocol/server-basic-vanillajs@2.0.3",
            &["--", "--stdio"],
        ),
        ("pypi:mcp-server-time==2026.10.19", &[]),
    ];
    for (source, extra) in sources {
        let started = Instant::now();
        let mut args = vec!["install", source, "--config", "appsettings.json", "--yes"];
        args.extend_from_slice(extra);
        let out = ok(&cli(&tree, &args));
        // A figure for the record, never asserted.
        eprintln!("install {source}: {:.1} s", started.elapsed().as_secs_f64());
        assert!(out.contains("installed "), "{out}");
    }
    let vanilla =
        std::fs::read_to_string(tree.path("apps/server-basic-vanillajs/openclaw.mcpapp.json"))
            .unwrap();
    let vanilla: Value = serde_json::from_str(&vanilla).unwrap();
    // The probe start found the view.
    assert_eq!(vanilla["hasUi"], true);
    assert_eq!(vanilla["uiResourceUri"], "ui://get-time/mcp-app.html");
    assert_eq!(vanilla["install"]["version"], "2.0.3");
    assert!(
        vanilla["install"]["integrity"]
            .as_str()
            .unwrap()
            .starts_with("sha512-")
    );
    assert!(
        tree.path("apps/server-everything/.mcpapp-runtime/2026.8.31/package-lock.json")
            .is_file()
    );

    let installed = ok(&cli(
        &tree,
        &["installed", "--config", "appsettings.json", "--offline"],
    ));
    for id in [
        "server-everything",
        "server-basic-vanillajs",
        "mcp-server-time",
    ] {
        assert!(installed.contains(id), "{installed}");
    }

    let served = serve(&tree);
    for id in [
        "server-everything",
        "server-basic-vanillajs",
        "mcp-server-time",
    ] {
        wait_for(&served, id, "Running");
    }
    let echo = call(
        &served,
        &tree,
        "server-everything",
        "echo",
        &json!({"message": "hi from install"}),
    );
    assert!(text(&echo).contains("hi from install"), "{echo}");
    let time = call(
        &served,
        &tree,
        "server-basic-vanillajs",
        "get-time",
        &json!({}),
    );
    assert!(time["isError"] != true, "{time}");
    assert!(
        !text(&time).is_empty() || time["structuredContent"].is_object(),
        "{time}"
    );
    let utc = call(
        &served,
        &tree,
        "mcp-server-time",
        "get_current_time",
        &json!({"timezone": "UTC"}),
    );
    assert!(text(&utc).contains("UTC"), "{utc}");
}

/// A bundle of the tiny node server at `version`, asking for a sensitive `api_key` (or, when
/// `broken`, one that exits at once).
fn tiny_bundle(version: &str, broken: bool) -> Vec<u8> {
    let bundle = TinyBundle::new("hello")
        .version(version)
        .env("API_KEY", "${user_config.api_key}")
        .env("TINY_VERSION", version)
        .user_config(json!({"api_key": {"type": "string", "title": "API key", "sensitive": true, "required": true}}));
    if broken {
        bundle.script("process.exit(3);\n").zip()
    } else {
        bundle.zip()
    }
}

/// The registry test server, killed on drop.
struct Registry {
    child: Child,
    url: String,
    docs: PathBuf,
    files: PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    fn start(tree: &Tree) -> Self {
        let docs = tree.path("registry/docs");
        let files = tree.path("registry/files");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::create_dir_all(&files).unwrap();
        // Tests start the programs they test against.
        #[allow(clippy::disallowed_methods)]
        let mut child = Command::new(bin("mcp-registry"))
            .arg("--dir")
            .arg(&docs)
            .arg("--files")
            .arg(&files)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_owned();
        Self {
            child,
            url,
            docs,
            files,
        }
    }

    /// Publishes version `version` of `io.github.acme/hello` as a bundle.
    fn publish(&self, version: &str, broken: bool) {
        let bytes = tiny_bundle(version, broken);
        let name = format!("hello-{version}.mcpb");
        std::fs::write(self.files.join(&name), &bytes).unwrap();
        let sha = mcpapp_install_sha256(&bytes);
        let document = json!({
            "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
            "name": "io.github.acme/hello",
            "title": "Hello",
            "description": "A tiny server that says what it was given",
            "version": version,
            "packages": [{
                "registryType": "mcpb",
                "identifier": format!("{}/files/{name}", self.url),
                "fileSha256": sha,
                "transport": {"type": "stdio"}
            }]
        });
        std::fs::write(
            self.docs.join(format!("hello-{version}.json")),
            document.to_string(),
        )
        .unwrap();
    }
}

/// SHA-256 in hex, through `sha256sum` (the test needs no hashing crate of its own).
fn mcpapp_install_sha256(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b");
    std::fs::write(&file, bytes).unwrap();
    #[allow(clippy::disallowed_methods)]
    let output = Command::new("sha256sum").arg(&file).output().unwrap();
    stdout(&output)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn a_local_registry_drives_install_installed_update_and_uninstall_with_a_secret_kept_apart() {
    const SECRET: &str = "hello-s3cret-7d41c0";
    let tree = Tree::new();
    let registry = Registry::start(&tree);
    registry.publish("1.0.0", false);
    tree.write(
        "appsettings.json",
        &json!({"McpApps": {
            "Enabled": true,
            "DiscoveryPaths": ["apps"],
            "SecretsFile": "state/secrets.json",
            // The apps' HOME and TMPDIR, for the probe starts and serve alike.
            "StateDirectory": "state",
            "Registries": [{"Name": "local", "Url": registry.url}],
            "Supervision": {"HealthCheckIntervalMs": 0, "AutoRestart": false}
        }})
        .to_string(),
    );
    let config = ["--config", "appsettings.json"];
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .chain(&config)
            .map(|s| (*s).to_owned())
            .collect()
    };
    let run = |args: &[&str]| {
        let args = with(args);
        cli(&tree, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };

    // Without the required secret nothing is installed, and the flag to pass is named.
    let missing = run(&["install", "io.github.acme/hello", "--yes"]);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("pass --set api_key=…"),
        "{}",
        stderr(&missing)
    );
    assert!(!tree.path("apps/hello").exists());

    let out = ok(&run(&[
        "install",
        "io.github.acme/hello",
        "--set",
        &format!("api_key={SECRET}"),
        "--yes",
    ]));
    assert!(out.contains("Install Hello 1.0.0 as app 'hello'"), "{out}");
    assert!(out.contains("environment API_KEY=<secret>"), "{out}");
    assert!(out.contains("installed hello 1.0.0"), "{out}");
    assert!(!out.contains(SECRET));

    let listed: Value = serde_json::from_str(&ok(&run(&["installed", "--json"]))).unwrap();
    assert_eq!(listed[0]["id"], "hello");
    assert_eq!(listed[0]["version"], "1.0.0");
    assert_eq!(listed[0]["source"], "registry");
    assert_eq!(listed[0]["latest"], "1.0.0");

    let served = serve(&tree);
    wait_for(&served, "hello", "Running");
    let env = call(
        &served,
        &tree,
        "hello",
        "get_env",
        &json!({"name": "API_KEY"}),
    );
    assert_eq!(
        env["structuredContent"]["value"], SECRET,
        "the app receives its secret"
    );

    // Another app refers to the same name: it is not its secret, so it cannot start.
    tree.write(
        "apps/thief/openclaw.mcpapp.json",
        &json!({"id": "thief", "command": "node", "arguments": [tree.path("apps/hello/.mcpapp-runtime/1.0.0/bundle/server/index.js")],
                "environment": {"API_KEY": "secret:API_KEY"}})
        .to_string(),
    );
    let thief = wait_for(&served, "thief", "Failed");
    let reason = thief["lastError"].as_str().unwrap();
    assert!(reason.contains("app thief has no secrets"), "{reason}");

    // A newer version: `update --check` says so and changes nothing.
    registry.publish("1.1.0", false);
    let check = ok(&run(&["update", "--check"]));
    assert_eq!(check.trim(), "hello: 1.0.0 -> 1.1.0");
    let listed: Value = serde_json::from_str(&ok(&run(&["installed", "--json"]))).unwrap();
    assert_eq!(
        (listed[0]["version"].as_str(), listed[0]["latest"].as_str()),
        (Some("1.0.0"), Some("1.1.0"))
    );

    // The update keeps the secret; the running gateway restarts the app on its own.
    let out = ok(&run(&["update", "hello", "--yes"]));
    assert!(out.contains("updated hello 1.0.0 -> 1.1.0"), "{out}");
    assert!(!tree.path("apps/hello/.mcpapp-runtime/1.0.0").exists());
    assert!(eventually_blocking(PATIENCE, || {
        let result = cli(
            &tree,
            &[
                "call",
                "hello",
                "get_env",
                r#"{"name": "TINY_VERSION"}"#,
                "--json",
                "--url",
                &served.url,
            ],
        );
        serde_json::from_str::<Value>(&stdout(&result))
            .is_ok_and(|v| v["structuredContent"]["value"] == "1.1.0")
    }));
    let env = call(
        &served,
        &tree,
        "hello",
        "get_env",
        &json!({"name": "API_KEY"}),
    );
    assert_eq!(env["structuredContent"]["value"], SECRET);

    // A version that does not start is rolled back: the manifest and runtime stay at 1.1.0.
    registry.publish("1.2.0", true);
    let failed = run(&["update", "hello", "--yes"]);
    assert_eq!(failed.status.code(), Some(1), "{}", stdout(&failed));
    assert!(
        stderr(&failed).contains("the installed app 'hello' did not start"),
        "{}",
        stderr(&failed)
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(tree.path("apps/hello/openclaw.mcpapp.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["version"], "1.1.0");
    assert!(tree.path("apps/hello/.mcpapp-runtime/1.1.0").is_dir());
    assert!(!tree.path("apps/hello/.mcpapp-runtime/1.2.0").exists());
    let env = call(
        &served,
        &tree,
        "hello",
        "get_env",
        &json!({"name": "API_KEY"}),
    );
    assert_eq!(env["structuredContent"]["value"], SECRET);

    // The value is in no file under the discovery path, no API answer and no log line.
    assert_eq!(
        files_containing(&tree.path("apps"), SECRET),
        Vec::<PathBuf>::new()
    );
    for path in [
        "/apps",
        "/apps/hello",
        "/apps/thief",
        "/apps/health",
        "/metrics",
    ] {
        let body = get(&format!("{}{path}", served.url));
        assert!(!body.is_empty() && !body.contains(SECRET), "{path}: {body}");
    }
    let store = tree.path("state/secrets.json");
    assert!(std::fs::read_to_string(&store).unwrap().contains(SECRET));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&store).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    let out = ok(&run(&["uninstall", "hello", "--yes"]));
    assert!(out.contains("removed hello"), "{out}");
    assert!(!tree.path("apps/hello").exists());
    assert!(!std::fs::read_to_string(&store).unwrap().contains(SECRET));
    eventually_blocking(PATIENCE, || {
        !get(&format!("{}/apps", served.url)).contains("\"hello\"")
    });
    drop(served);
    let log = std::fs::read_to_string(tree.path("serve.log")).unwrap();
    assert!(!log.is_empty() && !log.contains(SECRET), "{log}");
}
