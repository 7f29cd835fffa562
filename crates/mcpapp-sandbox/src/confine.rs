//! Confining an app between `fork` and `exec`: [`Confinement`] is everything the child must
//! apply to itself, prepared in the gateway (the Landlock ruleset as a file descriptor, the
//! seccomp programs, the resource limits as numbers), and [`Confinement::install`] hooks it
//! into the app's `Command` so that the forked child applies it just before it executes the
//! app.
//!
//! In the child, in order: resource limits (core dumps off), every capability dropped (the
//! bounding set emptied and the root exemptions locked off, so that executing a program as
//! root gives no capability back), `no_new_privs`, the Landlock ruleset (paths, TCP ports,
//! signal and abstract-socket scopes), the seccomp filters, a check of `/proc/self/status`,
//! then std's `execve`. Everything survives `execve` and `fork`, so every descendant of the
//! app carries it, and the app keeps the process id and group the supervisor knows.
//!
//! # The one exception to `unsafe_code`
//!
//! This file is the workspace's only `unsafe` (a tidy test keeps it so), for two calls:
//! registering the hook (`CommandExt::pre_exec`) and `landlock_restrict_self`, which no safe
//! crate offers for a ruleset built in another process image. Why not a helper program that
//! confines itself and then executes the app (which needs no `unsafe`)? That was the first
//! design: a second `execve` of the 34 MB gateway per start cost 2.3–2.7 ms of CPU (the
//! dynamic loader, the address space, the filter compiled again), 1.6× the start-up of 50
//! small apps (docs/performance.md). Here the work moves to the gateway, once per start, and
//! the child only makes system calls.
//!
//! What makes the hook sound: after `fork` in a multi-threaded process, the child may only
//! call async-signal-safe functions, so it must not allocate, lock, or touch state another
//! thread may have held. Every value it reads was computed before the fork and is only read;
//! every call it makes is a system call through `rustix`, `libc` or `seccompiler` with
//! arguments on the stack (checked: none of them allocates); `/proc/self/status` is read into
//! a stack buffer and parsed by slicing. A failure is written to a pipe as a step number and
//! an `errno` (five bytes, one `write`) for the gateway to put into words.

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use rustix::fs::FileType;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use rustix::thread::{
    CapabilitiesSecureBits, CapabilitySet, CapabilitySets, capabilities,
    clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    set_capabilities_secure_bits,
};
use seccompiler::BpfProgram;

use crate::policy::{FULL_ABI, PathAccess, PortRule, SandboxPolicy};

/// Everything a child applies to itself before it executes the app, prepared in the gateway.
#[derive(Debug)]
pub struct Confinement {
    /// `(resource, value)`, already lowered to the hard limits (which the child shares).
    limits: Vec<(Resource, u64)>,
    /// Whether the gateway holds `CAP_SETPCAP` (root, as a rule): then the child empties the
    /// bounding set and locks the securebits before it drops the rest.
    bounding: bool,
    /// The Landlock ruleset, rules added; `None` without Landlock (best-effort only).
    ruleset: Option<OwnedFd>,
    /// The seccomp programs, in order.
    programs: Vec<BpfProgram>,
    /// Whether a seccomp filter that does not install is a failure (`enforce`).
    enforce: bool,
    /// Whether the gateway runs as root: the bounding set must then be empty.
    root: bool,
}

/// The steps of the child, as numbers on the failure pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Step {
    Limits = 1,
    Capabilities,
    NoNewPrivs,
    Landlock,
    Seccomp,
    ReadStatus,
    CapEffective,
    CapPermitted,
    CapBounding,
    NoNewPrivsUnset,
    SeccompUnset,
}

impl Step {
    const ALL: [Self; 11] = [
        Self::Limits,
        Self::Capabilities,
        Self::NoNewPrivs,
        Self::Landlock,
        Self::Seccomp,
        Self::ReadStatus,
        Self::CapEffective,
        Self::CapPermitted,
        Self::CapBounding,
        Self::NoNewPrivsUnset,
        Self::SeccompUnset,
    ];

    fn describe(self) -> &'static str {
        match self {
            Self::Limits => "setting the resource limits",
            Self::Capabilities => "dropping capabilities",
            Self::NoNewPrivs => "setting no_new_privs",
            Self::Landlock => "applying the Landlock ruleset",
            Self::Seccomp => "installing the seccomp filter",
            Self::ReadStatus => "reading /proc/self/status",
            Self::CapEffective => "the sandbox did not take hold: CapEff is not 0",
            Self::CapPermitted => "the sandbox did not take hold: CapPrm is not 0",
            Self::CapBounding => {
                "the sandbox did not take hold: running as root with a bounding set, a program it executes would get capabilities back"
            }
            Self::NoNewPrivsUnset => "the sandbox did not take hold: NoNewPrivs is not set",
            Self::SeccompUnset => "the sandbox did not take hold: Seccomp is not 2 (filter)",
        }
    }

    /// Whether the step reports an `errno` (the checks of the status do not).
    fn has_errno(self) -> bool {
        matches!(
            self,
            Self::Limits
                | Self::Capabilities
                | Self::NoNewPrivs
                | Self::Landlock
                | Self::Seccomp
                | Self::ReadStatus
        )
    }
}

/// A failure in the child: the step and the `errno` (0 for a check).
#[derive(Debug, Clone, Copy)]
struct Failure {
    step: Step,
    errno: i32,
}

impl Failure {
    fn of(step: Step, errno: rustix::io::Errno) -> Self {
        Self {
            step,
            errno: errno.raw_os_error(),
        }
    }

    fn check(step: Step) -> Self {
        Self { step, errno: 0 }
    }
}

impl Confinement {
    /// Prepares the confinement of `policy`: the limits, the Landlock ruleset (opening each
    /// path once), the seccomp programs.
    ///
    /// # Errors
    /// A sentence naming what could not be prepared (under `enforce`, anything the kernel
    /// does not support).
    pub(crate) fn prepare(policy: &SandboxPolicy) -> Result<Self, String> {
        let ruleset = if policy.abi > 0 {
            landlock_ruleset(policy)?
        } else {
            None
        };
        let programs = match crate::seccomp::programs(policy.inet, policy.unix) {
            Ok(programs) => programs,
            Err(e) if policy.enforce => return Err(format!("building the seccomp filter: {e}")),
            Err(_) => Vec::new(),
        };
        let held = capabilities(None).map_err(|e| format!("reading capabilities: {e}"))?;
        Ok(Self {
            limits: limits(policy),
            bounding: held.effective.contains(CapabilitySet::SETPCAP),
            ruleset,
            programs,
            enforce: policy.enforce,
            root: rustix::process::geteuid().is_root() || rustix::process::getuid().is_root(),
        })
    }

    /// Hooks the confinement into `command`: the child it forks applies it just before it
    /// executes the program. Keep the returned [`Hook`] until `spawn` returns, to explain a
    /// failure.
    ///
    /// # Errors
    /// The I/O error when the failure pipe cannot be made.
    pub fn install(self: &Arc<Self>, command: &mut std::process::Command) -> io::Result<Hook> {
        let (reader, writer) = io::pipe()?;
        rustix::io::ioctl_fionbio(&reader, true)?;
        let confinement = Arc::clone(self);
        let hook = move || {
            confinement.apply().map_err(|failure| {
                let [a, b, c, d] = failure.errno.to_le_bytes();
                // One write of five bytes to a pipe: all of it or nothing. Nothing to do if it
                // fails; the error below still stops the start.
                let _ = rustix::io::write(&writer, &[failure.step as u8, a, b, c, d]);
                io::Error::from_raw_os_error(if failure.errno == 0 {
                    libc::EPERM
                } else {
                    failure.errno
                })
            })
        };
        // SAFETY: `pre_exec` asks that the hook only do what is sound in a forked child of a
        // multi-threaded process. `apply` makes system calls with values computed before the
        // fork and buffers on its stack; it allocates nothing, takes no lock and reads no
        // state another thread could be changing (see the module's documentation). The
        // failure path writes to a pipe and builds an `io::Error` from a number, which does
        // not allocate either.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(hook);
        }
        Ok(Hook { reader })
    }

    /// Runs in the child: every step, in order.
    fn apply(&self) -> Result<(), Failure> {
        for (resource, value) in &self.limits {
            let limit = Rlimit {
                current: Some(*value),
                maximum: Some(*value),
            };
            setrlimit(*resource, limit).map_err(|e| Failure::of(Step::Limits, e))?;
        }
        drop_capabilities(self.bounding).map_err(|e| Failure::of(Step::Capabilities, e))?;
        rustix::thread::set_no_new_privs(true).map_err(|e| Failure::of(Step::NoNewPrivs, e))?;
        if let Some(ruleset) = &self.ruleset {
            restrict_self(ruleset).map_err(|e| Failure::of(Step::Landlock, e))?;
        }
        for program in &self.programs {
            if let Err(e) = seccompiler::apply_filter(program) {
                if !self.enforce {
                    break;
                }
                let errno = match e {
                    seccompiler::Error::Seccomp(e) | seccompiler::Error::Prctl(e) => {
                        e.raw_os_error().unwrap_or(libc::EINVAL)
                    }
                    _ => libc::EINVAL,
                };
                return Err(Failure {
                    step: Step::Seccomp,
                    errno,
                });
            }
        }
        self.verify()
    }

    /// The child's status as the kernel reports it, checked before the app runs.
    fn verify(&self) -> Result<(), Failure> {
        let mut buffer = [0_u8; 8192];
        let status = read_status(&mut buffer).map_err(|e| Failure::of(Step::ReadStatus, e))?;
        check_status(status, self.root, self.enforce).map_err(Failure::check)
    }
}

/// Keeps the failure pipe of one start; explains a failed `spawn`.
#[derive(Debug)]
pub struct Hook {
    reader: io::PipeReader,
}

impl Hook {
    /// `error` (from `spawn`) in words when the sandbox caused it, else `error` itself (a
    /// program that could not be executed, for one).
    pub fn explain(mut self, error: io::Error) -> io::Error {
        let mut bytes = [0_u8; 5];
        // The child wrote before it exited, and `spawn` returns only after that; the read
        // does not block (and finds nothing when the sandbox was not the cause).
        if !matches!(self.reader.read(&mut bytes), Ok(5)) {
            return error;
        }
        let Some(step) = Step::ALL.into_iter().find(|s| *s as u8 == bytes[0]) else {
            return error;
        };
        let errno = i32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
        let message = if step.has_errno() {
            format!(
                "mcpapp-sandbox: {}: {}",
                step.describe(),
                io::Error::from_raw_os_error(errno)
            )
        } else {
            format!("mcpapp-sandbox: {}", step.describe())
        };
        io::Error::new(error.kind(), message)
    }
}

/// Reads `/proc/self/status` into `buffer` and returns what it holds.
fn read_status(buffer: &mut [u8]) -> rustix::io::Result<&[u8]> {
    let fd = rustix::fs::open(
        c"/proc/self/status",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut filled = 0;
    while filled < buffer.len() {
        let Some(rest) = buffer.get_mut(filled..) else {
            break;
        };
        match rustix::io::read(&fd, rest)? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(buffer.get(..filled).unwrap_or_default())
}

/// The value of a `Name:` line of a status file.
fn field<'a>(status: &'a [u8], name: &[u8]) -> &'a [u8] {
    status
        .split(|b| *b == b'\n')
        .find_map(|line| line.strip_prefix(name))
        .map(<[u8]>::trim_ascii)
        .unwrap_or_default()
}

/// A capability mask with no bit set (and present: an absent field is not a proof).
fn empty_mask(value: &[u8]) -> bool {
    !value.is_empty() && value.iter().all(|b| *b == b'0')
}

/// Checks what the kernel reports after the steps. Capabilities and `no_new_privs` hold in
/// every mode (every kernel has them); only the seccomp filter may be missing under
/// best-effort.
fn check_status(status: &[u8], root: bool, enforce: bool) -> Result<(), Step> {
    if !empty_mask(field(status, b"CapEff:")) {
        return Err(Step::CapEffective);
    }
    if !empty_mask(field(status, b"CapPrm:")) {
        return Err(Step::CapPermitted);
    }
    if root && !empty_mask(field(status, b"CapBnd:")) {
        return Err(Step::CapBounding);
    }
    if field(status, b"NoNewPrivs:") != b"1" {
        return Err(Step::NoNewPrivsUnset);
    }
    if enforce && field(status, b"Seccomp:") != b"2" {
        return Err(Step::SeccompUnset);
    }
    Ok(())
}

/// `landlock_restrict_self(ruleset, 0)` on the calling thread (the child's only one).
fn restrict_self(ruleset: &OwnedFd) -> rustix::io::Result<()> {
    // SAFETY: a system call with an open descriptor and a zero flag word; it reads and
    // writes no memory of ours.
    #[allow(unsafe_code)]
    let result = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            ruleset.as_fd().as_raw_fd(),
            0_u32,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(
            rustix::io::Errno::from_io_error(&io::Error::last_os_error())
                .unwrap_or(rustix::io::Errno::INVAL),
        )
    }
}

/// The limits to set, each lowered to the hard limit: raising a hard limit needs
/// `CAP_SYS_RESOURCE`.
fn limits(policy: &SandboxPolicy) -> Vec<(Resource, u64)> {
    let l = &policy.limits;
    [
        (Resource::Core, Some(0)),
        (Resource::Nofile, Some(l.open_files)),
        (Resource::As, l.address_space_bytes),
        (Resource::Nproc, l.processes),
        (Resource::Cpu, l.cpu_seconds),
        (Resource::Fsize, l.file_size_bytes),
    ]
    .into_iter()
    .filter_map(|(resource, value)| {
        let value = value?;
        let hard = getrlimit(resource).maximum;
        Some((resource, hard.map_or(value, |hard| value.min(hard))))
    })
    .collect()
}

/// Empties every capability set. With `CAP_SETPCAP` (`bounding`), the bounding set is
/// emptied and the securebits that give root its capabilities back on `execve` are set and
/// locked first.
fn drop_capabilities(bounding: bool) -> rustix::io::Result<()> {
    if bounding {
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

/// The Landlock ruleset of `policy`, rules added, as a descriptor for the child to apply;
/// `None` when this kernel has no Landlock (only possible under best-effort).
fn landlock_ruleset(policy: &SandboxPolicy) -> Result<Option<OwnedFd>, String> {
    let error = |e: landlock::RulesetError| format!("Landlock: {e}");
    let abi = abi(policy.abi.min(FULL_ABI));
    // Under enforce, anything this kernel does not support is an error here, so a ruleset
    // that is created is enforced in full.
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
        // A path that is gone, or that this user cannot reach, grants nothing. The kind of
        // file comes from the descriptor: one lookup of the path, not two.
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
    Ok(created.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tnode\nUmask:\t0022\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n";

    #[test]
    fn a_confined_status_passes_and_each_gap_is_named() {
        assert_eq!(check_status(STATUS.as_bytes(), true, true), Ok(()));
        let with = |from: &str, to: &str| STATUS.replace(from, to);
        for (status, root, enforce, step) in [
            (
                with("CapEff:\t0000000000000000", "CapEff:\t0000000000000400"),
                false,
                true,
                Step::CapEffective,
            ),
            (
                with("CapPrm:\t0000000000000000", "CapPrm:\t000001ffffffffff"),
                false,
                true,
                Step::CapPermitted,
            ),
            (
                with("CapBnd:\t0000000000000000", "CapBnd:\t000001ffffffffff"),
                true,
                true,
                Step::CapBounding,
            ),
            (
                with("NoNewPrivs:\t1", "NoNewPrivs:\t0"),
                false,
                false,
                Step::NoNewPrivsUnset,
            ),
            (
                with("Seccomp:\t2\n", "Seccomp:\t0\n"),
                false,
                true,
                Step::SeccompUnset,
            ),
            // A field the kernel did not print proves nothing.
            (
                with("CapEff:\t0000000000000000\n", ""),
                false,
                true,
                Step::CapEffective,
            ),
        ] {
            assert_eq!(check_status(status.as_bytes(), root, enforce), Err(step));
        }
        // Not root: a bounding set may stay; best-effort: a filter may be missing.
        let relaxed = with("CapBnd:\t0000000000000000", "CapBnd:\t000001ffffffffff")
            .replace("Seccomp:\t2\n", "Seccomp:\t0\n");
        assert_eq!(check_status(relaxed.as_bytes(), false, false), Ok(()));
    }

    fn nothing() -> Confinement {
        Confinement {
            limits: Vec::new(),
            bounding: false,
            ruleset: None,
            programs: Vec::new(),
            enforce: false,
            root: false,
        }
    }

    #[allow(clippy::disallowed_methods)]
    fn shell(script: &str) -> std::process::Command {
        let mut command = std::process::Command::new("/bin/sh");
        command.arg("-c").arg(script);
        command
    }

    #[test]
    fn the_child_sets_its_limits_and_drops_its_capabilities_before_the_program_runs() {
        let confinement = Arc::new(Confinement {
            limits: vec![(Resource::Core, 0), (Resource::Nofile, 64)],
            ..nothing()
        });
        let mut command =
            shell("ulimit -n; ulimit -c; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status");
        let _hook = confinement.install(&mut command).unwrap();
        let output = command.output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "64\n0\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n"
        );
    }

    #[test]
    fn a_step_that_fails_in_the_child_is_named_and_the_program_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        // More open files than the kernel allows any process (fs.nr_open): refused even to
        // root.
        let confinement = Arc::new(Confinement {
            limits: vec![(Resource::Nofile, 1 << 40)],
            ..nothing()
        });
        let mut command = shell(&format!("touch {}", marker.display()));
        let hook = confinement.install(&mut command).unwrap();
        let error = command.spawn().map(|_| ()).unwrap_err();
        let text = hook.explain(error).to_string();
        assert!(
            text.starts_with(
                "mcpapp-sandbox: setting the resource limits: Operation not permitted"
            ),
            "{text}"
        );
        assert!(!marker.exists());
    }

    #[test]
    fn a_program_that_cannot_be_executed_keeps_its_own_error() {
        let dir = tempfile::tempdir().unwrap();
        #[allow(clippy::disallowed_methods)]
        let mut command = std::process::Command::new(dir.path().join("missing"));
        let hook = Arc::new(nothing()).install(&mut command).unwrap();
        let error = command.spawn().map(|_| ()).unwrap_err();
        let error = hook.explain(error);
        assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
        assert!(!error.to_string().contains("mcpapp-sandbox"), "{error}");
    }

    #[test]
    fn every_step_has_its_own_number() {
        for (i, step) in Step::ALL.iter().enumerate() {
            assert_eq!(*step as usize, i + 1);
            assert!(!step.describe().is_empty());
        }
    }
}
