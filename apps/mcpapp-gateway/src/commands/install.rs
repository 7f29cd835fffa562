//! `install`, `installed`, `update` and `uninstall`: the installer of `mcpapp-install` driven
//! from the command line. These parse arguments, ask on the terminal (inputs, consent) and
//! print; the work is the library's.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use mcpapp_install::{
    GrantsFile, Input, InputKind, InstallError, Installer, Mode, PackageChoice, Permission, Plan,
    Prompter, Request, Source, VendorOptions, grants_snippet, ungranted,
};

use super::grant;
use crate::cli::{ConfigArgs, HowArgs, InstallArgs, InstalledArgs, UninstallArgs, UpdateArgs};

/// Exit code of a failed install, update or removal.
const EXIT_FAILED: u8 = 1;
/// Exit code of a usage or configuration error.
const EXIT_USAGE: u8 = 2;

/// Why a command stopped: bad usage or configuration (2), or the work failed (1).
pub(crate) enum Failure {
    Usage(anyhow::Error),
    Failed(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(err: E) -> Self {
        Self::Failed(err.into())
    }
}

pub(super) fn usage(err: impl Into<anyhow::Error>) -> Failure {
    Failure::Usage(err.into())
}

/// Runs one of these commands on a runtime of its own.
pub(crate) fn run(command: impl Future<Output = Result<ExitCode, Failure>>) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(Failure::Usage(err)) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(Failure::Failed(err)) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Whether a person can answer: stdin and stderr are terminals.
pub(super) fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The installer for these arguments.
fn installer(config: &ConfigArgs, how: Option<&HowArgs>) -> Result<Installer, Failure> {
    let loaded = crate::config::load(config).map_err(usage)?;
    let apps_dir = crate::config::apps_dir(&loaded, config).map_err(usage)?;
    let secrets = crate::config::secret_store(&loaded, config);
    let mut builder = Installer::builder(apps_dir, secrets)
        .config(loaded.discovery.config().clone())
        .discovery(loaded.discovery.clone());
    if let Some(how) = how {
        builder = builder
            .mode(match how.mode.as_str() {
                "vendor" => Mode::Vendor,
                "run" => Mode::Run,
                other => {
                    return Err(usage(anyhow::anyhow!("--mode {other}: use vendor or run")));
                }
            })
            .probe(!how.no_probe)
            .vendor_options(VendorOptions {
                allow_scripts: how.allow_scripts,
                cache_dir: how.cache.clone().or_else(|| {
                    std::env::var_os("MCPAPP_INSTALL_CACHE")
                        .filter(|v| !v.is_empty())
                        .map(std::path::PathBuf::from)
                }),
            });
    }
    // The probe start runs the new app, untrusted code, in the sandbox `serve` would give
    // it; this executable is the sandbox's kernel probe, as for `serve`.
    if how.is_some_and(|how| !how.no_probe) {
        builder = builder.sandbox(sandbox(&loaded));
    }
    builder.build().map_err(usage)
}

/// The sandbox of this command's probe starts, as `serve` makes it; the ports of
/// `Gateway.Bind` and `Gateway.SandboxBind`, when they name one, are kept closed to the app
/// as `serve` keeps its listeners' (the ports a running gateway chose itself are not known
/// here, and an app without a network grant reaches no port anyway).
fn sandbox(loaded: &crate::config::Loaded) -> mcpapp_sandbox::Sandbox {
    let sandbox = mcpapp_sandbox::Sandbox::current_exe().unwrap_or_else(|err| {
        tracing::warn!("cannot find this executable to probe the kernel's sandbox support ({err}); sandboxed apps will fail to start");
        mcpapp_sandbox::Sandbox::new("/proc/self/exe")
    });
    let ports = [&loaded.gateway.bind, &loaded.gateway.sandbox_bind]
        .into_iter()
        .flatten()
        .filter_map(|bind| bind.parse::<std::net::SocketAddr>().ok())
        .map(|addr| addr.port())
        .filter(|port| *port != 0);
    sandbox.protect_ports(ports)
}

/// The installer of `serve`'s "Add apps" view: apps go where `install` puts them, with the
/// same secret store and package caches (`MCPAPP_INSTALL_CACHE`).
pub(crate) fn for_serve(
    loaded: &crate::config::Loaded,
    config: &ConfigArgs,
    secrets: mcpapp_install::SecretStore,
) -> anyhow::Result<Installer> {
    let apps_dir = crate::config::apps_dir(loaded, config)?;
    Ok(Installer::builder(apps_dir, secrets)
        .config(loaded.discovery.config().clone())
        .discovery(loaded.discovery.clone())
        .vendor_options(VendorOptions {
            allow_scripts: false,
            cache_dir: std::env::var_os("MCPAPP_INSTALL_CACHE")
                .filter(|v| !v.is_empty())
                .map(std::path::PathBuf::from),
        })
        .build()?)
}

/// `KEY=VALUE` pairs.
fn pairs(set: &[String]) -> Result<Vec<(String, String)>, Failure> {
    set.iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.to_owned()))
                .ok_or_else(|| usage(anyhow::anyhow!("--set {pair}: expected KEY=VALUE")))
        })
        .collect()
}

/// Asks for inputs on the terminal; secret ones without echo.
struct Terminal;

impl Prompter for Terminal {
    fn ask(&mut self, input: &Input) -> Option<String> {
        let term = console::Term::stderr();
        let mut label = input.title.clone().unwrap_or_else(|| input.key.clone());
        if let Some(description) = &input.description {
            label.push_str(&format!(" ({description})"));
        }
        if !input.choices.is_empty() {
            label.push_str(&format!(" [{}]", input.choices.join("/")));
        }
        match (&input.default, input.secret) {
            (Some(default), false) => label.push_str(&format!(" [default {default}]")),
            (Some(_), true) => label.push_str(" [default kept]"),
            (None, _) if input.required => label.push_str(" (required)"),
            _ => {}
        }
        if input.repeated {
            label.push_str(" (several: separate with commas)");
        }
        if matches!(input.kind, InputKind::Boolean) {
            label.push_str(" [true/false]");
        }
        term.write_str(&format!("{}: {label}: ", input.key)).ok()?;
        let answer = if input.secret {
            term.read_secure_line()
        } else {
            term.read_line()
        };
        answer.ok().map(|a| a.trim().to_owned())
    }
}

/// Asks a yes/no question on the terminal; `--yes` answers it.
fn agree(question: &str, yes: bool) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    if !interactive() {
        return Err(usage(anyhow::anyhow!(
            "not asking without a terminal: pass --yes to agree"
        )));
    }
    let term = console::Term::stderr();
    term.write_str(&format!("{question} [y/N] "))?;
    let answer = term.read_line()?;
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(Failure::Failed(InstallError::Declined.into()))
    }
}

/// Values for `plan`'s inputs: kept ones (an update), then `--set`, then prompts and
/// defaults.
fn values(
    installer: &Installer,
    plan: &Plan,
    set: &[String],
) -> Result<mcpapp_install::Values, Failure> {
    let given = pairs(set)?;
    let mut terminal = Terminal;
    let prompter: Option<&mut dyn Prompter> = if interactive() {
        Some(&mut terminal)
    } else {
        None
    };
    Ok(installer.resolve_values(plan, given, prompter)?)
}

fn progress(line: &str) {
    eprintln!("  {line}");
}

/// `install SOURCE`.
pub(crate) async fn install(args: &InstallArgs) -> Result<ExitCode, Failure> {
    let installer = installer(&args.config, Some(&args.how))?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let source = Source::parse(&args.source, &cwd).map_err(usage)?;
    let package = match &args.package {
        Some(kind) => kind
            .parse::<PackageChoice>()
            .map_err(|e| usage(anyhow::anyhow!("--package {e}")))?,
        None => PackageChoice::Auto,
    };
    let request = Request {
        id: args.id.clone(),
        package,
        sha256: args.sha256.clone(),
        extra_args: args.args.clone(),
    };
    let plan = installer.plan(&source, &request).await?;
    let values = values(&installer, &plan, &args.set)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", plan.consent(&values)?)?;
    out.flush()?;
    drop(out);
    let (grants, file) = install_grants(args, &plan, &values)?;
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    agree("Install it?", args.yes)?;
    // Grants are recorded once the install succeeds, but its probe start runs with them.
    let installer = match &file {
        Some(file) => installer.with_discovery(file.discovery_with(&plan.id, &grants)?),
        None => installer,
    };
    let installed = installer.install(&plan, &values, &progress).await?;
    let mut out = std::io::stdout().lock();
    let verb = if installed.previous_version.is_some() {
        "updated"
    } else {
        "installed"
    };
    writeln!(
        out,
        "{verb} {} {} in {}",
        installed.id,
        installed.version,
        installed.folder.display()
    )?;
    if let Some(probe) = &installed.probe {
        match &probe.ui_resource_uri {
            Some(uri) => writeln!(
                out,
                "it started, with {} tools and an MCP App view ({uri})",
                probe.tools
            )?,
            None => writeln!(out, "it started, with {} tools", probe.tools)?,
        }
    }
    if !installed.secret_names.is_empty() {
        writeln!(
            out,
            "its secrets ({}) are in {}",
            installed.secret_names.join(", "),
            installer.secrets().path().display()
        )?;
        if installed.previous_version.is_some() {
            writeln!(
                out,
                "a running gateway uses changed secret values once the app restarts (mcpapp-gateway apps restart {})",
                installed.id
            )?;
        }
    }
    if let Some(file) = &file {
        grant::record(file, &installed.id, &grants, &mut out).map_err(|failure| {
            let (Failure::Usage(err) | Failure::Failed(err)) = failure;
            Failure::Failed(err.context(format!(
                "{} is installed, but its grants were not recorded; add this to the configuration file by hand:\n{}",
                installed.id,
                grants_snippet(&installed.id, &grants)
            )))
        })?;
    }
    grant::outcome(&args.config, &installed.id, &installed.requested, &mut out)?;
    Ok(ExitCode::SUCCESS)
}

/// What `install` grants (see `grant::choose`), checked against the configuration file as the
/// gateway would check it before anything is installed; the file to record it in.
fn install_grants(
    args: &InstallArgs,
    plan: &Plan,
    values: &mcpapp_install::Values,
) -> Result<(Vec<Permission>, Option<GrantsFile>), Failure> {
    let requested: Vec<Permission> = plan
        .permission_requests(values)
        .into_iter()
        .map(|r| r.permission)
        .collect();
    let discovery = crate::config::load(&args.config).map_err(usage)?.discovery;
    let pending = ungranted(&discovery, &plan.id, &requested);
    let asked = grant::Asked {
        flags: &args.grant,
        requested: args.grant_requested,
        yes: args.yes,
    };
    let grants = grant::choose(&asked, &pending)?;
    let mut out = std::io::stdout().lock();
    if grants.is_empty() {
        if !pending.is_empty() {
            writeln!(
                out,
                "Granted: nothing. Until its requests are granted the app is installed but invalid, and does not run; grant them later with: {}",
                grant::later_command(&args.config, &plan.id)
            )?;
        }
        return Ok((grants, None));
    }
    let file = grant::file_for(&args.config, &plan.id, &grants)?;
    // Refused here, before anything is installed or written, in the gateway's words.
    let change = file
        .check(&plan.id, &grants)
        .map_err(|err| usage(anyhow::anyhow!("{err}; nothing was installed or written")))?;
    writeln!(
        out,
        "Grants to record in {} under McpApps.Entries.{}.Isolation:\n{}",
        file.path().display(),
        plan.id,
        grant::listed(&grants)
    )?;
    if change.added.len() < grants.len() {
        writeln!(out, "  (some are there already)")?;
    }
    Ok((grants, Some(file)))
}

/// One row of `installed --json`.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Row<'a> {
    id: &'a str,
    version: &'a str,
    source: &'a str,
    identifier: &'a str,
    folder: &'a std::path::Path,
    lifecycle: mcpapp_manifest::Lifecycle,
    #[serde(skip_serializing_if = "Option::is_none")]
    latest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    check_error: Option<String>,
}

/// `installed`.
pub(crate) async fn installed(args: &InstalledArgs) -> Result<ExitCode, Failure> {
    let installer = installer(&args.config, None)?;
    let apps = installer.installed();
    let mut rows = Vec::new();
    for app in &apps {
        let (latest, check_error) = if args.offline {
            (None, None)
        } else {
            match installer.latest_version(app).await {
                Ok(latest) => (Some(latest), None),
                Err(err) => (None, Some(err.to_string())),
            }
        };
        rows.push(Row {
            id: &app.id,
            version: &app.record.version,
            source: &app.record.source,
            identifier: &app.record.identifier,
            folder: &app.folder,
            lifecycle: app.lifecycle,
            latest,
            check_error,
        });
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        writeln!(out, "no installed apps")?;
        return Ok(ExitCode::SUCCESS);
    }
    let table: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let newer = match (&r.latest, &r.check_error) {
                (Some(latest), _) if latest != r.version => format!("{latest} available"),
                (Some(_), _) => "up to date".to_owned(),
                (None, Some(_)) => "unknown".to_owned(),
                (None, None) => "-".to_owned(),
            };
            [
                r.id.to_owned(),
                r.version.to_owned(),
                format!("{} {}", r.source, r.identifier),
                newer,
                r.folder.display().to_string(),
            ]
        })
        .collect();
    let header = ["ID", "VERSION", "SOURCE", "NEWER", "FOLDER"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&table) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 4 {
                    cell.clone()
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        writeln!(out, "{}", line.join("  "))?;
    }
    for row in &rows {
        if let Some(err) = &row.check_error {
            writeln!(out, "{}: cannot check for a newer version: {err}", row.id)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `update [ID] [--check]`.
pub(crate) async fn update(args: &UpdateArgs) -> Result<ExitCode, Failure> {
    let installer = installer(&args.config, Some(&args.how))?;
    let ids: Vec<String> = match &args.id {
        Some(id) => vec![installer.find(id).map_err(usage)?.id],
        None => installer.installed().into_iter().map(|a| a.id).collect(),
    };
    if ids.is_empty() {
        println!("no installed apps");
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = 0;
    for id in ids {
        match update_one(&installer, &id, args).await {
            Ok(()) => {}
            Err(Failure::Usage(err)) => return Err(Failure::Usage(err)),
            Err(Failure::Failed(err)) => {
                eprintln!("error: {id}: {err:#}");
                failed += 1;
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

async fn update_one(installer: &Installer, id: &str, args: &UpdateArgs) -> Result<(), Failure> {
    let plan = installer.plan_update(id, None).await?;
    let current = plan
        .update_of
        .as_ref()
        .map(|a| a.record.version.clone())
        .context("the plan names no installed app")?;
    if plan.version == current && args.set.is_empty() {
        println!("{id} {current} is up to date");
        return Ok(());
    }
    if args.check {
        println!("{id}: {current} -> {}", plan.version);
        return Ok(());
    }
    let values = values(installer, &plan, &args.set)?;
    println!("{}", plan.consent(&values)?);
    agree(&format!("Update {id}?"), args.yes)?;
    let installed = installer.install(&plan, &values, &progress).await?;
    println!(
        "updated {id} {} -> {}",
        installed.previous_version.as_deref().unwrap_or("?"),
        installed.version
    );
    // A new version may request more than was granted to the old one.
    grant::outcome(
        &args.config,
        id,
        &installed.requested,
        &mut std::io::stdout().lock(),
    )?;
    Ok(())
}

/// Revokes and deletes the OAuth tokens and client registrations an uninstalled app had
/// (best effort: the app is gone either way; a failure is reported).
async fn forget_tokens(config: &ConfigArgs, id: &str) {
    let Ok(loaded) = crate::config::load(config) else {
        return;
    };
    let dir = crate::config::oauth_dir(&loaded, config);
    let Ok(app) = mcpapp_manifest::AppId::new(id) else {
        return;
    };
    // No store, or nothing stored for the app: nothing to forget (and no key file to make).
    if !dir.join(mcpapp_oauth::KEY_FILE_NAME).exists()
        && std::env::var_os(mcpapp_oauth::KEY_ENV).is_none()
    {
        return;
    }
    let forgotten = async {
        let store = crate::config::token_store(&loaded, config)?;
        if !store.has(&app)? {
            return Ok::<bool, anyhow::Error>(false);
        }
        // The redirect URI plays no part in revoking.
        let redirect = mcpapp_oauth::callback_url(&url::Url::parse("http://127.0.0.1")?);
        let client = mcpapp_oauth::OAuthClient::builder(store, redirect).build()?;
        client.forget(&app).await?;
        Ok(true)
    };
    match forgotten.await {
        Ok(true) => println!("revoked and deleted the OAuth tokens of {id}"),
        Ok(false) => {}
        Err(err) => eprintln!("warning: forgetting the OAuth tokens of {id} failed: {err:#}"),
    }
}

/// `uninstall ID`.
pub(crate) async fn uninstall(args: &UninstallArgs) -> Result<ExitCode, Failure> {
    let installer = installer(&args.config, None)?;
    let app = installer.find(&args.id).map_err(usage)?;
    agree(
        &format!(
            "Remove app {} ({} {}) and its folder {} and secrets?",
            app.id,
            app.record.source,
            app.record.identifier,
            app.folder.display()
        ),
        args.yes,
    )?;
    let removed = installer.uninstall(&args.id)?;
    forget_tokens(&args.config, &removed.id).await;
    println!(
        "removed {} ({}; {} secret{} forgotten)",
        removed.id,
        removed.folder.display(),
        removed.secrets,
        if removed.secrets == 1 { "" } else { "s" }
    );
    if installer.config().entries.contains_key(&removed.id) {
        println!(
            "McpApps.Entries.{} is still in the configuration; remove it by hand if it is no longer wanted",
            removed.id
        );
    }
    Ok(ExitCode::SUCCESS)
}
