//! One rmcp test client for every suite that talks MCP to a server: [`TestClient`] answers
//! elicitations as it is told and reports what the server sends on a channel; its builder
//! chooses the protocol version, lifecycle, capabilities, name and version, and connects over any
//! rmcp transport, a child's stdio or Streamable HTTP into a [`Connection`].

use std::fmt::Display;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, Implementation, ProgressNotificationParam,
    ProtocolVersion, RequestMetaObject, ResourceUpdatedNotificationParam,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, RequestContext, RoleClient, RunningService,
};
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, ServiceError};
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{ChildStdout, Command};
use tokio::sync::mpsc;

use crate::wait::within;

/// How the test client answers `elicitation/create`.
#[derive(Debug, Clone)]
pub enum Elicit {
    /// The client does not declare the elicitation capability (and declines if asked).
    Unsupported,
    /// Accept with this content.
    Accept(Value),
    /// Decline.
    Decline,
    /// Cancel.
    Cancel,
}

/// Something the server sent to the client outside an answer.
#[derive(Debug, Clone)]
pub enum Event {
    /// `notifications/tools/list_changed`.
    ToolListChanged,
    /// `notifications/resources/list_changed`.
    ResourceListChanged,
    /// `notifications/prompts/list_changed`.
    PromptListChanged,
    /// `notifications/progress`.
    Progress(ProgressNotificationParam),
    /// `notifications/message`, its level as the protocol spells it.
    Log {
        /// `debug`, `info`, `warning`, ...
        level: String,
        /// What was logged.
        data: Value,
    },
    /// An `elicitation/create` the client was asked (it answers as its [`Elicit`] says).
    ElicitationAsked {
        /// The message shown to the user.
        message: String,
        /// The requested schema of a form elicitation (`null` for others).
        schema: Value,
    },
    /// `notifications/resources/updated` outside any listen stream (legacy subscriptions).
    ResourceUpdated(String),
}

/// The rmcp client handler of the tests; it reports what it receives on a channel.
#[derive(Debug)]
pub struct TestClient {
    info: ClientConfig,
    elicit: Elicit,
    events: mpsc::UnboundedSender<Event>,
}

impl TestClient {
    /// A client of 2025-11-25 (`initialize`), `mcpapp-tests` 1.0.0, declaring elicitation
    /// only when it answers them; change any of it on the builder.
    pub fn builder() -> TestClientBuilder {
        TestClientBuilder::default()
    }
}

/// Options of a [`TestClient`], and the ways to connect one.
#[derive(Debug, Clone)]
pub struct TestClientBuilder {
    elicit: Elicit,
    protocol: ProtocolVersion,
    lifecycle: ClientLifecycleMode,
    capabilities: Option<ClientCapabilities>,
    name: String,
    version: String,
}

impl Default for TestClientBuilder {
    fn default() -> Self {
        Self {
            elicit: Elicit::Unsupported,
            protocol: ProtocolVersion::V_2025_11_25,
            lifecycle: ClientLifecycleMode::Initialize,
            capabilities: None,
            name: "mcpapp-tests".to_owned(),
            version: "1.0.0".to_owned(),
        }
    }
}

impl TestClientBuilder {
    /// How elicitations are answered (and, unless [`capabilities`](Self::capabilities) says
    /// otherwise, whether the elicitation capability is declared).
    pub fn elicit(mut self, elicit: Elicit) -> Self {
        self.elicit = elicit;
        self
    }

    /// The version `initialize` asks for.
    pub fn protocol(mut self, protocol: ProtocolVersion) -> Self {
        self.protocol = protocol;
        self
    }

    /// 2026-07-28 only: `server/discover`, then per-request metadata and no session.
    pub fn discover(mut self) -> Self {
        self.lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        self
    }

    /// Another lifecycle (rmcp's `Auto`, say).
    pub fn lifecycle(mut self, lifecycle: ClientLifecycleMode) -> Self {
        self.lifecycle = lifecycle;
        self
    }

    /// The capabilities declared, instead of the ones [`elicit`](Self::elicit) implies.
    pub fn capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.capabilities = Some(capabilities);
        self
    }

    /// The client's name in its `clientInfo`.
    pub fn name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.name);
        self
    }

    /// The client's version in its `clientInfo`.
    pub fn version(mut self, version: &str) -> Self {
        version.clone_into(&mut self.version);
        self
    }

    /// The handler and the receiving end of its events, for a test that serves it itself.
    pub fn build(self) -> (TestClient, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let capabilities = self.capabilities.unwrap_or_else(|| match self.elicit {
            Elicit::Unsupported => ClientCapabilities::default(),
            _ => ClientCapabilities::builder().enable_elicitation().build(),
        });
        let info = ClientConfig::new(capabilities, Implementation::new(self.name, self.version))
            .with_protocol_version(self.protocol);
        let client = TestClient {
            info,
            elicit: self.elicit,
            events: tx,
        };
        (client, rx)
    }

    /// Connects over `transport`; the start-up error is returned (a test of a refusal wants
    /// it), a start-up that takes longer than [`PATIENCE`](crate::PATIENCE) fails the test.
    pub async fn try_connect<T, E, A>(
        self,
        transport: T,
    ) -> Result<Connection, ClientInitializeError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let lifecycle = self.lifecycle.clone();
        let (handler, events) = self.build();
        let client = within(
            "the client's start-up",
            handler.serve_with_lifecycle(transport, lifecycle),
        )
        .await?;
        Ok(Connection {
            client,
            events,
            app: (),
        })
    }

    /// Connects over `transport`, failing the test if that fails.
    pub async fn connect<T, E, A>(self, transport: T) -> Connection
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.try_connect(transport)
            .await
            .unwrap_or_else(|e| panic!("the test client could not connect: {e}"))
    }

    /// Connects to the Streamable HTTP endpoint `url`.
    pub async fn http(self, url: &str) -> Connection {
        self.connect(StreamableHttpClientTransport::from_uri(url.to_owned()))
            .await
    }

    /// Starts `command` as a child speaking MCP on stdio (its stderr discarded) and connects
    /// to it; the child is killed when the connection ends.
    pub async fn stdio(self, command: Command) -> Connection {
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the stdio server starts");
        self.connect(transport).await
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let asked = match &request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => Event::ElicitationAsked {
                message: message.clone(),
                schema: serde_json::to_value(requested_schema).unwrap_or_default(),
            },
            other => Event::ElicitationAsked {
                message: serde_json::to_value(other).unwrap_or_default()["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                schema: Value::Null,
            },
        };
        let _ = self.events.send(asked);
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

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Event::PromptListChanged);
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

    // The logging notification's type is deprecated in rmcp; servers still send it.
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

/// A connected [`TestClient`], the events its handler received, and `app`: whatever the test
/// keeps alive with it (the server process it started, for one).
#[derive(Debug)]
pub struct Connection<A = ()> {
    /// The running client: its peer makes every request.
    pub client: RunningService<RoleClient, TestClient>,
    /// What the server sent, in order.
    pub events: mpsc::UnboundedReceiver<Event>,
    /// Kept with the connection.
    pub app: A,
}

/// The running client's requests (`list_all_tools`, `call_tool`, `peer_info`, ...) are the
/// connection's; `connection.client.cancel()` ends it.
impl<A> std::ops::Deref for Connection<A> {
    type Target = RunningService<RoleClient, TestClient>;

    fn deref(&self) -> &Self::Target {
        &self.client
    }
}

impl<A> Connection<A> {
    /// The same connection keeping `app` alive with it.
    pub fn keeping<B>(self, app: B) -> Connection<B> {
        Connection {
            client: self.client,
            events: self.events,
            app,
        }
    }

    /// Calls a tool, failing the test on a protocol error (tool errors come back as results).
    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        self.try_call(name, args)
            .await
            .unwrap_or_else(|e| panic!("tools/call {name} failed at the protocol level: {e}"))
    }

    /// Calls a tool and returns the protocol-level outcome.
    pub async fn try_call(&self, name: &str, args: Value) -> Result<CallToolResult, ServiceError> {
        within(
            format!("tools/call {name}"),
            self.client.call_tool(call_params(name, args)),
        )
        .await
    }

    /// Calls a tool with a request `_meta` (a JSON object).
    pub async fn call_with_meta(&self, name: &str, args: Value, meta: Value) -> CallToolResult {
        let Value::Object(meta) = meta else {
            panic!("meta must be an object");
        };
        let mut request = call_params(name, args);
        request.meta = Some(RequestMetaObject::from(meta));
        within(format!("tools/call {name}"), self.client.call_tool(request))
            .await
            .unwrap_or_else(|e| panic!("tools/call {name} failed: {e}"))
    }

    /// The next event from the server.
    pub async fn next_event(&mut self) -> Event {
        within("an event from the server", self.events.recv())
            .await
            .expect("the client handler is alive")
    }

    /// The first of the coming events `pick` takes (returns `Some` for), skipping the others.
    pub async fn event<T>(
        &mut self,
        what: impl Display,
        mut pick: impl FnMut(Event) -> Option<T>,
    ) -> T {
        within(format!("{what} from the server"), async {
            loop {
                let event = self
                    .events
                    .recv()
                    .await
                    .expect("the client handler is alive");
                if let Some(picked) = pick(event) {
                    return picked;
                }
            }
        })
        .await
    }

    /// Waits until a resource update has arrived for each of `wanted`, skipping other events.
    pub async fn expect_updates(&mut self, wanted: &[&str]) {
        let mut missing: Vec<String> = wanted.iter().map(|s| (*s).to_owned()).collect();
        while !missing.is_empty() {
            let uri = self
                .event(format!("updates of {missing:?}"), |event| match event {
                    Event::ResourceUpdated(uri) => Some(uri),
                    _ => None,
                })
                .await;
            missing.retain(|m| *m != uri);
        }
    }
}

/// `tools/call` parameters from a name and a JSON object of arguments.
pub fn call_params(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = args else {
        panic!("tool arguments must be an object");
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

/// The `structuredContent` of a successful result.
pub fn structured(result: &CallToolResult) -> &Value {
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

/// The text blocks of a result, joined by newlines.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts that a result is a tool error whose text contains every one of `needles`.
pub fn assert_tool_error(result: &CallToolResult, needles: &[&str]) {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error: {result:?}"
    );
    let text = text(result);
    for needle in needles {
        assert!(
            text.contains(needle),
            "{needle:?} not in tool error {text:?}"
        );
    }
}

/// Reads a test server's first stdout line, `listening on http://127.0.0.1:PORT/mcp`, and
/// returns the URL; the rest of stdout is drained so the server never blocks on a full pipe.
pub async fn listening_url(stdout: ChildStdout) -> String {
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = within("the listening line", lines.next_line())
        .await
        .expect("read stdout")
        .expect("a line before stdout closed");
    let url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first stdout line {line:?}"))
        .to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    url
}

/// Expands each `async fn NAME(over: Over)` into a module `NAME` holding one test per
/// transport, `stdio` and `http`, each on a two-worker runtime.
#[macro_export]
macro_rules! over_both_transports {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn stdio() {
                    super::$name($crate::Over::Stdio).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn http() {
                    super::$name($crate::Over::Http).await;
                }
            }
        )*
    };
}
