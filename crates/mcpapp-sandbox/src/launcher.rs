//! The launcher: the gateway's own executable started again with [`LAUNCHER_ARG`], which
//! confines itself and then executes the app in its place (same process id and group).
//!
//! ```text
//! mcpapp-gateway --mcpapp-sandbox '<policy JSON>' -- PROGRAM ARGS...
//! ```
//!
//! In order: resource limits (core dumps off), every capability dropped (the bounding set
//! emptied and the root exemptions locked off, so that executing a program as root gives no
//! capability back), `no_new_privs`, the Landlock ruleset (paths, TCP ports, signal and
//! abstract-socket scopes), the seccomp filters, a check of `/proc/self/status`, then
//! `execve`. Everything survives `execve` and `fork`, so every descendant of the app carries
//! it. It runs before any thread or runtime exists, so restricting the calling thread
//! restricts the process.
//!
//! A failure before `execve` is one line on stderr starting `mcpapp-sandbox:` and exit status
//! [`EXIT_SANDBOX`]; the supervisor quotes it as the app's last error. A program that cannot
//! be executed gives status 127.
//!
//! [`PROBE_ARG`] instead reports, as one JSON line, the Landlock ABI and whether seccomp
//! filters install, by trying both on itself; the gateway starts it once.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::policy::SandboxPolicy;

/// The first argument that turns the gateway's executable into the launcher of an app.
pub const LAUNCHER_ARG: &str = "--mcpapp-sandbox";

/// The first argument that turns the gateway's executable into the kernel probe.
pub const PROBE_ARG: &str = "--mcpapp-sandbox-probe";

/// The exit status of a launcher that could not confine itself.
pub const EXIT_SANDBOX: u8 = 125;

/// The exit status of a launcher that could not execute the app.
pub const EXIT_EXEC: u8 = 127;

/// What the kernel offers, as the probe found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelSupport {
    /// The Landlock ABI (0: none).
    pub landlock_abi: u8,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
}

/// Runs the launcher or the probe when this process was started as one (its first argument
/// is [`LAUNCHER_ARG`] or [`PROBE_ARG`]), and returns its exit code; otherwise returns `None`
/// at once. Call it first thing in `main`, before any thread starts.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = mcpapp_sandbox::run_launcher_if_requested() {
///         return code;
///     }
///     // ... the program itself ...
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn run_launcher_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    let first = args.next()?;
    if first == PROBE_ARG {
        return Some(probe());
    }
    if first != LAUNCHER_ARG {
        return None;
    }
    Some(match launch(args.collect()) {
        Ok(never) => match never {},
        Err((code, message)) => {
            eprintln!("mcpapp-sandbox: {message}");
            ExitCode::from(code)
        }
    })
}

/// Never constructed: `launch` only returns on failure.
enum Never {}

fn launch(args: Vec<OsString>) -> Result<Never, (u8, String)> {
    let fail = |message: String| (EXIT_SANDBOX, message);
    let mut args = args.into_iter();
    let policy = args
        .next()
        .and_then(|p| p.into_string().ok())
        .ok_or_else(|| fail("no policy given".to_owned()))?;
    let policy: SandboxPolicy =
        serde_json::from_str(&policy).map_err(|e| fail(format!("unreadable policy: {e}")))?;
    if args.next().as_deref() != Some(std::ffi::OsStr::new("--")) {
        return Err(fail("expected -- before the program".to_owned()));
    }
    let program = args
        .next()
        .ok_or_else(|| fail("no program given".to_owned()))?;
    let rest: Vec<OsString> = args.collect();
    imp::confine(&policy).map_err(fail)?;
    Err((EXIT_EXEC, imp::exec(&program, &rest)))
}

fn probe() -> ExitCode {
    let support = imp::probe();
    println!(
        "{}",
        serde_json::to_string(&support).unwrap_or_else(|_| "{}".to_owned())
    );
    ExitCode::SUCCESS
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::OsString;
    use std::os::unix::process::CommandExt;
    use std::path::Path;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
        PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    use rustix::fs::FileType;
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    use rustix::thread::{
        CapabilitiesSecureBits, CapabilitySet, CapabilitySets, capabilities,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
        set_capabilities_secure_bits,
    };

    use super::KernelSupport;
    use crate::policy::{FULL_ABI, PathAccess, PortRule, SandboxPolicy};

    pub(super) fn confine(policy: &SandboxPolicy) -> Result<(), String> {
        limits(policy)?;
        drop_capabilities().map_err(|e| format!("dropping capabilities: {e}"))?;
        rustix::thread::set_no_new_privs(true).map_err(|e| format!("setting no_new_privs: {e}"))?;
        if policy.abi > 0 {
            landlock(policy)?;
        }
        match crate::seccomp::install(policy.inet, policy.unix) {
            Ok(()) => {}
            Err(e) if policy.enforce => return Err(format!("seccomp: {e}")),
            Err(_) => {}
        }
        verify(policy)
    }

    pub(super) fn exec(program: &OsString, args: &[OsString]) -> String {
        // The environment and working folder are the ones the gateway gave the launcher.
        // The launcher becomes the app the supervisor started (same process): it starts no
        // process of its own.
        #[allow(clippy::disallowed_methods)]
        let error = std::process::Command::new(program).args(args).exec();
        format!("cannot execute {}: {error}", Path::new(program).display())
    }

    fn limit(resource: Resource, value: u64) -> Result<(), String> {
        // Only lowered: raising a hard limit needs CAP_SYS_RESOURCE.
        let hard = getrlimit(resource).maximum;
        let value = hard.map_or(value, |hard| value.min(hard));
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )
        .map_err(|e| format!("setting {resource:?} to {value}: {e}"))
    }

    fn limits(policy: &SandboxPolicy) -> Result<(), String> {
        let l = &policy.limits;
        limit(Resource::Core, 0)?;
        limit(Resource::Nofile, l.open_files)?;
        for (resource, value) in [
            (Resource::As, l.address_space_bytes),
            (Resource::Nproc, l.processes),
            (Resource::Cpu, l.cpu_seconds),
            (Resource::Fsize, l.file_size_bytes),
        ] {
            if let Some(value) = value {
                limit(resource, value)?;
            }
        }
        Ok(())
    }

    /// Empties every capability set. With `CAP_SETPCAP` (root, as a rule), the bounding set
    /// is emptied and the securebits that give root its capabilities back on `execve` are set
    /// and locked first.
    fn drop_capabilities() -> rustix::io::Result<()> {
        let held = capabilities(None)?;
        if held.effective.contains(CapabilitySet::SETPCAP) {
            set_capabilities_secure_bits(
                CapabilitiesSecureBits::NO_ROOT
                    | CapabilitiesSecureBits::NO_ROOT_LOCKED
                    | CapabilitiesSecureBits::NO_SETUID_FIXUP
                    | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
                    | CapabilitiesSecureBits::KEEP_CAPS_LOCKED
                    | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
                    | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED,
            )?;
            for (_, capability) in CapabilitySet::all().iter_names() {
                match remove_capability_from_bounding_set(capability) {
                    // A capability this kernel does not know.
                    Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        match clear_ambient_capability_set() {
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(e),
        }
        set_capabilities(
            None,
            CapabilitySets {
                effective: CapabilitySet::empty(),
                permitted: CapabilitySet::empty(),
                inheritable: CapabilitySet::empty(),
            },
        )
    }

    fn abi(level: u8) -> ABI {
        ABI::from(i32::from(level))
    }

    fn rights(access: PathAccess, abi: ABI) -> BitFlags<AccessFs> {
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        match access {
            PathAccess::Read => read,
            PathAccess::Execute => read | AccessFs::Execute,
            // Writable folders may hold programs the app installs there (an npm or pip cache).
            PathAccess::Write => AccessFs::from_all(abi),
            PathAccess::Device => {
                let mut device = AccessFs::ReadFile | AccessFs::WriteFile;
                if abi >= ABI::V5 {
                    device |= AccessFs::IoctlDev;
                }
                device
            }
        }
    }

    fn landlock(policy: &SandboxPolicy) -> Result<(), String> {
        let error = |e: landlock::RulesetError| format!("Landlock: {e}");
        let abi = abi(policy.abi.min(FULL_ABI));
        let level = if policy.enforce {
            CompatLevel::HardRequirement
        } else {
            CompatLevel::BestEffort
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(level)
            .handle_access(AccessFs::from_all(abi))
            .map_err(error)?;
        if abi >= ABI::V4 {
            if policy.connect != PortRule::Any {
                ruleset = ruleset
                    .handle_access(AccessNet::ConnectTcp)
                    .map_err(error)?;
            }
            if policy.bind != PortRule::Any {
                ruleset = ruleset.handle_access(AccessNet::BindTcp).map_err(error)?;
            }
        }
        if abi >= ABI::V6 {
            ruleset = ruleset.scope(Scope::from_all(abi)).map_err(error)?;
        }
        let mut created = ruleset.create().map_err(error)?;
        let file_rights = AccessFs::ReadFile
            | AccessFs::WriteFile
            | AccessFs::Execute
            | AccessFs::Truncate
            | AccessFs::IoctlDev;
        for rule in &policy.paths {
            // A path that is gone, or that this user cannot reach, grants nothing. The kind
            // of file comes from the descriptor: one lookup of the path, not two.
            let Ok(fd) = PathFd::new(&rule.path) else {
                continue;
            };
            let Ok(stat) = rustix::fs::fstat(&fd) else {
                continue;
            };
            let mut access = rights(rule.access, abi) & AccessFs::from_all(abi);
            if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
                access &= file_rights;
            }
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| format!("Landlock rule for {}: {e}", rule.path.display()))?;
        }
        if abi >= ABI::V4 {
            for (rule, access) in [
                (&policy.connect, AccessNet::ConnectTcp),
                (&policy.bind, AccessNet::BindTcp),
            ] {
                let ports: Box<dyn Iterator<Item = u16>> = match rule {
                    PortRule::Any => Box::new(std::iter::empty()),
                    PortRule::Only(ports) => Box::new(ports.iter().copied()),
                    PortRule::AllBut(closed) => {
                        Box::new((1..=u16::MAX).filter(move |p| !closed.contains(p)))
                    }
                };
                for port in ports {
                    created = created
                        .add_rule(NetPort::new(port, access))
                        .map_err(error)?;
                }
            }
        }
        let status = created.restrict_self().map_err(error)?;
        if policy.enforce && status.ruleset != RulesetStatus::FullyEnforced {
            return Err(format!(
                "Landlock is not fully enforced ({:?}); isolation mode enforce needs Landlock ABI {FULL_ABI}",
                status.ruleset
            ));
        }
        Ok(())
    }

    /// The launcher's own status as the kernel reports it, checked before the app runs.
    fn verify(policy: &SandboxPolicy) -> Result<(), String> {
        let status = std::fs::read_to_string("/proc/self/status")
            .map_err(|e| format!("reading /proc/self/status: {e}"))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_owned()
        };
        let mut problems = Vec::new();
        if !field("CapEff:").trim_start_matches('0').is_empty() {
            problems.push(format!("CapEff is {}", field("CapEff:")));
        }
        if !field("CapPrm:").trim_start_matches('0').is_empty() {
            problems.push(format!("CapPrm is {}", field("CapPrm:")));
        }
        let root = rustix::process::geteuid().is_root() || rustix::process::getuid().is_root();
        if root && !field("CapBnd:").trim_start_matches('0').is_empty() {
            problems.push(format!(
                "running as root with CapBnd {}: a program it executes would get capabilities back",
                field("CapBnd:")
            ));
        }
        if field("NoNewPrivs:") != "1" {
            problems.push("NoNewPrivs is not set".to_owned());
        }
        if policy.enforce && field("Seccomp:") != "2" {
            problems.push(format!("Seccomp is {}, not 2 (filter)", field("Seccomp:")));
        }
        // Capabilities and no_new_privs hold in every mode (every kernel has them); only the
        // seccomp filter may be missing under best-effort.
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the sandbox did not take hold: {}",
                problems.join("; ")
            ))
        }
    }

    pub(super) fn probe() -> KernelSupport {
        let seccomp = crate::seccomp::install(crate::policy::InetSockets::Any, true).is_ok();
        let landlock_abi = Ruleset::default()
            .handle_access(AccessFs::Execute)
            .and_then(Ruleset::create)
            .and_then(landlock::RulesetCreated::restrict_self)
            .map_or(0, |status| {
                ABI::from(status.landlock).to_string().parse().unwrap_or(0)
            });
        KernelSupport {
            landlock_abi,
            seccomp,
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::ffi::OsString;

    use super::KernelSupport;
    use crate::policy::SandboxPolicy;

    pub(super) fn confine(policy: &SandboxPolicy) -> Result<(), String> {
        if policy.enforce {
            Err("this platform has no sandbox (Linux only)".to_owned())
        } else {
            Ok(())
        }
    }

    pub(super) fn exec(program: &OsString, args: &[OsString]) -> String {
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // As above: the launcher becomes the app.
            #[allow(clippy::disallowed_methods)]
            let error = std::process::Command::new(program).args(args).exec();
            format!("cannot execute {}: {error}", program.to_string_lossy())
        }
        #[cfg(not(unix))]
        {
            let _ = args;
            format!(
                "cannot execute {}: not supported here",
                program.to_string_lossy()
            )
        }
    }

    pub(super) fn probe() -> KernelSupport {
        KernelSupport {
            landlock_abi: 0,
            seccomp: false,
        }
    }
}
