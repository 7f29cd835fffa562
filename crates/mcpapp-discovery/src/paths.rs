//! Resolving discovery paths as written in configuration into absolute folders.

use std::path::{Component, Path, PathBuf};

use mcpapp_manifest::quoted;

/// Makes `path` absolute against the current folder and drops `.` components, without
/// touching the file system (symbolic links are kept as written).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        // The current folder is only unavailable when it was deleted; the relative path is
        // then the best that can be said.
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    clean(&joined)
}

/// Drops `.` components and trailing separators.
pub(crate) fn clean(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A discovery path after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// An absolute folder to scan.
    Folder(PathBuf),
    /// The path cannot be used; the message says why.
    Unusable(String),
}

/// Resolves one configured discovery path.
///
/// - `env:NAME` reads the path from the environment variable `NAME`;
/// - `raw:TEXT` is the literal `TEXT` (the original module's escape, kept for compatibility);
/// - anything else is a path; relative paths resolve against `base`.
pub(crate) fn resolve(raw: &str, base: &Path, env: &dyn Fn(&str) -> Option<String>) -> Resolved {
    let text = if let Some(name) = raw.strip_prefix("env:") {
        let name = name.trim();
        match env(name).filter(|v| !v.trim().is_empty()) {
            Some(value) => value,
            None => {
                return Resolved::Unusable(format!(
                    "discovery path {}: environment variable {} is not set",
                    quoted(raw, '\''),
                    quoted(name, '\'')
                ));
            }
        }
    } else if let Some(literal) = raw.strip_prefix("raw:") {
        literal.to_owned()
    } else {
        raw.to_owned()
    };
    if text.trim().is_empty() {
        return Resolved::Unusable(format!(
            "discovery path {} is empty and is ignored",
            quoted(raw, '\'')
        ));
    }
    let path = Path::new(&text);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    Resolved::Folder(clean(&joined))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "APPS_DIR" => Some("/srv/apps".to_owned()),
            "RELATIVE" => Some("rel/apps".to_owned()),
            "BLANK" => Some("  ".to_owned()),
            _ => None,
        }
    }

    #[test]
    fn resolution_rules() {
        let base = Path::new("/etc/mcpapp");
        let cases = [
            ("./mcpapps", Resolved::Folder("/etc/mcpapp/mcpapps".into())),
            (
                "nested/./x/",
                Resolved::Folder("/etc/mcpapp/nested/x".into()),
            ),
            ("/abs/path", Resolved::Folder("/abs/path".into())),
            ("env:APPS_DIR", Resolved::Folder("/srv/apps".into())),
            (
                "env:RELATIVE",
                Resolved::Folder("/etc/mcpapp/rel/apps".into()),
            ),
            (
                "raw:env:literal",
                Resolved::Folder("/etc/mcpapp/env:literal".into()),
            ),
        ];
        for (raw, expected) in cases {
            assert_eq!(resolve(raw, base, &env), expected, "{raw}");
        }
        for raw in ["env:MISSING", "env:BLANK", "", "   "] {
            assert!(
                matches!(resolve(raw, base, &env), Resolved::Unusable(_)),
                "{raw}"
            );
        }
        // A bare name is a path, never an environment variable name (unlike the original).
        assert_eq!(
            resolve("APPS_DIR", base, &env),
            Resolved::Folder("/etc/mcpapp/APPS_DIR".into())
        );
    }
}
