//! Confines stdio MCP Apps on Linux: each app runs in a sandbox of its own, built from what
//! the operator granted it and what it asked for, applied by a launcher before the app's
//! program starts.
//!
//! - [`compile`] turns an app's resolved settings ([`AppIsolation`](mcpapp_manifest::AppIsolation))
//!   and the facts of its launch into the exact rules ([`SandboxPolicy`]): paths to read,
//!   execute or write, TCP ports, socket families, resource limits. Pure, tested as text.
//! - [`run_launcher_if_requested`] is the launcher: the gateway's own executable started
//!   again with [`LAUNCHER_ARG`], which applies resource limits, drops every capability, sets
//!   `no_new_privs`, applies Landlock (files, TCP ports, signal and abstract-socket scopes)
//!   and a seccomp filter to itself, then executes the app in its place, keeping its process
//!   id and group.
//! - [`Sandbox`] is the gateway's side: it probes the kernel once, makes each app's state
//!   folder (its `HOME` and `TMPDIR`), starts an [`EgressProxy`] for apps with host grants,
//!   and prepares the launcher's command line and the [`SandboxReport`] of what applies.
//!
//! Elsewhere than Linux everything compiles: `enforce` refuses to start apps and
//! `best-effort` runs them unconfined, saying so in the report.
//!
//! # Example
//!
//! ```no_run
//! use std::path::Path;
//! use std::process::ExitCode;
//! use mcpapp_manifest::{AppIsolation, IsolationMode};
//! use mcpapp_sandbox::{LaunchRequest, Sandbox};
//!
//! fn main() -> ExitCode {
//!     // First thing: this executable may have been started as the launcher or the probe.
//!     if let Some(code) = mcpapp_sandbox::run_launcher_if_requested() {
//!         return code;
//!     }
//!     let sandbox = Sandbox::current_exe().expect("this executable").protect_ports([8787]);
//!     let isolation = AppIsolation::new(IsolationMode::Enforce);
//!     let prepared = sandbox
//!         .prepare(&LaunchRequest {
//!             app_id: "notes",
//!             isolation: &isolation,
//!             app_dir: Path::new("/srv/mcpapps/notes"),
//!             program: Path::new("node"),
//!             args: &["server.js".to_owned()],
//!             path: Some(std::ffi::OsStr::new("/usr/bin")),
//!         })
//!         .expect("a kernel with Landlock ABI 6");
//!     // Start `prepared.program` with `prepared.args`, the app's environment and
//!     // `prepared.env` over it; keep `prepared.proxy` while it runs.
//!     println!("{} {:?}", prepared.program.display(), prepared.report.status);
//!     ExitCode::SUCCESS
//! }
//! ```
#![warn(missing_docs)]

mod launcher;
mod policy;
mod proxy;
mod report;
mod runtime;
#[cfg(target_os = "linux")]
mod seccomp;

pub use launcher::{
    EXIT_EXEC, EXIT_SANDBOX, KernelSupport, LAUNCHER_ARG, PROBE_ARG, run_launcher_if_requested,
};
pub use policy::{
    DEVICES_READ, ETC_READ, FULL_ABI, InetSockets, LaunchFacts, OTHER_READ, PathAccess, PathRule,
    PortRule, SYSTEM_EXECUTE, SandboxPolicy, compile,
};
pub use proxy::EgressProxy;
pub use report::{PathReport, SandboxReport, SandboxStatus};
pub use runtime::{ASSUME_ABI_ENV, LaunchRequest, Prepared, Sandbox, SandboxError};
