//! Integration tests of the `mcpapp-gateway` binary: real processes, real folders.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod cli;
mod deploy;
mod discover;
mod grants;
mod install;
mod oauth;
mod probe;
mod reload;
mod sandbox;
mod serve;
mod validate;

use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

/// The gateway binary built for this test run.
pub(crate) const GATEWAY: &str = env!("CARGO_BIN_EXE_mcpapp-gateway");

/// Runs the gateway with `args` in `cwd`.
pub(crate) fn gateway(cwd: &Path, args: &[&str]) -> Output {
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(GATEWAY)
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .output()
        .expect("the gateway binary runs");
    output
}

/// A running `serve`, as [`start_serve`] leaves it.
pub(crate) struct Started {
    pub(crate) child: Child,
    /// The main listener's URL, from the first line of stdout.
    pub(crate) url: String,
    /// The rest of stdout (`sandbox on http://…` comes next).
    pub(crate) lines: Lines<BufReader<ChildStdout>>,
}

/// Starts `command` (the gateway binary, or a wrapper that runs it) as
/// `serve --config appsettings.json --bind 127.0.0.1:0` in `cwd`, from an empty environment
/// plus `PATH` and `env`, so that the developer's `RUST_LOG`, `MCPAPP_TOKEN` or `MCPAPP_MODEL`
/// never reach the test; waits for its `listening on` line.
pub(crate) fn start_serve(
    mut command: Command,
    cwd: &Path,
    env: &[(&str, &str)],
    stderr: Stdio,
) -> Started {
    let mut child = command
        .args([
            "serve",
            "--config",
            "appsettings.json",
            "--bind",
            "127.0.0.1:0",
        ])
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("the gateway binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("serve's first line names its address, got {first:?}"))
        .to_owned();
    Started { child, url, lines }
}

/// A running `serve`, killed (with the apps it started) when dropped.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl From<Started> for Served {
    fn from(started: Started) -> Self {
        Self {
            child: started.child,
            url: started.url,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One loopback `GET` of `url` over HTTP/1.1 (`Connection: close`): the status line and
/// headers, lower-cased, and the body.
pub(crate) fn http_get(url: &str) -> (String, String) {
    use std::io::{Read, Write};
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
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_ascii_lowercase(), body.to_owned())
}

/// The body of [`http_get`].
pub(crate) fn get(url: &str) -> String {
    http_get(url).1
}

/// The gateway binary as a command, for [`start_serve`].
pub(crate) fn gateway_command() -> Command {
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    Command::new(GATEWAY)
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A temporary folder with helpers to write files.
pub(crate) struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub(crate) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}
