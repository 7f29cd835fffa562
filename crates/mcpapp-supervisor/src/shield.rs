//! Keeps the gateway's own process out of its apps' reach.
//!
//! App processes run as the gateway's user. On Linux any process of the same user may read
//! another's environment, memory and open files through `/proc/PID/` (or attach with
//! `ptrace`), and the gateway's environment holds its API token and the model's key. A process
//! marked *non-dumpable* keeps those files owned by root and refuses `ptrace` from its peers,
//! so an app cannot read the gateway's secrets from its parent. (The price: no core dumps.)

/// Marks this process non-dumpable (Linux; elsewhere it does nothing). Call it before starting
/// apps. It does not protect against processes running as root, which may read anything.
///
/// # Errors
/// The system's error if the marking fails.
pub fn shield_process() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_dumpable(false).map_err(std::io::Error::from)?;
    Ok(())
}
