//! One namespace for every app behind `/mcp`: how an app's tool and prompt names and its
//! resource URIs look to `/mcp`'s clients, and back.
//!
//! Names take the app's tool prefix (`grocery.` + `get_stores`), as the agent sees them. URIs
//! cannot simply be prefixed (a `ui://` resource must stay `ui://`, and clients parse URIs),
//! so an app with a prefix has its URIs moved under an authority named by its id:
//! `ui://dashboard/main.html` of app `grocery` becomes `ui://grocery/dashboard/main.html`.
//! The scheme stays, app ids are unique, and the original URI is the rest, so the mapping is
//! collision-free between prefixed apps and reversible. An app hosted without a prefix is
//! served as it is, names and URIs unchanged (the operator chose to expose it bare, as the
//! conformance suite needs); a URI of such an app that happens to look like another app's
//! namespaced URI goes to that other app. URIs without `//` (`urn:…`) are never rewritten.
//! Templates are rewritten like URIs, so their expansions route the same way.
//!
//! Everything here is pure but [`running_apps`] and [`scope_of`], which read an app's prefix
//! from the supervisor; the routing that uses it is in `route.rs`.

use mcpapp_manifest::Lifecycle;
use mcpapp_session::{RawMessage, raw_string};
use mcpapp_supervisor::{AppHandle, Supervisor};

/// How one app's names and URIs appear on `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    id: String,
    prefix: String,
}

impl Scope {
    pub(crate) fn new(id: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            prefix: prefix.into(),
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Whether the app is served as it is (no prefix): its names and URIs are unchanged.
    pub(crate) fn is_bare(&self) -> bool {
        self.prefix.is_empty()
    }

    /// A tool or prompt name as `/mcp` shows it.
    pub(crate) fn name_out(&self, remote: &str) -> String {
        format!("{}{remote}", self.prefix)
    }

    /// The app's own name for a name shown on `/mcp`, when it carries this app's prefix.
    pub(crate) fn name_in<'a>(&self, name: &'a str) -> Option<&'a str> {
        name.strip_prefix(self.prefix.as_str())
            .filter(|remote| !remote.is_empty())
    }

    /// A URI (or URI template) as `/mcp` shows it.
    pub(crate) fn uri_out(&self, uri: &str) -> String {
        if self.is_bare() {
            return uri.to_owned();
        }
        match split_hierarchical(uri) {
            Some((scheme, rest)) => format!("{scheme}://{}/{rest}", self.id),
            None => uri.to_owned(),
        }
    }

    /// The app's own URI for a URI shown on `/mcp`, when it is in this app's namespace.
    pub(crate) fn uri_in(&self, uri: &str) -> Option<String> {
        if self.is_bare() {
            return None;
        }
        let (scheme, rest) = split_hierarchical(uri)?;
        let (authority, original) = rest.split_once('/')?;
        authority
            .eq_ignore_ascii_case(&self.id)
            .then(|| format!("{scheme}://{original}"))
    }
}

/// `scheme://rest` split at `://`, when the scheme is a valid one (RFC 3986 §3.1).
fn split_hierarchical(uri: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = uri.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// Whether `uri` is an expansion of the RFC 6570 `template`, read leniently: literal text
/// must match exactly; a simple `{var}` (and `{.var}`, `{;var}`) stands for text without `/`,
/// `?` or `#`; `{+var}` and `{#var}` for any text; `{/var}` for a path starting with `/`;
/// `{?var}` and `{&var}` for a query part. Good enough to tell which app a URI belongs to,
/// which is all it is used for.
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    match parse_template(template) {
        Some(parts) => matches_from(&parts, uri),
        None => template == uri,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Part<'t> {
    Literal(&'t str),
    Expression(Option<char>),
}

fn parse_template(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let close = rest.find('}')?;
                let operator = rest[1..close]
                    .chars()
                    .next()
                    .filter(|c| matches!(c, '+' | '#' | '.' | '/' | ';' | '?' | '&'));
                parts.push(Part::Expression(operator));
                rest = &rest[close + 1..];
            }
            Some(open) => {
                parts.push(Part::Literal(&rest[..open]));
                rest = &rest[open..];
            }
            None => {
                parts.push(Part::Literal(rest));
                rest = "";
            }
        }
    }
    Some(parts)
}

fn matches_from(parts: &[Part<'_>], uri: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(literal) => uri
            .strip_prefix(literal)
            .is_some_and(|after| matches_from(rest, after)),
        Part::Expression(operator) => {
            let allowed = |c: char| match operator {
                None | Some('.' | ';') => !matches!(c, '/' | '?' | '#'),
                Some('?' | '&') => c != '#',
                _ => true,
            };
            let starts_right = match operator {
                Some(lead @ ('/' | '?' | '&' | '#' | '.' | ';')) => {
                    uri.is_empty() || uri.starts_with(*lead)
                }
                _ => true,
            };
            if !starts_right {
                return matches_from(rest, uri);
            }
            // Try every length the expression could have taken, shortest first.
            let mut end = 0;
            loop {
                if matches_from(rest, &uri[end..]) {
                    return true;
                }
                let Some(c) = uri[end..].chars().next() else {
                    return false;
                };
                // The operator's own lead character is part of the expansion.
                if !(allowed(c) || (end == 0 && Some(c) == *operator)) {
                    return false;
                }
                end += c.len_utf8();
            }
        }
    }
}

/// The apps `/mcp` serves, in the supervisor's (discovery) order, with how they are named.
pub(crate) fn running_apps(supervisor: &Supervisor) -> Vec<(AppHandle, Scope)> {
    supervisor
        .list()
        .into_iter()
        .filter(|app| app.lifecycle() == Lifecycle::Running)
        .map(|app| {
            let prefix = app.spec().map(|s| s.tool_name_prefix).unwrap_or_default();
            let scope = Scope::new(app.id(), prefix);
            (app, scope)
        })
        .collect()
}

/// The scope of one app.
pub(crate) fn scope_of(app: &AppHandle) -> Scope {
    Scope::new(
        app.id(),
        app.spec().map(|s| s.tool_name_prefix).unwrap_or_default(),
    )
}

/// Rewrites the URI string at `path` into the client's namespace.
pub(crate) fn rewrite_uri(message: &mut RawMessage, path: &[&str], scope: &Scope) {
    if scope.is_bare() {
        return;
    }
    let Some(uri) = message
        .path(path)
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
    else {
        return;
    };
    let _ = message.set_path(path, &raw_string(&scope.uri_out(&uri)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_app_is_served_as_it_is() {
        let bare = Scope::new("conformance", "");
        assert_eq!(bare.name_out("echo"), "echo");
        assert_eq!(bare.name_in("echo"), Some("echo"));
        assert_eq!(bare.uri_out("test://static-text"), "test://static-text");
        assert_eq!(bare.uri_in("test://static-text"), None);
    }

    #[test]
    fn a_prefixed_app_has_prefixed_names_and_namespaced_uris() {
        let grocery = Scope::new("grocery", "grocery.");
        assert_eq!(grocery.name_out("get_stores"), "grocery.get_stores");
        assert_eq!(grocery.name_in("grocery.get_stores"), Some("get_stores"));
        assert_eq!(grocery.name_in("get_stores"), None);
        assert_eq!(grocery.name_in("grocery."), None);
        for original in [
            "ui://dashboard/main.html",
            "ui://dashboard",
            "file:///tmp/a b.txt",
            "test://template/{id}/data",
            "https://example.com/x?y=1",
        ] {
            let out = grocery.uri_out(original);
            assert!(out.contains("://grocery/"), "{out}");
            assert_eq!(grocery.uri_in(&out).as_deref(), Some(original), "{out}");
        }
        assert_eq!(
            grocery.uri_out("ui://dashboard/main.html"),
            "ui://grocery/dashboard/main.html"
        );
        // Authorities compare without case; other apps' namespaces are not this app's.
        assert_eq!(grocery.uri_in("ui://GROCERY/x").as_deref(), Some("ui://x"));
        assert_eq!(grocery.uri_in("ui://weather/x"), None);
        assert_eq!(grocery.uri_in("ui://grocery"), None);
    }

    #[test]
    fn uris_without_an_authority_are_never_rewritten() {
        let app = Scope::new("a", "a.");
        assert_eq!(app.uri_out("urn:isbn:123"), "urn:isbn:123");
        assert_eq!(app.uri_out("1bad://x"), "1bad://x");
        assert_eq!(app.uri_in("urn:isbn:123"), None);
    }

    #[test]
    fn templates_match_their_expansions() {
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/42/data"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/4/2/data"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://other/42/data"
        ));
        assert!(template_matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(template_matches(
            "weather://{city}{?units}",
            "weather://paris?units=si"
        ));
        assert!(template_matches(
            "weather://{city}{?units}",
            "weather://paris"
        ));
        assert!(template_matches(
            "repo://{owner}{/name}",
            "repo://me/project"
        ));
        assert!(template_matches("plain://fixed", "plain://fixed"));
        assert!(!template_matches("plain://fixed", "plain://fixed2"));
        assert!(template_matches("broken://{id", "broken://{id"));
    }
}
