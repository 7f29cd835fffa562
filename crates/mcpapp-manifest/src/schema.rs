//! JSON Schemas of the manifest and the `McpApps` configuration section, generated from the
//! Rust types so they cannot drift from what the parser accepts.
//!
//! The generated documents are committed under `docs/schema/`; a test fails when they are
//! stale and `cargo xtask codegen` rewrites them.

use schemars::generate::SchemaSettings;

use crate::config::McpAppsConfig;
use crate::manifest::McpAppManifest;

/// Which schema to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    /// The `openclaw.mcpapp.json` manifest.
    Manifest,
    /// The `McpApps` configuration section.
    Config,
}

impl SchemaKind {
    /// Both kinds.
    pub const ALL: [SchemaKind; 2] = [Self::Manifest, Self::Config];

    /// The file name under `docs/schema/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Manifest => "manifest.schema.json",
            Self::Config => "config.schema.json",
        }
    }

    /// The schema document.
    pub fn schema(self) -> schemars::Schema {
        match self {
            Self::Manifest => manifest_schema(),
            Self::Config => config_schema(),
        }
    }

    /// The schema as pretty-printed JSON with a trailing newline, as committed.
    pub fn to_json(self) -> String {
        // A schema is plain JSON data; serializing it cannot fail.
        let mut text = serde_json::to_string_pretty(&self.schema()).unwrap_or_default();
        text.push('\n');
        text
    }
}

fn settings() -> SchemaSettings {
    SchemaSettings::draft2020_12()
}

/// The JSON Schema of [`McpAppManifest`].
pub(crate) fn manifest_schema() -> schemars::Schema {
    let mut schema = settings()
        .into_generator()
        .into_root_schema_for::<McpAppManifest>();
    // The parser tolerates a missing id (it becomes a validation error of that app), but
    // authors must write one.
    schema.insert("required".to_owned(), serde_json::json!(["id"]));
    // Editors may point a manifest at its schema; that key is not a field.
    if let Some(properties) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        properties.insert(
            "$schema".to_owned(),
            serde_json::json!({ "type": "string", "description": "URL of this schema, for editors." }),
        );
    }
    schema
}

/// The JSON Schema of [`McpAppsConfig`].
pub(crate) fn config_schema() -> schemars::Schema {
    settings()
        .into_generator()
        .into_root_schema_for::<McpAppsConfig>()
}
