//! The file watcher: the thin I/O around `plan.rs`. `notify` reports changed paths from its
//! own thread into a channel; one task gathers them into bursts (a burst ends after
//! [`QUIET`] without a relevant change, or at [`LONGEST_BURST`]), asks `plan::classify` what
//! the burst means, runs one reload for it, and then re-arms the watches from
//! `plan::watch_plan`, since a reload may have added discovery paths and a burst may have
//! created or removed a root.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, MetadataKind, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use super::plan::{Change, Depth, Kind, Targets, classify, watch_plan};
use super::{Reloader, Trigger};

/// A burst ends after this long without a relevant change: long enough for an editor's
/// write-and-rename or a `cp -r` of an app folder, short enough to feel immediate.
const QUIET: Duration = Duration::from_millis(150);
/// A burst that never goes quiet (a tool rewriting files in a loop) is applied this often.
const LONGEST_BURST: Duration = Duration::from_secs(1);

/// Why the watcher could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the discovery paths and configuration file: {0}")]
pub(crate) struct WatchError(#[from] notify::Error);

/// A running watcher; dropping it stops watching.
#[derive(Debug)]
pub(crate) struct FileWatcher {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What notify reports: changed paths, or that changes were lost (so anything may have
/// changed).
enum Report {
    Paths(Vec<PathBuf>),
    Lost,
}

/// Starts watching what `reloader` scans and reads.
pub(crate) async fn start(reloader: Reloader) -> Result<FileWatcher, WatchError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let watcher = notify::recommended_watcher(move |result: notify::Result<notify::Event>| {
        let report = match result {
            Ok(event) if event.need_rescan() => Report::Lost,
            Ok(event) if relevant(event.kind) => Report::Paths(event.paths),
            Ok(_) => return,
            Err(err) => {
                warn!("file watch error: {err}");
                Report::Lost
            }
        };
        let _ = tx.send(report);
    })?;
    let mut armed = Armed {
        watcher,
        watches: BTreeMap::new(),
    };
    let targets = reloader.targets().await;
    armed.arm(&targets, &HashSet::new());
    info!(
        watched = armed.watches.len(),
        "watching the discovery paths and the configuration file"
    );
    let task = tokio::spawn(run(reloader, armed, targets, rx).instrument(info_span!("watch")));
    Ok(FileWatcher { task })
}

/// Whether a change can matter: reads (including the scans' own) and access-time updates
/// cannot, and counting them would make every scan trigger the next.
fn relevant(kind: EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => false,
        _ => true,
    }
}

/// The watcher and what it watches.
struct Armed {
    watcher: notify::RecommendedWatcher,
    watches: BTreeMap<PathBuf, Depth>,
}

impl Armed {
    /// Watches what `targets` need; `touched` paths (changed in the last burst) that are
    /// watched are watched afresh, as a folder removed and made again has lost its watch.
    /// Returns whether a root's watch moved (a root appeared or went away).
    fn arm(&mut self, targets: &Targets, touched: &HashSet<PathBuf>) -> bool {
        let plan = watch_plan(targets, kind_of);
        let mut moved = false;
        let stale: Vec<PathBuf> = self
            .watches
            .iter()
            .filter(|(path, depth)| plan.get(*path) != Some(depth) || touched.contains(*path))
            .map(|(path, _)| path.clone())
            .collect();
        for path in stale {
            // A folder that is gone has lost its watch already; there is nothing to undo.
            let _ = self.watcher.unwatch(&path);
            self.watches.remove(&path);
            moved = true;
        }
        for (path, depth) in plan {
            if self.watches.contains_key(&path) {
                continue;
            }
            let mode = match depth {
                Depth::Flat => RecursiveMode::NonRecursive,
                Depth::Recursive => RecursiveMode::Recursive,
            };
            match self.watcher.watch(&path, mode) {
                Ok(()) => {
                    debug!(path = %path.display(), ?depth, "watching");
                    self.watches.insert(path, depth);
                    moved = true;
                }
                // It may have gone since it was planned; the next burst plans again.
                Err(err) => warn!(path = %path.display(), "cannot watch: {err}"),
            }
        }
        moved
    }
}

fn kind_of(path: &Path) -> Kind {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Kind::Folder,
        Ok(_) => Kind::Other,
        Err(_) => Kind::Missing,
    }
}

async fn run(
    reloader: Reloader,
    mut armed: Armed,
    mut targets: Targets,
    mut rx: mpsc::UnboundedReceiver<Report>,
) {
    loop {
        let Some(first) = rx.recv().await else { return };
        let mut lost = false;
        let mut paths: HashSet<PathBuf> = HashSet::new();
        let mut take = |report: Report| match report {
            Report::Paths(changed) => paths.extend(changed),
            Report::Lost => lost = true,
        };
        take(first);
        let longest = Instant::now() + LONGEST_BURST;
        loop {
            let quiet = (Instant::now() + QUIET).min(longest);
            match tokio::time::timeout_at(quiet, rx.recv()).await {
                Ok(Some(report)) => take(report),
                Ok(None) => return,
                Err(_) => break,
            }
        }
        let mut change = if lost {
            Change::everything()
        } else {
            classify(paths.iter().map(PathBuf::as_path), &targets)
        };
        // A root that appeared is watched only now; what was written into it before its
        // watch existed is found by scanning once more.
        while change.any() {
            debug!(
                config = change.config,
                manifests = change.manifests,
                "applying a burst of changes"
            );
            reloader.reload(Trigger::Watch, change.config).await;
            targets = reloader.targets().await;
            let moved = armed.arm(&targets, &paths);
            paths.clear();
            change = if moved {
                Change {
                    config: false,
                    manifests: true,
                }
            } else {
                Change::default()
            };
            if moved {
                debug!(
                    watched = armed.watches.len(),
                    "watches moved; scanning again"
                );
            }
        }
    }
}
