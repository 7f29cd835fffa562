//! The links to processes and endpoints: a child process's stdio, or a Streamable HTTP
//! session. Both implement `mcpapp_session::Link`: they carry whole JSON-RPC messages and tag
//! what they receive with where it arrived, so the session's one router serves both.

mod connector;
pub(crate) mod http;
pub(crate) mod stdio;
