//! Integration tests of mcpapp-discovery against real folders in a temporary directory.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod config_file;
mod environment;
mod filtering;
mod isolation;
mod long_values;
mod robustness;
mod scanning;

use std::path::{Path, PathBuf};

use mcpapp_discovery::{Discovery, DiscoveryReport};
use mcpapp_manifest::McpAppsConfig;

/// A temporary folder tree to scan.
pub(crate) struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Writes `text` to `rel`, creating folders.
    pub(crate) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes a manifest `rel/openclaw.mcpapp.json`.
    pub(crate) fn manifest(&self, rel: &str, text: &str) -> PathBuf {
        self.write(&format!("{rel}/openclaw.mcpapp.json"), text)
    }

    /// A minimal valid stdio manifest for `id` in folder `rel`.
    pub(crate) fn app(&self, rel: &str, id: &str) -> PathBuf {
        self.manifest(rel, &format!(r#"{{"id":"{id}","command":"run-{id}"}}"#))
    }
}

/// An enabled configuration with default rules.
pub(crate) fn enabled() -> McpAppsConfig {
    McpAppsConfig {
        enabled: true,
        ..McpAppsConfig::default()
    }
}

/// Scans `roots` (relative to the tree) with `config`.
pub(crate) fn scan(tree: &Tree, config: McpAppsConfig, roots: &[&str]) -> DiscoveryReport {
    let paths = roots
        .iter()
        .map(|r| tree.path(r).display().to_string())
        .collect();
    Discovery::builder(config)
        .discovery_paths(paths, tree.root())
        .build()
        .expect("configuration is valid")
        .scan()
}

/// The ids found, in order.
pub(crate) fn ids(report: &DiscoveryReport) -> Vec<&str> {
    report.apps.iter().map(|a| a.id()).collect()
}
