//! Finds MCP Apps: scans discovery paths for `openclaw.mcpapp.json` manifests, applies the
//! per-app overrides of `McpApps.Entries`, validates each effective manifest, resolves
//! duplicate ids and applies the allow/deny rules.
//!
//! Discovery degrades instead of failing: a malformed manifest, an unreadable folder, a link
//! loop or a missing path is a [`Diagnostic`] beside the good results. Only a configuration
//! that cannot be applied at all (a pattern that is not a glob, an unreadable config file) is
//! an error. Discovery reads files; it never starts a process or opens a connection.
//!
//! # Example
//!
//! ```
//! use mcpapp_discovery::Discovery;
//! use mcpapp_manifest::{Lifecycle, McpAppsConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("mcpapp-doc-{}", std::process::id()));
//! std::fs::create_dir_all(dir.join("weather"))?;
//! std::fs::write(
//!     dir.join("weather/openclaw.mcpapp.json"),
//!     r#"{ "id": "weather", "command": "weather-server", "toolNamePrefix": "wx." }"#,
//! )?;
//!
//! let config = McpAppsConfig { enabled: true, ..McpAppsConfig::default() };
//! let discovery = Discovery::builder(config)
//!     .discovery_paths(vec![dir.display().to_string()], ".")
//!     .build()?;
//! let report = discovery.scan();
//!
//! let app = report.app("weather").expect("found");
//! assert_eq!(app.state.lifecycle, Lifecycle::Validated);
//! assert_eq!(app.spec.as_ref().map(|s| s.tool_name_prefix.as_str()), Some("wx."));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod bounded;
mod config_file;
mod discovery;
mod env_policy;
mod error;
mod filter;
mod interpreter;
mod isolation;
mod paths;
mod report;
mod scan;

pub use config_file::{ConfigFile, LoadedSection};
pub use discovery::{Discovery, DiscoveryBuilder};
pub use env_policy::{EnvNamePatterns, is_gateway_credential};
pub use error::ConfigError;
pub use report::{Diagnostic, DiscoveredApp, DiscoveryReport};
