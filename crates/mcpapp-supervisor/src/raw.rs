//! Byte-faithful JSON-RPC messages.
//!
//! A [`RawMessage`] keeps the exact text it was parsed from. Routing needs only a few members
//! (`id`, `method`, a progress token), so the envelope is parsed one level deep with every
//! member kept as raw JSON; editing one member (a request id, a progress token, `_meta`)
//! re-serialises only the containers on the path to it, and everything else keeps its bytes:
//! unknown fields, number spelling, escapes and key order survive a trip through the gateway.

use std::fmt;

use indexmap::IndexMap;
use serde_json::value::RawValue;

/// One level of a JSON object, every value kept as written.
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

/// A JSON-RPC message with its original text.
#[derive(Clone)]
pub struct RawMessage {
    text: String,
    members: RawObject,
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
        let members: RawObject =
            serde_json::from_str(&text).map_err(|e| RawError::NotAnObject(e.to_string()))?;
        match members.get("jsonrpc").map(|v| v.get()) {
            Some("\"2.0\"") => {}
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
        let message = Self { text, members };
        if message.kind_opt().is_none() {
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
            .keys()
            .find(|k| !ENVELOPE_MEMBERS.contains(&k.as_str()))
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
        let members = serde_json::from_str(&text).unwrap_or_default();
        Self { text, members }
    }

    fn kind_opt(&self) -> Option<MessageKind> {
        let has = |k: &str| self.members.contains_key(k);
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
        self.kind_opt().unwrap_or(MessageKind::Notification)
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
        self.members
            .get("method")
            .and_then(|m| serde_json::from_str::<String>(m.get()).ok())
    }

    /// The id as raw JSON (`7`, `"abc"`, `null`), for requests and responses.
    pub fn id(&self) -> Option<&RawValue> {
        self.members.get("id").map(AsRef::as_ref)
    }

    /// A top-level member as raw JSON.
    pub fn member(&self, name: &str) -> Option<&RawValue> {
        self.members.get(name).map(AsRef::as_ref)
    }

    /// Replaces the id.
    pub fn set_id(&mut self, id: &RawValue) {
        self.members.insert("id".to_owned(), id.to_owned());
        self.render();
    }

    /// Reads a value at a path of object keys below the top level, e.g.
    /// `["params", "_meta", "progressToken"]`.
    pub fn get_path(&self, path: &[&str]) -> Option<Box<RawValue>> {
        let (first, rest) = path.split_first()?;
        let mut current: Box<RawValue> = self.members.get(*first)?.clone();
        for key in rest {
            let object: RawObject = serde_json::from_str(current.get()).ok()?;
            current = object.get(*key)?.clone();
        }
        Some(current)
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
        let updated = match self.members.get(*first) {
            Some(existing) if !rest.is_empty() => set_in(existing, rest, value)?,
            None if !rest.is_empty() => set_in(&empty_object(), rest, value)?,
            _ => value.to_owned(),
        };
        self.members.insert((*first).to_owned(), updated);
        self.render();
        Ok(())
    }

    /// Removes the value at a path of object keys; returns whether there was one. Only the
    /// objects on the path are re-serialised.
    pub fn remove_path(&mut self, path: &[&str]) -> bool {
        match path {
            [] => false,
            [key] => {
                let removed = self.members.shift_remove(*key).is_some();
                if removed {
                    self.render();
                }
                removed
            }
            [first, rest @ ..] => {
                let Some(updated) = self.members.get(*first).and_then(|c| remove_in(c, rest))
                else {
                    return false;
                };
                self.members.insert((*first).to_owned(), updated);
                self.render();
                true
            }
        }
    }

    fn render(&mut self) {
        // Serialising a map of raw values cannot fail.
        self.text = serde_json::to_string(&self.members).unwrap_or_default();
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
        assert_eq!(
            m.as_str(),
            r#"{"jsonrpc":"2.0","id":"gw:1:7","method":"tools/call","params":{"name":"echo","arguments":{"n":1.50,"e":1e3,"s":"\u00e9"},"x-unknown":true,"_meta":{"progressToken":"gwpt:3","keep":[1, 2]}}}"#
        );
        assert_eq!(
            m.get_path(&["params", "arguments", "n"]).unwrap().get(),
            "1.50"
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
