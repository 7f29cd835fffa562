//! What an app's process applies to itself before it executes the app: [`Confinement`] is
//! prepared in the gateway (the Landlock ruleset as a file descriptor, the seccomp programs,
//! the resource limits as numbers), and [`Confinement::spawn`] starts the app with a child
//! that applies it (`spawn.rs`).
//!
//! In the child, in order: resource limits (core dumps off), every capability dropped (the
//! bounding set emptied and the root exemptions locked off, so that executing a program as
//! root gives no capability back), `no_new_privs`, the Landlock ruleset (paths, TCP ports,
//! signal and abstract-socket scopes), the seccomp filters, a check of `/proc/self/status`,
//! then `execve`. Everything survives `execve` and `fork`, so every descendant of the app
//! carries it, and the app keeps the process id and group the supervisor knows.
//!
//! # `unsafe`
//!
//! This file and `spawn.rs` are the workspace's only `unsafe` (a tidy test keeps it so).
//! Here: `landlock_restrict_self`, which no safe crate offers for a ruleset built in another
//! thread. Why not a helper program that confines itself and then executes the app, which
//! needs no `unsafe`? That was the first design: a second `execve` of the 34 MB gateway per
//! start cost 2.3–2.7 ms of CPU, 1.6× the start-up of 50 small apps (docs/performance.md).
//!
//! [`Confinement::apply`] runs in a child that shares the gateway's memory, so it must not
//! allocate, lock, or touch state another thread may change: every value it reads was
//! computed before and is only read; every call is a system call through `rustix`, `libc` or
//! `seccompiler` with arguments on the stack (checked: none of them allocates);
//! `/proc/self/status` is read into a stack buffer and parsed by slicing.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

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
pub(crate) enum Step {
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
    /// Signals, process group, standard streams.
    Setup,
    /// The working folder.
    Folder,
    /// `execve` of the app.
    Exec,
}

impl Step {
    const ALL: [Self; 14] = [
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
        Self::Setup,
        Self::Folder,
        Self::Exec,
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
            Self::Setup => "setting up the app's process (signals, process group, streams)",
            Self::Folder => "entering the app's working folder",
            Self::Exec => "executing the app",
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
                | Self::Setup
                | Self::Folder
                | Self::Exec
        )
    }
}

/// A failure in the child: the step and the `errno` (0 for a check).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failure {
    pub(crate) step: Step,
    pub(crate) errno: i32,
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

    /// Starts `request` confined: a child that sets up its streams, folder and process
    /// group, applies this confinement and executes the program (see `spawn.rs`). Must be
    /// called within a Tokio runtime.
    ///
    /// # Errors
    /// The I/O error of starting it. When a step in the child failed, an error naming it
    /// (`mcpapp-sandbox: …` for the sandbox's own steps); a program that cannot be executed
    /// keeps the kind of its error (`NotFound`, `PermissionDenied`).
    pub fn spawn(&self, request: &crate::SpawnRequest<'_>) -> io::Result<crate::ConfinedChild> {
        crate::spawn::spawn(self, request)
    }

    /// Runs in the child: every step, in order.
    pub(crate) fn apply(&self) -> Result<(), Failure> {
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

/// The error of a start whose child reported `bytes` (step, `errno`) on the failure pipe.
pub(crate) fn describe_failure(bytes: [u8; 5]) -> io::Error {
    let errno = i32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
    let Some(step) = Step::ALL.into_iter().find(|s| *s as u8 == bytes[0]) else {
        return io::Error::other("the app's process failed before it started");
    };
    let cause = io::Error::from_raw_os_error(errno);
    match step {
        // As std reports it: the kind of the error tells a missing program from the rest.
        Step::Exec => cause,
        Step::Folder => io::Error::new(cause.kind(), format!("{}: {cause}", step.describe())),
        step if step.has_errno() => io::Error::new(
            cause.kind(),
            format!("mcpapp-sandbox: {}: {cause}", step.describe()),
        ),
        step => io::Error::other(format!("mcpapp-sandbox: {}", step.describe())),
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

    fn shell(script: &str) -> [std::ffi::OsString; 2] {
        ["-c".into(), script.into()]
    }

    fn request<'a>(
        args: &'a [std::ffi::OsString],
        env: &'a [(std::ffi::OsString, std::ffi::OsString)],
        cwd: &'a std::path::Path,
    ) -> crate::SpawnRequest<'a> {
        crate::SpawnRequest {
            program: std::path::Path::new("/bin/sh"),
            args,
            env,
            cwd,
        }
    }

    async fn read_all(pipe: Option<tokio::net::unix::pipe::Receiver>) -> String {
        use tokio::io::AsyncReadExt;
        let mut text = String::new();
        pipe.unwrap().read_to_string(&mut text).await.unwrap();
        text
    }

    #[tokio::test]
    async fn the_child_sets_its_limits_and_drops_its_capabilities_before_the_program_runs() {
        let confinement = Confinement {
            limits: vec![(Resource::Core, 0), (Resource::Nofile, 64)],
            ..nothing()
        };
        // The test process ignores SIGPIPE (as every Rust program does) and blocks every
        // signal around the start: the app gets neither.
        let args = shell(
            "ulimit -n; ulimit -c; grep -E '^(SigBlk|SigIgn|CapEff|NoNewPrivs):' /proc/self/status",
        );
        let mut child = confinement
            .spawn(&request(&args, &[], std::path::Path::new("/")))
            .unwrap();
        let out = read_all(child.stdout.take()).await;
        assert!(child.wait().await.unwrap().success());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..3],
            ["64", "0", "SigBlk:\t0000000000000000"],
            "{out}"
        );
        // SIGPIPE (bit 12) is back to its default; the C library's own signals (32, 33), which
        // it does not let a program change and sets up itself in every program, may stay.
        let ignored = u64::from_str_radix(lines[3].trim_start_matches("SigIgn:\t"), 16).unwrap();
        assert_eq!(ignored & !(0b11 << 31), 0, "{out}");
        assert_eq!(lines[4..], ["CapEff:\t0000000000000000", "NoNewPrivs:\t1"]);
    }

    #[tokio::test]
    async fn the_child_gets_its_streams_folder_environment_and_process_group() {
        use tokio::io::AsyncWriteExt;
        let dir = tempfile::tempdir().unwrap();
        let args = shell(
            "read line; echo \"got $line\"; echo oops >&2; pwd; echo \"$GREETING\"; \
             cut -d' ' -f5 /proc/$$/stat; env | grep -cv -e '^PWD=' -e '^SHLVL=' -e '^_='",
        );
        let env = [("GREETING".into(), "hello there".into())];
        let mut child = nothing().spawn(&request(&args, &env, dir.path())).unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"ping\n").await.unwrap();
        drop(stdin);
        let (out, err) = tokio::join!(read_all(child.stdout.take()), read_all(child.stderr.take()));
        let status = child.wait().await.unwrap();
        assert!(status.success(), "{status:?} {err}");
        let folder = dir.path().canonicalize().unwrap();
        // Nothing but the one variable it was given (a shell adds PWD, SHLVL or `_`).
        assert_eq!(
            out,
            format!(
                "got ping\n{}\nhello there\n{}\n1\n",
                folder.display(),
                child.id()
            )
        );
        assert_eq!(err, "oops\n");
        // Reaped once; asking again answers the same.
        assert_eq!(child.wait().await.unwrap(), status);
    }

    #[tokio::test]
    async fn a_step_that_fails_in_the_child_is_named_and_the_program_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        // More open files than the kernel allows any process (fs.nr_open): refused even to
        // root.
        let confinement = Confinement {
            limits: vec![(Resource::Nofile, 1 << 40)],
            ..nothing()
        };
        let args = shell(&format!("touch {}", marker.display()));
        let error = confinement
            .spawn(&request(&args, &[], dir.path()))
            .unwrap_err();
        assert!(
            error.to_string().starts_with(
                "mcpapp-sandbox: setting the resource limits: Operation not permitted"
            ),
            "{error}"
        );
        assert!(!marker.exists());
        let missing = dir.path().join("missing");
        let error = nothing().spawn(&request(&args, &[], &missing)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(
            error
                .to_string()
                .starts_with("entering the app's working folder: No such file"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_program_that_cannot_be_executed_keeps_its_own_error() {
        let dir = tempfile::tempdir().unwrap();
        let error = nothing()
            .spawn(&crate::SpawnRequest {
                program: &dir.path().join("missing"),
                args: &[],
                env: &[],
                cwd: dir.path(),
            })
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
        assert!(!error.to_string().contains("mcpapp-sandbox"), "{error}");
    }

    #[tokio::test]
    async fn dropping_the_child_kills_and_reaps_it() {
        let args = shell("exec sleep 600");
        let child = nothing()
            .spawn(&request(&args, &[], std::path::Path::new("/")))
            .unwrap();
        let pid = rustix::process::Pid::from_raw(child.id().cast_signed()).unwrap();
        let watch = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).unwrap();
        // SAFETY: the test owns the descriptor and keeps it open while registered.
        #[allow(unsafe_code)]
        let watch = unsafe { tokio::io::unix::AsyncFd::register(watch) }.unwrap();
        drop(child);
        // The pidfd turns readable when the process has ended.
        let _ready = watch.readable().await.unwrap();
        // And it is reaped (by the drop or its reaper thread): the id is gone or going.
        let status = std::fs::read_to_string(format!("/proc/{}/stat", child_id(pid)));
        assert!(status.is_err() || status.unwrap().contains(") Z "));
    }

    fn child_id(pid: rustix::process::Pid) -> i32 {
        pid.as_raw_nonzero().get()
    }

    #[test]
    fn every_step_has_its_own_number() {
        for (i, step) in Step::ALL.iter().enumerate() {
            assert_eq!(*step as usize, i + 1);
            assert!(!step.describe().is_empty());
        }
    }
}
