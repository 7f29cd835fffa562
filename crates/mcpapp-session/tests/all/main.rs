//! Integration tests of mcpapp-session through its public API only: a shared session over a
//! [`Link`] of the tests' own (an in-memory byte pipe, newline-delimited as stdio is) to a
//! real rmcp server in this process, so the session crate is tested without starting any
//! process. The supervisor's tests cover the same session over real stdio children and HTTP
//! servers.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used, clippy::needless_pass_by_value)]

mod observer;
mod ports;
mod raw;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpapp_session::{
    CallOutcome, CallPath, Causes, CloseFuture, Connection, EraChoice, GatewayClient, Link,
    LinkEvent, Origin, PortReply, RawMessage, RequestKey, SessionObserver, ToolObserver,
};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

/// Long enough for any single step on a loaded 2-core CI machine; tests wait on events and
/// only fail at this bound.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// The tools of the test server: `echo` answers with its `text`, `fail` reports a tool error,
/// `wait` answers only when cancelled (and says so on [`TestServer::cancelled`]).
#[derive(Debug, Clone)]
pub(crate) struct TestServer {
    /// Serve 2025-11-25 and older only (no `server/discover`), or every known version.
    legacy_only: bool,
    /// How many `wait` calls the server was told to stop.
    pub(crate) cancelled: Arc<watch::Sender<usize>>,
}

impl TestServer {
    pub(crate) fn new(legacy_only: bool) -> Self {
        Self {
            legacy_only,
            cancelled: Arc::new(watch::channel(0).0),
        }
    }
}

fn tool(name: &'static str) -> Tool {
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    let Value::Object(schema) = schema else {
        unreachable!("an object literal")
    };
    Tool::new(name, "a test tool", schema)
}

impl rmcp::ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("session-test-server", "1"))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.legacy_only {
            Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool("echo"),
            tool("fail"),
            tool("wait"),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match request.name.as_ref() {
            "echo" => Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into()),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("it failed")]).into()),
            "wait" => {
                context.ct.cancelled().await;
                self.cancelled.send_modify(|n| *n += 1);
                Ok(CallToolResult::success(vec![ContentBlock::text("stopped")]).into())
            }
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

/// A link to a server in this process over an in-memory byte pipe, one message per line.
#[derive(Debug)]
pub(crate) struct PipeLink {
    outgoing: Mutex<Option<mpsc::UnboundedSender<String>>>,
    server: tokio::task::AbortHandle,
    /// Tells the reader to stop: what the server writes after the link closed is not read.
    stop: watch::Sender<bool>,
    closed: watch::Receiver<bool>,
}

impl PipeLink {
    /// Starts `server` on one end of a pipe and returns the link on the other end, with the
    /// events it reports.
    pub(crate) fn connect(server: TestServer) -> (Arc<Self>, mpsc::UnboundedReceiver<LinkEvent>) {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let serving = tokio::spawn(async move {
            if let Ok(running) = rmcp::serve_server(server, theirs).await {
                let _ = running.waiting().await;
            }
        });
        let (read, mut write) = tokio::io::split(ours);
        let (outgoing, mut queue) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(line) = queue.recv().await {
                if write
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
            let _ = write.shutdown().await;
        });
        let (events, events_rx) = mpsc::unbounded_channel();
        let (closed, closed_rx) = watch::channel(false);
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(async move {
            let mut lines = BufReader::new(read).lines();
            loop {
                let line = tokio::select! {
                    line = lines.next_line() => match line {
                        Ok(Some(line)) => line,
                        _ => break,
                    },
                    _ = stopped.wait_for(|stop| *stop) => break,
                };
                let event = match RawMessage::parse(line.as_str()) {
                    Ok(message) => LinkEvent::Message {
                        message,
                        origin: Origin::Stdio,
                    },
                    Err(_) => LinkEvent::Garbage(line),
                };
                let _ = events.send(event);
            }
            let _ = events.send(LinkEvent::Closed("the test server ended".to_owned()));
            closed.send_replace(true);
        });
        let link = Self {
            outgoing: Mutex::new(Some(outgoing)),
            server: serving.abort_handle(),
            stop,
            closed: closed_rx,
        };
        (Arc::new(link), events_rx)
    }
}

impl Link for PipeLink {
    fn send(&self, message: RawMessage, _request: Option<RequestKey>) {
        if let Some(outgoing) = self.outgoing.lock().unwrap().as_ref() {
            let _ = outgoing.send(message.into_string());
        }
    }

    fn close(&self, _grace: Duration) -> CloseFuture<'_> {
        Box::pin(async move {
            self.stop.send_replace(true);
            self.outgoing.lock().unwrap().take();
            self.server.abort();
            let mut closed = self.closed.clone();
            let _ = closed.wait_for(|closed| *closed).await;
        })
    }
}

impl Drop for PipeLink {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A `tools/call` as the observer heard it end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finished {
    pub(crate) tool: Option<String>,
    pub(crate) path: CallPath,
    pub(crate) outcome: CallOutcome,
}

/// What an observer heard.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Heard {
    pub(crate) calls: Vec<Finished>,
    pub(crate) timeouts: u64,
    pub(crate) cancellations: u64,
}

/// An observer that writes down what it hears.
#[derive(Debug, Clone)]
pub(crate) struct Recorder(Arc<watch::Sender<Heard>>);

impl Recorder {
    pub(crate) fn new() -> Self {
        Self(Arc::new(watch::channel(Heard::default()).0))
    }

    /// Waits until what was heard satisfies `done`, and returns it.
    pub(crate) async fn until(&self, done: impl Fn(&Heard) -> bool) -> Heard {
        let mut heard = self.0.subscribe();
        let reached = tokio::time::timeout(PATIENCE, heard.wait_for(|h| done(h))).await;
        assert!(
            reached.is_ok(),
            "the observer heard only {:?}",
            self.0.borrow()
        );
        self.0.borrow().clone()
    }
}

#[derive(Debug)]
struct ToolRecorder {
    tool: Option<String>,
    heard: Arc<watch::Sender<Heard>>,
}

impl SessionObserver for Recorder {
    fn tool(&self, name: Option<&str>) -> Arc<dyn ToolObserver> {
        Arc::new(ToolRecorder {
            tool: name.map(str::to_owned),
            heard: self.0.clone(),
        })
    }

    fn timed_out(&self) {
        self.0.send_modify(|h| h.timeouts += 1);
    }

    fn cancelled(&self, count: u64) {
        self.0.send_modify(|h| h.cancellations += count);
    }
}

impl ToolObserver for ToolRecorder {
    fn finish(&self, path: CallPath, outcome: CallOutcome, _elapsed: Duration) {
        let finished = Finished {
            tool: self.tool.clone(),
            path,
            outcome,
        };
        self.heard.send_modify(|h| h.calls.push(finished));
    }
}

/// A session open on a fresh test server.
pub(crate) struct Session {
    pub(crate) connection: Arc<Connection>,
    pub(crate) server: TestServer,
    pub(crate) recorder: Recorder,
}

/// Opens a session on a new test server (`legacy_only` or of every version), found out the
/// way `choice` says, with `request_timeout` on every request.
pub(crate) async fn open(
    legacy_only: bool,
    choice: EraChoice,
    request_timeout: Duration,
) -> Session {
    let server = TestServer::new(legacy_only);
    let (link, events) = PipeLink::connect(server.clone());
    let (notices, _notices) = mpsc::unbounded_channel();
    let client = GatewayClient::new("test-app".to_owned(), notices, Causes::default(), None);
    let recorder = Recorder::new();
    let connection = tokio::time::timeout(
        PATIENCE,
        Connection::open(
            "test-app",
            link,
            events,
            client,
            request_timeout,
            choice,
            Arc::new(recorder.clone()),
        ),
    )
    .await
    .expect("the handshake finished")
    .expect("the handshake succeeded");
    Session {
        connection: Arc::new(connection),
        server,
        recorder,
    }
}

pub(crate) fn msg(value: Value) -> RawMessage {
    RawMessage::from_value(&value).unwrap()
}

pub(crate) fn json_of(message: &RawMessage) -> Value {
    serde_json::from_str(message.as_str()).unwrap()
}

/// A legacy client's `initialize`.
pub(crate) fn initialize(version: &str) -> RawMessage {
    msg(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test-client", "version": "1"},
        }}),
    )
}

/// Sends `request` through `port` and collects what comes back for it.
pub(crate) async fn exchange(port: &mcpapp_session::Port, request: Value) -> Vec<RawMessage> {
    match port.send(msg(request)).await.unwrap() {
        PortReply::Response(response) => vec![response],
        PortReply::Accepted => Vec::new(),
        PortReply::Stream(mut stream) => {
            let mut out = Vec::new();
            while let Some(message) = tokio::time::timeout(PATIENCE, stream.next()).await.unwrap() {
                out.push(message);
            }
            out
        }
    }
}

/// A `tools/call` request.
pub(crate) fn call(id: Value, tool: &str, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": {"text": text},
    }})
}
