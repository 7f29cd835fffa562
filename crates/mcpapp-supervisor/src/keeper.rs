//! The keeper: a small companion process that kills every app process when the gateway dies,
//! however it dies.
//!
//! A supervisor that stops cleanly kills its apps' process groups itself, and dropping it does
//! the same without a runtime. Neither helps when the gateway is killed with SIGKILL (or by the
//! OOM killer): children that ignore the end of their stdin, and everything they started, live
//! on under PID 1. The keeper covers that case. It is the gateway's own executable started
//! again with [`KEEPER_ARG`], in its own process group, holding the read end of a pipe whose
//! only writer is the gateway. The gateway tells it, line by line, which process groups to
//! watch (`+PGID`) and forget (`-PGID`). When the pipe reaches end of file, which the kernel
//! guarantees once the gateway is gone, the keeper kills every group still listed and every
//! process that carries the gateway's tag in its environment ([`KEEPER_ENV`], which every child
//! and its descendants inherit), then exits.
//!
//! Limits, documented in docs/security.md: a process that both leaves its process group and
//! clears its environment escapes; so does anything started between the gateway's death and the
//! keeper's sweep by a process the sweep has not reached yet (the sweep repeats a few times to
//! narrow that window).
//!
//! Use it from a binary's `main`, before parsing arguments:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     if let Some(code) = mcpapp_supervisor::run_keeper_if_requested() {
//!         return code;
//!     }
//!     // ... parse arguments, then give the supervisor `Keeper::start()?` ...
//!     std::process::ExitCode::SUCCESS
//! }
//! ```

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal, kill, killpg};
use nix::unistd::Pid;
use tracing::warn;

/// The first argument that turns the gateway's executable into a keeper (the gateway's
/// tests spell it out to find keepers among processes).
pub(crate) const KEEPER_ARG: &str = "--mcpapp-keeper";

/// The environment variable that tags every app process (and, through inheritance, its
/// descendants) with the gateway instance that started it.
pub(crate) const KEEPER_ENV: &str = "MCPAPP_KEEPER";

/// Sweeps after end of file: processes forking while they are killed get a few more chances.
const SWEEPS: u32 = 5;
const SWEEP_PAUSE: Duration = Duration::from_millis(50);
/// How long dropping a keeper waits for it to finish its sweep and exit.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// The gateway's side of a running keeper process.
#[derive(Debug)]
pub struct Keeper {
    tag: String,
    process: Mutex<Option<(Child, ChildStdin)>>,
}

impl Keeper {
    /// Starts the current executable as a keeper. The binary must call
    /// [`run_keeper_if_requested`] first thing in `main`.
    ///
    /// # Errors
    /// The I/O error when the executable cannot be found or started.
    pub fn start() -> std::io::Result<Self> {
        // `/proc/self/exe` still works when the file was replaced or deleted since (an upgrade
        // in place); elsewhere fall back to the path the process was started from.
        let exe = ["/proc/self/exe"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .map_or_else(std::env::current_exe, Ok)?;
        Self::start_program(exe)
    }

    /// Starts `program` (an executable that calls [`run_keeper_if_requested`]) as a keeper.
    ///
    /// # Errors
    /// The I/O error when the program cannot be started.
    pub fn start_program(program: impl Into<PathBuf>) -> std::io::Result<Self> {
        let tag = new_tag();
        // The supervisor is the one crate allowed to start processes (docs/architecture.md).
        #[allow(clippy::disallowed_methods)]
        let mut command = Command::new(program.into());
        command
            .arg(KEEPER_ARG)
            .arg(&tag)
            // The keeper needs nothing of the gateway's environment, credentials least of all.
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            // Its own group: a Ctrl-C at the terminal reaches the gateway, which stops apps
            // cleanly, and not the keeper, which must outlive it.
            .process_group(0);
        let mut child = command.spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("the keeper has no stdin"))?;
        Ok(Self {
            tag,
            process: Mutex::new(Some((child, stdin))),
        })
    }

    /// The value of [`KEEPER_ENV`] in this gateway's children.
    pub(crate) fn tag(&self) -> &str {
        &self.tag
    }

    /// The keeper's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(|(child, _)| child.id())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Child, ChildStdin)>> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn say(&self, line: &str) {
        let mut process = self.lock();
        if let Some((_, stdin)) = process.as_mut()
            // A few bytes into a pipe the keeper drains continuously: this does not block.
            && let Err(err) = writeln!(stdin, "{line}")
        {
            warn!("the keeper process is gone ({err}); apps may outlive a killed gateway");
            process.take();
        }
    }

    /// Watch this process group.
    pub(crate) fn track(&self, pgid: i32) {
        self.say(&format!("+{pgid}"));
    }

    /// Forget this process group (it has been reaped; its id may be reused).
    pub(crate) fn untrack(&self, pgid: i32) {
        self.say(&format!("-{pgid}"));
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        let Some((mut child, stdin)) = self.lock().take() else {
            return;
        };
        // End of file: the keeper sweeps (normally finding nothing) and exits.
        drop(stdin);
        let deadline = Instant::now() + EXIT_WAIT;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

/// A tag no other gateway on this machine uses.
fn new_tag() -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS per process; mixing in the pid and the time keeps
    // two gateways started at once apart.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{}-{:016x}", std::process::id(), hasher.finish())
}

/// Runs the keeper when this process was started as one (its first argument is
/// `--mcpapp-keeper`), and returns its exit code; otherwise returns `None` at once.
pub fn run_keeper_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(KEEPER_ARG)) {
        return None;
    }
    let tag = args.next().unwrap_or_default();
    Some(run_keeper(&tag))
}

fn run_keeper(tag: &OsString) -> ExitCode {
    // Signals meant for the gateway's terminal or session must not end the keeper before the
    // gateway does; blocked, they stay pending for good. (SIGKILL cannot be blocked.)
    let mut signals = SigSet::empty();
    for signal in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
    ] {
        signals.add(signal);
    }
    let _ = signals.thread_block();

    let mut groups: HashSet<i32> = HashSet::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let parse = |id: &str| id.trim().parse::<i32>().ok();
        if let Some(pgid) = line.strip_prefix('+').and_then(parse) {
            // A group id of 0 or 1 would mean "my own group" or init: never signal those.
            if pgid > 1 {
                groups.insert(pgid);
            }
        } else if let Some(pgid) = line.strip_prefix('-').and_then(parse) {
            groups.remove(&pgid);
        }
    }
    let tag = tag.to_string_lossy().into_owned();
    for sweep in 0..SWEEPS {
        let mut found = false;
        for pgid in &groups {
            // ESRCH (the group is gone) is the normal outcome after the first sweep.
            found |= killpg(Pid::from_raw(*pgid), Signal::SIGKILL).is_ok();
        }
        if !tag.is_empty() {
            for pid in tagged_processes(&tag) {
                found |= kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok();
            }
        }
        if !found && sweep > 0 {
            break;
        }
        std::thread::sleep(SWEEP_PAUSE);
    }
    ExitCode::SUCCESS
}

/// Processes whose environment carries `KEEPER_ENV=tag`. Reading another process's
/// environment needs the same user (or root); processes we cannot read are not ours to kill.
fn tagged_processes(tag: &str) -> Vec<i32> {
    let needle = format!("{KEEPER_ENV}={tag}");
    let own = i32::try_from(std::process::id()).unwrap_or_default();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != own && *pid > 1)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|entry| entry == needle.as_bytes())
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_differ_between_keepers() {
        assert_ne!(new_tag(), new_tag());
        assert!(new_tag().starts_with(&format!("{}-", std::process::id())));
    }
}
