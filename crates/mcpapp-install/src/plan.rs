//! From a source to a [`Plan`]: everything resolved that can be before anything is written
//! (the exact version, its integrity, the app's id and folder, the inputs, the command line),
//! so that the operator can be shown exactly what will be installed and run, and asked.

use std::path::{Path, PathBuf};

use mcpapp_manifest::RUNTIME_FOLDER_NAME;

use crate::draft::{About, ArgGroup, Draft, Launch, Runtime, Valued, id_from_name};
use crate::error::InstallError;
use crate::inputs::{Input, Template, Values};
use crate::installed::InstalledApp;
use crate::installer::{Installer, Mode};
use crate::mcpb::Bundle;
use crate::packages;
use crate::permissions::{Hints, Requested};
use crate::server_json::{Chosen, PackageChoice, ServerDocument};
use crate::source::Source;
use crate::vendor;

/// What the operator asked for beyond the source.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The app id to use instead of the one derived from the source.
    pub id: Option<String>,
    /// Which package or remote of a `server.json` to install.
    pub package: PackageChoice,
    /// The SHA-256 a bundle URL must have.
    pub sha256: Option<String>,
    /// Arguments for the package's program, after its own.
    pub extra_args: Vec<String>,
}

/// An install (or update) resolved and ready to be shown and carried out.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The app's id.
    pub id: String,
    /// The app's folder.
    pub folder: PathBuf,
    /// The kind of source (`npm`, `pypi`, `server.json`, `registry`, `mcpb`, `remote`).
    pub source_kind: &'static str,
    /// The source as given.
    pub requested: String,
    /// The package, bundle URL or server name.
    pub identifier: String,
    /// The exact version.
    pub version: String,
    /// The hash of what is installed, when known.
    pub integrity: Option<String>,
    /// The registry it comes from.
    pub registry: Option<String>,
    /// Which package or remote of a `server.json`.
    pub package_type: Option<String>,
    /// The app's display name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// What it needs to be given.
    pub inputs: Vec<Input>,
    /// Things to know (a deprecated server, ignored runner arguments).
    pub notes: Vec<String>,
    /// The permissions the app requests, in words, before its inputs have values (the
    /// publisher's hints, and the path inputs whose values it will be given); see
    /// [`Plan::permission_requests`] for the requests themselves.
    pub permissions: Vec<String>,
    /// The installed app this plan updates or reconfigures, if any.
    pub update_of: Option<InstalledApp>,
    pub(crate) draft: Draft,
    pub(crate) descriptor: Option<(String, String)>,
    pub(crate) extra_args: Vec<String>,
    pub(crate) vendor: vendor::VendorOptions,
    pub(crate) hints: Hints,
}

/// A version as a folder name.
pub(crate) fn version_folder(version: &str) -> String {
    version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Plan {
    /// The permissions the app requests with `values`, beyond the default sandbox, and why:
    /// written into its manifest's `permissions`, shown before it is installed, granted (or
    /// not) in the operator's configuration. None for a remote app, which the gateway does not
    /// sandbox.
    pub fn permission_requests(&self, values: &Values) -> Vec<Requested> {
        self.requests(values).0
    }

    /// The requests and what could not be requested.
    fn requests(&self, values: &Values) -> (Vec<Requested>, Vec<String>) {
        if self.transport == "http" {
            return (Vec::new(), Vec::new());
        }
        let draft = &self.draft;
        let (requested, mut notes) =
            self.hints
                .requested(&self.inputs, &|key| draft.uses_input(key), values);
        notes.extend(self.hints.notes.iter().cloned());
        (requested, notes)
    }

    /// The vendored runtime's folder, relative to the app folder.
    pub fn runtime_dir(&self) -> PathBuf {
        Path::new(RUNTIME_FOLDER_NAME).join(version_folder(&self.version))
    }

    /// What will be installed and run, for the operator to agree to: the source, the
    /// package manager's command, the app's command line or URL with secrets masked, the
    /// environment and headers, the requested permissions and the notes.
    ///
    /// # Errors
    /// [`InstallError::Unsupported`] when the values cannot make a manifest.
    pub fn consent(&self, values: &Values) -> Result<String, InstallError> {
        let rendered = self
            .draft
            .render(&self.id, &self.runtime_dir(), values, &self.extra_args)
            .map_err(InstallError::Unsupported)?;
        let manifest = rendered.manifest;
        let mask = |value: &str| match mcpapp_manifest::secret_reference(value) {
            Some(_) => "<secret>".to_owned(),
            None => value.to_owned(),
        };
        let mut out = Vec::new();
        let verb = if self.update_of.is_some() {
            "Update"
        } else {
            "Install"
        };
        out.push(format!(
            "{verb} {} {} as app '{}' in {}",
            self.name,
            self.version,
            self.id,
            self.folder.display()
        ));
        let mut from = format!("  from: {} {}", self.source_kind, self.identifier);
        if let Some(kind) = &self.package_type {
            from.push_str(&format!(" ({kind} package)"));
        }
        if let Some(registry) = &self.registry {
            from.push_str(&format!(", registry {registry}"));
        }
        out.push(from);
        if let Some(integrity) = &self.integrity {
            out.push(format!("  integrity: {integrity}"));
        }
        let runtime = self.folder.join(self.runtime_dir());
        match &self.draft.runtime {
            Runtime::Npm {
                name,
                version,
                registry,
            } => {
                let args =
                    vendor::npm_command(&runtime, name, version, registry.as_deref(), &self.vendor);
                out.push("It first runs (no shell):".to_owned());
                out.push(format!("  {}", vendor::show(Path::new("npm"), &args)));
            }
            Runtime::Pypi { name, version, .. } => {
                out.push("It first runs (no shell):".to_owned());
                out.push(format!(
                    "  python3 -m venv {0}/venv (or uv venv), then {0}/venv/bin/python -m pip install {name}=={version}",
                    runtime.display()
                ));
            }
            Runtime::Bundle(bundle) => out.push(format!(
                "It first unpacks the bundle (SHA-256 {}) into {}/bundle",
                bundle.sha256,
                runtime.display()
            )),
            Runtime::None => {}
        }
        match self.transport {
            "http" => {
                out.push("The gateway then connects to:".to_owned());
                out.push(format!("  {}", manifest.url.as_deref().unwrap_or_default()));
                for (name, value) in &manifest.headers {
                    out.push(format!("  header {name}: {}", mask(value)));
                }
            }
            _ => {
                out.push("The gateway then starts it as (no shell):".to_owned());
                let line = std::iter::once(manifest.command.clone().unwrap_or_default())
                    .chain(manifest.arguments.iter().map(|a| mask(a)))
                    .collect::<Vec<_>>()
                    .join(" ");
                out.push(format!("  {line}"));
                for (name, value) in &manifest.environment {
                    out.push(format!("  environment {name}={}", mask(value)));
                }
            }
        }
        let (requested, permission_notes) = self.requests(values);
        out.extend(requested_lines(&requested));
        if self.transport == "http" {
            out.push(
                "Sandbox: none from the gateway; the app runs where its URL points".to_owned(),
            );
        } else {
            out.push(format!(
                "Sandbox: the gateway's app sandbox on Linux (McpApps.Isolation): it reads its folder and the system's programs, writes only its state folder, and has no network; grant more under McpApps.Entries.{}.Isolation",
                self.id
            ));
        }
        let secrets: Vec<&str> = self
            .inputs
            .iter()
            .filter(|i| i.secret && values.get(&i.key).is_some())
            .map(|i| i.key.as_str())
            .collect();
        if !secrets.is_empty() {
            out.push(format!(
                "Secret inputs ({}) go to the gateway's secret store, not into the app folder",
                secrets.join(", ")
            ));
        }
        for note in self.notes.iter().chain(&permission_notes) {
            out.push(format!("Note: {note}"));
        }
        Ok(out.join("\n"))
    }
}

/// The consent text's lines about the permissions requested.
fn requested_lines(requested: &[Requested]) -> Vec<String> {
    if requested.is_empty() {
        return vec![
            "Permissions it requests: none beyond its own folder and state folder".to_owned(),
        ];
    }
    std::iter::once(
        "Permissions it requests beyond its own folder and state folder (written into its manifest; granted only in the operator's configuration):".to_owned(),
    )
    .chain(
        requested
            .iter()
            .map(|r| format!("  {}  ({})", r.permission, r.reason)),
    )
    .collect()
}

impl Installer {
    /// Resolves `source` into a plan: fetches what describes it (registry metadata, a
    /// document, a bundle, checked), picks the exact version and the id, and maps it.
    ///
    /// # Errors
    /// Any [`InstallError`] about the source; nothing is written.
    pub async fn plan(&self, source: &Source, request: &Request) -> Result<Plan, InstallError> {
        let requested = source.to_string();
        let (mut draft, facts) = self.draft_of(source, request).await?;
        draft.mark_secret_inputs();
        let id = match &request.id {
            Some(id) => id.clone(),
            None => draft.id_hint.clone(),
        };
        check_id(&id)?;
        let folder = self.apps_dir().join(&id);
        let update_of = self.existing(&id, &facts.identifier, source.kind())?;
        let transport = match draft.launch {
            Launch::Http { .. } => "http",
            Launch::Stdio { .. } => "stdio",
        };
        let mut plan = Plan {
            id,
            folder,
            source_kind: source.kind(),
            requested,
            identifier: facts.identifier,
            version: draft.about.version.clone(),
            integrity: facts.integrity,
            registry: facts.registry,
            package_type: facts.package_type,
            name: draft
                .about
                .name
                .clone()
                .unwrap_or_else(|| draft.id_hint.clone()),
            description: draft.about.description.clone(),
            transport,
            inputs: draft.inputs.clone(),
            notes: draft.notes.clone(),
            permissions: Vec::new(),
            update_of,
            draft,
            descriptor: facts.descriptor,
            extra_args: request.extra_args.clone(),
            vendor: self.vendor_options().clone(),
            hints: facts.hints,
        };
        if let Runtime::Bundle(bundle) = &plan.draft.runtime {
            // `${__dirname}` is where the bundle will be unpacked.
            let bundle = bundle.as_ref().clone();
            let dir = plan.folder.join(plan.runtime_dir()).join("bundle");
            let mut draft = bundle.draft(&dir)?;
            draft.notes.extend(plan.draft.notes.clone());
            draft.about.name = draft.about.name.or(Some(plan.name.clone()));
            draft.mark_secret_inputs();
            plan.inputs = draft.inputs.clone();
            plan.draft = draft;
        }
        if plan.transport == "http" {
            if !plan.hints.fixed.is_empty() {
                plan.notes.push("the publisher's ToolHive profile asks for permissions, which do not apply to a remote app: it runs where its URL points, outside the gateway's sandbox".to_owned());
            }
        } else {
            let draft = &plan.draft;
            plan.permissions = plan
                .hints
                .describe(&plan.inputs, &|key| draft.uses_input(key));
        }
        Ok(plan)
    }

    /// The draft of `source` and the facts about where it came from.
    async fn draft_of(
        &self,
        source: &Source,
        request: &Request,
    ) -> Result<(Draft, Facts), InstallError> {
        match source {
            Source::Npm { name, version } => self.npm_draft(name, version.as_deref(), None).await,
            Source::Pypi { name, version } => self.pypi_draft(name, version.as_deref(), None).await,
            Source::ServerJsonFile(path) => {
                let text = std::fs::read_to_string(path).map_err(InstallError::io(path))?;
                let document = ServerDocument::parse(&text, &path.display().to_string())?;
                self.document_draft(&document, request, None, Vec::new())
                    .await
            }
            Source::ServerJsonUrl(url) => {
                let text = self
                    .http()
                    .get_text(url.as_str(), "application/json")
                    .await?;
                let document = ServerDocument::parse(&text, url.as_str())?;
                self.document_draft(&document, request, None, Vec::new())
                    .await
            }
            Source::Registry { name, version } => {
                let (entry, notes) = self.registry_entry(name, version.as_deref()).await?;
                let document = ServerDocument::parse(&entry.document, &entry.registry_url)?;
                self.document_draft(&document, request, Some(entry.registry_url.clone()), notes)
                    .await
            }
            Source::BundleFile(path) => {
                let bytes = std::fs::read(path).map_err(InstallError::io(path))?;
                let bundle = Bundle::open(
                    bytes,
                    &path.display().to_string(),
                    request.sha256.as_deref(),
                    self.limits(),
                )?;
                Ok(bundle_draft(bundle, None))
            }
            Source::BundleUrl(url) => {
                let Some(sha256) = request.sha256.as_deref() else {
                    return Err(InstallError::BadSource {
                        source_text: url.to_string(),
                        reason: "a bundle URL needs --sha256 HASH: a download is opened only when its hash is known".to_owned(),
                    });
                };
                let bundle = self.fetch_bundle(url.as_str(), sha256).await?;
                Ok(bundle_draft(bundle, None))
            }
            Source::Remote(url) => Ok(remote_draft(url)),
        }
    }

    async fn npm_draft(
        &self,
        name: &str,
        version: Option<&str>,
        registry: Option<&str>,
    ) -> Result<(Draft, Facts), InstallError> {
        let base = registry.unwrap_or(self.npm_registry());
        let resolved = packages::npm_resolve(self.http(), base, name, version).await?;
        let bin = packages::npm_bin(name, &resolved.bins)?;
        let (command, in_runtime, args, runtime) = match self.mode() {
            Mode::Vendor => (
                format!("node_modules/.bin/{bin}"),
                true,
                Vec::new(),
                Runtime::Npm {
                    name: name.to_owned(),
                    version: resolved.version.clone(),
                    registry: registry.map(str::to_owned),
                },
            ),
            Mode::Run => (
                "npx".to_owned(),
                false,
                vec![
                    ArgGroup::one(Template::text("-y")),
                    ArgGroup::one(Template::text(format!("{name}@{}", resolved.version))),
                ],
                Runtime::None,
            ),
        };
        Ok(package_draft(
            name,
            resolved.version,
            resolved.integrity,
            base,
            (command, in_runtime, args, runtime),
        ))
    }

    async fn pypi_draft(
        &self,
        name: &str,
        version: Option<&str>,
        index: Option<&str>,
    ) -> Result<(Draft, Facts), InstallError> {
        let base = index.unwrap_or(self.pypi());
        let resolved = packages::pypi_resolve(self.http(), base, name, version).await?;
        let (command, in_runtime, args, runtime) = match self.mode() {
            // The console script is known once installed; the project's name is the usual one.
            Mode::Vendor => (
                format!("venv/bin/{name}"),
                true,
                Vec::new(),
                Runtime::Pypi {
                    name: name.to_owned(),
                    version: resolved.version.clone(),
                    index: index.map(str::to_owned),
                },
            ),
            Mode::Run => (
                "uvx".to_owned(),
                false,
                vec![ArgGroup::one(Template::text(format!(
                    "{name}@{}",
                    resolved.version
                )))],
                Runtime::None,
            ),
        };
        Ok(package_draft(
            name,
            resolved.version,
            resolved.integrity,
            base,
            (command, in_runtime, args, runtime),
        ))
    }

    async fn document_draft(
        &self,
        document: &ServerDocument,
        request: &Request,
        registry: Option<String>,
        notes: Vec<String>,
    ) -> Result<(Draft, Facts), InstallError> {
        let descriptor = Some(("server.json".to_owned(), document.text().to_owned()));
        let server = &document.server;
        let (mut draft, facts) = match document.choose(request.package)? {
            Chosen::Bundle { url, sha256, notes } => {
                let bundle = self.fetch_bundle(&url, &sha256).await?;
                let (mut draft, mut facts) = bundle_draft(bundle, Some("mcpb"));
                draft.notes.extend(notes);
                facts.identifier = server.name.clone();
                (draft, facts)
            }
            Chosen::Draft(draft, kind) => {
                let mut draft = *draft;
                let mut facts = Facts {
                    identifier: server.name.clone(),
                    package_type: Some(kind.to_owned()),
                    ..Facts::default()
                };
                match draft.runtime.clone() {
                    Runtime::Npm {
                        name,
                        version,
                        registry,
                    } => {
                        let (package, package_facts) = self
                            .npm_draft(&name, Some(&version), registry.as_deref())
                            .await?;
                        merge_package(&mut draft, package);
                        facts.integrity = package_facts.integrity;
                        facts.registry = package_facts.registry;
                    }
                    Runtime::Pypi {
                        name,
                        version,
                        index,
                    } => {
                        let (package, package_facts) = self
                            .pypi_draft(&name, Some(&version), index.as_deref())
                            .await?;
                        merge_package(&mut draft, package);
                        facts.integrity = package_facts.integrity;
                        facts.registry = package_facts.registry;
                    }
                    Runtime::None | Runtime::Bundle(_) => {}
                }
                (draft, facts)
            }
        };
        draft.notes.extend(notes);
        // The document's name and version describe the app, whatever the package is called.
        draft.about.name = server.title.clone().or_else(|| Some(server.name.clone()));
        draft.about.description = server.description.clone();
        draft.about.version = server.version.clone();
        draft.id_hint = id_from_name(&server.name);
        Ok((
            draft,
            Facts {
                registry: registry.or(facts.registry),
                descriptor,
                hints: crate::permissions::toolhive_hints(server.meta.as_ref()),
                ..facts
            },
        ))
    }

    async fn fetch_bundle(&self, url: &str, sha256: &str) -> Result<Bundle, InstallError> {
        let bytes = self
            .http()
            .get_ok(
                url,
                "application/octet-stream",
                self.limits().max_bundle_bytes,
            )
            .await?;
        Bundle::open(bytes, url, Some(sha256), self.limits())
    }

    /// The installed app with id `id`, when it came from the same package or server (an
    /// update or a change of inputs); an error when the id is someone else's.
    fn existing(
        &self,
        id: &str,
        identifier: &str,
        kind: &str,
    ) -> Result<Option<InstalledApp>, InstallError> {
        if let Some(app) = self.installed().into_iter().find(|a| a.id == id) {
            if app.record.identifier == identifier
                && (app.record.source == kind
                    || kind == "registry"
                    || app.record.source == "registry")
            {
                return Ok(Some(app));
            }
            return Err(InstallError::IdTaken {
                id: id.to_owned(),
                where_: format!(
                    "{}, installed from {} {}",
                    app.folder.display(),
                    app.record.source,
                    app.record.identifier
                ),
            });
        }
        if let Some(path) = self.id_in_use(id) {
            return Err(InstallError::IdTaken {
                id: id.to_owned(),
                where_: path,
            });
        }
        Ok(None)
    }
}

/// Where a source came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    pub(crate) identifier: String,
    pub(crate) integrity: Option<String>,
    pub(crate) registry: Option<String>,
    pub(crate) package_type: Option<String>,
    pub(crate) descriptor: Option<(String, String)>,
    /// What the publisher says the app needs (a `server.json`'s ToolHive profile).
    pub(crate) hints: Hints,
}

/// What a package's launch is made of: its command, whether that lies in the vendored
/// runtime, its arguments, and the runtime to install.
type PackageLaunch = (String, bool, Vec<ArgGroup>, Runtime);

/// The draft and facts of a package resolved from a registry (npm or PyPI): named after the
/// package, started as `launch`, no inputs.
fn package_draft(
    name: &str,
    version: String,
    integrity: Option<String>,
    registry: &str,
    (command, in_runtime, args, runtime): PackageLaunch,
) -> (Draft, Facts) {
    let draft = Draft {
        about: About {
            name: Some(name.to_owned()),
            version,
            ..About::default()
        },
        id_hint: id_from_name(name),
        inputs: Vec::new(),
        launch: Launch::Stdio {
            command,
            in_runtime,
            args,
            env: Vec::new(),
        },
        runtime,
        notes: Vec::new(),
    };
    let facts = Facts {
        identifier: name.to_owned(),
        integrity,
        registry: Some(registry.to_owned()),
        ..Facts::default()
    };
    (draft, facts)
}

/// A `server.json` package's draft takes the package's command, runner arguments and
/// runtime, before its own arguments.
fn merge_package(draft: &mut Draft, package: Draft) {
    if let (
        Launch::Stdio {
            command,
            in_runtime,
            args,
            ..
        },
        Launch::Stdio {
            command: package_command,
            in_runtime: package_in_runtime,
            args: package_args,
            ..
        },
    ) = (&mut draft.launch, package.launch)
    {
        *command = package_command;
        *in_runtime = package_in_runtime;
        let own = std::mem::take(args);
        *args = package_args.into_iter().chain(own).collect();
    }
    draft.runtime = package.runtime;
}

fn bundle_draft(bundle: Bundle, package_type: Option<&str>) -> (Draft, Facts) {
    let manifest = &bundle.manifest;
    let facts = Facts {
        identifier: bundle.file.clone(),
        integrity: Some(format!("sha256-{}", bundle.sha256)),
        registry: None,
        package_type: package_type.map(str::to_owned),
        descriptor: Some((
            "mcpb-manifest.json".to_owned(),
            bundle.manifest_text.clone(),
        )),
        hints: Hints::default(),
    };
    // Mapped properly once the folder is known (see `Installer::plan`).
    let draft = Draft {
        about: About {
            name: manifest
                .display_name
                .clone()
                .or_else(|| Some(manifest.name.clone())),
            description: Some(manifest.description.clone()),
            version: manifest.version.clone(),
            ..About::default()
        },
        id_hint: id_from_name(&manifest.name),
        inputs: Vec::new(),
        launch: Launch::Stdio {
            command: String::new(),
            in_runtime: false,
            args: Vec::new(),
            env: Vec::new(),
        },
        runtime: Runtime::Bundle(Box::new(bundle)),
        notes: Vec::new(),
    };
    (draft, facts)
}

fn remote_draft(url: &url::Url) -> (Draft, Facts) {
    let mut authorization = Input::new("authorization");
    authorization.secret = true;
    authorization.description =
        Some("The Authorization header's value, if the endpoint needs one (Bearer …)".to_owned());
    let host = url.host_str().unwrap_or("remote").to_owned();
    let draft = Draft {
        about: About {
            name: Some(host.clone()),
            version: "unversioned".to_owned(),
            ..About::default()
        },
        id_hint: id_from_name(&host),
        inputs: vec![authorization],
        launch: Launch::Http {
            url: Template::text(url.as_str()),
            headers: vec![Valued {
                name: "Authorization".to_owned(),
                value: Template::input("authorization"),
                secret: true,
            }],
        },
        runtime: Runtime::None,
        notes: Vec::new(),
    };
    (
        draft,
        Facts {
            identifier: url.to_string(),
            ..Facts::default()
        },
    )
}

fn check_id(id: &str) -> Result<(), InstallError> {
    let ok = (1..=mcpapp_manifest::MAX_ID_LEN).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(InstallError::BadSource {
            source_text: id.to_owned(),
            reason: "an app id is 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
                .to_owned(),
        })
    }
}
