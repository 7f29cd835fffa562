//! Shared helpers for mcpapp's integration tests (a dev-dependency only).
//!
//! - [`bin`] finds a workspace binary such as `fixture-app` or `grocery-inventory`, building
//!   it when the test run has not;
//! - [`HttpApp`] runs a test app in HTTP mode on a free loopback port and kills it on drop;
//! - [`AppsDir`] writes app folders with manifests and runs discovery over them;
//! - [`live`], [`live_in_groups`] and [`children_of`] read the process table to show which
//!   processes really remain.
//!
//! ```no_run
//! let apps = mcpapp_testkit::AppsDir::new();
//! apps.stdio_app("echo", &mcpapp_testkit::bin("fixture-app"), &["stdio"], "{}");
//! let report = apps.discover();
//! assert_eq!(report.apps.len(), 1);
//! ```

// Test support: panicking with a clear message is the right response to a broken fixture.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use mcpapp_discovery::{Discovery, DiscoveryReport};
use mcpapp_manifest::McpAppsConfig;

/// Which package builds each test binary.
fn package_of(name: &str) -> &str {
    match name {
        "fixture-app" | "grocery-inventory" | "mcp-registry" | "oauth-server" => name,
        "mcpapp-gateway" => "mcpapp-gateway",
        other => panic!("unknown test binary {other}"),
    }
}

/// The folder the running test executable was built into (`target/debug`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/all-<hash> -> target/debug
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// The path of a workspace binary. `cargo test --workspace` builds every binary before any
/// test runs; when a narrower run did not, it is built here, once per test process.
pub fn bin(name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let path = target_dir().join(name);
    if path.exists() {
        return path;
    }
    let mut built = BUILT.lock().unwrap();
    if !built.iter().any(|b| b == name) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut command = Command::new(cargo);
        command.args(["build", "-p", package_of(name), "--bin", name]);
        // Benchmarks run from target/release and want release binaries beside them.
        if !cfg!(debug_assertions) {
            command.arg("--release");
        }
        let status = command.status().expect("cargo runs");
        assert!(status.success(), "building {name} failed");
        built.push(name.to_owned());
    }
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// A test app serving Streamable HTTP on a free loopback port; killed on drop.
#[derive(Debug)]
pub struct HttpApp {
    child: Child,
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl HttpApp {
    /// Starts `bin http --bind 127.0.0.1:0 ARGS...` and waits for its `listening on` line.
    pub fn start(bin_name: &str, args: &[&str]) -> Self {
        let mut child = Command::new(bin(bin_name))
            .args(["http", "--bind", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("{bin_name} printed {line:?} instead of its address"))
            .to_owned();
        Self { child, url }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server now.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpApp {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How a test app is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// A child process the supervisor starts, speaking MCP on stdio.
    Stdio,
    /// A Streamable HTTP server the test starts on a free loopback port.
    Http,
}

impl Over {
    /// Both transports, for tests that must hold over each.
    pub const BOTH: [Over; 2] = [Over::Stdio, Over::Http];
}

/// A temporary folder of app folders, each with a manifest.
#[derive(Debug)]
pub struct AppsDir {
    dir: tempfile::TempDir,
}

impl Default for AppsDir {
    fn default() -> Self {
        Self::new()
    }
}

impl AppsDir {
    /// An empty folder.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `<id>/openclaw.mcpapp.json` with `manifest` (a JSON object text).
    pub fn manifest(&self, id: &str, manifest: &serde_json::Value) -> PathBuf {
        let dir = self.dir.path().join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("openclaw.mcpapp.json");
        std::fs::write(&path, serde_json::to_string_pretty(manifest).unwrap()).unwrap();
        path
    }

    /// A stdio app running `command args`; `extra` is merged into the manifest (a JSON
    /// object text, e.g. `{"requestTimeoutSeconds": 1}`).
    pub fn stdio_app(&self, id: &str, command: &Path, args: &[&str], extra: &str) -> PathBuf {
        let mut manifest = serde_json::json!({
            "id": id,
            "transport": "stdio",
            "command": command,
            "arguments": args,
            "startupTimeoutSeconds": 30,
        });
        merge(&mut manifest, extra);
        self.manifest(id, &manifest)
    }

    /// An http app at `url`; `extra` is merged into the manifest.
    pub fn http_app(&self, id: &str, url: &str, extra: &str) -> PathBuf {
        let mut manifest = serde_json::json!({
            "id": id,
            "transport": "http",
            "url": url,
            "startupTimeoutSeconds": 30,
        });
        merge(&mut manifest, extra);
        self.manifest(id, &manifest)
    }

    /// Adds app `id` running the test binary `bin_name` over `over`. For HTTP the server is
    /// started here and returned: keep it alive as long as the app should be reachable.
    pub fn test_app(&self, id: &str, bin_name: &str, over: Over) -> Option<HttpApp> {
        match over {
            Over::Stdio => {
                self.stdio_app(id, &bin(bin_name), &["stdio"], "{}");
                None
            }
            Over::Http => {
                let server = HttpApp::start(bin_name, &[]);
                self.http_app(id, &server.url, "{}");
                Some(server)
            }
        }
    }

    /// Runs discovery over this folder with default rules.
    pub fn discover(&self) -> DiscoveryReport {
        self.discover_with(McpAppsConfig {
            enabled: true,
            ..McpAppsConfig::default()
        })
    }

    /// Runs discovery over this folder with `config` (its discovery paths are replaced).
    pub fn discover_with(&self, config: McpAppsConfig) -> DiscoveryReport {
        Discovery::builder(config)
            .discovery_paths(vec![self.path().display().to_string()], self.path())
            .build()
            .unwrap()
            .scan()
    }
}

fn merge(manifest: &mut serde_json::Value, extra: &str) {
    let extra: serde_json::Value = serde_json::from_str(extra).unwrap();
    if let (Some(target), Some(extra)) = (manifest.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            target.insert(key.clone(), value.clone());
        }
    }
}

/// One row of the process table.
struct ProcStat {
    pid: u32,
    ppid: u32,
    pgrp: u32,
    /// Not a zombie or dead: it is still running.
    alive: bool,
}

/// Reads the process table from `/proc`.
fn processes() -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the parenthesised command name: state, ppid, pgrp.
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            let pgrp = fields.next()?.parse().ok()?;
            Some(ProcStat {
                pid,
                ppid,
                pgrp,
                alive: state != "Z" && state != "X",
            })
        })
        .collect()
}

/// The process ids among `pids` that are alive (present in the process table and not
/// zombies).
pub fn live(pids: &[u32]) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.alive && pids.contains(&p.pid))
        .map(|p| p.pid)
        .collect()
}

/// Live processes (not zombies) in any of the process groups `groups`: a supervised child and
/// everything it started share its group.
pub fn live_in_groups(groups: &[u32]) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.alive && groups.contains(&p.pgrp))
        .map(|p| p.pid)
        .collect()
}

/// Live children of the process `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.alive && p.ppid == parent)
        .map(|p| p.pid)
        .collect()
}

/// Polls `check` until it is true or `limit` passes; for conditions the system offers no
/// event for (a process leaving the process table).
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
