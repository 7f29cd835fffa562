//! The `openclaw.mcpapp.json` manifest model and its parser.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::McpAppEntryConfig;
use crate::document::{Document, KeyCase, Position};
use crate::error::{Finding, ParseError, Severity};
use crate::isolation::PermissionRequest;
use crate::provenance::InstallRecord;
use crate::quote::quoted;

/// The file name every app manifest must have, exactly.
pub const MANIFEST_FILE_NAME: &str = "openclaw.mcpapp.json";

/// The MIME type of an MCP App UI resource.
pub const MCP_APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// Default `version` when a manifest leaves it out or blank.
pub(crate) const DEFAULT_VERSION: &str = "0.1.0";
/// Default `protocolVersion` when a manifest leaves it out or blank.
pub(crate) const DEFAULT_PROTOCOL_VERSION: &str = "2025-03-26";
/// Default `transport` when a manifest leaves it out or blank.
pub(crate) const DEFAULT_TRANSPORT: &str = "stdio";
/// Default `startupTimeoutSeconds`.
pub(crate) const DEFAULT_STARTUP_TIMEOUT_SECONDS: i64 = 15;
/// Default `requestTimeoutSeconds`.
pub const DEFAULT_REQUEST_TIMEOUT_SECONDS: i64 = 60;

/// An MCP App manifest, the contents of an `openclaw.mcpapp.json` file.
///
/// Field names are camelCase and case-sensitive. Every field but `id` has a default. A
/// manifest without an `id` still parses, so that it can be reported as an invalid app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "MCP App manifest (openclaw.mcpapp.json)")]
pub struct McpAppManifest {
    /// Unique application id: 1 to 64 characters of letters, digits, `.`, `_` and `-`, starting
    /// with a letter or digit. It appears in URLs (`/apps/mcp/{id}`) and registration ids
    /// (`mcpapp:{id}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"))]
    pub id: Option<String>,

    /// Human-readable display name; the id is shown when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// Short description of what the app does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// The app's version, ideally semantic. Defaults to `0.1.0`.
    #[serde(default = "default_version")]
    pub version: String,

    /// The oldest gateway version this app works with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_host_version: Option<String>,

    /// The MCP protocol version the app implements. Defaults to `2025-03-26`. The gateway
    /// warns when the server negotiates an older one.
    #[serde(default = "default_protocol_version")]
    pub protocol_version: String,

    /// URL of an icon for the app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,

    /// Who made the app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,

    /// The app's licence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,

    /// The app's home page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage_url: Option<String>,

    /// Tags for grouping and search.
    #[serde(default)]
    pub tags: Vec<String>,

    /// How the gateway talks to the app: `stdio` (a child process) or `http` (Streamable
    /// HTTP). Case-insensitive and trimmed; `streamable-http` and `streamable_http` mean
    /// `http`. Defaults to `stdio`.
    #[serde(default = "default_transport")]
    #[schemars(example = &"stdio", example = &"http")]
    pub transport: String,

    /// Command that starts the app (stdio). A command containing a path separator resolves
    /// against the folder of the manifest; a bare name is looked up on `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,

    /// Command-line arguments (stdio). An argument written `secret:NAME` is replaced by the
    /// app's secret `NAME` from the gateway's secret store when the app starts.
    #[serde(default)]
    pub arguments: Vec<String>,

    /// Working directory of the process (stdio); relative paths resolve against the folder of
    /// the manifest, which is also the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,

    /// Streamable HTTP endpoint of the app (http): an absolute `http://` or `https://` URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,

    /// Extra HTTP request headers (http). Names are case-insensitive. A value written
    /// `env:NAME` is read from the gateway's environment when the app starts, if the operator
    /// allows manifests to read `NAME` (`McpApps.AllowManifestEnv`); one written
    /// `secret:NAME` is the app's own secret `NAME` from the gateway's secret store.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,

    /// Environment variables for the process (stdio), on top of the few it inherits from the
    /// gateway (`McpApps.InheritEnvironment`). A value written `env:NAME` is read from the
    /// gateway's environment when the app starts, if the operator allows manifests to read
    /// `NAME` (`McpApps.AllowManifestEnv`); one written `secret:NAME` is the app's own secret
    /// `NAME` from the gateway's secret store.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,

    /// Whether the app ships an interactive MCP App UI.
    #[serde(default)]
    pub has_ui: bool,

    /// The app's primary UI resource, a `ui://` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui_resource_uri: Option<String>,

    /// Grouping category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,

    /// Capabilities the app declares, e.g. `tools`, `resources`, `prompts`, `completions`.
    /// Defaults to `["tools"]`.
    #[serde(default = "default_capabilities")]
    pub capabilities: Vec<String>,

    /// Seconds allowed for connecting, the MCP handshake and listing tools, resources and
    /// prompts. 1 to 3600; defaults to 15.
    #[serde(default = "default_startup_timeout")]
    #[schemars(range(min = 1, max = 3600))]
    pub startup_timeout_seconds: i64,

    /// Seconds allowed for each request sent to the app. 1 to 3600; defaults to 60.
    #[serde(default = "default_request_timeout")]
    #[schemars(range(min = 1, max = 3600))]
    pub request_timeout_seconds: i64,

    /// Prefix put in front of every tool name the agent sees, separator included (e.g.
    /// `grocery.`). Empty or absent means no prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name_prefix: Option<String>,

    /// Free-form data for tools that read manifests; the gateway does not interpret it.
    #[serde(default)]
    pub metadata: Map<String, Value>,

    /// What the app asks to be allowed beyond the default sandbox of stdio apps (its own
    /// folder, a state folder as `HOME` and `TMPDIR`, no network): paths to read or write and
    /// network access. Nothing is granted until the operator allows it
    /// (`McpApps.Isolation.AllowManifestPermissions`); an app whose request is not granted does
    /// not run.
    #[serde(default, skip_serializing_if = "PermissionRequest::is_empty")]
    pub permissions: PermissionRequest,
    /// Where the app came from, when `mcpapp-gateway install` put it here (source, exact
    /// version, integrity, the inputs it was installed with). Not used to run the app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<InstallRecord>,
}

fn default_version() -> String {
    DEFAULT_VERSION.to_owned()
}
fn default_protocol_version() -> String {
    DEFAULT_PROTOCOL_VERSION.to_owned()
}
fn default_transport() -> String {
    DEFAULT_TRANSPORT.to_owned()
}
fn default_capabilities() -> Vec<String> {
    vec!["tools".to_owned()]
}
fn default_startup_timeout() -> i64 {
    DEFAULT_STARTUP_TIMEOUT_SECONDS
}
fn default_request_timeout() -> i64 {
    DEFAULT_REQUEST_TIMEOUT_SECONDS
}

impl Default for McpAppManifest {
    /// A manifest with every field at its default and no id.
    fn default() -> Self {
        Self {
            id: None,
            name: None,
            description: None,
            version: default_version(),
            min_host_version: None,
            protocol_version: default_protocol_version(),
            icon_url: None,
            author: None,
            license: None,
            homepage_url: None,
            tags: Vec::new(),
            transport: default_transport(),
            command: None,
            arguments: Vec::new(),
            working_directory: None,
            url: None,
            headers: BTreeMap::new(),
            environment: BTreeMap::new(),
            has_ui: false,
            ui_resource_uri: None,
            category: None,
            capabilities: default_capabilities(),
            startup_timeout_seconds: DEFAULT_STARTUP_TIMEOUT_SECONDS,
            request_timeout_seconds: DEFAULT_REQUEST_TIMEOUT_SECONDS,
            tool_name_prefix: None,
            metadata: Map::new(),
            permissions: PermissionRequest::default(),
            install: None,
        }
    }
}

/// A manifest read from text, with what was noticed while reading it.
#[derive(Debug, Clone)]
pub struct ParsedManifest {
    /// The manifest, defaults filled in.
    pub manifest: McpAppManifest,
    /// Problems that did not stop the manifest from being read (unknown fields).
    pub findings: Vec<Finding>,
    root: Position,
    positions: std::collections::HashMap<String, Position>,
}

impl ParsedManifest {
    /// Where the value of a top-level field (by its JSON name) is written, if it is.
    pub fn field_position(&self, field: &str) -> Option<Position> {
        self.positions.get(field).copied()
    }

    /// Where the manifest object starts.
    pub fn root_position(&self) -> Position {
        self.root
    }
}

fn manifest_schema_cached() -> &'static schemars::Schema {
    static SCHEMA: OnceLock<schemars::Schema> = OnceLock::new();
    SCHEMA.get_or_init(crate::schema::manifest_schema)
}

impl McpAppManifest {
    /// Parses manifest text: JSON with optional comments and trailing commas.
    ///
    /// Unknown fields do not fail the parse; each becomes a warning [`Finding`] with a
    /// suggestion when it looks like a typo. A `$schema` key is accepted silently. Known
    /// fields written as `null` take their defaults. Blank `version`, `protocolVersion` and
    /// `transport` take their defaults and an empty `capabilities` becomes `["tools"]`, as in
    /// the original module.
    ///
    /// # Errors
    /// [`ParseError`] when the text is not JSON, not an object, or a field has the wrong type.
    pub fn parse(text: &str) -> Result<ParsedManifest, ParseError> {
        let document = Document::parse(text)?;
        if !document.root_is_object() {
            return Err(ParseError::NotAnObject {
                position: document.root_position(),
            });
        }
        let converted = document.convert(manifest_schema_cached(), KeyCase::Exact);
        let mut manifest: McpAppManifest = converted.deserialize()?;
        manifest.normalize();
        let findings = converted
            .unknown
            .iter()
            .map(|unknown| Finding {
                severity: Severity::Warning,
                position: Some(unknown.position),
                message: {
                    let key = quoted(&unknown.key, '`');
                    match &unknown.suggestion {
                        Some(s) if s.eq_ignore_ascii_case(&unknown.key) => format!(
                            "unknown field {key}; field names are case-sensitive: did you mean {}?",
                            quoted(s, '`')
                        ),
                        Some(s) => {
                            format!("unknown field {key}; did you mean {}?", quoted(s, '`'))
                        }
                        None => format!("unknown field {key} is ignored"),
                    }
                },
            })
            .collect();
        Ok(ParsedManifest {
            manifest,
            findings,
            root: document.root_position(),
            positions: converted.positions,
        })
    }

    /// Serializes the manifest as indented JSON, leaving out unset optional fields.
    pub fn to_json_pretty(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    fn normalize(&mut self) {
        if self.version.trim().is_empty() {
            self.version = default_version();
        }
        if self.protocol_version.trim().is_empty() {
            self.protocol_version = default_protocol_version();
        }
        if self.transport.trim().is_empty() {
            self.transport = default_transport();
        }
        if self.capabilities.is_empty() {
            self.capabilities = default_capabilities();
        }
    }

    /// The name to show: `name` when set and not blank, else the id, else an empty string.
    pub fn display_name(&self) -> &str {
        match (&self.name, &self.id) {
            (Some(name), _) if !name.trim().is_empty() => name,
            (_, Some(id)) => id,
            _ => "",
        }
    }

    /// Looks up a header by name, ignoring case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The manifest as the gateway will run it: `entry`'s overrides applied.
    ///
    /// `Transport`, `Command`, `Arguments`, `WorkingDirectory`, `Url`, `ToolNamePrefix` and the
    /// timeouts replace the manifest's values when set (an empty `ToolNamePrefix` removes the
    /// prefix). `Environment` and `Headers` are merged over the manifest's, the entry winning;
    /// header names compare case-insensitively.
    pub fn with_overrides(&self, entry: &McpAppEntryConfig) -> McpAppManifest {
        let mut out = self.clone();
        if let Some(transport) = &entry.transport {
            out.transport = transport.clone();
        }
        if let Some(command) = &entry.command {
            out.command = Some(command.clone());
        }
        if let Some(arguments) = &entry.arguments {
            out.arguments = arguments.clone();
        }
        if let Some(dir) = &entry.working_directory {
            out.working_directory = Some(dir.clone());
        }
        if let Some(url) = &entry.url {
            out.url = Some(url.clone());
        }
        if let Some(prefix) = &entry.tool_name_prefix {
            out.tool_name_prefix = Some(prefix.clone());
        }
        if let Some(seconds) = entry.startup_timeout_seconds {
            out.startup_timeout_seconds = seconds;
        }
        if let Some(seconds) = entry.request_timeout_seconds {
            out.request_timeout_seconds = seconds;
        }
        for (key, value) in &entry.environment {
            out.environment.insert(key.clone(), value.clone());
        }
        for (name, value) in &entry.headers {
            out.headers
                .retain(|existing, _| !existing.eq_ignore_ascii_case(name));
            out.headers.insert(name.clone(), value.clone());
        }
        out
    }
}
