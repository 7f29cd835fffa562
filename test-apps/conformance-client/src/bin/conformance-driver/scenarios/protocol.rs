//! The `protocol` family: every scored client scenario of the 2025-11-25 and 2026-07-28
//! requirement sets except the `auth/*` ones, with the steps a user's client takes for each.
//! Through the gateway, what reaches the suite's server is the gateway's doing: its own
//! discovery and listings, and what it makes of the end client's requests.

use serde_json::{Value, json};

use crate::client::Session;

pub(super) const SCENARIOS: &[&str] = &[
    // 2025-11-25 (and, for tools_call, 2026-07-28).
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    // 2026-07-28.
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
];

/// None of these needs more than the default manifest.
pub(super) fn manifest_extras(_scenario: &str, _context: &Value) -> Value {
    json!({})
}

pub(super) async fn run(scenario: &str, session: &mut Session<'_>) -> anyhow::Result<()> {
    match scenario {
        // Connecting and listing is the whole test: the handshake (or discovery) and the
        // metadata on every request; the network `$ref` must not be fetched on the way.
        "initialize" | "request-metadata" | "json-schema-ref-no-deref" => {
            session.list_tools().await?;
        }
        "tools_call" => {
            session.list_tools().await?;
            session.call("add_numbers", json!({"a": 5, "b": 3})).await?;
        }
        // The server asks for a form during the call; the end client accepts the defaults.
        "elicitation-sep1034-client-defaults" => {
            session.list_tools().await?;
            session
                .call("test_client_elicitation_defaults", json!({}))
                .await?;
        }
        // The server ends the call's stream early; whoever talks to it must resume.
        "sse-retry" => {
            session.list_tools().await?;
            session.call("test_reconnection", json!({})).await?;
        }
        "sep-2322-client-request-state" => request_state(session).await?,
        "http-standard-headers" => everything(session).await?,
        "http-custom-headers" => custom_headers(session).await?,
        "http-invalid-tool-headers" => invalid_tool_headers(session).await?,
        other => anyhow::bail!("the protocol family has no steps for `{other}`"),
    }
    Ok(())
}

/// SEP-2322: calls that need input (answered by the end client's form, or by the gateway for
/// it) and calls that must not carry another call's state.
async fn request_state(session: &mut Session<'_>) -> anyhow::Result<()> {
    session.list_tools().await?;
    let mut failed = None;
    for tool in [
        "test_mrtr_echo_state",
        "test_mrtr_unrelated",
        "test_mrtr_no_state",
        "test_mrtr_no_result_type",
    ] {
        if let Err(err) = session.call(tool, json!({})).await {
            failed.get_or_insert(err);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// SEP-2243's standard headers: one request of every kind that names something.
async fn everything(session: &mut Session<'_>) -> anyhow::Result<()> {
    let mut failed = None;
    let tools = session.list_tools().await?;
    for tool in &tools {
        if let Err(err) = session.call(&tool.name, json!({})).await {
            failed.get_or_insert(err);
        }
    }
    for resource in session.list_resources().await? {
        if let Err(err) = session.read_resource(&resource.uri).await {
            failed.get_or_insert(err);
        }
    }
    for prompt in session.list_prompts().await? {
        if let Err(err) = session.get_prompt(&prompt.name).await {
            failed.get_or_insert(err);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// SEP-2243's `Mcp-Param-*` headers: the calls the suite's context names, after a listing
/// (a client learns which arguments to mirror from the tools' schemas).
async fn custom_headers(session: &mut Session<'_>) -> anyhow::Result<()> {
    session.list_tools().await?;
    let calls: Vec<(String, Value)> = session.context["toolCalls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|call| {
            let name = call["name"].as_str()?.to_owned();
            Some((name, call["arguments"].clone()))
        })
        .collect();
    anyhow::ensure!(
        !calls.is_empty(),
        "MCP_CONFORMANCE_CONTEXT names no toolCalls: {}",
        session.context
    );
    let mut failed = None;
    for (name, arguments) in calls {
        if let Err(err) = session.call(&name, arguments).await {
            failed.get_or_insert(err);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// SEP-2243's invalid `x-mcp-header` annotations: a client must leave such tools out. The
/// end client calls every tool anyone is offered: its own list, and the gateway's agent's
/// (a model may call whatever the registry offers it). A tool that reaches the server
/// through either was not left out.
async fn invalid_tool_headers(session: &mut Session<'_>) -> anyhow::Result<()> {
    let listed = session.list_tools().await?;
    let mut calls: Vec<(String, Value)> = listed
        .iter()
        .map(|tool| {
            let schema = Value::Object((*tool.input_schema).clone());
            (tool.name.to_string(), arguments_for(&schema))
        })
        .collect();
    for name in session.agent_tools().await? {
        if !calls.iter().any(|(n, _)| *n == name) {
            calls.push((name, json!({})));
        }
    }
    for (name, arguments) in calls {
        // Refusals are the point here; only what reaches the server counts.
        let _ = session.call(&name, arguments).await;
    }
    Ok(())
}

/// Arguments that satisfy `schema`'s required properties by type.
fn arguments_for(schema: &Value) -> Value {
    let mut arguments = serde_json::Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let value = match schema["properties"][name]["type"].as_str() {
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            Some("object") => json!({}),
            Some("array") => json!([]),
            Some("null") => Value::Null,
            _ => json!("us-west1"),
        };
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_arguments_get_a_value_of_their_type() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string"},
                "score": {"type": "number"},
                "data": {"type": "object"},
                "optional": {"type": "string"},
            },
            "required": ["region", "score", "data"],
        });
        assert_eq!(
            arguments_for(&schema),
            json!({"region": "us-west1", "score": 1, "data": {}})
        );
    }
}
