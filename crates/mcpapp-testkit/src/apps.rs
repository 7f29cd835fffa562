//! Test apps and app folders: workspace binaries found (or built), HTTP test apps on free
//! loopback ports, and folders of manifests run through discovery.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

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

/// Every file under `root` whose bytes contain `needle`: where a secret must never be written.
pub fn files_containing(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && std::fs::read(&path)
                    .unwrap_or_default()
                    .windows(needle.len())
                    .any(|w| w == needle.as_bytes())
            {
                found.push(path);
            }
        }
    }
    found
}
