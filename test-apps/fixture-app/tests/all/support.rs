//! Test support: start the real `fixture-app` binary with its flags (keeping its exit status
//! and stderr) and connect the testkit's rmcp client to it over stdio or HTTP.

use std::process::{ExitStatus, Stdio};

use mcpapp_testkit::{
    Connection, Elicit, Over, TestClient, TestClientBuilder, listening_url, within,
};
use rmcp::service::ClientInitializeError;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

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
        fixture.mcp_url = listening_url(stdout).await;
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

/// A client connected to a fixture process it started.
pub(crate) type Session = Connection<Fixture>;

/// How [`connect_with`] starts the fixture and its client.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The client: 2025-11-25 by default, named `fixture-tests` 2.5.0 (the tools of
    /// `client_info` echo both back).
    pub(crate) client: TestClientBuilder,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            client: client(Elicit::Unsupported),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
        }
    }
}

/// The fixture suite's client, answering elicitations with `elicit`.
pub(crate) fn client(elicit: Elicit) -> TestClientBuilder {
    TestClient::builder()
        .elicit(elicit)
        .name("fixture-tests")
        .version("2.5.0")
}

/// Starts the fixture over `over` with `args` and connects a default client.
pub(crate) async fn connect(over: Over, args: &[&str]) -> Session {
    connect_with(
        over,
        Options {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..Options::default()
        },
    )
    .await
}

/// Starts the fixture over `over` and connects a client configured by `options`.
pub(crate) async fn connect_with(over: Over, options: Options) -> Session {
    try_connect_with(over, options)
        .await
        .unwrap_or_else(|e| panic!("connecting over {over:?} failed: {e}"))
}

/// Like [`connect_with`], returning the client's start-up error instead of failing.
pub(crate) async fn try_connect_with(
    over: Over,
    options: Options,
) -> Result<Session, ClientInitializeError> {
    let mut args = match over {
        Over::Stdio => vec!["stdio"],
        Over::Http => http_args(&[]),
    };
    args.extend(options.args.iter().map(String::as_str));
    let mut command = fixture_command(&args);
    for (name, value) in &options.env {
        command.env(name, value);
    }
    if let Some(cwd) = &options.cwd {
        command.current_dir(cwd);
    }
    match over {
        Over::Stdio => {
            // rmcp speaks over any (AsyncRead, AsyncWrite) pair; owning the child keeps its
            // exit status and stderr available to the test.
            let (fixture, stdout, stdin) = Fixture::spawn(command);
            let connection = options.client.try_connect((stdout, stdin)).await?;
            Ok(connection.keeping(fixture))
        }
        Over::Http => {
            let fixture = Fixture::http_with(command).await;
            let transport =
                rmcp::transport::StreamableHttpClientTransport::from_uri(fixture.mcp_url.clone());
            let connection = options.client.try_connect(transport).await?;
            Ok(connection.keeping(fixture))
        }
    }
}
