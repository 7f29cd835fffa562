//! The fixture's MCP server: [`FixtureServer`] implements the tools and the UI resource, and
//! [`Shared`] holds the state every connection of the process sees (the era, cancellation
//! count, tools added at runtime, the freeze switch, the notification targets, the HTTP
//! middleware's counters).
//!
//! Each request is served in its own era (`era.rs`): the era-sensitive tools (`elicit`,
//! `client_info`, `log` and the notifying ones) branch on it per request.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::tool::{
    InputResponses as ToolInputResponses, RequestState, ToolCallContext, ToolRouter,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationSchema, ImageContent, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListResourcesResult, ListToolsResult,
    MetaObject, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    Tool, UnsubscribeRequestParams,
};
// Logging is deprecated by SEP-2577 but still part of 2025-11-25, which the fixture speaks.
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{ElicitationMode, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::era::{Era, served_modern};
use crate::mrtr::{self, Round};
use crate::notify::{ConnectionId, ListenMark, Notifier};

/// The fixture's UI resource.
pub(crate) const VIEW_URI: &str = "ui://fixture/view.html";
/// The MCP Apps MIME type.
pub(crate) const MCP_APP_MIME: &str = "text/html;profile=mcp-app";
/// The largest `huge_output` the fixture agrees to produce.
pub(crate) const MAX_HUGE_OUTPUT: u64 = 64 * 1024 * 1024;
const VIEW_HTML: &str = include_str!("view.html");

/// A 2x2 RGBA PNG (red, green / blue, white), as served by the `image` tool.
pub(crate) const PNG_2X2: [u8; 75] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06, 0x00, 0x00, 0x00, 0x72, 0xb6, 0x0d,
    0x24, 0x00, 0x00, 0x00, 0x12, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x0c, 0x81, 0x34, 0x18, 0x00, 0x00, 0x49, 0xc8, 0x09, 0xf7, 0x03, 0xd9, 0x64, 0xf1, 0x00,
    0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A valid WAV file: 16 samples of 8-bit mono PCM at 8000 Hz (a 2 ms square wave), as served by
/// the `show_media` tool.
pub(crate) fn wav_tone() -> Vec<u8> {
    const SAMPLES: u32 = 16;
    const RATE: u32 = 8000;
    let mut wav = Vec::with_capacity(44 + SAMPLES as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + SAMPLES).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16_u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1_u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1_u16.to_le_bytes()); // mono
    wav.extend_from_slice(&RATE.to_le_bytes());
    wav.extend_from_slice(&RATE.to_le_bytes()); // bytes per second: 1 byte per sample
    wav.extend_from_slice(&1_u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8_u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&SAMPLES.to_le_bytes());
    wav.extend((0..SAMPLES).map(|i| if i % 4 < 2 { 0xc0_u8 } else { 0x40 }));
    wav
}

/// Process-wide state shared by every connection.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The protocol revisions served (`--era`).
    pub(crate) era: Era,
    /// Write one stderr line per tool call.
    pub(crate) stderr_noise: bool,
    /// Serve the `probe_*` tools (`--probes`).
    probes: bool,
    cancellations: watch::Sender<u64>,
    /// `hang` calls waiting right now, and every one ever started.
    hanging: watch::Sender<u64>,
    hangs_started: AtomicU64,
    added_tools: Mutex<Vec<String>>,
    /// Cancelled by the `freeze` tool: from then on the transports stop answering.
    pub(crate) frozen: CancellationToken,
    tool_calls: AtomicU64,
    /// Listen streams and legacy resource subscriptions, reached from any connection.
    pub(crate) notifier: Arc<Notifier>,
    /// What the HTTP middleware did, reported by `http_counters`.
    pub(crate) http: HttpCounters,
}

/// What the HTTP middleware did in this process, so a test can tell that a wire behaviour
/// really happened (the client under test may hide it when it copes well).
#[derive(Debug, Default)]
pub(crate) struct HttpCounters {
    /// `tools/call` response streams ended before their response (`--resumable-after-ms`).
    pub(crate) streams_closed_early: AtomicU64,
    /// GETs with `Last-Event-ID` that resumed such a stream.
    pub(crate) streams_resumed: AtomicU64,
    /// Server-to-client requests moved to the GET stream (`--server-requests-on-get`).
    pub(crate) requests_moved_to_get: AtomicU64,
    /// GETs answered with `--stateless-get-status`.
    pub(crate) gets_refused: AtomicU64,
    /// TCP connections accepted, to tell whether a client keeps them alive.
    pub(crate) connections_accepted: AtomicU64,
}

impl HttpCounters {
    /// Adds one to `counter`.
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::SeqCst);
    }

    fn to_json(&self) -> Value {
        let read = |c: &AtomicU64| c.load(Ordering::SeqCst);
        json!({
            "streamsClosedEarly": read(&self.streams_closed_early),
            "streamsResumed": read(&self.streams_resumed),
            "requestsMovedToGet": read(&self.requests_moved_to_get),
            "getsRefused": read(&self.gets_refused),
            "connectionsAccepted": read(&self.connections_accepted),
        })
    }
}

impl Shared {
    pub(crate) fn new(stderr_noise: bool, era: Era, probes: bool) -> Self {
        Self {
            era,
            stderr_noise,
            probes,
            cancellations: watch::Sender::new(0),
            hanging: watch::Sender::new(0),
            hangs_started: AtomicU64::new(0),
            added_tools: Mutex::new(Vec::new()),
            frozen: CancellationToken::new(),
            tool_calls: AtomicU64::new(0),
            notifier: Arc::default(),
            http: HttpCounters::default(),
        }
    }

    fn record_cancellation(&self) {
        self.cancellations.send_modify(|n| *n += 1);
    }

    fn added(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // A push cannot be observed half-done, so a poisoned lock is still consistent.
        self.added_tools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a tool call and, with `--stderr-noise`, reports it on stderr.
    pub(crate) fn note_tool_call(&self, name: &str) {
        let n = self.tool_calls.fetch_add(1, Ordering::Relaxed) + 1;
        if self.stderr_noise {
            eprintln!("fixture-app noise: tool call {n}: {name}");
        }
    }
}

/// The MCP server of one connection.
#[derive(Debug, Clone)]
pub(crate) struct FixtureServer {
    shared: Arc<Shared>,
    /// Tells this connection's legacy resource subscriptions apart from others'.
    connection: ConnectionId,
    /// The `initialize` parameters exactly as this connection's client sent them.
    initialize: Arc<Mutex<Option<InitializeRequestParams>>>,
    tool_router: ToolRouter<Self>,
}

/// `echo` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct MessageArgs {
    /// The text to send back.
    message: String,
}

/// `slow` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SlowArgs {
    /// How long to wait before answering, in milliseconds.
    ms: u64,
}

/// `cancellations` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CancellationsArgs {
    /// Wait up to this many milliseconds for the first cancellation (default 0)...
    #[serde(default)]
    wait_ms: u64,
    /// ...or for this many (default 1).
    #[serde(default)]
    at_least: Option<u64>,
}

/// `hangs` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HangsArgs {
    /// Wait until at least this many `hang` calls are waiting (default 0: answer at once)...
    #[serde(default)]
    at_least: u64,
    /// ...but no longer than this many milliseconds (default 0).
    #[serde(default)]
    wait_ms: u64,
}

/// Counts a `hang` call as waiting while it lives, however it ends (cancelled, or its task
/// dropped with the connection).
struct Hanging<'a>(&'a watch::Sender<u64>);

impl<'a> Hanging<'a> {
    fn enter(shared: &'a Shared) -> Self {
        shared.hangs_started.fetch_add(1, Ordering::SeqCst);
        shared.hanging.send_modify(|n| *n += 1);
        Self(&shared.hanging)
    }
}

impl Drop for Hanging<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// `huge_output` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct HugeArgs {
    /// Exact size of the text content, in bytes (at most 64 MiB).
    bytes: u64,
}

/// `progress` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProgressArgs {
    /// Number of progress notifications to send.
    steps: u32,
    /// Pause after each notification, in milliseconds.
    #[serde(default)]
    delay_ms: u64,
}

/// `log` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct LogArgs {
    /// debug, info, notice, warning, error, critical, alert or emergency.
    level: String,
    /// The log text.
    message: String,
}

/// `get_env` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct EnvArgs {
    /// Name of the environment variable.
    name: String,
}

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PathArgs {
    /// The file to read.
    path: String,
}

/// Arguments of `touch_resource`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct UriArgs {
    /// The resource URI to announce as updated (any URI; none needs to exist).
    uri: String,
}

/// The form `elicit` asks the client to fill.
#[derive(Debug, JsonSchema)]
#[expect(dead_code, reason = "only the JSON Schema of the form is used")]
pub(crate) struct ElicitForm {
    /// Your name.
    name: String,
    /// Tick to agree.
    agree: bool,
}

fn text_and_structured(text: impl Into<String>, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

fn tool_error(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

/// The result of `elicit` once the client answered, in either era.
fn elicit_outcome(answer: &ElicitResult) -> CallToolResult {
    let (text, action) = match answer.action {
        ElicitationAction::Accept => (
            format!(
                "accepted: {}",
                answer.content.as_ref().unwrap_or(&Value::Null)
            ),
            "accept",
        ),
        ElicitationAction::Decline => ("declined".to_owned(), "decline"),
        ElicitationAction::Cancel => ("cancelled".to_owned(), "cancel"),
        _ => ("unknown".to_owned(), "unknown"),
    };
    text_and_structured(text, json!({"action": action, "content": answer.content}))
}

/// The rank of a log level, least severe first.
#[allow(deprecated)]
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn called(name: &str) -> CallToolResult {
    text_and_structured(format!("called:{name}"), json!({"ok": true, "name": name}))
}

fn meta(value: Value) -> MetaObject {
    match value {
        Value::Object(map) => MetaObject(map),
        _ => MetaObject::new(),
    }
}

fn app_only_meta() -> MetaObject {
    meta(json!({"ui": {"visibility": ["app"]}}))
}

fn model_only_meta() -> MetaObject {
    meta(json!({"ui": {"visibility": ["model"]}}))
}

fn malformed_visibility_meta() -> MetaObject {
    meta(json!({"ui": {"visibility": "app"}}))
}

fn fixture_ui_meta() -> MetaObject {
    meta(json!({"ui": {"resourceUri": VIEW_URI, "visibility": ["model", "app"]}}))
}

fn media_ui_meta() -> MetaObject {
    meta(json!({"ui": {"resourceUri": VIEW_URI}}))
}

fn legacy_ui_meta() -> MetaObject {
    meta(json!({"ui/resourceUri": VIEW_URI}))
}

fn view_resource_meta() -> MetaObject {
    meta(
        json!({"ui": {"prefersBorder": false, "csp": {"connectDomains": [], "resourceDomains": []}}}),
    )
}

#[tool_router(vis = "pub(crate)")]
impl FixtureServer {
    /// Send the message back as text and as structuredContent {message}.
    #[tool]
    fn echo(&self, Parameters(args): Parameters<MessageArgs>) -> CallToolResult {
        text_and_structured(args.message.clone(), json!({"message": args.message}))
    }

    /// Wait `ms` milliseconds, then answer. A cancellation while waiting is counted.
    #[tool]
    async fn slow(
        &self,
        Parameters(args): Parameters<SlowArgs>,
        ct: CancellationToken,
    ) -> CallToolResult {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(args.ms)) => {
                text_and_structured(format!("slept {} ms", args.ms), json!({"sleptMs": args.ms}))
            }
            () = ct.cancelled() => {
                self.shared.record_cancellation();
                CallToolResult::error(vec![ContentBlock::text("cancelled")])
            }
        }
    }

    /// Never answer; wait until the request is cancelled and count the cancellation.
    #[tool]
    async fn hang(&self, ct: CancellationToken) -> CallToolResult {
        let waiting = Hanging::enter(&self.shared);
        ct.cancelled().await;
        // No longer waiting by the time the cancellation shows in the count.
        drop(waiting);
        self.shared.record_cancellation();
        CallToolResult::error(vec![ContentBlock::text("cancelled")])
    }

    /// Return {"hanging", "started", "cancellations"}: the hang calls waiting now, every hang
    /// call started, and the cancelled hang/slow calls; once at least atLeast hang calls are
    /// waiting, or after waitMs milliseconds (both default 0).
    #[tool]
    async fn hangs(&self, Parameters(args): Parameters<HangsArgs>) -> CallToolResult {
        let mut rx = self.shared.hanging.subscribe();
        // A timeout only means fewer calls are waiting; the counts are read either way.
        let _ = tokio::time::timeout(
            Duration::from_millis(args.wait_ms),
            rx.wait_for(|n| *n >= args.at_least),
        )
        .await;
        let hanging = *self.shared.hanging.borrow();
        let started = self.shared.hangs_started.load(Ordering::SeqCst);
        let cancellations = *self.shared.cancellations.borrow();
        text_and_structured(
            format!("{hanging} hanging, {started} started, {cancellations} cancelled"),
            json!({"hanging": hanging, "started": started, "cancellations": cancellations}),
        )
    }

    /// Return {"count": n}, the number of cancelled hang/slow calls, once n >= atLeast
    /// (default 1) or after waitMs milliseconds (default 0).
    #[tool]
    async fn cancellations(
        &self,
        Parameters(args): Parameters<CancellationsArgs>,
    ) -> CallToolResult {
        let mut rx = self.shared.cancellations.subscribe();
        // A timeout only means no cancellation arrived in time; the count is read either way.
        let _ = tokio::time::timeout(
            Duration::from_millis(args.wait_ms),
            rx.wait_for(|n| *n >= args.at_least.unwrap_or(1)),
        )
        .await;
        let count = *self.shared.cancellations.borrow();
        text_and_structured(format!("{count} cancellation(s)"), json!({"count": count}))
    }

    /// Answer, then stop answering anything (including ping) while staying alive: over stdio
    /// stdin is no longer read, over HTTP every later request is held pending.
    #[tool]
    fn freeze(&self) -> CallToolResult {
        self.shared.frozen.cancel();
        text_and_structured("frozen", json!({"frozen": true}))
    }

    /// Return a text block of exactly `bytes` bytes (at most 64 MiB).
    #[tool]
    fn huge_output(
        &self,
        Parameters(args): Parameters<HugeArgs>,
    ) -> Result<CallToolResult, String> {
        if args.bytes > MAX_HUGE_OUTPUT {
            return Err(format!(
                "bytes must be at most {MAX_HUGE_OUTPUT}, got {}",
                args.bytes
            ));
        }
        let len = usize::try_from(args.bytes).map_err(|e| e.to_string())?;
        let pattern = b"0123456789abcdefghijklmnopqrstuvwxyz\n";
        let text: String = pattern
            .iter()
            .cycle()
            .take(len)
            .map(|&b| char::from(b))
            .collect();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    /// Return a text block and a small PNG image block.
    #[tool]
    fn image(&self) -> CallToolResult {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(PNG_2X2);
        CallToolResult::success(vec![
            ContentBlock::text("a 2x2 PNG image"),
            ContentBlock::image(data, "image/png"),
        ])
    }

    /// Send `steps` notifications/progress with the request's progressToken, then answer.
    #[tool]
    async fn progress(
        &self,
        Parameters(args): Parameters<ProgressArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let token = ctx.meta.get_progress_token();
        if let Some(token) = &token {
            for step in 1..=args.steps {
                ctx.peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), f64::from(step))
                            .with_total(f64::from(args.steps))
                            .with_message(format!("step {step} of {}", args.steps)),
                    )
                    .await
                    .map_err(|e| format!("could not send progress: {e}"))?;
                if args.delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(args.delay_ms)).await;
                }
            }
        }
        let token_json = serde_json::to_value(&token).unwrap_or(Value::Null);
        Ok(text_and_structured(
            format!(
                "completed {} step(s){}",
                args.steps,
                if token.is_some() {
                    ""
                } else {
                    " without progress (no progressToken)"
                }
            ),
            json!({"steps": args.steps, "progressToken": token_json}),
        ))
    }

    /// Ask the client for a small form and report: "accepted: <json>", "declined" or
    /// "cancelled". Up to 2025-11-25 the form is an elicitation/create request; at 2026-07-28
    /// an input-required result (key "form") whose answer arrives on the retry.
    #[tool]
    async fn elicit(
        &self,
        Parameters(args): Parameters<MessageArgs>,
        RequestState(state): RequestState,
        ToolInputResponses(responses): ToolInputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let modern = served_modern(&ctx);
        let allows_form = if modern {
            // 2026 capabilities are per request; nothing is remembered from earlier ones.
            mrtr::allows_form(ctx.client_capabilities().as_ref())
        } else {
            ctx.peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        };
        if !allows_form {
            return Ok(tool_error(
                "the client did not declare form elicitation support",
            ));
        }
        let schema = match ElicitationSchema::from_type::<ElicitForm>() {
            Ok(schema) => schema,
            Err(e) => return Ok(tool_error(format!("could not build the form: {e}"))),
        };
        let answer = if modern {
            match mrtr::read_round(&args.message, state.as_deref(), responses.as_ref())? {
                Round::Answered(answer) => answer,
                Round::Ask(reason) => return Ok(mrtr::ask(&args.message, schema, reason).into()),
            }
        } else {
            let asked = ctx
                .peer
                .create_elicitation(ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: args.message,
                    requested_schema: schema,
                })
                .await;
            match asked {
                Ok(answer) => answer,
                Err(e) => return Ok(tool_error(format!("elicitation failed: {e}"))),
            }
        };
        Ok(elicit_outcome(&answer).into())
    }

    /// Add a tool `added_tool_N` (it echoes its message) and send notifications/tools/list_changed
    /// (to this connection up to 2025-11-25, and on every listen stream that asked for it).
    #[tool]
    async fn notify_tools_changed(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let name = {
            let mut added = self.shared.added();
            let name = format!("added_tool_{}", added.len() + 1);
            added.push(name.clone());
            name
        };
        if !served_modern(&ctx) {
            // 2026-07-28 has no unsolicited notifications: only listen streams hear of it.
            ctx.peer
                .notify_tool_list_changed()
                .await
                .map_err(|e| format!("could not notify: {e}"))?;
        }
        self.shared.notifier.tools_changed().await;
        Ok(text_and_structured(
            format!("added {name}"),
            json!({"added": name}),
        ))
    }

    /// Send notifications/resources/list_changed (to this connection up to 2025-11-25, and on
    /// every listen stream that asked for it).
    #[tool]
    async fn notify_resources_changed(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        if !served_modern(&ctx) {
            ctx.peer
                .notify_resource_list_changed()
                .await
                .map_err(|e| format!("could not notify: {e}"))?;
        }
        self.shared.notifier.resources_changed().await;
        Ok(text_and_structured("sent", json!({"sent": true})))
    }

    /// Send notifications/resources/updated for `uri` to the sessions subscribed to it
    /// (resources/subscribe) and on the listen streams whose resourceSubscriptions include it;
    /// return {"uri", "sessions", "listens"}, how many of each were reached.
    #[tool]
    async fn touch_resource(&self, Parameters(args): Parameters<UriArgs>) -> CallToolResult {
        let delivered = self.shared.notifier.resource_updated(&args.uri).await;
        text_and_structured(
            format!(
                "updated {}: {} session(s), {} listen stream(s)",
                args.uri, delivered.sessions, delivered.listens
            ),
            json!({"uri": args.uri, "sessions": delivered.sessions, "listens": delivered.listens}),
        )
    }

    /// Send a notifications/message log entry with the given level and message. At 2026-07-28
    /// only if the request's _meta logLevel asks for that level or a less severe one.
    #[tool]
    #[allow(deprecated)]
    async fn log(
        &self,
        Parameters(args): Parameters<LogArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let level: LoggingLevel = serde_json::from_value(Value::String(args.level.clone()))
            .map_err(|_| {
                format!(
                    "level must be one of debug, info, notice, warning, error, critical, alert, emergency; got {:?}",
                    args.level
                )
            })?;
        if served_modern(&ctx) {
            // 2026-07-28: a request without `logLevel` gets no log messages at all.
            let sent = ctx
                .meta
                .log_level()
                .is_some_and(|wanted| severity(level) >= severity(wanted));
            if sent {
                ctx.peer
                    .notify_logging_message(
                        LoggingMessageNotificationParam::new(
                            level,
                            Value::String(args.message.clone()),
                        )
                        .with_logger("fixture-app"),
                    )
                    .await
                    .map_err(|e| format!("could not send the log message: {e}"))?;
            }
            return Ok(text_and_structured(
                if sent {
                    "logged"
                } else {
                    "not logged (below the request's logLevel, or none)"
                },
                json!({"level": args.level, "message": args.message, "sent": sent}),
            ));
        }
        ctx.peer
            .notify_logging_message(
                LoggingMessageNotificationParam::new(level, Value::String(args.message.clone()))
                    .with_logger("fixture-app"),
            )
            .await
            .map_err(|e| format!("could not send the log message: {e}"))?;
        Ok(text_and_structured(
            "logged",
            json!({"level": args.level, "message": args.message}),
        ))
    }

    /// Return structuredContent {"sessionId": <the request's _meta.sessionId, or null>}.
    #[tool]
    fn echo_session(&self, ctx: RequestContext<RoleServer>) -> CallToolResult {
        let mut meta = ctx.meta;
        let session = meta.remove("sessionId").unwrap_or(Value::Null);
        text_and_structured(
            format!("sessionId: {session}"),
            json!({"sessionId": session}),
        )
    }

    /// Return structuredContent {"meta": <the whole request _meta, or null>}.
    #[tool]
    fn echo_meta(&self, ctx: RequestContext<RoleServer>) -> CallToolResult {
        let meta = if ctx.meta.is_empty() {
            Value::Null
        } else {
            Value::Object(ctx.meta.0.0)
        };
        text_and_structured(format!("meta: {meta}"), json!({"meta": meta}))
    }

    /// Return structuredContent {"name", "value"} for an environment variable (value null if unset).
    #[tool]
    fn get_env(&self, Parameters(args): Parameters<EnvArgs>) -> CallToolResult {
        let value = std::env::var(&args.name).ok();
        text_and_structured(
            format!("{}={}", args.name, value.as_deref().unwrap_or("<unset>")),
            json!({"name": args.name, "value": value}),
        )
    }

    /// Return structuredContent {"names"}: the sorted names of every variable in this
    /// process's environment (values are not returned).
    #[tool]
    fn list_env(&self) -> CallToolResult {
        let mut names: Vec<String> = std::env::vars_os()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        names.sort();
        text_and_structured(names.join(" "), json!({"names": names}))
    }

    /// Return structuredContent {"path", "text"} with the file's content (lossy UTF-8), or a
    /// tool error naming why it cannot be read.
    #[tool]
    fn read_file(&self, Parameters(args): Parameters<PathArgs>) -> Result<CallToolResult, String> {
        let bytes =
            std::fs::read(&args.path).map_err(|e| format!("cannot read {}: {e}", args.path))?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Ok(text_and_structured(
            text.clone(),
            json!({"path": args.path, "text": text}),
        ))
    }

    /// Return structuredContent {"cwd"}: the process's working directory.
    #[tool]
    fn get_cwd(&self) -> Result<CallToolResult, String> {
        let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
        let cwd = cwd.display().to_string();
        Ok(text_and_structured(cwd.clone(), json!({"cwd": cwd})))
    }

    /// Return structuredContent {clientInfo, capabilities, protocolVersion} as received in this
    /// connection's initialize request, plus the negotiatedProtocolVersion. At 2026-07-28: the
    /// request's own _meta values, and the version it is served at.
    #[tool]
    fn client_info(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, String> {
        if served_modern(&ctx) {
            let sent = |key: &str| {
                ctx.meta
                    .get(&format!("io.modelcontextprotocol/{key}"))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let value = json!({
                "clientInfo": sent("clientInfo"),
                "capabilities": sent("clientCapabilities"),
                "protocolVersion": sent("protocolVersion"),
                "negotiatedProtocolVersion": ctx.protocol_version().map(|v| v.to_string()),
            });
            return Ok(text_and_structured(value.to_string(), value));
        }
        let received = self
            .initialize
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or("no initialize request was seen on this connection")?;
        let peer = ctx.peer;
        let negotiated = peer.peer_info().map(|p| p.protocol_version.to_string());
        let value = json!({
            "clientInfo": received.client_info,
            "capabilities": received.capabilities,
            "protocolVersion": received.protocol_version,
            "negotiatedProtocolVersion": negotiated,
        });
        Ok(text_and_structured(value.to_string(), value))
    }

    /// Return what the HTTP middleware did in this process: {streamsClosedEarly,
    /// streamsResumed, requestsMovedToGet, getsRefused, connectionsAccepted} (all 0 over stdio).
    #[tool]
    fn http_counters(&self) -> CallToolResult {
        let counters = self.shared.http.to_json();
        text_and_structured(counters.to_string(), counters)
    }

    /// A tool only MCP App views may call (_meta.ui.visibility ["app"]).
    #[tool(meta = app_only_meta())]
    fn app_only_tool(&self) -> CallToolResult {
        called("app_only_tool")
    }

    /// A tool only the model may call (_meta.ui.visibility ["model"]).
    #[tool(meta = model_only_meta())]
    fn model_only_tool(&self) -> CallToolResult {
        called("model_only_tool")
    }

    /// A tool whose _meta.ui.visibility is malformed (the string "app", not an array).
    #[tool(meta = malformed_visibility_meta())]
    fn malformed_visibility_tool(&self) -> CallToolResult {
        called("malformed_visibility_tool")
    }

    /// A UI tool (_meta.ui.resourceUri ui://fixture/view.html) returning text and structuredContent.
    #[tool(meta = fixture_ui_meta())]
    fn show_fixture_ui(&self) -> CallToolResult {
        called("show_fixture_ui")
    }

    /// A UI tool (_meta.ui.resourceUri ui://fixture/view.html) whose result has every kind of
    /// part a view may need as it is: a text block, a PNG image block (with its own _meta), a
    /// WAV audio block, structuredContent and result _meta.
    #[tool(meta = media_ui_meta())]
    fn show_media(&self) -> CallToolResult {
        use base64::Engine as _;
        let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let image = ImageContent::new(encode(&PNG_2X2), "image/png")
            .with_meta(meta(json!({"fixture/alt": "a 2x2 checkerboard"})));
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("media: a 2x2 PNG and a 2 ms WAV tone"),
            ContentBlock::Image(image),
            ContentBlock::audio(encode(&wav_tone()), "audio/wav"),
        ]);
        result.structured_content = Some(json!({"blocks": ["text", "image", "audio"]}));
        result.meta = Some(meta(
            json!({"fixture/media": {"kind": "demo", "parts": 3}, "fixture/rendered": false}),
        ));
        result
    }

    /// A UI tool linked only through the legacy flat key _meta["ui/resourceUri"].
    #[tool(meta = legacy_ui_meta())]
    fn legacy_ui_tool(&self) -> CallToolResult {
        called("legacy_ui_tool")
    }
}

impl FixtureServer {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let tool_router = if shared.probes {
            Self::tool_router() + Self::probe_router()
        } else {
            Self::tool_router()
        };
        Self {
            connection: shared.notifier.new_connection(),
            shared,
            initialize: Arc::new(Mutex::new(None)),
            tool_router,
        }
    }

    fn added_tool(name: &str) -> Tool {
        let schema: JsonObject = match json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The text to send back."}},
        }) {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        Tool::new(
            name.to_owned(),
            "Added at runtime by notify_tools_changed; echoes its message.",
            Arc::new(schema),
        )
    }
}

impl ServerHandler for FixtureServer {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_logging()
                .build(),
        )
        .with_protocol_version(self.shared.era.config_version())
        .with_server_info(Implementation::new(
            "fixture-app",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("Test fixture: tools that misbehave on purpose.")
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        // Keep the parameters exactly as the client sent them, before negotiation.
        *self.initialize.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.clone());
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.shared.era.supported_versions()
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Everything asked for; rmcp keeps only what the capabilities advertise (no prompts),
        // and any resource URI may be watched.
        Some(requested.clone())
    }

    async fn listen(&self, cx: SubscriptionContext) -> Result<(), McpError> {
        // The transports stamp the request on arrival: stdio in the request's extensions,
        // HTTP in the HTTP request's, which rmcp passes on as `Parts`.
        let extensions = &cx.request_context().extensions;
        let mark = extensions.get::<ListenMark>().copied().or_else(|| {
            extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<ListenMark>().copied())
        });
        let _registered = self
            .shared
            .notifier
            .add_listen(cx.sink().clone(), mark)
            .await;
        cx.cancelled().await;
        Ok(())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared
            .notifier
            .subscribe(self.connection, context.peer, request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared
            .notifier
            .unsubscribe(self.connection, &request.uri);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = self.tool_router.list_all();
        tools.extend(self.shared.added().iter().map(|n| Self::added_tool(n)));
        // rmcp drops `resultType` for peers before 2026-07-28 and keeps it for later ones.
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.shared.note_tool_call(&request.name);
        let is_added = self.shared.added().iter().any(|n| *n == request.name);
        if is_added {
            let message = request
                .arguments
                .as_ref()
                .and_then(|a| a.get("message"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            return Ok(text_and_structured(
                message.clone(),
                json!({"message": message, "tool": request.name}),
            )
            .into());
        }
        self.tool_router
            .call(ToolCallContext::new(self, request, context))
            .await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(VIEW_URI, "fixture-view")
                .with_title("Fixture view")
                .with_description("A tiny MCP App view for host tests.")
                .with_mime_type(MCP_APP_MIME)
                .with_meta(view_resource_meta()),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri != VIEW_URI {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource {}; the fixture has only {VIEW_URI}",
                    request.uri
                ),
                None,
            ));
        }
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(VIEW_HTML, VIEW_URI)
                .with_mime_type(MCP_APP_MIME)
                .with_meta(view_resource_meta()),
        ])
        .into())
    }
}
