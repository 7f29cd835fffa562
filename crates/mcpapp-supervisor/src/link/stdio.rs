//! The stdio link: a child process in its own process group, speaking newline-delimited
//! JSON-RPC on stdin and stdout, with stderr kept in a ring buffer.
//!
//! One task writes stdin (whole lines only), one reads stdout, one reads stderr, and one owns
//! the child and reports how it ended. The process group is killed when the link closes, when
//! the link is dropped, and when the supervisor is dropped, so no child outlives the gateway.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{Instrument, debug, warn};

use mcpapp_session::{CloseFuture, Link, LinkEvent, LinkEvents, Origin, RawMessage, RequestKey};

use crate::keeper::{KEEPER_ENV, Keeper};

/// Longest stdout line accepted; a longer one ends the link (it cannot be a sane message).
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// Lines of stderr kept per run.
pub(crate) const STDERR_LINES: usize = 200;
/// The stdout line buffer is kept between lines up to this size; one a long line (a big
/// listing) grew past it is let go, rather than held for the link's life by every app.
const KEPT_LINE_BUFFER: usize = 4 * 1024;
/// The stderr reader's buffer: apps write little there, and every app has one.
const STDERR_BUFFER: usize = 1024;

/// The last lines an app wrote to stderr, kept per *run* (one start attempt, so one process
/// for stdio apps): the current run's and the previous run's, so that what an earlier process
/// said is never taken for what the current one said.
///
/// The app keeps one tail for its lifetime; [`StderrTail::begin_run`] gives each run a handle
/// of its own to write with. A line written through the handle of the previous run (a dying
/// process's last words, read late) still lands in the previous run; lines of older runs are
/// dropped. Reads always see the app's current and previous run, whichever handle reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail {
    runs: Arc<Mutex<StderrRuns>>,
    /// The run this handle writes to; 0, before any run, for the app's own handle.
    run: u64,
}

#[derive(Debug, Default)]
struct StderrRuns {
    /// The number of the current run (0 before the first).
    current_run: u64,
    current: VecDeque<String>,
    previous: VecDeque<String>,
}

impl StderrTail {
    fn runs(&self) -> std::sync::MutexGuard<'_, StderrRuns> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a new run: the current lines become the previous run's, and the returned handle
    /// writes the new run's lines.
    pub(crate) fn begin_run(&self) -> StderrTail {
        let mut runs = self.runs();
        runs.previous = std::mem::take(&mut runs.current);
        runs.current_run += 1;
        StderrTail {
            runs: self.runs.clone(),
            run: runs.current_run,
        }
    }

    fn push(&self, line: String) {
        let mut runs = self.runs();
        let lines = if self.run == runs.current_run {
            &mut runs.current
        } else if self.run + 1 == runs.current_run {
            &mut runs.previous
        } else {
            return;
        };
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The current run's kept lines, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.runs().current.iter().cloned().collect()
    }

    /// The previous run's kept lines, oldest first.
    pub(crate) fn previous_lines(&self) -> Vec<String> {
        self.runs().previous.iter().cloned().collect()
    }

    /// The current run's last `n` lines, oldest first, for an error message.
    pub(crate) fn last(&self, n: usize) -> Vec<String> {
        let runs = self.runs();
        let skip = runs.current.len().saturating_sub(n);
        runs.current.iter().skip(skip).cloned().collect()
    }
}

/// The process groups of every live child, so that dropping the supervisor can kill them all
/// synchronously, without a runtime.
/// With a keeper, every group is also reported to it, so that the groups die with the gateway
/// even when it is killed.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessTable {
    groups: Arc<Mutex<HashSet<i32>>>,
    keeper: Option<Arc<Keeper>>,
}

impl ProcessTable {
    pub(crate) fn with_keeper(keeper: Option<Arc<Keeper>>) -> Self {
        Self {
            groups: Arc::default(),
            keeper,
        }
    }

    fn add(&self, pgid: i32) {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pgid);
        if let Some(keeper) = &self.keeper {
            keeper.track(pgid);
        }
    }

    fn remove(&self, pgid: i32) {
        let removed = self
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pgid);
        if removed && let Some(keeper) = &self.keeper {
            keeper.untrack(pgid);
        }
    }

    /// The tag a child carries in its environment for the keeper, if there is one.
    fn keeper_tag(&self) -> Option<&str> {
        self.keeper.as_deref().map(Keeper::tag)
    }

    /// Kills every process group still listed.
    pub(crate) fn kill_all(&self) {
        let groups: Vec<i32> = self
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for pgid in groups {
            kill_group(pgid, Signal::SIGKILL);
        }
    }
}

fn kill_group(pgid: i32, signal: Signal) {
    // ESRCH (the group is already gone) is the expected outcome once it has exited.
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// Kills the process group when dropped, unless it has already been reaped (after which the
/// id may belong to someone else).
#[derive(Debug)]
struct GroupGuard {
    pgid: i32,
    table: ProcessTable,
    reaped: std::sync::atomic::AtomicBool,
}

impl GroupGuard {
    fn mark_reaped(&self) {
        self.reaped.store(true, std::sync::atomic::Ordering::SeqCst);
        self.table.remove(self.pgid);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.reaped.load(std::sync::atomic::Ordering::SeqCst) {
            kill_group(self.pgid, Signal::SIGKILL);
            self.table.remove(self.pgid);
        }
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub(crate) struct StdioSpawn {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) cwd: PathBuf,
    /// The whole environment of the child, already resolved (no `env:` references left);
    /// nothing else of the gateway's environment reaches it.
    pub(crate) env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub(crate) stderr: StderrTail,
    pub(crate) processes: ProcessTable,
}

/// A running child.
#[derive(Debug)]
pub(crate) struct StdioLink {
    stdin: Mutex<Option<mpsc::UnboundedSender<String>>>,
    terminate: Mutex<Option<oneshot::Sender<Duration>>>,
    exited: watch::Receiver<Option<String>>,
    pid: u32,
    _guard: Arc<GroupGuard>,
}

/// Describes how a process ended, for people.
fn describe_exit(status: &std::io::Result<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => {
                let name =
                    Signal::try_from(signal).map_or_else(|_| String::new(), |s| format!(" ({s})"));
                format!("was killed by signal {signal}{name}")
            }
            _ => format!("ended ({status})"),
        },
        Err(err) => format!("could not be waited for: {err}"),
    }
}

/// Starts the child and the tasks that serve it.
pub(crate) fn spawn(spec: &StdioSpawn, events: LinkEvents) -> std::io::Result<StdioLink> {
    // The supervisor is the one crate allowed to start processes (see docs/architecture.md).
    #[allow(clippy::disallowed_methods)]
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .envs(spec.processes.keeper_tag().map(|tag| (KEEPER_ENV, tag)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that everything it starts can be signalled together and a
        // Ctrl-C at the gateway's terminal does not reach it directly.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let pid = child.id().unwrap_or_default();
    let pgid = i32::try_from(pid).unwrap_or_default();
    spec.processes.add(pgid);
    let guard = Arc::new(GroupGuard {
        pgid,
        table: spec.processes.clone(),
        reaped: std::sync::atomic::AtomicBool::new(false),
    });

    let (stdin_tx, mut stdin_rx) = mpsc::unbounded_channel::<String>();
    let (terminate_tx, terminate_rx) = oneshot::channel::<Duration>();
    let (exited_tx, exited_rx) = watch::channel::<Option<String>>(None);
    let span = tracing::Span::current();

    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(
            async move {
                while let Some(line) = stdin_rx.recv().await {
                    let mut batch = line;
                    batch.push('\n');
                    // Drain what is queued so one flush carries it all.
                    while let Ok(more) = stdin_rx.try_recv() {
                        batch.push_str(&more);
                        batch.push('\n');
                    }
                    if stdin.write_all(batch.as_bytes()).await.is_err()
                        || stdin.flush().await.is_err()
                    {
                        break;
                    }
                }
                // Dropping stdin closes it: the child sees end of input.
            }
            .instrument(span.clone()),
        );
    }

    if let Some(stderr) = child.stderr.take() {
        let tail = spec.stderr.clone();
        tokio::spawn(
            async move {
                let mut lines = BufReader::with_capacity(STDERR_BUFFER, stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    debug!(target: "mcpapp_supervisor::stderr", "{line}");
                    tail.push(line);
                }
            }
            .instrument(span.clone()),
        );
    }

    let stdout = child.stdout.take();
    let child_guard = guard.clone();
    tokio::spawn(
        async move {
            let status = tokio::select! {
                status = child.wait() => status,
                grace = terminate_rx => {
                    let grace = grace.unwrap_or(Duration::ZERO);
                    kill_group(pgid, Signal::SIGTERM);
                    match tokio::time::timeout(grace, child.wait()).await {
                        Ok(status) => status,
                        Err(_) => {
                            warn!(pid, "the app did not stop within {grace:?}; killing it");
                            kill_group(pgid, Signal::SIGKILL);
                            child.wait().await
                        }
                    }
                }
            };
            // Anything the app left running in its group goes with it.
            kill_group(pgid, Signal::SIGKILL);
            child_guard.mark_reaped();
            let _ = exited_tx.send(Some(describe_exit(&status)));
        }
        .instrument(span.clone()),
    );

    if let Some(stdout) = stdout {
        let mut exited = exited_rx.clone();
        tokio::spawn(
            async move {
                let mut reader = BufReader::new(stdout);
                let mut buf = Vec::new();
                let end = loop {
                    buf.clear();
                    match (&mut reader)
                        .take(MAX_LINE_BYTES + 1)
                        .read_until(b'\n', &mut buf)
                        .await
                    {
                        Ok(0) => break None,
                        Ok(_) if buf.len() as u64 > MAX_LINE_BYTES => {
                            break Some(format!(
                                "the app wrote a line of more than {MAX_LINE_BYTES} bytes to stdout"
                            ));
                        }
                        Ok(_) => {
                            let text = String::from_utf8_lossy(&buf);
                            let line = text.trim();
                            if line.is_empty() {
                                continue;
                            }
                            let event = match RawMessage::parse(line) {
                                Ok(message) => LinkEvent::Message {
                                    message,
                                    origin: Origin::Stdio,
                                },
                                Err(_) => LinkEvent::Garbage(line.chars().take(200).collect()),
                            };
                            if events.send(event).is_err() {
                                break None;
                            }
                            if buf.capacity() > KEPT_LINE_BUFFER {
                                buf = Vec::new();
                            }
                        }
                        Err(err) => break Some(format!("reading the app's stdout failed: {err}")),
                    }
                };
                // Wait for the exit status so the reason says how the process ended; a child
                // that closed stdout but lives on is stopped.
                let status = match tokio::time::timeout(
                    Duration::from_secs(2),
                    exited.wait_for(Option::is_some),
                )
                .await
                {
                    Ok(Ok(status)) => status.clone().unwrap_or_default(),
                    _ => {
                        kill_group(pgid, Signal::SIGKILL);
                        "closed its stdout and was stopped".to_owned()
                    }
                };
                let reason = match end {
                    Some(problem) => format!("{problem}; the process {status}"),
                    None => format!("the process {status}"),
                };
                let _ = events.send(LinkEvent::Closed(reason));
            }
            .instrument(span),
        );
    }

    Ok(StdioLink {
        stdin: Mutex::new(Some(stdin_tx)),
        terminate: Mutex::new(Some(terminate_tx)),
        exited: exited_rx,
        pid,
        _guard: guard,
    })
}

impl StdioLink {
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }
}

impl Link for StdioLink {
    /// Writes the message as one line; `request` means nothing on stdio.
    fn send(&self, message: RawMessage, _request: Option<RequestKey>) {
        let stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(stdin) = stdin.as_ref() {
            // A closed channel means the writer ended with the process; the exit is reported
            // through stdout.
            let _ = stdin.send(message.into_string());
        }
    }

    /// Closes stdin, sends SIGTERM to the group, waits up to `grace`, then kills it.
    fn close(&self, grace: Duration) -> CloseFuture<'_> {
        Box::pin(async move {
            self.stdin.lock().unwrap_or_else(|p| p.into_inner()).take();
            let terminate = self
                .terminate
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(terminate) = terminate {
                let _ = terminate.send(grace);
            }
            let mut exited = self.exited.clone();
            let _ = exited.wait_for(Option::is_some).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_has_its_own_tail_and_late_lines_stay_with_their_run() {
        let app = StderrTail::default();
        let first = app.begin_run();
        first.push("first 1".into());
        first.push("first 2".into());
        assert_eq!(app.lines(), ["first 1", "first 2"]);
        assert!(app.previous_lines().is_empty());

        let second = app.begin_run();
        assert!(app.lines().is_empty());
        assert_eq!(app.last(5), Vec::<String>::new());
        // The first process's last words, read after the second run began.
        first.push("first 3".into());
        second.push("second 1".into());
        assert_eq!(app.lines(), ["second 1"]);
        assert_eq!(app.previous_lines(), ["first 1", "first 2", "first 3"]);

        let third = app.begin_run();
        first.push("first 4".into());
        second.push("second 2".into());
        third.push("third 1".into());
        assert_eq!(app.lines(), ["third 1"]);
        assert_eq!(app.previous_lines(), ["second 1", "second 2"]);
    }

    #[test]
    fn a_run_keeps_its_last_lines() {
        let app = StderrTail::default();
        let run = app.begin_run();
        for i in 0..STDERR_LINES + 10 {
            run.push(format!("line {i}"));
        }
        let lines = app.lines();
        assert_eq!(lines.len(), STDERR_LINES);
        assert_eq!(lines[0], "line 10");
        assert_eq!(
            app.last(2),
            [
                format!("line {}", STDERR_LINES + 8),
                format!("line {}", STDERR_LINES + 9)
            ]
        );
    }
}
