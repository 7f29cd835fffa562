//! The pure half of hot reload: which paths to watch, what a burst of changed paths means,
//! and how a fresh scan is reconciled with the last good one so that a broken manifest never
//! takes a running app down. No I/O except [`watch_plan`]'s existence checks, which take a
//! probe so tests decide what exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcpapp_discovery::{Diagnostic, DiscoveryReport};
use mcpapp_manifest::{RUNTIME_FOLDER_NAME, Severity, quoted};

/// What the watcher watches: the discovery roots and the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Targets {
    /// Discovery roots (folders, or manifest files named directly), absolute.
    pub(crate) roots: Vec<PathBuf>,
    /// The configuration file, absolute, when there is one.
    pub(crate) config: Option<PathBuf>,
}

/// How one path is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Depth {
    /// Only the folder's own entries (a parent watched for a file or a missing root).
    Flat,
    /// The folder and everything below it.
    Recursive,
}

/// What a path is, for [`watch_plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing there.
    Missing,
    /// A folder.
    Folder,
    /// Anything else (a file, most likely).
    Other,
}

/// The folders to watch for `targets`, each once, at the deepest depth any target needs.
///
/// - A root folder is watched recursively (files in subfolders, folders made later).
/// - A root that is a file, and the configuration file, are watched through their folder:
///   editors that save by writing a new file and renaming it over the old one would leave a
///   watch on the old file's inode deaf.
/// - A root that does not exist yet is watched through its nearest existing ancestor, so
///   its creation is seen and the watch moves down (the watcher re-plans after each burst).
pub(crate) fn watch_plan(
    targets: &Targets,
    kind: impl Fn(&Path) -> Kind,
) -> BTreeMap<PathBuf, Depth> {
    let mut plan = BTreeMap::new();
    let mut add = |path: PathBuf, depth: Depth| {
        let entry = plan.entry(path).or_insert(depth);
        *entry = (*entry).max(depth);
    };
    let through_ancestor = |path: &Path| {
        path.ancestors()
            .skip(1)
            .find(|a| kind(a) == Kind::Folder)
            .map(Path::to_path_buf)
    };
    for root in &targets.roots {
        match kind(root) {
            Kind::Folder => add(root.clone(), Depth::Recursive),
            Kind::Other | Kind::Missing => {
                if let Some(ancestor) = through_ancestor(root) {
                    add(ancestor, Depth::Flat);
                }
            }
        }
    }
    if let Some(config) = &targets.config
        && let Some(ancestor) = through_ancestor(config)
    {
        add(ancestor, Depth::Flat);
    }
    plan
}

/// What a burst of changed paths asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// The configuration file was written, replaced or removed: read it again.
    pub(crate) config: bool,
    /// Something under a root (or a root itself, or a folder on the way to one) changed:
    /// scan again.
    pub(crate) manifests: bool,
}

impl Change {
    /// Whether anything needs doing.
    pub(crate) fn any(self) -> bool {
        self.config || self.manifests
    }

    /// Both: what an overflowed or failed watch asks for, as nothing can be ruled out.
    pub(crate) fn everything() -> Self {
        Self {
            config: true,
            manifests: true,
        }
    }
}

/// Sorts the paths of a burst: the configuration file, anything at or below a root (a
/// manifest, a subfolder, a renamed folder), a folder on the way to a root (a root being
/// created or removed). Everything else (a neighbour of the configuration file, an editor's
/// swap file beside it, a file in an installed app's vendored runtime) is ignored.
pub(crate) fn classify<'a>(paths: impl IntoIterator<Item = &'a Path>, targets: &Targets) -> Change {
    let mut change = Change::default();
    for path in paths {
        if targets.config.as_deref() == Some(path) {
            change.config = true;
        }
        if targets.roots.iter().any(|root| {
            root.starts_with(path)
                || path
                    .strip_prefix(root)
                    .is_ok_and(|below| !in_vendored_runtime(below))
        }) {
            change.manifests = true;
        }
    }
    change
}

/// Whether a path below a root lies inside an installed app's vendored runtime
/// (`.mcpapp-runtime/`): an install or an update writes thousands of files there (npm's
/// `node_modules`, a virtual environment), and discovery never reads them, so they are no
/// reason to scan again.
fn in_vendored_runtime(below_root: &Path) -> bool {
    below_root
        .components()
        .any(|part| part.as_os_str() == RUNTIME_FOLDER_NAME)
}

/// An app a reload kept as it was because its manifest is now broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The app.
    pub(crate) app_id: String,
    /// Its manifest.
    pub(crate) manifest: PathBuf,
}

/// Reconciles a fresh scan with the last good report: an app that was runnable in
/// `previous` and whose manifest is still there but now unreadable, unparseable or invalid
/// keeps its previous entry, so the supervisor leaves it running as it was; the problem stays
/// a diagnostic, with a warning that says which app was kept. A manifest that is gone removes
/// its app; a manifest that is valid again replaces the kept version; an app that the
/// allow/deny rules now disable is disabled (that is configuration, not breakage).
///
/// Returns the report to give the supervisor (and to keep as the next `previous`) and the
/// apps kept.
pub(crate) fn keep_running(
    previous: &DiscoveryReport,
    mut next: DiscoveryReport,
) -> (DiscoveryReport, Vec<Kept>) {
    let mut kept = Vec::new();
    for old in previous.apps.iter().filter(|app| app.spec.is_some()) {
        let path = &old.state.manifest_path;
        let broken_app = next
            .apps
            .iter()
            .position(|app| &app.state.manifest_path == path && !app.state.is_valid);
        let unreadable = || {
            !next.apps.iter().any(|app| &app.state.manifest_path == path)
                && next
                    .diagnostics
                    .iter()
                    .any(|d| d.path.as_deref() == Some(path) && d.severity == Severity::Error)
        };
        let replaced = match broken_app {
            Some(index) => {
                next.apps[index] = old.clone();
                true
            }
            None if unreadable() => {
                next.apps.push(old.clone());
                true
            }
            None => false,
        };
        if replaced {
            // A different, valid manifest may have taken the id meanwhile: then it wins and
            // the old app is not kept twice.
            let taken = next.apps.iter().any(|app| {
                app.spec.is_some() && app.id() == old.id() && &app.state.manifest_path != path
            });
            if taken {
                next.apps
                    .retain(|app| !(&app.state.manifest_path == path && app.spec.is_some()));
                continue;
            }
            next.diagnostics.push(Diagnostic {
                path: Some(path.clone()),
                line: None,
                column: None,
                severity: Severity::Warning,
                message: format!(
                    "the manifest is broken; app {} keeps running with its last good version",
                    quoted(old.id(), '\'')
                ),
            });
            kept.push(Kept {
                app_id: old.id().to_owned(),
                manifest: path.clone(),
            });
        }
    }
    (next, kept)
}

/// The ids of the apps in a report, for comparing reports in tests and logs.
#[cfg(test)]
fn ids(report: &DiscoveryReport) -> Vec<(&str, bool)> {
    report
        .apps
        .iter()
        .map(|app| (app.id(), app.spec.is_some()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpapp_discovery::Discovery;
    use mcpapp_manifest::McpAppsConfig;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn targets() -> Targets {
        Targets {
            roots: vec![
                p("/srv/apps"),
                p("/srv/later/deep/apps"),
                p("/srv/one.json"),
            ],
            config: Some(p("/etc/gw/appsettings.json")),
        }
    }

    #[test]
    fn roots_are_watched_deeply_files_and_missing_roots_through_a_folder() {
        let kind = |path: &Path| match path.to_str() {
            Some("/srv/apps" | "/srv" | "/etc/gw" | "/etc" | "/") => Kind::Folder,
            Some("/srv/one.json" | "/etc/gw/appsettings.json") => Kind::Other,
            _ => Kind::Missing,
        };
        let plan = watch_plan(&targets(), kind);
        assert_eq!(
            plan.into_iter().collect::<Vec<_>>(),
            vec![
                (p("/etc/gw"), Depth::Flat),
                (p("/srv"), Depth::Flat),
                (p("/srv/apps"), Depth::Recursive),
            ]
        );
    }

    #[test]
    fn a_folder_both_watched_flat_and_deep_is_watched_deeply_once() {
        let targets = Targets {
            roots: vec![p("/gw")],
            config: Some(p("/gw/appsettings.json")),
        };
        let kind = |path: &Path| {
            if path == Path::new("/gw/appsettings.json") {
                Kind::Other
            } else {
                Kind::Folder
            }
        };
        let plan = watch_plan(&targets, kind);
        assert_eq!(
            plan.into_iter().collect::<Vec<_>>(),
            vec![(p("/gw"), Depth::Recursive)]
        );
    }

    #[test]
    fn a_root_appearing_moves_the_watch_down() {
        let targets = Targets {
            roots: vec![p("/srv/later/apps")],
            config: None,
        };
        let before = watch_plan(&targets, |path| {
            if path == Path::new("/srv") || path == Path::new("/") {
                Kind::Folder
            } else {
                Kind::Missing
            }
        });
        assert_eq!(before.keys().collect::<Vec<_>>(), vec![&p("/srv")]);
        let after = watch_plan(&targets, |_| Kind::Folder);
        assert_eq!(
            after.into_iter().collect::<Vec<_>>(),
            vec![(p("/srv/later/apps"), Depth::Recursive)]
        );
    }

    #[test]
    fn changes_are_sorted_into_config_and_manifests() {
        let t = targets();
        let change = |paths: &[&str]| classify(paths.iter().map(Path::new), &t);
        assert_eq!(change(&[]), Change::default());
        assert!(!change(&[]).any());
        // An editor's swap file beside the configuration is nobody's business.
        assert_eq!(
            change(&["/etc/gw/.appsettings.json.swp"]),
            Change::default()
        );
        assert_eq!(
            change(&["/etc/gw/appsettings.json"]),
            Change {
                config: true,
                manifests: false
            }
        );
        // Files in subfolders, the root itself, a folder on the way to a missing root.
        for path in [
            "/srv/apps/a/b/openclaw.mcpapp.json",
            "/srv/apps",
            "/srv/later",
            "/srv/one.json",
        ] {
            assert_eq!(
                change(&[path]),
                Change {
                    config: false,
                    manifests: true
                },
                "{path}"
            );
        }
        // An installed app's vendored runtime is written by npm or pip, never read by a scan.
        assert_eq!(
            change(&["/srv/apps/a/.mcpapp-runtime/1.0.0/node_modules/x/index.js"]),
            Change::default()
        );
        // A neighbour of a root is not under it.
        assert_eq!(
            change(&["/srv/apps2/openclaw.mcpapp.json"]),
            Change::default()
        );
        assert_eq!(
            change(&["/srv/apps/x", "/etc/gw/appsettings.json"]),
            Change::everything()
        );
    }

    /// A scan of a real folder, so the reports are what discovery makes.
    fn scan(dir: &Path) -> DiscoveryReport {
        let config = McpAppsConfig {
            enabled: true,
            ..McpAppsConfig::default()
        };
        Discovery::builder(config)
            .discovery_paths(vec![dir.display().to_string()], dir)
            .threads(1)
            .build()
            .unwrap()
            .scan()
    }

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("openclaw.mcpapp.json"), text).unwrap();
    }

    fn good(id: &str) -> String {
        format!(r#"{{"id": "{id}", "command": "server-{id}"}}"#)
    }

    #[test]
    fn a_broken_or_invalid_manifest_keeps_its_running_app() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a", &good("a"));
        write(dir.path(), "b", &good("b"));
        let first = scan(dir.path());
        assert_eq!(ids(&first), vec![("a", true), ("b", true)]);

        // `a` no longer parses, `b` parses but is invalid (no command).
        write(dir.path(), "a", r#"{"id": "a", "command": "#);
        write(dir.path(), "b", r#"{"id": "b"}"#);
        let (report, kept) = keep_running(&first, scan(dir.path()));
        assert_eq!(ids(&report), vec![("b", true), ("a", true)]);
        assert_eq!(report.app("a"), first.app("a"));
        assert_eq!(report.app("b"), first.app("b"));
        assert_eq!(
            kept.iter().map(|k| k.app_id.as_str()).collect::<Vec<_>>(),
            vec!["a", "b"]
        );
        // The problems are still reported, with a warning about each kept app.
        let messages: Vec<String> = report.diagnostics.iter().map(ToString::to_string).collect();
        assert!(
            messages
                .iter()
                .any(|m| m.contains("a/openclaw.mcpapp.json:1:")),
            "{messages:?}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m.contains("app 'a' keeps running with its last good version")),
            "{messages:?}"
        );

        // The kept report is the next `previous`: a later good version replaces it.
        write(dir.path(), "a", &good("a"));
        let (again, kept) = keep_running(&report, scan(dir.path()));
        assert_eq!(ids(&again), vec![("a", true), ("b", true)]);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].app_id, "b");
    }

    #[test]
    fn a_removed_manifest_removes_its_app_and_new_ones_pass_through() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a", &good("a"));
        let first = scan(dir.path());
        std::fs::remove_dir_all(dir.path().join("a")).unwrap();
        write(dir.path(), "c", &good("c"));
        let (report, kept) = keep_running(&first, scan(dir.path()));
        assert_eq!(ids(&report), vec![("c", true)]);
        assert!(kept.is_empty());
    }

    #[test]
    fn an_app_that_was_never_good_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a", r#"{"id": "a"}"#);
        let first = scan(dir.path());
        let (report, kept) = keep_running(&first, scan(dir.path()));
        assert_eq!(ids(&report), vec![("a", false)]);
        assert!(kept.is_empty());
    }

    #[test]
    fn a_broken_manifest_whose_id_moved_to_a_good_one_is_not_kept_twice() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a", &good("a"));
        let first = scan(dir.path());
        write(dir.path(), "a", "{");
        write(dir.path(), "z", &good("a"));
        let (report, kept) = keep_running(&first, scan(dir.path()));
        assert_eq!(ids(&report), vec![("a", true)]);
        assert!(
            report.apps[0]
                .state
                .manifest_path
                .ends_with("z/openclaw.mcpapp.json")
        );
        assert!(kept.is_empty());
    }
}
