//! Validation of an effective manifest into an [`AppSpec`], the typed description the
//! supervisor runs.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::isolation::AppIsolation;
use crate::manifest::McpAppManifest;
use crate::quote::quoted;

/// Longest accepted app id, in characters.
pub const MAX_ID_LEN: usize = 64;
/// Accepted range of both timeouts, in seconds.
pub(crate) const TIMEOUT_RANGE_SECONDS: std::ops::RangeInclusive<i64> = 1..=3600;

/// A validated app id: 1 to 64 characters of `[A-Za-z0-9._-]`, starting with a letter or a
/// digit. Ids appear in URLs and registration ids, so nothing else is allowed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct AppId(String);

impl AppId {
    /// Checks `id` and wraps it.
    ///
    /// # Errors
    /// [`ValidationError::InvalidId`] when `id` breaks the rules above.
    pub fn new(id: &str) -> Result<Self, ValidationError> {
        let valid_chars = id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        let starts_well = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if valid_chars && starts_well && id.len() <= MAX_ID_LEN {
            Ok(Self(id.to_owned()))
        } else {
            Err(ValidationError::InvalidId { id: id.to_owned() })
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Borrow<str> for AppId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for AppId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// How the gateway talks to an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A child process speaking MCP over stdin and stdout.
    Stdio,
    /// A Streamable HTTP endpoint.
    Http,
}

impl Transport {
    /// Reads a transport name: trimmed and case-insensitive; `streamable-http` and
    /// `streamable_http` mean `http`; blank means `stdio`.
    ///
    /// # Errors
    /// [`ValidationError::LegacySseTransport`] for `sse`, and
    /// [`ValidationError::UnsupportedTransport`] for anything else unknown.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let name = raw.trim().to_ascii_lowercase();
        match name.as_str() {
            "" | "stdio" => Ok(Self::Stdio),
            "http" | "streamable-http" | "streamable_http" => Ok(Self::Http),
            "sse" => Err(ValidationError::LegacySseTransport),
            _ => Err(ValidationError::UnsupportedTransport {
                value: raw.to_owned(),
            }),
        }
    }

    /// The canonical name, `stdio` or `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason an app cannot run. Validation reports all of them at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// `id` is missing, null or blank.
    #[error("'id' is required")]
    MissingId,
    /// `id` has characters outside `[A-Za-z0-9._-]`, does not start with a letter or digit, or
    /// is longer than 64 characters.
    #[error(
        "'id' {} is not a valid app id: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        quoted(.id, '"')
    )]
    InvalidId {
        /// The id as written.
        id: String,
    },
    /// `transport` is `sse`, the legacy HTTP+SSE transport.
    #[error(
        "transport 'sse' (the legacy HTTP+SSE transport) is not supported; use 'http' (Streamable HTTP) instead"
    )]
    LegacySseTransport,
    /// `transport` is neither `stdio` nor `http` (nor an alias of them).
    #[error("unsupported transport {}: use 'stdio' or 'http'", quoted(.value, '\''))]
    UnsupportedTransport {
        /// The transport as written.
        value: String,
    },
    /// The transport is stdio but `command` is missing or blank.
    #[error("transport 'stdio' requires 'command'")]
    MissingCommand,
    /// The transport is http but `url` is missing or blank.
    #[error("transport 'http' requires 'url'")]
    MissingUrl,
    /// `url` is not an absolute `http://` or `https://` URL.
    #[error("'url' {} is not an absolute http:// or https:// URL: {reason}", quoted(.url, '"'))]
    InvalidUrl {
        /// The URL as written, with any password removed.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A timeout is outside 1 to 3600 seconds.
    #[error("'{field}' is {value}; it must be between 1 and 3600 seconds")]
    TimeoutOutOfRange {
        /// `startupTimeoutSeconds` or `requestTimeoutSeconds`.
        field: &'static str,
        /// The value as written.
        value: i64,
    },
    /// Two header names differ only in case, so it is unclear which one is meant.
    #[error(
        "headers {} and {} differ only in case",
        quoted(.first, '\''),
        quoted(.second, '\'')
    )]
    DuplicateHeader {
        /// The first name.
        first: String,
        /// The second name.
        second: String,
    },
    /// A path in `permissions.filesystem` is not absolute or `~/...`, or climbs with `..`.
    #[error(
        "'permissions.filesystem.{list}' entry {} {reason}",
        quoted(.path, '"')
    )]
    InvalidPermissionPath {
        /// `read` or `write`.
        list: &'static str,
        /// The path as written.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl ValidationError {
    /// The manifest field the error is about, by its JSON name.
    pub fn field(&self) -> &'static str {
        match self {
            Self::MissingId | Self::InvalidId { .. } => "id",
            Self::LegacySseTransport | Self::UnsupportedTransport { .. } => "transport",
            Self::MissingCommand => "command",
            Self::MissingUrl | Self::InvalidUrl { .. } => "url",
            Self::TimeoutOutOfRange { field, .. } => field,
            Self::DuplicateHeader { .. } => "headers",
            Self::InvalidPermissionPath { .. } => "permissions",
        }
    }
}

/// How to reach a validated app.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Launch {
    /// Start a child process and speak MCP over its stdin and stdout.
    Stdio {
        /// The command, as written (resolution against the app folder or `PATH` is the
        /// supervisor's job).
        command: String,
        /// Its arguments.
        arguments: Vec<String>,
        /// Its working directory as written; `None` means the app's folder.
        working_directory: Option<String>,
        /// Extra environment variables; values may be `env:NAME` references.
        environment: BTreeMap<String, String>,
    },
    /// Connect to a Streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: url::Url,
        /// Extra request headers; values may be `env:NAME` references.
        headers: BTreeMap<String, String>,
    },
}

impl Launch {
    /// The transport this launch uses.
    pub fn transport(&self) -> Transport {
        match self {
            Self::Stdio { .. } => Transport::Stdio,
            Self::Http { .. } => Transport::Http,
        }
    }
}

/// An era of MCP: the one type for it in the whole workspace (an app's manifest, the
/// upstream session, each client session of the gateway).
///
/// Versions are dates, so the era of a version is a comparison with the first modern one.
/// Legacy is the default: every server before 2026-07-28 speaks it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2025-11-25 and earlier: a session opened with `initialize`.
    #[default]
    Legacy,
    /// 2026-07-28 and later: no handshake; every request stands alone.
    Modern,
}

impl Era {
    /// The era of a protocol version (versions are dates, compared as written).
    pub fn of_version(version: &str) -> Self {
        if version >= "2026-07-28" {
            Self::Modern
        } else {
            Self::Legacy
        }
    }
}

/// A validated app: everything the supervisor needs to run it, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AppSpec {
    /// The app id.
    pub id: AppId,
    /// The display name (`name`, else the id).
    pub display_name: String,
    /// The app version.
    pub version: String,
    /// The MCP protocol version the manifest declares.
    pub protocol_version: String,
    /// Which era to speak to the app: the declared version's when the manifest names one
    /// (discovery sets it); `None` when it names none, and the app is asked
    /// (`server/discover` first, `initialize` when that is not understood).
    pub protocol_era: Option<Era>,
    /// How to reach it.
    pub launch: Launch,
    /// Prefix for agent-facing tool names; empty means none.
    pub tool_name_prefix: String,
    /// Budget for connecting, the handshake and the first listing.
    pub startup_timeout: Duration,
    /// Budget for each request sent to the app.
    pub request_timeout: Duration,
    /// Whether the manifest says the app has a UI.
    pub has_ui: bool,
    /// The manifest's primary UI resource.
    pub ui_resource_uri: Option<String>,
    /// The sandbox a stdio app runs in. Validation gives the default (enforced, nothing
    /// granted); discovery fills in the operator's grants and the granted requests.
    pub isolation: AppIsolation,
}

impl McpAppManifest {
    /// Validates the manifest and returns the typed [`AppSpec`] to run, or every problem found.
    ///
    /// Run it on the *effective* manifest ([`McpAppManifest::with_overrides`]) so that entry
    /// overrides count.
    ///
    /// # Errors
    /// Every [`ValidationError`] that applies, in field order.
    pub fn validate(&self) -> Result<AppSpec, Vec<ValidationError>> {
        let mut errors = Vec::new();

        let id = match self.id.as_deref().map(str::trim) {
            None | Some("") => {
                errors.push(ValidationError::MissingId);
                None
            }
            // The id is used exactly as written; surrounding spaces make it invalid.
            Some(_) => AppId::new(self.id.as_deref().unwrap_or_default())
                .map_err(|e| errors.push(e))
                .ok(),
        };

        let launch = match Transport::parse(&self.transport) {
            Err(e) => {
                errors.push(e);
                None
            }
            Ok(Transport::Stdio) => match non_blank(self.command.as_deref()) {
                None => {
                    errors.push(ValidationError::MissingCommand);
                    None
                }
                Some(command) => Some(Launch::Stdio {
                    command: command.to_owned(),
                    arguments: self.arguments.clone(),
                    working_directory: non_blank(self.working_directory.as_deref())
                        .map(str::to_owned),
                    environment: self.environment.clone(),
                }),
            },
            Ok(Transport::Http) => match non_blank(self.url.as_deref()) {
                None => {
                    errors.push(ValidationError::MissingUrl);
                    None
                }
                Some(raw) => match parse_http_url(raw) {
                    Ok(url) => Some(Launch::Http {
                        url,
                        headers: self.headers.clone(),
                    }),
                    Err(e) => {
                        errors.push(e);
                        None
                    }
                },
            },
        };

        let startup = timeout("startupTimeoutSeconds", self.startup_timeout_seconds)
            .map_err(|e| errors.push(e))
            .ok();
        let request = timeout("requestTimeoutSeconds", self.request_timeout_seconds)
            .map_err(|e| errors.push(e))
            .ok();

        for (list, paths) in [
            ("read", &self.permissions.filesystem.read),
            ("write", &self.permissions.filesystem.write),
        ] {
            for path in paths {
                if let Some(reason) = permission_path_problem(path) {
                    errors.push(ValidationError::InvalidPermissionPath {
                        list,
                        path: path.clone(),
                        reason,
                    });
                }
            }
        }

        let mut names: Vec<&String> = self.headers.keys().collect();
        names.sort_by_key(|n| n.to_ascii_lowercase());
        for pair in names.windows(2) {
            if pair[0].eq_ignore_ascii_case(pair[1]) {
                errors.push(ValidationError::DuplicateHeader {
                    first: pair[0].clone(),
                    second: pair[1].clone(),
                });
            }
        }

        match (id, launch, startup, request) {
            (Some(id), Some(launch), Some(startup_timeout), Some(request_timeout))
                if errors.is_empty() =>
            {
                Ok(AppSpec {
                    display_name: self.display_name().to_owned(),
                    id,
                    version: self.version.clone(),
                    protocol_version: self.protocol_version.clone(),
                    protocol_era: None,
                    launch,
                    tool_name_prefix: self.tool_name_prefix.clone().unwrap_or_default(),
                    startup_timeout,
                    request_timeout,
                    has_ui: self.has_ui,
                    ui_resource_uri: self.ui_resource_uri.clone(),
                    isolation: AppIsolation::default(),
                })
            }
            _ => Err(errors),
        }
    }
}

/// Why a requested path cannot be used, if it cannot: it must be absolute or start with `~/`
/// (or be `~`), and must not climb with `..`.
fn permission_path_problem(path: &str) -> Option<&'static str> {
    let rooted = path.starts_with('/') || path == "~" || path.starts_with("~/");
    if !rooted {
        return Some("must be an absolute path or start with ~/");
    }
    if path.split('/').any(|part| part == "..") {
        return Some("must not contain '..'");
    }
    if path.contains('\0') {
        return Some("must not contain a NUL character");
    }
    None
}

fn non_blank(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.trim().is_empty())
}

fn timeout(field: &'static str, value: i64) -> Result<Duration, ValidationError> {
    if TIMEOUT_RANGE_SECONDS.contains(&value) {
        Ok(Duration::from_secs(value.unsigned_abs()))
    } else {
        Err(ValidationError::TimeoutOutOfRange { field, value })
    }
}

fn parse_http_url(raw: &str) -> Result<url::Url, ValidationError> {
    let invalid = |reason: String| ValidationError::InvalidUrl {
        url: redact_url(raw),
        reason,
    };
    let url = url::Url::parse(raw.trim()).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "the scheme is {}",
            quoted(url.scheme(), '\'')
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("it has no host".to_owned()));
    }
    Ok(url)
}

/// Removes a password from a URL before it is shown anywhere.
pub(crate) fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw.trim()) {
        Ok(mut url) if url.password().is_some() => {
            // Setting a password only fails for URLs that cannot have one, which this has.
            let _ = url.set_password(Some("redacted"));
            url.to_string()
        }
        Ok(_) => raw.to_owned(),
        // Unparseable text may still hold `user:secret@`; cut everything before an `@`.
        Err(_) => match raw.rsplit_once('@') {
            Some((before, after)) => match before.split_once("://") {
                Some((scheme, _)) => format!("{scheme}://redacted@{after}"),
                None => format!("redacted@{after}"),
            },
            None => raw.to_owned(),
        },
    }
}
