//! The kernel probe: the gateway's own executable started again with [`PROBE_ARG`], which
//! tries a Landlock ruleset and a seccomp filter on itself and reports, as one JSON line,
//! the Landlock ABI and whether seccomp filters install. The gateway starts it once, so that
//! what it tries never touches the gateway's own process.

use std::process::ExitCode;

/// The first argument that turns the gateway's executable into the kernel probe.
pub const PROBE_ARG: &str = "--mcpapp-sandbox-probe";

/// What the kernel offers, as the probe found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelSupport {
    /// The Landlock ABI (0: none).
    pub landlock_abi: u8,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
}

/// Runs the probe when this process was started as one (its first argument is
/// [`PROBE_ARG`]) and returns its exit code; otherwise returns `None` at once. Call it first
/// thing in `main`.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = mcpapp_sandbox::run_probe_if_requested() {
///         return code;
///     }
///     // ... the program itself ...
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn run_probe_if_requested() -> Option<ExitCode> {
    if std::env::args_os().nth(1)? != PROBE_ARG {
        return None;
    }
    println!(
        "{}",
        serde_json::to_string(&imp::probe()).unwrap_or_else(|_| "{}".to_owned())
    );
    Some(ExitCode::SUCCESS)
}

#[cfg(target_os = "linux")]
mod imp {
    use landlock::{ABI, AccessFs, Ruleset, RulesetAttr};

    use super::KernelSupport;

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
    use super::KernelSupport;

    pub(super) fn probe() -> KernelSupport {
        KernelSupport {
            landlock_abi: 0,
            seccomp: false,
        }
    }
}
