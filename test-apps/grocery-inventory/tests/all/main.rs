//! The one integration-test binary of grocery-inventory: real child processes of the app,
//! real rmcp clients over stdio and Streamable HTTP, and reqwest for the REST API.

// `cfg(test)` marks the helpers as test code, where clippy.toml allows unwrap and expect.
#[cfg(test)]
mod cli;
#[cfg(test)]
mod elicitation;
#[cfg(test)]
mod mcp;
#[cfg(test)]
mod rest;
#[cfg(test)]
mod support;
