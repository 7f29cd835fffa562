//! Confines stdio MCP Apps on Linux: each app runs in a sandbox of its own, built from what
//! the operator granted it and what it asked for, applied by the app's own process between
//! `fork` and `exec`, before the app's program starts.
//!
//! - [`compile`] turns an app's resolved settings ([`AppIsolation`](mcpapp_manifest::AppIsolation))
//!   and the facts of its launch into the exact rules ([`SandboxPolicy`]): paths to read,
//!   execute or write, TCP ports, socket families, resource limits. Pure, tested as text.
//! - [`Confinement`] is those rules made ready in the gateway (a Landlock ruleset, seccomp
//!   programs, limits); [`Confinement::spawn`] starts the app the way `posix_spawn` would,
//!   with a child that sets up its streams, folder and process group, applies resource
//!   limits, drops every capability, sets `no_new_privs`, applies Landlock (files, TCP ports,
//!   signal and abstract-socket scopes) and the seccomp filters, checks its status, and only
//!   then executes the app, which keeps its process id and group ([`ConfinedChild`]). The
//!   workspace's only `unsafe` (`confine.rs`, `spawn.rs`).
//! - [`Sandbox`] is the gateway's side: it probes the kernel once
//!   ([`run_probe_if_requested`]), makes each app's state folder (its `HOME` and `TMPDIR`),
//!   starts an [`EgressProxy`] for apps with host grants, and prepares each launch: the
//!   program, the [`Confinement`] and the [`SandboxReport`] of what applies.
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
//! use mcpapp_sandbox::{LaunchRequest, Sandbox, SpawnRequest};
//!
//! fn main() -> ExitCode {
//!     // First thing: this executable may have been started as the kernel probe.
//!     if let Some(code) = mcpapp_sandbox::run_probe_if_requested() {
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
//!     // Keep `prepared.proxy` while the app runs.
//!     let runtime = tokio::runtime::Runtime::new().expect("a runtime");
//!     runtime.block_on(async {
//!         let Some(confinement) = &prepared.confinement else {
//!             return; // unconfined: start `prepared.program` as usual
//!         };
//!         let env = prepared.env.clone();
//!         match confinement.spawn(&SpawnRequest {
//!             program: &prepared.program,
//!             args: &prepared.args,
//!             env: &env,
//!             cwd: Path::new("/srv/mcpapps/notes"),
//!         }) {
//!             Ok(mut child) => println!("{} ended: {:?}", child.id(), child.wait().await),
//!             Err(e) => eprintln!("{e}"),
//!         }
//!     });
//!     ExitCode::SUCCESS
//! }
//! ```
#![warn(missing_docs)]

#[cfg(target_os = "linux")]
mod confine;
#[cfg(not(target_os = "linux"))]
#[path = "confine_elsewhere.rs"]
mod confine;
mod policy;
mod probe;
mod proxy;
mod report;
mod runtime;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod spawn;

#[cfg(not(target_os = "linux"))]
pub use confine::ConfinedChild;
pub use confine::Confinement;
pub use policy::{
    DEVICES_READ, ETC_READ, FULL_ABI, InetSockets, LaunchFacts, OTHER_READ, PathAccess, PathRule,
    PortRule, SYSTEM_EXECUTE, SandboxPolicy, compile,
};
pub use probe::{KernelSupport, PROBE_ARG, run_probe_if_requested};
pub use proxy::EgressProxy;
pub use report::{PathReport, SandboxReport, SandboxStatus};
pub use runtime::{ASSUME_ABI_ENV, LaunchRequest, Prepared, Sandbox, SandboxError, SpawnRequest};
#[cfg(target_os = "linux")]
pub use spawn::ConfinedChild;
