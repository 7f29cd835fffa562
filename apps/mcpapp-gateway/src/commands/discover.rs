//! `mcpapp-gateway discover`: scans and reports, as a table or as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use mcpapp_discovery::{Diagnostic, DiscoveredApp};
use mcpapp_manifest::{Lifecycle, Severity, Transport};
use serde::Serialize;
use std::io::Write;

use crate::cli::DiscoverArgs;

/// One app in `discover --json` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AppJson<'a> {
    id: Option<&'a str>,
    name: Option<&'a str>,
    version: &'a str,
    transport: String,
    manifest_path: &'a PathBuf,
    root_path: &'a PathBuf,
    lifecycle: Lifecycle,
    is_valid: bool,
    validation_errors: &'a [String],
    warnings: &'a [String],
}

#[derive(Debug, Serialize)]
struct ReportJson<'a> {
    apps: Vec<AppJson<'a>>,
    diagnostics: Vec<&'a Diagnostic>,
}

/// The transport as the gateway understands it, or as written when it is not understood.
fn transport_name(app: &DiscoveredApp) -> String {
    Transport::parse(&app.state.manifest.transport)
        .map_or_else(|_| app.state.manifest.transport.clone(), |t| t.to_string())
}

fn app_json(app: &DiscoveredApp) -> AppJson<'_> {
    let manifest = &app.state.manifest;
    let name = Some(manifest.display_name()).filter(|n| !n.is_empty());
    AppJson {
        id: manifest.id.as_deref(),
        name,
        version: &manifest.version,
        transport: transport_name(app),
        manifest_path: &app.state.manifest_path,
        root_path: &app.state.root_path,
        lifecycle: app.state.lifecycle,
        is_valid: app.state.is_valid,
        validation_errors: &app.state.validation_errors,
        warnings: &app.state.warnings,
    }
}

pub(crate) fn run(args: &DiscoverArgs) -> anyhow::Result<ExitCode> {
    let loaded = crate::config::load(&args.config)?;
    let report = loaded.discovery.scan();
    let diagnostics: Vec<&Diagnostic> = loaded
        .diagnostics
        .iter()
        .chain(&report.diagnostics)
        .collect();
    if args.json {
        let json = ReportJson {
            apps: report.apps.iter().map(app_json).collect(),
            diagnostics,
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_table(&mut std::io::stdout().lock(), &report.apps, &diagnostics)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(
    out: &mut impl Write,
    apps: &[DiscoveredApp],
    diagnostics: &[&Diagnostic],
) -> std::io::Result<()> {
    let rows: Vec<[String; 5]> = apps
        .iter()
        .map(|app| {
            [
                app.state
                    .manifest
                    .id
                    .clone()
                    .unwrap_or_else(|| "(no id)".to_owned()),
                app.state.manifest.version.clone(),
                transport_name(app),
                app.state.lifecycle.to_string(),
                app.state.manifest_path.display().to_string(),
            ]
        })
        .collect();
    let header = ["ID", "VERSION", "TRANSPORT", "STATE", "MANIFEST"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 5]| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i == 4 {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out
    };
    if apps.is_empty() {
        writeln!(out, "no apps found")?;
    } else {
        writeln!(out, "{}", line(&header))?;
        for (app, row) in apps.iter().zip(&rows) {
            writeln!(out, "{}", line(row))?;
            for error in &app.state.validation_errors {
                writeln!(out, "    problem: {error}")?;
            }
            for warning in &app.state.warnings {
                writeln!(out, "    warning: {warning}")?;
            }
        }
    }
    let runnable = apps.iter().filter(|a| a.spec.is_some()).count();
    writeln!(
        out,
        "\n{} app{} found, {runnable} ready to run",
        apps.len(),
        if apps.len() == 1 { "" } else { "s" }
    )?;
    let shown: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.severity > Severity::Debug)
        .collect();
    if !shown.is_empty() {
        writeln!(out, "\ndiagnostics:")?;
        for diagnostic in shown {
            writeln!(out, "  {diagnostic}")?;
        }
    }
    Ok(())
}
