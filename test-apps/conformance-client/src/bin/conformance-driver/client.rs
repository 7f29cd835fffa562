//! The end client: rmcp's, over Streamable HTTP, in either era, answering elicitation forms
//! as a user who accepts the defaults does; and the [`Session`] a scenario's steps run on,
//! which records every step for the outcome line.

use std::time::Duration;

use anyhow::Context as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, GetPromptRequestParams, Implementation, JsonObject, Prompt,
    ProtocolVersion, ReadResourceRequestParams, Resource, Tool,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt as _, ServiceExt as _};
use serde_json::{Value, json};

use crate::gateway::Gateway;

/// Bound of one step (above the gateway's request timeout, below the suite's client timeout).
const STEP: Duration = Duration::from_secs(30);
/// How much of a result a step records.
const RESULT_WIDTH: usize = 300;

/// The era the end client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// The `initialize` handshake, at the set's revision (2025-11-25 when it has none).
    Legacy,
    /// 2026-07-28: `server/discover` and per-request `_meta`.
    Modern,
}

impl Era {
    /// The era a requirement set's revision asks of its client.
    pub(crate) fn of_revision(revision: Option<&str>) -> Self {
        if revision == Some("2026-07-28") {
            Self::Modern
        } else {
            Self::Legacy
        }
    }

    /// The version the client asks for.
    fn version(self, revision: Option<&str>) -> ProtocolVersion {
        match self {
            Self::Modern => ProtocolVersion::V_2026_07_28,
            Self::Legacy => revision
                .filter(|r| *r != "2026-07-28")
                .and_then(|r| serde_json::from_value(json!(r)).ok())
                .unwrap_or(ProtocolVersion::V_2025_11_25),
        }
    }

    /// `modern 2026-07-28`, `legacy 2025-11-25`.
    pub(crate) fn name(self, revision: Option<&str>) -> String {
        let kind = match self {
            Self::Legacy => "legacy",
            Self::Modern => "modern",
        };
        format!("{kind} {}", self.version(revision))
    }
}

/// The end client's handler: it declares form elicitation and accepts every form with the
/// schema's defaults filled in (SEP-1034: what a user who presses Accept on a form pre-filled
/// with its defaults sends); URL elicitations are declined (no browser to open them).
#[derive(Debug, Clone)]
pub(crate) struct EndClient {
    config: ClientConfig,
}

impl rmcp::ClientHandler for EndClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(Value::Object(form_answer(&schema)));
        Ok(result)
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

/// The answer to a form: every property's default, and for a required property without one
/// a value of its type (the first of an enum).
fn form_answer(schema: &Value) -> JsonObject {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut answer = JsonObject::new();
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        let value = if let Some(default) = property.get("default") {
            default.clone()
        } else if required.contains(&name.as_str()) {
            match (property["type"].as_str(), property["enum"].get(0)) {
                (_, Some(first)) => first.clone(),
                (Some("boolean"), _) => json!(true),
                (Some("integer" | "number"), _) => json!(0),
                (Some("array"), _) => json!([]),
                _ => json!("conformance"),
            }
        } else {
            continue;
        };
        answer.insert(name.clone(), value);
    }
    answer
}

/// A connected end client and the record of what it did.
pub(crate) struct Session<'g> {
    client: RunningService<RoleClient, EndClient>,
    steps: Vec<Value>,
    /// `MCP_CONFORMANCE_CONTEXT`, or null.
    pub(crate) context: Value,
    gateway: Option<&'g Gateway>,
}

impl<'g> Session<'g> {
    /// Connects to `url` in `era`.
    pub(crate) async fn connect(
        url: &str,
        era: Era,
        revision: Option<&str>,
        context: Value,
        gateway: Option<&'g Gateway>,
    ) -> anyhow::Result<Self> {
        let config = ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("conformance-driver", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(era.version(revision));
        let handler = EndClient { config };
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        let connecting = async {
            match era {
                Era::Legacy => handler.serve(transport).await,
                Era::Modern => {
                    handler
                        .serve_with_lifecycle(
                            transport,
                            ClientLifecycleMode::Discover {
                                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                            },
                        )
                        .await
                }
            }
        };
        let client = tokio::time::timeout(STEP, connecting)
            .await
            .context("the handshake did not finish in time")??;
        let info = client.peer_info();
        let connected = json!({
            "step": "connect",
            "ok": true,
            "protocolVersion": info.as_ref().map(|i| i.protocol_version.to_string()),
            "server": info
                .as_ref()
                .and_then(|i| i.server_info.as_ref())
                .map(|s| format!("{} {}", s.name, s.version)),
        });
        Ok(Self {
            client,
            steps: vec![connected],
            context,
            gateway,
        })
    }

    pub(crate) async fn list_tools(&mut self) -> anyhow::Result<Vec<Tool>> {
        let request = self.client.list_all_tools();
        record(&mut self.steps, "tools/list".to_owned(), request, |tools| {
            json!(tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>())
        })
        .await
    }

    /// `tools/call`, through rmcp's service so input-required rounds are answered. A result
    /// with `isError` is recorded as a failed step and returned.
    pub(crate) async fn call(
        &mut self,
        name: &str,
        arguments: Value,
    ) -> anyhow::Result<CallToolResult> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Value::Object(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let request = self.client.call_tool(params);
        let call = record(
            &mut self.steps,
            format!("tools/call {name}"),
            request,
            |r| json!({"isError": r.is_error, "content": shorten(&json!(r.content))}),
        )
        .await?;
        if call.is_error == Some(true)
            && let Some(last) = self.steps.last_mut()
        {
            last["ok"] = json!(false);
        }
        Ok(call)
    }

    pub(crate) async fn list_resources(&mut self) -> anyhow::Result<Vec<Resource>> {
        let request = self.client.list_all_resources();
        record(
            &mut self.steps,
            "resources/list".to_owned(),
            request,
            |list| json!(list.iter().map(|r| r.uri.clone()).collect::<Vec<_>>()),
        )
        .await
    }

    pub(crate) async fn read_resource(&mut self, uri: &str) -> anyhow::Result<()> {
        let request = self
            .client
            .read_resource(ReadResourceRequestParams::new(uri.to_owned()));
        record(
            &mut self.steps,
            format!("resources/read {uri}"),
            request,
            |r| json!({"contents": r.contents.len()}),
        )
        .await
        .map(drop)
    }

    pub(crate) async fn list_prompts(&mut self) -> anyhow::Result<Vec<Prompt>> {
        let request = self.client.list_all_prompts();
        record(
            &mut self.steps,
            "prompts/list".to_owned(),
            request,
            |list| json!(list.iter().map(|p| p.name.clone()).collect::<Vec<_>>()),
        )
        .await
    }

    pub(crate) async fn get_prompt(&mut self, name: &str) -> anyhow::Result<()> {
        let request = self
            .client
            .get_prompt(GetPromptRequestParams::new(name.to_owned()));
        record(
            &mut self.steps,
            format!("prompts/get {name}"),
            request,
            |r| json!({"messages": r.messages.len()}),
        )
        .await
        .map(drop)
    }

    /// The tools the gateway offers its agent for this app (none when direct): what a model
    /// behind the gateway could call, whatever the end client's own list shows.
    pub(crate) async fn agent_tools(&mut self) -> anyhow::Result<Vec<String>> {
        let Some(gateway) = self.gateway else {
            return Ok(Vec::new());
        };
        let tools = gateway.registered_tools().await;
        let record = match &tools {
            Ok(names) => json!({"step": "agent's tools", "ok": true, "result": names}),
            Err(err) => json!({"step": "agent's tools", "ok": false, "error": format!("{err:#}")}),
        };
        self.steps.push(record);
        tools
    }

    /// The gateway the end client talks to (none when direct).
    pub(crate) fn gateway(&self) -> Option<&'g Gateway> {
        self.gateway
    }

    /// Adds a step the driver took outside the end client (connecting the app, say).
    pub(crate) fn push_step(&mut self, step: Value) {
        self.steps.push(step);
    }

    /// Marks the failed steps so far as superseded: the driver did what a user does about
    /// them (connect the app again) and retries; they no longer fail the outcome.
    pub(crate) fn supersede_failures(&mut self) {
        for step in &mut self.steps {
            if step["ok"] == false {
                step["superseded"] = json!(true);
            }
        }
    }

    /// Closes the client and hands back the record.
    pub(crate) async fn close(self) -> Vec<Value> {
        let Self {
            client, mut steps, ..
        } = self;
        if let Err(err) = client.cancel().await {
            steps.push(json!({"step": "close", "ok": false, "error": err.to_string()}));
        }
        steps
    }
}

/// Runs one request within the step bound and records it in `steps`.
async fn record<T>(
    steps: &mut Vec<Value>,
    name: String,
    request: impl Future<Output = Result<T, rmcp::ServiceError>>,
    describe: impl FnOnce(&T) -> Value,
) -> anyhow::Result<T> {
    let outcome = match tokio::time::timeout(STEP, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(anyhow::Error::new(err)),
        Err(_) => Err(anyhow::anyhow!("no answer within {} s", STEP.as_secs())),
    };
    steps.push(match &outcome {
        Ok(value) => json!({"step": name, "ok": true, "result": describe(value)}),
        Err(err) => json!({"step": name, "ok": false, "error": format!("{err:#}")}),
    });
    outcome.with_context(|| name)
}

/// `value` as JSON text of at most [`RESULT_WIDTH`] characters.
fn shorten(value: &Value) -> Value {
    let text = value.to_string();
    if text.chars().count() <= RESULT_WIDTH {
        value.clone()
    } else {
        json!(format!(
            "{}…",
            text.chars().take(RESULT_WIDTH).collect::<String>()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_answered_with_its_defaults_and_values_for_required_fields() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "status": {"type": "string", "enum": ["active", "inactive"]},
                "ok": {"type": "boolean"},
                "note": {"type": "string"},
            },
            "required": ["status", "ok"],
        });
        assert_eq!(
            Value::Object(form_answer(&schema)),
            json!({"age": 30, "name": "John Doe", "ok": true, "status": "active"})
        );
    }

    #[test]
    fn the_era_follows_the_sets_revision() {
        assert_eq!(Era::of_revision(Some("2026-07-28")), Era::Modern);
        assert_eq!(Era::of_revision(Some("2025-11-25")), Era::Legacy);
        assert_eq!(Era::of_revision(None), Era::Legacy);
        assert_eq!(Era::Legacy.name(Some("2025-06-18")), "legacy 2025-06-18");
        assert_eq!(Era::Legacy.name(Some("2026-07-28")), "legacy 2025-11-25");
        assert_eq!(Era::Modern.name(None), "modern 2026-07-28");
    }
}
