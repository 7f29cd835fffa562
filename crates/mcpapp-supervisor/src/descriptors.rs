//! What an app offers, as found by enumeration: tools (with their MCP Apps UI metadata),
//! resources, resource templates and prompts.

use mcpapp_manifest::MCP_APP_MIME_TYPE;
use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use serde::Serialize;
use serde_json::{Map, Value};

/// Who may call a tool, from its `_meta.ui.visibility`.
///
/// Absent means both audiences. A list grants each audience it names (`"model"`, `"app"`);
/// other strings are ignored. Anything that is not a list of strings is malformed and grants
/// neither audience: the MCP Apps guidance is to fail closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Visibility {
    /// The agent may see and call the tool.
    pub model: bool,
    /// A view rendered from this app may call the tool.
    pub app: bool,
    /// The value was present but not an array.
    pub malformed: bool,
}

impl Visibility {
    const BOTH: Self = Self {
        model: true,
        app: true,
        malformed: false,
    };

    /// The visibility a tool's `_meta` gives it.
    pub fn from_meta(meta: Option<&Map<String, Value>>) -> Self {
        let Some(meta) = meta else {
            return Self::BOTH;
        };
        let value = match meta.get("ui") {
            Some(Value::Object(ui)) => ui.get("visibility"),
            Some(Value::Null) | None => None,
            Some(_) => {
                return Self {
                    model: false,
                    app: false,
                    malformed: true,
                };
            }
        }
        .or_else(|| meta.get("ui/visibility"));
        match value {
            None | Some(Value::Null) => Self::BOTH,
            Some(Value::Array(items)) => {
                let has = |name: &str| items.iter().any(|v| v.as_str() == Some(name));
                Self {
                    model: has("model"),
                    app: has("app"),
                    malformed: false,
                }
            }
            Some(_) => Self {
                model: false,
                app: false,
                malformed: true,
            },
        }
    }
}

/// A tool as the app lists it (remote name, no prefix).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    /// The tool's name on the app.
    pub name: String,
    /// Its title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The JSON Schema of its structured result, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Its annotations (hints), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Its `_meta`, as listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// The UI resource its results render in: `_meta.ui.resourceUri`, else the deprecated flat
    /// `_meta["ui/resourceUri"]`, when a non-blank string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ui_resource_uri: Option<String>,
    /// Who may call it.
    pub visibility: Visibility,
}

impl ToolDescriptor {
    /// Builds a descriptor from rmcp's typed tool.
    pub fn from_tool(tool: &Tool) -> Self {
        let meta = tool.meta.as_ref().map(|m| m.0.clone());
        let ui_resource_uri = meta.as_ref().and_then(ui_resource_uri);
        let visibility = Visibility::from_meta(meta.as_ref());
        Self {
            name: tool.name.to_string(),
            title: tool.title.clone(),
            description: tool.description.as_ref().map(ToString::to_string),
            input_schema: Value::Object(tool.input_schema.as_ref().clone()),
            output_schema: tool
                .output_schema
                .as_ref()
                .map(|s| Value::Object(s.as_ref().clone())),
            annotations: tool
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
            meta,
            ui_resource_uri,
            visibility,
        }
    }

    /// Whether results of this tool render in a UI (its structured content is for the view,
    /// not the model).
    pub fn has_ui(&self) -> bool {
        self.ui_resource_uri.is_some()
    }
}

fn ui_resource_uri(meta: &Map<String, Value>) -> Option<String> {
    let nested = meta
        .get("ui")
        .and_then(Value::as_object)
        .and_then(|ui| ui.get("resourceUri"));
    [nested, meta.get("ui/resourceUri")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|uri| !uri.trim().is_empty())
        .map(str::to_owned)
}

/// Whether a MIME type is the MCP App UI type (`text/html;profile=mcp-app`, spaces and case
/// ignored).
pub fn is_mcp_app_mime(mime: &str) -> bool {
    let compact: String = mime
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    compact == MCP_APP_MIME_TYPE
}

/// A resource as the app lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDescriptor {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// Its title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its `_meta` (for UI resources, `_meta.ui` with csp and permissions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Whether it is an MCP App UI resource.
    pub is_ui: bool,
}

impl ResourceDescriptor {
    /// Builds a descriptor from rmcp's typed resource.
    pub fn from_resource(resource: &Resource) -> Self {
        Self {
            uri: resource.uri.clone(),
            name: resource.name.clone(),
            title: resource.title.clone(),
            description: resource.description.clone(),
            mime_type: resource.mime_type.clone(),
            meta: resource.meta.as_ref().map(|m| m.0.clone()),
            is_ui: resource.mime_type.as_deref().is_some_and(is_mcp_app_mime),
        }
    }
}

/// A resource template as the app lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplateDescriptor {
    /// The RFC 6570 URI template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

impl ResourceTemplateDescriptor {
    /// Builds a descriptor from rmcp's typed template.
    pub fn from_template(template: &ResourceTemplate) -> Self {
        Self {
            uri_template: template.uri_template.clone(),
            name: template.name.clone(),
            description: template.description.clone(),
            mime_type: template.mime_type.clone(),
        }
    }
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgumentDescriptor {
    /// Its name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    pub required: bool,
}

/// A prompt as the app lists it, with its arguments in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptDescriptor {
    /// Its name.
    pub name: String,
    /// Its title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments, in the order listed.
    pub arguments: Vec<PromptArgumentDescriptor>,
}

impl PromptDescriptor {
    /// Builds a descriptor from rmcp's typed prompt.
    pub fn from_prompt(prompt: &Prompt) -> Self {
        Self {
            name: prompt.name.clone(),
            title: prompt.title.clone(),
            description: prompt.description.clone(),
            arguments: prompt
                .arguments
                .iter()
                .flatten()
                .map(|a| PromptArgumentDescriptor {
                    name: a.name.clone(),
                    description: a.description.clone(),
                    required: a.required.unwrap_or(false),
                })
                .collect(),
        }
    }
}

/// Everything an app offers, from its last successful enumeration.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptors {
    /// Its tools, in the app's order.
    pub tools: Vec<ToolDescriptor>,
    /// Its resources.
    pub resources: Vec<ResourceDescriptor>,
    /// Its resource templates.
    pub templates: Vec<ResourceTemplateDescriptor>,
    /// Its prompts.
    pub prompts: Vec<PromptDescriptor>,
}

impl Descriptors {
    /// The tool with this remote name.
    pub fn tool(&self, name: &str) -> Option<&ToolDescriptor> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visibility(meta: &Value) -> Visibility {
        Visibility::from_meta(meta.as_object())
    }

    #[test]
    fn visibility_rules() {
        let both = Visibility::BOTH;
        let none = |malformed| Visibility {
            model: false,
            app: false,
            malformed,
        };
        assert_eq!(visibility(&serde_json::json!({})), both);
        assert_eq!(visibility(&serde_json::json!({"ui": {}})), both);
        assert_eq!(
            visibility(&serde_json::json!({"ui": {"visibility": null}})),
            both
        );
        assert_eq!(
            visibility(&serde_json::json!({"ui": {"visibility": ["app"]}})),
            Visibility {
                model: false,
                app: true,
                malformed: false
            }
        );
        assert_eq!(
            visibility(&serde_json::json!({"ui": {"visibility": ["model", "app", "other", 3]}})),
            both
        );
        assert_eq!(
            visibility(&serde_json::json!({"ui": {"visibility": []}})),
            none(false)
        );
        assert_eq!(
            visibility(&serde_json::json!({"ui": {"visibility": ["Model"]}})),
            none(false)
        );
        assert_eq!(
            visibility(&serde_json::json!({"ui": {"visibility": "app"}})),
            none(true)
        );
        assert_eq!(
            visibility(&serde_json::json!({"ui": "nonsense"})),
            none(true)
        );
        assert_eq!(
            visibility(&serde_json::json!({"ui/visibility": ["model"]})),
            Visibility {
                model: true,
                app: false,
                malformed: false
            }
        );
        assert_eq!(Visibility::from_meta(None), both);
    }

    #[test]
    fn ui_resource_uri_prefers_the_nested_key() {
        let meta = serde_json::json!({"ui": {"resourceUri": "ui://a"}, "ui/resourceUri": "ui://b"});
        assert_eq!(
            ui_resource_uri(meta.as_object().unwrap()).as_deref(),
            Some("ui://a")
        );
        let meta = serde_json::json!({"ui": {"resourceUri": "  "}, "ui/resourceUri": "ui://b"});
        assert_eq!(
            ui_resource_uri(meta.as_object().unwrap()).as_deref(),
            Some("ui://b")
        );
        let meta = serde_json::json!({"ui": {"resourceUri": 5}});
        assert_eq!(ui_resource_uri(meta.as_object().unwrap()), None);
    }

    #[test]
    fn mcp_app_mime_ignores_spaces_and_case() {
        assert!(is_mcp_app_mime("text/html;profile=mcp-app"));
        assert!(is_mcp_app_mime("Text/HTML; profile=mcp-app"));
        assert!(!is_mcp_app_mime("text/html"));
        assert!(!is_mcp_app_mime("application/json"));
    }
}
