//! Who may talk to the gateway: DNS-rebinding protection (`Host` and `Origin`), CORS for the
//! allowed origins, and bearer-token authentication.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tracing::warn;

use crate::config::HostConfig;

/// Why the gateway refuses to listen where it was asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExposureError {
    /// A non-loopback address without a token would let anyone on the network run tools.
    #[error(
        "refusing to listen on {addr} without an auth token: set Gateway.AuthToken or MCPAPP_TOKEN, bind 127.0.0.1, or set Gateway.AllowRemoteWithoutToken to true"
    )]
    RemoteWithoutToken {
        /// The address.
        addr: SocketAddr,
    },
}

/// Refuses a non-loopback address without a token, unless explicitly allowed.
///
/// # Errors
/// [`ExposureError::RemoteWithoutToken`].
pub(crate) fn check_exposure(
    addr: SocketAddr,
    token: Option<&str>,
    allow_remote_without_token: bool,
) -> Result<(), ExposureError> {
    if addr.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) || allow_remote_without_token
    {
        Ok(())
    } else {
        Err(ExposureError::RemoteWithoutToken { addr })
    }
}

/// What the `Host` and `Origin` checks compare against, worked out once per router.
pub(crate) struct Access {
    config: Arc<HostConfig>,
    /// Allowed origins in canonical form (see [`canonical_origin`]).
    origins: Arc<Vec<String>>,
}

impl Access {
    pub(crate) fn new(config: Arc<HostConfig>) -> Arc<Self> {
        let mut origins = Vec::new();
        for origin in config.own_origins().iter().chain(&config.allowed_origins) {
            // A trailing slash in the configuration is forgiven; browsers never send one.
            let trimmed = origin.trim();
            let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
            match canonical_origin(trimmed) {
                Some(canonical) => origins.push(canonical),
                None => warn!(
                    "Gateway.AllowedOrigins: '{origin}' is not an origin such as http://host:port; ignored"
                ),
            }
        }
        origins.sort();
        origins.dedup();
        Arc::new(Self {
            config,
            origins: Arc::new(origins),
        })
    }

    fn allows_origin(&self, origin: &str) -> bool {
        origin_allowed(&self.origins, origin)
    }
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    canonical_origin(origin).is_some_and(|origin| allowed.contains(&origin))
}

fn forbidden(message: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({ "error": message })),
    )
        .into_response()
}

/// The one value of a header, or `Err` when it is there more than once (or not text).
fn single_header<'a>(
    request: &'a Request,
    name: &header::HeaderName,
) -> Result<Option<&'a str>, ()> {
    let mut values = request.headers().get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(());
    }
    first.map(|v| v.to_str().map_err(|_| ())).transpose()
}

/// Whether a parsed `Host` names this gateway: a loopback name, a configured host, or the
/// address the gateway is bound to. The port is not checked: any port of a trusted name is
/// the same trust.
fn host_allowed(config: &HostConfig, host: &HostPart) -> bool {
    let loopback = match host {
        HostPart::Name(name) => name == "localhost",
        HostPart::Ip(ip) => {
            *ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || *ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
        }
    };
    let listed = config
        .allowed_hosts
        .iter()
        .any(|allowed| configured_host(allowed).is_some_and(|allowed| allowed == *host));
    let bound =
        !config.local_addr.ip().is_unspecified() && *host == HostPart::Ip(config.local_addr.ip());
    // The names browsers use behind a balancer are this gateway's names too.
    let public = [&config.public_origin, &config.sandbox_origin]
        .into_iter()
        .flatten()
        .any(|origin| origin_host(origin).is_some_and(|public| public == *host));
    loopback || listed || bound || public
}

/// The host of an origin such as `https://mcpapp.example.com:8443`.
fn origin_host(origin: &str) -> Option<HostPart> {
    origin_authority(origin).map(|authority| authority.host)
}

/// The authority (host and port, if written) of an `http(s)://` origin.
fn origin_authority(origin: &str) -> Option<Authority> {
    let (_, authority) = origin.split_once("://")?;
    parse_authority(authority)
}

/// The authority a request names in `Host` (parsed strictly), if any.
fn request_authority(request: &Request) -> Option<Authority> {
    let host = single_header(request, &header::HOST).ok().flatten()?;
    parse_authority(host)
}

/// Whether a request to the main listener is for the sandbox: its `Host` names the public
/// sandbox origin's host, which is not the page's, and the origin's port when it names one
/// (see [`SandboxByHost`]).
pub(crate) struct SandboxByHost {
    origin: Authority,
    router: axum::Router,
}

impl SandboxByHost {
    /// Serving the sandbox by name on the main listener makes sense only when both public
    /// origins are configured and name different hosts: then one port (one balancer target)
    /// serves both origins, and the browser still sees two.
    pub(crate) fn new(config: &HostConfig, router: axum::Router) -> Option<Self> {
        let page = origin_host(config.public_origin.as_deref()?)?;
        let origin = origin_authority(config.sandbox_origin.as_deref()?)?;
        (origin.host != page).then_some(Self { origin, router })
    }

    /// Whether `request` names the sandbox's origin. The port matters when the origin names
    /// one: without `Gateway.SandboxOrigin` the origin is the sandbox listener's own loopback
    /// address, and a request to the main listener on the same loopback host (a health check,
    /// the CLI) carries the main port, so it is not the sandbox's.
    fn is_for_sandbox(&self, request: &Request) -> bool {
        request_authority(request).is_some_and(|asked| {
            asked.host == self.origin.host
                && (self.origin.port.is_none() || asked.port == self.origin.port)
        })
    }
}

/// Sends requests for the sandbox's host to the sandbox router, so that no route of the page
/// answers under the sandbox's origin; everything else goes on as usual.
pub(crate) async fn sandbox_by_host(
    State(sandbox): State<Arc<SandboxByHost>>,
    request: Request,
    next: Next,
) -> Response {
    if sandbox.is_for_sandbox(&request) {
        use tower::ServiceExt;
        return match sandbox.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    next.run(request).await
}

/// Whether `text` is an `http` or `https` origin (`scheme://host[:port]`, nothing after),
/// which is what `Gateway.PublicOrigin` and `Gateway.SandboxOrigin` must be.
pub(crate) fn is_web_origin(text: &str) -> bool {
    canonical_origin(text)
        .is_some_and(|origin| origin.starts_with("http://") || origin.starts_with("https://"))
}

/// A configured `AllowedHosts` entry: a name, an IPv4 address, or an IPv6 address with or
/// without brackets.
fn configured_host(entry: &str) -> Option<HostPart> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<Ipv6Addr>() {
        return Some(HostPart::Ip(IpAddr::V6(ip)));
    }
    match parse_authority(entry)? {
        Authority { host, port: None } => Some(host),
        Authority { port: Some(_), .. } => None,
    }
}

/// Refuses a `Host` that is not exactly one RFC 3986 authority naming this gateway: a page
/// on another site that resolves its own name to 127.0.0.1 (DNS rebinding) sends its own name
/// here, and a loose parse (`[::1]evil.example`) would let such a name pass for loopback. An
/// absolute request target's authority, which a server must prefer to `Host`, is checked the
/// same way.
fn refuse_host(config: &HostConfig, request: &Request) -> Option<Response> {
    let Ok(host) = single_header(request, &header::HOST) else {
        return Some(forbidden("exactly one Host header is required"));
    };
    let host = host.unwrap_or_default();
    let target = request.uri().authority().map(|a| a.as_str());
    let allowed = |text: &str| {
        parse_authority(text).is_some_and(|authority| host_allowed(config, &authority.host))
    };
    if !allowed(host) || target.is_some_and(|target| !allowed(target)) {
        return Some(forbidden(&format!(
            "host '{}' is not allowed (DNS rebinding protection)",
            target.unwrap_or(host)
        )));
    }
    None
}

/// Checks `Host` (without a token, only loopback names and configured hosts) and `Origin`
/// (only allowed origins; `null` never) before anything else runs.
pub(crate) async fn guard(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    // With a token, a rebinding page cannot authenticate anyway.
    if access.config.auth_token.is_none()
        && let Some(refusal) = refuse_host(&access.config, &request)
    {
        return refusal;
    }
    match single_header(&request, &header::ORIGIN) {
        Ok(None) => {}
        Ok(Some(origin)) if access.allows_origin(origin) => {}
        Ok(Some(origin)) => return forbidden(&format!("origin '{origin}' is not allowed")),
        Err(()) => return forbidden("more than one Origin header"),
    }
    next.run(request).await
}

/// Checks only `Host` (for the sandbox listener, whose pages are framed cross-origin).
pub(crate) async fn guard_host(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    match refuse_host(&access.config, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The host of an authority (RFC 3986 §3.2.2).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPart {
    /// An IP-literal (`[` IPv6 `]`) or an IPv4 address.
    Ip(IpAddr),
    /// A reg-name, in lower case (names compare case-insensitively).
    Name(String),
}

impl std::fmt::Display for HostPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Self::Ip(ip) => write!(f, "{ip}"),
            Self::Name(name) => f.write_str(name),
        }
    }
}

/// `host [":" port]`, the authority of RFC 3986 §3.2 without userinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: HostPart,
    port: Option<u16>,
}

/// Parses `host [":" port]` strictly: the whole text must match, so trailing garbage
/// (`[::1]evil.example`, `localhost:80x`), spaces, userinfo (`a@localhost`) and paths are
/// refused. IP-literals hold IPv6 only (an IPvFuture or zone id never names this gateway);
/// an empty port (`localhost:`) is allowed as RFC 3986 allows it; a port above 65535 is not.
fn parse_authority(text: &str) -> Option<Authority> {
    let (host, rest) = if let Some(literal) = text.strip_prefix('[') {
        let (literal, rest) = literal.split_once(']')?;
        (HostPart::Ip(IpAddr::V6(literal.parse().ok()?)), rest)
    } else {
        let (name, rest) = text.split_at(text.find(':').unwrap_or(text.len()));
        if !is_reg_name(name) {
            return None;
        }
        // Digits and dots that are not a valid IPv4 address (`127.0.0.01`) are a reg-name,
        // as the grammar says; such a name matches nothing unless configured.
        let host = match name.parse::<Ipv4Addr>() {
            Ok(ip) => HostPart::Ip(IpAddr::V4(ip)),
            Err(_) => HostPart::Name(name.to_ascii_lowercase()),
        };
        (host, rest)
    };
    let port = match rest {
        "" | ":" => None,
        _ => {
            let digits = rest.strip_prefix(':')?;
            if !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(digits.parse::<u16>().ok()?)
        }
    };
    Some(Authority { host, port })
}

/// A non-empty reg-name: unreserved characters, sub-delims and well-formed percent escapes.
fn is_reg_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let escape = bytes.get(i + 1..i + 3);
                if !escape.is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                i += 3;
            }
            b if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b) => i += 1,
            _ => return false,
        }
    }
    !bytes.is_empty()
}

/// An `Origin` value (RFC 6454: `scheme "://" host [":" port]`) in canonical form: scheme
/// and host in lower case, the scheme's default port left out. `None` for anything else,
/// including `null` (sent by sandboxed frames and other opaque origins, which must not be
/// trusted) and origins with a path, userinfo or trailing text.
fn canonical_origin(text: &str) -> Option<String> {
    let (scheme, rest) = text.split_once("://")?;
    let mut chars = scheme.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let Authority { host, port } = parse_authority(rest)?;
    let default_port = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Some(match port.filter(|p| Some(*p) != default_port) {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is matched
/// case-insensitively and followed by one or more spaces (RFC 9110 §11.4); anything else is
/// `None`.
fn bearer_token(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Requires `Authorization: Bearer <token>` when a token is configured.
pub(crate) async fn authenticate(
    State(config): State<Arc<HostConfig>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &config.auth_token {
        // A missing or malformed header still runs the full comparison (against an empty
        // token), so a refusal takes as long whatever was sent.
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .unwrap_or_default();
        if !constant_time_eq(presented.as_bytes(), token.as_bytes()) {
            let mut response = (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({ "error": "missing or wrong bearer token" })),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// Compares `presented` with `expected` in time that depends only on the expected length:
/// every byte of `expected` is compared whatever `presented` holds, a length mismatch is
/// folded into the result rather than returned early, and `black_box` keeps the optimiser
/// from turning the loop back into an early exit.
fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    let mut difference = presented.len() ^ expected.len();
    for (i, byte) in expected.iter().enumerate() {
        let other = presented.get(i).copied().unwrap_or(0);
        difference = std::hint::black_box(difference | usize::from(other ^ byte));
    }
    difference == 0
}

/// CORS for the allowed origins: the MCP Streamable HTTP headers are allowed, and
/// `Mcp-Session-Id` is exposed so browser clients can read it. Requests from other origins
/// never get here (see [`guard`]); the same comparison decides here too, so an origin spelt
/// differently (`HTTP://LOCALHOST:8787`) gets the headers it passed the guard with.
pub(crate) fn cors(access: &Access) -> CorsLayer {
    let origins = access.origins.clone();
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| {
            origin
                .to_str()
                .is_ok_and(|origin| origin_allowed(&origins, origin))
        }))
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            header::ACCEPT,
            crate::streamable_http::PROTOCOL_HEADER,
            crate::streamable_http::SESSION_HEADER,
            crate::streamable_http::LAST_EVENT_ID_HEADER,
            crate::replica::AFFINITY_HEADER,
        ])
        .expose_headers([
            crate::streamable_http::SESSION_HEADER,
            crate::replica::REPLICA_HEADER,
            crate::replica::AFFINITY_HEADER,
        ])
        .max_age(std::time::Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Option<(String, Option<u16>)> {
        parse_authority(text).map(|a| (a.host.to_string(), a.port))
    }

    #[test]
    fn authorities_parse_strictly() {
        let some = |h: &str, p: Option<u16>| Some((h.to_owned(), p));
        assert_eq!(host("127.0.0.1:8787"), some("127.0.0.1", Some(8787)));
        assert_eq!(host("LocalHost"), some("localhost", None));
        assert_eq!(host("[::1]:80"), some("[::1]", Some(80)));
        assert_eq!(host("[0:0::1]"), some("[::1]", None));
        assert_eq!(host("evil.example:443"), some("evil.example", Some(443)));
        assert_eq!(host("localhost:"), some("localhost", None));
        // Not an IPv4 address, so a name (which matches nothing unless configured).
        assert_eq!(host("127.0.0.01"), some("127.0.0.01", None));
        assert_eq!(
            host("xn--bcher-kva.example"),
            some("xn--bcher-kva.example", None)
        );
        assert_eq!(host("a%2Eb"), some("a%2eb", None));
        for bad in [
            "",
            ":80",
            "[::1]evil.example",
            "[::1]:80x",
            "[::1",
            "::1",
            "[127.0.0.1]",
            "[v1.fe]",
            "[fe80::1%25eth0]",
            "localhost:80x",
            "localhost:65536",
            "localhost:-1",
            "localhost:80:80",
            "127.0.0.1 .evil",
            " localhost",
            "a@localhost",
            "localhost/path",
            "localhost?q",
            "localhost#f",
            "a%2",
            "a%zz",
        ] {
            assert_eq!(host(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn origins_are_canonical() {
        let canonical = |o: &str| canonical_origin(o);
        assert_eq!(
            canonical("HTTP://LocalHost:8787").as_deref(),
            Some("http://localhost:8787")
        );
        assert_eq!(
            canonical("http://example.com:80").as_deref(),
            Some("http://example.com")
        );
        assert_eq!(
            canonical("https://example.com:443").as_deref(),
            Some("https://example.com")
        );
        assert_eq!(
            canonical("https://example.com:80").as_deref(),
            Some("https://example.com:80")
        );
        assert_eq!(
            canonical("http://[::1]:1").as_deref(),
            Some("http://[::1]:1")
        );
        for bad in [
            "null",
            "",
            "localhost:80",
            "http:/localhost",
            "http://",
            "http://localhost/",
            "http://localhost/path",
            "http://a@localhost",
            "http://[::1]evil.example",
            "http://localhost:80x",
            "1http://localhost",
            "ht tp://localhost",
            "http://localhost ",
        ] {
            assert_eq!(canonical(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn bearer_schemes_match_case_insensitively() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER   abc "), Some("abc"));
        for bad in [
            "Bearer",
            "Bearer ",
            "Bearerabc",
            "Basic abc",
            "Bearer\tabc",
            "Bear abc",
        ] {
            assert_eq!(bearer_token(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secre", b"secret"));
        assert!(!constant_time_eq(b"secretx", b"secret"));
        assert!(!constant_time_eq(b"", b"secret"));
    }

    #[test]
    fn remote_addresses_need_a_token() {
        let remote: SocketAddr = "0.0.0.0:80".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(check_exposure(local, None, false).is_ok());
        assert!(check_exposure(remote, None, false).is_err());
        assert!(check_exposure(remote, Some("t"), false).is_ok());
        assert!(check_exposure(remote, None, true).is_ok());
    }
}
