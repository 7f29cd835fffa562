//! The tool helpers: error texts, contexts and debug output.

use mcpapp_bridge::{ERROR_PREFIX, ToolContext, ToolOutput};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{call, tool};

#[test]
fn error_output_is_prefixed_once() {
    let out = ToolOutput::error("the store is closed");
    assert_eq!(out.text, "Error: the store is closed");
    assert!(out.is_error);
    assert!(out.structured.is_none());

    let again = ToolOutput::error("Error: already prefixed");
    assert_eq!(again.text, "Error: already prefixed");
    assert!(again.text.starts_with(ERROR_PREFIX));
}

#[test]
fn text_output_carries_structured_content() {
    let out = ToolOutput::text("2 rows").with_structured(json!({"rows": [1, 2]}));
    assert!(!out.is_error);
    assert_eq!(out.text, "2 rows");
    assert_eq!(out.structured, Some(json!({"rows": [1, 2]})));
}

#[test]
fn context_builder_sets_session_and_token() {
    let token = CancellationToken::new();
    let ctx = ToolContext::new()
        .with_session_id("apps-1")
        .with_cancel(token.clone());
    assert_eq!(ctx.session_id.as_deref(), Some("apps-1"));
    token.cancel();
    assert!(ctx.cancel.is_cancelled());
    assert!(ToolContext::new().session_id.is_none());
}

#[test]
fn tools_are_callable_and_debuggable_through_the_trait_object() {
    let t = tool("grocery.get_stores", "app");
    assert_eq!(call(&t, "{}").text, "app::{}");
    let debug = format!("{t:?}");
    assert!(debug.contains("grocery.get_stores"), "{debug}");
}
