//! Integration tests of the `mcpapp-gateway` binary: real processes, real folders.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod cli;
mod deploy;
mod discover;
mod reload;
mod serve;
mod validate;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
