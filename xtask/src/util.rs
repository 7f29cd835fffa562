//! Running cargo and other programs from xtask.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

/// Runs `cargo <args>` in `root` with the cargo that runs xtask, echoing the command line.
pub(crate) fn cargo(root: &Path, args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    println!("\n==> cargo {}", args.join(" "));
    // xtask is the workspace's script runner; starting cargo is its job.
    #[allow(clippy::disallowed_methods)]
    let status = Command::new(&cargo)
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("starting {cargo}"))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Runs `program args` with extra environment variables, echoing the command line.
pub(crate) fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> anyhow::Result<()> {
    println!("\n==> {program} {}", args.join(" "));
    // xtask is the workspace's script runner; starting programs is its job.
    #[allow(clippy::disallowed_methods)]
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .with_context(|| format!("starting {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}
