//! From a validated app spec to what exactly to start: the command path, folder and
//! environment of a child, or the URL and headers of an HTTP session, with `env:NAME`
//! references resolved at launch.
//!
//! A child's environment is built from nothing: the few variables of the gateway's own
//! environment that the configuration lets apps inherit (`McpApps.InheritEnvironment`, plus
//! the entry's list), never the gateway's credentials, then the app's own `environment`.
//! Which `env:` references a manifest may make was settled by discovery; here they resolve,
//! and so do `secret:NAME` references, through the gateway's secret store, for this app only.
//!
//! A stdio app's command line then goes through the sandbox (`mcpapp-sandbox`): unless its
//! isolation is off, its start carries a confinement that the forked child applies to itself
//! before it executes the app, with the app's `HOME` and `TMPDIR` (and its egress proxy) set
//! over its environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use http::header::{HeaderMap, HeaderName, HeaderValue};
use mcpapp_discovery::{EnvNamePatterns, is_gateway_credential};
use mcpapp_manifest::{
    AppSpec, DEFAULT_INHERIT_ENVIRONMENT, IsolationMode, Launch, McpAppsConfig, SECRET_PREFIX,
    SecretResolver,
};
use mcpapp_sandbox::{LaunchRequest, Sandbox, SandboxReport};

use crate::link::http::HttpSpec;
use crate::link::stdio::{ProcessTable, StderrTail, StdioSpawn};

/// Looks up an environment variable.
pub(crate) type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where children's environments come from: the gateway's environment (or a fixed one, for
/// tests) and how `env:` references are read. What each app may inherit of it is part of the
/// app's own settings ([`Inheritance`]), so that a reload can change it app by app.
pub(crate) struct Environment {
    pub(crate) lookup: EnvLookup,
    /// `None`: the process environment, read at each launch.
    pub(crate) base: Option<Vec<(OsString, OsString)>>,
    /// The last `InheritEnvironment` list compiled, with its patterns: every app shares the
    /// global list, and compiling it (a glob set) cost more than the rest of a launch plan.
    global_patterns: Mutex<Option<(Vec<String>, Arc<EnvNamePatterns>)>>,
    /// Where `secret:NAME` values come from; without one they cannot start.
    pub(crate) secrets: Option<Arc<dyn SecretResolver>>,
    /// Confines stdio apps; without it they run unconfined (and say so).
    pub(crate) sandbox: Option<Arc<Sandbox>>,
}

impl std::fmt::Debug for Environment {
    // Values stay out of debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment")
            .field("fixed_base", &self.base.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Environment {
    /// The process environment.
    fn default() -> Self {
        Self {
            lookup: Arc::new(|name| std::env::var(name).ok()),
            base: None,
            global_patterns: Mutex::new(None),
            secrets: None,
            sandbox: None,
        }
    }
}

/// The names of the gateway's environment one app inherits: `McpApps.InheritEnvironment`
/// and its entry's list. Compared by a reload, so a changed list restarts exactly the apps
/// it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inheritance {
    global: Vec<String>,
    entry: Vec<String>,
}

impl Default for Inheritance {
    /// The default allowlist, nothing per entry.
    fn default() -> Self {
        Self {
            global: DEFAULT_INHERIT_ENVIRONMENT
                .iter()
                .map(|n| (*n).to_owned())
                .collect(),
            entry: Vec::new(),
        }
    }
}

impl Inheritance {
    /// What app `id` inherits under `config`.
    pub(crate) fn from_config(config: &McpAppsConfig, id: &str) -> Self {
        Self {
            global: config.inherit_environment.clone(),
            entry: config
                .entries
                .get(id)
                .map(|entry| entry.inherit_environment.clone())
                .unwrap_or_default(),
        }
    }
}

impl Environment {
    /// The compiled `InheritEnvironment` patterns of `list`, compiled once while the list
    /// stays the same.
    fn global_patterns(&self, list: &[String]) -> Result<Arc<EnvNamePatterns>, String> {
        let mut cached = self
            .global_patterns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((names, patterns)) = cached.as_ref()
            && names.as_slice() == list
        {
            return Ok(Arc::clone(patterns));
        }
        let patterns =
            Arc::new(EnvNamePatterns::new("InheritEnvironment", list).map_err(|e| e.to_string())?);
        *cached = Some((list.to_vec(), Arc::clone(&patterns)));
        Ok(patterns)
    }

    /// The variables app `id` inherits under `inheritance`, in the gateway's order.
    fn inherited(
        &self,
        id: &str,
        inheritance: &Inheritance,
    ) -> Result<Vec<(OsString, OsString)>, String> {
        let global = self.global_patterns(&inheritance.global)?;
        let entry = if inheritance.entry.is_empty() {
            None
        } else {
            Some(
                EnvNamePatterns::new(
                    &format!("Entries.{id}.InheritEnvironment"),
                    &inheritance.entry,
                )
                .map_err(|e| e.to_string())?,
            )
        };
        let wanted = |name: &OsString| {
            // A name that is not UTF-8 cannot be matched by a pattern someone wrote; skip it.
            name.to_str().is_some_and(|name| {
                !is_gateway_credential(name)
                    && (global.matches(name) || entry.as_ref().is_some_and(|e| e.matches(name)))
            })
        };
        Ok(match &self.base {
            Some(base) => base.iter().filter(|(k, _)| wanted(k)).cloned().collect(),
            None => std::env::vars_os().filter(|(k, _)| wanted(k)).collect(),
        })
    }
}

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

/// Resolves `env:` and `secret:` references of app `spec` (in `root`); `secret:NAME` is the
/// app's own secret, which only the store can give, and only to this app in this folder.
fn resolve_app_value(
    value: &str,
    what: &str,
    env: &Environment,
    spec: &AppSpec,
    root: &Path,
) -> Result<String, String> {
    let Some(name) = value.strip_prefix(SECRET_PREFIX) else {
        return resolve_value(value, what, &env.lookup);
    };
    let secrets = env.secrets.as_ref().ok_or_else(|| {
        format!("{what} refers to secret {name}, but this gateway has no secret store")
    })?;
    secrets
        .resolve(spec.id.as_str(), root, name.trim())
        .map_err(|e| format!("{what}: {e}"))
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

/// The report of a stdio app started by a supervisor without a sandbox.
fn no_sandbox(mode: IsolationMode) -> SandboxReport {
    match mode {
        IsolationMode::Off => SandboxReport::none(
            IsolationMode::Off,
            "isolation is off for this app (Isolation.Mode)",
        ),
        mode => SandboxReport::none(
            mode,
            "this supervisor has no sandbox (SupervisorBuilder::sandbox)",
        ),
    }
}

/// Plans the launch of `spec`, whose manifest lives in `root`, inheriting what
/// `inheritance` names.
pub(crate) fn plan(
    spec: &AppSpec,
    root: &Path,
    env: &Environment,
    inheritance: &Inheritance,
    stderr: &StderrTail,
    processes: &ProcessTable,
) -> Result<LaunchPlan, String> {
    match &spec.launch {
        Launch::Stdio {
            command,
            arguments,
            working_directory,
            environment: app_env,
        } => {
            let cwd = match working_directory {
                Some(dir) if Path::new(dir).is_absolute() => PathBuf::from(dir),
                Some(dir) => root.join(dir),
                None => root.to_path_buf(),
            };
            let own = app_env
                .iter()
                .map(|(key, value)| {
                    resolve_app_value(value, &format!("environment {key}"), env, spec, root)
                        .map(|v| (OsString::from(key), OsString::from(v)))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let args = arguments
                .iter()
                .enumerate()
                .map(|(i, arg)| {
                    if arg.starts_with(SECRET_PREFIX) {
                        resolve_app_value(arg, &format!("argument {}", i + 1), env, spec, root)
                    } else {
                        Ok(arg.clone())
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            // The app's own values win over inherited ones of the same name.
            let mut env_vars = env.inherited(spec.id.as_str(), inheritance)?;
            env_vars.retain(|(k, _)| !own.iter().any(|(o, _)| o == k));
            env_vars.extend(own);
            let program = command_path(command, root);
            let Some(sandbox) = &env.sandbox else {
                return Ok(LaunchPlan::Stdio(StdioSpawn {
                    program,
                    args: args.iter().map(OsString::from).collect(),
                    cwd,
                    env: env_vars,
                    stderr: stderr.clone(),
                    processes: processes.clone(),
                    sandbox: Box::new(no_sandbox(spec.isolation.mode)),
                    confinement: None,
                    proxy: None,
                }));
            };
            let path = env_vars.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
            let prepared = sandbox
                .prepare(&LaunchRequest {
                    app_id: spec.id.as_str(),
                    isolation: &spec.isolation,
                    app_dir: root,
                    program: &program,
                    args: &args,
                    path: path.map(OsString::as_os_str),
                })
                .map_err(|e| e.to_string())?;
            // The sandbox's HOME, TMPDIR and proxy settings win over inherited and own ones.
            env_vars.retain(|(k, _)| !prepared.env.iter().any(|(s, _)| s == k));
            env_vars.extend(prepared.env);
            Ok(LaunchPlan::Stdio(StdioSpawn {
                program: prepared.program,
                args: prepared.args,
                cwd,
                env: env_vars,
                stderr: stderr.clone(),
                processes: processes.clone(),
                sandbox: Box::new(prepared.report),
                confinement: prepared.confinement,
                proxy: prepared.proxy,
            }))
        }
        Launch::Http { url, headers } => {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                let header = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("'{name}' is not a valid HTTP header name"))?;
                let resolved =
                    resolve_app_value(value, &format!("header {name}"), env, spec, root)?;
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
                // The app's task adds its authorizer, if any.
                auth: None,
            }))
        }
        // `Launch` may grow transports; one this crate does not know cannot be started.
        _ => Err("this transport is not supported by this version of the gateway".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpapp_manifest::McpAppEntryConfig;

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

    #[test]
    fn children_inherit_only_the_listed_names_and_never_credentials() {
        let base: Vec<(OsString, OsString)> = [
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("HOME", "/root"),
            ("MCPAPP_TOKEN", "t"),
            ("OPENAI_API_KEY", "k"),
            ("OTHER_SECRET", "s"),
            ("NODE_OPTIONS", "--x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let env = Environment {
            base: Some(base),
            ..Environment::default()
        };
        let mut config = McpAppsConfig::default();
        let names = |config: &McpAppsConfig, id: &str| -> Vec<String> {
            env.inherited(id, &Inheritance::from_config(config, id))
                .unwrap()
                .into_iter()
                .map(|(k, _)| k.into_string().unwrap())
                .collect()
        };
        assert_eq!(names(&config, "a"), ["PATH", "LC_ALL", "HOME"]);
        config.entries.insert(
            "b".into(),
            McpAppEntryConfig {
                inherit_environment: vec!["NODE_*".into(), "MCPAPP_TOKEN".into()],
                ..McpAppEntryConfig::default()
            },
        );
        assert_eq!(
            names(&config, "b"),
            ["PATH", "LC_ALL", "HOME", "NODE_OPTIONS"]
        );
        assert_eq!(names(&config, "a"), ["PATH", "LC_ALL", "HOME"]);
        config.inherit_environment = vec!["*".into()];
        assert_eq!(
            names(&config, "a"),
            ["PATH", "LC_ALL", "HOME", "OTHER_SECRET", "NODE_OPTIONS"]
        );
    }

    /// A resolver that knows one secret of app `a` in `/apps/a`.
    #[derive(Debug)]
    struct OneSecret;

    impl SecretResolver for OneSecret {
        fn resolve(
            &self,
            app: &str,
            root: &Path,
            name: &str,
        ) -> Result<String, mcpapp_manifest::SecretUnavailable> {
            if app == "a" && root == Path::new("/apps/a") && name == "TOKEN" {
                Ok("s3cret".to_owned())
            } else {
                Err(mcpapp_manifest::SecretUnavailable(format!(
                    "app {app} has no secret {name}"
                )))
            }
        }
    }

    #[test]
    fn secret_references_resolve_for_their_own_app_only() {
        let spec = |id: &str| {
            mcpapp_manifest::McpAppManifest::parse(&format!(
                r#"{{"id": "{id}", "command": "x", "arguments": ["--key", "secret:TOKEN"],
                    "environment": {{"K": "secret:TOKEN"}}}}"#
            ))
            .unwrap()
            .manifest
            .validate()
            .unwrap()
        };
        let mut env = Environment {
            base: Some(Vec::new()),
            ..Environment::default()
        };
        let plan_of = |env: &Environment, id: &str, root: &str| {
            plan(
                &spec(id),
                Path::new(root),
                env,
                &Inheritance::default(),
                &StderrTail::default(),
                &ProcessTable::default(),
            )
        };
        let err = plan_of(&env, "a", "/apps/a").unwrap_err();
        assert!(err.contains("no secret store"), "{err}");
        env.secrets = Some(Arc::new(OneSecret));
        let LaunchPlan::Stdio(spawn) = plan_of(&env, "a", "/apps/a").unwrap() else {
            panic!("a stdio plan")
        };
        assert_eq!(spawn.args, ["--key", "s3cret"]);
        assert_eq!(spawn.env, [(OsString::from("K"), OsString::from("s3cret"))]);
        // Another app, or the same id in another folder, gets nothing.
        for (id, root) in [("b", "/apps/a"), ("a", "/elsewhere/a")] {
            let err = plan_of(&env, id, root).unwrap_err();
            assert!(
                err.contains("has no secret TOKEN") && !err.contains("s3cret"),
                "{err}"
            );
        }
    }
}
