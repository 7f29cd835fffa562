//! The bridge between tools and the agent: the [`Tool`] trait, the [`ToolRegistry`] that holds
//! tools from every source under a deterministic, collision-reporting naming rule, and the
//! [`ModelNames`] map to names that model providers accept.
//!
//! The registry knows nothing about MCP or HTTP. MCP app tools (registration id
//! `mcpapp:{appId}`), built-in tools and plugin tools all implement [`Tool`]; consumers (the
//! agent, the aggregated MCP endpoint) list and resolve them here and refresh when the change
//! counter moves.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use futures::future::BoxFuture;
//! use mcpapp_bridge::{Tool, ToolContext, ToolOutput, ToolRegistry, ToolSource};
//! use serde_json::{Value, json};
//!
//! struct Echo { name: &'static str, schema: Value }
//!
//! impl Tool for Echo {
//!     fn name(&self) -> &str { self.name }
//!     fn description(&self) -> &str { "Echoes its arguments." }
//!     fn input_schema(&self) -> &Value { &self.schema }
//!     fn invoke(&self, arguments_json: String, _ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
//!         Box::pin(async move { ToolOutput::text(arguments_json) })
//!     }
//! }
//!
//! let echo = |name| Arc::new(Echo { name, schema: json!({"type": "object"}) }) as Arc<dyn Tool>;
//! let registry = ToolRegistry::new();
//! registry.register("plugin:echo", ToolSource::Plugin, vec![echo("grocery.echo")])?;
//! registry.register("mcpapp:grocery", ToolSource::Native, vec![echo("grocery.echo")])?;
//!
//! // Native is preferred over plugin by default; the loser is reported, not dropped silently.
//! let entry = registry.resolve("grocery.echo").expect("registered");
//! assert_eq!(entry.registration_id, "mcpapp:grocery");
//! assert_eq!(registry.collisions()[0].loser, "plugin:echo");
//!
//! // Models see a safe name and the agent maps it back.
//! let names = registry.model_names();
//! assert_eq!(names.to_model("grocery.echo"), Some("grocery_echo"));
//! assert_eq!(names.from_model("grocery_echo"), Some("grocery.echo"));
//!
//! // Unregistering the winner promotes the next candidate.
//! registry.unregister("mcpapp:grocery");
//! assert_eq!(registry.resolve("grocery.echo").expect("still there").registration_id, "plugin:echo");
//!
//! let output = futures::executor::block_on(entry.tool.invoke(r#"{"a":1}"#.into(), ToolContext::new()));
//! assert_eq!(output, ToolOutput::text(r#"{"a":1}"#));
//! # Ok::<(), mcpapp_bridge::RegistryError>(())
//! ```
#![warn(missing_docs)]

mod error;
mod names;
mod registry;
mod tool;

pub use error::RegistryError;
pub use names::{MAX_MODEL_NAME_LEN, ModelNames, is_safe_model_name};
pub use registry::{
    CollisionReason, CollisionReport, RegistrySnapshot, SourcePreference, ToolEntry, ToolRegistry,
    ToolRegistryBuilder, ToolSource,
};
pub use tool::{ERROR_PREFIX, Tool, ToolContext, ToolOutput};
