//! Which environment variables an app may see: the names a manifest's `env:NAME` references
//! may read (checked here, so a manifest that reaches too far is invalid before it runs), and
//! the patterns the supervisor uses to pick what a child inherits.
//!
//! Manifests come from third parties; the configuration comes from the operator. So a
//! reference written in a manifest resolves only names the operator allowed
//! (`McpApps.AllowManifestEnv`, plus the app entry's own list), while a reference written in
//! `McpApps.Entries` resolves freely. The gateway's own credentials are never readable from a
//! manifest, whatever the patterns say.

use std::collections::HashMap;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use mcpapp_manifest::{
    GATEWAY_CREDENTIAL_ENV, McpAppEntryConfig, McpAppManifest, McpAppsConfig, ParsedManifest,
    Position, quoted,
};

use crate::error::ConfigError;
use crate::filter::MAX_PATTERN_CHARS;

/// A compiled list of environment variable names or globs (`LC_*`), matched
/// case-sensitively, as environment names are on Unix.
#[derive(Debug, Clone)]
pub struct EnvNamePatterns {
    set: GlobSet,
    empty: bool,
}

impl EnvNamePatterns {
    /// Compiles `patterns`; `setting` names where they come from, for the error.
    ///
    /// # Errors
    /// [`ConfigError::InvalidPattern`] when a pattern is not a valid glob.
    pub fn new<S: AsRef<str>>(
        setting: &str,
        patterns: impl IntoIterator<Item = S>,
    ) -> Result<Self, ConfigError> {
        let mut builder = GlobSetBuilder::new();
        let mut empty = true;
        for pattern in patterns {
            let pattern = pattern.as_ref();
            // Environment names are short; a huge pattern is a mistake, and globset panics on
            // patterns whose regex outgrows its size limit.
            if pattern.chars().count() > MAX_PATTERN_CHARS {
                return Err(ConfigError::InvalidPattern {
                    list: setting.to_owned(),
                    pattern: pattern.to_owned(),
                    reason: format!("it is longer than {MAX_PATTERN_CHARS} characters"),
                });
            }
            let glob = GlobBuilder::new(pattern.trim())
                .literal_separator(false)
                .backslash_escape(true)
                .build()
                .map_err(|err| ConfigError::InvalidPattern {
                    list: setting.to_owned(),
                    pattern: pattern.to_owned(),
                    reason: err.kind().to_string(),
                })?;
            builder.add(glob);
            empty = false;
        }
        let set = builder.build().map_err(|err| ConfigError::InvalidPattern {
            list: setting.to_owned(),
            pattern: String::new(),
            reason: err.to_string(),
        })?;
        Ok(Self { set, empty })
    }

    /// Whether `name` matches one of the patterns.
    pub fn matches(&self, name: &str) -> bool {
        !self.empty && self.set.is_match(name)
    }
}

/// Whether `name` is one of the gateway's own credentials.
pub fn is_gateway_credential(name: &str) -> bool {
    GATEWAY_CREDENTIAL_ENV.contains(&name)
}

/// What manifests may read, compiled once per discovery.
#[derive(Debug, Clone)]
pub(crate) struct ManifestEnvPolicy {
    global: EnvNamePatterns,
    entries: HashMap<String, EnvNamePatterns>,
}

/// One `env:` reference in a manifest that may not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefusedReference {
    /// `environment.KEY` or `headers.NAME`, for the position lookup.
    pub(crate) field: String,
    pub(crate) message: String,
}

impl ManifestEnvPolicy {
    /// Compiles what manifests may read, and checks the inheritance lists the supervisor will
    /// use, so that a bad pattern in either is a configuration error up front.
    pub(crate) fn new(config: &McpAppsConfig) -> Result<Self, ConfigError> {
        EnvNamePatterns::new("InheritEnvironment", &config.inherit_environment)?;
        for (id, entry) in &config.entries {
            EnvNamePatterns::new(
                &format!("Entries.{id}.InheritEnvironment"),
                &entry.inherit_environment,
            )?;
        }
        let global = EnvNamePatterns::new("AllowManifestEnv", &config.allow_manifest_env)?;
        let entries = config
            .entries
            .iter()
            .filter(|(_, entry)| !entry.allow_manifest_env.is_empty())
            .map(|(id, entry)| {
                EnvNamePatterns::new(
                    &format!("Entries.{id}.AllowManifestEnv"),
                    &entry.allow_manifest_env,
                )
                .map(|patterns| (id.clone(), patterns))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { global, entries })
    }

    fn allows(&self, id: &str, name: &str) -> bool {
        self.global.matches(name) || self.entries.get(id).is_some_and(|p| p.matches(name))
    }

    /// The references in `manifest` (the file as written, before overrides) that it may not
    /// make. A value the app's entry replaces is the operator's, not the manifest's, and is
    /// not checked.
    pub(crate) fn refused(
        &self,
        id: &str,
        manifest: &McpAppManifest,
        entry: Option<&McpAppEntryConfig>,
    ) -> Vec<RefusedReference> {
        let mut refused = Vec::new();
        let mut check = |kind: &str, key: &str, value: &str| {
            let Some(name) = value.strip_prefix("env:").map(str::trim) else {
                return;
            };
            let setting = format!("{kind} {}", quoted(key, '\''));
            // A name is shown whole when short; a huge one is cut (the key says which).
            let name_shown = quoted(name, '`').to_string();
            let name_shown = name_shown.trim_matches('`');
            let message = if is_gateway_credential(name) {
                format!(
                    "{setting} refers to env:{name_shown}, one of the gateway's own credentials, which a manifest can never read; if this app really needs it, set the value in McpApps.Entries.{id}.{}",
                    entry_field(kind)
                )
            } else if !self.allows(id, name) {
                format!(
                    "{setting} refers to env:{name_shown}, which manifests may not read: allow it in McpApps.AllowManifestEnv (or McpApps.Entries.{id}.AllowManifestEnv), or set the value in McpApps.Entries.{id}.{}",
                    entry_field(kind)
                )
            } else {
                return;
            };
            refused.push(RefusedReference {
                field: format!("{kind}.{key}"),
                message,
            });
        };
        for (key, value) in &manifest.environment {
            let replaced = entry.is_some_and(|e| e.environment.contains_key(key));
            if !replaced {
                check("environment", key, value);
            }
        }
        for (name, value) in &manifest.headers {
            let replaced =
                entry.is_some_and(|e| e.headers.keys().any(|n| n.eq_ignore_ascii_case(name)));
            if !replaced {
                check("headers", name, value);
            }
        }
        refused
    }
}

fn entry_field(kind: &str) -> &'static str {
    if kind == "headers" {
        "Headers"
    } else {
        "Environment"
    }
}

/// Where a refused reference is written: the value itself when the document knows it, else
/// its map, else the manifest.
pub(crate) fn reference_position(parsed: &ParsedManifest, field: &str) -> Position {
    let map = field.split('.').next().unwrap_or(field);
    parsed
        .field_position(field)
        .or_else(|| parsed.field_position(map))
        .unwrap_or_else(|| parsed.root_position())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_globs_and_case_sensitive() {
        let p = EnvNamePatterns::new("X", ["LC_*", "PATH"]).unwrap();
        assert!(p.matches("LC_ALL"));
        assert!(p.matches("PATH"));
        assert!(!p.matches("path"));
        assert!(!p.matches("LANG"));
        let none = EnvNamePatterns::new("X", Vec::<String>::new()).unwrap();
        assert!(!none.matches("PATH"));
        let long = "A".repeat(900_000);
        assert!(EnvNamePatterns::new("X", [long]).is_err());
        let err = EnvNamePatterns::new("Entries.a.AllowManifestEnv", ["[oops"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("McpApps.Entries.a.AllowManifestEnv pattern '[oops'"),
            "{err}"
        );
    }
}
