//! The MCP conformance kit (`shared/conformance/`, read-only): finding it, installing it under
//! `target/` with its `setup.sh`, and reading the paths it prints (both suites: 0.1.16 and
//! the 0.2 one with the requirement sets, and both reference servers).

// Running the kit's installer is xtask's job.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail, ensure};

/// The environment variable naming the kit's folder when it is not in `shared/conformance`
/// beside or above the workspace.
pub(crate) const KIT_VARIABLE: &str = "MCPAPP_CONFORMANCE_KIT";

/// The installed kit: absolute paths of what the suite needs.
#[derive(Debug, Clone)]
pub(crate) struct Kit {
    /// The folder it is installed in (`target/conformance`).
    pub(crate) dir: PathBuf,
    /// Node 22.
    pub(crate) node: PathBuf,
    /// `tsx`'s CLI, which runs the TypeScript reference server.
    pub(crate) tsx: PathBuf,
    /// The suite's CLI.
    pub(crate) conformance: PathBuf,
    /// The reference server's source.
    pub(crate) reference_server: PathBuf,
    /// The suite's version, from its `package.json`.
    pub(crate) version: String,
    /// The 0.2 suite with the frozen requirement sets (`CONFORMANCE_NEXT`).
    pub(crate) conformance_next: PathBuf,
    /// The dual-era reference server's source (`REFERENCE_SERVER_NEXT`).
    pub(crate) reference_server_next: PathBuf,
    /// What the dual-era server itself fails under the 2026-07-28 set
    /// (`EXPECTED_FAILURES_2026_07_28`).
    pub(crate) expected_failures_2026_07_28: PathBuf,
    /// The 0.2 suite's version.
    pub(crate) version_next: String,
}

impl Kit {
    /// The 0.2 package's folder (`requirements/` is in it).
    pub(crate) fn package_next(&self) -> PathBuf {
        package_of(&self.conformance_next)
    }
}

/// `…/PACKAGE/dist/index.js` → `…/PACKAGE`.
fn package_of(cli: &Path) -> PathBuf {
    cli.parent()
        .and_then(Path::parent)
        .map_or_else(PathBuf::new, Path::to_path_buf)
}

/// The `version` of the package whose CLI is `cli`.
fn version_of(cli: &Path) -> String {
    std::fs::read_to_string(package_of(cli).join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|json| json["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Installs the kit into `dest` (idempotent; about 10 s when npm's cache is warm).
pub(crate) fn install(root: &Path, dest: &Path) -> anyhow::Result<Kit> {
    let setup = find_setup(root)?;
    ensure!(
        on_path("npm"),
        "npm is missing: the conformance kit installs Node 22 and the suite from the npm \
         registry with `npm ci`. Install npm (as root: apt-get install -y \
         --no-install-recommends npm) and run again"
    );
    println!("\n==> {} {}", setup.display(), dest.display());
    let output = Command::new("bash")
        .arg(&setup)
        .arg(dest)
        .stdin(Stdio::null())
        // npm's own messages go straight to the terminal.
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", setup.display()))?;
    ensure!(
        output.status.success(),
        "{} failed ({}); npm's messages are above",
        setup.display(),
        output.status
    );
    let stdout = String::from_utf8(output.stdout).context("setup.sh printed non-UTF-8")?;
    let kit = parse_setup_output(&stdout, dest)?;
    for path in [
        &kit.node,
        &kit.tsx,
        &kit.conformance,
        &kit.reference_server,
        &kit.conformance_next,
        &kit.reference_server_next,
        &kit.expected_failures_2026_07_28,
    ] {
        ensure!(
            path.is_file(),
            "setup.sh named {}, which does not exist",
            path.display()
        );
    }
    Ok(kit)
}

/// `$MCPAPP_CONFORMANCE_KIT/setup.sh`, else `shared/conformance/setup.sh` in the nearest of
/// the workspace's parent folders that has one (the main checkout and worktrees both find it).
fn find_setup(root: &Path) -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(KIT_VARIABLE) {
        let setup = PathBuf::from(dir).join("setup.sh");
        ensure!(
            setup.is_file(),
            "{KIT_VARIABLE} names a folder without setup.sh: {}",
            setup.display()
        );
        return Ok(setup);
    }
    for dir in root.ancestors().skip(1) {
        let setup = dir.join("shared/conformance/setup.sh");
        if setup.is_file() {
            return Ok(setup);
        }
    }
    bail!(
        "the MCP conformance kit (shared/conformance/setup.sh) is in no parent folder of {}; \
         set {KIT_VARIABLE} to its folder",
        root.display()
    )
}

/// Whether `program` is an executable file in a folder of `$PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Reads setup.sh's `NAME=VALUE` lines (other lines are ignored) and the suite's version.
fn parse_setup_output(stdout: &str, dest: &Path) -> anyhow::Result<Kit> {
    let value = |name: &str| -> anyhow::Result<PathBuf> {
        stdout
            .lines()
            .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix('='))
            .map(PathBuf::from)
            .with_context(|| format!("setup.sh printed no {name}= line; it printed:\n{stdout}"))
    };
    let conformance = value("CONFORMANCE")?;
    let conformance_next = value("CONFORMANCE_NEXT")?;
    Ok(Kit {
        dir: dest.to_path_buf(),
        node: value("NODE")?,
        tsx: value("TSX")?,
        version: version_of(&conformance),
        conformance,
        reference_server: value("REFERENCE_SERVER")?,
        version_next: version_of(&conformance_next),
        conformance_next,
        reference_server_next: value("REFERENCE_SERVER_NEXT")?,
        expected_failures_2026_07_28: value("EXPECTED_FAILURES_2026_07_28")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lines_setup_prints_and_ignores_others() {
        let out = "noise\nNODE=/k/node\nTSX=/k/tsx.mjs\n\
                   CONFORMANCE=/k/c/dist/index.js\nREFERENCE_SERVER=/k/ref.ts\n\
                   CONFORMANCE_NEXT=/k/n/dist/index.js\nREFERENCE_SERVER_NEXT=/k/next.ts\n\
                   EXPECTED_FAILURES_2026_07_28=/k/x.yml\n";
        let kit = parse_setup_output(out, Path::new("/k")).unwrap();
        assert_eq!(kit.node, Path::new("/k/node"));
        assert_eq!(kit.tsx, Path::new("/k/tsx.mjs"));
        assert_eq!(kit.conformance, Path::new("/k/c/dist/index.js"));
        assert_eq!(kit.reference_server, Path::new("/k/ref.ts"));
        assert_eq!(kit.version, "unknown");
        assert_eq!(kit.conformance_next, Path::new("/k/n/dist/index.js"));
        assert_eq!(kit.package_next(), Path::new("/k/n"));
        assert_eq!(kit.reference_server_next, Path::new("/k/next.ts"));
        assert_eq!(kit.expected_failures_2026_07_28, Path::new("/k/x.yml"));
    }

    #[test]
    fn a_missing_line_is_named() {
        let err = parse_setup_output("NODE=/k/node\n", Path::new("/k")).unwrap_err();
        assert!(err.to_string().contains("CONFORMANCE="), "{err}");
    }
}
