//! Style rules that `cargo test` enforces on the whole workspace (see docs/architecture.md):
//! every Rust file opens with a `//!` doc saying what it is for, no test is switched off,
//! `unsafe` is allowed in two files only (the sandbox's confined start), no
//! library file holds over 1,000 lines of non-test code nor a function over 120 lines, and
//! the architecture document stays a map: under 30 KB, naming every crate and every
//! top-level module.

#[cfg(test)]
mod lex;
#[cfg(test)]
mod size;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::size::measure;

    /// The most lines of non-test code a library file may hold.
    const MAX_FILE_LINES: usize = 1_000;
    /// The most lines a library function may span.
    const MAX_FUNCTION_LINES: usize = 120;
    /// The most bytes `docs/architecture.md` may hold: a map, not a manual.
    const MAX_ARCHITECTURE_BYTES: usize = 30 * 1024;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

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
        let root = root();
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

    /// The files that may allow `unsafe_code` (denied workspace-wide): a confined app is
    /// started like `posix_spawn` starts a program and confines itself before `execve`
    /// (their module docs say why and how).
    const UNSAFE_FILES: [&str; 2] = [
        "crates/mcpapp-sandbox/src/confine.rs",
        "crates/mcpapp-sandbox/src/spawn.rs",
    ];

    #[test]
    fn unsafe_code_is_allowed_in_two_files_only() {
        let allow = ["allow(", "unsafe_code)"].concat();
        let expect = ["expect(", "unsafe_code)"].concat();
        let offenders: Vec<String> = workspace_files()
            .into_iter()
            .filter(|path| !UNSAFE_FILES.contains(&relative(path).as_str()))
            .filter(|path| {
                std::fs::read_to_string(path)
                    .is_ok_and(|text| text.contains(&allow) || text.contains(&expect))
            })
            .map(|path| relative(&path))
            .collect();
        assert!(
            offenders.is_empty(),
            "only {UNSAFE_FILES:?} may allow unsafe code:\n{}",
            offenders.join("\n")
        );
        for file in UNSAFE_FILES {
            let text = std::fs::read_to_string(root().join(file)).unwrap();
            assert!(
                text.contains(&allow),
                "{file} no longer needs its exception"
            );
            // Every `unsafe` block there says why it is sound.
            assert_eq!(
                text.matches("unsafe {").count(),
                text.matches("// SAFETY:").count(),
                "each unsafe block in {file} needs a `// SAFETY:` comment"
            );
        }
        // The workspace denies it, and no crate lowers that.
        let workspace = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
        assert!(workspace.contains("unsafe_code = \"deny\""));
        let mut manifests = Vec::new();
        for dir in ["crates", "apps", "test-apps", "xtask"] {
            for entry in std::fs::read_dir(root().join(dir))
                .into_iter()
                .flatten()
                .flatten()
            {
                manifests.push(entry.path().join("Cargo.toml"));
            }
        }
        manifests.push(root().join("xtask/Cargo.toml"));
        for manifest in manifests {
            let text = std::fs::read_to_string(&manifest).unwrap_or_default();
            assert!(!text.contains("unsafe_code"), "{}", manifest.display());
        }
    }

    /// The library crates' source files that are not test modules of their own
    /// (`#[cfg(test)] mod name;` puts `name.rs` or `name/` beside its parent's module out of
    /// the count), each with its measure.
    fn library_files() -> Vec<(PathBuf, super::size::Measure)> {
        let mut files = Vec::new();
        let Ok(crates) = std::fs::read_dir(root().join("crates")) else {
            return files;
        };
        for krate in crates.flatten() {
            let mut sources = Vec::new();
            rust_files(&krate.path().join("src"), &mut sources);
            sources.sort();
            let mut test_paths: BTreeSet<PathBuf> = BTreeSet::new();
            let measured: Vec<(PathBuf, super::size::Measure)> = sources
                .into_iter()
                .map(|path| {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    (path, measure(&text))
                })
                .collect();
            for (path, m) in &measured {
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default();
                let dir = path.parent().unwrap_or(Path::new("."));
                let module_dir = if matches!(stem, "lib" | "main" | "mod") {
                    dir.to_path_buf()
                } else {
                    dir.join(stem)
                };
                for name in &m.test_modules {
                    test_paths.insert(module_dir.join(format!("{name}.rs")));
                    test_paths.insert(module_dir.join(name));
                }
            }
            files.extend(
                measured
                    .into_iter()
                    .filter(|(path, _)| !test_paths.iter().any(|t| path.starts_with(t))),
            );
        }
        assert!(files.len() > 10, "found only {} library files", files.len());
        files
    }

    fn relative(path: &Path) -> String {
        let root = root();
        path.strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    #[test]
    fn library_files_hold_at_most_1000_lines_of_non_test_code() {
        let over: Vec<String> = library_files()
            .iter()
            .filter(|(_, m)| m.non_test_lines > MAX_FILE_LINES)
            .map(|(path, m)| format!("{}: {} lines", relative(path), m.non_test_lines))
            .collect();
        assert!(
            over.is_empty(),
            "split these files along their concerns (at most {MAX_FILE_LINES} lines outside tests):\n{}",
            over.join("\n")
        );
    }

    #[test]
    fn library_functions_span_at_most_120_lines() {
        let over: Vec<String> = library_files()
            .iter()
            .flat_map(|(path, m)| {
                m.functions
                    .iter()
                    .filter(|(_, _, len)| *len > MAX_FUNCTION_LINES)
                    .map(move |(name, line, len)| {
                        format!("{}:{line}: fn {name}: {len} lines", relative(path))
                    })
            })
            .collect();
        assert!(
            over.is_empty(),
            "split these functions (at most {MAX_FUNCTION_LINES} lines):\n{}",
            over.join("\n")
        );
    }

    /// The `### ` sections of `docs/architecture.md`'s code map, by heading.
    fn code_map() -> Vec<(String, String)> {
        let text = std::fs::read_to_string(root().join("docs/architecture.md"))
            .expect("docs/architecture.md is readable");
        let map = text
            .split("\n## ")
            .find(|part| part.starts_with("Code map"))
            .expect("docs/architecture.md has a `## Code map` section");
        map.split("\n### ")
            .skip(1)
            .map(|section| {
                let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
                (heading.to_owned(), body.to_owned())
            })
            .collect()
    }

    /// Whether `text` names `word` not as the tail of a longer name.
    fn names(text: &str, word: &str) -> bool {
        text.match_indices(word).any(|(at, _)| {
            let before = &text[..at];
            // `app/error.rs` names a submodule, not the crate's `error.rs`; `src/error.rs` does.
            if before.ends_with('/') {
                return before.ends_with("src/");
            }
            !before
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
        })
    }

    #[test]
    fn the_code_map_names_every_crate_and_top_level_module() {
        let map = code_map();
        let mut missing = Vec::new();
        for group in ["crates", "apps", "test-apps"] {
            let Ok(entries) = std::fs::read_dir(root().join(group)) else {
                continue;
            };
            let mut members: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            members.sort();
            for member in members.iter().filter(|m| m.join("Cargo.toml").is_file()) {
                let name = member
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                let path = format!("{group}/{name}");
                let section = map.iter().find(|(heading, _)| heading.contains(&path));
                let Some((_, body)) = section else {
                    // Test apps may share one section (`test-apps/`), named in its text.
                    let shared = map.iter().any(|(heading, body)| {
                        heading.contains(&format!("{group}/")) && names(body, name)
                    });
                    if !shared {
                        missing.push(format!("{path}: no `### ` section names it"));
                    }
                    continue;
                };
                if group == "test-apps" {
                    continue;
                }
                let Ok(sources) = std::fs::read_dir(member.join("src")) else {
                    continue;
                };
                let mut modules: Vec<String> = sources
                    .flatten()
                    .filter_map(|e| {
                        let file = e.file_name().to_str()?.to_owned();
                        if e.path().is_dir() {
                            Some(format!("{file}/"))
                        } else {
                            file.ends_with(".rs").then_some(file)
                        }
                    })
                    .filter(|file| !matches!(file.as_str(), "lib.rs" | "main.rs"))
                    .collect();
                modules.sort();
                for module in modules {
                    let bare = module.trim_end_matches('/').trim_end_matches(".rs");
                    let named = names(body, &module)
                        || names(body, &format!("{bare}.rs"))
                        || names(body, &format!("{bare}/"));
                    if !named {
                        missing.push(format!("{path}: module `{module}` is not in its section"));
                    }
                }
            }
        }
        if !map.iter().any(|(heading, _)| heading.contains("xtask")) {
            missing.push("xtask: no `### ` section names it".to_owned());
        }
        assert!(
            missing.is_empty(),
            "docs/architecture.md's code map is missing:\n{}",
            missing.join("\n")
        );
    }

    #[test]
    fn the_architecture_document_stays_a_map() {
        let bytes = std::fs::metadata(root().join("docs/architecture.md"))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(
            bytes as usize <= MAX_ARCHITECTURE_BYTES,
            "docs/architecture.md is {bytes} bytes; keep it under {MAX_ARCHITECTURE_BYTES}: \
             a bird's-eye view, a code map and the invariants (details go to their own documents)"
        );
    }
}
