//! Test support: start the real `grocery-inventory` binary, connect real rmcp clients over
//! stdio or HTTP, and wait on what the server sends, always with a generous timeout.

use std::future::Future;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, Implementation, ProtocolVersion,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt as _};
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};
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

/// How the test client answers `elicitation/create`.
#[derive(Debug, Clone)]
pub(crate) enum Elicit {
    /// The client does not declare the elicitation capability.
    Unsupported,
    /// Accept with this content.
    Accept(Value),
    /// Decline.
    Decline,
}

/// Something the server sent to the client.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    ResourceUpdated(String),
    ElicitationAsked(String),
}

/// The rmcp client handler used by the tests; it reports what it receives on a channel.
#[derive(Debug)]
pub(crate) struct TestClient {
    elicit: Elicit,
    events: mpsc::UnboundedSender<Event>,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = match self.elicit {
            Elicit::Unsupported => ClientCapabilities::default(),
            _ => ClientCapabilities::builder().enable_elicitation().build(),
        };
        ClientConfig::new(capabilities, Implementation::new("grocery-tests", "1.0.0"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        let _ = self.events.send(Event::ElicitationAsked(message));
        Ok(match &self.elicit {
            Elicit::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
            }
            Elicit::Decline | Elicit::Unsupported => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.events.send(Event::ResourceUpdated(params.uri));
    }
}

/// A running `grocery-inventory http` child, killed on drop.
#[derive(Debug)]
pub(crate) struct HttpApp {
    _child: Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub(crate) mcp_url: String,
    /// `http://127.0.0.1:PORT`
    pub(crate) base_url: String,
}

/// The app binary as a command; output and input are set by the caller.
// Tests start the binary under test themselves; the supervisor crate is not involved here.
#[allow(clippy::disallowed_methods)]
pub(crate) fn app_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_grocery-inventory"));
    command.args(args).kill_on_drop(true);
    command
}

/// Starts `grocery-inventory http --bind 127.0.0.1:0 EXTRA...` and reads its `listening on` line.
pub(crate) async fn start_http(extra: &[&str]) -> HttpApp {
    let mut args = vec!["http", "--bind", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut child = app_command(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn grocery-inventory http");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = within("the listening line", lines.next_line())
        .await
        .expect("read stdout")
        .expect("a line before stdout closed");
    let mcp_url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(
        mcp_url.starts_with("http://127.0.0.1:") && mcp_url.ends_with("/mcp"),
        "{mcp_url}"
    );
    // Keep draining stdout so the app can never block on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let base_url = mcp_url.trim_end_matches("/mcp").to_owned();
    HttpApp {
        _child: child,
        mcp_url,
        base_url,
    }
}

/// An rmcp client connected to the app, with the events its handler received.
pub(crate) struct Connection {
    pub(crate) client: RunningService<RoleClient, TestClient>,
    pub(crate) events: mpsc::UnboundedReceiver<Event>,
    /// The http app this connection started (None for stdio or a shared app).
    pub(crate) app: Option<HttpApp>,
}

impl Connection {
    /// Calls a tool, failing the test on a protocol error (tool errors come back as results).
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
        let Value::Object(arguments) = args else {
            panic!("tool arguments must be an object");
        };
        within(
            &format!("tools/call {name}"),
            self.client
                .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)),
        )
        .await
    }

    /// The next event from the server.
    pub(crate) async fn next_event(&mut self) -> Event {
        within("an event from the server", self.events.recv())
            .await
            .expect("the client handler is alive")
    }

    /// Collects resource-updated URIs until all of `wanted` have been seen.
    pub(crate) async fn expect_updates(&mut self, wanted: &[&str]) {
        let mut missing: Vec<String> = wanted.iter().map(|s| (*s).to_owned()).collect();
        while !missing.is_empty() {
            if let Event::ResourceUpdated(uri) = self.next_event().await {
                missing.retain(|m| *m != uri);
            }
        }
    }
}

fn handler(elicit: Elicit) -> (TestClient, mpsc::UnboundedReceiver<Event>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (TestClient { elicit, events: tx }, rx)
}

/// Starts the app over `kind` (with extra command-line arguments) and connects a client.
pub(crate) async fn connect(kind: Kind, elicit: Elicit, extra: &[&str]) -> Connection {
    match kind {
        Kind::Stdio => {
            let mut args = vec!["stdio"];
            args.extend_from_slice(extra);
            let (transport, _) = TokioChildProcess::builder(app_command(&args))
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn grocery-inventory stdio");
            let (client, events) = handler(elicit);
            let client = within("initialize over stdio", client.serve(transport))
                .await
                .expect("initialize over stdio");
            Connection {
                client,
                events,
                app: None,
            }
        }
        Kind::Http => {
            let app = start_http(extra).await;
            let mut connection = connect_url(&app.mcp_url, elicit).await;
            connection.app = Some(app);
            connection
        }
    }
}

/// Connects a client to an already running http app.
pub(crate) async fn connect_url(url: &str, elicit: Elicit) -> Connection {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    let (client, events) = handler(elicit);
    let client = within("initialize over HTTP", client.serve(transport))
        .await
        .expect("initialize over HTTP");
    Connection {
        client,
        events,
        app: None,
    }
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

/// Asserts that a result is a tool error whose text contains every one of `needles`.
pub(crate) fn assert_tool_error(result: &CallToolResult, needles: &[&str]) {
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

/// Expands one `async fn NAME(kind: Kind)` into a `NAME` module with a test per transport.
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
