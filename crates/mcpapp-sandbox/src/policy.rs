//! The pure policy model: an app's resolved isolation settings and the facts of its launch
//! become the exact rules an app's process applies ([`SandboxPolicy`]), with no I/O, so that the
//! rules a setting yields are tested as text.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use mcpapp_manifest::{AppIsolation, IsolationMode, NetworkAccess, ResourceLimits};
use serde::{Deserialize, Serialize};

/// Folders whose programs and libraries every app may read and execute (those that exist).
pub const SYSTEM_EXECUTE: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Files under `/etc` every app may read: the dynamic loader's cache, time zone, TLS roots,
/// name resolution and the user database (which programs read to learn their user's name).
pub const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/alternatives",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/passwd",
    "/etc/group",
    "/etc/os-release",
    "/etc/mime.types",
];

/// Other paths every app may read: process information (only its own processes' private
/// files, see docs/security.md), the CPU and cgroup facts runtimes size themselves by.
pub const OTHER_READ: &[&str] = &["/proc", "/sys/fs/cgroup", "/sys/devices/system/cpu"];

/// Devices every app may read; `/dev/null` may also be written.
pub const DEVICES_READ: &[&str] = &["/dev/urandom", "/dev/random", "/dev/zero", "/dev/full"];

/// The lowest Landlock ABI that carries everything the default policy needs (ABI 6, Linux
/// 6.12: signal and abstract-socket scoping, on top of TCP ports at 4 and files before).
pub const FULL_ABI: u8 = 6;

/// What a rule lets the app do with a path and everything under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathAccess {
    /// Read files and list folders.
    Read,
    /// Read, and execute programs.
    Execute,
    /// Read, write, create, remove and rename.
    Write,
    /// Read a device (and write it, for `/dev/null`), including its harmless ioctls.
    Device,
}

impl PathAccess {
    fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Execute => "execute",
            Self::Write => "write",
            Self::Device => "device",
        }
    }
}

/// One path rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathRule {
    /// What it allows (first, so that rules sort by kind, then path).
    pub access: PathAccess,
    /// The path (a folder covers everything under it).
    pub path: PathBuf,
}

/// Which TCP ports a rule leaves open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PortRule {
    /// Any port: the kernel is not asked to filter.
    Any,
    /// Only these (none when empty).
    Only(BTreeSet<u16>),
    /// Every port but these.
    AllBut(BTreeSet<u16>),
}

/// Which sockets the syscall filter lets the app create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum InetSockets {
    /// No IPv4 or IPv6 socket.
    None,
    /// TCP only (stream sockets with protocol 0 or TCP).
    Tcp,
    /// Any IPv4 or IPv6 socket, UDP included.
    Any,
}

/// The exact sandbox an app's process applies to itself before it executes the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPolicy {
    /// Refuse to start unless everything applies (`enforce`); else apply what the kernel
    /// supports (`best-effort`).
    pub enforce: bool,
    /// The Landlock ABI the rules are built for (0: no Landlock).
    pub abi: u8,
    /// Path rules; nothing else of the file system is reachable.
    pub paths: Vec<PathRule>,
    /// TCP ports the app may connect to.
    pub connect: PortRule,
    /// TCP ports the app may listen on.
    pub bind: PortRule,
    /// IPv4 and IPv6 sockets the app may create.
    pub inet: InetSockets,
    /// Whether it may create UNIX sockets (connected pairs are always allowed).
    pub unix: bool,
    /// Resource limits (core dumps are always off).
    pub limits: ResourceLimits,
}

/// The facts of one launch that the policy depends on, besides the app's settings.
#[derive(Debug, Clone, Copy)]
pub struct LaunchFacts<'a> {
    /// The app's folder (readable and executable).
    pub app_dir: &'a Path,
    /// The program that will be executed, resolved to an absolute path when it could be.
    pub program: &'a Path,
    /// The app's `HOME` and `TMPDIR` (read and write).
    pub home: &'a Path,
    /// The app's `TMPDIR`.
    pub tmp: &'a Path,
    /// The port of the app's egress proxy, when it has host grants.
    pub proxy_port: Option<u16>,
    /// The gateway's own listening ports, closed to the app unless granted by number.
    pub protected_ports: &'a [u16],
    /// The Landlock ABI the rules are built for.
    pub abi: u8,
}

/// Builds the rules of an app from its settings and launch facts. `isolation.mode` must not be
/// [`IsolationMode::Off`] (an app that is off is not confined).
pub fn compile(isolation: &AppIsolation, facts: &LaunchFacts<'_>) -> SandboxPolicy {
    let mut paths: BTreeSet<PathRule> = BTreeSet::new();
    let mut add = |path: &Path, access: PathAccess| {
        paths.insert(PathRule {
            path: path.to_path_buf(),
            access,
        });
    };
    for dir in SYSTEM_EXECUTE {
        add(Path::new(dir), PathAccess::Execute);
    }
    for path in ETC_READ.iter().chain(OTHER_READ) {
        add(Path::new(path), PathAccess::Read);
    }
    for device in DEVICES_READ {
        add(Path::new(device), PathAccess::Device);
    }
    add(Path::new("/dev/null"), PathAccess::Device);
    add(facts.app_dir, PathAccess::Execute);
    let covered = SYSTEM_EXECUTE
        .iter()
        .map(Path::new)
        .chain(std::iter::once(facts.app_dir))
        .chain(isolation.execute.iter().map(PathBuf::as_path))
        .any(|dir| facts.program.starts_with(dir));
    if !covered && facts.program.is_absolute() {
        add(facts.program, PathAccess::Execute);
    }
    add(facts.home, PathAccess::Write);
    add(facts.tmp, PathAccess::Write);
    for path in &isolation.read {
        add(path, PathAccess::Read);
    }
    for path in &isolation.execute {
        add(path, PathAccess::Execute);
    }
    for path in &isolation.write {
        add(path, PathAccess::Write);
    }

    let protected: BTreeSet<u16> = facts.protected_ports.iter().copied().collect();
    let (connect, bind, inet) = match &isolation.network {
        NetworkAccess::None => (
            PortRule::Only(BTreeSet::new()),
            PortRule::Only(BTreeSet::new()),
            InetSockets::None,
        ),
        NetworkAccess::All => (
            if protected.is_empty() {
                PortRule::Any
            } else {
                PortRule::AllBut(protected)
            },
            PortRule::Any,
            InetSockets::Any,
        ),
        NetworkAccess::Limited { tcp_ports, .. } => {
            let mut open: BTreeSet<u16> = tcp_ports.clone();
            open.extend(facts.proxy_port);
            let inet = if open.is_empty() {
                InetSockets::None
            } else {
                InetSockets::Tcp
            };
            (PortRule::Only(open), PortRule::Only(BTreeSet::new()), inet)
        }
    };
    SandboxPolicy {
        enforce: isolation.mode == IsolationMode::Enforce,
        abi: facts.abi,
        paths: paths.into_iter().collect(),
        connect,
        bind,
        inet,
        unix: isolation.unix_sockets,
        limits: isolation.limits,
    }
}

impl SandboxPolicy {
    /// The rules as text, one per line, for people and snapshot tests.
    pub fn rules_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "mode {} landlock-abi {}",
            if self.enforce {
                "enforce"
            } else {
                "best-effort"
            },
            self.abi
        );
        for rule in &self.paths {
            let _ = writeln!(out, "{:<8} {}", rule.access.as_str(), rule.path.display());
        }
        let ports = |rule: &PortRule| match rule {
            PortRule::Any => "any".to_owned(),
            PortRule::Only(ports) if ports.is_empty() => "none".to_owned(),
            PortRule::Only(ports) => join(ports),
            PortRule::AllBut(ports) => format!("all but {}", join(ports)),
        };
        let _ = writeln!(out, "tcp-connect {}", ports(&self.connect));
        let _ = writeln!(out, "tcp-bind {}", ports(&self.bind));
        let inet = match self.inet {
            InetSockets::None => "none",
            InetSockets::Tcp => "tcp",
            InetSockets::Any => "any",
        };
        let _ = writeln!(
            out,
            "sockets inet {inet} unix {}",
            if self.unix { "yes" } else { "no" }
        );
        let limit = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |v| v.to_string());
        let _ = writeln!(
            out,
            "limits nofile {} as {} nproc {} cpu {} fsize {} core 0",
            self.limits.open_files,
            limit(self.limits.address_space_bytes),
            limit(self.limits.processes),
            limit(self.limits.cpu_seconds),
            limit(self.limits.file_size_bytes),
        );
        out
    }

    /// What this policy needs of the kernel that an ABI below [`FULL_ABI`] lacks, as
    /// sentences naming the feature and the Linux version that brought it.
    pub fn missing_features(&self, seccomp: bool) -> Vec<String> {
        let mut missing = Vec::new();
        if self.abi == 0 {
            missing.push(
                "Landlock (Linux 5.13, enabled in the kernel's LSM list): file-system rules"
                    .to_owned(),
            );
        } else if self.abi < 3 {
            missing.push("Landlock ABI 3 (Linux 6.2): truncation rules".to_owned());
        }
        let ports_matter = !matches!(self.connect, PortRule::Any) && self.inet != InetSockets::None;
        if self.abi < 4 && ports_matter {
            missing.push("Landlock ABI 4 (Linux 6.7): TCP port rules".to_owned());
        }
        if self.abi < FULL_ABI {
            missing.push(
                "Landlock ABI 6 (Linux 6.12): signal and abstract UNIX socket scoping".to_owned(),
            );
        }
        if !seccomp {
            missing.push(
                "seccomp filters (CONFIG_SECCOMP_FILTER): the socket and syscall filter".to_owned(),
            );
        }
        missing
    }
}

fn join(ports: &BTreeSet<u16>) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpapp_manifest::HostPort;

    fn facts<'a>(program: &'a Path, proxy: Option<u16>) -> LaunchFacts<'a> {
        LaunchFacts {
            app_dir: Path::new("/srv/apps/notes"),
            program,
            home: Path::new("/var/lib/mcpapp/apps/notes"),
            tmp: Path::new("/var/lib/mcpapp/apps/notes"),
            proxy_port: proxy,
            protected_ports: &[8787, 40001],
            abi: 7,
        }
    }

    #[test]
    fn the_default_policy_yields_these_rules() {
        let isolation = AppIsolation::new(IsolationMode::Enforce);
        let policy = compile(&isolation, &facts(Path::new("/usr/bin/node"), None));
        expect_test::expect![[r#"
            mode enforce landlock-abi 7
            read     /etc/alternatives
            read     /etc/ca-certificates
            read     /etc/ca-certificates.conf
            read     /etc/gai.conf
            read     /etc/group
            read     /etc/host.conf
            read     /etc/hosts
            read     /etc/ld.so.cache
            read     /etc/ld.so.conf
            read     /etc/ld.so.conf.d
            read     /etc/localtime
            read     /etc/mime.types
            read     /etc/nsswitch.conf
            read     /etc/os-release
            read     /etc/passwd
            read     /etc/pki
            read     /etc/protocols
            read     /etc/resolv.conf
            read     /etc/services
            read     /etc/ssl
            read     /etc/timezone
            read     /proc
            read     /sys/devices/system/cpu
            read     /sys/fs/cgroup
            execute  /bin
            execute  /lib
            execute  /lib32
            execute  /lib64
            execute  /libx32
            execute  /sbin
            execute  /srv/apps/notes
            execute  /usr
            write    /var/lib/mcpapp/apps/notes
            device   /dev/full
            device   /dev/null
            device   /dev/random
            device   /dev/urandom
            device   /dev/zero
            tcp-connect none
            tcp-bind none
            sockets inet none unix no
            limits nofile 4096 as unlimited nproc unlimited cpu unlimited fsize unlimited core 0
        "#]]
        .assert_eq(&policy.rules_text());
        assert!(policy.missing_features(true).is_empty());
    }

    #[test]
    fn grants_add_paths_ports_and_the_proxy() {
        let mut isolation = AppIsolation::new(IsolationMode::BestEffort);
        isolation.read = vec!["/data/notes".into()];
        isolation.write = vec!["/data/out".into()];
        isolation.execute = vec!["/opt/node".into()];
        isolation.network = NetworkAccess::Limited {
            tcp_ports: [5432].into(),
            hosts: [HostPort::parse("api.example.com:443").unwrap()].into(),
        };
        let program = Path::new("/opt/node/bin/node");
        let text = compile(&isolation, &facts(program, Some(41000))).rules_text();
        let interesting: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains("/etc/") && !l.contains("/dev/") && !l.contains("/sys/"))
            .collect();
        expect_test::expect![[r#"
            mode best-effort landlock-abi 7
            read     /data/notes
            read     /proc
            execute  /bin
            execute  /lib
            execute  /lib32
            execute  /lib64
            execute  /libx32
            execute  /opt/node
            execute  /sbin
            execute  /srv/apps/notes
            execute  /usr
            write    /data/out
            write    /var/lib/mcpapp/apps/notes
            tcp-connect 5432,41000
            tcp-bind none
            sockets inet tcp unix no
            limits nofile 4096 as unlimited nproc unlimited cpu unlimited fsize unlimited core 0"#]]
        .assert_eq(&interesting.join("\n"));
    }

    #[test]
    fn a_program_outside_the_executable_folders_gets_a_rule_of_its_own() {
        let isolation = AppIsolation::new(IsolationMode::Enforce);
        let program = Path::new("/work/target/debug/fixture-app");
        let policy = compile(&isolation, &facts(program, None));
        assert!(policy.paths.contains(&PathRule {
            path: program.into(),
            access: PathAccess::Execute
        }));
        let inside = Path::new("/srv/apps/notes/bin/server");
        let policy = compile(&isolation, &facts(inside, None));
        assert!(!policy.paths.iter().any(|r| r.path == inside));
    }

    #[test]
    fn network_all_keeps_the_gateways_ports_closed() {
        let mut isolation = AppIsolation::new(IsolationMode::Enforce);
        isolation.network = NetworkAccess::All;
        isolation.unix_sockets = true;
        let text = compile(&isolation, &facts(Path::new("/usr/bin/node"), None)).rules_text();
        assert!(text.contains("tcp-connect all but 8787,40001\n"), "{text}");
        assert!(text.contains("tcp-bind any\n"), "{text}");
        assert!(text.contains("sockets inet any unix yes\n"), "{text}");
    }

    #[test]
    fn older_kernels_are_named_by_what_they_lack() {
        let mut isolation = AppIsolation::new(IsolationMode::BestEffort);
        isolation.network = NetworkAccess::Limited {
            tcp_ports: [443].into(),
            hosts: BTreeSet::new(),
        };
        let mut f = facts(Path::new("/usr/bin/node"), None);
        f.abi = 4;
        assert_eq!(
            compile(&isolation, &f).missing_features(true),
            ["Landlock ABI 6 (Linux 6.12): signal and abstract UNIX socket scoping"]
        );
        f.abi = 0;
        let missing = compile(&isolation, &f).missing_features(false);
        assert_eq!(missing.len(), 4, "{missing:?}");
        assert!(missing[0].starts_with("Landlock (Linux 5.13"));
    }
}
