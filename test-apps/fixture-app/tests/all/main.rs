//! The one integration-test binary of fixture-app: every flag and tool of the real binary,
//! driven by real rmcp clients over stdio and Streamable HTTP and by raw bytes.

// `cfg(test)` marks the helpers as test code, where clippy.toml allows unwrap and expect.
#[cfg(test)]
mod eras;
#[cfg(test)]
mod flags;
#[cfg(test)]
mod http_flags;
#[cfg(test)]
mod support;
#[cfg(test)]
mod tools;
#[cfg(test)]
mod vendor;
