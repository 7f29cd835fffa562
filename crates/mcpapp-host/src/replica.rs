//! Running as one of many replicas behind a balancer: the response header that names the
//! replica, and the affinity key that keeps one chat session on one replica.
//!
//! A replica owns the upstream sessions of its apps, the chat sessions of its agent, the
//! browser sessions of its proxy, its prepared views and its pending elicitations; none of
//! them is shared. So every request that belongs to one chat session must reach the replica
//! that holds it. The key for that is the chat session id itself, sent by clients as the
//! `Mcpapp-Affinity` header (and, for the sandbox frame, which a page cannot give headers, as
//! the `affinity` query parameter of its URL). Balancers hash or stick on it; the gateway only
//! reads it where the session id is its own business (`POST /apps/chat`) and carries it into
//! the sandbox URL it hands out. docs/operations.md describes the whole scheme.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The header that names the replica that answered (`Gateway.ReplicaName`).
pub(crate) const REPLICA_HEADER: HeaderName = HeaderName::from_static("mcpapp-replica");
/// The header that carries the affinity key: the chat session id.
pub(crate) const AFFINITY_HEADER: HeaderName = HeaderName::from_static("mcpapp-affinity");
/// The sandbox URL's query parameter that carries the affinity key.
pub(crate) const AFFINITY_PARAM: &str = "affinity";
/// The longest affinity key: a UUID with a prefix fits many times over.
const MAX_KEY_LEN: usize = 128;
/// The longest replica name.
const MAX_REPLICA_NAME_LEN: usize = 64;
/// The replica name when the host has none it can read.
const FALLBACK_REPLICA_NAME: &str = "mcpapp";

/// This machine's host name (a pod's name in Kubernetes), or `mcpapp` when it cannot be
/// read or is not a usable replica name.
pub(crate) fn default_replica_name() -> String {
    #[cfg(unix)]
    if let Ok(name) = nix::unistd::gethostname()
        && let Some(name) = name.to_str()
        && replica_name_problem(name).is_none()
    {
        return name.to_owned();
    }
    FALLBACK_REPLICA_NAME.to_owned()
}

/// Why `name` cannot name a replica, if it cannot: it goes into a response header as it is.
pub(crate) fn replica_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_REPLICA_NAME_LEN {
        Some("it is longer than 64 characters")
    } else if !name.bytes().all(|b| b.is_ascii_graphic()) {
        Some("it may hold only visible ASCII characters, without spaces")
    } else {
        None
    }
}

/// Whether `key` can be an affinity key: 1 to 128 characters out of letters, digits and
/// `-._~`, so it travels unchanged in a header, a query string and a balancer's table.
pub(crate) fn is_affinity_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_KEY_LEN
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// The request's affinity key: `Ok(None)` without one, `Err` with the reason when it is
/// there but unusable (more than once, or not a key).
pub(crate) fn affinity_key(headers: &HeaderMap) -> Result<Option<&str>, String> {
    let mut values = headers.get_all(&AFFINITY_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("more than one Mcpapp-Affinity header".into());
    }
    match value.to_str() {
        Ok(key) if is_affinity_key(key) => Ok(Some(key)),
        _ => Err(
            "the Mcpapp-Affinity header must be 1 to 128 letters, digits or '-._~' (the chat session id)"
                .into(),
        ),
    }
}

/// The replica's name as a header value (checked when the configuration was read; a name
/// that slipped through becomes the fallback rather than a panic).
pub(crate) fn replica_header_value(name: &str) -> HeaderValue {
    match replica_name_problem(name) {
        None => HeaderValue::from_str(name)
            .unwrap_or_else(|_| HeaderValue::from_static(FALLBACK_REPLICA_NAME)),
        Some(_) => HeaderValue::from_static(FALLBACK_REPLICA_NAME),
    }
}

/// Names the replica on every response, refusals included, so that whoever runs the
/// balancer can see where each request went.
pub(crate) async fn name_replica(
    State(name): State<HeaderValue>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    response.headers_mut().insert(REPLICA_HEADER, name);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_keys_are_url_and_header_safe() {
        for good in [
            "page-0123abcd",
            "apps-0f",
            "a",
            "A.b_c~d-e",
            &"k".repeat(128),
        ] {
            assert!(is_affinity_key(good), "{good:?}");
        }
        for bad in ["", "a b", "a/b", "a%20", "ä", "a,b", &"k".repeat(129)] {
            assert!(!is_affinity_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn affinity_headers_are_read_strictly() {
        let mut headers = HeaderMap::new();
        assert_eq!(affinity_key(&headers), Ok(None));
        headers.insert(AFFINITY_HEADER, HeaderValue::from_static("page-1"));
        assert_eq!(affinity_key(&headers), Ok(Some("page-1")));
        headers.append(AFFINITY_HEADER, HeaderValue::from_static("page-2"));
        assert!(affinity_key(&headers).is_err());
        headers.insert(AFFINITY_HEADER, HeaderValue::from_static("page 1"));
        assert!(affinity_key(&headers).is_err());
    }

    #[test]
    fn replica_names_fit_a_header() {
        assert_eq!(replica_name_problem("mcpapp-7d9f-x2"), None);
        assert!(replica_name_problem("").is_some());
        assert!(replica_name_problem("a b").is_some());
        assert!(replica_name_problem(&"r".repeat(65)).is_some());
        assert!(replica_name_problem(&default_replica_name()).is_none());
        assert_eq!(replica_header_value("a b"), "mcpapp");
    }
}
