//! Who is owed which response: the port requests in flight upstream, under the ids and
//! progress tokens the gateway gave them, and what to restore on the way back.
//!
//! A request is known by two keys: its *stream* (the upstream id it was first sent under,
//! which names the stream its answers go to for its whole life) and its *current* upstream
//! id, which changes when an input round sends it again. [`Requests`] maps current ids to
//! requests, streams to current ids where they differ, and upstream progress tokens to the
//! request and the token its client chose.

use std::collections::HashMap;

use serde_json::value::RawValue;

use super::ids::{Ids, Key, PortId, key_of, progress_token};
use crate::raw::RawMessage;

/// A port request in flight upstream.
#[derive(Debug)]
pub(crate) struct PendingRequest {
    pub(crate) port: PortId,
    /// The stream its answers go to; the upstream id changes on an input-required retry.
    pub(crate) stream: Key,
    pub(crate) original_id: Box<RawValue>,
    pub(crate) token: Option<Key>,
    /// A subscription recorded when the request was sent, undone if the server refuses it.
    pub(crate) subscribes: Option<String>,
    pub(crate) method: String,
    /// Whether the client speaks the modern era (its results are completed for it).
    pub(crate) modern_client: bool,
    /// For a modern client: the log level its request asked for (none: no log messages).
    pub(crate) log_level: Option<usize>,
    /// The request as sent upstream, kept for an input-required retry (modern upstream).
    pub(crate) sent: Option<RawMessage>,
    /// A call held for a modern client's retry: the server request it must answer.
    pub(crate) held: Option<Key>,
}

/// Where a progress notification goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// To this stream, its client's token restored.
    Stream(Key),
    /// A token no port request has (rmcp's own, or a finished request's).
    Unknown,
    /// The token could not be written back; the notification is dropped.
    Unwritable,
}

/// The port requests in flight, by current upstream id.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    pending: HashMap<Key, PendingRequest>,
    /// Stream key → current upstream id, where they differ (after a retry).
    aliases: HashMap<Key, Key>,
    /// Upstream progress token → (current upstream id, the client's own token).
    tokens: HashMap<Key, (Key, Box<RawValue>)>,
}

impl Requests {
    /// Gives a port request a fresh upstream id and, when it carries one, a fresh progress
    /// token (the client's is remembered for the way back). Returns the new id as a key and
    /// the new token's key.
    pub(crate) fn rewrite(
        &mut self,
        ids: &mut Ids,
        port: PortId,
        message: &mut RawMessage,
    ) -> (Key, Option<Key>) {
        let (key, key_value, n) = ids.port_request(port);
        message.set_id(&key_value);
        let mut token_key = None;
        if let Some(original_token) = message.get_path(&["params", "_meta", "progressToken"]) {
            let upstream_token = progress_token(n);
            if message
                .set_path(&["params", "_meta", "progressToken"], &upstream_token)
                .is_ok()
            {
                let token = key_of(&upstream_token);
                self.tokens
                    .insert(token.clone(), (key.clone(), original_token));
                token_key = Some(token);
            }
        }
        (key, token_key)
    }

    pub(crate) fn insert(&mut self, key: Key, pending: PendingRequest) {
        self.pending.insert(key, pending);
    }

    pub(crate) fn get(&self, key: &Key) -> Option<&PendingRequest> {
        self.pending.get(key)
    }

    pub(crate) fn get_mut(&mut self, key: &Key) -> Option<&mut PendingRequest> {
        self.pending.get_mut(key)
    }

    pub(crate) fn contains(&self, key: &Key) -> bool {
        self.pending.contains_key(key)
    }

    /// Forgets the request under the current id `key`, with its progress token. (The port's
    /// list of requests in flight is the caller's to update.)
    pub(crate) fn remove(&mut self, key: &Key) -> Option<PendingRequest> {
        let pending = self.pending.remove(key)?;
        if let Some(token) = &pending.token {
            self.tokens.remove(token);
        }
        Some(pending)
    }

    /// The upstream id a stream's request currently has.
    pub(crate) fn current(&self, stream: &Key) -> Key {
        self.aliases.get(stream).unwrap_or(stream).clone()
    }

    /// The stream of the request under the current id `key` (or `key` itself when none is).
    pub(crate) fn stream_of(&self, key: &Key) -> Key {
        self.pending
            .get(key)
            .map_or_else(|| key.clone(), |p| p.stream.clone())
    }

    /// The original id of a port request (by its stream key), to build responses the port
    /// understands.
    pub(crate) fn original_id(&self, stream: &Key) -> Option<&RawValue> {
        self.pending
            .get(&self.current(stream))
            .map(|r| r.original_id.as_ref())
    }

    /// Moves the request under `old` to the current id `new` (its retry), keeping its stream
    /// and its progress token.
    pub(crate) fn move_to(&mut self, old: &Key, new: &Key) -> bool {
        let Some(pending) = self.pending.remove(old) else {
            return false;
        };
        if let Some(token) = &pending.token
            && let Some((request, _)) = self.tokens.get_mut(token)
        {
            request.clone_from(new);
        }
        self.aliases.insert(pending.stream.clone(), new.clone());
        self.pending.insert(new.clone(), pending);
        true
    }

    /// Progress of the request under the current id `key` goes out under the client token
    /// `token` from now on, or not at all (a held call's retry takes the call over).
    pub(crate) fn retoken(&mut self, key: &Key, token: Option<Box<RawValue>>) {
        let Some(upstream) = self.pending.get(key).and_then(|p| p.token.clone()) else {
            return;
        };
        match (token, self.tokens.get_mut(&upstream)) {
            (Some(token), Some((_, original))) => *original = token,
            (None, _) => {
                self.tokens.remove(&upstream);
                if let Some(pending) = self.pending.get_mut(key) {
                    pending.token = None;
                }
            }
            (Some(_), None) => {}
        }
    }

    /// Forgets that a stream's request moved (it has ended).
    pub(crate) fn end_stream(&mut self, stream: &Key) {
        self.aliases.remove(stream);
    }

    /// Restores the client's token in a `notifications/progress` and says whose it is.
    pub(crate) fn restore_progress(&self, message: &mut RawMessage) -> Progress {
        let token = message.path(&["params", "progressToken"]).map(key_of);
        let Some((request, original)) = token.and_then(|t| self.tokens.get(&t)) else {
            return Progress::Unknown;
        };
        if message
            .set_path(&["params", "progressToken"], original)
            .is_err()
        {
            return Progress::Unwritable;
        }
        Progress::Stream(self.stream_of(request))
    }

    /// Of `keys` (a port's requests in flight), the one its client knows as `original`.
    pub(crate) fn find_by_original<'k>(&self, keys: &'k [Key], original: &Key) -> Option<&'k Key> {
        keys.iter().find(|k| {
            self.pending
                .get(*k)
                .is_some_and(|r| key_of(&r.original_id) == *original)
        })
    }

    /// How many entries each table holds: requests, aliases, tokens.
    pub(crate) fn sizes(&self) -> (usize, usize, usize) {
        (self.pending.len(), self.aliases.len(), self.tokens.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::raw_string;
    use expect_test::expect;

    fn msg(text: &str) -> RawMessage {
        RawMessage::parse(text).unwrap()
    }

    fn pending(port: PortId, stream: &Key, original: &str, token: Option<Key>) -> PendingRequest {
        PendingRequest {
            port,
            stream: stream.clone(),
            original_id: raw_string(original),
            token,
            subscribes: None,
            method: "tools/call".to_owned(),
            modern_client: false,
            log_level: None,
            sent: None,
            held: None,
        }
    }

    #[test]
    fn ids_and_tokens_are_rewritten_and_the_clients_token_restored() {
        let mut ids = Ids::default();
        let mut requests = Requests::default();
        let mut m = msg(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"_meta":{"progressToken":7}}}"#,
        );
        let (key, token) = requests.rewrite(&mut ids, 2, &mut m);
        assert_eq!(key, r#""gw:2:1""#);
        assert_eq!(token.as_deref(), Some(r#""gwpt:1""#));
        expect![[r#"{"jsonrpc":"2.0","id":"gw:2:1","method":"tools/call","params":{"_meta":{"progressToken":"gwpt:1"}}}"#]].assert_eq(m.as_str());
        requests.insert(key.clone(), pending(2, &key, "a", token));
        let mut progress = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gwpt:1","progress":1}}"#,
        );
        assert_eq!(
            requests.restore_progress(&mut progress),
            Progress::Stream(key.clone())
        );
        assert!(progress.as_str().contains(r#""progressToken":7"#));
        assert_eq!(requests.original_id(&key).unwrap().get(), r#""a""#);
        assert!(requests.remove(&key).is_some());
        assert_eq!(requests.sizes(), (0, 0, 0));
        let mut late = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gwpt:1"}}"#,
        );
        assert_eq!(requests.restore_progress(&mut late), Progress::Unknown);
    }

    #[test]
    fn a_request_without_a_token_gets_none() {
        let mut ids = Ids::default();
        let mut requests = Requests::default();
        let mut m = msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        let (_, token) = requests.rewrite(&mut ids, 1, &mut m);
        assert_eq!(token, None);
        assert_eq!(requests.sizes(), (0, 0, 0));
    }

    #[test]
    fn a_moved_request_keeps_its_stream_and_token() {
        let mut ids = Ids::default();
        let mut requests = Requests::default();
        let mut m = msg(
            r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"_meta":{"progressToken":"t"}}}"#,
        );
        let (stream, token) = requests.rewrite(&mut ids, 1, &mut m);
        requests.insert(stream.clone(), pending(1, &stream, "c", token));
        let (retry, _, _) = ids.port_request(1);
        assert!(requests.move_to(&stream, &retry));
        assert!(
            !requests.move_to(&stream, &retry),
            "nothing left under the old id"
        );
        assert_eq!(requests.current(&stream), retry);
        assert_eq!(requests.stream_of(&retry), stream);
        assert_eq!(requests.original_id(&stream).unwrap().get(), r#""c""#);
        let mut progress = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gwpt:1"}}"#,
        );
        assert_eq!(
            requests.restore_progress(&mut progress),
            Progress::Stream(stream.clone())
        );
        assert_eq!(requests.sizes(), (1, 1, 1));
        requests.remove(&retry);
        requests.end_stream(&stream);
        assert_eq!(requests.sizes(), (0, 0, 0));
    }

    #[test]
    fn a_request_taken_over_keeps_its_upstream_token_under_the_new_clients_token_or_none() {
        let mut ids = Ids::default();
        let mut requests = Requests::default();
        let mut m = msg(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"first"}}}"#,
        );
        let (key, token) = requests.rewrite(&mut ids, 1, &mut m);
        requests.insert(key.clone(), pending(1, &key, "1", token));
        let progress = || {
            msg(
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"gwpt:1"}}"#,
            )
        };
        requests.retoken(&key, Some(raw_string("second")));
        let mut p = progress();
        assert_eq!(
            requests.restore_progress(&mut p),
            Progress::Stream(key.clone())
        );
        assert!(
            p.as_str().contains(r#""progressToken":"second""#),
            "{}",
            p.as_str()
        );
        requests.retoken(&key, None);
        assert_eq!(
            requests.restore_progress(&mut progress()),
            Progress::Unknown
        );
        assert_eq!(requests.sizes(), (1, 0, 0));
        assert!(requests.remove(&key).unwrap().token.is_none());
    }

    #[test]
    fn a_port_request_is_found_by_the_id_its_client_gave() {
        let mut requests = Requests::default();
        let keys = [r#""gw:1:1""#.to_owned(), r#""gw:1:2""#.to_owned()];
        requests.insert(keys[0].clone(), pending(1, &keys[0], "x", None));
        requests.insert(keys[1].clone(), pending(1, &keys[1], "y", None));
        assert_eq!(
            requests.find_by_original(&keys, &r#""y""#.to_owned()),
            Some(&keys[1])
        );
        assert_eq!(requests.find_by_original(&keys, &r#""z""#.to_owned()), None);
    }
}
