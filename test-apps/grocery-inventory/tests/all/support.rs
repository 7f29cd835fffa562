//! Test support: start the real `grocery-inventory` binary with its flags and connect the
//! testkit's rmcp client to it over stdio or HTTP.

use std::process::Stdio;

use mcpapp_testkit::{Elicit, Over, TestClient, TestClientBuilder, listening_url};
use tokio::process::{Child, Command};

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
    let mcp_url = listening_url(child.stdout.take().expect("piped stdout")).await;
    let base_url = mcp_url.trim_end_matches("/mcp").to_owned();
    HttpApp {
        _child: child,
        mcp_url,
        base_url,
    }
}

/// A client connected to the app; it keeps the http app it started (None for stdio, whose
/// child the client owns, or for an app the test shares).
pub(crate) type Connection = mcpapp_testkit::Connection<Option<HttpApp>>;

/// The grocery suite's client, answering elicitations with `elicit`.
fn client(elicit: Elicit) -> TestClientBuilder {
    TestClient::builder().elicit(elicit).name("grocery-tests")
}

/// Starts the app over `over` (with extra command-line arguments) and connects a client.
pub(crate) async fn connect(over: Over, elicit: Elicit, extra: &[&str]) -> Connection {
    match over {
        Over::Stdio => {
            let mut args = vec!["stdio"];
            args.extend_from_slice(extra);
            client(elicit).stdio(app_command(&args)).await.keeping(None)
        }
        Over::Http => {
            let app = start_http(extra).await;
            client(elicit).http(&app.mcp_url).await.keeping(Some(app))
        }
    }
}

/// Connects a client to an already running http app.
pub(crate) async fn connect_url(url: &str, elicit: Elicit) -> Connection {
    client(elicit).http(url).await.keeping(None)
}
