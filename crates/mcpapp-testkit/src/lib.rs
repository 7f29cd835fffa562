//! Shared helpers for mcpapp's integration tests and the test apps' suites (a dev-dependency
//! only).
//!
//! ```no_run
//! # async fn example() {
//! use mcpapp_testkit::{AppsDir, HttpApp, TestClient, bin, structured};
//!
//! let apps = AppsDir::new();
//! apps.stdio_app("echo", &bin("fixture-app"), &["stdio"], "{}");
//! assert_eq!(apps.discover().apps.len(), 1);
//!
//! let server = HttpApp::start("fixture-app", &[]);
//! let connection = TestClient::builder().name("example").http(&server.url).await;
//! let echoed = connection.call("echo", serde_json::json!({"message": "hi"})).await;
//! assert_eq!(structured(&echoed)["message"], "hi");
//! # }
//! ```
//!
//! - Apps: [`bin`] finds a workspace binary such as `fixture-app` or `grocery-inventory`,
//!   building it when the test run has not; [`HttpApp`] runs a test app in HTTP mode on a free
//!   loopback port and kills it on drop; [`AppsDir`] writes app folders with manifests and runs
//!   discovery over them; [`files_containing`] finds where a secret was written; [`Over`] and
//!   [`over_both_transports!`] run a test over stdio and over HTTP.
//! - Bundles: [`zip_of`] writes a ZIP file of [`ZipEntry`]s; [`TinyBundle`] builds the MCPB
//!   bundle of the tiny node server ([`tiny_server_script`]) with the manifest a test needs.
//! - Processes: [`live`], [`live_in_groups`] and [`children_of`] read the process table to show
//!   which processes really remain.
//! - Waiting: [`PATIENCE`] bounds every step; [`within`], [`wait_watch`] and [`wait_state`]
//!   wait on events, [`eventually`] (and [`eventually_blocking`]) polls what has none.
//! - An MCP client: [`TestClient`] answers elicitations as told ([`Elicit`]) and reports what
//!   the server sends ([`Event`]) on its [`Connection`]; [`call_params`], [`structured`],
//!   [`text`] and [`assert_tool_error`] read tool calls, [`listening_url`] a test server's
//!   address.

// Test support: panicking with a clear message is the right response to a broken fixture.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod apps;
mod client;
mod mcpb;
mod procs;
mod wait;

pub use apps::{AppsDir, HttpApp, Over, bin, files_containing};
pub use client::{
    Connection, Elicit, Event, TestClient, TestClientBuilder, assert_tool_error, call_params,
    listening_url, structured, text,
};
pub use mcpb::{TinyBundle, ZipEntry, tiny_server_script, zip_of};
pub use procs::{children_of, live, live_in_groups};
pub use wait::{PATIENCE, eventually, eventually_blocking, wait_state, wait_watch, within};
