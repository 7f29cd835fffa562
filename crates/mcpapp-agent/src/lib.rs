//! The chat agent behind `/apps/chat`.
//!
//! An [`Agent`] holds sessions (created or resumed by id, bounded, expiring) and runs turns:
//! the model is asked, the tools it calls run through the bridge's
//! [`ToolRegistry`](mcpapp_bridge::ToolRegistry) (in a host, filled with the supervised apps'
//! tools by [`AppToolSync`](mcpapp_bridge::AppToolSync)), their results go back to the model,
//! up to a step limit. A turn streams [`AgentEvent`]s that serialise to the `/apps/chat` wire shapes,
//! starting with `session` and always ending with `done`. Tool calls the user made in an app's
//! UI are written into the prompt ([`TurnRequest::prompt`]).
//!
//! Models implement [`ChatModel`]: [`OpenAiModel`] speaks OpenAI-compatible Chat Completions
//! with streaming and tool calling (OpenAI, Ollama, vLLM, llama.cpp's server, …);
//! [`OfflineModel`] understands a few commands and is the default when no model is configured
//! ([`model_from_env`]).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use futures::StreamExt;
//! use futures::future::BoxFuture;
//! use mcpapp_agent::{Agent, AgentConfig, AgentEvent, OfflineModel, TurnRequest};
//! use mcpapp_bridge::{Tool, ToolContext, ToolOutput, ToolRegistry, ToolSource};
//! use serde_json::{Value, json};
//! use tokio_util::sync::CancellationToken;
//!
//! struct LowStock(Value);
//!
//! impl Tool for LowStock {
//!     fn name(&self) -> &str { "grocery.get_low_stock" }
//!     fn description(&self) -> &str { "List items at or below their reorder threshold" }
//!     fn input_schema(&self) -> &Value { &self.0 }
//!     fn invoke(&self, args: String, _ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
//!         Box::pin(async move { ToolOutput::text(format!("low stock for {args}: apples")) })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = ToolRegistry::new();
//! registry.register(
//!     "mcpapp:grocery",
//!     ToolSource::Native,
//!     vec![Arc::new(LowStock(json!({"type": "object"})))],
//! )?;
//! let agent = Agent::new(registry, Arc::new(OfflineModel::new()), AgentConfig::default());
//!
//! let request = TurnRequest::message("get_low_stock, storeId=1");
//! let events: Vec<AgentEvent> = agent.run_turn(request, CancellationToken::new()).collect().await;
//!
//! let types: Vec<String> = events
//!     .iter()
//!     .map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_owned())
//!     .collect();
//! assert_eq!(types, ["session", "tool", "tool_result", "text", "result", "done"]);
//! assert_eq!(
//!     serde_json::to_value(&events[1])?["input"],
//!     json!({"storeId": 1}),
//! );
//! let AgentEvent::Result { text, .. } = &events[4] else { panic!("a result") };
//! assert!(text.starts_with("[offline mode]"));
//! assert!(text.contains(r#"low stock for {"storeId":1}: apples"#));
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod agent;
mod model;
mod offline;
mod openai;
mod prompt;
mod session;
mod sse;

use std::sync::Arc;

pub use agent::{Agent, AgentConfig, AgentEvent, TurnRequest, TurnStream};
pub use model::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ModelStream,
    ToolCall, ToolSpec,
};
pub use offline::OfflineModel;
pub use openai::{OpenAiConfig, OpenAiModel};
pub use prompt::{AppEvent, PromptError};

/// The model the environment asks for: an [`OpenAiModel`] when `MCPAPP_MODEL` is set (with
/// `OPENAI_BASE_URL` and `OPENAI_API_KEY`), else the [`OfflineModel`].
///
/// # Errors
///
/// [`ModelError::Config`] when a model is named but its configuration cannot be used.
pub fn model_from_env() -> Result<Arc<dyn ChatModel>, ModelError> {
    model_from_config(OpenAiConfig::from_env())
}

/// The model for an optional OpenAI-compatible configuration: the [`OfflineModel`] when there
/// is none.
///
/// Extension point: for a host that reads the model's configuration from elsewhere than the
/// environment ([`model_from_env`] reads it from there).
///
/// # Errors
///
/// [`ModelError::Config`] when the configuration cannot be used.
pub fn model_from_config(config: Option<OpenAiConfig>) -> Result<Arc<dyn ChatModel>, ModelError> {
    Ok(match config {
        Some(config) => {
            tracing::info!(
                model = %config.model,
                base_url = %openai::redact_url(&config.base_url),
                "using an OpenAI-compatible model"
            );
            Arc::new(OpenAiModel::new(config)?)
        }
        None => {
            tracing::info!("no model configured; using the offline command mode");
            Arc::new(OfflineModel::new())
        }
    })
}
