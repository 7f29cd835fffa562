//! `loadgen chat`: `POST /apps/chat` turns of `/call TOOL {json}` against a running gateway in
//! offline mode, each in a new session (no `sessionId`), read to the end of the event stream.

use std::sync::Arc;

use anyhow::Context;
use futures::FutureExt as _;
use serde_json::{Value, json};

use crate::calls::ToolCall;
use crate::drive::{Call, Plan, drive};
use crate::stats;

/// Settings of `loadgen chat`.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) label: String,
    pub(crate) clients: usize,
    pub(crate) plan: Plan,
    /// The gateway's registered tool name (with its prefix).
    pub(crate) tool: ToolCall,
    /// The gateway's base URL (`http://HOST:PORT`).
    pub(crate) base: String,
}

pub(crate) async fn run(options: &Options) -> anyhow::Result<Value> {
    let url = format!("{}/apps/chat", options.base.trim_end_matches('/'));
    let message = format!(
        "/call {} {}",
        options.tool.name,
        Value::Object(options.tool.arguments.clone())
    );
    let body = json!({ "message": message }).to_string();
    let callers = (0..options.clients)
        .map(|_| -> anyhow::Result<Call> {
            // One connection per caller, kept alive, as a browser's would be.
            let client = reqwest::Client::builder()
                .build()
                .context("building an HTTP client")?;
            let url = url.clone();
            let body = body.clone();
            Ok(Arc::new(move |_| {
                let request = client
                    .post(url.clone())
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send();
                async move {
                    let response = request.await.map_err(|e| e.to_string())?;
                    let status = response.status();
                    let text = response.text().await.map_err(|e| e.to_string())?;
                    if !status.is_success() {
                        return Err(format!("HTTP {status}: {text}"));
                    }
                    tool_result_ok(&text)
                }
                .boxed()
            }))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let sample = drive(callers, options.plan).await;
    Ok(stats::row(
        &options.label,
        options.clients,
        options.plan.calls,
        &sample,
    ))
}

/// Whether the event stream holds a `tool_result` that is not an error.
fn tool_result_ok(stream: &str) -> Result<(), String> {
    let result = stream
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|event| event["type"] == "tool_result");
    match result {
        Some(event) if event["isError"] == false => Ok(()),
        Some(event) => Err(format!("the tool call failed: {}", event["text"])),
        None => Err(format!(
            "no tool_result in the turn: {}",
            stream.chars().take(300).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_succeeds_only_with_a_successful_tool_result() {
        let ok = "data: {\"type\":\"session\",\"sessionId\":\"s\"}\n\n\
                  data: {\"type\":\"tool_result\",\"id\":\"1\",\"text\":\"hi\",\"isError\":false}\n\n";
        assert!(tool_result_ok(ok).is_ok());
        let failed = "data: {\"type\":\"tool_result\",\"id\":\"1\",\"text\":\"Error: x\",\"isError\":true}\n";
        assert!(tool_result_ok(failed).unwrap_err().contains("Error: x"));
        assert!(tool_result_ok("data: {\"type\":\"done\"}\n").is_err());
    }
}
