//! The gateway's side: [`Sandbox`] knows what the kernel offers (from the probe), the state
//! directory and the gateway's own ports, and turns one app's launch into a confined one
//! ([`Sandbox::prepare`]): its state folder, its egress proxy, the [`Confinement`] its child
//! applies before it executes the app, and the report of what will apply.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use mcpapp_manifest::{AppIsolation, IsolationMode};
use tracing::{info, warn};

use crate::confine::Confinement;
use crate::policy::{
    DEVICES_READ, ETC_READ, FULL_ABI, LaunchFacts, OTHER_READ, SYSTEM_EXECUTE, compile,
};
use crate::probe::{KernelSupport, PROBE_ARG};
use crate::proxy::EgressProxy;
use crate::report::SandboxReport;

/// The environment variable that lowers the Landlock ABI the gateway assumes (never raises
/// it): a test hook for the refusal under `enforce` and the report under `best-effort` on
/// older kernels. It can only make the sandbox refuse more or claim less.
pub const ASSUME_ABI_ENV: &str = "MCPAPP_SANDBOX_ASSUME_ABI";

/// One app launch to confine.
#[derive(Debug, Clone, Copy)]
pub struct LaunchRequest<'a> {
    /// The app id (its state folder is named after it).
    pub app_id: &'a str,
    /// Its resolved isolation settings.
    pub isolation: &'a AppIsolation,
    /// Its folder.
    pub app_dir: &'a Path,
    /// The program as planned: absolute, relative to the app folder, or a bare name looked up
    /// on `path`.
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// The `PATH` the app gets, to find a bare program name.
    pub path: Option<&'a OsStr>,
}

/// One program to start confined.
#[derive(Debug, Clone, Copy)]
pub struct SpawnRequest<'a> {
    /// The program (absolute, or relative to `cwd`).
    pub program: &'a Path,
    /// Its arguments, after the program's name.
    pub args: &'a [OsString],
    /// Its whole environment.
    pub env: &'a [(OsString, OsString)],
    /// Its working folder.
    pub cwd: &'a Path,
}

/// A confined launch: what to start, what to add to the environment, how the child confines
/// itself, and the report.
#[derive(Debug)]
#[non_exhaustive]
pub struct Prepared {
    /// The program to start (resolved on the app's `PATH` when confined).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// What the child applies to itself before it executes `program`
    /// ([`Confinement::install`] on the command); `None` when unconfined.
    pub confinement: Option<Arc<Confinement>>,
    /// Variables set over the app's environment (`HOME`, `TMPDIR`, the proxy variables).
    pub env: Vec<(OsString, OsString)>,
    /// What applies.
    pub report: SandboxReport,
    /// The app's egress proxy, to keep alive while the app runs.
    pub proxy: Option<Arc<EgressProxy>>,
}

/// Why an app may not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// `enforce` on a kernel (or platform) without what the policy needs.
    #[error(
        "isolation mode enforce needs what this system lacks: {}; set McpApps.Isolation.Mode (or McpApps.Entries.{app_id}.Isolation.Mode) to \"best-effort\" to run it with less, or \"off\"",
        missing.join("; ")
    )]
    Unsupported {
        /// The app.
        app_id: String,
        /// What is missing, as sentences.
        missing: Vec<String>,
    },
    /// The app's state folder could not be made.
    #[error("cannot create the state folder {}: {reason}", path.display())]
    StateFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The egress proxy could not listen.
    #[error("cannot start the egress proxy: {0}")]
    Proxy(String),
    /// The rules could not be prepared (a Landlock ruleset or seccomp filter the kernel
    /// refuses).
    #[error("cannot prepare the sandbox of McpApp '{app_id}': {reason}")]
    Confine {
        /// The app.
        app_id: String,
        /// Why.
        reason: String,
    },
}

/// The gateway's sandbox: kernel support, state directory, protected ports.
#[derive(Debug)]
pub struct Sandbox {
    /// The program started once with [`PROBE_ARG`].
    prober: PathBuf,
    kernel: OnceLock<KernelSupport>,
    /// The probe started with the sandbox, so that its answer is ready when the first app
    /// starts instead of delaying it.
    probing: Mutex<Option<std::thread::JoinHandle<KernelSupport>>>,
    protected_ports: Vec<u16>,
    /// Used when an app's settings name no state directory.
    fallback_state: Mutex<Option<tempfile::TempDir>>,
    /// Whether each of the default policy's system paths exists.
    system_paths: OnceLock<HashMap<PathBuf, bool>>,
}

impl Sandbox {
    /// A sandbox whose kernel probe is `prober` (an executable that calls
    /// [`run_probe_if_requested`](crate::run_probe_if_requested) first in `main`). The probe
    /// starts at once, in the background.
    pub fn new(prober: impl Into<PathBuf>) -> Self {
        let prober = prober.into();
        let probing = {
            let prober = prober.clone();
            std::thread::Builder::new()
                .name("mcpapp-sandbox-probe".to_owned())
                .spawn(move || probe(&prober))
                .ok()
        };
        Self {
            prober,
            kernel: OnceLock::new(),
            probing: Mutex::new(probing),
            protected_ports: Vec::new(),
            fallback_state: Mutex::new(None),
            system_paths: OnceLock::new(),
        }
    }

    /// Whether each path of the default policy's system lists exists.
    fn system_paths(&self) -> &HashMap<PathBuf, bool> {
        self.system_paths.get_or_init(|| {
            SYSTEM_EXECUTE
                .iter()
                .chain(ETC_READ)
                .chain(OTHER_READ)
                .chain(DEVICES_READ)
                .chain(&["/dev/null"])
                .map(|path| (PathBuf::from(path), Path::new(path).exists()))
                .collect()
        })
    }

    /// A sandbox whose probe is this very executable (`/proc/self/exe` where it exists,
    /// which still works after the file was replaced).
    ///
    /// # Errors
    /// The I/O error when the executable cannot be found.
    pub fn current_exe() -> std::io::Result<Self> {
        let exe = Some(PathBuf::from("/proc/self/exe"))
            .filter(|p| p.exists())
            .map_or_else(std::env::current_exe, Ok)?;
        Ok(Self::new(exe))
    }

    /// Keeps these local ports (the gateway's listeners) closed to apps, whatever their
    /// network grant, unless a grant names the port.
    pub fn protect_ports(mut self, ports: impl IntoIterator<Item = u16>) -> Self {
        self.protected_ports.extend(ports);
        self.protected_ports.sort_unstable();
        self.protected_ports.dedup();
        self
    }

    /// What the kernel offers, probed once (by running the prober with [`PROBE_ARG`]) and
    /// lowered by [`ASSUME_ABI_ENV`] when set.
    pub fn kernel(&self) -> KernelSupport {
        *self.kernel.get_or_init(|| {
            let started = self
                .probing
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let mut support = started
                .and_then(|probing| probing.join().ok())
                .unwrap_or_else(|| probe(&self.prober));
            if let Some(assumed) = std::env::var(ASSUME_ABI_ENV)
                .ok()
                .and_then(|v| v.trim().parse::<u8>().ok())
            {
                support.landlock_abi = support.landlock_abi.min(assumed);
            }
            info!(
                landlock_abi = support.landlock_abi,
                seccomp = support.seccomp,
                "app sandbox"
            );
            support
        })
    }

    /// Removes an app's state folder (its `HOME` and `TMPDIR`) under `state_directory`.
    ///
    /// # Errors
    /// The I/O error, except when there is nothing to remove.
    pub fn remove_app_data(state_directory: &Path, app_id: &str) -> std::io::Result<()> {
        match std::fs::remove_dir_all(app_folder(state_directory, app_id)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn state_directory(&self, isolation: &AppIsolation) -> Result<PathBuf, SandboxError> {
        if let Some(dir) = &isolation.state_directory {
            return Ok(dir.clone());
        }
        let mut fallback = self
            .fallback_state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if fallback.is_none() {
            let dir = tempfile::Builder::new()
                .prefix("mcpapp-state-")
                .tempdir()
                .map_err(|e| SandboxError::StateFolder {
                    path: std::env::temp_dir(),
                    reason: e.to_string(),
                })?;
            warn!(
                "apps' state folders are in {} for this run only: set McpApps.StateDirectory to keep them",
                dir.path().display()
            );
            *fallback = Some(dir);
        }
        Ok(fallback
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default())
    }

    /// Prepares one launch: the program, the environment it adds, the confinement, the
    /// report, and the egress proxy when the app has host grants. Must be called within a Tokio
    /// runtime when the app has host grants.
    ///
    /// # Errors
    /// [`SandboxError`] when the app must not start (see its variants).
    pub fn prepare(&self, request: &LaunchRequest<'_>) -> Result<Prepared, SandboxError> {
        let isolation = request.isolation;
        let kernel = match self.kernel_for(request)? {
            Ok(kernel) => kernel,
            Err(unconfined) => return Ok(unconfined),
        };
        // One folder, the app's HOME and TMPDIR (and its parents), private to the gateway's
        // user: a first start costs one directory, a restart none.
        let folder = app_folder(&self.state_directory(isolation)?, request.app_id);
        make_private_dir(&folder)?;
        let (home, tmp) = (folder.clone(), folder);
        let program = resolve_program(request.program, request.path);
        let proxy = match isolation.network.hosts().next() {
            None => None,
            Some(_) => Some(Arc::new(
                EgressProxy::start(
                    request.app_id,
                    isolation.network.hosts().cloned(),
                    &self.protected_ports,
                )
                .map_err(|e| SandboxError::Proxy(e.to_string()))?,
            )),
        };
        let mut policy = compile(
            isolation,
            &LaunchFacts {
                app_dir: request.app_dir,
                program: &program,
                home: &home,
                tmp: &tmp,
                proxy_port: proxy.as_ref().map(|p| p.addr().port()),
                protected_ports: &self.protected_ports,
                abi: kernel.landlock_abi.min(FULL_ABI),
            },
        );
        // Rules for paths that do not exist grant nothing; leave them out of the report. The
        // system's paths are looked at once per gateway, not once per start.
        let system = self.system_paths();
        policy.paths.retain(|rule| match system.get(&rule.path) {
            Some(exists) => *exists,
            None => rule.path.exists(),
        });
        policy.limits.open_files = policy.limits.open_files.min(open_files_hard_limit());
        let confinement =
            Confinement::prepare(&policy).map_err(|reason| SandboxError::Confine {
                app_id: request.app_id.to_owned(),
                reason,
            })?;
        let mut env: Vec<(OsString, OsString)> = vec![
            ("HOME".into(), home.clone().into_os_string()),
            ("TMPDIR".into(), tmp.clone().into_os_string()),
        ];
        env.extend(proxy.iter().flat_map(|proxy| proxy_variables(&proxy.url())));
        let report = SandboxReport::applied(
            isolation.mode,
            &policy,
            &isolation.network,
            kernel.landlock_abi,
            kernel.seccomp,
            proxy.as_ref().map(|p| p.addr().to_string()),
            home,
            tmp,
        );
        if !report.missing.is_empty() {
            warn!(
                app = %request.app_id,
                "McpApp '{}' runs in a partial sandbox (isolation mode best-effort); missing: {}",
                request.app_id,
                report.missing.join("; ")
            );
        }
        Ok(Prepared {
            program,
            args: request.args.iter().map(OsString::from).collect(),
            confinement: Some(Arc::new(confinement)),
            env,
            report,
            proxy,
        })
    }

    /// What the kernel offers for this launch (`Ok(Ok(..))`), or the unconfined launch of an
    /// app that is off or on a platform without a sandbox under best-effort (`Ok(Err(..))`).
    ///
    /// # Errors
    /// [`SandboxError::Unsupported`] under `enforce` without what the policy needs.
    fn kernel_for(
        &self,
        request: &LaunchRequest<'_>,
    ) -> Result<Result<KernelSupport, Prepared>, SandboxError> {
        let isolation = request.isolation;
        let unconfined = |report: SandboxReport| Prepared {
            program: request.program.to_path_buf(),
            args: request.args.iter().map(OsString::from).collect(),
            confinement: None,
            env: Vec::new(),
            report,
            proxy: None,
        };
        if isolation.mode == IsolationMode::Off {
            return Ok(Err(unconfined(SandboxReport::none(
                IsolationMode::Off,
                "isolation is off for this app (Isolation.Mode)",
            ))));
        }
        if !cfg!(target_os = "linux") {
            let missing = vec!["a sandbox backend: only Linux has one".to_owned()];
            if isolation.mode == IsolationMode::Enforce {
                return Err(SandboxError::Unsupported {
                    app_id: request.app_id.to_owned(),
                    missing,
                });
            }
            let mut report = SandboxReport::none(isolation.mode, "this platform has no sandbox");
            report.missing = missing;
            return Ok(Err(unconfined(report)));
        }
        let kernel = self.kernel();
        if isolation.mode == IsolationMode::Enforce
            && (kernel.landlock_abi < FULL_ABI || !kernel.seccomp)
        {
            // The policy as it would be, to name what this kernel lacks for it.
            let wanted = compile(
                isolation,
                &LaunchFacts {
                    app_dir: request.app_dir,
                    program: request.program,
                    home: request.app_dir,
                    tmp: request.app_dir,
                    proxy_port: None,
                    protected_ports: &self.protected_ports,
                    abi: kernel.landlock_abi,
                },
            );
            return Err(SandboxError::Unsupported {
                app_id: request.app_id.to_owned(),
                missing: wanted.missing_features(kernel.seccomp),
            });
        }
        Ok(Ok(kernel))
    }
}

/// The variables that point HTTP clients at the egress proxy `url`.
fn proxy_variables(url: &str) -> Vec<(OsString, OsString)> {
    [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .into_iter()
    .map(|name| (name.into(), url.into()))
    .collect()
}

/// `<state>/apps/<id>`.
fn app_folder(state: &Path, app_id: &str) -> PathBuf {
    state.join("apps").join(app_id)
}

fn make_private_dir(dir: &Path) -> Result<(), SandboxError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| SandboxError::StateFolder {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })
}

/// A bare program name found on `path` (the first executable file), else as given.
fn resolve_program(program: &Path, path: Option<&OsStr>) -> PathBuf {
    if program.is_absolute() || program.components().count() > 1 {
        return program.to_path_buf();
    }
    let Some(path) = path else {
        return program.to_path_buf();
    };
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| program.to_path_buf())
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// This process's hard limit of open files, which its children inherit and cannot raise.
fn open_files_hard_limit() -> u64 {
    #[cfg(target_os = "linux")]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .maximum
            .unwrap_or(u64::MAX)
    }
    #[cfg(not(target_os = "linux"))]
    {
        u64::MAX
    }
}

/// Runs `prober --mcpapp-sandbox-probe` and reads its answer; nothing on failure.
fn probe(prober: &Path) -> KernelSupport {
    let nothing = KernelSupport {
        landlock_abi: 0,
        seccomp: false,
    };
    // The one process this crate starts: the gateway's own executable, once, to ask the
    // kernel what it supports (docs/architecture.md).
    #[allow(clippy::disallowed_methods)]
    let output = std::process::Command::new(prober)
        .arg(PROBE_ARG)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match output {
        Ok(output) if output.status.success() => {
            serde_json::from_slice(&output.stdout).unwrap_or(nothing)
        }
        Ok(output) => {
            warn!(
                "the sandbox probe {} ended with {}; apps get no sandbox",
                prober.display(),
                output.status
            );
            nothing
        }
        Err(err) => {
            warn!(
                "cannot run the sandbox probe {}: {err}; apps get no sandbox",
                prober.display()
            );
            nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_programs_are_found_on_the_apps_path() {
        let found = resolve_program(
            Path::new("sh"),
            Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
        );
        assert!(found.is_absolute(), "{}", found.display());
        assert!(found.ends_with("sh"));
        assert_eq!(
            resolve_program(Path::new("no-such-program-x"), Some(OsStr::new("/bin"))),
            Path::new("no-such-program-x")
        );
        assert_eq!(
            resolve_program(Path::new("./bin/server"), Some(OsStr::new("/bin"))),
            Path::new("./bin/server")
        );
    }
}
