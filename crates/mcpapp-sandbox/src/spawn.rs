//! Starting a confined app the way `posix_spawn` starts any program: a child that shares the
//! gateway's memory (`clone` with `CLONE_VM | CLONE_VFORK`) on a stack of its own, which sets
//! up its standard streams, folder and process group, confines itself ([`Confinement`]) and
//! executes the app; the calling thread waits until it has.
//!
//! # Why not `Command::pre_exec`
//!
//! std starts a program with `posix_spawn` (no copy of the parent's memory) unless a
//! `pre_exec` hook is set, and then with `fork`: a copy of the gateway's page tables per
//! start, copy-on-write faults in the gateway afterwards, and the copy torn down again at
//! `execve`. Measured with 50 apps, that was 1.2 ms of CPU per start, nearly all of what the
//! sandbox then cost (docs/performance.md). Here the child borrows the gateway's memory for the
//! few system calls before `execve`, as `posix_spawn` does.
//!
//! # What makes it sound
//!
//! The child runs on its own stack (with a guard page) in the gateway's address space while
//! the calling thread is suspended; the other threads go on. So the child only reads what the
//! parent prepared before `clone` and keeps alive until it returns (paths, argument and
//! environment arrays, descriptors, the [`Confinement`]), writes nothing shared, allocates
//! nothing and takes no lock; every call is a system call. Signals are blocked around `clone`,
//! and the child sets every handler back to the default (its handler table is its own copy)
//! before it unblocks them, so no handler of the gateway's ever runs in it. A failure is five
//! bytes on a pipe (step, `errno`), and the child exits with status 127.

use std::ffi::{CString, c_int, c_void};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use rustix::process::{Pid, Signal, WaitOptions, pidfd_send_signal, waitpid};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::SpawnRequest;
use crate::confine::{Confinement, Step, describe_failure};

/// The child's stack: the confinement's deepest call needs about 12 KiB.
const STACK_SIZE: usize = 256 * 1024;

/// A confined app's process: its own process group, piped standard streams, reaped through
/// a pidfd. Dropping it kills the process.
#[derive(Debug)]
pub struct ConfinedChild {
    pid: u32,
    pidfd: AsyncFd<OwnedFd>,
    /// The write end of its standard input.
    pub stdin: Option<pipe::Sender>,
    /// The read end of its standard output.
    pub stdout: Option<pipe::Receiver>,
    /// The read end of its standard error.
    pub stderr: Option<pipe::Receiver>,
    status: Option<ExitStatus>,
}

impl ConfinedChild {
    /// Its process id (also its process group's).
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Waits until it has ended and reaps it.
    ///
    /// # Errors
    /// The I/O error of waiting.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        loop {
            // A pidfd turns readable when its process ends.
            let mut ready = self.pidfd.readable().await?;
            if let Some(status) = try_reap(self.pid)? {
                self.status = Some(status);
                return Ok(status);
            }
            ready.clear_ready();
        }
    }
}

/// Reaps `pid` if it has ended.
fn try_reap(pid: u32) -> io::Result<Option<ExitStatus>> {
    let pid = Pid::from_raw(pid.cast_signed()).ok_or_else(|| io::Error::other("pid 0"))?;
    Ok(waitpid(Some(pid), WaitOptions::NOHANG)?
        .map(|(_, status)| ExitStatus::from_raw(status.as_raw())))
}

impl Drop for ConfinedChild {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // The pidfd names this process even if its id were reused.
        let _ = pidfd_send_signal(self.pidfd.get_ref(), Signal::KILL);
        if matches!(try_reap(self.pid), Ok(Some(_))) {
            return;
        }
        // It dies in a moment; reap it off the runtime's threads so no zombie is left.
        let pid = self.pid.cast_signed();
        let _ = std::thread::Builder::new()
            .name("mcpapp-reap".to_owned())
            .spawn(move || {
                if let Some(pid) = Pid::from_raw(pid) {
                    let _ = waitpid(Some(pid), WaitOptions::empty());
                }
            });
    }
}

/// Everything the child reads, prepared before `clone`.
struct ChildArgs<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: &'a CString,
    /// The child's ends of its standard streams, in order.
    stdio: [RawFd; 3],
    /// The write end of the failure pipe.
    report: RawFd,
    confinement: &'a Confinement,
}

fn c_string(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the {what} holds a NUL byte"),
        )
    })
}

/// Starts `request` confined by `confinement`. Must be called within a Tokio runtime.
///
/// # Errors
/// The I/O error of starting it; when the sandbox or `execve` failed in the child, an error
/// saying which step failed and why (starting `mcpapp-sandbox:` for the sandbox's steps).
pub(crate) fn spawn(
    confinement: &Confinement,
    request: &SpawnRequest<'_>,
) -> io::Result<ConfinedChild> {
    let program = c_string(request.program.as_os_str().as_bytes(), "program path")?;
    let cwd = c_string(request.cwd.as_os_str().as_bytes(), "working folder")?;
    let mut strings = Vec::with_capacity(request.args.len() + 1 + request.env.len());
    strings.push(program.clone());
    for arg in request.args {
        strings.push(c_string(arg.as_bytes(), "argument")?);
    }
    let argc = strings.len();
    for (key, value) in request.env {
        let mut pair = key.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        strings.push(c_string(&pair, "environment")?);
    }
    let pointers: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
    let null = std::ptr::null::<libc::c_char>();
    let mut argv = pointers.get(..argc).unwrap_or_default().to_vec();
    argv.push(null);
    let mut envp = pointers.get(argc..).unwrap_or_default().to_vec();
    envp.push(null);

    let (stdin_read, stdin_write) = io::pipe()?;
    let (stdout_read, stdout_write) = io::pipe()?;
    let (stderr_read, stderr_write) = io::pipe()?;
    let (mut report_read, report_write) = io::pipe()?;
    rustix::io::ioctl_fionbio(&report_read, true)?;
    let args = ChildArgs {
        program: &program,
        argv: &argv,
        envp: &envp,
        cwd: &cwd,
        stdio: [
            stdin_read.as_raw_fd(),
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ],
        report: report_write.as_raw_fd(),
        confinement,
    };
    let (pid, pidfd) = clone_child(&args)?;
    // The child has executed the app or exited: its ends are the app's now, or gone.
    drop((stdin_read, stdout_write, stderr_write, report_write));
    let mut bytes = [0_u8; 5];
    if matches!(report_read.read(&mut bytes), Ok(5)) {
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = waitpid(Some(pid), WaitOptions::empty());
        }
        return Err(describe_failure(bytes));
    }
    let handles = || -> io::Result<ConfinedChild> {
        // SAFETY: `register` asks that the descriptor stay open and unreplaced while
        // registered: the `AsyncFd` owns the `OwnedFd` and nothing else refers to it.
        #[allow(unsafe_code)]
        let pidfd =
            unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
                .map_err(io::Error::from)?;
        Ok(ConfinedChild {
            pid: pid.cast_unsigned(),
            pidfd,
            stdin: Some(pipe::Sender::from_owned_fd(stdin_write.into())?),
            stdout: Some(pipe::Receiver::from_owned_fd(stdout_read.into())?),
            stderr: Some(pipe::Receiver::from_owned_fd(stderr_read.into())?),
            status: None,
        })
    };
    handles().inspect_err(|_| {
        // The app runs but cannot be served: it must not be left behind. Its id cannot have
        // been reused, since it has not been reaped.
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
            let _ = waitpid(Some(pid), WaitOptions::empty());
        }
    })
}

/// Allocates the child's stack, blocks signals, clones, and returns the child's pid and
/// pidfd once it has executed the app or exited.
fn clone_child(args: &ChildArgs<'_>) -> io::Result<(i32, OwnedFd)> {
    let page = rustix::param::page_size();
    let size = STACK_SIZE + page;
    // SAFETY: a fresh private anonymous mapping; nothing else refers to it. Checked below.
    #[allow(unsafe_code)]
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let result = clone_on(stack, size, page, args);
    // SAFETY: the mapping made above, which the child no longer uses: with CLONE_VFORK,
    // `clone` returns only once the child has executed a program or exited.
    #[allow(unsafe_code)]
    unsafe {
        libc::munmap(stack, size);
    }
    result
}

fn clone_on(
    stack: *mut c_void,
    size: usize,
    page: usize,
    args: &ChildArgs<'_>,
) -> io::Result<(i32, OwnedFd)> {
    // SAFETY: the lowest page of the mapping made by the caller becomes the guard page: a
    // stack overflow in the child faults instead of writing past it.
    #[allow(unsafe_code)]
    if unsafe { libc::mprotect(stack, page, libc::PROT_NONE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // The stack grows down from the end of the mapping (16-byte aligned: page-aligned).
    let top = stack.cast::<u8>().wrapping_add(size).cast::<c_void>();
    let mut pidfd: c_int = -1;
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigfillset` fills the set it is given; `pthread_sigmask` blocks every signal
    // in this thread and saves the old mask, restored below.
    #[allow(unsafe_code)]
    unsafe {
        libc::sigfillset(all.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr());
    }
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    // SAFETY: `child` runs on the fresh stack `top`, in this address space, while this
    // thread is suspended (CLONE_VFORK) until it executes a program or exits; `args` and
    // everything it points to outlive that, since this function does not return before.
    // With CLONE_PIDFD the kernel writes the child's pidfd into `pidfd`. What the child may
    // do is the module's documentation.
    #[allow(unsafe_code)]
    let pid = unsafe {
        libc::clone(
            child,
            top,
            flags,
            std::ptr::from_ref(args).cast_mut().cast::<c_void>(),
            &raw mut pidfd,
        )
    };
    let error = io::Error::last_os_error();
    // SAFETY: the mask saved above.
    #[allow(unsafe_code)]
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut());
    }
    if pid < 0 {
        return Err(error);
    }
    // SAFETY: with CLONE_PIDFD, a successful clone returns a new descriptor that only we own.
    #[allow(unsafe_code)]
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((pid, pidfd))
}

/// The child: on its own stack, in the gateway's memory, until `execve`.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` that `clone_on` passed, alive while the parent waits.
    #[allow(unsafe_code)]
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let Err((step, errno)) = prepare_and_exec(args);
    let [a, b, c, d] = errno.to_le_bytes();
    let _ = rustix::io::write(
        // SAFETY: the report pipe's write end, open in this child until it exits.
        #[allow(unsafe_code)]
        unsafe {
            std::os::fd::BorrowedFd::borrow_raw(args.report)
        },
        &[step as u8, a, b, c, d],
    );
    // SAFETY: leaves the child at once, without running anything of the gateway's (no
    // atexit handlers, no buffers flushed).
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(127)
    }
}

/// Never returns but with a failure: the step and `errno`.
fn prepare_and_exec(args: &ChildArgs<'_>) -> Result<std::convert::Infallible, (Step, i32)> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY: plain system calls on this child's own signal state (its handler table is a
    // copy, not the gateway's), folder, process group and descriptors, with values the
    // parent prepared; `execve` gets NUL-terminated arrays of NUL-terminated strings.
    #[allow(unsafe_code)]
    unsafe {
        for signal in 1..=libc::SIGRTMAX() {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        let mut empty = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(empty.as_mut_ptr());
        if libc::sigprocmask(libc::SIG_SETMASK, empty.as_ptr(), std::ptr::null_mut()) != 0 {
            return Err((Step::Setup, errno()));
        }
        if libc::setpgid(0, 0) != 0 {
            return Err((Step::Setup, errno()));
        }
        if libc::chdir(args.cwd.as_ptr()) != 0 {
            return Err((Step::Folder, errno()));
        }
        // First above 2, then into place, so that no stream's descriptor is overwritten by
        // another's (the gateway's own 0, 1 or 2 may be closed, and a pipe may have got one).
        let mut high = [0; 3];
        for (slot, fd) in high.iter_mut().zip(args.stdio) {
            *slot = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
            if *slot < 0 {
                return Err((Step::Setup, errno()));
            }
        }
        for (target, fd) in (0..3).zip(high) {
            if libc::dup2(fd, target) < 0 {
                return Err((Step::Setup, errno()));
            }
        }
    }
    args.confinement
        .apply()
        .map_err(|failure| (failure.step, failure.errno))?;
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        libc::execve(
            args.program.as_ptr(),
            args.argv.as_ptr(),
            args.envp.as_ptr(),
        );
    }
    Err((Step::Exec, errno()))
}
