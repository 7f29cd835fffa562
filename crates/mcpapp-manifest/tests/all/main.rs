//! Integration tests of mcpapp-manifest: one test binary, one module per area.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod config;
mod fuzz;
mod isolation;
mod long_values;
mod manifest;
mod schema;
mod state;
mod validation;

/// The seed's example manifest, committed verbatim under `examples/`.
pub(crate) const SEED_MANIFEST: &str =
    include_str!("../../../../examples/mcpapps/grocery-inventory/openclaw.mcpapp.json");

/// The seed's example `appsettings.json`, committed verbatim under `examples/`.
pub(crate) const SEED_APPSETTINGS: &str = include_str!("../../../../examples/appsettings.json");
