//! `mcpapp-gateway call APP TOOL [JSON]`: one tool call through a running gateway, as an MCP
//! client of the gateway's own endpoints (rmcp's Streamable HTTP client), so the call takes
//! the path any client's would, the gateway's checks included.
//!
//! The app's detail (`GET /apps/{id}`) says first whether the app runs and has the tool, so
//! that an unknown app or tool is told apart (exit 5) from a failed call (exit 1). A tool
//! views may call (visibility with `"app"`) is called on the app's `/apps/mcp/{appId}` under
//! its own name; a model-only tool on `/mcp` under its registered name.
//!
//! Output: the result's text blocks, a line for each other block, and `structuredContent`
//! as pretty JSON; with `--json` the whole `CallToolResult`. A result with `isError` exits 1.

use std::io::{Read, Write};

use mcpapp_manifest::json_kind;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

use super::output::{Out, str_of};
use crate::cli::CallArgs;
use crate::remote::{EXIT_FAILED, Remote, RemoteError, innermost, segment};

pub(crate) async fn run(args: &CallArgs) -> Result<u8, RemoteError> {
    let arguments = arguments(args.arguments.as_deref())?;
    let remote = super::remote_of(&args.remote)?;
    let app = super::apps::detail(&remote, &args.app).await?;
    let lifecycle = str_of(&app["lifecycle"]);
    if lifecycle != "Running" {
        let why = app["lastError"]
            .as_str()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(RemoteError::Failed(format!(
            "{} is {lifecycle}, not Running{why}; start it with `mcpapp-gateway apps start {}`",
            args.app, args.app
        )));
    }
    let (url, name) = route(&remote, &app, &args.app, &args.tool)?;
    let result = call(&remote, &url, name, arguments).await?;
    let mut out = Out::stdout();
    let failed = result.is_error == Some(true);
    if args.remote.json {
        let value = serde_json::to_value(&result).map_err(std::io::Error::other)?;
        out.json(&value)?;
    } else if failed {
        // The tool's own words are the error message.
        let mut err = std::io::stderr().lock();
        writeln!(err, "error: {} {} returned an error:", args.app, args.tool)?;
        write_result(&mut err, &result)?;
    } else {
        write_result(&mut out, &result)?;
    }
    Ok(if failed { EXIT_FAILED } else { 0 })
}

/// The arguments: a JSON object given inline, read from stdin for `-`, `{}` when left out.
fn arguments(given: Option<&str>) -> Result<JsonObject, RemoteError> {
    let (text, source) = match given {
        None => return Ok(JsonObject::new()),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| {
                RemoteError::Usage(format!("cannot read the arguments from stdin: {e}"))
            })?;
            (text, "the arguments on stdin")
        }
        Some(text) => (text.to_owned(), "the arguments"),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(RemoteError::Usage(format!(
            "{source} must be a JSON object such as {{\"message\": \"hi\"}}, not {}",
            json_kind(&other)
        ))),
        Err(e) => Err(RemoteError::Usage(format!(
            "{source} are not JSON: {} at line {} column {}",
            strip_position(&e),
            e.line(),
            e.column()
        ))),
    }
}

/// serde_json's message without its own " at line L column C", which is given once.
fn strip_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    text.rsplit_once(" at line ")
        .map_or(text.clone(), |(message, _)| message.to_owned())
}

/// Where to call `tool` of `app` (from its detail), and under which name.
fn route(
    remote: &Remote,
    app: &Value,
    id: &str,
    tool: &str,
) -> Result<(String, String), RemoteError> {
    let tools = app["tools"].as_array().cloned().unwrap_or_default();
    let found = tools
        .iter()
        .find(|t| t["name"] == tool)
        .or_else(|| tools.iter().find(|t| t["registeredName"] == tool));
    let Some(found) = found else {
        let names: Vec<String> = tools.iter().map(|t| str_of(&t["name"])).collect();
        let listed = if names.is_empty() {
            "it has none".to_owned()
        } else {
            format!("its tools: {}", names.join(", "))
        };
        return Err(RemoteError::NotFound(format!(
            "{id} has no tool '{tool}' ({listed})"
        )));
    };
    if found["visibility"]["app"] == true {
        return Ok((
            format!("{}/apps/mcp/{}", remote.base(), segment(id)),
            str_of(&found["name"]),
        ));
    }
    match found["registeredName"].as_str() {
        Some(registered) => Ok((format!("{}/mcp", remote.base()), registered.to_owned())),
        None => Err(RemoteError::Failed(format!(
            "{id}'s tool '{}' can be called neither by views nor by the model (its visibility: {}), so the gateway offers it to no client",
            str_of(&found["name"]),
            found["visibility"]
        ))),
    }
}

/// One session on `url`: initialize, `tools/call`, close.
async fn call(
    remote: &Remote,
    url: &str,
    name: String,
    arguments: JsonObject,
) -> Result<CallToolResult, RemoteError> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = remote.token() {
        config = config.auth_header(token.to_owned());
    }
    let transport = StreamableHttpClientTransport::with_client(remote.http(), config);
    let timed_out = || RemoteError::TimedOut {
        url: remote.base().to_owned(),
        secs: remote.timeout().as_secs(),
    };
    let client = tokio::time::timeout(remote.timeout(), ().serve(transport))
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| {
            RemoteError::Failed(format!(
                "cannot open an MCP session at {url}: {}",
                innermost(&e)
            ))
        })?;
    let params = CallToolRequestParams::new(name.clone()).with_arguments(arguments);
    let result = tokio::time::timeout(remote.timeout(), client.peer().call_tool(params)).await;
    // Closing the session is a courtesy to the gateway; its failure changes nothing.
    let _ = client.cancel().await;
    result
        .map_err(|_| timed_out())?
        .map_err(|e| RemoteError::Failed(format!("tools/call {name} at {url} failed: {e}")))
}

/// The result for people: text blocks as they are, a line for each other block, then the
/// structured content as pretty JSON.
fn write_result(out: &mut impl Write, result: &CallToolResult) -> std::io::Result<()> {
    for block in &result.content {
        if let Some(text) = block.as_text() {
            writeln!(out, "{}", text.text)?;
            continue;
        }
        let value = serde_json::to_value(block).unwrap_or_default();
        let kind = value["type"].as_str().unwrap_or("content").to_owned();
        let what = value["mimeType"]
            .as_str()
            .or_else(|| value["uri"].as_str())
            .or_else(|| value["resource"]["uri"].as_str())
            .unwrap_or_default();
        writeln!(out, "[{kind} {what}]")?;
    }
    if let Some(structured) = &result.structured_content {
        let text = serde_json::to_string_pretty(structured).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
    }
    Ok(())
}
