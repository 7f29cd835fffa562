//! What an installed app asks the operator to allow beyond the default sandbox, derived from
//! what its source says, in one vocabulary shared with the operator's grants ([`Permission`]).
//!
//! The install formats barely declare permissions, so requests come from two places:
//! - **inputs that are paths**: an MCPB `user_config` of type `directory` asks to read and
//!   write the chosen folder (a workspace the app works in), one of type `file` and a
//!   `server.json` input with `format: "filepath"` ask to read the chosen path. Only absolute
//!   and `~/` values ask for anything: a relative value names something in the app's own
//!   folder, which it reads already. Secret inputs never become requests (a request is written
//!   into the manifest);
//! - **ToolHive's publisher hints** in a `server.json`:
//!   `_meta["io.modelcontextprotocol.registry/publisher-provided"]["io.github.stacklok"][KEY]
//!   .permissions`, with `read` and `write` (mounts, `HOST[:CONTAINER]`: the host side is
//!   requested) and `network.outbound` (`insecure_allow_all`, `allow_host`, `allow_port`). Every
//!   `allow_host` is requested on every `allow_port` (443 when none is listed) through the
//!   gateway's egress proxy; a `.example.com` host means the domain and every name under it;
//!   ports without hosts become direct TCP ports. `inbound` rules do not apply (the gateway
//!   speaks to a stdio app over its pipes).
//!
//! The request is written into the installed manifest's `permissions` (requests belong to the
//! app); whether it is granted is the operator's configuration's business.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use mcpapp_manifest::{HostPort, NetworkAccess, NetworkRequest, PermissionRequest};
use serde_json::Value;

use crate::inputs::{Input, InputKind, Values};

/// The `_meta` key under which registry publishers put their own data.
pub(crate) const PUBLISHER_PROVIDED: &str = "io.modelcontextprotocol.registry/publisher-provided";
/// ToolHive's publisher namespace in it.
pub(crate) const TOOLHIVE: &str = "io.github.stacklok";
/// The port a ToolHive host without `allow_port` is requested on (HTTPS).
const DEFAULT_HOST_PORT: u16 = 443;

/// One permission beyond the default sandbox: requested by an app, or granted by the operator.
/// Written as `install --grant` takes it: `read=PATH`, `write=PATH`, `net=PORT`,
/// `net=HOST:PORT` (`*.example.com:443` for every name under a domain) or `net=all`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// Read a file, or a folder and everything under it.
    Read(String),
    /// Read and write a file, or a folder and everything under it.
    Write(String),
    /// Open TCP connections to this port, on any address.
    Tcp(u16),
    /// Reach this host and port through the gateway's egress proxy.
    Host(HostPort),
    /// Any network destination (TCP and UDP).
    AllNetwork,
}

impl Permission {
    /// The configuration setting (under `McpApps.Entries.<id>.Isolation`) that grants it.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::Read(_) => "Read",
            Self::Write(_) => "Write",
            Self::Tcp(_) => "Network.TcpPorts",
            Self::Host(_) => "Network.Hosts",
            Self::AllNetwork => "Network",
        }
    }

    /// Whether it is about the network.
    pub fn is_network(&self) -> bool {
        matches!(self, Self::Tcp(_) | Self::Host(_) | Self::AllNetwork)
    }

    /// This permission alone, as a manifest's request.
    pub fn as_request(&self) -> PermissionRequest {
        request_of(std::slice::from_ref(self))
    }

    /// In words, for a prompt: `read and write /srv/notes`.
    pub fn describe(&self) -> String {
        match self {
            Self::Read(path) => format!("read {path}"),
            Self::Write(path) => format!("read and write {path}"),
            Self::Tcp(port) => format!("connect to TCP port {port} on any address"),
            Self::Host(host) => format!("reach {host} through the gateway's egress proxy"),
            Self::AllNetwork => "use the network without limits (TCP and UDP, anywhere)".to_owned(),
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read(path) => write!(f, "read={path}"),
            Self::Write(path) => write!(f, "write={path}"),
            Self::Tcp(port) => write!(f, "net={port}"),
            Self::Host(host) => write!(f, "net={host}"),
            Self::AllNetwork => f.write_str("net=all"),
        }
    }
}

impl FromStr for Permission {
    type Err = String;

    /// Reads `read=PATH`, `write=PATH`, `net=PORT`, `net=HOST:PORT` or `net=all`. Paths are
    /// kept as written (the caller makes relative ones absolute).
    fn from_str(text: &str) -> Result<Self, String> {
        let (kind, value) = text
            .split_once('=')
            .ok_or_else(|| format!("'{text}' is not KIND=VALUE: use read=PATH, write=PATH, net=PORT, net=HOST:PORT or net=all"))?;
        let value = value.trim();
        match kind.trim().to_ascii_lowercase().as_str() {
            "read" | "write" if value.is_empty() => Err(format!("'{text}' names no path")),
            "read" => Ok(Self::Read(value.to_owned())),
            "write" => Ok(Self::Write(value.to_owned())),
            "net" | "network" => {
                if value.eq_ignore_ascii_case("all") {
                    return Ok(Self::AllNetwork);
                }
                if let Ok(port) = value.parse::<u16>() {
                    return if port == 0 {
                        Err(format!("'{text}': port 0 is not a port (1-65535)"))
                    } else {
                        Ok(Self::Tcp(port))
                    };
                }
                HostPort::parse(value)
                    .map(Self::Host)
                    .map_err(|reason| format!("'{text}': {reason}"))
            }
            other => Err(format!(
                "'{other}' is not a kind of grant: use read=PATH, write=PATH, net=PORT, net=HOST:PORT or net=all"
            )),
        }
    }
}

/// Permissions as a manifest's `permissions` request.
pub fn request_of(permissions: &[Permission]) -> PermissionRequest {
    let mut request = PermissionRequest::default();
    let mut network = NetworkAccess::None;
    for permission in permissions {
        match permission {
            Permission::Read(path) if !request.filesystem.read.contains(path) => {
                request.filesystem.read.push(path.clone());
            }
            Permission::Write(path) if !request.filesystem.write.contains(path) => {
                request.filesystem.write.push(path.clone());
            }
            Permission::Read(_) | Permission::Write(_) => {}
            Permission::Tcp(port) => {
                network = network.union(&NetworkAccess::Limited {
                    tcp_ports: [*port].into(),
                    hosts: BTreeSet::new(),
                });
            }
            Permission::Host(host) => {
                network = network.union(&NetworkAccess::Limited {
                    tcp_ports: BTreeSet::new(),
                    hosts: [host.clone()].into(),
                });
            }
            Permission::AllNetwork => network = NetworkAccess::All,
        }
    }
    request.network = NetworkRequest(network);
    request
}

/// A manifest's `permissions` request as permissions, in its order.
pub fn permissions_of(request: &PermissionRequest) -> Vec<Permission> {
    let mut out: Vec<Permission> = request
        .filesystem
        .read
        .iter()
        .map(|p| Permission::Read(p.clone()))
        .chain(
            request
                .filesystem
                .write
                .iter()
                .map(|p| Permission::Write(p.clone())),
        )
        .collect();
    match &request.network.0 {
        NetworkAccess::None => {}
        NetworkAccess::All => out.push(Permission::AllNetwork),
        NetworkAccess::Limited { tcp_ports, hosts } => {
            out.extend(tcp_ports.iter().map(|p| Permission::Tcp(*p)));
            out.extend(hosts.iter().cloned().map(Permission::Host));
        }
    }
    out
}

/// A permission an app requests, with where the request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    /// What it asks for.
    pub permission: Permission,
    /// Why: `input notes_dir (a folder)`, `the publisher's ToolHive profile`.
    pub reason: String,
}

/// What a source asks for before its inputs have values: the publisher's hints, and which
/// inputs ask for the paths they are given.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hints {
    /// Requests of the publisher (ToolHive's profile).
    pub(crate) fixed: Vec<Requested>,
    /// Parts of the hints that could not be used, said in the consent text.
    pub(crate) notes: Vec<String>,
}

impl Hints {
    /// What the app asks for with `values`: the fixed requests, then one per path value of
    /// an input the launch uses (see the module documentation).
    pub(crate) fn requested(
        &self,
        inputs: &[Input],
        used: &dyn Fn(&str) -> bool,
        values: &Values,
    ) -> (Vec<Requested>, Vec<String>) {
        let mut out = self.fixed.clone();
        let mut notes = Vec::new();
        for input in inputs {
            let Some(asks) = path_kind(input) else {
                continue;
            };
            if !used(&input.key) {
                continue;
            }
            for value in values.get(&input.key).unwrap_or_default() {
                let value = value.trim();
                if value.is_empty() {
                    continue;
                }
                if !(value.starts_with('/') || value == "~" || value.starts_with("~/")) {
                    notes.push(format!(
                        "input {} is {}, relative to the app's folder, which it reads already; no permission is requested for it",
                        input.key,
                        mcpapp_manifest::quoted(value, '\'')
                    ));
                    continue;
                }
                let permission = asks(value.to_owned());
                if out.iter().any(|r| r.permission == permission) {
                    continue;
                }
                out.push(Requested {
                    permission,
                    reason: format!("input {}, {}", input.key, what_input(input)),
                });
            }
        }
        (out, notes)
    }

    /// The requests in words before values are known, for the page's plan.
    pub(crate) fn describe(&self, inputs: &[Input], used: &dyn Fn(&str) -> bool) -> Vec<String> {
        let mut out: Vec<String> = self
            .fixed
            .iter()
            .map(|r| format!("{} ({})", r.permission, r.reason))
            .collect();
        for input in inputs {
            if path_kind(input).is_none() || !used(&input.key) {
                continue;
            }
            let verb = match input.kind {
                InputKind::Directory => "read and write",
                _ => "read",
            };
            out.push(format!(
                "{verb} the path given for input {} ({})",
                input.key,
                what_input(input)
            ));
        }
        out
    }
}

/// How a value of `input` is requested, when it names a path the app will use.
fn path_kind(input: &Input) -> Option<fn(String) -> Permission> {
    if input.secret {
        return None;
    }
    match input.kind {
        InputKind::Directory => Some(Permission::Write),
        InputKind::File => Some(Permission::Read),
        _ => None,
    }
}

fn what_input(input: &Input) -> &'static str {
    match input.kind {
        InputKind::Directory => "a folder the app works in",
        _ => "a path the app reads",
    }
}

/// The permissions a `server.json`'s ToolHive hints ask for (see the module documentation).
pub(crate) fn toolhive_hints(meta: Option<&Value>) -> Hints {
    let mut hints = Hints::default();
    let Some(entries) = meta
        .and_then(|m| m.get(PUBLISHER_PROVIDED))
        .and_then(|p| p.get(TOOLHIVE))
        .and_then(Value::as_object)
    else {
        return hints;
    };
    let reason = "the publisher's ToolHive profile".to_owned();
    let add = |permission: Permission, hints: &mut Hints| {
        if !hints.fixed.iter().any(|r| r.permission == permission) {
            hints.fixed.push(Requested {
                permission,
                reason: reason.clone(),
            });
        }
    };
    for (key, entry) in entries {
        let Some(profile) = entry.get("permissions").and_then(Value::as_object) else {
            continue;
        };
        let at = |field: &str| format!("_meta…{TOOLHIVE}[\"{key}\"].permissions.{field}");
        for (field, make) in [
            ("read", Permission::Read as fn(String) -> Permission),
            ("write", Permission::Write),
        ] {
            for (i, mount) in strings(profile.get(field)).into_iter().enumerate() {
                match mount_source(&mount) {
                    Some(path) => add(make(path), &mut hints),
                    None => hints.notes.push(format!(
                        "{}[{i}] {} is not an absolute or ~/ path; it is not requested",
                        at(field),
                        mcpapp_manifest::quoted(&mount, '"')
                    )),
                }
            }
        }
        let Some(outbound) = profile
            .get("network")
            .and_then(|n| n.get("outbound"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        if outbound.get("insecure_allow_all").and_then(Value::as_bool) == Some(true) {
            add(Permission::AllNetwork, &mut hints);
            continue;
        }
        let ports: Vec<u16> = outbound
            .get("allow_port")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_u64().and_then(|p| u16::try_from(p).ok()))
            .filter(|p| *p > 0)
            .collect();
        let hosts = strings(outbound.get("allow_host"));
        if hosts.is_empty() {
            for port in ports {
                add(Permission::Tcp(port), &mut hints);
            }
            continue;
        }
        let ports = if ports.is_empty() {
            vec![DEFAULT_HOST_PORT]
        } else {
            ports
        };
        for host in hosts {
            // `.example.com` is the domain and every name under it.
            let names = match host.strip_prefix('.') {
                Some(domain) => vec![domain.to_owned(), format!("*.{domain}")],
                None => vec![host.clone()],
            };
            for name in names {
                for port in &ports {
                    match HostPort::parse(&format!("{name}:{port}")) {
                        Ok(host) => add(Permission::Host(host), &mut hints),
                        Err(reason) => hints.notes.push(format!(
                            "{}: {reason}; it is not requested",
                            at("network.outbound.allow_host")
                        )),
                    }
                }
            }
        }
    }
    hints
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The host side of a ToolHive mount (`/host/path[:/container/path]`), when it is a path the
/// sandbox can grant.
fn mount_source(mount: &str) -> Option<String> {
    let mount = mount.trim();
    if mount.contains("://") {
        return None;
    }
    let source = match mount.split_once(':') {
        Some((host, container)) if container.starts_with('/') => host,
        _ => mount,
    };
    (source.starts_with('/') || source.starts_with("~/")).then(|| source.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_read_as_flags_and_back() {
        for text in [
            "read=/srv/notes",
            "write=~/work",
            "net=5432",
            "net=api.example.com:443",
            "net=*.example.com:443",
            "net=all",
        ] {
            let permission: Permission = text.parse().unwrap();
            assert_eq!(permission.to_string(), text);
        }
        for (bad, says) in [
            ("read", "is not KIND=VALUE"),
            ("read=", "names no path"),
            ("exec=/x", "is not a kind of grant"),
            ("net=0", "port 0"),
            ("net=example.com", "has no port"),
        ] {
            let err = bad.parse::<Permission>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn toolhive_profiles_become_requests() {
        let meta = serde_json::json!({
            PUBLISHER_PROVIDED: {
                TOOLHIVE: {
                    "ghcr.io/acme/notes:1.2.0": {
                        "tier": "Community",
                        "permissions": {
                            "read": ["/etc/notes.conf", "/srv/notes:/data", "relative/path", "resource://x"],
                            "write": ["~/notes-out"],
                            "network": {
                                "outbound": {
                                    "allow_host": ["api.notes.example", ".cdn.example", "bad host"],
                                    "allow_port": [443, 8443]
                                },
                                "inbound": {"allow_host": ["anyone.example"]}
                            }
                        }
                    },
                    "https://notes.example/mcp": {
                        "permissions": {"network": {"outbound": {"allow_port": [5432]}}}
                    }
                },
                "com.other": {"permissions": {"read": ["/ignored"]}}
            }
        });
        let hints = toolhive_hints(Some(&meta));
        let shown: Vec<String> = hints
            .fixed
            .iter()
            .map(|r| r.permission.to_string())
            .chain(hints.notes.iter().map(|n| format!("note: {n}")))
            .collect();
        expect_test::expect![[r#"
            read=/etc/notes.conf
            read=/srv/notes
            write=~/notes-out
            net=api.notes.example:443
            net=api.notes.example:8443
            net=cdn.example:443
            net=cdn.example:8443
            net=*.cdn.example:443
            net=*.cdn.example:8443
            net=5432
            note: _meta…io.github.stacklok["ghcr.io/acme/notes:1.2.0"].permissions.read[2] "relative/path" is not an absolute or ~/ path; it is not requested
            note: _meta…io.github.stacklok["ghcr.io/acme/notes:1.2.0"].permissions.read[3] "resource://x" is not an absolute or ~/ path; it is not requested
            note: _meta…io.github.stacklok["ghcr.io/acme/notes:1.2.0"].permissions.network.outbound.allow_host: 'bad host:443' is not a host name with a port (such as api.example.com:443); it is not requested
            note: _meta…io.github.stacklok["ghcr.io/acme/notes:1.2.0"].permissions.network.outbound.allow_host: 'bad host:8443' is not a host name with a port (such as api.example.com:443); it is not requested"#]]
        .assert_eq(&shown.join("\n"));
        let everything = serde_json::json!({PUBLISHER_PROVIDED: {TOOLHIVE: {"img": {
            "permissions": {"network": {"outbound": {"insecure_allow_all": true, "allow_host": ["a.example"]}}}
        }}}});
        let hints = toolhive_hints(Some(&everything));
        assert_eq!(hints.fixed.len(), 1);
        assert_eq!(hints.fixed[0].permission, Permission::AllNetwork);
        assert!(toolhive_hints(None).fixed.is_empty());
    }

    #[test]
    fn path_inputs_request_their_values() {
        let mut folder = Input::new("notes_dir");
        folder.kind = InputKind::Directory;
        folder.repeated = true;
        let mut file = Input::new("config");
        file.kind = InputKind::File;
        let mut secret = Input::new("key_file");
        secret.kind = InputKind::File;
        secret.secret = true;
        let mut unused = Input::new("unused");
        unused.kind = InputKind::Directory;
        let inputs = [folder, file, secret, unused];
        let mut values = Values::default();
        values.insert("notes_dir", vec!["/srv/a".into(), "~/b".into()]);
        values.insert("config", vec!["conf/x.toml".into()]);
        values.insert("key_file", vec!["/secret/key".into()]);
        values.insert("unused", vec!["/srv/unused".into()]);
        let (requested, notes) = Hints::default().requested(&inputs, &|k| k != "unused", &values);
        let shown: Vec<String> = requested
            .iter()
            .map(|r| format!("{} ({})", r.permission, r.reason))
            .collect();
        assert_eq!(
            shown,
            [
                "write=/srv/a (input notes_dir, a folder the app works in)",
                "write=~/b (input notes_dir, a folder the app works in)"
            ]
        );
        assert_eq!(
            notes,
            [
                "input config is 'conf/x.toml', relative to the app's folder, which it reads already; no permission is requested for it"
            ]
        );
    }

    #[test]
    fn requests_and_permissions_convert_both_ways() {
        let permissions: Vec<Permission> = ["read=/a", "write=/b", "net=5432", "net=x.example:443"]
            .iter()
            .map(|t| t.parse().unwrap())
            .collect();
        let request = request_of(&permissions);
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"filesystem":{"read":["/a"],"write":["/b"]},"network":{"tcpPorts":[5432],"hosts":["x.example:443"]}}"#
        );
        assert_eq!(permissions_of(&request), permissions);
    }
}
