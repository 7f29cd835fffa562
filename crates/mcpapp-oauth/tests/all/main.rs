//! Integration tests of mcpapp-oauth against the in-tree `oauth-server` (a real
//! authorization server and protected MCP app over HTTP on loopback); the tests play the
//! user's browser and a minimal HTTP link.

// Test code: panicking with a clear message is the right response to a broken expectation.
#![allow(clippy::unwrap_used)]

mod callback;
mod flow;
mod persist;
mod refresh;
mod secrets;
mod step_up;
mod support;
