//! `mcpapp-gateway validate`: checks manifests the way discovery reads them, without any
//! configuration (no entries, no allow/deny rules), and prints compiler-style lines.

use std::process::ExitCode;

use std::io::Write;

use mcpapp_discovery::Discovery;
use mcpapp_manifest::{McpAppsConfig, Severity};

use crate::cli::ValidateArgs;

/// Exit code when any manifest is invalid.
const EXIT_INVALID: u8 = 1;

pub(crate) fn run(args: &ValidateArgs) -> ExitCode {
    let config = McpAppsConfig {
        enabled: true,
        ..McpAppsConfig::default()
    };
    let paths = args.paths.iter().map(|p| p.display().to_string()).collect();
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    // Default rules allow everything and compile no patterns, so building cannot fail.
    let discovery = match Discovery::builder(config)
        .discovery_paths(paths, cwd)
        .build()
    {
        Ok(discovery) => discovery,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let report = discovery.scan();

    let mut errors = 0;
    for diagnostic in &report.diagnostics {
        let mut diagnostic = diagnostic.clone();
        // A path that does not exist is only a debug note for discovery; here it was named
        // explicitly, so it is an error.
        if diagnostic.severity == Severity::Debug {
            diagnostic.severity = Severity::Error;
        }
        if diagnostic.severity == Severity::Error {
            errors += 1;
        }
        if diagnostic.severity >= Severity::Warning {
            // A reader that stops early (`| head`) is not an error worth a panic.
            if writeln!(std::io::stdout(), "{diagnostic}").is_err() {
                break;
            }
        }
    }
    let invalid_apps = report.apps.iter().filter(|a| !a.state.is_valid).count();
    let checked = report.apps.len();
    eprintln!(
        "checked {checked} manifest{}: {} valid, {invalid_apps} invalid, {errors} error{}",
        if checked == 1 { "" } else { "s" },
        checked - invalid_apps,
        if errors == 1 { "" } else { "s" },
    );
    if invalid_apps > 0 || errors > 0 {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    }
}
