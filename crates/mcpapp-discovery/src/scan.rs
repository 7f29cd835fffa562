//! The file-system walk: finds manifest files under one root, in parallel, and reads and
//! parses each one on the walking thread that found it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ignore::{WalkBuilder, WalkState};
use mcpapp_manifest::{MANIFEST_FILE_NAME, McpAppManifest, ParsedManifest, Severity};

use crate::report::Diagnostic;

/// Manifest files larger than this are refused: real ones are a few kilobytes, and reading an
/// arbitrarily large file into memory because of its name is a needless risk.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// A manifest file found by the walk, already read and parsed (or not).
#[derive(Debug)]
pub(crate) struct Found {
    /// The manifest's path as reached from the root (symbolic links kept).
    pub(crate) path: PathBuf,
    /// The path with links resolved, to notice one file reached twice.
    pub(crate) canonical: PathBuf,
    /// The parsed manifest, or why it could not be read or parsed.
    pub(crate) parsed: Result<ParsedManifest, Diagnostic>,
}

/// What one root's walk produced.
#[derive(Debug, Default)]
pub(crate) struct RootScan {
    /// Manifests, sorted by the path of their folder.
    pub(crate) found: Vec<Found>,
    /// Problems met on the way (unreadable folders, link loops), sorted by path.
    pub(crate) problems: Vec<Diagnostic>,
}

/// Walks `root` (an existing folder), following symbolic links with loop detection, including
/// hidden folders and ignoring `.gitignore`-style rules.
pub(crate) fn scan_root(root: &Path, threads: usize) -> RootScan {
    let output = Mutex::new(RootScan::default());
    WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(false)
        .follow_links(true)
        .threads(threads)
        .build_parallel()
        .run(|| {
            let output = &output;
            Box::new(move |entry| {
                match entry {
                    Ok(entry) => {
                        let is_manifest = entry.file_name() == MANIFEST_FILE_NAME
                            && entry.file_type().is_some_and(|t| t.is_file());
                        if is_manifest {
                            let found = read_manifest(entry.path());
                            lock(output).found.push(found);
                        }
                    }
                    Err(err) => {
                        let problem = walk_problem(root, &err);
                        lock(output).problems.push(problem);
                    }
                }
                WalkState::Continue
            })
        });
    let mut scan = output
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner());
    // Order by app folder: a manifest sorts before those in its subfolders.
    scan.found
        .sort_by(|a, b| a.path.parent().cmp(&b.path.parent()));
    scan.problems.sort_by(|a, b| a.path.cmp(&b.path));
    scan
}

fn lock(output: &Mutex<RootScan>) -> std::sync::MutexGuard<'_, RootScan> {
    // A panicking visitor would already have ended the walk; the data is still usable.
    output.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Reads and parses one manifest file; any failure becomes a diagnostic naming the file.
pub(crate) fn read_manifest(path: &Path) -> Found {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let parsed = read_text(path).and_then(|text| {
        McpAppManifest::parse(&text).map_err(|err| {
            Diagnostic::new(
                Some(path),
                err.position(),
                Severity::Error,
                format!("invalid manifest, skipped: {}", err.detail()),
            )
        })
    });
    Found {
        path: path.to_path_buf(),
        canonical,
        parsed,
    }
}

fn read_text(path: &Path) -> Result<String, Diagnostic> {
    let error = |message: String| Diagnostic::new(Some(path), None, Severity::Error, message);
    let metadata = std::fs::metadata(path)
        .map_err(|e| error(format!("cannot read manifest, skipped: {e}")))?;
    if metadata.len() > MAX_MANIFEST_BYTES {
        return Err(error(format!(
            "manifest is {} bytes, more than the {MAX_MANIFEST_BYTES}-byte limit; skipped",
            metadata.len()
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| error(format!("cannot read manifest, skipped: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        error(format!(
            "manifest is not valid UTF-8 (at byte {}); skipped",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Describes a walk error; the walk itself carries on with the rest of the root.
fn walk_problem(root: &Path, err: &ignore::Error) -> Diagnostic {
    match err {
        ignore::Error::WithDepth { err, .. } => walk_problem(root, err),
        ignore::Error::Loop { ancestor, child } => Diagnostic::new(
            Some(child),
            None,
            Severity::Warning,
            format!(
                "symbolic link loop: {} leads back to {}; not followed",
                child.display(),
                ancestor.display()
            ),
        ),
        ignore::Error::WithPath { path, err } => {
            let detail = match err.as_ref() {
                ignore::Error::Io(io) => io.to_string(),
                other => other.to_string(),
            };
            Diagnostic::new(
                Some(path),
                None,
                Severity::Warning,
                format!("cannot read {}: {detail}; skipped", path.display()),
            )
        }
        other => Diagnostic::new(
            Some(root),
            None,
            Severity::Warning,
            format!("error while scanning {}: {other}", root.display()),
        ),
    }
}
