//! The suite's frozen requirement sets (`requirements/<revision>.yaml` in the 0.2 package)
//! and the kit's expected failures of the reference server, read from their YAML. Both files
//! use a small, fixed shape (top-level keys, lists of plain items or of flat maps), so a
//! line reader does; anything it does not recognise is an error naming the file and line.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, bail, ensure};

/// Which side of the suite a scenario belongs to (the CLI's subcommand).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Leg {
    Server,
    Client,
}

impl Leg {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "server" => Some(Self::Server),
            "client" => Some(Self::Client),
            _ => None,
        }
    }
}

/// A scenario a set lists: scored, or run and reported with the reason it is not scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) scenario: String,
    /// `None` when scored; else `extension`, `added-after-release`, `pending`.
    pub(crate) not_scored: Option<String>,
}

/// One requirement set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequirementSet {
    pub(crate) revision: String,
    pub(crate) server: Vec<Entry>,
    pub(crate) client: Vec<Entry>,
}

impl RequirementSet {
    /// Reads `requirements/<revision>.yaml` from the installed 0.2 package.
    pub(crate) fn load(package: &Path, revision: &str) -> anyhow::Result<Self> {
        let path = package
            .join("requirements")
            .join(format!("{revision}.yaml"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Self::parse(revision, &text).with_context(|| format!("reading {}", path.display()))
    }

    fn parse(revision: &str, text: &str) -> anyhow::Result<Self> {
        let mut set = Self {
            revision: revision.to_owned(),
            server: Vec::new(),
            client: Vec::new(),
        };
        let mut section = None;
        // The not-scored entry being read: scenario, leg, reason.
        let mut pending: Option<(String, Option<Leg>, Option<String>)> = None;
        for (number, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
            let content = strip_comment(line);
            if content.trim().is_empty() {
                continue;
            }
            if !content.starts_with(' ') {
                set.finish(pending.take(), number)?;
                section = Some(
                    content
                        .trim()
                        .strip_suffix(':')
                        .with_context(|| format!("line {number}: expected `key:`, got {line:?}"))?
                        .to_owned(),
                );
                continue;
            }
            let item = content.trim();
            match section.as_deref() {
                Some(leg @ ("server" | "client")) => {
                    let name = item
                        .strip_prefix("- ")
                        .with_context(|| format!("line {number}: expected `- scenario`"))?;
                    let entry = Entry {
                        scenario: name.trim().to_owned(),
                        not_scored: None,
                    };
                    if leg == "server" {
                        set.server.push(entry);
                    } else {
                        set.client.push(entry);
                    }
                }
                Some("not_scored") => {
                    let (starts, field) = match item.strip_prefix("- ") {
                        Some(rest) => (true, rest),
                        None => (false, item),
                    };
                    if starts {
                        set.finish(pending.take(), number)?;
                        pending = Some((String::new(), None, None));
                    }
                    let Some(entry) = pending.as_mut() else {
                        bail!("line {number}: a field outside a `- scenario:` entry");
                    };
                    // Continuation lines of a folded `note: >-` have no key; skip them.
                    if let Some((key, value)) = field.split_once(':') {
                        let value = value.trim().to_owned();
                        match key.trim() {
                            "scenario" => entry.0 = value,
                            "leg" => entry.1 = Leg::parse(&value),
                            "reason" => entry.2 = Some(value),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        set.finish(pending.take(), text.lines().count())?;
        ensure!(
            !set.server.is_empty() && !set.client.is_empty(),
            "no `server:` or no `client:` list"
        );
        Ok(set)
    }

    fn finish(
        &mut self,
        entry: Option<(String, Option<Leg>, Option<String>)>,
        line: usize,
    ) -> anyhow::Result<()> {
        let Some((scenario, leg, reason)) = entry else {
            return Ok(());
        };
        let leg = leg.with_context(|| format!("near line {line}: `{scenario}` has no leg"))?;
        ensure!(
            !scenario.is_empty(),
            "near line {line}: an entry without scenario"
        );
        let entry = Entry {
            scenario,
            not_scored: Some(reason.unwrap_or_else(|| "not scored".to_owned())),
        };
        match leg {
            Leg::Server => self.server.push(entry),
            Leg::Client => self.client.push(entry),
        }
        Ok(())
    }

    /// The entries of one side.
    pub(crate) fn entries(&self, leg: Leg) -> &[Entry] {
        match leg {
            Leg::Server => &self.server,
            Leg::Client => &self.client,
        }
    }
}

/// What a server is known to fail: `scenario:check-id` (or a whole `scenario`) per line,
/// under `server:` (and `client:`), as `--expected-failures` takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ExpectedFailures {
    pub(crate) server: BTreeSet<String>,
    pub(crate) client: BTreeSet<String>,
}

impl ExpectedFailures {
    pub(crate) fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("reading {}", path.display()))
    }

    fn parse(text: &str) -> anyhow::Result<Self> {
        let mut out = Self::default();
        let mut leg = None;
        for (number, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
            let content = strip_comment(line);
            if content.trim().is_empty() {
                continue;
            }
            if !content.starts_with(' ') {
                let key = content.trim().trim_end_matches(':');
                leg = Some(
                    Leg::parse(key)
                        .with_context(|| format!("line {number}: unknown section `{key}`"))?,
                );
                continue;
            }
            let entry = content
                .trim()
                .strip_prefix("- ")
                .with_context(|| format!("line {number}: expected `- scenario:check`"))?
                .trim()
                .to_owned();
            match leg {
                Some(Leg::Server) => out.server.insert(entry),
                Some(Leg::Client) => out.client.insert(entry),
                None => bail!("line {number}: an entry before `server:` or `client:`"),
            };
        }
        Ok(out)
    }
}

/// `line` without a `#` comment (the files quote no `#`).
fn strip_comment(line: &str) -> &str {
    line.split_once('#')
        .map_or(line, |(before, _)| before)
        .trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = "\
# A comment.
server:
  - server-stateless
  - tools-list   # trailing

client:
  - tools_call
  - auth/metadata-default

not_scored:
  - scenario: auth/dpop
    leg: client
    reason: extension
  - scenario: json-schema-2020-12
    leg: server
    reason: pending
    note: >-
      the reference fixture cannot pass it yet; the implementation under test might
";

    #[test]
    fn reads_the_scored_lists_and_the_not_scored_entries() {
        let set = RequirementSet::parse("2026-07-28", SET).unwrap();
        let names = |entries: &[Entry]| -> Vec<(String, Option<String>)> {
            entries
                .iter()
                .map(|e| (e.scenario.clone(), e.not_scored.clone()))
                .collect()
        };
        assert_eq!(
            names(set.entries(Leg::Server)),
            [
                ("server-stateless".to_owned(), None),
                ("tools-list".to_owned(), None),
                ("json-schema-2020-12".to_owned(), Some("pending".to_owned())),
            ]
        );
        assert_eq!(
            names(set.entries(Leg::Client)),
            [
                ("tools_call".to_owned(), None),
                ("auth/metadata-default".to_owned(), None),
                ("auth/dpop".to_owned(), Some("extension".to_owned())),
            ]
        );
    }

    #[test]
    fn a_broken_set_is_named_by_line() {
        let err = RequirementSet::parse("x", "server:\n  server-stateless\nclient:\n  - a\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        let err = RequirementSet::parse("x", "server:\n  - a\n").unwrap_err();
        assert!(err.to_string().contains("no `client:`"), "{err}");
        let err = RequirementSet::parse(
            "x",
            "server:\n  - a\nclient:\n  - b\nnot_scored:\n  - scenario: c\n    reason: pending\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("`c` has no leg"), "{err}");
    }

    #[test]
    fn reads_expected_failures() {
        let text =
            "# why\nserver:\n  # the stream\n  - tools-call-image:wire-schema-valid\n  - caching\n";
        let expected = ExpectedFailures::parse(text).unwrap();
        assert_eq!(
            expected.server.into_iter().collect::<Vec<_>>(),
            ["caching", "tools-call-image:wire-schema-valid"]
        );
        assert!(expected.client.is_empty());
        let err = ExpectedFailures::parse("servers:\n  - a\n").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
