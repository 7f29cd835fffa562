//! The syscall filter: which sockets an app may create, and the kernel interfaces no MCP
//! server needs and that could widen its reach (ptrace, io_uring, namespaces, mounts, BPF,
//! keyrings, other processes' memory).
//!
//! A deny list (everything else is allowed), because an allow list would have to follow every
//! runtime's syscalls. One filter, so that the kernel runs one program per syscall of the app
//! and each start attaches (and compiles) one: a few hand-written instructions first, then
//! the compiled rules answering `EPERM`. The first instructions answer `ENOSYS` for `clone3`,
//! whose flags a filter cannot read (they are behind a pointer), so that the C library falls
//! back to `clone`, whose namespace flags the rules refuse; and on x86_64 they refuse the x32
//! ABI's syscall numbers (bit 30 set), so that those cannot slip past the rules keyed on the
//! native numbers.

use std::collections::BTreeMap;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch, sock_filter,
};

use crate::policy::InetSockets;

/// Syscalls always refused with `EPERM`.
const DENIED: &[(i64, &str)] = &[
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_io_uring_setup, "io_uring_setup"),
    (libc::SYS_io_uring_enter, "io_uring_enter"),
    (libc::SYS_io_uring_register, "io_uring_register"),
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    (libc::SYS_open_by_handle_at, "open_by_handle_at"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_acct, "acct"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
];

/// `clone` flags that create namespaces; `clone` with any of them is refused.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// The architecture's syscall numbers, where the filters are built for.
fn target() -> Result<TargetArch, BackendError> {
    TargetArch::try_from(std::env::consts::ARCH)
}

fn condition(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(arg, len, op, value)
}

/// The rules of `socket(domain, type, protocol)`: each rule is a case to refuse.
fn socket_rules(inet: InetSockets, unix: bool) -> Result<Vec<SeccompRule>, BackendError> {
    use SeccompCmpArgLen::Dword;
    let inet_families = [libc::AF_INET as u64, libc::AF_INET6 as u64];
    let mut allowed: Vec<u64> = Vec::new();
    if inet != InetSockets::None {
        allowed.extend(inet_families);
    }
    if unix {
        allowed.push(libc::AF_UNIX as u64);
    }
    let mut rules = Vec::new();
    // Any other family (netlink, packet, vsock, ...).
    if allowed.is_empty() {
        return Ok(Vec::new());
    }
    rules.push(SeccompRule::new(
        allowed
            .iter()
            .map(|family| condition(0, Dword, SeccompCmpOp::Ne, *family))
            .collect::<Result<_, _>>()?,
    )?);
    if inet == InetSockets::Tcp {
        let stream = libc::SOCK_STREAM as u64;
        for family in inet_families {
            // Datagrams, raw sockets and the rest: the type is the low four bits.
            for kind in (0..16).filter(|k| *k != stream) {
                rules.push(SeccompRule::new(vec![
                    condition(0, Dword, SeccompCmpOp::Eq, family)?,
                    condition(1, Dword, SeccompCmpOp::MaskedEq(0xf), kind)?,
                ])?);
            }
            // Stream sockets of protocols other than TCP (SCTP, MPTCP), which port rules
            // do not cover.
            rules.push(SeccompRule::new(vec![
                condition(0, Dword, SeccompCmpOp::Eq, family)?,
                condition(1, Dword, SeccompCmpOp::MaskedEq(0xf), stream)?,
                condition(2, Dword, SeccompCmpOp::Ne, 0)?,
                condition(2, Dword, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
            ])?);
        }
    }
    Ok(rules)
}

/// The `EPERM` filter.
fn deny_filter(inet: InetSockets, unix: bool) -> Result<BpfProgram, BackendError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .map(|(number, _)| (*number, Vec::new()))
        .collect();
    let sockets = socket_rules(inet, unix)?;
    let refuse_all_sockets = inet == InetSockets::None && !unix;
    if refuse_all_sockets || !sockets.is_empty() {
        rules.insert(libc::SYS_socket, sockets);
    }
    let clone: Vec<SeccompRule> = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            SeccompRule::new(vec![condition(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(*flag),
                *flag,
            )?])
        })
        .collect::<Result<_, _>>()?;
    rules.insert(libc::SYS_clone, clone);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target()?,
    )?;
    let mut program: BpfProgram = filter.try_into()?;
    program.splice(0..0, prefix(std::env::consts::ARCH));
    Ok(program)
}

/// The filter, as installed.
pub(crate) fn programs(inet: InetSockets, unix: bool) -> Result<Vec<BpfProgram>, BackendError> {
    Ok(vec![deny_filter(inet, unix)?])
}

/// `ENOSYS` for `clone3` and, on x86_64, `EPERM` for every syscall number with the x32 bit
/// (1 << 30) set, checked after the architecture (on another one, straight on to the compiled
/// rules, which kill the process). Nothing on an architecture this does not know.
fn prefix(arch: &str) -> Vec<sock_filter> {
    // BPF opcodes (linux/filter.h), seccomp_data offsets (linux/seccomp.h) and audit
    // architectures (linux/audit.h: the ELF machine, 64-bit and little-endian bits).
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const ARCH_64_LE: u32 = 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let stmt = |code, k| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code, k, jt, jf| sock_filter { code, jt, jf, k };
    let (machine, x32) = match arch {
        "x86_64" => (62, true),
        "aarch64" => (183, false),
        "riscv64" => (243, false),
        _ => return Vec::new(),
    };
    let mut checks = vec![stmt(LD_W_ABS, NR)];
    if x32 {
        checks.push(jump(JGE_K, X32_SYSCALL_BIT, 0, 1));
        checks.push(stmt(RET_K, RET_ERRNO | libc::EPERM as u32));
    }
    checks.push(jump(JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    checks.push(stmt(RET_K, RET_ERRNO | libc::ENOSYS as u32));
    let skip = u8::try_from(checks.len()).unwrap_or(u8::MAX);
    let mut program = vec![
        stmt(LD_W_ABS, ARCH),
        // Another architecture: past the checks, on to the compiled rules' own check.
        jump(JEQ_K, machine | ARCH_64_LE, 0, skip),
    ];
    program.extend(checks);
    program
}

/// Installs the filters on the calling thread (and so on what it executes). Sets
/// `no_new_privs`, which an unprivileged process needs for this.
pub(crate) fn install(inet: InetSockets, unix: bool) -> Result<(), String> {
    let programs = programs(inet, unix).map_err(|e| format!("building the filter: {e}"))?;
    for program in &programs {
        seccompiler::apply_filter(program).map_err(|e| format!("installing the filter: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_builds_for_every_socket_policy() {
        for inet in [InetSockets::None, InetSockets::Tcp, InetSockets::Any] {
            for unix in [false, true] {
                let programs = programs(inet, unix).unwrap();
                assert_eq!(programs.len(), 1);
                // The kernel takes at most 4096 instructions per filter.
                assert!(programs.iter().all(|p| p.len() < 4096), "{inet:?} {unix}");
            }
        }
    }

    #[test]
    fn clone3_and_x32_numbers_are_answered_first() {
        let program = deny_filter(InetSockets::None, false).unwrap();
        let prefix = prefix(std::env::consts::ARCH);
        assert_eq!(program[..prefix.len()], prefix[..]);
        // The compiled rules after it start with their own architecture check.
        assert_eq!(
            (program[prefix.len()].code, program[prefix.len()].k),
            (0x20, 4)
        );
        let x86 = super::prefix("x86_64");
        // Architecture, then x32 (EPERM), then clone3 (ENOSYS); the architecture check skips
        // exactly the five checks.
        assert_eq!(x86.len(), 7);
        assert_eq!((x86[1].k, x86[1].jf), (62 | 0xC000_0000, 5));
        assert_eq!(x86[3].k, 0x4000_0000);
        assert_eq!(x86[4].k, 0x0005_0000 | libc::EPERM as u32);
        assert_eq!(x86[5].k, 435);
        assert_eq!(x86[6].k, 0x0005_0000 | libc::ENOSYS as u32);
        let arm = super::prefix("aarch64");
        assert_eq!(arm.len(), 5);
        assert_eq!((arm[1].k, arm[1].jf), (0xC000_00B7, 3));
        assert_eq!(arm[3].k, 435);
        assert!(super::prefix("mips").is_empty());
    }

    #[test]
    fn tcp_only_refuses_every_other_socket_type_of_both_families() {
        let rules = socket_rules(InetSockets::Tcp, false).unwrap();
        // Other families; 15 other types and other stream protocols, for IPv4 and IPv6.
        assert_eq!(rules.len(), 1 + 2 * (15 + 1));
        assert!(socket_rules(InetSockets::None, false).unwrap().is_empty());
        assert_eq!(socket_rules(InetSockets::Any, true).unwrap().len(), 1);
    }
}
