//! Runs MCP Apps: connects to each app (a child process over stdio, or a Streamable HTTP
//! endpoint), enumerates what it offers, and keeps it alive through an observable lifecycle,
//! with one upstream MCP session per app shared by the gateway and every browser session.
//!
//! - [`Supervisor`] loads a discovery report and starts every runnable app concurrently, in
//!   the background; it restarts failed apps with exponential backoff and jitter, stops
//!   restarting in a crash loop, pings apps for health, reloads from a new report (and a new
//!   configuration, restarting the apps whose settings changed), and shuts
//!   everything down so that no child process outlives it (also when merely dropped).
//! - [`AppHandle`] is the stable handle of one app: its [`AppSnapshot`], its
//!   [`Descriptors`], its stderr tail, control, and calls that always use the current
//!   connection, bounded by the app's request timeout.
//! - [`Port`] shares an app's upstream session byte for byte with a browser session: ids and
//!   progress tokens are rewritten upstream and restored on the way back; notifications reach
//!   every port; server requests reach the port that caused them.
//!
//! - [`SupervisorMetrics`] counts every `tools/call` (by app, tool, [`CallPath`] and outcome),
//!   its duration, and upstream timeouts and cancellations, into a registry the caller owns.
//!   With the `otel` feature, requests sent to apps carry the W3C trace context of their span
//!   in `_meta`.
//!
//! This is the only crate that starts processes.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use mcpapp_discovery::Discovery;
//! use mcpapp_manifest::{Lifecycle, McpAppsConfig};
//! use mcpapp_supervisor::Supervisor;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = McpAppsConfig { enabled: true, ..McpAppsConfig::default() };
//! let report = Discovery::builder(config.clone()).build()?.scan();
//! let supervisor = Supervisor::builder().config(&config).build();
//! supervisor.load(&report);
//! supervisor.wait_settled(Duration::from_secs(30)).await;
//! for app in supervisor.list() {
//!     if app.snapshot().state.lifecycle == Lifecycle::Running {
//!         let tools = app.descriptors().tools.len();
//!         println!("{} offers {tools} tools", app.id());
//!     }
//! }
//! supervisor.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod app;
mod client;
mod descriptors;
mod elicit;
mod era;
mod error;
mod events;
mod handle;
mod keeper;
mod launch;
mod lifecycle;
mod link;
mod metrics;
mod pipe;
mod policy;
mod raw;
mod router;
mod session;
mod shield;
mod supervisor;
mod trace_context;

pub use app::AppSnapshot;
pub use descriptors::{
    Descriptors, MCP_APP_MIME, PromptArgumentDescriptor, PromptDescriptor, ResourceDescriptor,
    ResourceTemplateDescriptor, ToolDescriptor, Visibility, is_mcp_app_mime,
};
pub use elicit::{ElicitFuture, ElicitationRequest, Elicitor};
pub use era::{MODERN_PROTOCOL_VERSION, request_protocol_version};
pub use error::{CallError, ControlError};
pub use events::SupervisorEvent;
pub use handle::AppHandle;
pub use keeper::{KEEPER_ARG, KEEPER_ENV, Keeper, run_keeper_if_requested};
pub use mcpapp_sandbox::{Sandbox, SandboxReport, SandboxStatus};
pub use metrics::{CallPath, OTHER_TOOL, SupervisorMetrics};
pub use policy::SupervisionPolicy;
pub use raw::{MessageKind, RawError, RawMessage, raw_string};
pub use session::{PORT_PROTOCOL_VERSIONS, Port, PortError, PortReply, ResponseStream};
pub use shield::shield_process;
pub use supervisor::{ReloadSummary, Supervisor, SupervisorBuilder};

/// The rmcp model types used in this crate's API, re-exported so users need not depend on
/// the exact rmcp version.
pub use rmcp::model as mcp;
