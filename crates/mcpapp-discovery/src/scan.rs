//! The file-system walk: finds manifest files under one root, in parallel, and reads and
//! parses each one on the walking thread that found it.

use std::fs::{File, FileType};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ignore::{WalkBuilder, WalkState};
use mcpapp_manifest::{
    MANIFEST_FILE_NAME, McpAppManifest, ParsedManifest, RUNTIME_FOLDER_NAME, Severity,
};

use crate::bounded::{Bounded, read_bounded};
use crate::report::Diagnostic;

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
/// hidden folders and ignoring `.gitignore`-style rules. Manifests larger than `limit` bytes
/// are refused.
///
/// Only regular files named `openclaw.mcpapp.json` are read. Anything else with that name (a
/// folder, a named pipe, a socket, a device, a dangling link) is a warning and is never
/// opened: reading a named pipe would block a walking thread until someone writes to it.
///
/// Folders named `.mcpapp-runtime` are not entered: they hold what `install` vendored for an
/// app (npm packages, a virtual environment), thousands of files that are never a manifest of
/// the gateway's.
pub(crate) fn scan_root(root: &Path, threads: usize, limit: u64) -> RootScan {
    let output = Mutex::new(RootScan::default());
    WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(false)
        .follow_links(true)
        .filter_entry(|entry| {
            entry.depth() == 0
                || entry.file_name() != RUNTIME_FOLDER_NAME
                || !entry.file_type().is_some_and(|t| t.is_dir())
        })
        .threads(threads)
        .build_parallel()
        .run(|| {
            let output = &output;
            Box::new(move |entry| {
                match entry {
                    Ok(entry) if entry.file_name() == MANIFEST_FILE_NAME => {
                        // With links followed, the type is the link target's.
                        match entry.file_type() {
                            Some(file_type) if file_type.is_file() => {
                                let found = read_manifest(entry.path(), limit);
                                lock(output).found.push(found);
                            }
                            file_type => {
                                let problem =
                                    not_a_file(entry.path(), file_type, entry.path_is_symlink());
                                lock(output).problems.push(problem);
                            }
                        }
                    }
                    Ok(_) => {}
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

/// Reads and parses one manifest file of at most `limit` bytes; any failure becomes a
/// diagnostic naming the file.
pub(crate) fn read_manifest(path: &Path, limit: u64) -> Found {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let parsed = read_text(path, limit).and_then(|text| {
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

/// The warning for something that has a manifest's name (or is named by a discovery path)
/// but is not a regular file; `file_type` is the link target's when `through_link`.
pub(crate) fn not_a_file(
    path: &Path,
    file_type: Option<FileType>,
    through_link: bool,
) -> Diagnostic {
    let what = file_type.map_or("not a regular file", kind_of);
    let link = if through_link {
        "a symbolic link to "
    } else {
        ""
    };
    Diagnostic::new(
        Some(path),
        None,
        Severity::Warning,
        format!("is {link}{what}, not a file; skipped"),
    )
}

/// What a file that is not a regular file is, for messages.
fn kind_of(file_type: FileType) -> &'static str {
    if file_type.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
    }
    "not a regular file"
}

fn read_text(path: &Path, limit: u64) -> Result<String, Diagnostic> {
    let error = |message: String| Diagnostic::new(Some(path), None, Severity::Error, message);
    let cannot_read = |e: std::io::Error| error(format!("cannot read manifest, skipped: {e}"));
    let too_large = |size: Option<u64>| {
        let size = size.map_or_else(String::new, |n| format!("{n} bytes, "));
        error(format!(
            "manifest is {size}larger than the {limit}-byte limit (McpApps.MaxManifestBytes); skipped"
        ))
    };
    let file = open_without_blocking(path).map_err(cannot_read)?;
    // The walk saw a regular file, but the path may have been replaced since: judge what was
    // actually opened.
    let metadata = file.metadata().map_err(cannot_read)?;
    if !metadata.is_file() {
        return Err(not_a_file(path, Some(metadata.file_type()), false));
    }
    if metadata.len() > limit {
        return Err(too_large(Some(metadata.len())));
    }
    // The length above may be stale or meaningless (`/proc` files say 0); the read is bounded
    // on its own.
    let bytes = match read_bounded(file, limit).map_err(cannot_read)? {
        Bounded::Read(bytes) => bytes,
        Bounded::TooLarge => return Err(too_large(None)),
    };
    String::from_utf8(bytes).map_err(|e| {
        error(format!(
            "manifest is not valid UTF-8 (at byte {}); skipped",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Opens `path` for reading without ever waiting: should it have become a named pipe since it
/// was looked at, opening it must not block until a writer appears. Regular files ignore the
/// flag.
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    }
    options.open(path)
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
            if is_dangling_link(path) {
                let target = std::fs::read_link(path)
                    .map(|target| format!(" ({} does not exist)", target.display()))
                    .unwrap_or_default();
                return Diagnostic::new(
                    Some(path),
                    None,
                    Severity::Warning,
                    format!("is a dangling symbolic link{target}; skipped"),
                );
            }
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

/// Whether `path` is a symbolic link whose target does not exist.
fn is_dangling_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
        && std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}
