//! The MCP Registry's `server.json` (schema 2025-09-16 and later, camelCase): the document
//! model, the choice of a package or remote, and its mapping to a [`Draft`].
//!
//! A package's environment variables, arguments and headers, and a remote's URL variables and
//! headers, become [`Input`]s; their `value` templates (`Bearer {token}`) become templates over
//! those inputs. Secrets (`isSecret`, and headers named like credentials) never reach the
//! manifest.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::draft::{
    About, ArgGroup, Draft, Launch, Runtime, Valued, id_from_name, is_credential_header,
};
use crate::error::{FormatError, InstallError};
use crate::inputs::{Input, InputKind, Template};
use crate::json::{Located, parse};

/// The npm registry `server.json` packages default to.
pub(crate) const DEFAULT_NPM_REGISTRY: &str = "https://registry.npmjs.org";
/// The PyPI `server.json` packages default to.
pub(crate) const DEFAULT_PYPI: &str = "https://pypi.org";

/// A `server.json` document, as far as installing needs it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerJson {
    /// Reverse-DNS name with one `/`.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// Display title.
    #[serde(default)]
    pub title: Option<String>,
    /// The server's version.
    pub version: String,
    /// Its web site.
    #[serde(default)]
    pub website_url: Option<String>,
    /// Packages that run it locally.
    #[serde(default)]
    pub packages: Vec<Package>,
    /// Endpoints where it runs remotely.
    #[serde(default)]
    pub remotes: Vec<Remote>,
    /// Extensions, such as the publisher's hints (ToolHive's permission profile).
    #[serde(default, rename = "_meta")]
    pub meta: Option<serde_json::Value>,
}

/// One entry of `packages[]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Package {
    /// `npm`, `pypi`, `mcpb`, `oci`, `nuget`, …
    pub registry_type: String,
    /// A non-default registry.
    #[serde(default)]
    pub registry_base_url: Option<String>,
    /// The package name, or the bundle's URL.
    pub identifier: String,
    /// The exact version.
    #[serde(default)]
    pub version: Option<String>,
    /// A bundle's SHA-256 (hex).
    #[serde(default)]
    pub file_sha256: Option<String>,
    /// The runner (`npx`, `uvx`).
    #[serde(default)]
    pub runtime_hint: Option<String>,
    /// Arguments for the runner.
    #[serde(default)]
    pub runtime_arguments: Vec<Argument>,
    /// Arguments for the package's program.
    #[serde(default)]
    pub package_arguments: Vec<Argument>,
    /// Its environment.
    #[serde(default)]
    pub environment_variables: Vec<KeyValueInput>,
    /// How to talk to it.
    pub transport: Transport,
}

/// A package's transport (only `stdio` packages install, so its URL template is not read).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Transport {
    /// `stdio`, `streamable-http` or `sse`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// One entry of `remotes[]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Remote {
    /// `streamable-http` or `sse`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The endpoint, with `{variable}` placeholders.
    pub url: String,
    /// Headers to send.
    #[serde(default)]
    pub headers: Vec<KeyValueInput>,
    /// Values for the URL's placeholders.
    #[serde(default)]
    pub variables: BTreeMap<String, InputDef>,
}

/// The `Input` vocabulary of `server.json`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InputDef {
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether a value is needed.
    #[serde(default)]
    pub is_required: bool,
    /// `string`, `number`, `boolean` or `filepath`.
    #[serde(default)]
    pub format: Option<String>,
    /// A fixed value, with `{variable}` placeholders.
    #[serde(default)]
    pub value: Option<String>,
    /// Whether the value is secret.
    #[serde(default)]
    pub is_secret: bool,
    /// The default.
    #[serde(default)]
    pub default: Option<String>,
    /// An example.
    #[serde(default)]
    pub placeholder: Option<String>,
    /// The allowed values.
    #[serde(default)]
    pub choices: Vec<String>,
    /// Inputs for the placeholders of `value`.
    #[serde(default)]
    pub variables: BTreeMap<String, InputDef>,
}

/// An environment variable or header.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyValueInput {
    /// The variable's or header's name.
    pub name: String,
    /// Its value or how to get it.
    #[serde(flatten)]
    pub input: InputDef,
}

/// A runtime or package argument.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Argument {
    /// `positional` or `named`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A named argument's flag (`--port`).
    #[serde(default)]
    pub name: Option<String>,
    /// A positional argument's label.
    #[serde(default)]
    pub value_hint: Option<String>,
    /// Whether it may be given several times.
    #[serde(default)]
    pub is_repeated: bool,
    /// Its value or how to get it.
    #[serde(flatten)]
    pub input: InputDef,
}

/// Names of `server.json` before 2025-09-16, refused with a message saying so.
const SNAKE_CASE_KEYS: &[&str] = &[
    "registry_type",
    "registry_name",
    "is_secret",
    "is_required",
    "environment_variables",
    "package_arguments",
    "runtime_arguments",
    "runtime_hint",
    "value_hint",
    "website_url",
];

/// Which package or remote to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PackageChoice {
    /// The first usable: npm, then pypi, then mcpb, then a streamable-http remote.
    #[default]
    Auto,
    /// The first npm package.
    Npm,
    /// The first PyPI package.
    Pypi,
    /// The first MCPB package.
    Mcpb,
    /// The first streamable-http remote.
    Remote,
}

impl std::str::FromStr for PackageChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "npm" => Ok(Self::Npm),
            "pypi" => Ok(Self::Pypi),
            "mcpb" => Ok(Self::Mcpb),
            "remote" => Ok(Self::Remote),
            other => Err(format!(
                "'{other}' is not a package kind: use npm, pypi, mcpb or remote"
            )),
        }
    }
}

/// What the document's chosen entry needs next.
#[derive(Debug, Clone)]
pub(crate) enum Chosen {
    /// An npm or PyPI package or a remote, mapped.
    Draft(Box<Draft>, &'static str),
    /// An MCPB bundle to fetch and check.
    Bundle {
        url: String,
        sha256: String,
        notes: Vec<String>,
    },
}

/// A document read from text, kept with its text for positions.
#[derive(Debug, Clone)]
pub(crate) struct ServerDocument {
    /// The document.
    pub server: ServerJson,
    text: String,
    file: String,
}

impl ServerDocument {
    /// Reads a `server.json` from `text` (which came from `file`).
    ///
    /// # Errors
    /// [`FormatError`] for malformed JSON, a wrong type or a missing field (with its line and
    /// column), and for a document in the old snake_case names.
    pub(crate) fn parse(text: &str, file: &str) -> Result<Self, FormatError> {
        let raw: serde_json::Value = parse(text, file)?;
        if let Some(path) = find_key(&raw, "", SNAKE_CASE_KEYS) {
            return Err(Located::new(text, file).error(
                &path,
                "this document uses the snake_case names of server.json before 2025-09-16; the current schema (2025-12-11) names them in camelCase (registryType, isSecret, environmentVariables, …)",
            ));
        }
        let server: ServerJson = parse(text, file)?;
        Ok(Self {
            server,
            text: text.to_owned(),
            file: file.to_owned(),
        })
    }

    /// The raw text.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    fn error(&self, path: &str, message: impl Into<String>) -> InstallError {
        Located::new(&self.text, &self.file)
            .error(path, message)
            .into()
    }

    /// Chooses the package or remote to install and maps it.
    pub(crate) fn choose(&self, choice: PackageChoice) -> Result<Chosen, InstallError> {
        let server = &self.server;
        let wanted: &[&str] = match choice {
            PackageChoice::Auto => &["npm", "pypi", "mcpb"],
            PackageChoice::Npm => &["npm"],
            PackageChoice::Pypi => &["pypi"],
            PackageChoice::Mcpb => &["mcpb"],
            PackageChoice::Remote => &[],
        };
        let mut skipped = Vec::new();
        for kind in wanted {
            // Among packages of a kind, one over stdio first: an HTTP package would need the
            // gateway to start it and then connect to it, which manifests cannot say.
            let mut of_kind: Vec<(usize, &Package)> = server
                .packages
                .iter()
                .enumerate()
                .filter(|(_, p)| p.registry_type.eq_ignore_ascii_case(kind))
                .collect();
            of_kind.sort_by_key(|(_, p)| p.transport.kind != "stdio");
            for (index, package) in of_kind {
                if package.transport.kind != "stdio" {
                    skipped.push(format!(
                        "packages[{index}] ({kind}) speaks {} on a port of its own, which the gateway cannot start and then connect to; use a stdio package or a remote",
                        package.transport.kind
                    ));
                    continue;
                }
                return self.map_package(index, package);
            }
        }
        if matches!(choice, PackageChoice::Auto | PackageChoice::Remote) {
            for (index, remote) in server.remotes.iter().enumerate() {
                if remote.kind == "streamable-http" {
                    return Ok(Chosen::Draft(Box::new(self.map_remote(remote)), "remote"));
                }
                skipped.push(format!(
                    "remotes[{index}] is '{}', which the gateway does not speak (legacy HTTP+SSE); it needs streamable-http",
                    remote.kind
                ));
            }
        }
        // Explain, at the first package nothing could use.
        for (index, package) in server.packages.iter().enumerate() {
            let kind = package.registry_type.to_ascii_lowercase();
            if !["npm", "pypi", "mcpb"].contains(&kind.as_str()) {
                return Err(self.error(
                    &format!("packages[{index}].registryType"),
                    format!(
                        "registryType '{}' is not supported: the gateway installs npm, pypi and mcpb packages and streamable-http remotes{}",
                        package.registry_type,
                        if skipped.is_empty() { String::new() } else { format!(" ({})", skipped.join("; ")) }
                    ),
                ));
            }
        }
        let what = match choice {
            PackageChoice::Auto => "a package or remote the gateway can install",
            PackageChoice::Npm => "an npm package",
            PackageChoice::Pypi => "a PyPI package",
            PackageChoice::Mcpb => "an MCPB package",
            PackageChoice::Remote => "a streamable-http remote",
        };
        let mut message = format!("this document has no {what}");
        if !skipped.is_empty() {
            message.push_str(&format!(": {}", skipped.join("; ")));
        }
        Err(self.error("packages", message))
    }

    fn about(&self) -> About {
        let server = &self.server;
        About {
            name: server.title.clone().or_else(|| Some(server.name.clone())),
            description: server.description.clone(),
            version: server.version.clone(),
            homepage: server.website_url.clone(),
            ..About::default()
        }
    }

    fn map_package(&self, index: usize, package: &Package) -> Result<Chosen, InstallError> {
        let at = |field: &str| format!("packages[{index}].{field}");
        let kind = package.registry_type.to_ascii_lowercase();
        let mut inputs = Vec::new();
        let mut notes = Vec::new();
        if kind == "mcpb" {
            let sha256 = package
                .file_sha256
                .clone()
                .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| {
                    self.error(
                        &at("fileSha256"),
                        "an mcpb package needs fileSha256 (64 hex digits), which is checked before the bundle is opened",
                    )
                })?;
            if !package.environment_variables.is_empty() || !package.package_arguments.is_empty() {
                notes.push("the package's environmentVariables and packageArguments are not used: the bundle's own mcp_config says how it runs".to_owned());
            }
            return Ok(Chosen::Bundle {
                url: package.identifier.clone(),
                sha256: sha256.to_ascii_lowercase(),
                notes,
            });
        }
        let version = package.version.clone().ok_or_else(|| {
            self.error(
                &at("version"),
                format!("a {kind} package needs an exact version"),
            )
        })?;
        crate::source::exact_version(&version).map_err(|m| self.error(&at("version"), m))?;
        if !package.runtime_arguments.is_empty() {
            notes.push(format!(
                "runtimeArguments (for {}) are not used: the package is installed into the app folder and run without a runner",
                package.runtime_hint.as_deref().unwrap_or("the runner")
            ));
        }
        let mut args = Vec::new();
        for (i, argument) in package.package_arguments.iter().enumerate() {
            args.push(
                argument_group(argument, &mut inputs)
                    .map_err(|m| self.error(&at(&format!("packageArguments[{i}]")), m))?,
            );
        }
        let env = package
            .environment_variables
            .iter()
            .map(|variable| Valued {
                name: variable.name.clone(),
                value: value_template(&variable.name, &variable.input, &mut inputs),
                secret: variable.input.is_secret,
            })
            .collect();
        let base = package
            .registry_base_url
            .clone()
            .map(|u| u.trim_end_matches('/').to_owned());
        let runtime = if kind == "npm" {
            Runtime::Npm {
                name: package.identifier.clone(),
                version,
                registry: base.filter(|b| b != DEFAULT_NPM_REGISTRY),
            }
        } else {
            Runtime::Pypi {
                name: package.identifier.clone(),
                version,
                index: base.filter(|b| b != DEFAULT_PYPI),
            }
        };
        let draft = Draft {
            about: self.about(),
            id_hint: id_from_name(&self.server.name),
            inputs,
            launch: Launch::Stdio {
                // Filled in once the package's program is known.
                command: String::new(),
                in_runtime: true,
                args,
                env,
            },
            runtime,
            notes,
        };
        Ok(Chosen::Draft(
            Box::new(draft),
            if kind == "npm" { "npm" } else { "pypi" },
        ))
    }

    fn map_remote(&self, remote: &Remote) -> Draft {
        let mut inputs = Vec::new();
        for (name, def) in &remote.variables {
            add_input(&mut inputs, name, def, false);
        }
        let url = Template::braces(&remote.url, |n| remote.variables.contains_key(n));
        let headers = remote
            .headers
            .iter()
            .map(|header| Valued {
                name: header.name.clone(),
                value: value_template(&header.name, &header.input, &mut inputs),
                secret: header.input.is_secret || is_credential_header(&header.name),
            })
            .collect();
        Draft {
            about: self.about(),
            id_hint: id_from_name(&self.server.name),
            inputs,
            launch: Launch::Http { url, headers },
            runtime: Runtime::None,
            notes: Vec::new(),
        }
    }
}

/// The first key of `keys` anywhere in `value`, as a path.
fn find_key(value: &serde_json::Value, path: &str, keys: &[&str]) -> Option<String> {
    match value {
        serde_json::Value::Object(map) => map.iter().find_map(|(k, v)| {
            let here = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            if keys.contains(&k.as_str()) {
                Some(here)
            } else {
                find_key(v, &here, keys)
            }
        }),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_key(v, &format!("{path}[{i}]"), keys)),
        _ => None,
    }
}

/// An [`Input`] from the `server.json` vocabulary; added once per key.
fn add_input(inputs: &mut Vec<Input>, key: &str, def: &InputDef, secret: bool) {
    if inputs.iter().any(|i| i.key == key) {
        return;
    }
    let mut input = Input::new(key);
    input.description = def.description.clone();
    input.kind = match def.format.as_deref() {
        Some("number") => InputKind::Number,
        Some("boolean") => InputKind::Boolean,
        Some("filepath") => InputKind::File,
        _ => InputKind::String,
    };
    input.required = def.is_required;
    input.secret = def.is_secret || secret;
    input.default = def.default.clone();
    input.choices = def.choices.clone();
    input.placeholder = def.placeholder.clone();
    inputs.push(input);
}

/// The value of an environment variable, header or argument: its fixed `value` (with its
/// variables as inputs), or an input of its own named `key`.
fn value_template(key: &str, def: &InputDef, inputs: &mut Vec<Input>) -> Template {
    match &def.value {
        Some(value) => {
            for (name, variable) in &def.variables {
                add_input(inputs, name, variable, def.is_secret);
            }
            Template::braces(value, |n| def.variables.contains_key(n))
        }
        None => {
            add_input(inputs, key, def, false);
            Template::input(key)
        }
    }
}

/// The input an argument repeats over (its own, when it is repeated and takes a value of its
/// own), marked as taking several values.
fn repeated(argument: &Argument, key: &str, inputs: &mut [Input]) -> Option<String> {
    if !argument.is_repeated || argument.input.value.is_some() {
        return None;
    }
    let input = inputs.iter_mut().find(|i| i.key == key)?;
    input.repeated = true;
    Some(key.to_owned())
}

/// One package argument as an argument group.
fn argument_group(argument: &Argument, inputs: &mut Vec<Input>) -> Result<ArgGroup, String> {
    let def = &argument.input;
    match argument.kind.as_str() {
        "positional" => {
            let key = argument.value_hint.clone().unwrap_or_default();
            if def.value.is_none() && argument.value_hint.is_none() {
                return Err("a positional argument needs a value or a valueHint".to_owned());
            }
            let template = value_template(&key, def, inputs);
            let repeat = repeated(argument, &key, inputs);
            Ok(ArgGroup {
                items: vec![template],
                repeat,
            })
        }
        "named" => {
            let flag = argument
                .name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .ok_or_else(|| "a named argument needs a name".to_owned())?;
            let valueless = def.value.is_none()
                && argument.value_hint.is_none()
                && def.default.is_none()
                && def.choices.is_empty()
                && !def.is_required;
            if valueless {
                return Ok(ArgGroup::one(Template::text(flag)));
            }
            let key = argument
                .value_hint
                .clone()
                .unwrap_or_else(|| flag.trim_start_matches('-').to_owned());
            let template = value_template(&key, def, inputs);
            let repeat = repeated(argument, &key, inputs);
            Ok(ArgGroup {
                items: vec![Template::text(flag), template],
                repeat,
            })
        }
        other => Err(format!(
            "argument type '{other}' is not known (positional or named)"
        )),
    }
}
