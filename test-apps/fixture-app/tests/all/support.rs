//! Test support: start the real `fixture-app` binary (keeping its exit status and stderr),
//! connect real rmcp clients over stdio or HTTP, and wait on events with generous timeouts.

use std::future::Future;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, Implementation, ProgressNotificationParam,
    ProtocolVersion, RequestMetaObject, ResourceUpdatedNotificationParam,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, RequestContext, RoleClient, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

/// Budget for any single step; generous because CI machines are small and busy.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test with `what` if it takes longer than [`TIMEOUT`].
pub(crate) async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out after {TIMEOUT:?}: {what}"))
}

/// Which transport a test runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Stdio,
    Http,
}

/// The fixture binary as a command with `args`, killed when dropped.
// Tests start the binary under test themselves; the supervisor crate is not involved here.
#[allow(clippy::disallowed_methods)]
pub(crate) fn fixture_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fixture-app"));
    command.args(args).kill_on_drop(true);
    command
}

/// A running fixture process whose stderr lines arrive on a channel.
#[derive(Debug)]
pub(crate) struct Fixture {
    child: Child,
    stderr: mpsc::UnboundedReceiver<String>,
    /// `http://127.0.0.1:PORT/mcp` in http mode.
    pub(crate) mcp_url: String,
}

impl Fixture {
    /// Spawns the fixture with piped stdio; returns its stdout and stdin for a transport.
    pub(crate) fn spawn(mut command: Command) -> (Self, ChildStdout, ChildStdin) {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fixture-app");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take().expect("piped stdin");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let fixture = Self {
            child,
            stderr: rx,
            mcp_url: String::new(),
        };
        (fixture, stdout, stdin)
    }

    /// Starts `fixture-app http --bind 127.0.0.1:0 EXTRA...` and reads its `listening on` line.
    pub(crate) async fn http(extra: &[&str]) -> Self {
        Self::http_with(fixture_command(&http_args(extra))).await
    }

    /// Like [`Fixture::http`] for a prepared command.
    pub(crate) async fn http_with(command: Command) -> Self {
        let (mut fixture, stdout, _stdin) = Self::spawn(command);
        let mut lines = BufReader::new(stdout).lines();
        let line = within("the listening line", lines.next_line())
            .await
            .expect("read stdout")
            .expect("a line before stdout closed");
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first stdout line {line:?}"));
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{url}"
        );
        fixture.mcp_url = url.to_owned();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        fixture
    }

    /// Waits for the process to exit.
    pub(crate) async fn exit_status(&mut self) -> ExitStatus {
        within("the fixture to exit", self.child.wait())
            .await
            .expect("wait for the fixture")
    }

    /// True if the process has not exited.
    pub(crate) fn is_alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Waits for a stderr line containing `needle` and returns it.
    pub(crate) async fn stderr_line(&mut self, needle: &str) -> String {
        within(&format!("a stderr line containing {needle:?}"), async {
            loop {
                let line = self
                    .stderr
                    .recv()
                    .await
                    .unwrap_or_else(|| panic!("stderr closed before {needle:?}"));
                if line.contains(needle) {
                    return line;
                }
            }
        })
        .await
    }
}

/// `http --bind 127.0.0.1:0` followed by `extra`.
pub(crate) fn http_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["http", "--bind", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    args
}

/// How the test client answers `elicitation/create`.
#[derive(Debug, Clone)]
pub(crate) enum Elicit {
    Unsupported,
    Accept(Value),
    Decline,
    Cancel,
}

/// Something the server sent to the client.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    ToolListChanged,
    ResourceListChanged,
    Progress(ProgressNotificationParam),
    Log {
        level: String,
        data: Value,
    },
    ElicitationAsked {
        message: String,
        schema: Value,
    },
    /// A `notifications/resources/updated` outside any listen stream (legacy subscriptions).
    ResourceUpdated(String),
}

/// The client handler of the tests; it reports what it receives on a channel.
#[derive(Debug)]
pub(crate) struct TestClient {
    elicit: Elicit,
    protocol: ProtocolVersion,
    events: mpsc::UnboundedSender<Event>,
}

impl TestClient {
    /// A handler answering elicitations with `elicit`, asking `initialize` for `protocol`.
    pub(crate) fn new(
        elicit: Elicit,
        protocol: ProtocolVersion,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        Self {
            elicit,
            protocol,
            events,
        }
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = match self.elicit {
            Elicit::Unsupported => ClientCapabilities::default(),
            _ => ClientCapabilities::builder().enable_elicitation().build(),
        };
        ClientConfig::new(capabilities, Implementation::new("fixture-tests", "2.5.0"))
            .with_protocol_version(self.protocol.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = &request
        {
            let _ = self.events.send(Event::ElicitationAsked {
                message: message.clone(),
                schema: serde_json::to_value(requested_schema).unwrap_or_default(),
            });
        }
        Ok(match &self.elicit {
            Elicit::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
            }
            Elicit::Cancel => ElicitResult::new(ElicitationAction::Cancel),
            Elicit::Decline | Elicit::Unsupported => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Event::ToolListChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Event::ResourceListChanged);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.events.send(Event::ResourceUpdated(params.uri));
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.events.send(Event::Progress(params));
    }

    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = self.events.send(Event::Log {
            level,
            data: params.data,
        });
    }
}

/// A client connected to a fixture process.
pub(crate) struct Session {
    pub(crate) client: RunningService<RoleClient, TestClient>,
    pub(crate) events: mpsc::UnboundedReceiver<Event>,
    pub(crate) fixture: Fixture,
}

/// How the test client starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// The legacy `initialize` handshake (asking for [`Options::protocol`]).
    Initialize,
    /// 2026-07-28 only: `server/discover`, then per-request metadata and no session.
    Discover2026,
}

/// Options for [`connect_with`].
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) elicit: Elicit,
    pub(crate) protocol: ProtocolVersion,
    pub(crate) lifecycle: Lifecycle,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            elicit: Elicit::Unsupported,
            protocol: ProtocolVersion::V_2025_11_25,
            lifecycle: Lifecycle::Initialize,
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
        }
    }
}

/// Starts the fixture over `kind` with `args` and connects a default client.
pub(crate) async fn connect(kind: Kind, args: &[&str]) -> Session {
    connect_with(
        kind,
        Options {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..Options::default()
        },
    )
    .await
}

/// Starts the fixture over `kind` and connects a client configured by `options`.
pub(crate) async fn connect_with(kind: Kind, options: Options) -> Session {
    try_connect_with(kind, options)
        .await
        .unwrap_or_else(|e| panic!("connecting over {kind:?} failed: {e}"))
}

/// Like [`connect_with`], returning the client's start-up error instead of failing.
pub(crate) async fn try_connect_with(
    kind: Kind,
    options: Options,
) -> Result<Session, ClientInitializeError> {
    let (tx, events) = mpsc::unbounded_channel();
    let handler = TestClient::new(options.elicit, options.protocol, tx);
    let extra: Vec<&str> = options.args.iter().map(String::as_str).collect();
    let mut args = match kind {
        Kind::Stdio => vec!["stdio"],
        Kind::Http => http_args(&[]),
    };
    args.extend(extra);
    let mut command = fixture_command(&args);
    for (name, value) in &options.env {
        command.env(name, value);
    }
    if let Some(cwd) = &options.cwd {
        command.current_dir(cwd);
    }
    let lifecycle = match options.lifecycle {
        Lifecycle::Initialize => ClientLifecycleMode::Initialize,
        Lifecycle::Discover2026 => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    match kind {
        Kind::Stdio => {
            // rmcp speaks over any (AsyncRead, AsyncWrite) pair; owning the child keeps its
            // exit status and stderr available to the test.
            let (fixture, stdout, stdin) = Fixture::spawn(command);
            let client = within(
                "starting the client over stdio",
                handler.serve_with_lifecycle((stdout, stdin), lifecycle),
            )
            .await?;
            Ok(Session {
                client,
                events,
                fixture,
            })
        }
        Kind::Http => {
            let fixture = Fixture::http_with(command).await;
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(fixture.mcp_url.clone()),
            );
            let client = within(
                "starting the client over HTTP",
                handler.serve_with_lifecycle(transport, lifecycle),
            )
            .await?;
            Ok(Session {
                client,
                events,
                fixture,
            })
        }
    }
}

impl Session {
    /// Calls a tool, failing the test on a protocol error.
    pub(crate) async fn call(&self, name: &str, args: Value) -> CallToolResult {
        self.try_call(name, args)
            .await
            .unwrap_or_else(|e| panic!("tools/call {name} failed at the protocol level: {e}"))
    }

    /// Calls a tool and returns the protocol-level outcome.
    pub(crate) async fn try_call(
        &self,
        name: &str,
        args: Value,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        within(
            &format!("tools/call {name}"),
            self.client.call_tool(params(name, args)),
        )
        .await
    }

    /// Calls a tool with a request `_meta`.
    pub(crate) async fn call_with_meta(
        &self,
        name: &str,
        args: Value,
        meta: Value,
    ) -> CallToolResult {
        let Value::Object(meta) = meta else {
            panic!("meta must be an object");
        };
        let mut request = params(name, args);
        request.meta = Some(RequestMetaObject::from(meta));
        within(
            &format!("tools/call {name}"),
            self.client.call_tool(request),
        )
        .await
        .unwrap_or_else(|e| panic!("tools/call {name} failed: {e}"))
    }

    /// The next event from the server.
    pub(crate) async fn next_event(&mut self) -> Event {
        within("an event from the server", self.events.recv())
            .await
            .expect("the client handler is alive")
    }
}

/// `tools/call` parameters from a JSON object.
pub(crate) fn params(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = args else {
        panic!("tool arguments must be an object");
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

/// The structuredContent of a successful result.
pub(crate) fn structured(result: &CallToolResult) -> &Value {
    assert_ne!(
        result.is_error,
        Some(true),
        "unexpected tool error: {result:?}"
    );
    result
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structuredContent in {result:?}"))
}

/// The concatenated text content of a result.
pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands `async fn NAME(kind: Kind)` into a `NAME` module with a test per transport.
#[macro_export]
macro_rules! over_both_transports {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn stdio() {
                    super::$name($crate::support::Kind::Stdio).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn http() {
                    super::$name($crate::support::Kind::Http).await;
                }
            }
        )*
    };
}
