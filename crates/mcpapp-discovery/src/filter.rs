//! Allow and deny rules: which discovered apps may run.
//!
//! The checks run in the original module's order, and the first that fails decides:
//! 1. the app's entry has `Enabled: false`;
//! 2. a `Deny` pattern matches the id;
//! 3. `AllowlistSemantics` is neither `legacy` nor `strict` (fail closed: every app is denied);
//! 4. an allowlist match is required (`Allow` is non-empty, or the semantics is strict) and no
//!    `Allow` pattern matches.
//!
//! Patterns match ids case-insensitively as globs. The shapes the original supports (`*`,
//! `prefix-*`, `*-suffix`, `*middle*`, exact ids) mean the same here; full glob syntax
//! (`?`, `[a-z]`, `*` in the middle) is accepted too.

use globset::{GlobBuilder, GlobMatcher};
use mcpapp_manifest::{MAX_ID_LEN, McpAppsConfig, quoted};

use crate::error::ConfigError;

/// Whether an empty `Allow` list allows every app or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Semantics {
    Legacy,
    Strict,
}

/// One compiled pattern with its text, for messages.
#[derive(Debug, Clone)]
struct Pattern {
    text: String,
    matcher: GlobMatcher,
}

/// The compiled allow/deny rules of a configuration.
#[derive(Debug, Clone)]
pub(crate) struct AppFilter {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    semantics: Result<Semantics, String>,
}

/// Why an app may not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Denial {
    pub(crate) message: String,
    /// Whether the denial comes from a broken setting (logged as a warning) rather than a
    /// deliberate choice (logged as information).
    pub(crate) misconfigured: bool,
}

/// Longest accepted pattern, in characters. Ids have at most 64, so a longer pattern is a
/// mistake; and globset panics on patterns whose regex outgrows its size limit, which a
/// pattern of a few hundred kilobytes does.
pub(crate) const MAX_PATTERN_CHARS: usize = 1024;

fn compile(list: &'static str, patterns: &[String]) -> Result<Vec<Pattern>, ConfigError> {
    patterns
        .iter()
        .map(|text| {
            if text.chars().count() > MAX_PATTERN_CHARS {
                return Err(ConfigError::InvalidPattern {
                    list: list.to_owned(),
                    pattern: text.clone(),
                    reason: format!(
                        "it is longer than {MAX_PATTERN_CHARS} characters (app ids have at most {MAX_ID_LEN})"
                    ),
                });
            }
            GlobBuilder::new(text)
                .case_insensitive(true)
                .literal_separator(false)
                .backslash_escape(true)
                .build()
                .map(|glob| Pattern {
                    text: text.clone(),
                    matcher: glob.compile_matcher(),
                })
                .map_err(|err| ConfigError::InvalidPattern {
                    list: list.to_owned(),
                    pattern: text.clone(),
                    reason: err.kind().to_string(),
                })
        })
        .collect()
}

impl AppFilter {
    pub(crate) fn new(config: &McpAppsConfig) -> Result<Self, ConfigError> {
        let raw = config.allowlist_semantics.trim();
        let semantics = if raw.eq_ignore_ascii_case("legacy") {
            Ok(Semantics::Legacy)
        } else if raw.eq_ignore_ascii_case("strict") {
            Ok(Semantics::Strict)
        } else {
            Err(config.allowlist_semantics.clone())
        };
        Ok(Self {
            allow: compile("Allow", &config.allow)?,
            deny: compile("Deny", &config.deny)?,
            semantics,
        })
    }

    /// The warning to show once when the semantics setting is invalid.
    pub(crate) fn semantics_problem(&self) -> Option<String> {
        self.semantics.as_ref().err().map(|value| {
            format!(
                "unsupported allowlist semantics {} in McpApps.AllowlistSemantics: use 'legacy' or 'strict'; every app is denied until it is fixed",
                quoted(value, '\'')
            )
        })
    }

    /// Decides whether the app `id` may run; `entry_enabled` is its entry's `Enabled`.
    pub(crate) fn check(&self, id: &str, entry_enabled: bool) -> Result<(), Denial> {
        // Invalid apps are filtered too, so the id may be of any length.
        let app = quoted(id, '\'');
        if !entry_enabled {
            return Err(Denial {
                message: format!("app {app} is disabled in McpApps.Entries"),
                misconfigured: false,
            });
        }
        if let Some(pattern) = self.deny.iter().find(|p| p.matcher.is_match(id)) {
            return Err(Denial {
                message: format!(
                    "app {app} is denied by pattern {}",
                    quoted(&pattern.text, '\'')
                ),
                misconfigured: false,
            });
        }
        let semantics = match &self.semantics {
            Ok(semantics) => *semantics,
            Err(value) => {
                return Err(Denial {
                    message: format!(
                        "app {app} is denied because the allowlist semantics {} is not supported (use 'legacy' or 'strict')",
                        quoted(value, '\'')
                    ),
                    misconfigured: true,
                });
            }
        };
        let needs_match = !self.allow.is_empty() || semantics == Semantics::Strict;
        if needs_match && !self.allow.iter().any(|p| p.matcher.is_match(id)) {
            let message = if self.allow.is_empty() {
                format!(
                    "app {app} is not in the allowlist (strict allowlist semantics with an empty Allow list allows no app)"
                )
            } else {
                format!("app {app} is not in the allowlist")
            };
            return Err(Denial {
                message,
                misconfigured: false,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], deny: &[&str], semantics: &str) -> AppFilter {
        let config = McpAppsConfig {
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny: deny.iter().map(|s| (*s).to_owned()).collect(),
            allowlist_semantics: semantics.to_owned(),
            ..McpAppsConfig::default()
        };
        AppFilter::new(&config).expect("patterns compile")
    }

    fn allowed(f: &AppFilter, id: &str) -> bool {
        f.check(id, true).is_ok()
    }

    /// Every pattern shape of the original module, with the same answers.
    #[test]
    fn original_pattern_shapes() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "anything", true),
            ("*", "", true),
            ("test-*", "test-anything", true),
            ("test-*", "TEST-X", true),
            ("test-*", "my-test-x", false),
            ("*-beta", "app-beta", true),
            ("*-beta", "app-beta-2", false),
            ("*danger*", "containing-danger-middle", true),
            ("*danger*", "DANGER", true),
            ("*danger*", "safe", false),
            ("**", "x", true),
            ("***", "x", true),
            ("Grocery-Inventory", "grocery-inventory", true),
            ("grocery-inventory", "grocery-inventory-2", false),
            ("", "", true),
            ("", "a", false),
        ];
        for (pattern, id, expected) in cases {
            let f = filter(&[pattern], &[], "legacy");
            assert_eq!(allowed(&f, id), *expected, "allow {pattern:?} vs {id:?}");
            let f = filter(&["*"], &[pattern], "legacy");
            assert_eq!(!allowed(&f, id), *expected, "deny {pattern:?} vs {id:?}");
        }
    }

    #[test]
    fn full_globs_are_a_bonus() {
        let f = filter(&["app-?", "tool-[ab]"], &[], "legacy");
        assert!(allowed(&f, "app-1"));
        assert!(allowed(&f, "tool-b"));
        assert!(!allowed(&f, "tool-c"));
    }

    #[test]
    fn precedence_entry_then_deny_then_semantics_then_allow() {
        let f = filter(&["*"], &["blocked"], "nonsense");
        assert!(
            f.check("blocked", false)
                .unwrap_err()
                .message
                .contains("disabled in McpApps.Entries")
        );
        assert!(
            f.check("blocked", true)
                .unwrap_err()
                .message
                .contains("denied by pattern 'blocked'")
        );
        let denial = f.check("other", true).unwrap_err();
        assert!(denial.message.contains("allowlist semantics 'nonsense'"));
        assert!(denial.misconfigured);
    }

    #[test]
    fn legacy_and_strict_with_an_empty_allow_list() {
        assert!(allowed(&filter(&[], &[], "legacy"), "x"));
        assert!(allowed(&filter(&[], &[], " LEGACY "), "x"));
        assert!(!allowed(&filter(&[], &[], "strict"), "x"));
        assert!(allowed(&filter(&["*"], &[], "Strict"), "x"));
        assert!(!allowed(&filter(&[], &[], ""), "x"));
        assert!(!allowed(&filter(&[], &[], "stict"), "x"));
    }

    #[test]
    fn patterns_longer_than_the_limit_are_refused_not_compiled() {
        let longest = "a".repeat(MAX_PATTERN_CHARS);
        assert!(allowed(&filter(&[&longest], &[], "legacy"), &longest));
        let config = McpAppsConfig {
            allow: vec![format!("{longest}*")],
            ..McpAppsConfig::default()
        };
        let err = AppFilter::new(&config).unwrap_err().to_string();
        assert!(err.contains("longer than 1024 characters"), "{err}");
    }

    #[test]
    fn bad_patterns_are_configuration_errors_naming_them() {
        let config = McpAppsConfig {
            deny: vec!["ok".into(), "[unclosed".into()],
            ..McpAppsConfig::default()
        };
        let err = AppFilter::new(&config).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("McpApps.Deny pattern '[unclosed'"), "{text}");
    }
}
