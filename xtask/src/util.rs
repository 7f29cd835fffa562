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

/// `npm ci` of the lockfile in `dir`, quietly (no audit, no funding notes).
pub(crate) fn npm_ci(dir: &std::path::Path, envs: &[(&str, &str)]) -> anyhow::Result<()> {
    let prefix = dir.display().to_string();
    run(
        "npm",
        &[
            "ci",
            "--prefix",
            &prefix,
            "--no-audit",
            "--no-fund",
            "--silent",
        ],
        envs,
    )
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

/// Runs `work` on every job, `workers` at a time on scoped threads, and returns the results
/// in the order they finished.
pub(crate) fn in_parallel<J: Send, R: Send>(
    jobs: Vec<J>,
    workers: usize,
    work: impl Fn(J) -> R + Sync,
) -> Vec<R> {
    use std::sync::{Mutex, PoisonError};
    let queue = Mutex::new(jobs);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(PoisonError::into_inner).pop();
                    let Some(job) = next else { break };
                    let result = work(job);
                    done.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(result);
                }
            });
        }
    });
    done.into_inner().unwrap_or_else(PoisonError::into_inner)
}
