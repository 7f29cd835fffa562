//! The one integration-test binary of conformance-client: the real binaries, run as the
//! suite runs them, against a real rmcp Streamable HTTP server on loopback that serves the
//! `tools_call` scenario's `add_numbers` tool and records every call it gets (the driver
//! also through a real `mcpapp-gateway serve`).

// `cfg(test)` marks the helpers as test code, where clippy.toml allows unwrap and expect.
#[cfg(test)]
mod adapter;
#[cfg(test)]
mod driver;
#[cfg(test)]
mod support;
