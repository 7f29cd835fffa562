//! The `McpApps` configuration section and the configuration-file reader.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::document::{Document, KeyCase, Position};
use crate::error::{Finding, ParseError, Severity};
use crate::isolation::IsolationConfig;
use crate::quote::quoted;

/// The name of the configuration section for MCP Apps.
pub const SECTION_NAME: &str = "McpApps";

/// The object that may wrap configuration sections, as in the .NET gateway's
/// `appsettings.json` (`OpenClaw:McpApps`).
pub(crate) const ROOT_SECTION_NAME: &str = "OpenClaw";

/// Default discovery path when none is configured.
pub const DEFAULT_DISCOVERY_PATH: &str = "./mcpapps";

/// Default `McpApps.MaxManifestBytes`: 1 MiB. Real manifests are a few kilobytes.
pub(crate) const DEFAULT_MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// The `McpApps` configuration section: where to look for apps and which to run.
///
/// Keys are matched case-insensitively when read from a file (`Enabled` and `enabled` both
/// work), like .NET configuration binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
#[schemars(title = "McpApps configuration section")]
pub struct McpAppsConfig {
    /// Master switch. When false nothing is discovered or started. Defaults to false.
    #[serde(default)]
    pub enabled: bool,

    /// Folders to scan, recursively, for `openclaw.mcpapp.json` files, in order. Relative paths
    /// resolve against the folder of the configuration file; `env:NAME` reads the path from
    /// an environment variable. Defaults to `["./mcpapps"]`; a configured list replaces the
    /// default.
    #[serde(default = "default_discovery_paths")]
    pub discovery_paths: Vec<String>,

    /// The largest manifest file read, in bytes; a larger one is skipped with an error (and
    /// only this much of it is ever read). At least 1. Defaults to 1048576 (1 MiB).
    #[serde(default = "default_max_manifest_bytes")]
    #[schemars(range(min = 1))]
    pub max_manifest_bytes: u64,

    /// `legacy` (an empty `Allow` list allows every app) or `strict` (an empty `Allow` list
    /// allows none). Case-insensitive and trimmed. Any other value denies every app.
    #[serde(default = "default_allowlist_semantics")]
    pub allowlist_semantics: String,

    /// App id patterns to allow, matched case-insensitively: `*`, `prefix-*`, `*-suffix`,
    /// `*middle*`, exact ids, or any glob.
    #[serde(default)]
    pub allow: Vec<String>,

    /// App id patterns to deny; a deny match wins over any allow match.
    #[serde(default)]
    pub deny: Vec<String>,

    /// Per-app settings and overrides, keyed by exact app id.
    #[serde(default)]
    pub entries: BTreeMap<String, McpAppEntryConfig>,

    /// How running apps are watched and restarted; entries may override each setting.
    #[serde(default)]
    pub supervision: SupervisionConfig,

    /// Variables of the gateway's own environment that app processes inherit: names or
    /// globs such as `LC_*`, matched case-sensitively. Nothing else of the gateway's
    /// environment reaches an app; the app's own `environment` comes on top. Entries may add
    /// names. The gateway's own credentials ([`GATEWAY_CREDENTIAL_ENV`]) are never inherited.
    /// Defaults to [`DEFAULT_INHERIT_ENVIRONMENT`]; a configured list replaces the default.
    #[serde(default = "default_inherit_environment")]
    pub inherit_environment: Vec<String>,

    /// Variables that `env:NAME` references written in a *manifest* may read: names or globs,
    /// matched case-sensitively. Manifests come from third parties, so the default is none;
    /// a manifest that refers to any other variable is invalid. Entries may add names.
    /// References written in `Entries` are the operator's own and resolve freely. The
    /// gateway's own credentials can never be read from a manifest.
    #[serde(default)]
    pub allow_manifest_env: Vec<String>,

    /// The gateway's state directory: each stdio app gets a folder `apps/{id}` under it as its
    /// `HOME` and `TMPDIR`, kept across restarts. Written as
    /// discovery paths are (relative to the configuration file's folder, `env:NAME`, `~/`).
    /// Default: `$XDG_STATE_HOME/mcpapp`, else `~/.local/state/mcpapp`; without a home folder
    /// (or one that does not exist), a private temporary folder for the gateway's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_directory: Option<String>,

    /// The sandbox stdio apps run in: mode, grants, limits, and which manifest requests are
    /// granted. Entries may add to it (`Entries.{id}.Isolation`).
    #[serde(default)]
    pub isolation: IsolationConfig,

    /// MCP Registries (the `/v0.1` API) that `mcpapp-gateway install NAME` and the page's
    /// "Add apps" view search, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registries: Vec<RegistryConfig>,

    /// The file where `mcpapp-gateway install` keeps apps' secret inputs, readable only by
    /// the gateway's user and outside every discovery path. Relative paths resolve against
    /// the folder of the configuration file. Defaults to `mcpapp/secrets.json` under
    /// `$XDG_STATE_HOME` (else `~/.local/state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_file: Option<String>,
}

/// One MCP Registry in `McpApps.Registries`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct RegistryConfig {
    /// A short name shown beside its servers (`official`).
    pub name: String,
    /// Its base URL, without `/v0.1` (`https://registry.modelcontextprotocol.io`).
    pub url: String,
}

/// What app processes inherit from the gateway's environment unless configured otherwise:
/// what a program needs to find its tools, its home and temporary folders, and to format text
/// for the user's language and time zone. The official MCP SDKs start stdio servers from a
/// similar short list.
pub const DEFAULT_INHERIT_ENVIRONMENT: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_*", "TZ", "TMPDIR",
];

/// The variables the gateway reads its own credentials from: its API token, the chat model's
/// key and the key that encrypts stored OAuth tokens. Apps never inherit them and manifests can never refer to them, whatever the
/// configuration says; an operator who wants to hand one to an app writes the reference in
/// that app's entry.
pub const GATEWAY_CREDENTIAL_ENV: &[&str] = &["MCPAPP_TOKEN", "OPENAI_API_KEY", "MCPAPP_OAUTH_KEY"];

/// How the gateway keeps apps running. Every setting is optional: an entry's value wins over
/// the `McpApps` value, which wins over the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct SupervisionConfig {
    /// Restart an app after it fails. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_restart: Option<bool>,
    /// Delay before the first restart, in milliseconds; it doubles with each failure in a row.
    /// Default 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_delay_ms: Option<u64>,
    /// Longest delay between restarts, in milliseconds. Default 60000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restart_delay_ms: Option<u64>,
    /// More failures than this within `CrashLoopWindowSeconds` is a crash loop: the app stays
    /// failed until restarted by hand. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_loop_failures: Option<u32>,
    /// The window for counting failures, in seconds. Default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_loop_window_seconds: Option<u64>,
    /// Uptime after which the restart delay starts again from `RestartDelayMs`, in seconds.
    /// Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_after_seconds: Option<u64>,
    /// Interval between health pings (MCP `ping`), in milliseconds; 0 turns them off.
    /// Default 30000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_interval_ms: Option<u64>,
    /// Failed health pings in a row after which the app counts as failed. Default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_failures: Option<u32>,
    /// Time a stopping app gets to exit after SIGTERM before it is killed, in milliseconds.
    /// Default 5000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_ms: Option<u64>,
}

fn default_discovery_paths() -> Vec<String> {
    vec![DEFAULT_DISCOVERY_PATH.to_owned()]
}
fn default_max_manifest_bytes() -> u64 {
    DEFAULT_MAX_MANIFEST_BYTES
}
fn default_allowlist_semantics() -> String {
    "legacy".to_owned()
}
fn default_inherit_environment() -> Vec<String> {
    DEFAULT_INHERIT_ENVIRONMENT
        .iter()
        .map(|name| (*name).to_owned())
        .collect()
}

impl Default for McpAppsConfig {
    /// The defaults of the original module: disabled, scanning `./mcpapps`, legacy allowlist.
    fn default() -> Self {
        Self {
            enabled: false,
            discovery_paths: default_discovery_paths(),
            max_manifest_bytes: DEFAULT_MAX_MANIFEST_BYTES,
            allowlist_semantics: default_allowlist_semantics(),
            allow: Vec::new(),
            deny: Vec::new(),
            entries: BTreeMap::new(),
            supervision: SupervisionConfig::default(),
            inherit_environment: default_inherit_environment(),
            allow_manifest_env: Vec::new(),
            state_directory: None,
            isolation: IsolationConfig::default(),
            registries: Vec::new(),
            secrets_file: None,
        }
    }
}

/// Per-app settings in `McpApps.Entries`: a switch plus overrides of manifest fields.
///
/// Every override is applied before the app is validated, so a manifest may rely on its entry
/// for a required field (for example a `Url` when `Transport` switches it to http).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct McpAppEntryConfig {
    /// Set to false to keep this app from running. Defaults to true.
    #[serde(default = "default_true")]
    pub enabled: bool,

    /// Replaces the manifest's `transport`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,

    /// Replaces the manifest's `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,

    /// Replaces the manifest's `arguments`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<String>>,

    /// Replaces the manifest's `workingDirectory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,

    /// Replaces the manifest's `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,

    /// Merged over the manifest's `headers` (names compare case-insensitively).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,

    /// How the gateway authorizes to this app when it is an HTTP app protected by OAuth (the
    /// MCP authorization specification): a pre-registered client, scopes, the redirect base
    /// URL, or `Enabled: false` to refuse OAuth for it.
    #[serde(
        default,
        rename = "OAuth",
        skip_serializing_if = "OAuthEntryConfig::is_default"
    )]
    pub oauth: OAuthEntryConfig,

    /// Replaces the manifest's `toolNamePrefix`; an empty string removes the prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name_prefix: Option<String>,

    /// Replaces the manifest's `startupTimeoutSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub startup_timeout_seconds: Option<i64>,

    /// Replaces the manifest's `requestTimeoutSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub request_timeout_seconds: Option<i64>,

    /// Merged over the manifest's `environment`.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,

    /// Overrides of the `McpApps.Supervision` settings for this app.
    #[serde(default)]
    pub supervision: SupervisionConfig,

    /// More variables of the gateway's environment for this app to inherit, added to
    /// `McpApps.InheritEnvironment` (names or globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit_environment: Vec<String>,

    /// More variables that `env:NAME` references in this app's manifest may read, added to
    /// `McpApps.AllowManifestEnv` (names or globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_manifest_env: Vec<String>,

    /// This app's sandbox settings, over `McpApps.Isolation`: `Mode`, `Network` and
    /// `UnixSockets` replace the global ones, the path lists and patterns add to them, and each
    /// limit set here wins.
    #[serde(default)]
    pub isolation: IsolationConfig,
}

fn default_true() -> bool {
    true
}

impl Default for McpAppEntryConfig {
    /// Enabled, with no overrides.
    fn default() -> Self {
        Self {
            enabled: true,
            transport: None,
            command: None,
            arguments: None,
            working_directory: None,
            url: None,
            headers: BTreeMap::new(),
            oauth: OAuthEntryConfig::default(),
            tool_name_prefix: None,
            startup_timeout_seconds: None,
            request_timeout_seconds: None,
            environment: BTreeMap::new(),
            supervision: SupervisionConfig::default(),
            inherit_environment: Vec::new(),
            allow_manifest_env: Vec::new(),
            isolation: IsolationConfig::default(),
        }
    }
}

/// `McpApps.Entries.{appId}.OAuth`: the operator's OAuth settings for one HTTP app, used when
/// the app answers 401 with a `Bearer` challenge and the gateway becomes its OAuth client.
/// Everything is optional; by default the gateway identifies itself with a client ID metadata
/// document or dynamic registration and requests the scopes the app asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct OAuthEntryConfig {
    /// `false` refuses OAuth for this app: a 401 from it is an error (its `lastError`), never a
    /// request for the user to connect. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,

    /// A client ID registered out of band with the app's authorization server. When set, the
    /// gateway uses it instead of a client ID metadata document or dynamic registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,

    /// The secret of `ClientId`, as an `env:NAME` reference (the secret itself never goes in
    /// a configuration file). Requires `ClientId`; without it the client is public.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^env:.+"))]
    pub client_secret: Option<String>,

    /// The issuer `ClientId` was registered with. When set and the app names another
    /// authorization server, authorization stops with an error instead of presenting the
    /// client to a server that did not issue it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,

    /// Scopes to request, replacing those the app's challenge or metadata names (a request for
    /// more access still adds the scopes the app asks for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,

    /// The base URL (`scheme://host[:port]`) under which the user's browser reaches the
    /// gateway's `/oauth/callback` for this app. Defaults to `Gateway.PublicOrigin`, else the
    /// gateway's own address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_base_url: Option<String>,
}

impl OAuthEntryConfig {
    /// True when nothing is set (so the entry is written without an `OAuth` key).
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }

    /// Whether OAuth is allowed for the app (`Enabled`, default true).
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// What is wrong with these settings, one message per problem naming the key under
    /// `OAuth`: a `ClientSecret` that is not an `env:` reference or has no `ClientId`, a blank
    /// `ClientId` or scope, a `RedirectBaseUrl` that is not `http(s)://host[:port]`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(secret) = &self.client_secret {
            if !secret.starts_with("env:") || secret.len() == "env:".len() {
                // Never quote the value: it may be the secret itself.
                problems.push(
                    "`OAuth.ClientSecret` must be an `env:NAME` reference, not the secret itself"
                        .to_owned(),
                );
            }
            if self.client_id.is_none() {
                problems.push("`OAuth.ClientSecret` is set without `OAuth.ClientId`".to_owned());
            }
        }
        if self
            .client_id
            .as_deref()
            .is_some_and(|id| id.trim().is_empty())
        {
            problems.push("`OAuth.ClientId` is blank".to_owned());
        }
        if self.scopes.iter().any(|scope| {
            scope.is_empty()
                || scope
                    .chars()
                    .any(|c| c.is_whitespace() || c == '"' || c == '\\')
        }) {
            problems.push(
                "`OAuth.Scopes` holds an empty scope or one with spaces, quotes or backslashes"
                    .to_owned(),
            );
        }
        if let Some(base) = &self.redirect_base_url
            && !is_origin_like(base)
        {
            problems.push(format!(
                "`OAuth.RedirectBaseUrl` {} is not `http://host[:port]` or `https://host[:port]`",
                quoted(base, '`')
            ));
        }
        problems
    }
}

/// `http(s)://host[:port]`, optionally with a trailing slash: no path, query, userinfo or
/// fragment.
fn is_origin_like(text: &str) -> bool {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    let Some(authority) = rest.map(|rest| rest.strip_suffix('/').unwrap_or(rest)) else {
        return false;
    };
    !authority.is_empty()
        && !authority
            .chars()
            .any(|c| matches!(c, '/' | '?' | '#' | '@' | '\\') || c.is_whitespace())
}

/// A type that can be read as a configuration section: deserializable, described by a JSON
/// Schema (which drives case-insensitive key matching and unknown-key warnings), and with
/// defaults for when the section is absent.
pub trait ConfigSection: DeserializeOwned + JsonSchema + Default {}

impl<T: DeserializeOwned + JsonSchema + Default> ConfigSection for T {}

/// A configuration section read from a file, with what was noticed while reading it.
#[derive(Debug, Clone)]
pub struct ParsedSection<T> {
    /// The section's value, defaults filled in.
    pub value: T,
    /// Unknown keys and similar problems that did not stop the section from being read.
    pub findings: Vec<Finding>,
    /// Where the section starts in the file, or `None` when the file has no such section and
    /// the defaults were used.
    pub position: Option<Position>,
}

/// A configuration file (JSON with comments), from which sections are read.
///
/// A section named `X` is found at the top level or under `OpenClaw` (where the .NET gateway
/// binds it), names compared case-insensitively. Keys inside sections are matched
/// case-insensitively too; unknown keys are reported as warnings.
#[derive(Debug)]
pub struct ConfigDocument<'a> {
    document: Document<'a>,
}

impl<'a> ConfigDocument<'a> {
    /// Parses configuration text.
    ///
    /// # Errors
    /// [`ParseError`] when the text is not JSON or its top level is not an object.
    pub fn parse(text: &'a str) -> Result<Self, ParseError> {
        let document = Document::parse(text)?;
        if !document.root_is_object() {
            return Err(ParseError::NotAnObject {
                position: document.root_position(),
            });
        }
        Ok(Self { document })
    }

    /// Reads the section `name` as a `T`, or `T::default()` when the file has none.
    ///
    /// # Errors
    /// [`ParseError::Type`] when a value in the section has the wrong type.
    pub fn section<T: ConfigSection>(&self, name: &str) -> Result<ParsedSection<T>, ParseError> {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
        self.section_with_schema(name, &schema)
            .map(|(section, _)| section)
    }

    fn section_with_schema<T>(
        &self,
        name: &str,
        schema: &schemars::Schema,
    ) -> Result<(ParsedSection<T>, Option<serde_json::Value>), ParseError>
    where
        T: DeserializeOwned + Default,
    {
        let found = self
            .document
            .convert_member(&[ROOT_SECTION_NAME, name], schema, KeyCase::Insensitive)
            .map(|found| (found, format!("{ROOT_SECTION_NAME}.{name}")))
            .or_else(|| {
                self.document
                    .convert_member(&[name], schema, KeyCase::Insensitive)
                    .map(|found| (found, name.to_owned()))
            });
        let Some(((position, converted), label)) = found else {
            return Ok((
                ParsedSection {
                    value: T::default(),
                    findings: Vec::new(),
                    position: None,
                },
                None,
            ));
        };
        if !converted.value.is_object() {
            return Err(ParseError::Type {
                field: label,
                position: Some(position),
                message: "expected a JSON object".to_owned(),
            });
        }
        let value: T = converted.deserialize().map_err(|err| match err {
            ParseError::Type {
                field,
                position: err_position,
                message,
            } => ParseError::Type {
                field: format!("{label}.{field}"),
                position: err_position.or(Some(position)),
                message,
            },
            other => other,
        })?;
        let findings = converted
            .unknown
            .iter()
            .map(|unknown| {
                let parent = if unknown.parent.is_empty() {
                    label.clone()
                } else {
                    format!("{label}.{}", unknown.parent)
                };
                Finding {
                    severity: Severity::Warning,
                    position: Some(unknown.position),
                    message: {
                        let key = quoted(&unknown.key, '`');
                        let parent = quoted(&parent, '`');
                        match &unknown.suggestion {
                            Some(s) => format!(
                                "unknown key {key} in {parent}; did you mean {}?",
                                quoted(s, '`')
                            ),
                            None => format!("unknown key {key} in {parent} is ignored"),
                        }
                    },
                }
            })
            .collect();
        Ok((
            ParsedSection {
                value,
                findings,
                position: Some(position),
            },
            Some(converted.value),
        ))
    }

    /// Where the value at `path` inside section `name` is written (keys compared
    /// case-insensitively, array elements by index, e.g. `["Isolation", "Write", "0"]`), in the
    /// section under `OpenClaw` when there is one, else at the top level.
    pub fn value_position(&self, name: &str, path: &[&str]) -> Option<Position> {
        let under_root: Vec<&str> = [ROOT_SECTION_NAME, name]
            .into_iter()
            .chain(path.iter().copied())
            .collect();
        let at_top: Vec<&str> = std::iter::once(name).chain(path.iter().copied()).collect();
        let wrapped = self
            .document
            .value_position(&[ROOT_SECTION_NAME, name])
            .is_some();
        if wrapped {
            self.document.value_position(&under_root)
        } else {
            self.document.value_position(&at_top)
        }
    }

    /// Reads the `McpApps` section.
    ///
    /// Besides unknown keys, the findings say when the file has no `McpApps` section or the
    /// section does not set `Enabled`: MCP Apps then stay disabled, the original module's
    /// default, which is rarely what someone writing the section wants.
    ///
    /// # Errors
    /// [`ParseError::Type`] when a value in the section has the wrong type.
    pub fn mcp_apps(&self) -> Result<ParsedSection<McpAppsConfig>, ParseError> {
        static SCHEMA: OnceLock<schemars::Schema> = OnceLock::new();
        let schema = SCHEMA.get_or_init(crate::schema::config_schema);
        let (mut section, raw) = self.section_with_schema::<McpAppsConfig>(SECTION_NAME, schema)?;
        let enabled_set = raw
            .as_ref()
            .and_then(|v| v.as_object())
            .is_some_and(|o| o.contains_key("Enabled"));
        match section.position {
            None => section.findings.push(Finding {
                severity: Severity::Warning,
                position: None,
                message: format!(
                    "no `{SECTION_NAME}` section (at the top level or under `{ROOT_SECTION_NAME}`); MCP Apps are disabled"
                ),
            }),
            Some(position) if !enabled_set => section.findings.push(Finding {
                severity: Severity::Warning,
                position: Some(position),
                message: format!(
                    "`{SECTION_NAME}.Enabled` is not set, so MCP Apps stay disabled (the default is false); set \"Enabled\": true to run them"
                ),
            }),
            Some(_) => {}
        }
        Ok(section)
    }
}
