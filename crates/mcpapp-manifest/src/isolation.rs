//! The sandbox model: what an app's manifest *requests* (`permissions`), what the operator
//! *grants* (`McpApps.Isolation` and each entry's `Isolation`), and the resolved sandbox of one
//! app ([`AppIsolation`]) that discovery puts in its [`AppSpec`](crate::AppSpec).
//!
//! The manifest is third-party text, so a request is only a request: discovery checks it
//! against the operator's `AllowManifestPermissions` patterns, and an app whose request is not
//! granted does not run. The operator's own grants (`Read`, `Write`, `Execute`, `Network`)
//! apply whether or not the manifest asks. Paths here are as written; discovery resolves them
//! (`~`, `env:`, relative paths) and refuses grants that would expose what the sandbox
//! protects.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::quote::quoted;

/// How strictly an app is confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum IsolationMode {
    /// Every part of the policy is applied, or the app does not start (the default).
    #[default]
    Enforce,
    /// What the kernel supports is applied; what it lacks is reported, and the app starts.
    BestEffort,
    /// No sandbox: the app runs with the gateway's user's rights (its environment is still
    /// built from the allowlist).
    Off,
}

impl IsolationMode {
    /// The name as written in configuration: `enforce`, `best-effort` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::BestEffort => "best-effort",
            Self::Off => "off",
        }
    }

    /// Reads a mode: trimmed and case-insensitive; `best_effort` and `besteffort` mean
    /// `best-effort`.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "enforce" => Some(Self::Enforce),
            "best-effort" | "best_effort" | "besteffort" => Some(Self::BestEffort),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

impl fmt::Display for IsolationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for IsolationMode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for IsolationMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).ok_or_else(|| {
            D::Error::custom(format!(
                "unknown isolation mode {}: use \"enforce\", \"best-effort\" or \"off\"",
                quoted(&raw, '"')
            ))
        })
    }
}

impl JsonSchema for IsolationMode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IsolationMode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "enum": ["enforce", "best-effort", "off"],
            "description": "enforce: apply the whole policy or refuse to start the app; best-effort: apply what the kernel supports and report the rest; off: no sandbox."
        })
    }
}

/// A host an app may reach through the gateway's egress proxy: a name (or `*.` and a domain,
/// for every name under it) and a port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    /// The host name, lower-cased; `*.example.com` matches every name under `example.com`
    /// (not `example.com` itself).
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

impl HostPort {
    /// Reads `host:port`. The host is a DNS name or an IPv4 address (lower-cased), optionally
    /// starting with `*.`; the port is 1 to 65535.
    ///
    /// # Errors
    /// A sentence saying what is wrong.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let text = raw.trim();
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("{} has no port: write host:port", quoted(raw, '\'')))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{} has no valid port (1-65535)", quoted(raw, '\'')))?;
        let host = host.to_ascii_lowercase();
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let label_ok = |label: &str| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
            return Err(format!(
                "{} is not a host name with a port (such as api.example.com:443)",
                quoted(raw, '\'')
            ));
        }
        Ok(Self { host, port })
    }

    /// Whether a connection to `host:port` is covered by this grant.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match self.host.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            None => host == self.host,
        }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Serialize for HostPort {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Network access, as requested, granted or resolved: none, all, or some TCP ports and hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NetworkAccess {
    /// No socket may be opened (pairs of connected sockets and pipes still work).
    #[default]
    None,
    /// TCP and UDP to anywhere (except the gateway's own listeners).
    All,
    /// Only these.
    Limited {
        /// TCP ports the app may connect to, on any address.
        tcp_ports: BTreeSet<u16>,
        /// Hosts the app may reach through the gateway's egress proxy (`HTTPS_PROXY`).
        hosts: BTreeSet<HostPort>,
    },
}

impl NetworkAccess {
    /// Whether nothing is allowed.
    pub fn is_none(&self) -> bool {
        match self {
            Self::None => true,
            Self::All => false,
            Self::Limited { tcp_ports, hosts } => tcp_ports.is_empty() && hosts.is_empty(),
        }
    }

    /// This access and `other` together.
    pub fn union(&self, other: &NetworkAccess) -> NetworkAccess {
        match (self, other) {
            (Self::All, _) | (_, Self::All) => Self::All,
            (Self::None, x) | (x, Self::None) => x.clone(),
            (
                Self::Limited { tcp_ports, hosts },
                Self::Limited {
                    tcp_ports: more_ports,
                    hosts: more_hosts,
                },
            ) => Self::Limited {
                tcp_ports: tcp_ports.union(more_ports).copied().collect(),
                hosts: hosts.union(more_hosts).cloned().collect(),
            },
        }
    }

    /// The hosts reached through the proxy, if any.
    pub fn hosts(&self) -> impl Iterator<Item = &HostPort> {
        let hosts = match self {
            Self::Limited { hosts, .. } => Some(hosts),
            _ => None,
        };
        hosts.into_iter().flatten()
    }

    /// The TCP ports granted directly, if any.
    pub fn tcp_ports(&self) -> impl Iterator<Item = u16> + '_ {
        let ports = match self {
            Self::Limited { tcp_ports, .. } => Some(tcp_ports),
            _ => None,
        };
        ports.into_iter().flatten().copied()
    }

    /// Reads the JSON shapes `"none"`, `"all"` and `{ports_key: [..], hosts_key: [..]}`.
    fn from_json(value: &Value, ports_key: &str, hosts_key: &str) -> Result<Self, String> {
        match value {
            Value::String(word) => match word.trim().to_ascii_lowercase().as_str() {
                "none" => Ok(Self::None),
                "all" => Ok(Self::All),
                _ => Err(format!(
                    "unknown network access {}: use \"none\", \"all\" or an object with {ports_key} and {hosts_key}",
                    quoted(word, '"')
                )),
            },
            Value::Object(object) => {
                let mut tcp_ports = BTreeSet::new();
                let mut hosts = BTreeSet::new();
                if let Some(ports) = object.get(ports_key) {
                    let ports = ports
                        .as_array()
                        .ok_or_else(|| format!("{ports_key} must be an array of port numbers"))?;
                    for port in ports {
                        let port = port
                            .as_u64()
                            .and_then(|p| u16::try_from(p).ok())
                            .filter(|p| *p > 0)
                            .ok_or_else(|| {
                                format!("{ports_key} holds {port}, which is not a port (1-65535)")
                            })?;
                        tcp_ports.insert(port);
                    }
                }
                if let Some(list) = object.get(hosts_key) {
                    let list = list.as_array().ok_or_else(|| {
                        format!("{hosts_key} must be an array of host:port strings")
                    })?;
                    for host in list {
                        let host = host.as_str().ok_or_else(|| {
                            format!("{hosts_key} holds {host}, which is not a host:port string")
                        })?;
                        hosts.insert(HostPort::parse(host)?);
                    }
                }
                Ok(Self::Limited { tcp_ports, hosts })
            }
            other => Err(format!(
                "expected \"none\", \"all\" or an object with {ports_key} and {hosts_key}, found {}",
                crate::quote::json_kind(other)
            )),
        }
    }

    fn to_json(&self, ports_key: &str, hosts_key: &str) -> Value {
        match self {
            Self::None => Value::from("none"),
            Self::All => Value::from("all"),
            Self::Limited { tcp_ports, hosts } => serde_json::json!({
                ports_key: tcp_ports,
                hosts_key: hosts.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
        }
    }
}

impl fmt::Display for NetworkAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::All => f.write_str("all"),
            Self::Limited { tcp_ports, hosts } => {
                let mut parts: Vec<String> = tcp_ports.iter().map(|p| format!("tcp:{p}")).collect();
                parts.extend(hosts.iter().map(ToString::to_string));
                if parts.is_empty() {
                    f.write_str("none")
                } else {
                    f.write_str(&parts.join(", "))
                }
            }
        }
    }
}

impl Serialize for NetworkAccess {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json("tcpPorts", "hosts").serialize(serializer)
    }
}

// The schema shape shared by the network request and grant. The object comes first: the
// configuration reader binds keys through the first branch that names a type.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "only its JSON Schema is used")]
enum NetworkShape<T> {
    /// Some TCP ports and hosts.
    Limited(T),
    /// `"none"` (no sockets) or `"all"` (any TCP or UDP destination).
    Word(NetworkWord),
}

fn network_schema<T: JsonSchema>(
    generator: &mut schemars::SchemaGenerator,
    description: &str,
) -> schemars::Schema {
    let mut schema = <NetworkShape<T>>::json_schema(generator);
    schema.insert("description".to_owned(), Value::from(description));
    schema
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code, reason = "only its JSON Schema is used")]
enum NetworkWord {
    None,
    All,
}

/// The object form of a manifest's network request.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "only its JSON Schema is used")]
struct NetworkRequestObject {
    /// TCP ports the app connects to directly, on any address.
    #[serde(default)]
    tcp_ports: Vec<u16>,
    /// `host:port` names the app reaches through the gateway's egress proxy (HTTPS_PROXY).
    #[serde(default)]
    hosts: Vec<String>,
}

/// The object form of the operator's network grant.
#[derive(JsonSchema)]
#[serde(rename_all = "PascalCase")]
#[allow(dead_code, reason = "only its JSON Schema is used")]
struct NetworkGrantObject {
    /// TCP ports the app may connect to directly, on any address.
    #[serde(default)]
    tcp_ports: Vec<u16>,
    /// `host:port` names (a leading `*.` covers every name under a domain) the app may reach
    /// through the gateway's egress proxy, which it finds in HTTPS_PROXY and HTTP_PROXY.
    #[serde(default)]
    hosts: Vec<String>,
}

/// A manifest's network request: `"none"`, `"all"` or `{"tcpPorts": [...], "hosts": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkRequest(pub NetworkAccess);

impl Serialize for NetworkRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.to_json("tcpPorts", "hosts").serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for NetworkRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        NetworkAccess::from_json(&value, "tcpPorts", "hosts")
            .map(Self)
            .map_err(D::Error::custom)
    }
}

impl JsonSchema for NetworkRequest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NetworkRequest".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        network_schema::<NetworkRequestObject>(
            generator,
            "Network access the app asks for: \"none\", \"all\", or some TCP ports and host names.",
        )
    }
}

/// The operator's network grant: `"none"`, `"all"` or `{"TcpPorts": [...], "Hosts": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkGrant(pub NetworkAccess);

impl Serialize for NetworkGrant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.to_json("TcpPorts", "Hosts").serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for NetworkGrant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        NetworkAccess::from_json(&value, "TcpPorts", "Hosts")
            .map(Self)
            .map_err(D::Error::custom)
    }
}

impl JsonSchema for NetworkGrant {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NetworkGrant".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        network_schema::<NetworkGrantObject>(
            generator,
            "Network access granted: \"none\", \"all\", or some TCP ports and host names.",
        )
    }
}

/// Folders and files a manifest asks to read or write beyond its own folder and its state
/// folder. Paths are absolute, or start with `~/` (the home folder of the gateway's user).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FilesystemRequest {
    /// Paths to read (files, or folders and everything under them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Paths to read and write (files, or folders and everything under them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

/// What an app asks the operator to allow beyond the default sandbox. Nothing here is granted
/// until the operator allows it (`McpApps.Isolation.AllowManifestPermissions`, or the app's
/// entry's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequest {
    /// Paths to read or write.
    #[serde(default, skip_serializing_if = "FilesystemRequest::is_empty")]
    pub filesystem: FilesystemRequest,
    /// Network access: `"none"` (the default), `"all"`, or `{"tcpPorts": [5432], "hosts":
    /// ["api.example.com:443"]}`.
    #[serde(default, skip_serializing_if = "NetworkRequest::is_none")]
    pub network: NetworkRequest,
}

impl FilesystemRequest {
    /// Whether no path is requested.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.write.is_empty()
    }
}

impl NetworkRequest {
    /// Whether no network access is requested.
    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl PermissionRequest {
    /// Whether nothing is requested.
    pub fn is_empty(&self) -> bool {
        self.filesystem.is_empty() && self.network.is_none()
    }
}

/// Resource limits of an app's processes (`Isolation.Limits`). Each is optional: an entry's
/// value wins over the `McpApps` value, which wins over the default. Core dumps are always off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct LimitsConfig {
    /// Open files per process (RLIMIT_NOFILE). Default 4096.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16))]
    pub open_files: Option<u64>,
    /// Virtual memory per process in MiB (RLIMIT_AS). Default: no limit (Node reserves far more
    /// address space than it uses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16))]
    pub address_space_mb: Option<u64>,
    /// Processes and threads of the gateway's user, counted by the kernel per user
    /// (RLIMIT_NPROC). Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub processes: Option<u64>,
    /// CPU time per process in seconds (RLIMIT_CPU). Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cpu_seconds: Option<u64>,
    /// Largest file a process may write, in MiB (RLIMIT_FSIZE). Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub file_size_mb: Option<u64>,
}

/// Default `Isolation.Limits.OpenFiles`.
pub const DEFAULT_OPEN_FILES: u64 = 4096;

/// The resolved resource limits of one app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLimits {
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// RLIMIT_AS in bytes, if limited.
    pub address_space_bytes: Option<u64>,
    /// RLIMIT_NPROC, if limited.
    pub processes: Option<u64>,
    /// RLIMIT_CPU in seconds, if limited.
    pub cpu_seconds: Option<u64>,
    /// RLIMIT_FSIZE in bytes, if limited.
    pub file_size_bytes: Option<u64>,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self::from_config(&LimitsConfig::default(), None)
    }
}

impl ResourceLimits {
    /// The limits of an app: its entry's settings over the global ones over the defaults.
    pub fn from_config(global: &LimitsConfig, entry: Option<&LimitsConfig>) -> Self {
        let pick = |f: fn(&LimitsConfig) -> Option<u64>| entry.and_then(f).or_else(|| f(global));
        let mib = |v: u64| v.saturating_mul(1024 * 1024);
        Self {
            open_files: pick(|c| c.open_files).unwrap_or(DEFAULT_OPEN_FILES),
            address_space_bytes: pick(|c| c.address_space_mb).map(mib),
            processes: pick(|c| c.processes),
            cpu_seconds: pick(|c| c.cpu_seconds),
            file_size_bytes: pick(|c| c.file_size_mb).map(mib),
        }
    }
}

/// The patterns that decide which of a manifest's requests are granted
/// (`Isolation.AllowManifestPermissions`). Globs, as for `AllowManifestEnv`: `*` stays within a
/// path segment, `**` crosses them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct ManifestPermissionGrants {
    /// Paths a manifest may ask to read: absolute or `~/` globs such as `~/notes/**`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Paths a manifest may ask to write, as for `Read`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// Network a manifest may ask for: `host:port` globs (`*.example.com:443`), `tcp:PORT`
    /// (`tcp:*` for any port) and `all`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
}

impl ManifestPermissionGrants {
    /// Whether no pattern is set.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.write.is_empty() && self.network.is_empty()
    }
}

/// `McpApps.Isolation` and `McpApps.Entries.{id}.Isolation`: the sandbox of stdio apps.
///
/// An entry's `Mode`, `Network` and `UnixSockets` replace the global ones; its path lists and
/// patterns are added to the global ones; its limits override each global limit they set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct IsolationConfig {
    /// `enforce` (the default), `best-effort` or `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<IsolationMode>,
    /// Network the app may use: `"none"` (the default), `"all"`, or `{"TcpPorts": [5432],
    /// "Hosts": ["api.example.com:443"]}`. The gateway's own ports stay closed either way
    /// unless listed in `TcpPorts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkGrant>,
    /// More paths to read: absolute, `~/...`, `env:NAME`, or relative to the configuration
    /// file's folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// More paths to read and write, written as for `Read`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// More paths to read and execute programs from (an interpreter outside `/usr`), written
    /// as for `Read`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub execute: Vec<String>,
    /// Allow UNIX sockets (pathname sockets, such as a database's, are not confined by path on
    /// kernels before Landlock ABI 9). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_sockets: Option<bool>,
    /// Resource limits.
    #[serde(default, skip_serializing_if = "limits_are_unset")]
    pub limits: LimitsConfig,
    /// Which of a manifest's `permissions` requests are granted.
    #[serde(default, skip_serializing_if = "ManifestPermissionGrants::is_empty")]
    pub allow_manifest_permissions: ManifestPermissionGrants,
}

fn limits_are_unset(limits: &LimitsConfig) -> bool {
    *limits == LimitsConfig::default()
}

/// The sandbox of one app, resolved by discovery: the operator's grants and the granted part
/// of its manifest's request, with absolute paths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AppIsolation {
    /// How strictly it applies.
    pub mode: IsolationMode,
    /// Readable paths beyond the defaults.
    pub read: Vec<PathBuf>,
    /// Readable and writable paths beyond the defaults.
    pub write: Vec<PathBuf>,
    /// Readable and executable paths beyond the defaults.
    pub execute: Vec<PathBuf>,
    /// Network access.
    pub network: NetworkAccess,
    /// Whether UNIX sockets may be opened.
    pub unix_sockets: bool,
    /// Resource limits.
    pub limits: ResourceLimits,
    /// The gateway's state directory (`McpApps.StateDirectory`, resolved), under which the
    /// app's `HOME` and `TMPDIR` live; `None` leaves the choice to the gateway.
    pub state_directory: Option<PathBuf>,
}

impl AppIsolation {
    /// The default sandbox under `mode`: nothing beyond the defaults.
    pub fn new(mode: IsolationMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_grants_match_names_and_wildcards() {
        let exact = HostPort::parse("API.example.com:443").unwrap();
        assert_eq!(exact.to_string(), "api.example.com:443");
        assert!(exact.covers("api.example.com", 443));
        assert!(exact.covers("Api.Example.Com.", 443));
        assert!(!exact.covers("api.example.com", 80));
        assert!(!exact.covers("evil-api.example.com", 443));
        let wild = HostPort::parse("*.example.com:443").unwrap();
        assert!(wild.covers("a.example.com", 443));
        assert!(wild.covers("a.b.example.com", 443));
        assert!(!wild.covers("example.com", 443));
        assert!(!wild.covers("aexample.com", 443));
        for bad in [
            "example.com",
            "example.com:0",
            "example.com:70000",
            ":443",
            "a b:1",
            "*.:1",
        ] {
            assert!(HostPort::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn network_shapes_read_and_write_both_casings() {
        let request: NetworkRequest =
            serde_json::from_str(r#"{"tcpPorts": [5432], "hosts": ["a.example:443"]}"#).unwrap();
        assert_eq!(request.0.to_string(), "tcp:5432, a.example:443");
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"tcpPorts":[5432],"hosts":["a.example:443"]}"#
        );
        let grant: NetworkGrant = serde_json::from_str(r#""ALL""#).unwrap();
        assert_eq!(grant.0, NetworkAccess::All);
        let err = serde_json::from_str::<NetworkGrant>(r#""some""#).unwrap_err();
        assert!(
            err.to_string().contains("unknown network access \"some\""),
            "{err}"
        );
        let err = serde_json::from_str::<NetworkGrant>(r#"{"TcpPorts": [0]}"#).unwrap_err();
        assert!(err.to_string().contains("not a port"), "{err}");
        let none = NetworkAccess::None;
        let limited = NetworkAccess::Limited {
            tcp_ports: [80].into(),
            hosts: BTreeSet::new(),
        };
        assert_eq!(none.union(&limited), limited);
        assert_eq!(limited.union(&NetworkAccess::All), NetworkAccess::All);
    }

    #[test]
    fn modes_are_trimmed_and_case_insensitive() {
        assert_eq!(
            IsolationMode::parse(" Best-Effort "),
            Some(IsolationMode::BestEffort)
        );
        assert_eq!(IsolationMode::parse("OFF"), Some(IsolationMode::Off));
        assert_eq!(IsolationMode::parse("enforced"), None);
    }

    #[test]
    fn limits_take_the_entry_then_the_global_value_then_the_default() {
        let global = LimitsConfig {
            open_files: Some(100),
            cpu_seconds: Some(5),
            ..LimitsConfig::default()
        };
        let entry = LimitsConfig {
            open_files: Some(200),
            address_space_mb: Some(512),
            ..LimitsConfig::default()
        };
        let limits = ResourceLimits::from_config(&global, Some(&entry));
        assert_eq!(limits.open_files, 200);
        assert_eq!(limits.cpu_seconds, Some(5));
        assert_eq!(limits.address_space_bytes, Some(512 * 1024 * 1024));
        assert_eq!(ResourceLimits::default().open_files, DEFAULT_OPEN_FILES);
    }
}
