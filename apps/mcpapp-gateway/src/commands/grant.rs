//! Grants from the command line: `grant ID …`, and the part of `install` that lists what an
//! app requests, decides what the operator grants (`--grant`, `--grant-requested`, or a
//! prompt per request on a terminal) and records it in `--config` through
//! `mcpapp_install::GrantsFile`, which refuses what the gateway would refuse before anything
//! is written.

use std::io::Write as _;
use std::process::ExitCode;

use mcpapp_install::{
    GrantsFile, InstallError, Permission, grants_snippet, permissions_of, ungranted,
};

use super::install::{Failure, interactive, usage};
use crate::cli::{ConfigArgs, GrantArgs};

/// What the command line asks to grant.
pub(crate) struct Asked<'a> {
    /// `--grant KIND=VALUE` (or `grant ID KIND=VALUE`).
    pub(crate) flags: &'a [String],
    /// `--grant-requested` (or `grant --requested`).
    pub(crate) requested: bool,
    /// `--yes`: no prompts.
    pub(crate) yes: bool,
}

/// The grants `asked` names, with relative paths made absolute against the current folder (a
/// relative path in the configuration would be read against the file's folder instead).
fn parse_flags(flags: &[String]) -> Result<Vec<Permission>, Failure> {
    flags
        .iter()
        .map(|flag| {
            let permission: Permission = flag
                .parse()
                .map_err(|e: String| usage(anyhow::anyhow!("grant {e}")))?;
            let absolute = |path: String| {
                if path.starts_with('/') || path == "~" || path.starts_with("~/") {
                    path
                } else {
                    std::path::absolute(&path).map_or(path, |p| p.display().to_string())
                }
            };
            Ok(match permission {
                Permission::Read(path) => Permission::Read(absolute(path)),
                Permission::Write(path) => Permission::Write(absolute(path)),
                other => other,
            })
        })
        .collect()
}

/// What to grant: the flags, every request not granted yet with `--grant-requested`, else
/// (on a terminal, without `--yes`) the answer to a question per request not granted yet.
pub(crate) fn choose(
    asked: &Asked<'_>,
    pending: &[(Permission, String)],
) -> Result<Vec<Permission>, Failure> {
    let mut chosen = parse_flags(asked.flags)?;
    if asked.requested {
        chosen.extend(pending.iter().map(|(p, _)| p.clone()));
    } else if chosen.is_empty() && !asked.yes && interactive() && !pending.is_empty() {
        chosen = prompt(pending)?;
    }
    let mut unique = Vec::new();
    for grant in chosen {
        if !unique.contains(&grant) {
            unique.push(grant);
        }
    }
    Ok(unique)
}

/// Asks about each request: yes, no, or all of the rest.
fn prompt(pending: &[(Permission, String)]) -> Result<Vec<Permission>, Failure> {
    let term = console::Term::stderr();
    let mut chosen = Vec::new();
    let mut all = false;
    for (permission, _) in pending {
        if all {
            chosen.push(permission.clone());
            continue;
        }
        term.write_str(&format!(
            "Grant {permission} (let it {})? [y/N/a=all] ",
            permission.describe()
        ))?;
        match term.read_line()?.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => chosen.push(permission.clone()),
            "a" | "all" => {
                all = true;
                chosen.push(permission.clone());
            }
            _ => {}
        }
    }
    Ok(chosen)
}

/// The configuration file grants go to, or a usage error saying where grants are kept and
/// what to add by hand.
pub(crate) fn file_for(
    config: &ConfigArgs,
    id: &str,
    grants: &[Permission],
) -> Result<GrantsFile, Failure> {
    let snippet = grants_snippet(id, grants);
    let Some(path) = &config.config else {
        return Err(usage(anyhow::anyhow!(
            "grants are kept in the gateway's configuration file (McpApps.Entries.{id}.Isolation), never in the app's folder, and no --config names one; pass the file the gateway runs with, or write one with this and pass it with --config:\n{snippet}"
        )));
    };
    if !path.is_file() {
        return Err(usage(anyhow::anyhow!(
            "grants are kept in the gateway's configuration file (McpApps.Entries.{id}.Isolation), and {} is not a file; create it with this:\n{snippet}",
            path.display()
        )));
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    Ok(GrantsFile::new(path.clone()).discovery_paths(config.paths.clone(), cwd))
}

/// The command that grants the rest later, as the operator would type it.
pub(crate) fn later_command(config: &ConfigArgs, id: &str) -> String {
    let mut command = format!("mcpapp-gateway grant {id} --requested");
    if let Some(file) = &config.config {
        command.push_str(&format!(" --config {}", file.display()));
    }
    for path in &config.paths {
        command.push_str(&format!(" --path {path}"));
    }
    command
}

/// Lists `grants` one a line.
pub(crate) fn listed(grants: &[Permission]) -> String {
    grants
        .iter()
        .map(|g| format!("  {g}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Records `grants` and says what changed.
pub(crate) fn record(
    file: &GrantsFile,
    id: &str,
    grants: &[Permission],
    out: &mut impl std::io::Write,
) -> Result<(), Failure> {
    let change = file.record(id, grants).map_err(|err| match err {
        InstallError::GrantRefused { .. } => usage(anyhow::anyhow!("{err}; nothing was written")),
        other => other.into(),
    })?;
    let path = file.path().display();
    if change.added.is_empty() {
        writeln!(
            out,
            "{path} already grants these under McpApps.Entries.{id}.Isolation"
        )?;
    } else {
        writeln!(
            out,
            "recorded in {path} under McpApps.Entries.{id}.Isolation:\n{}",
            listed(&change.added)
        )?;
    }
    for note in &change.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

/// Says whether app `id` may run now: every request granted, or the gateway's message for
/// each one that is not, and the command that grants them.
pub(crate) fn outcome(
    config: &ConfigArgs,
    id: &str,
    requested: &[Permission],
    out: &mut impl std::io::Write,
) -> Result<bool, Failure> {
    if requested.is_empty() {
        return Ok(true);
    }
    let discovery = crate::config::load(config).map_err(usage)?.discovery;
    let pending = ungranted(&discovery, id, requested);
    if pending.is_empty() {
        writeln!(
            out,
            "every permission {id} requests is granted; a running gateway applies grants on its next reload"
        )?;
        return Ok(true);
    }
    writeln!(
        out,
        "{id} is invalid and does not run until these are granted (the gateway says):"
    )?;
    for (_, message) in &pending {
        writeln!(out, "  {message}")?;
    }
    if config.config.is_some() {
        writeln!(out, "grant them with: {}", later_command(config, id))?;
    } else {
        let grants: Vec<Permission> = pending.into_iter().map(|(p, _)| p).collect();
        writeln!(
            out,
            "grants are kept in the gateway's configuration file, and it runs without one here; write one with this and pass it with --config:\n{}",
            grants_snippet(id, &grants)
        )?;
    }
    Ok(false)
}

/// `grant ID [KIND=VALUE]... [--requested]`.
pub(crate) async fn grant(args: &GrantArgs) -> Result<ExitCode, Failure> {
    let loaded = crate::config::load(&args.config).map_err(usage)?;
    let report = loaded.discovery.scan();
    let Some(app) = report.app(&args.id) else {
        return Err(usage(anyhow::anyhow!(
            "no app with id '{}' was discovered (mcpapp-gateway discover lists them)",
            args.id
        )));
    };
    let requested = permissions_of(&app.state.manifest.permissions);
    let pending = ungranted(&loaded.discovery, &args.id, &requested);
    let mut out = std::io::stdout().lock();
    if requested.is_empty() {
        writeln!(
            out,
            "{} requests nothing beyond the default sandbox",
            args.id
        )?;
    } else {
        writeln!(out, "{} requests:", args.id)?;
        for permission in &requested {
            let state = if pending.iter().any(|(p, _)| p == permission) {
                "not granted"
            } else {
                "granted"
            };
            writeln!(out, "  {permission}  ({state})")?;
        }
    }
    out.flush()?;
    let asked = Asked {
        flags: &args.grants,
        requested: args.requested,
        yes: args.yes,
    };
    let grants = choose(&asked, &pending)?;
    if grants.is_empty() {
        if !pending.is_empty() && !interactive() && !args.yes {
            return Err(usage(anyhow::anyhow!(
                "nothing to grant: name grants (KIND=VALUE) or pass --requested"
            )));
        }
        writeln!(out, "nothing granted")?;
    } else {
        let file = file_for(&args.config, &args.id, &grants)?;
        record(&file, &args.id, &grants, &mut out)?;
    }
    outcome(&args.config, &args.id, &requested, &mut out)?;
    Ok(ExitCode::SUCCESS)
}
