//! The sandbox settings of each app, settled at discovery: the operator's grants
//! (`McpApps.Isolation` and each entry's) resolved to absolute paths and checked against what
//! the sandbox protects, and each manifest's `permissions` request checked against what the
//! operator allows manifests to ask for.
//!
//! Two kinds of refusal, as for `env:` references:
//! - a grant in the configuration that would expose what the sandbox protects (the whole file
//!   system or home folder, the home folder's dot-files, all of `/etc`, the configuration's
//!   folder, the gateway's state, apps' folders, the system's programs for writing) is a
//!   configuration error naming the setting, file, line and column: the gateway does not start
//!   with it;
//! - a manifest's request that is not granted, or that asks for such a thing, makes that app
//!   invalid with a diagnostic at the request naming the setting that would grant it. The
//!   rest of the scan goes on.
//!
//! Landlock grants by inclusion and cannot deny inside an allowed tree, so "containing" a
//! protected path is as bad as naming it; paths are compared as written and after following
//! links, so a link to `/` is `/`.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use mcpapp_manifest::{
    AppIsolation, HostPort, IsolationConfig, IsolationMode, McpAppEntryConfig, McpAppManifest,
    McpAppsConfig, NetworkAccess, ResourceLimits, quoted,
};

use crate::error::ConfigError;
use crate::filter::MAX_PATTERN_CHARS;

/// Folders in the home folder where credentials live: nothing inside them is ever granted.
const CREDENTIAL_DIRS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".config/gh",
    ".password-store",
    ".local/share/keyrings",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
];

/// System files holding secrets: never granted, nor anything containing them.
const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/security",
];

/// Folders of the system's programs and settings: never granted for writing.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/opt",
    "/proc", "/sys", "/dev", "/var/lib", "/var/run", "/run",
];

/// Folders shared by every program: never granted whole.
const SHARED_TEMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// How a path grant is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrantKind {
    Read,
    Execute,
    Write,
}

impl GrantKind {
    fn key(self) -> &'static str {
        match self {
            Self::Read => "Read",
            Self::Execute => "Execute",
            Self::Write => "Write",
        }
    }
}

/// What the sandbox protects, resolved once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Protected {
    pub(crate) home: Option<PathBuf>,
    pub(crate) config_dir: Option<PathBuf>,
    pub(crate) state_dir: Option<PathBuf>,
    /// The gateway's secret store (`McpApps.SecretsFile`, or its default).
    pub(crate) secrets_file: Option<PathBuf>,
    pub(crate) roots: Vec<PathBuf>,
    pub(crate) executable: Option<PathBuf>,
}

/// `a` is `b` or one of its ancestors.
fn contains(a: &Path, b: &Path) -> bool {
    b.starts_with(a)
}

/// Makes an absolute path without `.` and `..` components (lexically).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The path as written and, when it exists, where its links lead.
fn forms(path: &Path) -> Vec<PathBuf> {
    let mut forms = vec![normalize(path)];
    if let Ok(real) = std::fs::canonicalize(path)
        && !forms.contains(&real)
    {
        forms.push(real);
    }
    forms
}

impl Protected {
    /// Why `path` may not be granted as `kind`, if it may not.
    pub(crate) fn refusal(&self, path: &Path, kind: GrantKind) -> Option<String> {
        forms(path).iter().find_map(|p| self.refusal_of(p, kind))
    }

    fn refusal_of(&self, path: &Path, kind: GrantKind) -> Option<String> {
        if path.parent().is_none() {
            return Some("it is the whole file system".to_owned());
        }
        let each = |list: &[PathBuf]| list.iter().flat_map(|p| forms(p)).collect::<Vec<_>>();
        if let Some(home) = &self.home {
            for home in forms(home) {
                if contains(path, &home) {
                    return Some(format!(
                        "it holds the whole home folder {} (its dot-files keep credentials)",
                        home.display()
                    ));
                }
                if let Ok(inside) = path.strip_prefix(&home) {
                    let first = inside.components().next();
                    let dot =
                        first.is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('.'));
                    if dot && inside.components().count() == 1 {
                        return Some(
                            "it is a dot-file or dot-folder of the home folder, where settings and credentials live"
                                .to_owned(),
                        );
                    }
                    if CREDENTIAL_DIRS.iter().any(|c| inside.starts_with(c)) {
                        return Some("it is inside a folder of credentials".to_owned());
                    }
                }
            }
        }
        if path == Path::new("/etc") {
            return Some("it is all of /etc".to_owned());
        }
        if SYSTEM_SECRETS
            .iter()
            .any(|s| contains(path, Path::new(s)) || path.starts_with(s))
        {
            return Some("it holds the system's secrets (passwords, sudo and SSH keys)".to_owned());
        }
        if let Some(config) = &self.config_dir
            && forms(config).iter().any(|c| contains(path, c))
        {
            return Some("it holds the gateway's configuration file".to_owned());
        }
        if let Some(secrets) = &self.secrets_file
            && forms(secrets).iter().any(|s| contains(path, s))
        {
            return Some("it holds the gateway's secret store (McpApps.SecretsFile)".to_owned());
        }
        if let Some(state) = &self.state_dir
            && forms(state)
                .iter()
                .any(|s| contains(path, s) || path.starts_with(s))
        {
            return Some(
                "it is in the gateway's state directory, which holds every app's data".to_owned(),
            );
        }
        if each(&self.roots)
            .iter()
            .any(|r| contains(path, r) || path.starts_with(r))
        {
            return Some(
                "it is in a discovery path, among apps' folders (an app already reads its own folder)"
                    .to_owned(),
            );
        }
        if SHARED_TEMP.iter().any(|t| contains(path, Path::new(t))) {
            return Some(
                "it is a whole shared temporary folder (the app has its own TMPDIR)".to_owned(),
            );
        }
        if kind == GrantKind::Write {
            if SYSTEM_DIRS
                .iter()
                .any(|d| contains(path, Path::new(d)) || path.starts_with(d))
            {
                return Some(
                    "it is among the system's programs, settings or kernel files".to_owned(),
                );
            }
            if let Some(exe) = &self.executable
                && forms(exe).iter().any(|e| contains(path, e))
            {
                return Some("it holds the gateway's executable".to_owned());
            }
        }
        None
    }
}

/// Resolves a path written in configuration: `env:NAME`, `~`, `~/...`, absolute, or relative
/// to `base`.
pub(crate) fn resolve_config_path(
    raw: &str,
    base: &Path,
    home: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    let text = match raw.strip_prefix("env:") {
        Some(name) => env(name.trim())
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| format!("environment variable {} is not set", name.trim()))?,
        None => raw.to_owned(),
    };
    let text = text.trim();
    if text.is_empty() {
        return Err("the path is empty".to_owned());
    }
    let path = expand_home(text, home)?;
    Ok(normalize(&if path.is_absolute() {
        path
    } else {
        base.join(path)
    }))
}

/// `~` and `~/...` against `home`.
fn expand_home(text: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    if text == "~" || text.starts_with("~/") {
        let home = home.ok_or("it starts with ~ but the gateway has no HOME")?;
        Ok(home.join(text.trim_start_matches('~').trim_start_matches('/')))
    } else {
        Ok(PathBuf::from(text))
    }
}

/// One compiled list of globs.
#[derive(Debug, Clone)]
struct Globs {
    set: GlobSet,
    empty: bool,
}

impl Globs {
    fn new(
        setting: &str,
        patterns: &[String],
        separator: bool,
        expand: impl Fn(&str) -> String,
    ) -> Result<Self, ConfigError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let invalid = |reason: String| ConfigError::InvalidPattern {
                list: setting.to_owned(),
                pattern: pattern.clone(),
                reason,
            };
            if pattern.chars().count() > MAX_PATTERN_CHARS {
                return Err(invalid(format!(
                    "it is longer than {MAX_PATTERN_CHARS} characters"
                )));
            }
            let glob = GlobBuilder::new(&expand(pattern.trim()))
                .literal_separator(separator)
                .case_insensitive(!separator)
                .backslash_escape(true)
                .build()
                .map_err(|e| invalid(e.kind().to_string()))?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| ConfigError::InvalidPattern {
            list: setting.to_owned(),
            pattern: String::new(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            set,
            empty: patterns.is_empty(),
        })
    }

    fn matches(&self, text: &str) -> bool {
        !self.empty && self.set.is_match(text)
    }
}

/// One level of settings (`McpApps.Isolation` or an entry's), resolved.
#[derive(Debug, Clone)]
struct Level {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    execute: Vec<PathBuf>,
    allow_read: Globs,
    allow_write: Globs,
    allow_network: Globs,
}

/// A request of a manifest that is not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The request's place in the manifest (`permissions.filesystem.read[0]`).
    pub(crate) field: String,
    pub(crate) message: String,
}

/// The sandbox settings of every app, compiled once per discovery.
#[derive(Debug, Clone)]
pub(crate) struct IsolationPolicy {
    config: IsolationConfig,
    global: Level,
    entries: HashMap<String, Level>,
    entry_configs: HashMap<String, IsolationConfig>,
    protected: Protected,
    home: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    /// The gateway's `PATH`, where apps' bare commands and `#!/usr/bin/env` names are found.
    path: Option<String>,
}

/// Where the configuration came from, for the position of a refused grant.
pub(crate) struct Source<'a> {
    pub(crate) file: Option<&'a crate::ConfigFile>,
    pub(crate) base: &'a Path,
    pub(crate) env: &'a dyn Fn(&str) -> Option<String>,
}

/// The gateway's state directory: configured (`StateDirectory`), else the user's state
/// folder's `mcpapp`, else none (the gateway then uses a private temporary folder).
fn state_directory(
    config: &McpAppsConfig,
    source: &Source<'_>,
    home: Option<&Path>,
) -> Result<Option<PathBuf>, ConfigError> {
    Ok(match &config.state_directory {
        Some(raw) => Some(
            resolve_config_path(raw, source.base, home, source.env).map_err(|reason| {
                grant_error(
                    source,
                    &["StateDirectory"],
                    raw,
                    format!("cannot be resolved: {reason}"),
                )
            })?,
        ),
        None => (source.env)("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|p| p.join("mcpapp"))
            // A home folder that is not there (`/nonexistent` for system users) gives no
            // default; the gateway then uses a private temporary folder.
            .or_else(|| {
                home.filter(|h| h.is_dir())
                    .map(|h| h.join(".local/state/mcpapp"))
            }),
    })
}

/// Where the secret store is, as the gateway finds it: configured (relative to the
/// configuration's folder), else `mcpapp/secrets.json` in the user's state folder.
fn secrets_file(
    config: &McpAppsConfig,
    source: &Source<'_>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    match config.secrets_file.as_deref().map(str::trim) {
        Some(file) if !file.is_empty() => Some(normalize(&source.base.join(file))),
        _ => (source.env)("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".local/state")))
            .map(|state| state.join("mcpapp/secrets.json")),
    }
}

/// One level of grants (`McpApps.Isolation`, or an entry's under `prefix`), resolved and
/// checked against what the sandbox protects.
fn level(
    source: &Source<'_>,
    home: Option<&Path>,
    protected: &Protected,
    prefix: &[&str],
    isolation: &IsolationConfig,
) -> Result<Level, ConfigError> {
    let setting = prefix.join(".");
    let paths = |kind: GrantKind, list: &[String]| -> Result<Vec<PathBuf>, ConfigError> {
        list.iter()
            .enumerate()
            .map(|(i, raw)| {
                let index = i.to_string();
                let at: Vec<&str> = prefix
                    .iter()
                    .copied()
                    .chain(["Isolation", kind.key(), index.as_str()])
                    .collect();
                let path =
                    resolve_config_path(raw, source.base, home, source.env).map_err(|reason| {
                        grant_error(source, &at, raw, format!("cannot be resolved: {reason}"))
                    })?;
                match protected.refusal(&path, kind) {
                    Some(reason) => Err(grant_error(
                        source,
                        &at,
                        raw,
                        format!("is refused: {reason}"),
                    )),
                    None => Ok(path),
                }
            })
            .collect()
    };
    let grants = &isolation.allow_manifest_permissions;
    let name = |key: &str| {
        if setting.is_empty() {
            format!("Isolation.AllowManifestPermissions.{key}")
        } else {
            format!("{setting}.Isolation.AllowManifestPermissions.{key}")
        }
    };
    let expand =
        |p: &str| expand_home(p, home).map_or_else(|_| p.to_owned(), |p| p.display().to_string());
    Ok(Level {
        read: paths(GrantKind::Read, &isolation.read)?,
        write: paths(GrantKind::Write, &isolation.write)?,
        execute: paths(GrantKind::Execute, &isolation.execute)?,
        allow_read: Globs::new(&name("Read"), &grants.read, true, expand)?,
        allow_write: Globs::new(&name("Write"), &grants.write, true, expand)?,
        allow_network: Globs::new(&name("Network"), &grants.network, false, |p| p.to_owned())?,
    })
}

impl IsolationPolicy {
    /// Resolves and checks every grant of `config`.
    ///
    /// # Errors
    /// [`ConfigError::Grant`] for a grant that cannot be resolved or that would expose what
    /// the sandbox protects, [`ConfigError::InvalidPattern`] for a pattern that is not a glob.
    pub(crate) fn new(
        config: &McpAppsConfig,
        source: &Source<'_>,
        roots: Vec<PathBuf>,
    ) -> Result<Self, ConfigError> {
        let home = (source.env)("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h.parent().is_some());
        let state_dir = state_directory(config, source, home.as_deref())?;
        let protected = Protected {
            home: home.clone(),
            config_dir: source.file.map(|f| f.dir().to_path_buf()),
            state_dir: state_dir.clone(),
            secrets_file: secrets_file(config, source, home.as_deref()),
            roots,
            executable: std::env::current_exe().ok(),
        };
        let level = |prefix: &[&str], isolation: &IsolationConfig| {
            level(source, home.as_deref(), &protected, prefix, isolation)
        };
        let global = level(&[], &config.isolation)?;
        let mut entries = HashMap::new();
        let mut entry_configs = HashMap::new();
        for (id, entry) in &config.entries {
            if entry.isolation != IsolationConfig::default() {
                entries.insert(id.clone(), level(&["Entries", id], &entry.isolation)?);
                entry_configs.insert(id.clone(), entry.isolation.clone());
            }
        }
        Ok(Self {
            config: config.isolation.clone(),
            global,
            entries,
            entry_configs,
            protected,
            home,
            state_dir,
            path: (source.env)("PATH"),
        })
    }

    /// The isolation of app `id`: the operator's grants and the granted part of its
    /// manifest's request (the file as written), or why the request is refused.
    pub(crate) fn resolve(
        &self,
        id: &str,
        manifest: &McpAppManifest,
        entry: Option<&McpAppEntryConfig>,
        command: Option<(&str, &Path)>,
    ) -> Result<AppIsolation, Vec<Refusal>> {
        let entry_config = self.entry_configs.get(id);
        let entry_level = self.entries.get(id);
        let mode = entry
            .and_then(|e| e.isolation.mode)
            .or(self.config.mode)
            .unwrap_or_default();
        let levels: Vec<&Level> = std::iter::once(&self.global).chain(entry_level).collect();
        let network = entry_config
            .and_then(|e| e.network.as_ref())
            .or(self.config.network.as_ref())
            .map(|n| n.0.clone())
            .unwrap_or_default();
        let mut isolation = AppIsolation::new(mode);
        isolation.read = levels.iter().flat_map(|l| l.read.clone()).collect();
        isolation.write = levels.iter().flat_map(|l| l.write.clone()).collect();
        isolation.execute = levels.iter().flat_map(|l| l.execute.clone()).collect();
        isolation.network = network;
        isolation.unix_sockets = entry_config
            .and_then(|e| e.unix_sockets)
            .or(self.config.unix_sockets)
            .unwrap_or(false);
        isolation.limits =
            ResourceLimits::from_config(&self.config.limits, entry_config.map(|e| &e.limits));
        isolation.state_directory = self.state_dir.clone();
        if mode == IsolationMode::Off {
            return Ok(isolation);
        }
        if let Some((command, root)) = command {
            self.grant_interpreter(command, root, &mut isolation);
        }
        let refusals = self.grant_requests(id, manifest, &levels, &mut isolation);
        if refusals.is_empty() {
            Ok(isolation)
        } else {
            Err(refusals)
        }
    }

    fn grant_requests(
        &self,
        id: &str,
        manifest: &McpAppManifest,
        levels: &[&Level],
        isolation: &mut AppIsolation,
    ) -> Vec<Refusal> {
        let mut refusals = Vec::new();
        let request = &manifest.permissions;
        for (key, list, kind) in [
            ("read", &request.filesystem.read, GrantKind::Read),
            ("write", &request.filesystem.write, GrantKind::Write),
        ] {
            for (i, raw) in list.iter().enumerate() {
                let field = format!("permissions.filesystem.{key}[{i}]");
                let refuse = |message: String| Refusal {
                    field: field.clone(),
                    message: format!("{field} requests {}, {message}", quoted(raw, '"')),
                };
                let Ok(path) = expand_home(raw, self.home.as_deref()).map(|p| normalize(&p)) else {
                    refusals.push(refuse(
                        "but the gateway has no HOME to resolve ~ in".to_owned(),
                    ));
                    continue;
                };
                if let Some(reason) = self.protected.refusal(&path, kind) {
                    refusals.push(refuse(format!("which is never granted: {reason}")));
                    continue;
                }
                let granted_paths: Vec<&PathBuf> = match kind {
                    GrantKind::Write => isolation.write.iter().collect(),
                    _ => isolation
                        .read
                        .iter()
                        .chain(&isolation.write)
                        .chain(&isolation.execute)
                        .collect(),
                };
                let covered = granted_paths.iter().any(|g| path.starts_with(g));
                let text = path.display().to_string();
                let allowed = levels.iter().any(|l| match kind {
                    GrantKind::Write => l.allow_write.matches(&text),
                    _ => l.allow_read.matches(&text),
                });
                if covered {
                    continue;
                }
                if allowed {
                    match kind {
                        GrantKind::Write => isolation.write.push(path),
                        _ => isolation.read.push(path),
                    }
                    continue;
                }
                let key_title = if kind == GrantKind::Write {
                    "Write"
                } else {
                    "Read"
                };
                refusals.push(refuse(format!(
                    "which is not granted: allow it in McpApps.Isolation.AllowManifestPermissions.{key_title} (or McpApps.Entries.{id}.Isolation.AllowManifestPermissions.{key_title}), or grant it in McpApps.Entries.{id}.Isolation.{key_title}"
                )));
            }
        }
        self.grant_network(id, &request.network.0, levels, isolation, &mut refusals);
        refusals
    }

    fn grant_network(
        &self,
        id: &str,
        request: &NetworkAccess,
        levels: &[&Level],
        isolation: &mut AppIsolation,
        refusals: &mut Vec<Refusal>,
    ) {
        let allowed = |text: &str| levels.iter().any(|l| l.allow_network.matches(text));
        let hint = |what: &str| {
            format!(
                "which is not granted: allow {what} in McpApps.Isolation.AllowManifestPermissions.Network (or McpApps.Entries.{id}.Isolation.AllowManifestPermissions.Network), or grant it in McpApps.Entries.{id}.Isolation.Network"
            )
        };
        let granted = isolation.network.clone();
        match request {
            NetworkAccess::None => {}
            NetworkAccess::All => {
                if granted == NetworkAccess::All {
                } else if allowed("all") {
                    isolation.network = NetworkAccess::All;
                } else {
                    refusals.push(Refusal {
                        field: "permissions.network".to_owned(),
                        message: format!(
                            "permissions.network requests \"all\", {}",
                            hint("\"all\"")
                        ),
                    });
                }
            }
            NetworkAccess::Limited { tcp_ports, hosts } => {
                let mut more = NetworkAccess::None;
                for (i, port) in tcp_ports.iter().enumerate() {
                    let covered =
                        granted == NetworkAccess::All || granted.tcp_ports().any(|p| p == *port);
                    if covered {
                        continue;
                    }
                    if allowed(&format!("tcp:{port}")) {
                        more = more.union(&NetworkAccess::Limited {
                            tcp_ports: [*port].into(),
                            hosts: Default::default(),
                        });
                    } else {
                        let field = format!("permissions.network.tcpPorts[{i}]");
                        refusals.push(Refusal {
                            message: format!(
                                "{field} requests TCP port {port}, {}",
                                hint(&format!("\"tcp:{port}\""))
                            ),
                            field,
                        });
                    }
                }
                for (i, host) in hosts.iter().enumerate() {
                    let covered = granted == NetworkAccess::All
                        || granted.hosts().any(|g| covers_grant(g, host));
                    if covered {
                        continue;
                    }
                    if allowed(&host.to_string()) {
                        more = more.union(&NetworkAccess::Limited {
                            tcp_ports: Default::default(),
                            hosts: [host.clone()].into(),
                        });
                    } else {
                        let field = format!("permissions.network.hosts[{i}]");
                        refusals.push(Refusal {
                            message: format!(
                                "{field} requests {host}, {}",
                                hint(&format!("\"{host}\""))
                            ),
                            field,
                        });
                    }
                }
                isolation.network = isolation.network.union(&more);
            }
        }
    }

    /// Grants the installation folder of the app's program or its interpreter when it lives
    /// outside the folders the sandbox executes from (a venv's Python from pyenv or uv, a Node
    /// from nvm), or just the file when the folder is protected.
    fn grant_interpreter(&self, command: &str, root: &Path, isolation: &mut AppIsolation) {
        for candidates in crate::interpreter::grants(command, root, self.path.as_deref()) {
            let covered = |p: &Path| {
                isolation
                    .execute
                    .iter()
                    .chain(&isolation.write)
                    .any(|g| p.starts_with(g))
            };
            if candidates.iter().any(|c| covered(c)) {
                continue;
            }
            if let Some(grant) = candidates
                .into_iter()
                .find(|c| self.protected.refusal(c, GrantKind::Execute).is_none())
            {
                isolation.execute.push(grant);
            }
        }
    }

    /// The state directory every app's settings carry.
    pub(crate) fn state_directory(&self) -> Option<&Path> {
        self.state_dir.as_deref()
    }
}

/// Whether grant `g` covers everything request `r` asks for.
fn covers_grant(g: &HostPort, r: &HostPort) -> bool {
    if r.host.starts_with("*.") {
        g.host == r.host && g.port == r.port
    } else {
        g.covers(&r.host, r.port)
    }
}

fn grant_error(source: &Source<'_>, at: &[&str], raw: &str, reason: String) -> ConfigError {
    ConfigError::Grant {
        file: source.file.map(|f| f.path().to_path_buf()),
        position: source.file.and_then(|f| f.mcp_apps_position(at)),
        setting: bracket_indices(at),
        value: raw.to_owned(),
        reason,
    }
}

/// `["Isolation", "Write", "0"]` as `Isolation.Write[0]`.
fn bracket_indices(at: &[&str]) -> String {
    let mut out = String::new();
    for step in at {
        if step.parse::<usize>().is_ok() {
            out.push_str(&format!("[{step}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(step);
        }
    }
    out
}
