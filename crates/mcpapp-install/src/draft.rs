//! What a source maps to before its inputs have values: the app's description, how to start
//! it (command, arguments and environment, or a URL and headers, as templates over inputs),
//! and what to put in its folder. Rendering a draft with values gives the manifest, and the
//! secret values that go to the store instead of the manifest.

use std::collections::BTreeMap;
use std::path::Path;

use mcpapp_manifest::{McpAppManifest, SECRET_PREFIX, is_secret_name};

use crate::inputs::{Input, Template, Values};

/// The descriptive fields of the app.
#[derive(Debug, Clone, Default)]
pub(crate) struct About {
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) version: String,
    pub(crate) homepage: Option<String>,
    pub(crate) author: Option<String>,
    pub(crate) license: Option<String>,
    pub(crate) tags: Vec<String>,
}

/// One argument group: an item, or a flag and its value, dropped whole when an input it uses
/// has no value, and repeated once per value of `repeat`.
#[derive(Debug, Clone)]
pub(crate) struct ArgGroup {
    pub(crate) items: Vec<Template>,
    pub(crate) repeat: Option<String>,
}

impl ArgGroup {
    pub(crate) fn one(item: Template) -> Self {
        Self {
            items: vec![item],
            repeat: None,
        }
    }
}

/// A value that is secret even if no secret input is in it (a header named like a
/// credential, an environment variable declared secret with a fixed value).
#[derive(Debug, Clone)]
pub(crate) struct Valued {
    pub(crate) name: String,
    pub(crate) value: Template,
    pub(crate) secret: bool,
}

/// How the app starts.
#[derive(Debug, Clone)]
pub(crate) enum Launch {
    Stdio {
        /// The program; relative to the runtime folder when `in_runtime`.
        command: String,
        in_runtime: bool,
        args: Vec<ArgGroup>,
        env: Vec<Valued>,
    },
    Http {
        url: Template,
        headers: Vec<Valued>,
    },
}

/// What goes into the app's folder before it can start.
#[derive(Debug, Clone)]
pub(crate) enum Runtime {
    /// Nothing (a remote endpoint, or run mode).
    None,
    Npm {
        name: String,
        version: String,
        registry: Option<String>,
    },
    Pypi {
        name: String,
        version: String,
        index: Option<String>,
    },
    /// An unpacked MCPB bundle.
    Bundle(Box<crate::mcpb::Bundle>),
}

/// A source mapped to the gateway's terms.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub(crate) about: About,
    pub(crate) id_hint: String,
    pub(crate) inputs: Vec<Input>,
    pub(crate) launch: Launch,
    pub(crate) runtime: Runtime,
    /// Things the operator should know (ignored runtime arguments, a deprecated server).
    pub(crate) notes: Vec<String>,
}

/// A draft made concrete: the manifest (without its install record) and the secret values it
/// refers to by name.
#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    pub(crate) manifest: McpAppManifest,
    pub(crate) secrets: BTreeMap<String, String>,
}

impl Draft {
    /// Marks secret every input used in a value that is secret (a header named like a
    /// credential, an environment variable declared secret), so that its raw value is kept
    /// in the secret store too and asked for without echo.
    pub(crate) fn mark_secret_inputs(&mut self) {
        let values: Vec<&Valued> = match &self.launch {
            Launch::Stdio { env, .. } => env.iter().collect(),
            Launch::Http { headers, .. } => headers.iter().collect(),
        };
        let keys: Vec<String> = values
            .iter()
            .filter(|v| v.secret)
            .flat_map(|v| v.value.inputs().map(str::to_owned))
            .collect();
        for input in &mut self.inputs {
            if keys.contains(&input.key) {
                input.secret = true;
            }
        }
    }

    /// Whether the app's command line, environment, URL or headers use input `key` (only
    /// then is a path it names something the app will open).
    pub(crate) fn uses_input(&self, key: &str) -> bool {
        let templates: Vec<&Template> = match &self.launch {
            Launch::Stdio { args, env, .. } => args
                .iter()
                .flat_map(|g| &g.items)
                .chain(env.iter().map(|v| &v.value))
                .collect(),
            Launch::Http { url, headers } => std::iter::once(url)
                .chain(headers.iter().map(|h| &h.value))
                .collect(),
        };
        templates.iter().any(|t| t.inputs().any(|k| k == key))
    }

    /// Whether a value built from `template` must be kept secret.
    fn is_secret(&self, template: &Template) -> bool {
        template
            .inputs()
            .any(|k| self.inputs.iter().any(|i| i.key == k && i.secret))
    }

    /// Renders the draft for app `id`, whose vendored runtime is `runtime_dir` (relative to
    /// the app folder), with `values` and `extra_args` appended to the arguments.
    pub(crate) fn render(
        &self,
        id: &str,
        runtime_dir: &Path,
        values: &Values,
        extra_args: &[String],
    ) -> Result<Rendered, String> {
        let mut manifest = McpAppManifest {
            id: Some(id.to_owned()),
            name: self.about.name.clone(),
            description: self.about.description.clone(),
            version: self.about.version.clone(),
            homepage_url: self.about.homepage.clone(),
            author: self.about.author.clone(),
            license: self.about.license.clone(),
            tags: self.about.tags.clone(),
            ..McpAppManifest::default()
        };
        let mut secrets = BTreeMap::new();
        let mut keep = |name: String, value: String, secret: bool| -> String {
            if secret {
                let reference = secret_name(&name, &secrets);
                secrets.insert(reference.clone(), value);
                format!("{SECRET_PREFIX}{reference}")
            } else {
                value
            }
        };
        match &self.launch {
            Launch::Stdio {
                command,
                in_runtime,
                args,
                env,
            } => {
                manifest.transport = "stdio".to_owned();
                manifest.command = Some(if *in_runtime {
                    runtime_dir.join(command).display().to_string()
                } else {
                    command.clone()
                });
                let mut position = 0;
                for group in args {
                    for items in expand(group, values) {
                        for (item, template) in items.into_iter().zip(&group.items) {
                            position += 1;
                            let secret = self.is_secret(template);
                            manifest
                                .arguments
                                .push(keep(format!("arg-{position}"), item, secret));
                        }
                    }
                }
                manifest.arguments.extend(extra_args.iter().cloned());
                for valued in env {
                    let Some(value) = valued.value.render(values) else {
                        continue;
                    };
                    let secret = valued.secret || self.is_secret(&valued.value);
                    let value = keep(valued.name.clone(), value, secret);
                    manifest.environment.insert(valued.name.clone(), value);
                }
            }
            Launch::Http { url, headers } => {
                manifest.transport = "http".to_owned();
                if self.is_secret(url) {
                    return Err(
                        "the URL of this remote needs a secret value, and URLs are written into the manifest; the gateway cannot keep it secret".to_owned(),
                    );
                }
                let url = url
                    .render(values)
                    .ok_or_else(|| "the remote's URL needs values for its variables".to_owned())?;
                manifest.url = Some(url);
                for valued in headers {
                    let Some(value) = valued.value.render(values) else {
                        continue;
                    };
                    let secret = valued.secret || self.is_secret(&valued.value);
                    let value = keep(format!("header-{}", valued.name), value, secret);
                    manifest.headers.insert(valued.name.clone(), value);
                }
            }
        }
        Ok(Rendered { manifest, secrets })
    }
}

/// A group's items once per value of its repeated input (or once), without groups that use
/// an input with no value.
fn expand(group: &ArgGroup, values: &Values) -> Vec<Vec<String>> {
    let render_all = |values: &Values| -> Option<Vec<String>> {
        group.items.iter().map(|t| t.render(values)).collect()
    };
    match &group.repeat {
        Some(key) => {
            let Some(each) = values.get(key) else {
                return Vec::new();
            };
            each.iter()
                .filter_map(|value| {
                    let mut one = values.clone();
                    one.insert(key.clone(), vec![value.clone()]);
                    render_all(&one)
                })
                .collect()
        }
        None => render_all(values).into_iter().collect(),
    }
}

/// A secret's name in the store: `name` made safe, and unique among `taken`.
fn secret_name(name: &str, taken: &BTreeMap<String, String>) -> String {
    let mut safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if !is_secret_name(&safe) {
        safe = "secret".to_owned();
    }
    let mut candidate = safe.clone();
    let mut n = 2;
    while taken.contains_key(&candidate) {
        candidate = format!("{safe}-{n}");
        n += 1;
    }
    candidate
}

/// Headers whose values are credentials, whatever the document says.
pub(crate) fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "authorization"
        || lower == "proxy-authorization"
        || lower == "cookie"
        || lower.contains("api-key")
        || lower.contains("apikey")
        || lower.contains("token")
        || lower.contains("secret")
}

/// A usable app id from a package or server name: its last segment, with characters outside
/// `A-Z a-z 0-9 . _ -` replaced, starting with a letter or digit, at most 64 characters.
pub(crate) fn id_from_name(name: &str) -> String {
    let last = name
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(name)
        .trim_start_matches('@');
    let mut id: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(64)
        .collect();
    if id.is_empty() {
        id = "app".to_owned();
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_the_last_segment() {
        assert_eq!(
            id_from_name("@modelcontextprotocol/server-everything"),
            "server-everything"
        );
        assert_eq!(
            id_from_name("io.github.modelcontextprotocol/server-time"),
            "server-time"
        );
        assert_eq!(id_from_name("mcp_server time!"), "mcp_server-time-");
        assert_eq!(id_from_name("__"), "app");
    }

    #[test]
    fn secret_values_become_references_and_the_rest_stays() {
        let mut token = Input::new("token");
        token.secret = true;
        let draft = Draft {
            about: About {
                version: "1.0.0".into(),
                ..About::default()
            },
            id_hint: "x".into(),
            inputs: vec![token, Input::new("dir")],
            launch: Launch::Stdio {
                command: "bin/x".into(),
                in_runtime: true,
                args: vec![
                    ArgGroup {
                        items: vec![Template::text("--key"), Template::input("token")],
                        repeat: None,
                    },
                    ArgGroup {
                        items: vec![Template::text("--dir"), Template::input("dir")],
                        repeat: Some("dir".into()),
                    },
                ],
                env: vec![
                    Valued {
                        name: "TOKEN".into(),
                        value: Template::input("token"),
                        secret: false,
                    },
                    Valued {
                        name: "FIXED".into(),
                        value: Template::text("k"),
                        secret: true,
                    },
                ],
            },
            runtime: Runtime::None,
            notes: Vec::new(),
        };
        let mut values = Values::default();
        values.insert("token", vec!["t0p".into()]);
        values.insert("dir", vec!["/a".into(), "/b".into()]);
        let rendered = draft
            .render(
                "x",
                Path::new(".mcpapp-runtime/1.0.0"),
                &values,
                &["--v".into()],
            )
            .unwrap();
        let m = &rendered.manifest;
        assert_eq!(m.command.as_deref(), Some(".mcpapp-runtime/1.0.0/bin/x"));
        assert_eq!(
            m.arguments,
            ["--key", "secret:arg-2", "--dir", "/a", "--dir", "/b", "--v"]
        );
        assert_eq!(m.environment["TOKEN"], "secret:TOKEN");
        assert_eq!(m.environment["FIXED"], "secret:FIXED");
        assert_eq!(rendered.secrets["arg-2"], "t0p");
        assert_eq!(rendered.secrets["TOKEN"], "t0p");
        assert!(!m.to_json_pretty().contains("t0p"));
    }
}
