//! Runs MCP Apps: connects to each app (a child process over stdio, or a Streamable HTTP
//! endpoint), enumerates what it offers, and keeps it alive through an observable lifecycle.
//! Each app's upstream session, which the gateway and every client session share, is
//! `mcpapp-session`'s; this crate gives it its links and watches it.
//!
//! - [`Supervisor`] loads a discovery report and starts every runnable app concurrently, in
//!   the background; it restarts failed apps with exponential backoff and jitter, stops
//!   restarting in a crash loop, pings apps for health, reloads from a new report (and a new
//!   configuration, restarting the apps whose settings changed), and shuts
//!   everything down so that no child process outlives it (also when merely dropped).
//! - [`AppHandle`] is the stable handle of one app: its [`AppSnapshot`], its
//!   [`Descriptors`], its stderr tail, control, calls that always use the current
//!   connection, bounded by the app's request timeout, and ports
//!   ([`mcpapp_session::Port`]) on its current session.
//! - The links: a child's stdio in its own process group, with an environment built from
//!   nothing, and our own Streamable HTTP client; both implement [`mcpapp_session::Link`].
//!   [`Keeper`] kills every app process when the gateway dies, however it died.
//! - [`SupervisorMetrics`] counts every `tools/call` (by app, tool,
//!   [`CallPath`](mcpapp_session::CallPath) and outcome), its duration, and upstream timeouts
//!   and cancellations, into a registry the caller owns: the session's hub tells each app's
//!   meters how its calls end. With the `otel` feature, requests sent to apps carry the W3C
//!   trace context of their span in `_meta`.
//!
//! This is the only crate that starts processes. A gateway is composed with
//! `mcpapp_host::Gateway::builder`, which builds the supervisor with the rest; use the
//! supervisor on its own to run apps without the HTTP face, as below.
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
mod authorization;
mod descriptors;
mod error;
mod events;
mod handle;
mod keeper;
mod launch;
mod lifecycle;
mod link;
mod metrics;
mod policy;
mod shield;
mod supervisor;

pub use app::AppSnapshot;
pub use descriptors::{
    Descriptors, PromptArgumentDescriptor, PromptDescriptor, ResourceDescriptor,
    ResourceTemplateDescriptor, ToolDescriptor, Visibility, is_mcp_app_mime,
};
pub use error::{CallError, ControlError};
pub use events::SupervisorEvent;
pub use handle::AppHandle;
pub use keeper::{Keeper, run_keeper_if_requested};
pub use mcpapp_sandbox::{Sandbox, SandboxReport, SandboxStatus};
pub use metrics::SupervisorMetrics;
pub use policy::SupervisionPolicy;
pub use shield::shield_process;
pub use supervisor::{ReloadSummary, Supervisor, SupervisorBuilder};

/// The rmcp model types used in this crate's API, re-exported so users need not depend on
/// the exact rmcp version.
pub use rmcp::model as mcp;
