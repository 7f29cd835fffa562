//! The host's modules import one way (docs/architecture.md, `crates/mcpapp-host`): no file of
//! `crates/mcpapp-host/src` reaches itself again through the `crate::`, `super::` and `self::`
//! paths of the others, so features never import back from the module that composes them.
//! A test that `cargo test` runs, like `tidy.rs`.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Every `.rs` file under `dir` by module path (`aggregate::names`; `lib.rs` is ``).
    fn modules(src: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                modules(src, &path, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut segments: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(segments.last().map(String::as_str), Some("mod" | "lib")) {
                segments.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(segments.join("::"), code(&text));
        }
    }

    /// The code of a file without its unit tests and comments.
    fn code(text: &str) -> String {
        let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
        text[..end]
            .lines()
            .map(|line| line.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `a::{b as e, c::{d}}` as `a::b` and `a::c::d`.
    fn expand(tree: &str) -> Vec<String> {
        // Without aliases and whitespace: `as` and the name after it go.
        let mut cleaned = String::new();
        let mut alias = false;
        for token in tree.split_whitespace() {
            if alias {
                cleaned
                    .push_str(token.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_'));
                alias = false;
            } else if token == "as" {
                alias = true;
            } else {
                cleaned.push_str(token);
            }
        }
        let tree = cleaned;
        let Some(open) = tree.find('{') else {
            return vec![tree];
        };
        let (head, body) = (&tree[..open], &tree[open + 1..tree.len() - 1]);
        let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
        for c in body.chars() {
            match c {
                ',' if depth == 0 => parts.push(std::mem::take(&mut current)),
                '{' | '}' => {
                    depth += if c == '{' { 1 } else { -1 };
                    current.push(c);
                }
                _ => current.push(c),
            }
        }
        parts.push(current);
        parts
            .iter()
            .filter(|p| !p.is_empty())
            .flat_map(|p| expand(&format!("{head}{p}")))
            .collect()
    }

    /// The paths a module's code names that start at a module (`crate`, `super`, `self` or
    /// one of its children), as absolute segment lists.
    fn named_paths(module: &str, code: &str, children: &BTreeSet<String>) -> Vec<Vec<String>> {
        let own: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let mut raw = Vec::new();
        let mut rest = code;
        while let Some(at) = rest.find("use ") {
            let statement = &rest[at + 4..];
            let end = statement.find(';').unwrap_or(statement.len());
            let boundary = at == 0 || !rest[..at].ends_with(|c: char| c.is_alphanumeric());
            if boundary {
                raw.extend(expand(&statement[..end]));
            }
            rest = &statement[end..];
        }
        // Paths in expressions and types: `crate::a::b`, `super::x`, `child::f`.
        let bytes = code.as_bytes();
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let mut i = 0;
        while i < bytes.len() {
            if word(bytes[i]) && (i == 0 || (!word(bytes[i - 1]) && bytes[i - 1] != b':')) {
                let mut j = i;
                while j < bytes.len() && (word(bytes[j]) || bytes[j] == b':') {
                    j += 1;
                }
                // `crate::{a, b}` is read with the `use` statements.
                let path = code[i..j].trim_end_matches(':');
                if path.contains("::") {
                    raw.push(path.to_owned());
                }
                i = j;
            } else {
                i += 1;
            }
        }
        raw.iter()
            .filter_map(|path| {
                let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
                let (mut base, tail) = match segments.first().copied() {
                    Some("crate") => (Vec::new(), &segments[1..]),
                    Some("self") => (own.clone(), &segments[1..]),
                    Some("super") => {
                        let ups = segments.iter().take_while(|s| **s == "super").count();
                        (
                            own[..own.len().saturating_sub(ups)].to_vec(),
                            &segments[ups..],
                        )
                    }
                    Some(first) if children.contains(first) => (own.clone(), &segments[..]),
                    _ => return None,
                };
                base.extend(tail.iter().map(|s| (*s).to_owned()));
                Some(base)
            })
            .collect()
    }

    /// The module a path ends in: its longest prefix that is a file.
    fn resolve(segments: &[String], modules: &BTreeMap<String, String>) -> Option<String> {
        (0..=segments.len())
            .rev()
            .map(|n| segments[..n].join("::"))
            .find(|m| modules.contains_key(m))
    }

    /// A cycle through `node`, if the graph has one reachable from it.
    fn cycle(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = cycle(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }

    #[test]
    fn the_host_modules_import_one_way() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/mcpapp-host/src");
        let mut files = BTreeMap::new();
        modules(&src, &src, &mut files);
        assert!(files.len() > 20, "found only {} modules", files.len());
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, code) in &files {
            let depth = module.split("::").filter(|s| !s.is_empty()).count();
            let children: BTreeSet<String> = files
                .keys()
                .filter(|m| m.starts_with(&format!("{module}::")) || module.is_empty())
                .filter_map(|m| m.split("::").nth(depth).map(str::to_owned))
                .collect();
            for path in named_paths(module, code, &children) {
                if let Some(target) = resolve(&path, &files).filter(|t| t != module) {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
        assert!(
            edges.get("host").is_some_and(|e| e.contains("aggregate")),
            "the parser no longer sees host.rs's imports: {edges:?}"
        );
        let mut done = BTreeSet::new();
        for module in files.keys() {
            let found = cycle(module, &edges, &mut Vec::new(), &mut done);
            let shown = |c: Vec<String>| {
                c.iter()
                    .map(|m| if m.is_empty() { "lib" } else { m.as_str() })
                    .collect::<Vec<_>>()
                    .join(" -> ")
            };
            assert!(
                found.is_none(),
                "crates/mcpapp-host/src imports in a circle: {}",
                found.map(shown).unwrap_or_default()
            );
        }
    }
}
