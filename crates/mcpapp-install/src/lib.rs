//! Installs MCP Apps like extensions: from `npm:` and `pypi:` packages, MCP Registry
//! `server.json` documents (files, URLs, or names in a configured registry), MCPB bundles and
//! remote Streamable HTTP endpoints, into an app folder with an `openclaw.mcpapp.json` that
//! discovery reads.
//!
//! ```no_run
//! use mcpapp_install::{Installer, Request, SecretStore, Source, resolve};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // The probe start after an install runs the app confined, like the gateway does; this
//! // executable must call `mcpapp_sandbox::run_probe_if_requested()` first in `main`.
//! let sandbox = mcpapp_supervisor::Sandbox::current_exe()?;
//! let installer = Installer::builder("./mcpapps", SecretStore::new("/var/lib/mcpapp/secrets.json"))
//!     .sandbox(sandbox)
//!     .build()?;
//! let source = Source::parse("pypi:mcp-server-time==2026.10.19", std::path::Path::new("."))?;
//! let plan = installer.plan(&source, &Request::default()).await?;
//! let values = resolve(&plan.inputs, &[], None)?;
//! println!("{}", plan.consent(&values)?);
//! let installed = installer.install(&plan, &values, &|line| eprintln!("{line}")).await?;
//! println!("installed {} {}", installed.id, installed.version);
//! # Ok(())
//! # }
//! ```
//!
//! - **Sources** ([`Source`]) are resolved to an exact version and mapped ([`Installer::plan`])
//!   to a [`Plan`]: the app's id and folder, its [`Input`]s, and the exact command line it will
//!   run, which [`Plan::consent`] shows before anything runs.
//! - **Inputs** get values from flags, a [`Prompter`] and defaults ([`resolve`]); types and
//!   choices are checked.
//! - **Runtimes are vendored** into the app folder's `.mcpapp-runtime/<version>/` (npm with a
//!   lockfile and no install scripts; PyPI in a virtual environment; bundles unpacked), so apps
//!   start offline, at once, at the pinned version.
//! - **Secrets** go to the gateway's [`SecretStore`], never into the folder; the manifest
//!   refers to them as `secret:NAME`, which only that app, in that folder, can resolve.
//! - **A probe start** finds whether the app has MCP App views before the manifest is written;
//!   the app starts as the gateway would start it, in the sandbox the host hands the installer
//!   ([`InstallerBuilder::sandbox`]), with the operator's isolation settings.
//! - **Life after install**: [`Installer::installed`], [`Installer::plan_update`] (inputs and
//!   secrets kept, rolled back on failure), [`Installer::uninstall`].
#![warn(missing_docs)]

mod config_edit;
mod draft;
mod error;
mod fetch;
mod grants;
mod inputs;
mod installed;
mod installer;
mod json;
mod mcpb;
mod packages;
mod permissions;
mod plan;
mod probe;
mod registry;
mod secrets;
mod server_json;
mod source;
mod vendor;

pub use error::{FormatError, InstallError};
pub use grants::{GrantChange, GrantsFile, grants_snippet, ungranted};
pub use inputs::{Input, InputError, InputKind, Prompter, Values, resolve};
pub use installed::{InstalledApp, Uninstalled};
pub use installer::{Installed, Installer, InstallerBuilder, Mode, Progress};
pub use mcpb::BundleLimits;
pub use permissions::{Permission, Requested, permissions_of, request_of};
pub use plan::{Plan, Request};
pub use probe::ProbeResult;
pub use registry::{RegistryClient, RegistryEntry, SearchPage};
pub use secrets::{AppSecrets, SecretStore};
pub use server_json::PackageChoice;
pub use source::Source;
pub use vendor::VendorOptions;
