//! The stdio link: a child process in its own process group, speaking newline-delimited
//! JSON-RPC on stdin and stdout, with stderr kept in a ring buffer.
//!
//! One task writes stdin (whole lines only), one reads stdout, one reads stderr, and one owns
//! the child and reports how it ended. The stdout reader reports the link closed once the
//! child is reaped and the stderr reader has reached the end of its pipe (for a second at
//! most), so a failure's reason quotes the app's last words. The process group is killed when
//! the link closes, when the link is dropped, and when the supervisor is dropped, so no child
//! outlives the gateway.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
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
    pub(crate) args: Vec<std::ffi::OsString>,
    pub(crate) cwd: PathBuf,
    /// The whole environment of the child, already resolved (no `env:` references left);
    /// nothing else of the gateway's environment reaches it.
    pub(crate) env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub(crate) stderr: StderrTail,
    pub(crate) processes: ProcessTable,
    /// The sandbox this start applies.
    pub(crate) sandbox: Box<mcpapp_sandbox::SandboxReport>,
    /// What the child applies to itself before it executes `program` (none when isolation
    /// is off).
    pub(crate) confinement: Option<Arc<mcpapp_sandbox::Confinement>>,
    /// The app's egress proxy, kept while the child lives.
    pub(crate) proxy: Option<Arc<mcpapp_sandbox::EgressProxy>>,
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

/// How long a closed link waits for the stderr reader to reach the end of the pipe, so that
/// the reason the app ended can quote its last words. A descendant that escaped the group and
/// holds the pipe open must not hold the report back for long.
const STDERR_DRAIN: Duration = Duration::from_secs(1);

/// Starts the child and the tasks that serve it.
pub(crate) fn spawn(spec: &StdioSpawn, events: LinkEvents) -> std::io::Result<StdioLink> {
    let Started {
        process: child,
        pid,
        stdin,
        stdout,
        stderr,
    } = start_child(spec)?;
    let pgid = i32::try_from(pid).unwrap_or_default();
    spec.processes.add(pgid);
    let guard = Arc::new(GroupGuard {
        pgid,
        table: spec.processes.clone(),
        reaped: std::sync::atomic::AtomicBool::new(false),
    });

    let (stdin_tx, stdin_rx) = mpsc::unbounded_channel::<String>();
    let (terminate_tx, terminate_rx) = oneshot::channel::<Duration>();
    let (exited_tx, exited_rx) = watch::channel::<Option<String>>(None);
    let span = tracing::Span::current();

    if let Some(stdin) = stdin {
        tokio::spawn(write_stdin(stdin, stdin_rx).instrument(span.clone()));
    }
    // Dropped unsent when the stderr reader ends: the sign that the tail is complete.
    let (stderr_done_tx, stderr_done_rx) = oneshot::channel::<()>();
    if let Some(stderr) = stderr {
        tokio::spawn(
            read_stderr(stderr, spec.stderr.clone(), stderr_done_tx).instrument(span.clone()),
        );
    }
    let waiter = Waiter {
        child,
        pid,
        pgid,
        guard: guard.clone(),
        _proxy: spec.proxy.clone(),
    };
    tokio::spawn(
        waiter
            .wait(terminate_rx, exited_tx)
            .instrument(span.clone()),
    );
    if let Some(stdout) = stdout {
        let ending = Ending {
            exited: exited_rx.clone(),
            stderr_done: stderr_done_rx,
            pgid,
        };
        tokio::spawn(read_stdout(stdout, events, ending).instrument(span));
    }

    Ok(StdioLink {
        stdin: Mutex::new(Some(stdin_tx)),
        terminate: Mutex::new(Some(terminate_tx)),
        exited: exited_rx,
        pid,
        _guard: guard,
    })
}

/// The app's standard input, as the link writes it.
type Input = Box<dyn AsyncWrite + Send + Unpin>;
/// The app's standard output or error, as the link reads it.
type Output = Box<dyn AsyncRead + Send + Unpin>;

/// The app's process: started by Tokio when unconfined, by its sandbox when confined.
enum Process {
    Plain(tokio::process::Child),
    Confined(mcpapp_sandbox::ConfinedChild),
}

impl Process {
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Self::Plain(child) => child.wait().await,
            Self::Confined(child) => child.wait().await,
        }
    }
}

/// A started process and its streams.
struct Started {
    process: Process,
    pid: u32,
    stdin: Option<Input>,
    stdout: Option<Output>,
    stderr: Option<Output>,
}

/// Starts the process: its own environment only, piped standard streams, its own group (so
/// that everything it starts can be signalled together and a Ctrl-C at the gateway's terminal
/// does not reach it directly), and, when it has a sandbox, confined before the program runs.
fn start_child(spec: &StdioSpawn) -> std::io::Result<Started> {
    if let Some(confinement) = &spec.confinement {
        let mut env = spec.env.clone();
        env.extend(
            spec.processes
                .keeper_tag()
                .map(|tag| (KEEPER_ENV.into(), tag.into())),
        );
        let mut child = confinement.spawn(&mcpapp_sandbox::SpawnRequest {
            program: &spec.program,
            args: &spec.args,
            env: &env,
            cwd: &spec.cwd,
        })?;
        return Ok(Started {
            pid: child.id(),
            stdin: child.stdin.take().map(|s| Box::new(s) as Input),
            stdout: child.stdout.take().map(|s| Box::new(s) as Output),
            stderr: child.stderr.take().map(|s| Box::new(s) as Output),
            process: Process::Confined(child),
        });
    }
    // The supervisor is the one crate allowed to start processes (see docs/architecture.md);
    // the sandbox starts confined ones for it.
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
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    Ok(Started {
        pid: child.id().unwrap_or_default(),
        stdin: child.stdin.take().map(|s| Box::new(s) as Input),
        stdout: child.stdout.take().map(|s| Box::new(s) as Output),
        stderr: child.stderr.take().map(|s| Box::new(s) as Output),
        process: Process::Plain(child),
    })
}

/// Writes queued lines to the child's stdin until the link lets go of the sender or the pipe
/// breaks.
async fn write_stdin(mut stdin: Input, mut lines: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = lines.recv().await {
        let mut batch = line;
        batch.push('\n');
        // Drain what is queued so one flush carries it all.
        while let Ok(more) = lines.try_recv() {
            batch.push_str(&more);
            batch.push('\n');
        }
        if stdin.write_all(batch.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    // Dropping stdin closes it: the child sees end of input.
}

/// Keeps the child's stderr lines in its run's tail until the end of the pipe; `done` is
/// dropped then, so the link can wait for the tail to be complete.
async fn read_stderr(stderr: Output, tail: StderrTail, done: oneshot::Sender<()>) {
    let mut lines = BufReader::with_capacity(STDERR_BUFFER, stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        debug!(target: "mcpapp_supervisor::stderr", "{line}");
        tail.push(line);
    }
    drop(done);
}

/// The task that owns the child: it reaps it, stops it on request, and says how it ended.
struct Waiter {
    child: Process,
    pid: u32,
    pgid: i32,
    guard: Arc<GroupGuard>,
    /// The app's egress proxy, which lives as long as the app does.
    _proxy: Option<Arc<mcpapp_sandbox::EgressProxy>>,
}

impl Waiter {
    async fn wait(
        mut self,
        terminate: oneshot::Receiver<Duration>,
        exited: watch::Sender<Option<String>>,
    ) {
        let (pid, pgid) = (self.pid, self.pgid);
        let child = &mut self.child;
        let status = tokio::select! {
            status = child.wait() => status,
            grace = terminate => {
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
        self.guard.mark_reaped();
        let _ = exited.send(Some(describe_exit(&status)));
    }
}

/// What the stdout reader waits for before it reports the link closed.
struct Ending {
    /// How the process ended, once the waiter knows.
    exited: watch::Receiver<Option<String>>,
    /// Closed when the stderr reader has read everything.
    stderr_done: oneshot::Receiver<()>,
    pgid: i32,
}

impl Ending {
    /// The reason the link closed: `problem` (what ended the reading, if not the end of
    /// stdout) and how the process ended. It waits for the exit status so the reason says how
    /// the process ended (a child that closed stdout but lives on is stopped), then, briefly,
    /// for the stderr reader, so the app's last words are in its tail when the reason is read.
    async fn reason(mut self, problem: Option<String>) -> String {
        let status = match tokio::time::timeout(
            Duration::from_secs(2),
            self.exited.wait_for(Option::is_some),
        )
        .await
        {
            Ok(Ok(status)) => status.clone().unwrap_or_default(),
            _ => {
                kill_group(self.pgid, Signal::SIGKILL);
                "closed its stdout and was stopped".to_owned()
            }
        };
        // Ok or Err alike: the sender is only ever dropped, when the reader has finished.
        let _ = tokio::time::timeout(STDERR_DRAIN, self.stderr_done).await;
        match problem {
            Some(problem) => format!("{problem}; the process {status}"),
            None => format!("the process {status}"),
        }
    }
}

/// Reads the child's stdout line by line into link events, then reports the link closed.
async fn read_stdout(stdout: Output, events: LinkEvents, ending: Ending) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    let problem = loop {
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
                if let Some(event) = line_event(&buf)
                    && events.send(event).is_err()
                {
                    break None;
                }
                if buf.capacity() > KEPT_LINE_BUFFER {
                    buf = Vec::new();
                }
            }
            Err(err) => break Some(format!("reading the app's stdout failed: {err}")),
        }
    };
    let _ = events.send(LinkEvent::Closed(ending.reason(problem).await));
}

/// The event for one stdout line: a message, garbage (its start), or nothing for a blank line.
fn line_event(buf: &[u8]) -> Option<LinkEvent> {
    let text = String::from_utf8_lossy(buf);
    let line = text.trim();
    if line.is_empty() {
        return None;
    }
    Some(match RawMessage::parse(line) {
        Ok(message) => LinkEvent::Message {
            message,
            origin: Origin::Stdio,
        },
        Err(_) => LinkEvent::Garbage(line.chars().take(200).collect()),
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

    fn ending(status: &str) -> (Ending, oneshot::Sender<()>) {
        let (_, exited) = watch::channel(Some(status.to_owned()));
        let (done, stderr_done) = oneshot::channel();
        let ending = Ending {
            exited,
            stderr_done,
            pgid: 0,
        };
        (ending, done)
    }

    /// The link reports the app closed only when its stderr reader is done, so the failure
    /// quotes the app's last words. (The test's runtime has one thread: the reader runs only
    /// once the reason is being awaited.)
    #[tokio::test]
    async fn the_reason_waits_for_the_stderr_reader_to_finish() {
        let app = StderrTail::default();
        let run = app.begin_run();
        let (ending, done) = ending("exited with status 3");
        tokio::spawn(async move {
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            run.push("last words".to_owned());
            drop(done);
        });
        let reason = ending.reason(None).await;
        assert_eq!(reason, "the process exited with status 3");
        assert_eq!(app.lines(), ["last words"]);
    }

    /// A descendant that escaped the group may keep stderr open: the wait is bounded.
    #[tokio::test]
    async fn a_stderr_held_open_delays_the_reason_only_briefly() {
        let (ending, _held) = ending("was killed by signal 9 (SIGKILL)");
        let reason = tokio::time::timeout(
            STDERR_DRAIN * 30,
            ending.reason(Some("reading the app's stdout failed: broken".to_owned())),
        )
        .await
        .expect("the wait for stderr is bounded");
        assert_eq!(
            reason,
            "reading the app's stdout failed: broken; the process was killed by signal 9 (SIGKILL)"
        );
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
