//! A small MCP server with the `tools_call` scenario's tool, and running the adapter.

// Tests start the binary under test; that is what they are for.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::Value;

/// Long enough for a run on a loaded 2-core machine; only a hung adapter reaches it.
const PATIENCE: Duration = Duration::from_secs(120);

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct AddArgs {
    /// First number.
    a: f64,
    /// Second number.
    b: f64,
}

/// Serves `add_numbers`, as the suite's `tools_call` test server does.
#[derive(Clone)]
pub(crate) struct AddServer {
    calls: Arc<Mutex<Vec<(f64, f64)>>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl AddServer {
    /// Add two numbers together.
    #[tool]
    fn add_numbers(&self, Parameters(args): Parameters<AddArgs>) -> String {
        self.calls.lock().unwrap().push((args.a, args.b));
        format!(
            "The sum of {} and {} is {}",
            args.a,
            args.b,
            args.a + args.b
        )
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for AddServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// The server on `127.0.0.1:0`: its MCP URL and the calls it received.
pub(crate) struct Server {
    pub(crate) url: String,
    pub(crate) calls: Arc<Mutex<Vec<(f64, f64)>>>,
}

impl Server {
    pub(crate) async fn start() -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let shared = calls.clone();
        let mcp = StreamableHttpService::new(
            move || {
                Ok(AddServer {
                    calls: shared.clone(),
                    tool_router: AddServer::tool_router(),
                })
            },
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let app = axum::Router::new().nest_service("/mcp", mcp);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, calls }
    }
}

/// What one run of the adapter did.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: Option<i32>,
    /// The JSON line it printed, or `Null` when it printed none.
    pub(crate) outcome: Value,
    pub(crate) stderr: String,
}

/// Runs the adapter with `args` and the environment variable `scenario` sets (as the suite
/// does), to its end.
pub(crate) async fn run_adapter(args: &[&str], scenario: Option<&str>) -> Run {
    run_program(
        env!("CARGO_BIN_EXE_conformance-client"),
        args,
        &[("MCP_CONFORMANCE_SCENARIO", scenario)],
    )
    .await
}

/// Runs the driver with `args` and the suite's variables (`None` removes one), to its end.
pub(crate) async fn run_driver(args: &[&str], env: &[(&str, Option<&str>)]) -> Run {
    run_program(env!("CARGO_BIN_EXE_conformance-driver"), args, env).await
}

async fn run_program(program: &str, args: &[&str], env: &[(&str, Option<&str>)]) -> Run {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("RUST_LOG", "info")
        .kill_on_drop(true);
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = tokio::time::timeout(PATIENCE, command.output())
        .await
        .expect("the program ends")
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let outcome = stdout
        .lines()
        .last()
        .map_or(Value::Null, |line| serde_json::from_str(line).unwrap());
    Run {
        code: output.status.code(),
        outcome,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
