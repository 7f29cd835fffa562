//! What sandbox an app actually runs in, for `/apps/{id}`, the CLI's `apps show` and the
//! page: the mode, whether it is fully applied, the kernel's Landlock ABI, the rules, the
//! network, the limits, and what is missing.

use std::path::PathBuf;

use mcpapp_manifest::{IsolationMode, NetworkAccess, ResourceLimits};
use serde::Serialize;

use crate::policy::{InetSockets, PathAccess, PortRule, SandboxPolicy};

/// How much of the policy applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxStatus {
    /// Every rule of the policy is enforced by the kernel.
    Enforced,
    /// `best-effort` on a kernel that lacks part of what the policy needs (see `missing`).
    Partial,
    /// No sandbox: isolation is off, unavailable, or the app is not a child of the gateway.
    None,
}

/// One path the app may reach, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathReport {
    /// The path.
    pub path: PathBuf,
    /// `read`, `execute`, `write` or `device`.
    pub access: PathAccess,
}

/// The sandbox of one app's current (or last) start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SandboxReport {
    /// The configured mode.
    pub mode: IsolationMode,
    /// How much of it applies.
    pub status: SandboxStatus,
    /// The Landlock ABI the kernel offers (0: none), when it was probed.
    pub landlock_abi: Option<u8>,
    /// The Landlock ABI the rules were built for.
    pub rules_abi: Option<u8>,
    /// Paths the app may reach (nothing else of the file system).
    pub paths: Vec<PathReport>,
    /// The network it was granted.
    pub network: NetworkAccess,
    /// TCP ports it may connect to: `any`, a list, or `all but` the gateway's own.
    pub tcp_connect: String,
    /// Which IPv4/IPv6 sockets it may create: `none`, `tcp` or `any`.
    pub inet_sockets: &'static str,
    /// Whether it may create UNIX sockets.
    pub unix_sockets: bool,
    /// The egress proxy it reaches its granted hosts through (`HTTPS_PROXY`).
    pub proxy: Option<String>,
    /// Whether a seccomp filter is installed.
    pub seccomp: bool,
    /// Landlock scopes: `signal` (it signals only its own processes) and
    /// `abstract-unix-socket`.
    pub scopes: Vec<&'static str>,
    /// Capabilities it keeps (always none when sandboxed).
    pub capabilities: &'static str,
    /// Whether `no_new_privs` is set (setuid programs cannot raise its rights).
    pub no_new_privs: bool,
    /// Resource limits (core dumps are always off when sandboxed).
    pub limits: Option<ResourceLimits>,
    /// Its `HOME` (and `TMPDIR`'s parent) under the gateway's state directory.
    pub home: Option<PathBuf>,
    /// Its `TMPDIR`.
    pub tmpdir: Option<PathBuf>,
    /// What the policy needs and the kernel lacks (empty when enforced).
    pub missing: Vec<String>,
    /// Why there is no sandbox, when there is none.
    pub note: Option<String>,
}

impl SandboxReport {
    /// A report of no sandbox, saying why.
    pub fn none(mode: IsolationMode, note: impl Into<String>) -> Self {
        Self {
            mode,
            status: SandboxStatus::None,
            landlock_abi: None,
            rules_abi: None,
            paths: Vec::new(),
            network: NetworkAccess::All,
            tcp_connect: "any".to_owned(),
            inet_sockets: "any",
            unix_sockets: true,
            proxy: None,
            seccomp: false,
            scopes: Vec::new(),
            capabilities: "the gateway's",
            no_new_privs: false,
            limits: None,
            home: None,
            tmpdir: None,
            missing: Vec::new(),
            note: Some(note.into()),
        }
    }

    /// The report of `policy` applied on a kernel with Landlock ABI `kernel_abi` and
    /// (or without) seccomp.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn applied(
        mode: IsolationMode,
        policy: &SandboxPolicy,
        network: &NetworkAccess,
        kernel_abi: u8,
        seccomp: bool,
        proxy: Option<String>,
        home: PathBuf,
        tmpdir: PathBuf,
    ) -> Self {
        let missing = policy.missing_features(seccomp);
        let tcp_connect = match &policy.connect {
            _ if policy.abi < 4 && policy.inet != InetSockets::None => "any".to_owned(),
            PortRule::Any => "any".to_owned(),
            PortRule::Only(ports) if ports.is_empty() => "none".to_owned(),
            PortRule::Only(ports) => ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(","),
            PortRule::AllBut(ports) => format!(
                "all but {}",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        Self {
            mode,
            status: if missing.is_empty() {
                SandboxStatus::Enforced
            } else {
                SandboxStatus::Partial
            },
            landlock_abi: Some(kernel_abi),
            rules_abi: Some(policy.abi),
            paths: if policy.abi == 0 {
                Vec::new()
            } else {
                policy
                    .paths
                    .iter()
                    .map(|rule| PathReport {
                        path: rule.path.clone(),
                        access: rule.access,
                    })
                    .collect()
            },
            network: network.clone(),
            tcp_connect,
            inet_sockets: match (seccomp, policy.inet) {
                (false, _) | (_, InetSockets::Any) => "any",
                (true, InetSockets::Tcp) => "tcp",
                (true, InetSockets::None) => "none",
            },
            unix_sockets: policy.unix || !seccomp,
            proxy,
            seccomp,
            scopes: if policy.abi >= 6 {
                vec!["signal", "abstract-unix-socket"]
            } else {
                Vec::new()
            },
            capabilities: "none",
            no_new_privs: true,
            limits: Some(policy.limits),
            home: Some(home),
            tmpdir: Some(tmpdir),
            missing,
            note: None,
        }
    }
}
