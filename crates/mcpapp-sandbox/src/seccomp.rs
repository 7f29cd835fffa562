//! The syscall filter: which sockets an app may create, and the kernel interfaces no MCP
//! server needs and that could widen its reach (ptrace, io_uring, namespaces, mounts, BPF,
//! keyrings, other processes' memory).
//!
//! A deny list (everything else is allowed), because an allow list would have to follow every
//! runtime's syscalls. One short program, written here instruction by instruction (with
//! symbolic jumps, [`assemble`]d into offsets) rather than by a generic rule compiler,
//! because the kernel copies, checks and compiles it at every app start and runs it on every
//! syscall the app makes: about 50 instructions for the default policy where the compiler's
//! output was 247. In order: another architecture's numbers kill the process; on x86_64 the
//! x32 ABI's numbers (bit 30 set) are refused, so that they cannot slip past the native
//! numbers; `clone3` answers `ENOSYS`, since its flags are behind a pointer a filter cannot
//! read, so that the C library falls back to `clone`, whose namespace flags are refused;
//! `socket` is checked by family, type and protocol; the [`DENIED`] syscalls answer `EPERM`.
//! `seccompiler` installs it. A small interpreter in the tests runs it on each case.

use seccompiler::{BpfProgram, sock_filter};

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

/// The filter's instructions, as the kernel reads them: one program, built here rather than
/// by a rule compiler, so that it stays short (about 50 instructions for the default policy,
/// where a generic compiler's output was 247): the kernel copies, checks and compiles it once
/// per app start, and runs it on every syscall the app makes.
mod bpf {
    // Opcodes (linux/filter.h, linux/bpf_common.h).
    pub(super) const LD_W_ABS: u16 = 0x20;
    pub(super) const JEQ_K: u16 = 0x15;
    pub(super) const JGE_K: u16 = 0x35;
    pub(super) const JSET_K: u16 = 0x45;
    pub(super) const AND_K: u16 = 0x54;
    pub(super) const RET_K: u16 = 0x06;
    // Offsets in `struct seccomp_data` (linux/seccomp.h): the syscall number, the audit
    // architecture, then six 64-bit arguments; on these little-endian machines an argument's
    // low 32 bits come first.
    pub(super) const NR: u32 = 0;
    pub(super) const ARCH: u32 = 4;
    pub(super) const fn arg_low(index: u32) -> u32 {
        16 + 8 * index
    }
    // Return values.
    pub(super) const RET_ALLOW: u32 = 0x7fff_0000;
    pub(super) const RET_ERRNO: u32 = 0x0005_0000;
    pub(super) const RET_KILL_PROCESS: u32 = 0x8000_0000;
}

/// Where a jump goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    /// The next instruction.
    Next,
    Allow,
    Eperm,
    Enosys,
    Kill,
    /// The `clone` flag check.
    Clone,
    /// The `socket` checks.
    Socket,
    /// The checks of an IPv4 or IPv6 socket's type and protocol.
    Inet,
}

/// One instruction, its jumps still symbolic.
#[derive(Debug, Clone, Copy)]
enum Op {
    Load(u32),
    And(u32),
    Jump(u16, u32, To, To),
    Ret(u32),
    /// Marks where a [`To`] lands (no instruction).
    Here(To),
}

/// Resolves the jumps into offsets (forward only, at most 255).
fn assemble(ops: &[Op]) -> Result<BpfProgram, String> {
    let mut positions: Vec<(To, usize)> = Vec::new();
    let mut index = 0;
    for op in ops {
        match op {
            Op::Here(label) => positions.push((*label, index)),
            _ => index += 1,
        }
    }
    let mut program = Vec::with_capacity(index);
    for op in ops {
        let at = program.len();
        let offset = |to: To| -> Result<u8, String> {
            if to == To::Next {
                return Ok(0);
            }
            let target = positions
                .iter()
                .find(|(label, _)| *label == to)
                .map(|(_, position)| *position)
                .ok_or_else(|| format!("no {to:?} in the filter"))?;
            target
                .checked_sub(at + 1)
                .and_then(|o| u8::try_from(o).ok())
                .ok_or_else(|| format!("{to:?} is out of reach at instruction {at}"))
        };
        let stmt = |code, k| sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        };
        program.push(match *op {
            Op::Load(offset) => stmt(bpf::LD_W_ABS, offset),
            Op::And(mask) => stmt(bpf::AND_K, mask),
            Op::Ret(value) => stmt(bpf::RET_K, value),
            Op::Jump(code, k, yes, no) => sock_filter {
                code,
                jt: offset(yes)?,
                jf: offset(no)?,
                k,
            },
            Op::Here(_) => continue,
        });
    }
    Ok(program)
}

/// The audit architecture of this build (linux/audit.h: the ELF machine with the 64-bit and
/// little-endian bits) and whether it has the x32 ABI.
fn native_arch() -> Result<(u32, bool), String> {
    const ARCH_64_LE: u32 = 0x8000_0000 | 0x4000_0000;
    match std::env::consts::ARCH {
        "x86_64" => Ok((62 | ARCH_64_LE, true)),
        "aarch64" => Ok((183 | ARCH_64_LE, false)),
        "riscv64" => Ok((243 | ARCH_64_LE, false)),
        other => Err(format!("no seccomp filter for {other}")),
    }
}

/// The whole filter for a socket policy.
fn filter_ops(inet: InetSockets, unix: bool) -> Result<Vec<Op>, String> {
    use Op::{And, Here, Jump, Load, Ret};
    let (arch, x32) = native_arch()?;
    let nr = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
    let family = |f: i32| f.cast_unsigned();
    let mut ops = vec![
        // Another architecture's numbers mean other syscalls: the process is killed.
        Load(bpf::ARCH),
        Jump(bpf::JEQ_K, arch, To::Next, To::Kill),
        Load(bpf::NR),
    ];
    if x32 {
        // The x32 ABI's numbers (bit 30) would slip past the native numbers below.
        ops.push(Jump(bpf::JGE_K, 0x4000_0000, To::Eperm, To::Next));
    }
    // `clone3`'s flags are behind a pointer: "not implemented", so that the C library falls
    // back to `clone`, whose flags are checked.
    ops.push(Jump(bpf::JEQ_K, nr(libc::SYS_clone3), To::Enosys, To::Next));
    ops.push(Jump(bpf::JEQ_K, nr(libc::SYS_clone), To::Clone, To::Next));
    let sockets_refused = inet == InetSockets::None && !unix;
    let socket_to = if sockets_refused {
        To::Eperm
    } else {
        To::Socket
    };
    ops.push(Jump(bpf::JEQ_K, nr(libc::SYS_socket), socket_to, To::Next));
    for (number, _) in DENIED {
        ops.push(Jump(bpf::JEQ_K, nr(*number), To::Eperm, To::Next));
    }
    // Everything else.
    ops.push(Ret(bpf::RET_ALLOW));
    // `clone`'s flags are its first argument; the namespace flags are all in the low half,
    // the only half the kernel reads for `clone`.
    let namespaces = NAMESPACE_FLAGS.iter().fold(0, |all, flag| all | flag);
    ops.push(Here(To::Clone));
    ops.push(Load(bpf::arg_low(0)));
    ops.push(Jump(
        bpf::JSET_K,
        u32::try_from(namespaces).unwrap_or(u32::MAX),
        To::Eperm,
        To::Allow,
    ));
    if !sockets_refused {
        // `socket(domain, type, protocol)`.
        ops.push(Here(To::Socket));
        ops.push(Load(bpf::arg_low(0)));
        if unix {
            ops.push(Jump(bpf::JEQ_K, family(libc::AF_UNIX), To::Allow, To::Next));
        }
        if inet != InetSockets::None {
            ops.push(Jump(bpf::JEQ_K, family(libc::AF_INET), To::Inet, To::Next));
            ops.push(Jump(bpf::JEQ_K, family(libc::AF_INET6), To::Inet, To::Next));
        }
        // Any other family (netlink, packet, vsock, ...).
        ops.push(Ret(bpf::RET_ERRNO | libc::EPERM.cast_unsigned()));
        if inet != InetSockets::None {
            ops.push(Here(To::Inet));
        }
        if inet == InetSockets::Tcp {
            // Stream sockets only (the type is the low four bits; the rest are flags), of
            // protocol 0 or TCP: port rules cover TCP, not SCTP or MPTCP.
            ops.push(Load(bpf::arg_low(1)));
            ops.push(And(0xf));
            let stream = family(libc::SOCK_STREAM);
            ops.push(Jump(bpf::JEQ_K, stream, To::Next, To::Eperm));
            ops.push(Load(bpf::arg_low(2)));
            ops.push(Jump(bpf::JEQ_K, 0, To::Allow, To::Next));
            let tcp = family(libc::IPPROTO_TCP);
            ops.push(Jump(bpf::JEQ_K, tcp, To::Allow, To::Eperm));
        } else if inet == InetSockets::Any {
            ops.push(Ret(bpf::RET_ALLOW));
        }
    }
    // The answers, last: jumps go forward only.
    ops.push(Here(To::Allow));
    ops.push(Ret(bpf::RET_ALLOW));
    ops.push(Here(To::Eperm));
    ops.push(Ret(bpf::RET_ERRNO | libc::EPERM.cast_unsigned()));
    ops.push(Here(To::Enosys));
    ops.push(Ret(bpf::RET_ERRNO | libc::ENOSYS.cast_unsigned()));
    ops.push(Here(To::Kill));
    ops.push(Ret(bpf::RET_KILL_PROCESS));
    Ok(ops)
}

/// The filter, as installed.
pub(crate) fn programs(inet: InetSockets, unix: bool) -> Result<Vec<BpfProgram>, String> {
    Ok(vec![assemble(&filter_ops(inet, unix)?)?])
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

    /// What the kernel would answer: a small interpreter of the instructions the filter uses.
    fn run(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 3]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                bpf::NR => nr,
                bpf::ARCH => arch,
                o if (16..64).contains(&o) && o % 8 == 0 => {
                    (args[((o - 16) / 8) as usize] & 0xffff_ffff) as u32
                }
                o => panic!("load of offset {o}"),
            }
        };
        let (mut pc, mut acc) = (0_usize, 0_u32);
        loop {
            let insn = &program[pc];
            pc += 1;
            let jump = |taken: bool| usize::from(if taken { insn.jt } else { insn.jf });
            match insn.code {
                bpf::LD_W_ABS => acc = word(insn.k),
                bpf::AND_K => acc &= insn.k,
                bpf::JEQ_K => pc += jump(acc == insn.k),
                bpf::JGE_K => pc += jump(acc >= insn.k),
                bpf::JSET_K => pc += jump(acc & insn.k != 0),
                bpf::RET_K => return insn.k,
                code => panic!("opcode {code:#x}"),
            }
        }
    }

    const EPERM: u32 = bpf::RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = bpf::RET_ERRNO | libc::ENOSYS as u32;
    const ALLOW: u32 = bpf::RET_ALLOW;

    fn socket(domain: i32, kind: i32, protocol: i32) -> (u32, [u64; 3]) {
        (
            libc::SYS_socket as u32,
            [domain as u64, kind as u64, protocol as u64],
        )
    }

    #[test]
    fn the_filter_answers_each_case_of_each_socket_policy() {
        let (arch, x32) = native_arch().unwrap();
        let stream = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        for inet in [InetSockets::None, InetSockets::Tcp, InetSockets::Any] {
            for unix in [false, true] {
                let program = &programs(inet, unix).unwrap()[0];
                // Well under the kernel's 4096 instructions, and short.
                assert!(program.len() < 70, "{inet:?} {unix}: {}", program.len());
                let answer = |(nr, args): (u32, [u64; 3])| run(program, arch, nr, args);
                let tcp = if inet == InetSockets::None {
                    EPERM
                } else {
                    ALLOW
                };
                let other_inet = if inet == InetSockets::Any {
                    ALLOW
                } else {
                    EPERM
                };
                let unix_answer = if unix { ALLOW } else { EPERM };
                for (case, expected) in [
                    (socket(libc::AF_INET, stream, 0), tcp),
                    (
                        socket(libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_TCP),
                        tcp,
                    ),
                    (socket(libc::AF_INET, libc::SOCK_DGRAM, 0), other_inet),
                    (socket(libc::AF_INET6, libc::SOCK_RAW, 255), other_inet),
                    (
                        socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
                        other_inet,
                    ),
                    (socket(libc::AF_INET, libc::SOCK_STREAM, 262), other_inet), // MPTCP
                    (socket(libc::AF_UNIX, libc::SOCK_STREAM, 0), unix_answer),
                    (socket(libc::AF_NETLINK, libc::SOCK_RAW, 0), EPERM),
                    (socket(libc::AF_PACKET, libc::SOCK_RAW, 0), EPERM),
                    (socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0), EPERM),
                ] {
                    assert_eq!(answer(case), expected, "{inet:?} unix={unix}: {case:?}");
                }
                let nr = |n: i64| n as u32;
                for (name_nr, args, expected) in [
                    (nr(libc::SYS_clone), [libc::SIGCHLD as u64, 0, 0], ALLOW),
                    (
                        nr(libc::SYS_clone),
                        [(libc::CLONE_VM | libc::CLONE_THREAD) as u64, 0, 0],
                        ALLOW,
                    ),
                    (
                        nr(libc::SYS_clone),
                        [(libc::CLONE_NEWUSER | libc::SIGCHLD) as u64, 0, 0],
                        EPERM,
                    ),
                    (
                        nr(libc::SYS_clone),
                        [libc::CLONE_NEWNET as u64 | (1 << 40), 0, 0],
                        EPERM,
                    ),
                    (nr(libc::SYS_clone3), [0, 0, 0], ENOSYS),
                    (nr(libc::SYS_read), [0, 0, 0], ALLOW),
                    (nr(libc::SYS_execve), [0, 0, 0], ALLOW),
                    (
                        nr(libc::SYS_socketpair),
                        [libc::AF_UNIX as u64, 1, 0],
                        ALLOW,
                    ),
                ] {
                    assert_eq!(run(program, arch, name_nr, args), expected, "{name_nr}");
                }
                for (number, name) in DENIED {
                    assert_eq!(run(program, arch, *number as u32, [0; 3]), EPERM, "{name}");
                }
                // Another architecture is killed; x32 numbers refused on x86_64.
                assert_eq!(run(program, 0x4000_0003, 0, [0; 3]), bpf::RET_KILL_PROCESS);
                if x32 {
                    assert_eq!(run(program, arch, 0x4000_0000, [0; 3]), EPERM);
                }
            }
        }
    }

    #[test]
    fn jumps_out_of_reach_are_an_error() {
        let mut ops = vec![Op::Jump(bpf::JEQ_K, 0, To::Eperm, To::Next)];
        ops.extend(std::iter::repeat_n(Op::Ret(0), 300));
        ops.push(Op::Here(To::Eperm));
        ops.push(Op::Ret(EPERM));
        assert!(assemble(&ops).unwrap_err().contains("out of reach"));
        assert!(
            assemble(&[Op::Jump(bpf::JEQ_K, 0, To::Kill, To::Next)])
                .unwrap_err()
                .contains("no Kill")
        );
    }
}
