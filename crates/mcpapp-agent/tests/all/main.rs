//! Integration tests of mcpapp-agent: prompts and wire shapes, the offline command mode, turns
//! and sessions, the OpenAI-compatible provider against a scripted HTTP server, and the
//! offline mode driving a real supervised grocery app through the bridge.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod apps;
mod offline;
mod openai;
mod prompt;
mod turns;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use mcpapp_agent::{
    Agent, AgentConfig, AgentEvent, ChatModel, ChatRequest, ModelError, ModelEvent, ModelStream,
    OfflineModel, TurnRequest,
};
use mcpapp_bridge::{Tool, ToolContext, ToolOutput, ToolRegistry, ToolSource};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A guard against a hung test; results are awaited, never slept for.
pub(crate) const LIMIT: Duration = Duration::from_secs(30);

/// The seed's grocery tool, faked: low-stock rows per store, as text and structured content.
pub(crate) struct LowStock {
    schema: Value,
}

impl LowStock {
    pub(crate) fn tool() -> Arc<dyn Tool> {
        Arc::new(Self {
            schema: json!({
                "type": "object",
                "properties": {"storeId": {"type": "integer"}},
                "required": ["storeId"]
            }),
        })
    }
}

impl Tool for LowStock {
    fn name(&self) -> &str {
        "grocery.get_low_stock"
    }

    fn description(&self) -> &str {
        "List inventory items at or below their reorder threshold"
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn invoke(&self, arguments_json: String, _ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            let args: Value = match serde_json::from_str(&arguments_json) {
                Ok(args) => args,
                Err(e) => return ToolOutput::error(format!("invalid JSON arguments: {e}")),
            };
            let Some(store) = args.get("storeId").and_then(Value::as_i64) else {
                return ToolOutput::error("storeId must be an integer");
            };
            let rows = match store {
                1 => json!([
                    {"product": "Apples", "onHand": 3, "reorderAt": 10},
                    {"product": "Milk", "onHand": 0, "reorderAt": 6}
                ]),
                _ => json!([]),
            };
            ToolOutput::text(rows.to_string()).with_structured(json!({"rows": rows}))
        })
    }
}

/// A simple tool with a chosen name and description that echoes its arguments and session.
pub(crate) struct Echo {
    name: String,
    description: String,
    schema: Value,
}

pub(crate) fn echo(name: &str, description: &str) -> Arc<dyn Tool> {
    Arc::new(Echo {
        name: name.to_owned(),
        description: description.to_owned(),
        schema: json!({"type": "object"}),
    })
}

impl Tool for Echo {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn invoke(&self, arguments_json: String, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let name = self.name.clone();
        Box::pin(async move {
            let session = ctx.session_id.unwrap_or_default();
            ToolOutput::text(format!("{name} in {session} got {arguments_json}"))
        })
    }
}

/// A registry with the fake grocery tools and a weather tool.
pub(crate) fn grocery_registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry
        .register(
            "mcpapp:grocery",
            ToolSource::Native,
            vec![
                LowStock::tool(),
                echo("grocery.get_stores", "Query stores, optional id"),
                echo("grocery.adjust_stock", "Adjust on-hand quantity by delta"),
            ],
        )
        .unwrap();
    registry
        .register(
            "mcpapp:weather",
            ToolSource::Native,
            vec![echo("wx.forecast", "Weather forecast for a city")],
        )
        .unwrap();
    registry
}

/// A model that plays back scripted replies, one per step, and records every request.
pub(crate) struct Scripted {
    replies: Mutex<VecDeque<Vec<Result<ModelEvent, ModelError>>>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    pub(crate) fn new(replies: Vec<Vec<Result<ModelEvent, ModelError>>>) -> Arc<Self> {
        Arc::new(Self {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl ChatModel for Scripted {
    fn label(&self) -> &str {
        "scripted"
    }

    fn stream(&self, request: ChatRequest) -> ModelStream {
        self.requests.lock().unwrap().push(request);
        let reply = self.replies.lock().unwrap().pop_front().unwrap_or_else(|| {
            vec![Err(ModelError::Provider {
                message: "the script has no more replies".into(),
            })]
        });
        futures::stream::iter(reply).boxed()
    }
}

/// An agent over `registry` with the offline model.
pub(crate) fn offline_agent(registry: ToolRegistry) -> Agent {
    Agent::new(
        registry,
        Arc::new(OfflineModel::new()),
        AgentConfig::default(),
    )
}

/// Runs a turn to its end.
pub(crate) async fn run(agent: &Agent, request: TurnRequest) -> Vec<AgentEvent> {
    let stream = agent.run_turn(request, CancellationToken::new());
    tokio::time::timeout(LIMIT, stream.collect::<Vec<_>>())
        .await
        .expect("the turn ends")
}

/// The `type` of every event, as sent on the wire.
pub(crate) fn types(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// The final `result` text; panics if there is none.
pub(crate) fn result_text(events: &[AgentEvent]) -> String {
    events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Result { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result in {events:?}"))
}

/// The `error` text; panics if there is none.
pub(crate) fn error_text(events: &[AgentEvent]) -> String {
    events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Error { error } => Some(error.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no error in {events:?}"))
}
