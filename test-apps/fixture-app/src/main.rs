//! `fixture-app`: a small MCP server whose behaviour is chosen by flags, so host tests can
//! produce on demand every situation a host must survive.
//!
//! # Running
//!
//! ```text
//! fixture-app <stdio|http|sleep> [--bind ADDR] [--era legacy|modern|both] [FLAGS]
//! ```
//!
//! - `stdio` speaks MCP over stdin/stdout and logs only to stderr.
//! - `http` serves Streamable HTTP MCP at `/mcp` on `--bind ADDR` (default `127.0.0.1:0`) and,
//!   once it accepts connections, prints exactly one stdout line
//!   `listening on http://HOST:PORT/mcp`.
//! - `RUST_LOG` sets the log filter (default `warn`, so stderr stays quiet unless a flag makes
//!   noise).
//!
//! # Protocol eras (`--era`)
//!
//! - `--era legacy` (the default): every known version up to 2025-11-25 (the `initialize`
//!   handshake, sessions, server-to-client requests). A 2026-07-28 request, `server/discover`
//!   included, is refused with `-32022` listing those versions.
//! - `--era modern`: only 2026-07-28. `initialize` is refused with `-32022` (data
//!   `{"requested", "supported": ["2026-07-28"]}`); over stdio the fixture answers that itself
//!   and keeps reading, so the same pipes can go on in 2026-07-28 (rmcp alone would end the
//!   session). Over HTTP it is rmcp's 2026-only server: no `Mcp-Session-Id` is ever minted
//!   (the refused `initialize` is a JSON 200), GET and DELETE get 405, and a request lacking
//!   `MCP-Protocol-Version` or the `_meta` protocolVersion gets 400. Conflicts with the flags that
//!   need sessions (`--server-requests-on-get`, `--resumable-after-ms`, `--strict-lifecycle`:
//!   an error naming the flag).
//! - `--era both`: every known version; rmcp serves each request in its own era (a request
//!   whose `_meta` names 2026-07-28 is served that way, even on an initialized connection), so
//!   legacy clients are served exactly as with `legacy` and 2026 clients as with `modern`.
//!
//! In every era the capabilities are `tools.listChanged`, `resources.listChanged`,
//! `resources.subscribe` and `logging`. Requests served at 2026-07-28 answer
//! `subscriptions/listen` (any filter; the acknowledgment leaves out prompts, which the fixture
//! has not got, and accepts any resource URI). A change caused after a listen request arrived
//! reaches that stream even if rmcp sets the stream up later (the last 256 changes are kept
//! for this); `resources/subscribe` and `resources/unsubscribe` work for legacy sessions, for
//! any URI. The tools below note what differs at 2026-07-28.
//!
//! # Flags
//!
//! Start-up happens in this order: `--stderr-noise` lines, `--exit-at-start`,
//! `--start-delay-ms`, `--garbage-stdout`, then serving (with `--exit-after-ms` running).
//!
//! - `--era legacy|modern|both`: see above.
//! - `--exit-at-start CODE`: write one line to stderr, then exit with status `CODE` before
//!   serving (http: before binding).
//! - `--exit-after-ms MS`: serve normally, then exit with status 17 after `MS` milliseconds.
//! - `--crash-after-calls N`: exit with status 17 right after the response to the `N`th
//!   `tools/call` (counted per process) has been written: over stdio once it is flushed to
//!   stdout; over HTTP 100 ms after the call's response stream has been handed to the server.
//! - `--start-delay-ms MS`: sleep `MS` milliseconds before serving (http: before binding and
//!   printing the `listening on` line).
//! - `--never-initialize`: read input but never answer anything, and stay alive (stdio: even
//!   after stdin closes; http: the line is printed, then every request to `/mcp` is held
//!   pending forever).
//! - `--garbage-stdout`: print three non-JSON lines (`this is not JSON-RPC`, ...) to stdout, then
//!   exit with status 1 (in both modes; http prints them instead of the `listening on` line).
//! - `--stderr-noise N`: write `N` numbered lines (`fixture-app noise: start line i of N`) to
//!   stderr at start, and one line (`fixture-app noise: tool call K: NAME`) per tool call.
//! - `--linger` (stdio): stay alive after stdin closes, like a server that ignores the end
//!   of its input.
//! - `--probes`: list and serve the `probe_*` tools (see Probes below).
//! - `--spawn-descendants FILE`: at start, start two copies of itself in `sleep` mode (which
//!   does nothing until killed), one in this process's group and one in a group of its own
//!   (as a daemon would), and write this process's pid and theirs to `FILE`, one per line.
//! - `--require-header NAME=VALUE` (http only; an error with stdio): answer `401` with a JSON
//!   body `{"error": "unauthorized", "message": ...}` (naming the header, never the value)
//!   unless the request carries header `NAME` with exactly `VALUE`.
//! - `--nagle` (http only; an error with stdio): serve connections without `TCP_NODELAY`, as a
//!   plain `axum::serve` does (by default they get it). An event-stream answer is written in
//!   pieces, so a later piece then waits for the client to acknowledge the first: a client
//!   that delays its ACKs on a reused connection sees every answer ~40 ms late.
//! - `--json-lines` (http only): a 2026-07-28 request whose answer is an event stream (a
//!   `subscriptions/listen` stream, a call that reports progress) is answered with
//!   `Content-Type: application/json` and the stream's messages one per line instead, written
//!   as they come, as the conformance suite's reference server answers.
//!
//! The next four flags copy what real-world Streamable HTTP servers do. They are http only (an
//! error with stdio, where none of them has a meaning: stdio has no second stream, and its
//! order is the order of the lines).
//!
//! - `--server-requests-on-get`: server-to-client requests (`elicitation/create`,
//!   `sampling/createMessage`, `roots/list`) are taken off the event stream of the POST that
//!   caused them and written, as data-only events, on the session's standalone GET stream
//!   (kept until one is open), as the TypeScript SDK does with requests it does not associate
//!   with a client request. The client's answer is a POST as usual and completes the call.
//! - `--resumable-after-ms MS`: every response stream's priming event carries a `retry: 200`
//!   hint (rmcp gives the stream's events ids `INDEX/STREAM`). A `tools/call` stream that has
//!   not delivered its response `MS` milliseconds after the call arrived is ended there; a GET
//!   carrying `Last-Event-ID` with the last id delivered on it gets the rest of that stream
//!   (progress, the response), however late. Other GETs behave as before.
//! - `--stateless-get-status CODE`: run without sessions (rmcp's stateless mode: no
//!   `Mcp-Session-Id`, each request served on its own, so no server-to-client requests) and
//!   answer every GET with status `CODE` (a client or server error, e.g. 404 or 405). Conflicts
//!   with the other three, which need sessions.
//! - `--strict-lifecycle`: a request other than `initialize` and `ping` that arrives before its
//!   session's `notifications/initialized` has been processed is answered with HTTP 400 and a
//!   JSON-RPC error (`-32600`, `METHOD received before notifications/initialized`), as strict
//!   servers do; sessions are told apart by `Mcp-Session-Id`. Processing the notification
//!   takes 100 ms (a server setting the session up): it is answered (202), and the session
//!   counts as initialized, only then, so a client that sends on without waiting for that
//!   answer is caught. Requests served at 2026-07-28 (by their `_meta` or
//!   `MCP-Protocol-Version`) have no lifecycle and are never refused.
//!
//! `http_counters` reports what these flags did.
//!
//! # Tools
//!
//! - `echo {message}`: text `message` and structuredContent `{"message"}`.
//! - `slow {ms}`: answers after `ms` milliseconds (`{"sleptMs"}`); a cancellation is counted.
//! - `hang`: never answers; waits until cancelled and counts the cancellation. In both eras a
//!   cancellation is `notifications/cancelled` over stdio; at 2026-07-28 over HTTP it is the
//!   client closing the response stream, which rmcp turns into the request's cancellation.
//! - `cancellations {waitMs?, atLeast?}`: `{"count": n}` once n >= `atLeast` (default 1) or
//!   after `waitMs` (default 0) ms.
//! - `hangs {atLeast?, waitMs?}`: `{"hanging", "started", "cancellations"}`: the `hang` calls
//!   waiting now (a call stops waiting when cancelled or when its task is dropped), every
//!   `hang` call started, and the cancellation count; once `hanging` >= `atLeast` (default 0)
//!   or after `waitMs` (default 0) ms. For telling every abandoned call was cancelled.
//! - `freeze`: answers `frozen`, then the server answers nothing more, not even `ping` (stdio
//!   stops reading stdin; http holds every later request pending); the process stays alive.
//! - `huge_output {bytes}`: one text block of exactly `bytes` bytes (at most 64 MiB).
//! - `image`: a text block and a 2x2 PNG image block (`image/png`).
//! - `progress {steps, delayMs?}`: sends `steps` `notifications/progress` with the request's
//!   `progressToken` (progress 1..=steps, total steps), then returns `{"steps", "progressToken"}`.
//!   In both eras the progress travels on the request's own stream.
//! - `elicit {message}`: asks for a form `{name: string, agree: boolean}` and returns text
//!   `accepted: <content JSON>`, `declined` or `cancelled` (structuredContent `{"action",
//!   "content"}`); a tool error if the client has no form elicitation (at 2026-07-28: if the
//!   request's `clientCapabilities` declare none). Up to 2025-11-25 the form is an
//!   `elicitation/create` request during the call. At 2026-07-28 the call returns an
//!   input-required result (`resultType: input_required`) with one input request under key
//!   `"form"` (the same form) and a `requestState`, with `_meta["fixture/askedBecause"]`
//!   saying why; the retry carrying `inputResponses.form` and that `requestState` gets the
//!   answer above. A retry whose `requestState` is missing or not the one for its `message`,
//!   or that has no `form` answer, is asked again (another input-required round, reason
//!   `requestState missing`, `requestState does not match this call` or `inputResponses has
//!   no form answer`); a `form` answer that is not an elicitation result is a JSON-RPC
//!   invalid-params error. The state is derived from `message` alone (the fixture keeps
//!   nothing between rounds); it is not sealed, so a test can forge it.
//! - `notify_tools_changed`: adds a tool `added_tool_N` (N = 1, 2, ... per process) that echoes
//!   its `message`, then sends `notifications/tools/list_changed`: to the calling connection
//!   when the call is served up to 2025-11-25 (at 2026-07-28 there are no unsolicited
//!   notifications), and on every open listen stream that asked for `toolsListChanged`,
//!   whichever connection made it.
//! - `notify_resources_changed`: sends `notifications/resources/list_changed`, the same way
//!   (listen streams that asked for `resourcesListChanged`).
//! - `touch_resource {uri}`: sends `notifications/resources/updated` for `uri` to every legacy
//!   session subscribed to it (`resources/subscribe`) and on every listen stream whose
//!   `resourceSubscriptions` include it; returns `{"uri", "sessions", "listens"}`, how many of
//!   each it reached.
//! - `log {level, message}`: sends `notifications/message` (logger `fixture-app`). At
//!   2026-07-28 only if the request's `_meta["io.modelcontextprotocol/logLevel"]` is `level`
//!   or less severe (none: nothing is sent), and the result adds `"sent": true|false`.
//! - `echo_session`: `{"sessionId": <the request's _meta.sessionId or null>}`.
//! - `echo_meta`: `{"meta": <the whole request _meta or null>}`.
//! - `get_env {name}`: `{"name", "value"}` (`value` null when unset). `list_env`: `{"names"}`,
//!   the sorted names of every environment variable. `get_cwd`: `{"cwd"}`.
//! - `read_file {path}`: `{"path", "text"}` with the file's content, or a tool error saying why
//!   it cannot be read.
//! - `http_counters`: `{"streamsClosedEarly", "streamsResumed", "requestsMovedToGet",
//!   "getsRefused", "connectionsAccepted"}`, what the HTTP flags above did in this process,
//!   and the TCP connections it accepted (all 0 over stdio).
//! - `client_info`: `{"clientInfo", "capabilities", "protocolVersion"}` as this connection's
//!   `initialize` sent them, plus `negotiatedProtocolVersion`. At 2026-07-28 the request's own
//!   `_meta` values (`io.modelcontextprotocol/clientInfo`, `.../clientCapabilities`,
//!   `.../protocolVersion`, null when absent), and the version it is served at.
//! - `app_only_tool` (`_meta.ui.visibility: ["app"]`), `model_only_tool` (`["model"]`),
//!   `malformed_visibility_tool` (`_meta.ui.visibility: "app"`, a string): each returns text
//!   `called:NAME` and `{"ok": true, "name": NAME}`.
//! - `show_fixture_ui` (`_meta.ui = {"resourceUri": "ui://fixture/view.html", "visibility":
//!   ["model", "app"]}`): text `called:show_fixture_ui` and `{"ok": true, "name":
//!   "show_fixture_ui"}`. `legacy_ui_tool`: only the flat `_meta["ui/resourceUri"] =
//!   "ui://fixture/view.html"`, same kind of result.
//! - `show_media` (`_meta.ui = {"resourceUri": "ui://fixture/view.html"}`, so visible to both):
//!   a result with every kind of part a view must receive as it is, always the same: a text
//!   block `media: a 2x2 PNG and a 2 ms WAV tone`; the `image` tool's PNG as an image block
//!   (`image/png`) with block `_meta {"fixture/alt": "a 2x2 checkerboard"}`; a 60-byte WAV file
//!   (16 samples of 8-bit mono PCM at 8000 Hz) as an audio block (`audio/wav`);
//!   structuredContent `{"blocks": ["text", "image", "audio"]}`; and result `_meta
//!   {"fixture/media": {"kind": "demo", "parts": 3}, "fixture/rendered": false}`.
//!
//! # Probes
//!
//! With `--probes`, for the tests of the gateway's app sandbox, the `probe_*` tools try things
//! for real and answer `{"ok", "error", "errno", ...}` (a refusal is a normal answer, not a tool error):
//! `probe_open {path, write?}` (read the first 4 KiB as `text`, or append a line),
//! `probe_list {path}` (`names`), `probe_exec {program, args?}` (`status`, `stdout`,
//! `stderr`), `probe_connect {kind: tcp|udp|unix|abstract, address}`, `probe_bind {port}`,
//! `probe_proxy {host, port}` (a `CONNECT` through the proxy in `HTTPS_PROXY`, then `GET /`:
//! `proxyStatus`, `body`), `probe_kill {pid}` (signal 0), `probe_proc {pid, file}` (reads
//! `/proc/PID/FILE`: `bytes`), and `probe_status` (`capEff`, `capPrm`, `capBnd`,
//! `noNewPrivs`, `seccomp`, `uid` from `/proc/self/status`, and `limits`, the text of
//! `/proc/self/limits`).
//!
//! # Resources and vendor fields
//!
//! `ui://fixture/view.html` (mime `text/html;profile=mcp-app`) is listed and readable: a tiny
//! view that performs `ui/initialize`, shows `#status` (`ready`, then `rendered` with the tool
//! result JSON in `#result`, exactly the `ui/notifications/tool-result` params it received) and
//! has buttons `#call-app-only` / `#call-model-only` whose outcome lands in `#message`, and
//! `#call-elicit`, which calls `elicit {"message": "The fixture view asks who you are"}` and
//! shows `elicit: <the result's first text>` in `#message`. Every entry of the raw `tools/list` result carries
//! `"x-vendor": {"fixture": true}` next to `name`, and the result carries `"x-fixture-page": 1`.
//!
//! # Refusals of rmcp's server that tests rely on
//!
//! Over HTTP, a request whose `_meta["io.modelcontextprotocol/protocolVersion"]` contradicts
//! its `MCP-Protocol-Version` header is answered with HTTP 400 and a JSON-RPC error under the
//! request's id (code `-32020`, "... does not match request _meta protocolVersion ...").

mod era;
mod http;
mod mrtr;
mod notify;
mod probe;
mod reroute;
mod resume;
mod server;
mod sse;
mod stdio;
mod vendor;

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use clap::{Parser, ValueEnum};
use tracing::Instrument as _;

use crate::era::Era;
use crate::http::HttpOptions;
use crate::server::Shared;
use crate::stdio::CRASH_STATUS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// MCP over stdin/stdout.
    Stdio,
    /// Streamable HTTP at /mcp.
    Http,
    /// Do nothing until killed (a descendant for `--spawn-descendants`).
    Sleep,
}

/// Command line of `fixture-app`; see the crate documentation for every flag.
#[derive(Debug, Parser)]
#[command(
    name = "fixture-app",
    version,
    about = "MCP fixture server for host tests"
)]
struct Cli {
    /// Transport to serve.
    #[arg(value_enum)]
    mode: Mode,
    /// Address to listen on (http).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    bind: String,
    /// Protocol revisions to speak: up to 2025-11-25, only 2026-07-28, or both.
    #[arg(long, value_enum, default_value_t = Era::Legacy)]
    era: Era,
    /// Write a line to stderr and exit with this status before serving.
    #[arg(long, value_name = "CODE", allow_negative_numbers = true)]
    exit_at_start: Option<i32>,
    /// Exit with status 17 this many milliseconds after starting to serve.
    #[arg(long, value_name = "MS")]
    exit_after_ms: Option<u64>,
    /// Exit with status 17 right after answering the Nth tools/call.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    crash_after_calls: Option<u64>,
    /// Sleep this many milliseconds before serving.
    #[arg(long, value_name = "MS")]
    start_delay_ms: Option<u64>,
    /// Read input but never answer anything.
    #[arg(long)]
    never_initialize: bool,
    /// Print three non-JSON lines to stdout and exit with status 1.
    #[arg(long)]
    garbage_stdout: bool,
    /// Write N numbered lines to stderr at start and one per tool call.
    #[arg(long, value_name = "N")]
    stderr_noise: Option<u32>,
    /// Stay alive after stdin closes (stdio), as a server that ignores end of input would.
    #[arg(long)]
    linger: bool,
    /// List and serve the probe_* tools (for the tests of the gateway's app sandbox).
    #[arg(long)]
    probes: bool,
    /// Start two descendants that sleep until killed, one in this process's group and one
    /// in a group of its own, and write this process's pid and theirs to FILE, one per line.
    #[arg(long, value_name = "FILE")]
    spawn_descendants: Option<std::path::PathBuf>,
    /// Require this header on every HTTP request (NAME=VALUE).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_header)]
    require_header: Option<(HeaderName, HeaderValue)>,
    /// Write server-to-client requests on the session's GET stream, not the POST's (http).
    #[arg(long)]
    server_requests_on_get: bool,
    /// End a tools/call response stream this many milliseconds after the call arrived if it
    /// has not been answered, and deliver the rest to a GET with Last-Event-ID (http).
    #[arg(long, value_name = "MS")]
    resumable_after_ms: Option<u64>,
    /// Serve without sessions and answer every GET with this status, e.g. 404 or 405 (http).
    #[arg(
        long,
        value_name = "CODE",
        value_parser = parse_error_status,
        conflicts_with_all = ["server_requests_on_get", "resumable_after_ms", "strict_lifecycle"]
    )]
    stateless_get_status: Option<StatusCode>,
    /// Refuse requests other than initialize and ping before notifications/initialized, per
    /// session (http).
    #[arg(long)]
    strict_lifecycle: bool,
    /// Serve HTTP connections without TCP_NODELAY (Nagle's algorithm on).
    #[arg(long)]
    nagle: bool,
    /// Answer 2026-07-28 requests whose answer is an event stream with application/json,
    /// one message per line (http).
    #[arg(long)]
    json_lines: bool,
}

impl Cli {
    /// The http-only flags given on this command line.
    fn http_only_flags(&self) -> Vec<&'static str> {
        [
            ("--require-header", self.require_header.is_some()),
            ("--server-requests-on-get", self.server_requests_on_get),
            ("--resumable-after-ms", self.resumable_after_ms.is_some()),
            (
                "--stateless-get-status",
                self.stateless_get_status.is_some(),
            ),
            ("--strict-lifecycle", self.strict_lifecycle),
            ("--nagle", self.nagle),
            ("--json-lines", self.json_lines),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    /// The given flags that need legacy sessions, which `--era modern` does not have.
    fn session_flags(&self) -> Vec<&'static str> {
        [
            ("--server-requests-on-get", self.server_requests_on_get),
            ("--resumable-after-ms", self.resumable_after_ms.is_some()),
            ("--strict-lifecycle", self.strict_lifecycle),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }
}

fn parse_error_status(text: &str) -> Result<StatusCode, String> {
    let code: u16 = text
        .parse()
        .map_err(|e| format!("expected an HTTP status code: {e}"))?;
    match StatusCode::from_u16(code) {
        Ok(status) if status.is_client_error() || status.is_server_error() => Ok(status),
        _ => Err(format!(
            "expected a client or server error status (400 to 599), got {code}"
        )),
    }
}

fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| "expected NAME=VALUE".to_owned())?;
    let name = HeaderName::try_from(name.trim())
        .map_err(|e| format!("invalid header name {name:?}: {e}"))?;
    let value = HeaderValue::try_from(value).map_err(|e| format!("invalid header value: {e}"))?;
    Ok((name, value))
}

/// `--spawn-descendants`: two sleepers, one sharing this process's group and one that leaves
/// it (as a daemon would), and the pid file a test reads.
fn spawn_descendants(file: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().context("finding the fixture's own executable")?;
    let mut pids = vec![std::process::id()];
    for own_group in [false, true] {
        // A test app starting its own descendants is the point of this flag.
        #[allow(clippy::disallowed_methods)]
        let mut command = std::process::Command::new(&exe);
        command
            .arg("sleep")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if own_group {
            command.process_group(0);
        }
        pids.push(command.spawn().context("starting a descendant")?.id());
    }
    let text: String = pids.iter().map(|pid| format!("{pid}\n")).collect();
    std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    if cli.mode == Mode::Stdio
        && let Some(flag) = cli.http_only_flags().first()
    {
        bail!("{flag} only applies to http mode");
    }
    if cli.era.is_modern_only()
        && let Some(flag) = cli.session_flags().first()
    {
        bail!("{flag} needs legacy sessions, which --era modern does not have");
    }
    if cli.mode == Mode::Sleep {
        loop {
            std::thread::park();
        }
    }
    if let Some(file) = &cli.spawn_descendants {
        spawn_descendants(file)?;
    }

    if let Some(n) = cli.stderr_noise {
        let mut stderr = std::io::stderr().lock();
        for i in 1..=n {
            writeln!(stderr, "fixture-app noise: start line {i} of {n}")?;
        }
    }
    if let Some(code) = cli.exit_at_start {
        eprintln!("fixture-app: exiting at start with status {code} (--exit-at-start)");
        std::process::exit(code);
    }
    if let Some(ms) = cli.start_delay_ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if cli.garbage_stdout {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "this is not JSON-RPC")?;
        writeln!(stdout, "{{ neither is this")?;
        writeln!(stdout, "garbage line 3")?;
        stdout.flush()?;
        std::process::exit(1);
    }

    let shared = Arc::new(Shared::new(cli.stderr_noise.is_some(), cli.era, cli.probes));
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        if let Some(ms) = cli.exit_after_ms {
            tokio::spawn(
                async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    eprintln!("fixture-app: exiting after {ms} ms (--exit-after-ms)");
                    std::process::exit(CRASH_STATUS);
                }
                .in_current_span(),
            );
        }
        match cli.mode {
            Mode::Stdio if cli.never_initialize => stdio::never_initialize().await,
            Mode::Stdio => {
                stdio::serve(shared, cli.crash_after_calls).await?;
                if cli.linger {
                    eprintln!("fixture-app: stdin closed; lingering (--linger)");
                    std::future::pending::<()>().await;
                }
                Ok(())
            }
            Mode::Sleep => Ok(()),
            Mode::Http => {
                http::serve(
                    shared,
                    HttpOptions {
                        bind: cli.bind,
                        require_header: cli.require_header,
                        crash_after_calls: cli.crash_after_calls,
                        never_initialize: cli.never_initialize,
                        server_requests_on_get: cli.server_requests_on_get,
                        resumable_after: cli.resumable_after_ms.map(Duration::from_millis),
                        stateless_get_status: cli.stateless_get_status,
                        strict_lifecycle: cli.strict_lifecycle,
                        nagle: cli.nagle,
                        json_lines: cli.json_lines,
                    },
                )
                .await
            }
        }
    })?;
    // The blocking stdin reader cannot be interrupted; do not wait for it.
    runtime.shutdown_background();
    Ok(())
}
