//! The bridge between tools and the agent: the [`Tool`] trait, the [`ToolRegistry`] that holds
//! tools from every source under a deterministic, collision-reporting naming rule, the
//! [`ModelNames`] map to names that model providers accept, and the MCP App side:
//! [`McpAppTool`] (one app tool as an agent tool) and [`AppToolSync`] (the registry kept in
//! step with the supervisor).
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
//!
//! The registry itself knows nothing about MCP or HTTP. MCP app tools (registration id
//! `mcpapp:{appId}`, source [`ToolSource::Native`]), built-in tools and plugin tools all
//! implement [`Tool`]; consumers (the agent, the aggregated MCP endpoint) list and resolve them
//! here and refresh when the change counter moves.
//!
//! # MCP App tools
//!
//! [`AppToolSync::start`] follows a [`Supervisor`](mcpapp_supervisor::Supervisor): each running
//! app's tools whose `_meta.ui.visibility` includes `"model"` are registered under the app's
//! prefix (`grocery.` + `get_stores`), replaced as a whole when the app's tool list changes,
//! and withdrawn when the app stops, fails or is removed. Tools with a malformed visibility are
//! hidden and reported ([`AppToolSync::diagnostics`]). Calls carry the chat session id as
//! `_meta.sessionId`, stop when the caller cancels, and return model-friendly text: binary
//! content as placeholders, structured content of UI tools left to the view, every failure an
//! `Error: ` text.
//!
//! **Collisions.** When two registrations offer the same name, the registry picks one winner:
//! first the preferred source (built-in over native over plugin by default, so an app tool
//! beats a plugin tool and loses to a built-in one), then the registration registered first.
//! The sync registers every app in the supervisor's list order as soon as it sees it, and
//! keeps an app's (emptied) registration while it is stopped, so between two apps the one
//! discovered first wins, whichever starts first. Losers are reported by
//! [`ToolRegistry::collisions`], by [`AppToolSync::diagnostics`] and in the log.
//!
//! A gateway gets this wiring from `mcpapp_host::Gateway::builder`; the bridge's part of it
//! alone:
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use mcpapp_bridge::{AppToolSync, ToolContext, ToolRegistry};
//! use mcpapp_discovery::Discovery;
//! use mcpapp_manifest::McpAppsConfig;
//! use mcpapp_supervisor::Supervisor;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = McpAppsConfig { enabled: true, ..McpAppsConfig::default() };
//! let report = Discovery::builder(config.clone()).build()?.scan();
//! let supervisor = Supervisor::builder().config(&config).build();
//! let registry = ToolRegistry::new();
//! let sync = AppToolSync::start(&supervisor, &registry);
//! supervisor.load(&report);
//! supervisor.wait_settled(Duration::from_secs(30)).await;
//! sync.synced().await;
//!
//! if let Some(entry) = registry.resolve("grocery.get_low_stock") {
//!     let ctx = ToolContext::new().with_session_id("chat-1");
//!     let output = entry.tool.invoke(r#"{"storeId": 1}"#.into(), ctx).await;
//!     println!("{}", output.text);
//! }
//! for diagnostic in sync.diagnostics() {
//!     println!("{}", serde_json::to_string(&diagnostic)?);
//! }
//! drop(sync);
//! supervisor.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod app_tool;
mod error;
mod names;
mod registry;
mod sync;
mod tool;

pub use app_tool::McpAppTool;
pub use error::RegistryError;
pub use names::ModelNames;
pub use registry::{
    CollisionReason, CollisionReport, RegistrySnapshot, SourcePreference, ToolEntry, ToolRegistry,
    ToolRegistryBuilder, ToolSet, ToolSource,
};
pub use sync::{AppToolSync, SyncDiagnostic, SyncDiagnosticKind, app_registration_id};
pub use tool::{ERROR_PREFIX, Tool, ToolContext, ToolOutput};
