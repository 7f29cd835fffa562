//! What a scan produces: the apps found and the diagnostics noticed on the way.

use std::fmt;
use std::path::{Path, PathBuf};

use mcpapp_manifest::{AppSpec, Finding, InstallState, Position, Severity};
use serde::Serialize;

/// Something noticed while reading configuration or scanning, with where it is.
///
/// Serializes as `{"path","line","column","severity","message"}`; unknown parts are `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file or folder concerned, when there is one.
    pub path: Option<PathBuf>,
    /// 1-based line in `path`, when known.
    pub line: Option<u32>,
    /// 1-based column in `path`, when known.
    pub column: Option<u32>,
    /// How serious it is.
    pub severity: Severity,
    /// What it is, in one sentence.
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn new(
        path: Option<&Path>,
        position: Option<Position>,
        severity: Severity,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.map(Path::to_path_buf),
            line: position.map(|p| p.line),
            column: position.map(|p| p.column),
            severity,
            message: message.into(),
        }
    }

    /// Wraps a finding of a document read from `path`.
    pub fn from_finding(path: &Path, finding: &Finding) -> Self {
        Self::new(
            Some(path),
            finding.position,
            finding.severity,
            finding.message.clone(),
        )
    }
}

impl fmt::Display for Diagnostic {
    /// `path:line:column: severity: message`, leaving out the parts that are unknown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}:", path.display())?;
            if let Some(line) = self.line {
                write!(f, "{line}:")?;
                if let Some(column) = self.column {
                    write!(f, "{column}:")?;
                }
            }
            f.write_str(" ")?;
        }
        write!(f, "{}: {}", self.severity, self.message)
    }
}

/// One app found by a scan.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredApp {
    /// Everything known about it: the effective manifest, paths, validity and lifecycle.
    pub state: InstallState,
    /// The typed description to run it from, present exactly when the app is valid and
    /// allowed (its lifecycle is `Validated`).
    pub spec: Option<AppSpec>,
}

impl DiscoveredApp {
    /// The app id, or an empty string when the manifest has none.
    pub fn id(&self) -> &str {
        self.state.id()
    }
}

/// The outcome of a scan: apps in discovery order, and diagnostics.
///
/// A scan never fails as a whole: a bad manifest, an unreadable folder or a missing discovery
/// path is a diagnostic beside the good results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiscoveryReport {
    /// Every app whose manifest could be read, valid or not, in discovery order (discovery
    /// paths in configured order, manifests by path within each).
    pub apps: Vec<DiscoveredApp>,
    /// Everything noticed, in the order it was found.
    pub diagnostics: Vec<Diagnostic>,
}

impl DiscoveryReport {
    /// The app with this exact id, if one was found (the first, when ids repeat).
    pub fn app(&self, id: &str) -> Option<&DiscoveredApp> {
        self.apps.iter().find(|app| app.id() == id)
    }

    /// Apps that are valid and allowed to run.
    pub fn runnable(&self) -> impl Iterator<Item = (&DiscoveredApp, &AppSpec)> {
        self.apps
            .iter()
            .filter_map(|app| app.spec.as_ref().map(|spec| (app, spec)))
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}
