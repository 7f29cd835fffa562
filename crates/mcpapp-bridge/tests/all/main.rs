//! Integration tests of mcpapp-bridge: the registry's naming rules, collisions and change
//! counter, safe model names, and the tool helpers.

// Test helpers may panic: a panic is a failed test with a clear location.
#![allow(clippy::unwrap_used)]

mod names;
mod registry;
mod tool;

use std::sync::Arc;

use futures::future::BoxFuture;
use mcpapp_bridge::{Tool, ToolContext, ToolOutput};
use serde_json::{Value, json};

/// A tool that answers with its own label, so a test can tell which of two same-named tools
/// was called.
pub(crate) struct LabelTool {
    name: String,
    description: String,
    schema: Value,
    label: String,
}

impl Tool for LabelTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn invoke(&self, arguments_json: String, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let label = self.label.clone();
        Box::pin(async move {
            let session = ctx.session_id.unwrap_or_default();
            ToolOutput::text(format!("{label}:{session}:{arguments_json}"))
        })
    }
}

/// A tool named `name` whose calls answer `label:...`.
pub(crate) fn tool(name: &str, label: &str) -> Arc<dyn Tool> {
    Arc::new(LabelTool {
        name: name.to_owned(),
        description: format!("{name} from {label}"),
        schema: json!({"type": "object"}),
        label: label.to_owned(),
    })
}

/// Like [`tool`] with a chosen description.
pub(crate) fn described(name: &str, label: &str, description: &str) -> Arc<dyn Tool> {
    Arc::new(LabelTool {
        name: name.to_owned(),
        description: description.to_owned(),
        schema: json!({"type": "object"}),
        label: label.to_owned(),
    })
}

/// Calls a tool and returns its output.
pub(crate) fn call(tool: &Arc<dyn Tool>, args: &str) -> ToolOutput {
    futures::executor::block_on(tool.invoke(args.to_owned(), ToolContext::new()))
}
