//! The names the gateway gives things upstream: request ids, progress tokens, the ids of
//! server requests it makes up, and the opaque handles of held calls.
//!
//! One counter numbers them all, so no two are ever alike within a session: a port's request
//! becomes `"gw:{port}:{n}"` (rmcp only uses numbers, so the two never collide), its progress
//! token `"gwpt:{n}"` with the same `n`, the gateway's own requests `"gw:0:{n}"` (ports are
//! numbered from 1), and a server request made up for an input round `"gwsr:{n}"`.

use serde_json::value::RawValue;

pub(crate) use crate::link::RequestKey as Key;
use crate::raw::raw_string;

/// Identifies a port within one upstream session (from 1; 0 is the gateway itself).
pub(crate) type PortId = u64;

/// A raw id as a table key: its JSON text without surrounding whitespace (`7` and `"7"`
/// differ).
pub(crate) fn key_of(value: &RawValue) -> Key {
    value.get().trim().to_owned()
}

/// The session's one counter.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    next: u64,
}

impl Ids {
    /// The next number (also what makes held-call handles distinct).
    pub(crate) fn next(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// A fresh upstream id for a request of `port`, as a key and as raw JSON, with its number
    /// (which its progress token shares).
    pub(crate) fn port_request(&mut self, port: PortId) -> (Key, Box<RawValue>, u64) {
        let n = self.next();
        let value = raw_string(&format!("gw:{port}:{n}"));
        (key_of(&value), value, n)
    }

    /// A fresh id for a request the gateway makes on its own behalf.
    pub(crate) fn gateway_request(&mut self) -> Box<RawValue> {
        let n = self.next();
        raw_string(&format!("gw:0:{n}"))
    }

    /// A fresh id for a server request the gateway makes up (one input of a round), as a key.
    pub(crate) fn server_request(&mut self) -> Key {
        let n = self.next();
        format!("\"gwsr:{n}\"")
    }
}

/// The upstream progress token of the request numbered `n`.
pub(crate) fn progress_token(n: u64) -> Box<RawValue> {
    raw_string(&format!("gwpt:{n}"))
}

/// An unguessable handle for a held call (SipHash, keyed by the router's secret).
pub(crate) fn handle(secret: [u64; 2], n: u64) -> String {
    use std::hash::Hasher;
    let mut parts = [0u64; 2];
    for (i, part) in parts.iter_mut().enumerate() {
        #[allow(deprecated)]
        let mut hasher = std::hash::SipHasher::new_with_keys(secret[0], secret[1] ^ i as u64);
        hasher.write_u64(n);
        *part = hasher.finish();
    }
    format!("gw{:016x}{:016x}", parts[0], parts[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_counter_numbers_every_kind_of_id() {
        let mut ids = Ids::default();
        let (key, value, n) = ids.port_request(3);
        assert_eq!(
            (key.as_str(), value.get(), n),
            (r#""gw:3:1""#, r#""gw:3:1""#, 1)
        );
        assert_eq!(progress_token(n).get(), r#""gwpt:1""#);
        assert_eq!(ids.gateway_request().get(), r#""gw:0:2""#);
        assert_eq!(ids.server_request(), r#""gwsr:3""#);
        assert_eq!(ids.next(), 4);
        assert_eq!(ids.port_request(1).0, r#""gw:1:5""#);
    }

    #[test]
    fn keys_are_the_trimmed_json_text() {
        let spaced = serde_json::from_str::<Box<RawValue>>(" 7 ").unwrap();
        assert_eq!(key_of(&spaced), "7");
        assert_ne!(key_of(&raw_string("7")), key_of(&spaced));
    }

    #[test]
    fn handles_depend_on_the_secret_and_the_number() {
        let a = handle([1, 2], 1);
        assert_eq!(a.len(), 34);
        assert!(a.starts_with("gw"));
        assert_eq!(a, handle([1, 2], 1));
        assert_ne!(a, handle([1, 2], 2));
        assert_ne!(a, handle([1, 3], 1));
    }
}
