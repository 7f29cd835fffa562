//! From a validated app spec to what exactly to start: the command path, folder and
//! environment of a child, or the URL and headers of an HTTP session, with `env:NAME`
//! references resolved at launch.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpapp_manifest::{AppSpec, Launch};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::link::http::HttpSpec;
use crate::link::stdio::{ProcessTable, StderrTail, StdioSpawn};

/// Looks up an environment variable.
pub(crate) type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What to start.
#[derive(Debug, Clone)]
pub(crate) enum LaunchPlan {
    Stdio(StdioSpawn),
    Http(HttpSpec),
}

/// Resolves a value that may be an `env:NAME` reference. `what` names the setting in errors;
/// the value itself never appears in them.
fn resolve_value(value: &str, what: &str, env: &EnvLookup) -> Result<String, String> {
    match value.strip_prefix("env:") {
        Some(name) => {
            let name = name.trim();
            env(name).ok_or_else(|| format!("environment variable {name} (for {what}) is not set"))
        }
        None => Ok(value.to_owned()),
    }
}

/// A command with a path separator is relative to the app folder; a bare name is looked up
/// on `PATH` when the process starts.
fn command_path(command: &str, root: &Path) -> PathBuf {
    let path = Path::new(command);
    if path.is_absolute() || !command.contains(['/', '\\']) {
        path.to_path_buf()
    } else {
        root.join(path)
    }
}

/// Plans the launch of `spec`, whose manifest lives in `root`.
pub(crate) fn plan(
    spec: &AppSpec,
    root: &Path,
    env: &EnvLookup,
    stderr: &StderrTail,
    processes: &ProcessTable,
) -> Result<LaunchPlan, String> {
    match &spec.launch {
        Launch::Stdio {
            command,
            arguments,
            working_directory,
            environment,
        } => {
            let cwd = match working_directory {
                Some(dir) if Path::new(dir).is_absolute() => PathBuf::from(dir),
                Some(dir) => root.join(dir),
                None => root.to_path_buf(),
            };
            let env = environment
                .iter()
                .map(|(key, value)| {
                    resolve_value(value, &format!("environment {key}"), env)
                        .map(|v| (key.clone(), v))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(LaunchPlan::Stdio(StdioSpawn {
                program: command_path(command, root),
                args: arguments.clone(),
                cwd,
                env,
                stderr: stderr.clone(),
                processes: processes.clone(),
            }))
        }
        Launch::Http { url, headers } => {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                let header = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("'{name}' is not a valid HTTP header name"))?;
                let resolved = resolve_value(value, &format!("header {name}"), env)?;
                let mut value = HeaderValue::from_str(&resolved).map_err(|_| {
                    format!("the value of header {name} is not a valid HTTP header value")
                })?;
                // Keeps the value out of debug output.
                value.set_sensitive(true);
                map.insert(header, value);
            }
            Ok(LaunchPlan::Http(HttpSpec {
                url: url.clone(),
                headers: map,
            }))
        }
        // `Launch` may grow transports; one this crate does not know cannot be started.
        _ => Err("this transport is not supported by this version of the gateway".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_resolve_against_the_app_folder_only_with_a_separator() {
        let root = Path::new("/apps/x");
        assert_eq!(command_path("node", root), PathBuf::from("node"));
        assert_eq!(
            command_path("./bin/server", root),
            PathBuf::from("/apps/x/./bin/server")
        );
        assert_eq!(
            command_path("bin/server", root),
            PathBuf::from("/apps/x/bin/server")
        );
        assert_eq!(
            command_path("/usr/bin/env", root),
            PathBuf::from("/usr/bin/env")
        );
    }

    #[test]
    fn env_references_resolve_and_missing_ones_name_the_setting_not_the_value() {
        let env: EnvLookup = Arc::new(|name| (name == "TOKEN").then(|| "s3cret".to_owned()));
        assert_eq!(
            resolve_value("env:TOKEN", "header Authorization", &env).unwrap(),
            "s3cret"
        );
        assert_eq!(resolve_value("plain", "x", &env).unwrap(), "plain");
        let err = resolve_value("env:MISSING", "header Authorization", &env).unwrap_err();
        assert_eq!(
            err,
            "environment variable MISSING (for header Authorization) is not set"
        );
    }
}
