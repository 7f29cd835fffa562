//! The [`Tool`] trait every agent tool implements, with the context a call receives and the
//! output it returns.

use std::fmt;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// The prefix of every error text a tool returns, so that a model reading plain text can tell
/// a failure from a result (the original module's convention, kept for existing hosts).
pub const ERROR_PREFIX: &str = "Error: ";

/// A tool the agent can call.
///
/// Implementations describe themselves (name, description, JSON Schema of the arguments) and
/// run a call. The registry never looks inside a tool: tools from MCP apps, built-in tools and
/// test tools all look the same to it.
///
/// A call receives the arguments exactly as the model produced them, as raw JSON text that may
/// be empty or malformed; each tool validates them and answers bad input with
/// [`ToolOutput::error`] rather than panicking. A call should stop early when
/// [`ToolContext::cancel`] fires.
pub trait Tool: Send + Sync + 'static {
    /// The registered name, for example `grocery.get_stores`. It may contain characters that
    /// model providers reject; [`ModelNames`](crate::ModelNames) maps it to a safe name.
    fn name(&self) -> &str;

    /// A description for the model.
    fn description(&self) -> &str;

    /// The JSON Schema of the arguments object.
    fn input_schema(&self) -> &serde_json::Value;

    /// Optional metadata about the tool (for example an MCP tool's `_meta` or annotations),
    /// passed through untouched to consumers such as the aggregated MCP endpoint.
    fn meta(&self) -> Option<&serde_json::Value> {
        None
    }

    /// Runs the tool with the model's raw JSON arguments.
    fn invoke(&self, arguments_json: String, ctx: ToolContext) -> BoxFuture<'static, ToolOutput>;
}

impl fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// What a tool call knows about its caller.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    /// The chat session the call belongs to, if any. MCP app tools forward it upstream as
    /// `_meta.sessionId`.
    pub session_id: Option<String>,
    /// Fires when the caller no longer wants the result (the turn was cancelled or the client
    /// went away).
    pub cancel: CancellationToken,
}

impl ToolContext {
    /// A context with no session and a fresh cancellation token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the session id.
    #[must_use]
    pub fn with_session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// Sets the cancellation token.
    #[must_use]
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The text the model reads. Error texts start with [`ERROR_PREFIX`].
    pub text: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Structured content for consumers that can use it (an app's UI, the aggregated MCP
    /// endpoint). Models read `text` only.
    pub structured: Option<serde_json::Value>,
    /// The whole result as the tool's source returned it, for consumers that show it rather
    /// than read it: an MCP App tool with a UI sets it to the app's `CallToolResult` (every
    /// content block, `_meta`, `structuredContent`, `isError`), which its view receives as it
    /// is. Models never see it; `None` for other tools.
    pub raw: Option<serde_json::Value>,
}

impl ToolOutput {
    /// A successful result with text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            structured: None,
            raw: None,
        }
    }

    /// A failed result. The text is prefixed with `Error: ` unless it already starts with it.
    pub fn error(message: impl Into<String>) -> Self {
        let message = message.into();
        let text = if message.starts_with(ERROR_PREFIX) {
            message
        } else {
            format!("{ERROR_PREFIX}{message}")
        };
        Self {
            text,
            is_error: true,
            structured: None,
            raw: None,
        }
    }

    /// Adds structured content.
    #[must_use]
    pub fn with_structured(mut self, structured: serde_json::Value) -> Self {
        self.structured = Some(structured);
        self
    }

    /// Adds the whole result as the source returned it (see [`ToolOutput::raw`]).
    #[must_use]
    pub fn with_raw(mut self, raw: serde_json::Value) -> Self {
        self.raw = Some(raw);
        self
    }
}
