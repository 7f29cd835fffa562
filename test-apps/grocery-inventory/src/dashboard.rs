//! The dashboard view: one hand-written, self-contained HTML document (no external URLs, no
//! build step) compiled into the binary and served as `ui://grocery/store-dashboard.html`.
//!
//! The page speaks the MCP Apps view protocol over `postMessage`; its DOM contract is described
//! in the crate documentation.

/// The dashboard HTML document.
pub(crate) const HTML: &str = include_str!("dashboard.html");
