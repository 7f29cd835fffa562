//! MCPB bundles (`.mcpb`, formerly DXT): a ZIP file with a `manifest.json` (manifest
//! version 0.1 to 0.4) describing a node, python, uv or binary server, its `mcp_config` and
//! its `user_config`.
//!
//! A bundle is checked whole before anything is written: its SHA-256 when one is expected,
//! its size, and every entry (no absolute path, no `..`, no symbolic link, no device, FIFO or
//! socket, no duplicate, the unpacked total under the limit). Only then can it be unpacked.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::draft::{About, ArgGroup, Draft, Launch, Runtime, Valued, id_from_name};
use crate::error::InstallError;
use crate::inputs::{Input, InputKind, Part, Template};
use crate::json::{Located, parse};

/// How large a bundle may be.
///
/// Extension point: given to [`InstallerBuilder::bundle_limits`](crate::InstallerBuilder::bundle_limits)
/// by a host that allows other sizes than the defaults (the gateway keeps them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleLimits {
    /// The bundle file itself, in bytes.
    pub max_bundle_bytes: u64,
    /// Everything it unpacks to, in bytes.
    pub max_unpacked_bytes: u64,
    /// Its number of entries.
    pub max_entries: usize,
}

impl Default for BundleLimits {
    /// 256 MiB packed, 1 GiB unpacked, 100 000 entries.
    fn default() -> Self {
        Self {
            max_bundle_bytes: 256 * 1024 * 1024,
            max_unpacked_bytes: 1024 * 1024 * 1024,
            max_entries: 100_000,
        }
    }
}

/// A bundle's `manifest.json`, as far as installing needs it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct McpbManifest {
    /// `0.1` … `0.4`.
    #[serde(default)]
    pub manifest_version: Option<String>,
    /// The old name of `manifest_version`.
    #[serde(default)]
    pub dxt_version: Option<String>,
    /// Machine name.
    pub name: String,
    /// Display name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// The bundle's version.
    pub version: String,
    /// What it does.
    pub description: String,
    /// Who made it.
    pub author: Author,
    /// Its home page.
    #[serde(default)]
    pub homepage: Option<String>,
    /// Its licence.
    #[serde(default)]
    pub license: Option<String>,
    /// Search words.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// How to run it.
    pub server: Server,
    /// What to ask the user for.
    #[serde(default)]
    pub user_config: BTreeMap<String, UserConfig>,
    /// Where it runs.
    #[serde(default)]
    pub compatibility: Option<Compatibility>,
}

/// The bundle's author.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Author {
    /// The name.
    pub name: String,
}

/// The bundle's `server` object.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Server {
    /// `node`, `python`, `binary` or `uv`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The main file, relative to the bundle.
    #[serde(default)]
    pub entry_point: Option<String>,
    /// The command line.
    #[serde(default)]
    pub mcp_config: Option<McpConfig>,
}

/// `server.mcp_config`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct McpConfig {
    /// The program.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Its environment.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Changes per platform (`darwin`, `win32`, `linux`).
    #[serde(default)]
    pub platform_overrides: BTreeMap<String, McpConfig>,
}

/// One `user_config` entry.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct UserConfig {
    /// `string`, `number`, `boolean`, `directory` or `file`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its label.
    #[serde(default)]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether a value is needed.
    #[serde(default)]
    pub required: bool,
    /// The default (`${HOME}` is replaced).
    #[serde(default)]
    pub default: Option<serde_json::Value>,
    /// Several values (directories, files).
    #[serde(default)]
    pub multiple: bool,
    /// A secret.
    #[serde(default)]
    pub sensitive: bool,
    /// Smallest number.
    #[serde(default)]
    pub min: Option<f64>,
    /// Largest number.
    #[serde(default)]
    pub max: Option<f64>,
}

/// `compatibility`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Compatibility {
    /// `darwin`, `win32`, `linux`.
    #[serde(default)]
    pub platforms: Vec<String>,
}

/// A bundle that passed every check, held in memory until unpacked.
#[derive(Clone)]
pub(crate) struct Bundle {
    bytes: Vec<u8>,
    /// Where it came from.
    pub file: String,
    /// Its SHA-256 (lowercase hex).
    pub sha256: String,
    /// Its manifest.
    pub manifest: McpbManifest,
    /// The manifest's text, kept beside the app's manifest.
    pub manifest_text: String,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("file", &self.file)
            .field("bytes", &self.bytes.len())
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;

impl Bundle {
    /// Checks a bundle read from `file`: its hash against `expected_sha256` (when known), its
    /// size, every entry, and its manifest.
    ///
    /// # Errors
    /// [`InstallError::Bundle`] naming the first problem; [`InstallError::Format`] for a bad
    /// `manifest.json` (with line and column).
    pub(crate) fn open(
        bytes: Vec<u8>,
        file: &str,
        expected_sha256: Option<&str>,
        limits: BundleLimits,
    ) -> Result<Self, InstallError> {
        let refuse = |reason: String| InstallError::Bundle {
            file: file.to_owned(),
            reason,
        };
        if bytes.len() as u64 > limits.max_bundle_bytes {
            return Err(refuse(format!(
                "it is {} bytes, more than the limit of {} bytes",
                bytes.len(),
                limits.max_bundle_bytes
            )));
        }
        let sha256 = sha256_hex(&bytes);
        if let Some(expected) = expected_sha256
            && !expected.eq_ignore_ascii_case(&sha256)
        {
            return Err(refuse(format!(
                "its SHA-256 is {sha256}, not the expected {expected}; it was not opened"
            )));
        }
        let manifest_text = check_entries(&bytes, limits, &refuse)?
            .ok_or_else(|| refuse("it has no manifest.json at its root".to_owned()))?;
        let label = format!("{file}!/manifest.json");
        let manifest: McpbManifest = parse(&manifest_text, &label)?;
        check_manifest(&manifest, &Located::new(&manifest_text, &label))?;
        Ok(Self {
            bytes,
            file: file.to_owned(),
            sha256,
            manifest,
            manifest_text,
        })
    }

    /// Unpacks the bundle into `dir`, which must not exist yet.
    ///
    /// # Errors
    /// [`InstallError::Io`] or [`InstallError::Bundle`]; the caller removes `dir`.
    pub(crate) fn unpack(&self, dir: &Path) -> Result<(), InstallError> {
        let refuse = |reason: String| InstallError::Bundle {
            file: self.file.clone(),
            reason,
        };
        std::fs::create_dir(dir).map_err(InstallError::io(dir))?;
        let mut archive = zip::ZipArchive::new(Cursor::new(self.bytes.as_slice()))
            .map_err(|e| refuse(e.to_string()))?;
        for index in 0..archive.len() {
            let mut entry = archive
                .by_index(index)
                .map_err(|e| refuse(format!("entry {index}: {e}")))?;
            // Checked by `open`; checked again, as this is where it matters.
            let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
            let relative =
                safe_path(&name).map_err(|why| refuse(format!("entry '{name}' {why}")))?;
            let target = dir.join(&relative);
            if entry.is_dir() {
                std::fs::create_dir_all(&target).map_err(InstallError::io(&target))?;
                continue;
            }
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(InstallError::io(parent))?;
            }
            let executable = entry.unix_mode().is_some_and(|m| m & 0o111 != 0);
            let mut out = create_file(&target, executable)?;
            // The declared size bounds what is written, whatever the data says.
            let limit = entry.size();
            let copied = std::io::copy(&mut entry.by_ref().take(limit), &mut out)
                .map_err(InstallError::io(&target))?;
            if copied != limit {
                return Err(refuse(format!(
                    "entry '{}' is shorter than it says",
                    relative.display()
                )));
            }
        }
        Ok(())
    }

    /// Maps the bundle to a draft, its `${__dirname}` being `bundle_dir` (absolute).
    pub(crate) fn draft(&self, bundle_dir: &Path) -> Result<Draft, InstallError> {
        let manifest = &self.manifest;
        let label = format!("{}!/manifest.json", self.file);
        let located = Located::new(&self.manifest_text, &label);
        let inputs = self.inputs();
        let config = effective_config(&manifest.server);
        let entry = manifest.server.entry_point.clone();
        let dir = bundle_dir.display().to_string();
        let (command, args) = match (config.command.clone(), manifest.server.kind.as_str()) {
            (Some(command), _) => (command, config.args.clone().unwrap_or_default()),
            (None, "node") => (
                "node".to_owned(),
                vec![format!("${{__dirname}}/{}", entry.unwrap_or_default())],
            ),
            (None, "python") => (
                "python3".to_owned(),
                vec![format!("${{__dirname}}/{}", entry.unwrap_or_default())],
            ),
            (None, "binary") => (
                format!("${{__dirname}}/{}", entry.unwrap_or_default()),
                Vec::new(),
            ),
            (None, _) => {
                return Err(located
                    .error(
                        "server.mcp_config",
                        "a uv bundle without mcp_config asks the host to run uv itself, which the gateway does not; add an mcp_config",
                    )
                    .into());
            }
        };
        let known = |key: &str| manifest.user_config.contains_key(key);
        let command_template = dollar_template(&command, &dir, &known);
        if command_template.inputs().next().is_some() {
            return Err(located
                .error(
                    "server.mcp_config.command",
                    "the command cannot use user_config values",
                )
                .into());
        }
        let command = command_template
            .render(&crate::inputs::Values::default())
            .unwrap_or(command);
        let args = args
            .iter()
            .map(|arg| {
                let template = dollar_template(arg, &dir, &known);
                // `${user_config.dirs}` alone with several values: one argument each.
                let repeat = template
                    .only_input()
                    .filter(|k| manifest.user_config.get(*k).is_some_and(|c| c.multiple))
                    .map(str::to_owned);
                ArgGroup {
                    items: vec![template],
                    repeat,
                }
            })
            .collect();
        let env = config
            .env
            .unwrap_or_default()
            .iter()
            .map(|(name, value)| Valued {
                name: name.clone(),
                value: dollar_template(value, &dir, &known),
                secret: false,
            })
            .collect();
        Ok(Draft {
            about: About {
                name: manifest
                    .display_name
                    .clone()
                    .or_else(|| Some(manifest.name.clone())),
                description: Some(manifest.description.clone()),
                version: manifest.version.clone(),
                homepage: manifest.homepage.clone(),
                author: Some(manifest.author.name.clone()),
                license: manifest.license.clone(),
                tags: manifest.keywords.clone(),
            },
            id_hint: id_from_name(&manifest.name),
            inputs,
            launch: Launch::Stdio {
                command,
                in_runtime: false,
                args,
                env,
            },
            runtime: Runtime::Bundle(Box::new(self.clone())),
            notes: Vec::new(),
        })
    }

    /// `user_config` as inputs.
    fn inputs(&self) -> Vec<Input> {
        let mut inputs = Vec::new();
        for (key, config) in &self.manifest.user_config {
            let mut input = Input::new(key.clone());
            input.title = config.title.clone();
            input.description = config.description.clone();
            input.kind = match config.kind.as_str() {
                "number" => InputKind::Number,
                "boolean" => InputKind::Boolean,
                "directory" => InputKind::Directory,
                "file" => InputKind::File,
                _ => InputKind::String,
            };
            input.required = config.required;
            input.secret = config.sensitive;
            input.repeated = config.multiple;
            input.min = config.min;
            input.max = config.max;
            input.default = config.default.as_ref().and_then(|d| match d {
                serde_json::Value::String(s) => Some(substitute_home(s)),
                serde_json::Value::Number(n) => Some(n.to_string()),
                serde_json::Value::Bool(b) => Some(b.to_string()),
                serde_json::Value::Array(items) => {
                    items.first().and_then(|v| v.as_str()).map(substitute_home)
                }
                _ => None,
            });
            inputs.push(input);
        }
        inputs
    }

    /// The program the bundle's type needs on this machine (`node`, `python3`), if any.
    pub(crate) fn needs_program(&self) -> Option<&'static str> {
        let command = effective_config(&self.manifest.server).command;
        match (self.manifest.server.kind.as_str(), command.as_deref()) {
            ("node", None | Some("node")) => Some("node"),
            ("python", None | Some("python3")) => Some("python3"),
            _ => None,
        }
    }
}

/// Checks every entry of the ZIP file `bytes` (see [`Bundle::open`]); returns the text of its
/// root `manifest.json`, if it has one.
fn check_entries(
    bytes: &[u8],
    limits: BundleLimits,
    refuse: &dyn Fn(String) -> InstallError,
) -> Result<Option<String>, InstallError> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| refuse(format!("not a ZIP file: {e}")))?;
    if archive.len() > limits.max_entries {
        return Err(refuse(format!(
            "it has {} entries, more than the limit of {}",
            archive.len(),
            limits.max_entries
        )));
    }
    let mut total: u64 = 0;
    let mut seen = std::collections::HashSet::new();
    let mut manifest_text = None;
    for index in 0..archive.len() {
        let entry = archive
            .by_index_raw(index)
            .map_err(|e| refuse(format!("entry {index} cannot be read: {e}")))?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        let relative = safe_path(&name).map_err(|why| refuse(format!("entry '{name}' {why}")))?;
        check_mode(entry.unix_mode(), entry.is_dir())
            .map_err(|why| refuse(format!("entry '{name}' is {why}")))?;
        if !seen.insert(relative.clone()) {
            return Err(refuse(format!("entry '{name}' appears twice")));
        }
        total = total.saturating_add(entry.size());
        if total > limits.max_unpacked_bytes {
            return Err(refuse(format!(
                "it unpacks to more than the limit of {} bytes",
                limits.max_unpacked_bytes
            )));
        }
        if relative == Path::new("manifest.json") {
            if entry.size() > 4 * 1024 * 1024 {
                return Err(refuse("its manifest.json is larger than 4 MiB".to_owned()));
            }
            drop(entry);
            let mut entry = archive
                .by_index(index)
                .map_err(|e| refuse(format!("manifest.json cannot be read: {e}")))?;
            let mut text = String::new();
            entry
                .by_ref()
                .take(4 * 1024 * 1024 + 1)
                .read_to_string(&mut text)
                .map_err(|e| refuse(format!("manifest.json is not UTF-8 text: {e}")))?;
            manifest_text = Some(text);
        }
    }
    Ok(manifest_text)
}

/// What a bundle's manifest must say for the gateway to run it.
fn check_manifest(manifest: &McpbManifest, located: &Located<'_>) -> Result<(), InstallError> {
    if manifest.manifest_version.is_none() && manifest.dxt_version.is_none() {
        return Err(located
            .error("manifest_version", "manifest_version is missing")
            .into());
    }
    if let Some(compat) = &manifest.compatibility
        && !compat.platforms.is_empty()
        && !compat.platforms.iter().any(|p| p == std::env::consts::OS)
    {
        return Err(located
            .error(
                "compatibility.platforms",
                format!(
                    "the bundle runs on {} only, not on {}",
                    compat.platforms.join(", "),
                    std::env::consts::OS
                ),
            )
            .into());
    }
    if !["node", "python", "binary", "uv"].contains(&manifest.server.kind.as_str()) {
        return Err(located
            .error(
                "server.type",
                format!(
                    "server type '{}' is not known (node, python, binary or uv)",
                    manifest.server.kind
                ),
            )
            .into());
    }
    for (key, config) in &manifest.user_config {
        if !["string", "number", "boolean", "directory", "file"].contains(&config.kind.as_str()) {
            return Err(located
                .error(
                    &format!("user_config.{key}.type"),
                    format!("user_config type '{}' is not known", config.kind),
                )
                .into());
        }
    }
    Ok(())
}

/// `mcp_config` with this platform's overrides applied.
fn effective_config(server: &Server) -> McpConfig {
    let mut config = server.mcp_config.clone().unwrap_or_default();
    if let Some(over) = config
        .platform_overrides
        .get(match std::env::consts::OS {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        })
        .cloned()
    {
        if over.command.is_some() {
            config.command = over.command;
        }
        if over.args.is_some() {
            config.args = over.args;
        }
        if let Some(env) = over.env {
            config.env.get_or_insert_with(BTreeMap::new).extend(env);
        }
    }
    config
}

fn home() -> String {
    std::env::var("HOME").unwrap_or_else(|_| "/".to_owned())
}

fn substitute_home(text: &str) -> String {
    text.replace("${HOME}", &home())
}

/// `${__dirname}`, `${HOME}`, `${DESKTOP}`, `${DOCUMENTS}`, `${DOWNLOADS}`, `${/}`,
/// `${pathSeparator}` replaced, and `${user_config.KEY}` made an input; anything else kept.
fn dollar_template(text: &str, dirname: &str, known: &dyn Fn(&str) -> bool) -> Template {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("${") {
        literal.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find('}') else {
            literal.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let name = &after[..close];
        match name {
            "__dirname" => literal.push_str(dirname),
            "HOME" => literal.push_str(&home()),
            "DESKTOP" => literal.push_str(&format!("{}/Desktop", home())),
            "DOCUMENTS" => literal.push_str(&format!("{}/Documents", home())),
            "DOWNLOADS" => literal.push_str(&format!("{}/Downloads", home())),
            "/" | "pathSeparator" => literal.push('/'),
            _ => match name.strip_prefix("user_config.").filter(|k| known(k)) {
                Some(key) => {
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Input(key.to_owned()));
                }
                None => literal.push_str(&rest[open..open + 2 + close + 1]),
            },
        }
        rest = &after[close + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() || parts.is_empty() {
        parts.push(Part::Text(literal));
    }
    Template(parts)
}

/// A ZIP entry name as a relative path inside the bundle, or why it is not one.
fn safe_path(name: &str) -> Result<PathBuf, &'static str> {
    if name.contains('\0') {
        return Err("has a NUL character in its name");
    }
    if name.contains('\\') {
        return Err("has a backslash in its name (a Windows path)");
    }
    if name.starts_with('/') || name.get(1..2) == Some(":") {
        return Err("is an absolute path");
    }
    let mut out = PathBuf::new();
    for component in Path::new(name).components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("leaves the bundle's folder (..)"),
            Component::RootDir | Component::Prefix(_) => return Err("is an absolute path"),
        }
    }
    if out.as_os_str().is_empty() {
        return Err("has an empty name");
    }
    Ok(out)
}

/// Refuses anything but files and folders (links, devices, FIFOs, sockets).
fn check_mode(mode: Option<u32>, is_dir: bool) -> Result<(), &'static str> {
    let Some(mode) = mode else {
        return Ok(());
    };
    match mode & S_IFMT {
        0 | S_IFREG => Ok(()),
        S_IFDIR if is_dir => Ok(()),
        S_IFDIR => Ok(()),
        0o120_000 => Err("a symbolic link"),
        0o020_000 | 0o060_000 => Err("a device file"),
        0o010_000 => Err("a named pipe"),
        0o140_000 => Err("a socket"),
        _ => Err("not a regular file"),
    }
}

fn create_file(path: &Path, executable: bool) -> Result<std::fs::File, InstallError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if executable { 0o755 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = executable;
    options.open(path).map_err(InstallError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_must_stay_inside() {
        assert_eq!(
            safe_path("server/index.js").unwrap(),
            Path::new("server/index.js")
        );
        assert_eq!(safe_path("./a/./b").unwrap(), Path::new("a/b"));
        assert!(safe_path("../evil").is_err());
        assert!(safe_path("a/../../evil").is_err());
        assert!(safe_path("/etc/passwd").is_err());
        assert!(safe_path("C:/x").is_err());
        assert!(safe_path("a\\..\\b").is_err());
        assert!(safe_path("").is_err());
    }

    #[test]
    fn only_files_and_folders_pass() {
        assert!(check_mode(None, false).is_ok());
        assert!(check_mode(Some(0o100_644), false).is_ok());
        assert!(check_mode(Some(0o040_755), true).is_ok());
        assert_eq!(check_mode(Some(0o120_777), false), Err("a symbolic link"));
        assert_eq!(check_mode(Some(0o020_644), false), Err("a device file"));
        assert_eq!(check_mode(Some(0o010_644), false), Err("a named pipe"));
    }

    #[test]
    fn dollar_substitutions() {
        let known = |k: &str| k == "key";
        let t = dollar_template("${__dirname}/s.js", "/apps/x", &known);
        assert_eq!(t.render(&Default::default()).unwrap(), "/apps/x/s.js");
        let t = dollar_template("--k=${user_config.key}${/}${unknown}", "/d", &known);
        let mut values = crate::inputs::Values::default();
        values.insert("key", vec!["v".into()]);
        assert_eq!(t.render(&values).unwrap(), "--k=v/${unknown}");
        assert_eq!(
            dollar_template("${user_config.other}", "/d", &known)
                .render(&values)
                .unwrap(),
            "${user_config.other}"
        );
    }
}
