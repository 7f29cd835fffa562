//! Values that must never show: [`Secret`] (a client secret, a stored token) and [`Bearer`]
//! (the access token a request carries). Neither has `Display`; their `Debug` says
//! `[redacted]`, so a `{:?}` in a log line, an error or a panic message cannot leak them.

use std::fmt;

use http::HeaderValue;
use serde::{Deserialize, Serialize};

/// A secret string: a client secret, a token. Its `Debug` is `Secret([redacted])` and it has no
/// `Display`; [`Secret::expose`] is the one way to read it, so every read is greppable.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// The access token for one request, ready to send as `Authorization: Bearer …`.
///
/// It also names which token it is (a generation counted per app), so that after a 401 the
/// authorizer can tell whether the rejected token is still the current one.
#[derive(Clone)]
pub struct Bearer {
    header: HeaderValue,
    pub(crate) generation: u64,
}

impl Bearer {
    /// Builds the header value, marked sensitive (HTTP/2 never indexes it, `http`'s `Debug`
    /// hides it). `None` when the token has characters a header cannot carry.
    pub(crate) fn new(token: &str, generation: u64) -> Option<Self> {
        // RFC 6750 b64token: visible ASCII only.
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return None;
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        header.set_sensitive(true);
        Some(Self { header, generation })
    }

    /// The `Authorization` header value (`Bearer <token>`), marked sensitive.
    pub fn header_value(&self) -> HeaderValue {
        self.header.clone()
    }
}

impl PartialEq for Bearer {
    fn eq(&self, other: &Self) -> bool {
        self.generation == other.generation && self.header == other.header
    }
}

impl Eq for Bearer {}

impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bearer([redacted], generation {})", self.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_value() {
        let secret = Secret::new("hunter2-client-secret");
        assert_eq!(format!("{secret:?}"), "Secret([redacted])");
        let bearer = Bearer::new("at-0123456789", 3).unwrap();
        let shown = format!("{bearer:?} {:?}", bearer.header_value());
        assert!(!shown.contains("at-0123"), "{shown}");
        assert!(bearer.header_value().is_sensitive());
        assert_eq!(
            bearer.header_value().to_str().unwrap(),
            "Bearer at-0123456789"
        );
    }

    #[test]
    fn a_token_a_header_cannot_carry_is_refused() {
        assert!(Bearer::new("", 1).is_none());
        assert!(Bearer::new("two words", 1).is_none());
        assert!(Bearer::new("line\nbreak", 1).is_none());
        assert!(Bearer::new("é", 1).is_none());
    }
}
