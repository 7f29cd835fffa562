//! Content Security Policy for app views, built on the server from the UI resource's
//! `_meta.ui.csp` (MCP Apps spec, "Sandbox proxy").
//!
//! - The resource content item's `_meta.ui` wins over the listing entry's; `csp` or
//!   `permissions` found on a tool are ignored (the spec says they are invalid there).
//! - Without declared domains the policy is restrictive: no connections (`connect-src
//!   'none'`), no frames, no plugins, scripts and styles only inline or from the sandbox.
//! - Declared domains are added only to the directives they are declared for, never
//!   loosening anything else; entries that could inject a directive or keyword (`;`, quotes,
//!   whitespace, commas) or that are not origins are dropped, and logged.

use serde::Serialize;
use serde_json::{Map, Value};
use tracing::warn;

/// The parts of `_meta.ui` that decide how a view is sandboxed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ViewPolicy {
    /// Origins the view may connect to (fetch, XHR, WebSocket).
    pub(crate) connect_domains: Vec<String>,
    /// Origins the view may load scripts, styles, images, fonts and media from.
    pub(crate) resource_domains: Vec<String>,
    /// Origins the view may frame.
    pub(crate) frame_domains: Vec<String>,
    /// Origins allowed as the document's base URI.
    pub(crate) base_uri_domains: Vec<String>,
    /// Permissions requested: any of `camera`, `microphone`, `geolocation`, `clipboardWrite`.
    pub(crate) permissions: Vec<String>,
    /// Whether the view wants the host to draw a border.
    pub(crate) prefers_border: Option<bool>,
}

/// Reads a view policy from `_meta.ui` of the resource content item, falling back to the
/// listing entry's when the item has no `_meta.ui`.
pub(crate) fn view_policy(
    content_meta: Option<&Map<String, Value>>,
    listing_meta: Option<&Map<String, Value>>,
) -> ViewPolicy {
    let ui = |meta: Option<&Map<String, Value>>| {
        meta.and_then(|m| m.get("ui"))
            .and_then(Value::as_object)
            .cloned()
    };
    let Some(ui) = ui(content_meta).or_else(|| ui(listing_meta)) else {
        return ViewPolicy::default();
    };
    let list = |csp: Option<&Map<String, Value>>, key: &str| -> Vec<String> {
        csp.and_then(|c| c.get(key))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .filter_map(sanitize_origin)
                    .collect()
            })
            .unwrap_or_default()
    };
    let csp = ui.get("csp").and_then(Value::as_object);
    const PERMISSIONS: [&str; 4] = ["camera", "microphone", "geolocation", "clipboardWrite"];
    let permissions = ui
        .get("permissions")
        .and_then(Value::as_object)
        .map(|p| {
            PERMISSIONS
                .iter()
                .filter(|name| p.contains_key(**name))
                .map(|name| (*name).to_owned())
                .collect()
        })
        .unwrap_or_default();
    ViewPolicy {
        connect_domains: list(csp, "connectDomains"),
        resource_domains: list(csp, "resourceDomains"),
        frame_domains: list(csp, "frameDomains"),
        base_uri_domains: list(csp, "baseUriDomains"),
        permissions,
        prefers_border: ui.get("prefersBorder").and_then(Value::as_bool),
    }
}

/// Keeps an origin-like entry (`https://api.example.com`, `https://*.example.com`,
/// `http://127.0.0.1:8080`) and drops anything that could change the policy's meaning.
fn sanitize_origin(entry: &str) -> Option<String> {
    let entry = entry.trim();
    let forbidden = |c: char| c.is_whitespace() || matches!(c, ';' | ',' | '\'' | '"' | '\\');
    let valid = !entry.is_empty()
        && !entry.contains(forbidden)
        && (entry.starts_with("https://")
            || entry.starts_with("http://")
            || entry.starts_with("wss://")
            || entry.starts_with("ws://"))
        && entry.split_once("://").is_some_and(|(_, rest)| {
            !rest.is_empty()
                && rest.chars().all(|c| {
                    c.is_ascii_alphanumeric()
                        || matches!(c, '.' | '-' | '*' | ':' | '[' | ']' | '/')
                })
        });
    if valid {
        Some(entry.trim_end_matches('/').to_owned())
    } else {
        warn!("ignored the CSP domain {entry:?}: not a plain origin");
        None
    }
}

impl ViewPolicy {
    /// The `Content-Security-Policy` header value for the sandbox document.
    pub(crate) fn header(&self) -> String {
        let with = |base: &str, extra: &[String]| {
            let mut value = base.to_owned();
            for domain in extra {
                value.push(' ');
                value.push_str(domain);
            }
            value
        };
        let connect = if self.connect_domains.is_empty() {
            "'none'".to_owned()
        } else {
            with("'self'", &self.connect_domains)
        };
        let frame = if self.frame_domains.is_empty() {
            "'none'".to_owned()
        } else {
            self.frame_domains.join(" ")
        };
        let base_uri = if self.base_uri_domains.is_empty() {
            "'self'".to_owned()
        } else {
            self.base_uri_domains.join(" ")
        };
        [
            "default-src 'none'".to_owned(),
            format!(
                "script-src {}",
                with("'self' 'unsafe-inline'", &self.resource_domains)
            ),
            format!(
                "style-src {}",
                with("'self' 'unsafe-inline'", &self.resource_domains)
            ),
            format!(
                "img-src {}",
                with("'self' data: blob:", &self.resource_domains)
            ),
            format!("font-src {}", with("'self' data:", &self.resource_domains)),
            format!(
                "media-src {}",
                with("'self' data: blob:", &self.resource_domains)
            ),
            format!("connect-src {connect}"),
            format!("frame-src {frame}"),
            "object-src 'none'".to_owned(),
            format!("base-uri {base_uri}"),
        ]
        .join("; ")
    }

    /// The iframe `allow` attribute for the requested permissions.
    pub(crate) fn allow_attribute(&self) -> String {
        self.permissions
            .iter()
            .map(|p| match p.as_str() {
                "clipboardWrite" => "clipboard-write",
                other => other,
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn without_metadata_the_policy_is_restrictive() {
        let header = view_policy(None, None).header();
        assert!(header.starts_with("default-src 'none'"), "{header}");
        assert!(header.contains("connect-src 'none'"), "{header}");
        assert!(header.contains("frame-src 'none'"), "{header}");
        assert!(header.contains("object-src 'none'"), "{header}");
        assert!(header.contains("base-uri 'self'"), "{header}");
        assert!(!header.contains("http"), "{header}");
    }

    #[test]
    fn declared_domains_go_only_where_declared() {
        let listing = meta(json!({"ui": {"csp": {
            "connectDomains": ["https://api.example.com"],
            "resourceDomains": ["https://cdn.example.com"],
            "frameDomains": ["https://maps.example.com"],
        }}}));
        let policy = view_policy(None, Some(&listing));
        let header = policy.header();
        assert!(
            header.contains("connect-src 'self' https://api.example.com;"),
            "{header}"
        );
        assert!(
            header.contains("script-src 'self' 'unsafe-inline' https://cdn.example.com;"),
            "{header}"
        );
        assert!(
            header.contains("frame-src https://maps.example.com;"),
            "{header}"
        );
        assert!(
            !header.contains("connect-src 'self' https://cdn"),
            "{header}"
        );
    }

    #[test]
    fn the_content_item_wins_over_the_listing_entry() {
        let listing = meta(
            json!({"ui": {"csp": {"connectDomains": ["https://listing.example"]}, "prefersBorder": false}}),
        );
        let content = meta(
            json!({"ui": {"csp": {"connectDomains": ["https://content.example"]}, "prefersBorder": true}}),
        );
        let policy = view_policy(Some(&content), Some(&listing));
        assert_eq!(policy.connect_domains, ["https://content.example"]);
        assert_eq!(policy.prefers_border, Some(true));
        // A content item without `_meta.ui` falls back to the listing.
        let bare = meta(json!({"other": 1}));
        assert_eq!(
            view_policy(Some(&bare), Some(&listing)).connect_domains,
            ["https://listing.example"]
        );
    }

    #[test]
    fn injection_attempts_are_dropped() {
        for bad in [
            "https://a.example; script-src *",
            "'unsafe-eval'",
            "https://a.example 'unsafe-inline'",
            "*",
            "javascript:alert(1)",
            "https://a.example\nscript-src *",
            "data:",
            "",
            "https://",
        ] {
            assert_eq!(sanitize_origin(bad), None, "{bad:?}");
        }
        for good in [
            "https://api.example.com",
            "https://*.example.com",
            "http://127.0.0.1:8080",
            "wss://live.example",
        ] {
            assert_eq!(sanitize_origin(good).as_deref(), Some(good));
        }
    }

    #[test]
    fn permissions_map_to_the_allow_attribute() {
        let content = meta(
            json!({"ui": {"permissions": {"camera": {}, "clipboardWrite": {}, "teleport": {}}}}),
        );
        let policy = view_policy(Some(&content), None);
        assert_eq!(policy.allow_attribute(), "camera; clipboard-write");
    }
}
