//! `loadgen calls`: rmcp clients calling one tool, over Streamable HTTP (an app directly, or
//! the gateway's `/apps/mcp/{appId}` or `/mcp`) or over stdio (an app this program spawns).
//!
//! Each client is its own MCP session, except with `--shared`: then one session carries
//! every caller's requests concurrently (what the gateway's one upstream session does).

// The direct stdio rows need this program to start the app itself, as the gateway would.
#![allow(clippy::disallowed_methods)]

use std::process::Stdio;
use std::sync::Arc;

use anyhow::{Context, bail};
use futures::FutureExt as _;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;

use crate::drive::{Call, Plan, drive};
use crate::stats;

/// Where the clients connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A Streamable HTTP endpoint.
    Http(String),
    /// A program to spawn, speaking MCP on its stdin and stdout.
    Stdio { program: String, args: Vec<String> },
}

impl Target {
    /// `http URL` or `stdio PROGRAM [ARGS...]`.
    pub(crate) fn parse(words: &[String]) -> anyhow::Result<Self> {
        match words {
            [kind, url] if kind == "http" => Ok(Self::Http(url.clone())),
            [kind, program, args @ ..] if kind == "stdio" => Ok(Self::Stdio {
                program: program.clone(),
                args: args.to_vec(),
            }),
            other => bail!("a target is `http URL` or `stdio PROGRAM [ARGS...]`, not {other:?}"),
        }
    }
}

/// One client session.
pub(crate) type Client = RunningService<RoleClient, ()>;

/// Connects one client (spawning the program for a stdio target) and completes `initialize`.
pub(crate) async fn connect(target: &Target) -> anyhow::Result<Client> {
    match target {
        Target::Http(url) => {
            ().serve(StreamableHttpClientTransport::from_uri(url.clone()))
                .await
                .with_context(|| format!("initialize with {url}"))
        }
        Target::Stdio { program, args } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            let (transport, _) = TokioChildProcess::builder(command)
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| format!("starting {program}"))?;
            ().serve(transport)
                .await
                .with_context(|| format!("initialize with {program}"))
        }
    }
}

/// The tool call every caller makes.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    pub(crate) name: String,
    pub(crate) arguments: JsonObject,
}

impl ToolCall {
    /// `arguments` must be a JSON object.
    pub(crate) fn new(name: &str, arguments: &str) -> anyhow::Result<Self> {
        let value: Value = serde_json::from_str(arguments)
            .with_context(|| format!("--args is not JSON: {arguments}"))?;
        let Value::Object(arguments) = value else {
            bail!("--args must be a JSON object, not {arguments}");
        };
        Ok(Self {
            name: name.to_owned(),
            arguments,
        })
    }
}

/// A caller that makes `tool` calls on `client`'s session.
fn caller(client: &Client, tool: &ToolCall) -> Call {
    let peer = client.peer().clone();
    let tool = tool.clone();
    Arc::new(move |_| {
        let peer = peer.clone();
        let params =
            CallToolRequestParams::new(tool.name.clone()).with_arguments(tool.arguments.clone());
        async move {
            let result = peer
                .call_tool(params)
                .await
                .map_err(|e| format!("tools/call failed: {e}"))?;
            if result.is_error == Some(true) {
                return Err(format!("the tool answered an error: {:?}", result.content));
            }
            Ok(())
        }
        .boxed()
    })
}

/// Settings of `loadgen calls`.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) label: String,
    pub(crate) clients: usize,
    pub(crate) plan: Plan,
    pub(crate) shared: bool,
    pub(crate) tool: ToolCall,
    pub(crate) target: Target,
}

/// Connects the clients, measures, disconnects; returns one row.
pub(crate) async fn run(options: &Options) -> anyhow::Result<Value> {
    let sessions = if options.shared { 1 } else { options.clients };
    let mut clients = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        clients.push(connect(&options.target).await?);
    }
    let callers: Vec<Call> = (0..options.clients)
        .map(|i| caller(&clients[i % sessions], &options.tool))
        .collect();
    let sample = drive(callers, options.plan).await;
    for client in clients {
        let _ = client.cancel().await;
    }
    Ok(stats::row(
        &options.label,
        options.clients,
        options.plan.calls,
        &sample,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn targets_are_http_or_stdio() {
        assert_eq!(
            Target::parse(&words(&["http", "http://127.0.0.1:1/mcp"])).unwrap(),
            Target::Http("http://127.0.0.1:1/mcp".to_owned())
        );
        assert_eq!(
            Target::parse(&words(&["stdio", "/bin/app", "stdio", "--x"])).unwrap(),
            Target::Stdio {
                program: "/bin/app".to_owned(),
                args: words(&["stdio", "--x"]),
            }
        );
        assert!(Target::parse(&words(&["http"])).is_err());
        assert!(Target::parse(&words(&["tcp", "x"])).is_err());
    }

    #[test]
    fn tool_arguments_must_be_an_object() {
        assert_eq!(
            ToolCall::new("echo", r#"{"message":"hi"}"#)
                .unwrap()
                .arguments["message"],
            "hi"
        );
        assert!(ToolCall::new("echo", "[1]").is_err());
        assert!(ToolCall::new("echo", "{").is_err());
    }
}
