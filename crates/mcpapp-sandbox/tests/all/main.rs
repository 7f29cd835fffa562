//! Integration tests of mcpapp-sandbox: the egress proxy over real loopback sockets, and
//! launches prepared with the gateway's real executable as the kernel probe, started for real.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod prepare;
mod proxy;
