//! Style rules that `cargo test` enforces on the whole workspace (see docs/architecture.md):
//! every Rust file opens with a `//!` doc saying what it is for, and no test is switched off.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "target" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    fn workspace_files() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["crates", "apps", "test-apps", "xtask"] {
            rust_files(&root.join(dir), &mut files);
        }
        assert!(files.len() > 10, "found only {} Rust files", files.len());
        files
    }

    #[test]
    fn every_rust_file_starts_with_a_module_doc() {
        let missing: Vec<String> = workspace_files()
            .into_iter()
            .filter(|path| {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                !text.trim_start().starts_with("//!")
            })
            .map(|path| path.display().to_string())
            .collect();
        assert!(
            missing.is_empty(),
            "these files need a `//!` doc saying what they are for:\n{}",
            missing.join("\n")
        );
    }

    #[test]
    fn no_test_is_ignored() {
        let marker = ["#[", "ignore"].concat();
        let offenders: Vec<String> = workspace_files()
            .into_iter()
            .filter(|path| std::fs::read_to_string(path).is_ok_and(|text| text.contains(&marker)))
            .map(|path| path.display().to_string())
            .collect();
        assert!(
            offenders.is_empty(),
            "ignored tests are not allowed (fix or delete them):\n{}",
            offenders.join("\n")
        );
    }
}
