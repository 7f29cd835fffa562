//! Byte-faithful JSON-RPC messages.
//!
//! A [`RawMessage`] keeps the exact text it was parsed from. Routing needs only a few members
//! (`id`, `method`, a progress token), so the envelope is parsed one level deep with every
//! member kept as raw JSON; editing one member (a request id, a progress token, `_meta`)
//! re-serialises only the containers on the path to it, and everything else keeps its bytes:
//! unknown fields, number spelling, escapes and key order survive a trip through the gateway.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use indexmap::IndexMap;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// One level of a JSON object, every value kept as written (for editing nested objects).
type RawObject = IndexMap<String, Box<RawValue>>;

/// Envelope members JSON-RPC 2.0 allows; anything else is refused before it goes upstream,
/// because some servers drop such messages silently (the caller would then wait forever).
const ENVELOPE_MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// Why a text is not a usable JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RawError {
    /// The text is not a JSON object (this includes JSON-RPC batches, which MCP 2025-06-18
    /// and later do not allow).
    #[error("not a JSON-RPC message: {0}")]
    NotAnObject(String),
    /// The object is not JSON-RPC 2.0 or has members JSON-RPC does not define.
    #[error("invalid JSON-RPC envelope: {0}")]
    InvalidEnvelope(String),
}

/// What a message is, by its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// Has `method` and `id`.
    Request,
    /// Has `method` and no `id`.
    Notification,
    /// Has `id` and `result`.
    Response,
    /// Has `id` (possibly null) and `error`.
    Error,
}

/// A member's key: where it is in the text when written without escapes (nearly always),
/// else decoded.
#[derive(Debug, Clone)]
enum MemberKey {
    At(Range<usize>),
    Decoded(Box<str>),
}

/// One top-level member: its key and where its value is in the text.
///
/// The members are positions in the message's own text rather than copies, so parsing a
/// message allocates one vector however many members it has, and an edit splices the text.
#[derive(Debug, Clone)]
struct Member {
    key: MemberKey,
    value: Range<usize>,
}

/// A JSON-RPC message with its original text.
#[derive(Clone)]
pub struct RawMessage {
    text: String,
    /// In the order written; a key written twice is there twice (lookups take the last, as
    /// JSON parsers do).
    members: Vec<Member>,
    /// Worked out once, at parse and after each edit.
    kind: Option<MessageKind>,
}

impl fmt::Debug for RawMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Messages can carry secrets in arguments; debug output shows only the routing keys.
        f.debug_struct("RawMessage")
            .field("kind", &self.kind())
            .field("method", &self.method())
            .field("id", &self.id().map(RawValue::get))
            .field("bytes", &self.text.len())
            .finish()
    }
}

impl RawMessage {
    /// Parses one message. Members outside the JSON-RPC envelope are accepted here (they are
    /// passed through from servers); use [`RawMessage::check_envelope`] on messages from
    /// clients.
    ///
    /// # Errors
    /// [`RawError`] when the text is not a JSON object, or is not JSON-RPC 2.0.
    pub fn parse(text: impl Into<String>) -> Result<Self, RawError> {
        let text = text.into();
        let members = members_of(&text).map_err(|e| RawError::NotAnObject(e.to_string()))?;
        let mut message = Self {
            text,
            members,
            kind: None,
        };
        match message.slice("jsonrpc") {
            Some("\"2.0\"") => {}
            // The same string written with escapes.
            Some(escaped)
                if escaped.contains('\\')
                    && serde_json::from_str::<String>(escaped).is_ok_and(|v| v == "2.0") => {}
            Some(other) => {
                return Err(RawError::InvalidEnvelope(format!(
                    "`jsonrpc` must be \"2.0\", not {other}"
                )));
            }
            None => {
                return Err(RawError::InvalidEnvelope(
                    "the `jsonrpc` member is missing".to_owned(),
                ));
            }
        }
        message.kind = message.kind_of();
        if message.kind.is_none() {
            return Err(RawError::InvalidEnvelope(
                "a message needs `method`, or `id` with `result` or `error`".to_owned(),
            ));
        }
        Ok(message)
    }

    /// Refuses members JSON-RPC does not define at the top level.
    ///
    /// # Errors
    /// [`RawError::InvalidEnvelope`] naming the first unknown member.
    pub fn check_envelope(&self) -> Result<(), RawError> {
        match self
            .members
            .iter()
            .map(|m| self.key(m))
            .find(|k| !ENVELOPE_MEMBERS.contains(k))
        {
            Some(extra) => Err(RawError::InvalidEnvelope(format!(
                "unknown top-level member `{extra}`"
            ))),
            None => Ok(()),
        }
    }

    /// Builds a message from a JSON value (for messages the gateway writes itself).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, RawError> {
        Self::parse(value.to_string())
    }

    /// A success response to `id`.
    pub fn response(id: &RawValue, result: &RawValue) -> Self {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
            id.get(),
            result.get()
        );
        Self::parse_trusted(text)
    }

    /// An error response to `id` (which may be JSON `null`).
    pub fn error_response(id: Option<&RawValue>, code: i64, message: &str) -> Self {
        let id = id.map_or("null", RawValue::get);
        let message = serde_json::Value::String(message.to_owned());
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#
        );
        Self::parse_trusted(text)
    }

    /// A notification with raw params.
    pub fn notification(method: &str, params: Option<&RawValue>) -> Self {
        let method = serde_json::Value::String(method.to_owned());
        let text = match params {
            Some(params) => format!(
                r#"{{"jsonrpc":"2.0","method":{method},"params":{}}}"#,
                params.get()
            ),
            None => format!(r#"{{"jsonrpc":"2.0","method":{method}}}"#),
        };
        Self::parse_trusted(text)
    }

    /// Parses text this module built itself, which is well-formed by construction.
    fn parse_trusted(text: String) -> Self {
        let members = members_of(&text).unwrap_or_default();
        let mut message = Self {
            text,
            members,
            kind: None,
        };
        message.kind = message.kind_of();
        message
    }

    fn key<'a>(&'a self, member: &'a Member) -> &'a str {
        match &member.key {
            MemberKey::At(range) => &self.text[range.clone()],
            MemberKey::Decoded(key) => key,
        }
    }

    /// The position of the last member named `name`.
    fn position(&self, name: &str) -> Option<usize> {
        self.members.iter().rposition(|m| self.key(m) == name)
    }

    /// The text of a top-level member's value.
    fn slice(&self, name: &str) -> Option<&str> {
        self.position(name)
            .map(|i| &self.text[self.members[i].value.clone()])
    }

    fn kind_of(&self) -> Option<MessageKind> {
        let has = |k: &str| self.position(k).is_some();
        match (has("method"), has("id"), has("result"), has("error")) {
            (true, true, _, _) => Some(MessageKind::Request),
            (true, false, _, _) => Some(MessageKind::Notification),
            (false, true, true, _) => Some(MessageKind::Response),
            (false, _, false, true) => Some(MessageKind::Error),
            _ => None,
        }
    }

    /// What the message is.
    pub fn kind(&self) -> MessageKind {
        // Parsing guarantees one of the kinds.
        self.kind.unwrap_or(MessageKind::Notification)
    }

    /// Whether the message is a response or an error response.
    pub fn is_response(&self) -> bool {
        matches!(self.kind(), MessageKind::Response | MessageKind::Error)
    }

    /// The message text, exactly as parsed or as last edited.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Consumes the message, returning its text.
    pub fn into_string(self) -> String {
        self.text
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<String> {
        self.method_str().map(Cow::into_owned)
    }

    /// The method without a copy when it is written without escapes (as clients write it).
    pub fn method_str(&self) -> Option<Cow<'_, str>> {
        let raw = self.slice("method")?;
        match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            Some(plain) if !plain.contains('\\') => Some(Cow::Borrowed(plain)),
            _ => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
        }
    }

    /// The id as raw JSON (`7`, `"abc"`, `null`), for requests and responses.
    pub fn id(&self) -> Option<&RawValue> {
        self.member("id")
    }

    /// A top-level member as raw JSON.
    pub fn member(&self, name: &str) -> Option<&RawValue> {
        // The slice is a value serde_json has already checked, so this only re-scans it.
        self.slice(name)
            .and_then(|text| serde_json::from_str::<&RawValue>(text).ok())
    }

    /// A top-level member's text as written, without checking it again (it was checked when
    /// the message was parsed).
    pub(crate) fn member_text(&self, name: &str) -> Option<&str> {
        self.slice(name)
    }

    /// Replaces the id.
    pub fn set_id(&mut self, id: &RawValue) {
        self.put("id", id.get());
    }

    /// Reads a value at a path of object keys below the top level, e.g.
    /// `["params", "_meta", "progressToken"]`, without copying it.
    pub fn path(&self, path: &[&str]) -> Option<&RawValue> {
        let (first, rest) = path.split_first()?;
        let mut current = self.slice(first)?;
        for key in rest {
            current = find(current, key)?;
        }
        serde_json::from_str::<&RawValue>(current).ok()
    }

    /// Reads a value at a path of object keys below the top level, e.g.
    /// `["params", "_meta", "progressToken"]`.
    pub fn get_path(&self, path: &[&str]) -> Option<Box<RawValue>> {
        self.path(path).map(ToOwned::to_owned)
    }

    /// Sets a value at a path of object keys, creating objects on the way. Only the objects
    /// on the path are re-serialised; their other members keep their bytes.
    ///
    /// # Errors
    /// [`RawError::InvalidEnvelope`] when something on the path exists but is not an object.
    pub fn set_path(&mut self, path: &[&str], value: &RawValue) -> Result<(), RawError> {
        let Some((first, rest)) = path.split_first() else {
            return Ok(());
        };
        if rest.is_empty() {
            self.put(first, value.get());
            return Ok(());
        }
        // Where the value is there already (a progress token being replaced, say), only its
        // own bytes change.
        if let Some(range) = self.locate(path) {
            self.splice(range, value.get());
            return Ok(());
        }
        let updated = match self.member(first) {
            Some(existing) => set_in(existing, rest, value)?,
            None => set_in(&empty_object(), rest, value)?,
        };
        self.put(first, updated.get());
        Ok(())
    }

    /// Removes the value at a path of object keys; returns whether there was one. Only the
    /// objects on the path are re-serialised.
    pub fn remove_path(&mut self, path: &[&str]) -> bool {
        match path {
            [] => false,
            [key] => self.remove(key),
            [first, rest @ ..] => {
                let Some(updated) = self.member(first).and_then(|c| remove_in(c, rest)) else {
                    return false;
                };
                self.put(first, updated.get());
                true
            }
        }
    }

    /// Where the value at `path` (two keys or more) is in the text, when every object on the
    /// way has it and has each of its keys once.
    fn locate(&self, path: &[&str]) -> Option<Range<usize>> {
        let (first, rest) = path.split_first()?;
        if rest.is_empty()
            || self
                .members
                .iter()
                .filter(|m| self.key(m) == *first)
                .count()
                != 1
        {
            return None;
        }
        let mut current = self.slice(first)?;
        for key in rest {
            match find_all(current, key)? {
                (Some(value), 1) => current = value,
                _ => return None,
            }
        }
        let start = offset(self.text.as_ptr() as usize, current);
        Some(start..start + current.len())
    }

    /// Whether some key is written twice at the top level.
    fn has_duplicates(&self) -> bool {
        self.members
            .iter()
            .enumerate()
            .any(|(i, m)| self.members[..i].iter().any(|o| self.key(o) == self.key(m)))
    }

    /// Sets a top-level member to `value` (valid JSON): in place when it is there, else at
    /// the end; only the value's bytes change.
    fn put(&mut self, name: &str, value: &str) {
        if self.has_duplicates() {
            self.rebuild(|object| {
                object.insert(name.to_owned(), raw_json(value.to_owned()));
            });
            return;
        }
        match self.position(name) {
            Some(i) => {
                let range = self.members[i].value.clone();
                self.splice(range.clone(), value);
                self.members[i].value = range.start..range.start + value.len();
            }
            None => {
                let at = match self.members.last() {
                    Some(last) => last.value.end,
                    // Just after the opening brace.
                    None => self.text.find('{').map_or(0, |i| i + 1),
                };
                let key = serde_json::Value::String(name.to_owned()).to_string();
                let comma = if self.members.is_empty() { "" } else { "," };
                let inserted = format!("{comma}{key}:{value}");
                self.splice(at..at, &inserted);
                let key_start = at + comma.len() + 1;
                let key_range = key_start..key_start + key.len() - 2;
                let value_start = at + comma.len() + key.len() + 1;
                let member_key = if self.text[key_range.clone()] == *name {
                    MemberKey::At(key_range)
                } else {
                    MemberKey::Decoded(name.into())
                };
                self.members.push(Member {
                    key: member_key,
                    value: value_start..value_start + value.len(),
                });
            }
        }
        self.kind = self.kind_of();
    }

    /// Removes a top-level member with the separator before it (or after it, for the first).
    fn remove(&mut self, name: &str) -> bool {
        let Some(i) = self.position(name) else {
            return false;
        };
        if self.has_duplicates() {
            self.rebuild(|object| {
                object.shift_remove(name);
            });
            return true;
        }
        let end = self.members[i].value.end;
        let range = if i > 0 {
            self.members[i - 1].value.end..end
        } else {
            let open = self.text.find('{').map_or(0, |p| p + 1);
            match self.members.get(1) {
                // Up to the next member's key: skip the comma after this value.
                Some(_) => {
                    let after = &self.text[end..];
                    let comma = after.find(',').map_or(0, |c| c + 1);
                    let ws = after[comma..].len() - after[comma..].trim_start().len();
                    open..end + comma + ws
                }
                None => open..end,
            }
        };
        self.splice(range, "");
        self.members.remove(i);
        self.kind = self.kind_of();
        true
    }

    /// Replaces `range` of the text and moves the positions after it.
    fn splice(&mut self, range: Range<usize>, with: &str) {
        let (start, end) = (range.start, range.end);
        self.text.replace_range(range, with);
        // Only what lies after the range moves: the edited member's own positions are set by
        // the caller, and nothing else starts or ends inside it.
        let shift = |at: &mut usize| {
            if *at > end {
                *at = *at - (end - start) + with.len();
            }
        };
        for member in &mut self.members {
            if let MemberKey::At(key) = &mut member.key {
                shift(&mut key.start);
                shift(&mut key.end);
            }
            shift(&mut member.value.start);
            shift(&mut member.value.end);
        }
    }

    /// The edit of a message with a key written twice: the members as a JSON parser sees
    /// them (the last value, in the first one's place), edited and written out again.
    fn rebuild(&mut self, edit: impl FnOnce(&mut RawObject)) {
        let mut object: RawObject = serde_json::from_str(&self.text).unwrap_or_default();
        edit(&mut object);
        // Serialising a map of raw values cannot fail.
        let text = serde_json::to_string(&object).unwrap_or_default();
        *self = Self::parse_trusted(text);
    }
}

/// The top-level members of an object, as positions in `text`.
fn members_of(text: &str) -> Result<Vec<Member>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let members = (&mut deserializer).deserialize_map(Members {
        base: text.as_ptr() as usize,
    })?;
    // What follows the object may only be whitespace.
    deserializer.end()?;
    Ok(members)
}

/// The text of the value of `key` in the object `container`, without copying (the last
/// one, if written twice); `None` when it is not an object or has no such key.
fn find<'a>(container: &'a str, key: &str) -> Option<&'a str> {
    find_all(container, key)?.0
}

/// The text of the last value of `key` in the object `container` and how many times the key
/// is written there; `None` when it is not an object.
fn find_all<'a>(container: &'a str, key: &str) -> Option<(Option<&'a str>, usize)> {
    let mut deserializer = serde_json::Deserializer::from_str(container);
    let (found, times) = Find { key }.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some((found.map(RawValue::get), times))
}

/// Where a borrowed slice of the text starts.
fn offset(base: usize, part: &str) -> usize {
    part.as_ptr() as usize - base
}

/// A key as serde_json hands it over: borrowed from the text unless it had escapes.
struct KeyText<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for KeyText<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(KeyText(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KeyText(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(KeyText(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Collects an object's members as positions (`base` is the text's address).
struct Members {
    base: usize,
}

impl<'de> Visitor<'de> for Members {
    type Value = Vec<Member>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As serde's own maps say it, so errors read as before.
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(6));
        while let Some(KeyText(key)) = map.next_key::<KeyText<'de>>()? {
            let value: &'de RawValue = map.next_value()?;
            let key = match key {
                Cow::Borrowed(k) => {
                    let start = offset(self.base, k);
                    MemberKey::At(start..start + k.len())
                }
                Cow::Owned(k) => MemberKey::Decoded(k.into()),
            };
            let start = offset(self.base, value.get());
            members.push(Member {
                key,
                value: start..start + value.get().len(),
            });
        }
        Ok(members)
    }
}

/// Finds one key's value in an object, skipping the others without copying them.
struct Find<'k> {
    key: &'k str,
}

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = (Option<&'de RawValue>, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Find<'_> {
    type Value = (Option<&'de RawValue>, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        let mut times = 0;
        while let Some(KeyText(key)) = map.next_key::<KeyText<'de>>()? {
            let value: &'de RawValue = map.next_value()?;
            if key == self.key {
                found = Some(value);
                times += 1;
            }
        }
        Ok((found, times))
    }
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| raw_null())
}

fn raw_null() -> Box<RawValue> {
    // `null` is valid JSON; this cannot fail.
    RawValue::from_string("null".to_owned()).unwrap_or_default()
}

fn set_in(
    container: &RawValue,
    path: &[&str],
    value: &RawValue,
) -> Result<Box<RawValue>, RawError> {
    let mut object: RawObject = serde_json::from_str(container.get())
        .map_err(|_| RawError::InvalidEnvelope(format!("`{}` is not an object", path.join("."))))?;
    let Some((key, rest)) = path.split_first() else {
        return Ok(container.to_owned());
    };
    let updated = if rest.is_empty() {
        value.to_owned()
    } else {
        match object.get(*key) {
            Some(inner) => set_in(inner, rest, value)?,
            None => set_in(&empty_object(), rest, value)?,
        }
    };
    object.insert((*key).to_owned(), updated);
    let text =
        serde_json::to_string(&object).map_err(|e| RawError::InvalidEnvelope(e.to_string()))?;
    RawValue::from_string(text).map_err(|e| RawError::InvalidEnvelope(e.to_string()))
}

/// The container with the value at `path` removed, or `None` when there was none.
fn remove_in(container: &RawValue, path: &[&str]) -> Option<Box<RawValue>> {
    let mut object: RawObject = serde_json::from_str(container.get()).ok()?;
    let (key, rest) = path.split_first()?;
    if rest.is_empty() {
        object.shift_remove(*key)?;
    } else {
        let updated = remove_in(object.get(*key)?, rest)?;
        object.insert((*key).to_owned(), updated);
    }
    RawValue::from_string(serde_json::to_string(&object).ok()?).ok()
}

/// Makes a raw JSON string value.
pub fn raw_string(s: &str) -> Box<RawValue> {
    // A serialised string is valid JSON.
    serde_json::value::to_raw_value(s).unwrap_or_else(|_| raw_null())
}

/// Makes a raw JSON value from text the caller knows to be valid JSON, or `null`.
pub(crate) fn raw_json(text: String) -> Box<RawValue> {
    RawValue::from_string(text).unwrap_or_else(|_| raw_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn paths_are_removed_keeping_everything_else() {
        let mut m = RawMessage::parse(
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1.50,"_meta":{"k":1,"io.x/v":"2"}}}"#,
        )
        .unwrap();
        assert!(m.remove_path(&["params", "_meta", "io.x/v"]));
        assert_eq!(
            m.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1.50,"_meta":{"k":1}}}"#
        );
        assert!(!m.remove_path(&["params", "_meta", "io.x/v"]));
        assert!(!m.remove_path(&["params", "nothing", "here"]));
        assert!(m.remove_path(&["params"]));
        assert_eq!(m.as_str(), r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#);
    }

    #[test]
    fn editing_one_member_keeps_every_other_byte() {
        let text = r#"{"jsonrpc":"2.0","id":"same","method":"tools/call","params":{"name":"echo","arguments":{"n":1.50,"e":1e3,"s":"\u00e9"},"x-unknown":true,"_meta":{"progressToken":"tokA","keep":[1, 2]}}}"#;
        let mut m = RawMessage::parse(text).unwrap();
        assert_eq!(m.as_str(), text);
        assert_eq!(m.kind(), MessageKind::Request);
        assert_eq!(m.method().as_deref(), Some("tools/call"));
        assert_eq!(m.id().unwrap().get(), r#""same""#);
        m.set_id(&raw_string("gw:1:7"));
        m.set_path(&["params", "_meta", "progressToken"], &raw_string("gwpt:3"))
            .unwrap();
        expect![[r#"{"jsonrpc":"2.0","id":"gw:1:7","method":"tools/call","params":{"name":"echo","arguments":{"n":1.50,"e":1e3,"s":"\u00e9"},"x-unknown":true,"_meta":{"progressToken":"gwpt:3","keep":[1, 2]}}}"#]].assert_eq(m.as_str());
        assert_eq!(
            m.get_path(&["params", "arguments", "n"]).unwrap().get(),
            "1.50"
        );
    }

    #[test]
    fn edits_splice_the_text_keeping_its_spacing_and_escaped_keys() {
        let text = "{ \"jsonrpc\" : \"2.0\",\n \"id\" : 7 , \"method\":\"x\", \"p\\u0061rams\": {\"a\": 1} }";
        let mut m = RawMessage::parse(text).unwrap();
        assert_eq!(m.kind(), MessageKind::Request);
        assert_eq!(m.get_path(&["params", "a"]).unwrap().get(), "1");
        m.set_id(&raw_string("gw:1:1"));
        assert_eq!(
            m.as_str(),
            "{ \"jsonrpc\" : \"2.0\",\n \"id\" : \"gw:1:1\" , \"method\":\"x\", \"p\\u0061rams\": {\"a\": 1} }"
        );
        m.set_path(&["extra"], &raw_json("[1]".into())).unwrap();
        assert!(m.as_str().ends_with("{\"a\": 1},\"extra\":[1] }"));
        assert_eq!(m.member("extra").unwrap().get(), "[1]");
        assert!(m.remove_path(&["jsonrpc"]));
        assert!(m.remove_path(&["params"]));
        assert!(m.remove_path(&["extra"]));
        assert_eq!(m.as_str(), "{\"id\" : \"gw:1:1\" , \"method\":\"x\" }");
        assert!(m.remove_path(&["method"]));
        assert!(m.remove_path(&["id"]));
        assert_eq!(m.as_str(), "{ }");
        m.set_id(&raw_string("z"));
        assert_eq!(m.as_str(), "{\"id\":\"z\" }");
        assert_eq!(m.id().unwrap().get(), r#""z""#);
    }

    #[test]
    fn a_key_written_twice_reads_as_its_last_value_and_edits_leave_one() {
        let mut m = RawMessage::parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","id":2}"#).unwrap();
        assert_eq!(m.id().unwrap().get(), "2");
        m.set_id(&raw_string("gw"));
        assert_eq!(m.as_str(), r#"{"jsonrpc":"2.0","id":"gw","method":"x"}"#);
        assert_eq!(m.id().unwrap().get(), r#""gw""#);
    }

    #[test]
    fn what_is_not_an_object_is_refused_with_the_parsers_words() {
        let err = RawMessage::parse("[1]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "not a JSON-RPC message: invalid type: sequence, expected a map at line 1 column 0"
        );
        assert!(RawMessage::parse(r#"{"jsonrpc":"2.0","method":"x"} x"#).is_err());
        assert!(RawMessage::parse(r#"{"jsonrpc":"2.0","method":"x"}  "#).is_ok());
    }

    #[test]
    fn a_nested_value_that_is_there_is_replaced_in_place() {
        let text = r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{ "a" : 1.50, "_meta": {"progressToken": 7 , "k":[1, 2]}},"z":0}"#;
        let mut m = RawMessage::parse(text).unwrap();
        m.set_path(&["params", "_meta", "progressToken"], &raw_string("gwpt:1"))
            .unwrap();
        expect![[r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{ "a" : 1.50, "_meta": {"progressToken": "gwpt:1" , "k":[1, 2]}},"z":0}"#]].assert_eq(m.as_str());
        assert_eq!(m.member("z").unwrap().get(), "0");
        m.set_id(&raw_string("gw:1:1"));
        assert_eq!(m.path(&["params", "_meta", "k"]).unwrap().get(), "[1, 2]");
        // Written twice, the object is rewritten as a parser reads it (the last one wins).
        let mut twice = RawMessage::parse(
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"progressToken":1,"progressToken":2}}}"#,
        )
        .unwrap();
        twice
            .set_path(&["params", "_meta", "progressToken"], &raw_string("t"))
            .unwrap();
        assert_eq!(
            twice.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"progressToken":"t"}}}"#
        );
    }

    #[test]
    fn set_path_creates_missing_objects() {
        let mut m = RawMessage::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#).unwrap();
        m.set_path(&["params", "_meta", "sessionId"], &raw_string("abc"))
            .unwrap();
        assert_eq!(
            m.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"sessionId":"abc"}}}"#
        );
        let mut bad =
            RawMessage::parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#).unwrap();
        assert!(
            bad.set_path(&["params", "_meta"], &raw_string("x"))
                .is_err()
        );
    }

    #[test]
    fn kinds_and_envelope_checks() {
        let kind = |t: &str| RawMessage::parse(t).map(|m| m.kind());
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":"n"}"#),
            Ok(MessageKind::Notification)
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(MessageKind::Response)
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#),
            Ok(MessageKind::Error)
        );
        assert!(RawMessage::parse("[1]").is_err());
        assert!(RawMessage::parse(r#"{"id":1,"method":"x"}"#).is_err());
        assert!(RawMessage::parse(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#).is_err());
        assert!(RawMessage::parse(r#"{"jsonrpc":"2\u002e0","id":1,"method":"x"}"#).is_ok());
        assert!(RawMessage::parse(r#"{"jsonrpc":"2\u002e1","id":1,"method":"x"}"#).is_err());
        assert!(RawMessage::parse(r#"{"jsonrpc":"2.0","id":1}"#).is_err());
        let extra = RawMessage::parse(r#"{"jsonrpc":"2.0","method":"x","x-top":1}"#).unwrap();
        assert!(extra.check_envelope().is_err());
    }

    #[test]
    fn built_messages_are_valid() {
        let err = RawMessage::error_response(Some(&raw_string("a")), -32601, "no \"such\" method");
        assert_eq!(
            err.as_str(),
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no \"such\" method"}}"#
        );
        assert_eq!(err.kind(), MessageKind::Error);
        let n = RawMessage::notification(
            "notifications/cancelled",
            Some(&raw_json(r#"{"requestId":3}"#.into())),
        );
        assert_eq!(n.method().as_deref(), Some("notifications/cancelled"));
    }
}
