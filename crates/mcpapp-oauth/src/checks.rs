//! Pure checks and small computations of the client flow, unit-tested on their own: which
//! `WWW-Authenticate` value is a Bearer challenge, scope lists and their union, the
//! authorization URL a user may be sent to, the RFC 9207 `iss` comparison, when a token is due
//! for refresh, and the DCR `application_type` of a redirect URI.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use url::{Host, Url};

/// The largest refresh margin: a token is renewed once less than
/// `min(REFRESH_MARGIN, expires_in / 2)` of its life remains, so a long-lived token is renewed
/// 30 s before it expires and a short-lived one is not renewed on every request.
pub(crate) const REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// A `Bearer` challenge from a response's `WWW-Authenticate` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// The whole header value, handed to rmcp's discovery (it reads `resource_metadata` and
    /// `scope` from it).
    pub(crate) header: String,
    /// `error` (`invalid_token`, `insufficient_scope`, …).
    pub(crate) error: Option<String>,
    /// `scope`, split on spaces.
    pub(crate) scopes: Vec<String>,
}

impl Challenge {
    pub(crate) fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The first `WWW-Authenticate` value that holds a `Bearer` challenge (the scheme is
/// case-insensitive; a value may list several challenges, `Basic …, Bearer …`).
pub(crate) fn bearer_challenge<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
    values.into_iter().find_map(|value| {
        let start = bearer_start(value)?;
        let params = &value[start + "bearer".len()..];
        Some(Challenge {
            header: value.to_owned(),
            error: auth_param(params, "error"),
            scopes: auth_param(params, "scope")
                .map(|scope| parse_scopes(&scope))
                .unwrap_or_default(),
        })
    })
}

/// Where the `Bearer` scheme starts in a header value: at its start or after a comma, followed
/// by a space or the end.
fn bearer_start(value: &str) -> Option<usize> {
    let lower = value.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("bearer") {
        let at = from + found;
        let before_ok = lower[..at].trim_end().is_empty() || lower[..at].trim_end().ends_with(',');
        let after = lower.as_bytes().get(at + "bearer".len());
        if before_ok && after.is_none_or(|b| *b == b' ' || *b == b'\t') {
            return Some(at);
        }
        from = at + "bearer".len();
    }
    None
}

/// One auth-param (`name=token` or `name="quoted \" string"`) of a challenge, by name,
/// case-insensitively. A challenge after this one (`…, Basic realm=…`) is not looked into
/// beyond the first match, which is what servers send in practice.
fn auth_param(params: &str, name: &str) -> Option<String> {
    let mut rest = params;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return None;
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim();
        let after = rest[eq + 1..].trim_start();
        let (value, consumed) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut escaped = false;
            let mut end = None;
            for (i, c) in quoted.char_indices() {
                match (escaped, c) {
                    (true, c) => {
                        value.push(c);
                        escaped = false;
                    }
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        end = Some(i + 1);
                        break;
                    }
                    (false, c) => value.push(c),
                }
            }
            let end = end?;
            (value, after.len() - quoted.len() + end)
        } else {
            let end = after.find([',', ' ', '\t']).unwrap_or(after.len());
            (after[..end].to_owned(), end)
        };
        if key.eq_ignore_ascii_case(name) {
            return Some(value);
        }
        rest = &after[consumed..];
    }
}

/// A space-separated scope string as a list, without empties or repeats.
pub(crate) fn parse_scopes(scope: &str) -> Vec<String> {
    union_scopes(&[], scope.split_whitespace().map(str::to_owned))
}

/// `held` followed by each of `more` not already in it, in order (SEP-2350's union).
pub(crate) fn union_scopes(held: &[String], more: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut all = Vec::with_capacity(held.len());
    for scope in held.iter().cloned().chain(more) {
        if !scope.is_empty() && !all.contains(&scope) {
            all.push(scope);
        }
    }
    all
}

/// Why an authorization URL may not be handed to a user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlRefusal {
    #[error("it is not a URL")]
    NotAUrl,
    #[error("its scheme is `{0}`; only https (or http on a loopback address) is allowed")]
    Scheme(String),
    #[error("it is http but its host is not a loopback address")]
    PlainHttpOffLoopback,
    #[error("it carries a user name or password")]
    Userinfo,
}

/// Checks a URL the user's browser is to open: `https:`, or `http:` to a loopback address
/// (`127.0.0.0/8`, `::1`, `localhost`); never `javascript:`, `data:`, `file:` or credentials
/// in the authority.
pub(crate) fn check_authorization_url(text: &str) -> Result<Url, UrlRefusal> {
    let url = Url::parse(text).map_err(|_| UrlRefusal::NotAUrl)?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        "http" => return Err(UrlRefusal::PlainHttpOffLoopback),
        other => return Err(UrlRefusal::Scheme(other.to_owned())),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlRefusal::Userinfo);
    }
    Ok(url)
}

/// Whether the URL's host is a loopback address or `localhost`.
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// The OIDC dynamic registration `application_type` (SEP-837) for a redirect URI: `native`
/// for a gateway reached on loopback (a locally hosted web app), `web` for one on a public
/// origin.
pub(crate) fn application_type(redirect_uri: &Url) -> &'static str {
    if is_loopback(redirect_uri) {
        "native"
    } else {
        "web"
    }
}

/// Why an authorization response's `iss` is refused (RFC 9207).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IssuerProblem {
    #[error("the authorization server advertises `iss` in responses but this one has none")]
    Missing,
    #[error("the response's `iss` is not the authorization server's issuer")]
    Mismatch,
}

/// RFC 9207 as the MCP specification (2026-07-28, SEP-2468) applies it: when the server
/// advertises `authorization_response_iss_parameter_supported`, `iss` must be present; when
/// present it must equal the recorded issuer exactly (no case folding, port or slash
/// normalization); both absent is accepted.
pub(crate) fn check_response_issuer(
    expected: &str,
    advertised: bool,
    received: Option<&str>,
) -> Result<(), IssuerProblem> {
    match received {
        Some(iss) if iss == expected => Ok(()),
        Some(_) => Err(IssuerProblem::Mismatch),
        None if advertised => Err(IssuerProblem::Missing),
        None => Ok(()),
    }
}

/// When a token received at `received_at` and valid for `expires_in` should be renewed.
pub(crate) fn refresh_at(received_at: SystemTime, expires_in: Duration) -> SystemTime {
    let margin = REFRESH_MARGIN.min(expires_in / 2);
    received_at + expires_in.saturating_sub(margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_challenge_is_found_among_others_and_its_params_read() {
        let found = bearer_challenge([
            "Basic realm=\"x\"",
            r#"Bearer error="insufficient_scope", scope="mcp:read  mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#,
        ])
        .unwrap();
        assert!(found.is_insufficient_scope());
        assert_eq!(found.scopes, ["mcp:read", "mcp:write"]);
        assert!(found.header.starts_with("Bearer "));

        let listed = bearer_challenge(["Basic realm=\"a, b\", BEARER scope=files"]).unwrap();
        assert_eq!(listed.scopes, ["files"]);
        assert_eq!(listed.error, None);

        let bare = bearer_challenge(["Bearer"]).unwrap();
        assert!(bare.scopes.is_empty());
        let escaped = bearer_challenge([r#"Bearer realm="say \"hi\"", error=invalid_token"#]);
        assert_eq!(escaped.unwrap().error.as_deref(), Some("invalid_token"));

        assert_eq!(bearer_challenge(["Basic realm=\"bearer\""]), None);
        assert_eq!(bearer_challenge(["Bearerish x=1"]), None);
        assert_eq!(bearer_challenge(Vec::<&str>::new()), None);
    }

    #[test]
    fn scopes_union_keeps_order_and_drops_repeats() {
        let held = parse_scopes("mcp:basic  offline_access mcp:basic");
        assert_eq!(held, ["mcp:basic", "offline_access"]);
        let union = union_scopes(&held, parse_scopes("mcp:write mcp:basic"));
        assert_eq!(union, ["mcp:basic", "offline_access", "mcp:write"]);
    }

    #[test]
    fn only_https_or_loopback_http_authorization_urls_are_handed_out() {
        assert!(check_authorization_url("https://as.example.com/authorize?x=1").is_ok());
        for ok in [
            "http://127.0.0.1:9/authorize",
            "http://127.8.9.10/a",
            "http://[::1]:8/a",
            "http://localhost:3000/a",
            "http://LOCALHOST/a",
        ] {
            assert!(check_authorization_url(ok).is_ok(), "{ok}");
        }
        assert_eq!(
            check_authorization_url("http://as.example.com/authorize"),
            Err(UrlRefusal::PlainHttpOffLoopback)
        );
        assert_eq!(
            check_authorization_url("http://10.0.0.1/authorize"),
            Err(UrlRefusal::PlainHttpOffLoopback)
        );
        for scheme in [
            "javascript:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(check_authorization_url(scheme), Err(UrlRefusal::Scheme(_))),
                "{scheme}"
            );
        }
        assert_eq!(
            check_authorization_url("https://user:pw@as.example.com/"),
            Err(UrlRefusal::Userinfo)
        );
        assert_eq!(
            check_authorization_url("not a url"),
            Err(UrlRefusal::NotAUrl)
        );
    }

    #[test]
    fn iss_is_compared_exactly_and_required_only_when_advertised() {
        let issuer = "https://as.example.com";
        assert_eq!(check_response_issuer(issuer, true, Some(issuer)), Ok(()));
        assert_eq!(check_response_issuer(issuer, false, Some(issuer)), Ok(()));
        assert_eq!(check_response_issuer(issuer, false, None), Ok(()));
        assert_eq!(
            check_response_issuer(issuer, true, None),
            Err(IssuerProblem::Missing)
        );
        for wrong in [
            "https://evil.example.com",
            "https://as.example.com/",
            "HTTPS://as.example.com",
            "https://as.example.com:443",
        ] {
            for advertised in [true, false] {
                assert_eq!(
                    check_response_issuer(issuer, advertised, Some(wrong)),
                    Err(IssuerProblem::Mismatch),
                    "{wrong}"
                );
            }
        }
    }

    #[test]
    fn refresh_is_due_thirty_seconds_early_or_at_half_life() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(
            refresh_at(t0, Duration::from_secs(3600)),
            t0 + Duration::from_secs(3570)
        );
        assert_eq!(
            refresh_at(t0, Duration::from_secs(20)),
            t0 + Duration::from_secs(10)
        );
        assert_eq!(refresh_at(t0, Duration::ZERO), t0);
    }

    #[test]
    fn the_application_type_follows_the_redirect_host() {
        let local = Url::parse("http://127.0.0.1:8787/oauth/callback").unwrap();
        let public = Url::parse("https://gw.example.com/oauth/callback").unwrap();
        assert_eq!(application_type(&local), "native");
        assert_eq!(application_type(&public), "web");
    }
}
