//! The data model of mcpapp: the `openclaw.mcpapp.json` manifest, the `McpApps`
//! configuration section, validation, and the lifecycle and install state of an app.
//!
//! This crate does no I/O: it parses text it is given and validates values. Reading files,
//! scanning folders and starting apps belong to the crates above it.
//!
//! # Example
//!
//! ```
//! use mcpapp_manifest::{McpAppManifest, McpAppEntryConfig, Launch, Transport};
//!
//! let text = r#"{
//!     // Comments and trailing commas are fine.
//!     "id": "grocery-inventory",
//!     "transport": "HTTP",
//!     "url": "http://127.0.0.1:5001/mcp",
//!     "toolNamePrefix": "grocery.",
//!     "comand": "typo",
//! }"#;
//! let parsed = McpAppManifest::parse(text)?;
//! assert_eq!(parsed.findings[0].message, "unknown field `comand`; did you mean `command`?");
//!
//! // Entry overrides apply before validation.
//! let entry = McpAppEntryConfig { tool_name_prefix: Some("shop.".into()), ..Default::default() };
//! let spec = parsed.manifest.with_overrides(&entry).validate().expect("valid");
//! assert_eq!(spec.id.as_str(), "grocery-inventory");
//! assert_eq!(spec.launch.transport(), Transport::Http);
//! assert_eq!(spec.tool_name_prefix, "shop.");
//! assert!(matches!(spec.launch, Launch::Http { .. }));
//! # Ok::<(), mcpapp_manifest::ParseError>(())
//! ```
#![warn(missing_docs)]

mod config;
mod document;
mod error;
mod isolation;
mod manifest;
mod provenance;
mod quote;
mod schema;
mod state;
mod validate;

pub use config::{
    ConfigDocument, ConfigSection, DEFAULT_DISCOVERY_PATH, DEFAULT_INHERIT_ENVIRONMENT,
    GATEWAY_CREDENTIAL_ENV, McpAppEntryConfig, McpAppsConfig, OAuthEntryConfig, ParsedSection,
    RegistryConfig, SECTION_NAME, SupervisionConfig,
};
pub use document::{Position, closest_match, jsonc_parse_options};
pub use error::{Finding, ParseError, Severity};
pub use isolation::{
    AppIsolation, DEFAULT_OPEN_FILES, FilesystemRequest, HostPort, IsolationConfig, IsolationMode,
    LimitsConfig, ManifestPermissionGrants, NetworkAccess, NetworkGrant, NetworkRequest,
    PermissionRequest, ResourceLimits,
};
pub use manifest::{
    DEFAULT_REQUEST_TIMEOUT_SECONDS, MANIFEST_FILE_NAME, MCP_APP_MIME_TYPE, McpAppManifest,
    ParsedManifest,
};
pub use provenance::{
    InstallRecord, RUNTIME_FOLDER_NAME, SECRET_PREFIX, SecretResolver, SecretUnavailable,
    is_secret_name, secret_reference,
};
pub use quote::{json_kind, quoted};
pub use schema::SchemaKind;
pub use state::{InstallState, Lifecycle, Timestamp};
pub use validate::{AppId, AppSpec, Era, Launch, MAX_ID_LEN, Transport, ValidationError};
