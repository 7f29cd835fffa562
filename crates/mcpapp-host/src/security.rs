//! Who may talk to the gateway: DNS-rebinding protection (`Host` and `Origin`), CORS for the
//! allowed origins, and bearer-token authentication.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};

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
pub fn check_exposure(
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

/// The allowed origins, normalised (lower case, no trailing slash).
pub(crate) fn allowed_origins(config: &HostConfig) -> Vec<String> {
    let mut origins: Vec<String> = config
        .own_origins()
        .into_iter()
        .chain(config.allowed_origins.iter().cloned())
        .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
        .collect();
    origins.sort();
    origins.dedup();
    origins
}

fn forbidden(message: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({ "error": message })),
    )
        .into_response()
}

/// Refuses a `Host` that is neither a loopback name, a configured host, nor the address the
/// gateway is bound to: a page on another site that resolves its own name to 127.0.0.1 (DNS
/// rebinding) sends its own name here.
fn refuse_host(config: &HostConfig, request: &Request) -> Option<Response> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let name = host_name(host);
    let loopback = matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1");
    let listed = config
        .allowed_hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(&name));
    let bound =
        !config.local_addr.ip().is_unspecified() && config.local_addr.ip().to_string() == name;
    (!(loopback || listed || bound)).then(|| {
        forbidden(&format!(
            "host '{host}' is not allowed (DNS rebinding protection)"
        ))
    })
}

/// Checks `Host` (without a token, only loopback names and configured hosts) and `Origin`
/// (only allowed origins) before anything else runs.
pub(crate) async fn guard(
    State(config): State<Arc<HostConfig>>,
    request: Request,
    next: Next,
) -> Response {
    // With a token, a rebinding page cannot authenticate anyway.
    if config.auth_token.is_none()
        && let Some(refusal) = refuse_host(&config, &request)
    {
        return refusal;
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin
            .to_str()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_ascii_lowercase();
        if !allowed_origins(&config).contains(&origin) {
            return forbidden(&format!("origin '{origin}' is not allowed"));
        }
    }
    next.run(request).await
}

/// Checks only `Host` (for the sandbox listener, whose pages are framed cross-origin).
pub(crate) async fn guard_host(
    State(config): State<Arc<HostConfig>>,
    request: Request,
    next: Next,
) -> Response {
    match refuse_host(&config, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The host name of a `Host` header value, without port or brackets, in lower case.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        })
    };
    name.to_ascii_lowercase()
}

/// Requires `Authorization: Bearer <token>` when a token is configured.
pub(crate) async fn authenticate(
    State(config): State<Arc<HostConfig>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &config.auth_token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
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

/// Compares without an early exit, so the time taken says nothing about the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (i, byte) in b.iter().enumerate() {
        difference |= usize::from(a.get(i).copied().unwrap_or(0) ^ byte);
    }
    difference == 0
}

/// CORS for the allowed origins: the MCP Streamable HTTP headers are allowed, and
/// `Mcp-Session-Id` is exposed so browser clients can read it. Requests from other origins
/// never get here (see [`guard`]).
pub(crate) fn cors(config: &HostConfig) -> CorsLayer {
    let origins: Vec<HeaderValue> = allowed_origins(config)
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            header::ACCEPT,
            header::HeaderName::from_static("mcp-protocol-version"),
            header::HeaderName::from_static("mcp-session-id"),
            header::HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([header::HeaderName::from_static("mcp-session-id")])
        .max_age(std::time::Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_drop_ports_and_brackets() {
        assert_eq!(host_name("127.0.0.1:8787"), "127.0.0.1");
        assert_eq!(host_name("LocalHost"), "localhost");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("evil.example:443"), "evil.example");
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
