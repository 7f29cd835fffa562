//! Vendoring: installing a package into the app's folder with its own package manager, so
//! that the app starts offline and at once. npm packages go into `<runtime>/node_modules` with
//! a lockfile and without install scripts (unless allowed); PyPI packages into a virtual
//! environment `<runtime>/venv`, made with `uv` when it is on `PATH`, else `python3 -m venv`
//! and pip.
//!
//! The supervisor starts apps; this module starts only package managers, always without a
//! shell, with arguments as a list, in a process group of their own that dies with the
//! installer, with the gateway's credentials removed from their environment.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::error::InstallError;

/// How long one package manager run may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// How a package manager is run.
#[derive(Debug, Clone, Default)]
pub struct VendorOptions {
    /// Let npm run the packages' install scripts (off by default: scripts run arbitrary code
    /// at install time).
    pub allow_scripts: bool,
    /// A folder for package managers' download caches (npm, pip and uv), instead of their
    /// defaults.
    pub cache_dir: Option<PathBuf>,
}

/// Finds `program` on `PATH`.
pub(crate) fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
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

/// `program` on `PATH`, or an error naming what to install.
pub(crate) fn require(program: &str, what: &str, hint: &str) -> Result<PathBuf, InstallError> {
    find_program(program).ok_or_else(|| InstallError::MissingProgram {
        program: program.to_owned(),
        what: what.to_owned(),
        hint: hint.to_owned(),
    })
}

/// What to install to get Node.js and npm.
pub(crate) const NODE_HINT: &str =
    "install Node.js 20 or later with npm (Debian: apt-get install nodejs npm)";
/// What to install to get Python.
pub(crate) const PYTHON_HINT: &str =
    "install Python 3.10 or later with venv (Debian: apt-get install python3 python3-venv), or uv";

/// A command line as shown to the operator.
pub(crate) fn show(program: &Path, args: &[OsString]) -> String {
    std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| {
            let a = a.to_string_lossy();
            if a.is_empty() || a.contains([' ', '"', '\'']) {
                format!("'{a}'")
            } else {
                a.into_owned()
            }
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs a package manager and waits for it; `progress` gets each line it writes.
pub(crate) async fn run(
    program: &Path,
    args: &[OsString],
    cwd: &Path,
    env: &[(String, OsString)],
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), InstallError> {
    let shown = show(program, args);
    progress(&format!("$ {shown}"));
    // The one place outside the supervisor that starts a process: a package manager, with its
    // arguments as a list (no shell), killed with its group if the installer goes away.
    #[allow(clippy::disallowed_methods)]
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    for name in mcpapp_manifest::GATEWAY_CREDENTIAL_ENV {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().map_err(|e| InstallError::Command {
        command: shown.clone(),
        status: format!("it could not start: {e}"),
        output: String::new(),
    })?;
    let tail = std::sync::Mutex::new(VecDeque::with_capacity(40));
    let keep = |line: String| {
        progress(&line);
        let mut tail = tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if tail.len() == 40 {
            tail.pop_front();
        }
        tail.push_back(line);
    };
    let stdout = child.stdout.take().map(|s| BufReader::new(s).lines());
    let stderr = child.stderr.take().map(|s| BufReader::new(s).lines());
    let read = async {
        let out = async {
            if let Some(mut lines) = stdout {
                while let Ok(Some(line)) = lines.next_line().await {
                    keep(line);
                }
            }
        };
        let err = async {
            if let Some(mut lines) = stderr {
                while let Ok(Some(line)) = lines.next_line().await {
                    keep(line);
                }
            }
        };
        tokio::join!(out, err);
        child.wait().await
    };
    let status = match tokio::time::timeout(COMMAND_TIMEOUT, read).await {
        Ok(Ok(status)) if status.success() => return Ok(()),
        Ok(Ok(status)) => status.to_string(),
        Ok(Err(e)) => format!("waiting for it failed: {e}"),
        Err(_) => format!("it did not finish within {} s", COMMAND_TIMEOUT.as_secs()),
    };
    let output = tail
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .collect::<Vec<_>>()
        .join("\n");
    Err(InstallError::Command {
        command: shown,
        status,
        output,
    })
}

fn os(items: &[&str]) -> Vec<OsString> {
    items.iter().map(OsString::from).collect()
}

/// The npm command line that installs `name@version` into `runtime`.
pub(crate) fn npm_command(
    runtime: &Path,
    name: &str,
    version: &str,
    registry: Option<&str>,
    options: &VendorOptions,
) -> Vec<OsString> {
    let mut args = os(&["install", "--prefix"]);
    args.push(runtime.into());
    args.extend(os(&[
        "--omit=dev",
        "--no-audit",
        "--no-fund",
        "--save-exact",
        "--no-update-notifier",
    ]));
    if !options.allow_scripts {
        args.push("--ignore-scripts".into());
    }
    if let Some(registry) = registry {
        args.push(format!("--registry={registry}").into());
    }
    args.push(format!("{name}@{version}").into());
    args
}

/// The environment for package managers: caches where the operator wants them.
fn cache_env(options: &VendorOptions) -> Vec<(String, OsString)> {
    match &options.cache_dir {
        Some(dir) => vec![
            ("npm_config_cache".to_owned(), dir.join("npm").into()),
            ("PIP_CACHE_DIR".to_owned(), dir.join("pip").into()),
            ("UV_CACHE_DIR".to_owned(), dir.join("uv").into()),
        ],
        None => Vec::new(),
    }
}

/// Installs npm package `name@version` into `runtime` (created); returns the program's path
/// relative to `runtime`.
pub(crate) async fn npm_install(
    runtime: &Path,
    name: &str,
    version: &str,
    bin: &str,
    registry: Option<&str>,
    options: &VendorOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<PathBuf, InstallError> {
    let npm = require("npm", &format!("npm package {name}"), NODE_HINT)?;
    require("node", &format!("npm package {name}"), NODE_HINT)?;
    std::fs::create_dir_all(runtime).map_err(InstallError::io(runtime))?;
    // A package.json of its own, so npm installs here and not into a parent project.
    let package_json = runtime.join("package.json");
    std::fs::write(
        &package_json,
        "{\n  \"private\": true,\n  \"description\": \"Installed by mcpapp-gateway install\"\n}\n",
    )
    .map_err(InstallError::io(&package_json))?;
    let args = npm_command(runtime, name, version, registry, options);
    run(&npm, &args, runtime, &cache_env(options), progress).await?;
    let program = PathBuf::from("node_modules/.bin").join(bin);
    if !runtime.join(&program).exists() {
        return Err(InstallError::Unsupported(format!(
            "npm installed {name}@{version} but its program {bin} is not in {}",
            runtime.join("node_modules/.bin").display()
        )));
    }
    Ok(program)
}

/// Installs PyPI project `name==version` into a virtual environment `runtime/venv`; returns
/// the program's path relative to `runtime`.
pub(crate) async fn pypi_install(
    runtime: &Path,
    name: &str,
    version: &str,
    index: Option<&str>,
    options: &VendorOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<PathBuf, InstallError> {
    std::fs::create_dir_all(runtime).map_err(InstallError::io(runtime))?;
    let venv = runtime.join("venv");
    let python = venv.join("bin/python");
    let spec = format!("{name}=={version}");
    let mut env = cache_env(options);
    if let Some(uv) = find_program("uv") {
        // Never let uv download a Python build of its own.
        env.push(("UV_PYTHON_DOWNLOADS".to_owned(), "never".into()));
        let mut args = os(&["venv", "--quiet"]);
        args.push(venv.clone().into());
        run(&uv, &args, runtime, &env, progress).await?;
        let mut args = os(&["pip", "install", "--python"]);
        args.push(python.clone().into());
        if let Some(index) = index {
            args.push(format!("--default-index={index}/simple").into());
        }
        args.push(spec.into());
        run(&uv, &args, runtime, &env, progress).await?;
    } else {
        let python3 = require("python3", &format!("PyPI project {name}"), PYTHON_HINT)?;
        let mut args = os(&["-m", "venv"]);
        args.push(venv.clone().into());
        run(&python3, &args, runtime, &env, progress).await?;
        let mut args = os(&[
            "-m",
            "pip",
            "install",
            "--no-input",
            "--disable-pip-version-check",
            "--progress-bar=off",
        ]);
        if let Some(index) = index {
            args.push(format!("--index-url={index}/simple").into());
        }
        args.push(spec.into());
        run(&python, &args, runtime, &env, progress).await?;
    }
    let script = console_script(&venv, name)?;
    Ok(PathBuf::from("venv/bin").join(script))
}

/// `name` normalised as PEP 503 does.
fn normalize(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// The console script of the installed project `name`: the one named like the project, else
/// its only one.
fn console_script(venv: &Path, name: &str) -> Result<String, InstallError> {
    let lib = venv.join("lib");
    let site = std::fs::read_dir(&lib)
        .map_err(InstallError::io(&lib))?
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .ok_or_else(|| {
            InstallError::Unsupported(format!("no site-packages in {}", lib.display()))
        })?;
    let wanted = normalize(name);
    let dist_info = std::fs::read_dir(&site)
        .map_err(InstallError::io(&site))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".dist-info"))
                .and_then(|n| n.rsplit_once('-'))
                .is_some_and(|(project, _)| normalize(project) == wanted)
        })
        .ok_or_else(|| {
            InstallError::Unsupported(format!("{name} is not among the installed projects"))
        })?;
    let entry_points =
        std::fs::read_to_string(dist_info.join("entry_points.txt")).unwrap_or_default();
    let scripts = console_scripts(&entry_points);
    if let Some(script) = scripts.iter().find(|s| normalize(s) == wanted) {
        return Ok(script.clone());
    }
    match scripts.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(InstallError::Unsupported(format!(
            "PyPI project {name} has no console script to run"
        ))),
        several => Err(InstallError::Unsupported(format!(
            "PyPI project {name} has several console scripts ({}); none is named like the project",
            several.join(", ")
        ))),
    }
}

/// The names in the `[console_scripts]` section of an `entry_points.txt`.
fn console_scripts(text: &str) -> Vec<String> {
    let mut in_section = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_section = line == "[console_scripts]";
        } else if in_section && let Some((name, _)) = line.split_once('=') {
            out.push(name.trim().to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_scripts_are_read_from_their_section() {
        let text = "[console_scripts]\nmcp-server-time = mcp_server_time:main\n\n[other]\nx = y\n";
        assert_eq!(console_scripts(text), ["mcp-server-time"]);
        assert_eq!(normalize("Mcp_Server.Time"), "mcp-server-time");
    }

    #[test]
    fn npm_runs_without_scripts_unless_allowed() {
        let args = npm_command(
            Path::new("/r"),
            "@s/x",
            "1.0.0",
            None,
            &VendorOptions::default(),
        );
        let shown = show(Path::new("npm"), &args);
        assert_eq!(
            shown,
            "npm install --prefix /r --omit=dev --no-audit --no-fund --save-exact --no-update-notifier --ignore-scripts @s/x@1.0.0"
        );
        let allowed = VendorOptions {
            allow_scripts: true,
            ..VendorOptions::default()
        };
        let args = npm_command(
            Path::new("/r"),
            "x",
            "1",
            Some("https://r.example"),
            &allowed,
        );
        assert!(!show(Path::new("npm"), &args).contains("--ignore-scripts"));
        assert!(show(Path::new("npm"), &args).contains("--registry=https://r.example"));
    }
}
