//! Tool arguments mirrored into headers (SEP-2243, 2026-07-28): a tool's `inputSchema` may
//! mark properties with `x-mcp-header`, and an HTTP client MUST then send each such argument
//! of a `tools/call` as `Mcp-Param-{Name}`, and MUST leave out of `tools/list` (and so never
//! call) a tool whose annotations break the rules (`basic/transports/streamable-http.mdx`,
//! "Custom Headers from Tool Parameters"; `server/tools.mdx`).
//!
//! The gateway is the HTTP client of its apps, for its own calls and for every client's, so
//! the link does it for all of them: it reads each `tools/list` answer that passes through it
//! on a modern POST, keeps the header plan of every valid tool, removes the invalid ones from
//! the answer (with a warning naming the tool and the reason), adds the headers to each
//! `tools/call`, and refuses a call to an excluded tool as an unknown one. Stdio apps and
//! legacy sessions are untouched (the specification lets other transports ignore the
//! annotation, and earlier revisions do not have it).
//!
//! The rules and the encoding are pure functions ([`plan_of`], [`param_headers`],
//! [`filter_listing`]); [`ToolHeaders`] keeps what one link learnt.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::header::{HeaderMap, HeaderName, HeaderValue};
use mcpapp_session::{Origin, RawMessage, RequestKey as Key};
use serde_json::Value;
use serde_json::value::RawValue;
use tracing::warn;

use super::headers::header_text;

/// The annotation's key in a property's schema.
const ANNOTATION: &str = "x-mcp-header";
/// The prefix of the headers it names.
const PARAM_PREFIX: &str = "mcp-param-";
/// How deep a schema is walked (a schema deeper than this is refused, not walked forever).
const MAX_DEPTH: usize = 64;

/// One annotated argument: its header's name part and its path in the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    pub(crate) name: String,
    pub(crate) path: Vec<String>,
}

/// Keywords whose value is one subschema (none of them statically reachable).
const SCHEMA_KEYWORDS: &[&str] = &[
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a list of subschemas.
const SCHEMA_LIST_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas (other than `properties`).
const SCHEMA_MAP_KEYWORDS: &[&str] = &[
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// The header plan of a tool, or why its annotations make it invalid.
pub(crate) fn plan_of(tool: &Value) -> Result<Vec<Param>, String> {
    let mut params = Vec::new();
    if let Some(schema) = tool.get("inputSchema") {
        walk(schema, Some(&[]), &mut params, 0)?;
    }
    let mut seen = HashSet::new();
    for param in &params {
        if !seen.insert(param.name.to_ascii_lowercase()) {
            return Err(format!(
                "x-mcp-header \"{}\" is used twice (header names are case-insensitive)",
                param.name
            ));
        }
    }
    Ok(params)
}

/// Walks one schema; `reachable` is its path from the root through `properties` only, or
/// `None` when it is not statically reachable.
fn walk(
    schema: &Value,
    reachable: Option<&[String]>,
    params: &mut Vec<Param>,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "the input schema is nested more than {MAX_DEPTH} deep"
        ));
    }
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    if let Some(annotation) = schema.get(ANNOTATION) {
        let Some(path) = reachable.filter(|p| !p.is_empty()) else {
            return Err(format!(
                "x-mcp-header must be on a property reached from the root through `properties` only ({annotation})"
            ));
        };
        let name = valid_name(annotation)?;
        primitive(schema.get("type"), name)?;
        params.push(Param {
            name: name.to_owned(),
            path: path.to_vec(),
        });
    }
    for (keyword, value) in schema {
        let keyword = keyword.as_str();
        if keyword == "properties" {
            if let Value::Object(properties) = value {
                for (name, sub) in properties {
                    let path = reachable.map(|p| {
                        let mut p = p.to_vec();
                        p.push(name.clone());
                        p
                    });
                    walk(sub, path.as_deref(), params, depth + 1)?;
                }
            }
        } else if SCHEMA_MAP_KEYWORDS.contains(&keyword) {
            if let Value::Object(map) = value {
                for sub in map.values() {
                    walk(sub, None, params, depth + 1)?;
                }
            }
        } else if SCHEMA_LIST_KEYWORDS.contains(&keyword) && value.is_array() {
            for sub in value.as_array().into_iter().flatten() {
                walk(sub, None, params, depth + 1)?;
            }
        } else if SCHEMA_KEYWORDS.contains(&keyword) {
            walk(value, None, params, depth + 1)?;
        }
    }
    Ok(())
}

/// The annotation's value, if it is a valid header name part: a non-empty HTTP token
/// (`1*tchar`, RFC 9110), so no spaces, colons, control or non-ASCII characters.
fn valid_name(annotation: &Value) -> Result<&str, String> {
    let Value::String(name) = annotation else {
        return Err(format!("x-mcp-header must be a string, not {annotation}"));
    };
    if name.is_empty() {
        return Err("x-mcp-header must not be empty".to_owned());
    }
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if let Some(bad) = name.chars().find(|c| !tchar(*c)) {
        return Err(format!(
            "x-mcp-header \"{}\" has {bad:?}, which a header name cannot hold",
            name.escape_debug()
        ));
    }
    Ok(name)
}

/// An annotated property must be a string, an integer or a boolean (not a number, object,
/// array or null).
fn primitive(kind: Option<&Value>, name: &str) -> Result<(), String> {
    let allowed = |t: &str| matches!(t, "string" | "integer" | "boolean");
    let ok = match kind {
        Some(Value::String(t)) => allowed(t),
        // ["string", "null"]: the value may be absent, which omits the header.
        Some(Value::Array(types)) => {
            types.iter().any(|t| t.as_str().is_some_and(allowed))
                && types
                    .iter()
                    .all(|t| t.as_str().is_some_and(|t| allowed(t) || t == "null"))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "x-mcp-header \"{name}\" is on a property of type {}, not a string, integer or boolean",
            kind.map_or_else(|| "(none)".to_owned(), Value::to_string)
        ))
    }
}

/// The `Mcp-Param-*` headers of a call with `arguments`: each annotated argument present
/// and not null, as text (integers in decimal, booleans as `true`/`false`), encoded as the
/// transport says (`header_text`).
pub(crate) fn param_headers(plan: &[Param], arguments: &Value) -> Vec<(HeaderName, HeaderValue)> {
    plan.iter()
        .filter_map(|param| {
            let value = param
                .path
                .iter()
                .try_fold(arguments, |value, key| value.get(key))?;
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Number(number) => number.to_string(),
                Value::Bool(flag) => flag.to_string(),
                _ => return None,
            };
            let name = HeaderName::from_bytes(
                format!("{PARAM_PREFIX}{}", param.name.to_ascii_lowercase()).as_bytes(),
            )
            .ok()?;
            let value = HeaderValue::from_str(&header_text(&text)).ok()?;
            Some((name, value))
        })
        .collect()
}

/// A listing's tools split into the valid ones (with their plans) and the excluded ones
/// (with the reason).
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) plans: Vec<(String, Vec<Param>)>,
    pub(crate) excluded: Vec<(String, String)>,
    /// The `tools` array without the excluded tools, when any was.
    pub(crate) kept: Option<Value>,
}

/// Sorts a `tools/list` result's tools.
pub(crate) fn filter_listing(tools: &Value) -> Listing {
    let mut listing = Listing::default();
    let Value::Array(tools) = tools else {
        return listing;
    };
    let mut kept = Vec::with_capacity(tools.len());
    for tool in tools {
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match plan_of(tool) {
            Ok(plan) => {
                listing.plans.push((name, plan));
                kept.push(tool.clone());
            }
            Err(reason) => listing.excluded.push((name, reason)),
        }
    }
    if !listing.excluded.is_empty() {
        listing.kept = Some(Value::Array(kept));
    }
    listing
}

/// What one link learnt from its app's listings.
#[derive(Debug, Default)]
pub(crate) struct ToolHeaders {
    state: Mutex<State>,
    /// How many listings are awaited (so that other messages pass without a lock).
    awaited: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    /// `tools/list` requests whose answer is awaited.
    listings: HashSet<Key>,
    /// The annotated arguments of each valid tool that has any.
    plans: HashMap<String, Vec<Param>>,
    /// Tools left out of the listings, with the reason.
    excluded: HashMap<String, String>,
}

impl ToolHeaders {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A modern POST of `message` is about to leave: notes a listing, adds a call's
    /// `Mcp-Param-*` headers, or refuses a call to an excluded tool with the error to answer.
    pub(crate) fn outgoing(
        &self,
        message: &RawMessage,
        request: Option<&Key>,
        headers: &mut HeaderMap,
    ) -> Result<(), RawMessage> {
        match message.method_str().as_deref() {
            Some("tools/list") => {
                if let Some(key) = request
                    && self.state().listings.insert(key.clone())
                {
                    self.awaited.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            }
            Some("tools/call") => {
                let Some(name) = message
                    .path(&["params", "name"])
                    .and_then(|n| serde_json::from_str::<String>(n.get()).ok())
                else {
                    return Ok(());
                };
                let state = self.state();
                if let Some(reason) = state.excluded.get(&name) {
                    return Err(RawMessage::error_response(
                        request.map(key_id).as_deref(),
                        -32602,
                        &format!("Unknown tool: {name} (left out of the app's tools: {reason})"),
                    ));
                }
                let Some(plan) = state.plans.get(&name) else {
                    return Ok(());
                };
                let arguments = message
                    .path(&["params", "arguments"])
                    .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
                    .unwrap_or(Value::Null);
                for (name, value) in param_headers(plan, &arguments) {
                    headers.insert(name, value);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A message arrived for `origin`: the answer to a listing loses its invalid tools.
    pub(crate) fn incoming(&self, origin: &Origin, mut message: RawMessage) -> RawMessage {
        if self.awaited.load(Ordering::SeqCst) == 0 {
            return message;
        }
        let Origin::Post(key) = origin else {
            return message;
        };
        if !message.is_response() {
            return message;
        }
        let mut state = self.state();
        if !state.listings.remove(key) {
            return message;
        }
        self.awaited.fetch_sub(1, Ordering::SeqCst);
        let Some(tools) = message
            .path(&["result", "tools"])
            .and_then(|t| serde_json::from_str::<Value>(t.get()).ok())
        else {
            return message;
        };
        let listing = filter_listing(&tools);
        for (name, plan) in listing.plans {
            state.excluded.remove(&name);
            if plan.is_empty() {
                state.plans.remove(&name);
            } else {
                state.plans.insert(name, plan);
            }
        }
        for (name, reason) in listing.excluded {
            // Once per tool and reason, not at every listing.
            if state.excluded.get(&name) != Some(&reason) {
                warn!(tool = %name, "left a tool out of the app's tools: {reason}");
            }
            state.plans.remove(&name);
            state.excluded.insert(name, reason);
        }
        drop(state);
        if let Some(kept) = listing.kept
            && let Ok(kept) = serde_json::value::to_raw_value(&kept)
        {
            let _ = message.set_path(&["result", "tools"], &kept);
        }
        message
    }
}

/// A request's id from its key (its raw JSON text).
fn key_id(key: &Key) -> Box<RawValue> {
    RawValue::from_string(key.clone()).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, properties: Value) -> Value {
        let mut tool = json!({"name": name, "inputSchema": {"type": "object"}});
        tool["inputSchema"]["properties"] = properties;
        tool
    }

    fn reason(properties: Value) -> String {
        plan_of(&tool("t", properties)).expect_err("invalid")
    }

    #[test]
    fn annotated_properties_reached_through_properties_make_the_plan() {
        let plan = plan_of(&tool(
            "t",
            json!({
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"},
                "target": {"type": "object", "properties": {
                    "zone": {"type": ["integer", "null"], "x-mcp-header": "Zone"}}},
                // A property named like the annotation is just a property.
                "x-mcp-header": {"type": "string"},
            }),
        ))
        .unwrap();
        assert_eq!(
            plan,
            [
                Param {
                    name: "Region".to_owned(),
                    path: vec!["region".to_owned()]
                },
                Param {
                    name: "Zone".to_owned(),
                    path: vec!["target".to_owned(), "zone".to_owned()]
                },
            ]
        );
        assert_eq!(plan_of(&json!({"name": "bare"})).unwrap(), []);
    }

    #[test]
    fn every_broken_rule_excludes_the_tool_with_its_reason() {
        let cases = [
            (
                json!({"v": {"type": "string", "x-mcp-header": ""}}),
                "must not be empty",
            ),
            (
                json!({"v": {"type": "object", "x-mcp-header": "Data"}}),
                "not a string, integer or boolean",
            ),
            (
                json!({"v": {"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"}}),
                "not a string",
            ),
            (
                json!({"v": {"type": "null", "x-mcp-header": "Nil"}}),
                "not a string",
            ),
            (
                json!({"v": {"type": "number", "x-mcp-header": "Score"}}),
                "not a string",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "Region"}, "b": {"type": "string", "x-mcp-header": "Region"}}),
                "used twice",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "MyField"}, "b": {"type": "string", "x-mcp-header": "myfield"}}),
                "used twice",
            ),
            (
                json!({"v": {"type": "string", "x-mcp-header": "My Region"}}),
                "' '",
            ),
            (
                json!({"v": {"type": "string", "x-mcp-header": "Region:Primary"}}),
                "':'",
            ),
            (
                json!({"v": {"type": "string", "x-mcp-header": "Région"}}),
                "'é'",
            ),
            (
                json!({"v": {"type": "string", "x-mcp-header": "Region\t1"}}),
                "'\\t'",
            ),
            (
                json!({"v": {"type": "string", "x-mcp-header": 7}}),
                "must be a string",
            ),
            (
                json!({"v": {"type": "array", "items": {"type": "string", "x-mcp-header": "Deep"}}}),
                "through `properties` only",
            ),
            (
                json!({"v": {"oneOf": [{"type": "string", "x-mcp-header": "Either"}]}}),
                "through `properties` only",
            ),
        ];
        for (properties, expected) in cases {
            let why = reason(properties.clone());
            assert!(why.contains(expected), "{properties}: {why}");
        }
        // Behind a $ref (in $defs) is not statically reachable either.
        let referenced = json!({"name": "r", "inputSchema": {"type": "object",
            "$defs": {"id": {"type": "string", "x-mcp-header": "Id"}},
            "properties": {"id": {"$ref": "#/$defs/id"}}}});
        assert!(plan_of(&referenced).is_err());
    }

    #[test]
    fn values_are_mirrored_as_text_and_encoded_when_not_plain() {
        let plan = plan_of(&tool(
            "t",
            json!({
                "region": {"type": "string", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
                "greeting": {"type": "string", "x-mcp-header": "Greeting"},
                "padded": {"type": "string", "x-mcp-header": "Padded"},
                "lines": {"type": "string", "x-mcp-header": "Lines"},
                "tab": {"type": "string", "x-mcp-header": "Tab"},
                "inner": {"type": "string", "x-mcp-header": "Inner"},
                "sentinel": {"type": "string", "x-mcp-header": "Sentinel"},
                "absent": {"type": "string", "x-mcp-header": "Absent"},
                "nothing": {"type": "string", "x-mcp-header": "Nothing"},
            }),
        ))
        .unwrap();
        let headers: HashMap<String, String> = param_headers(
            &plan,
            &json!({"region": "us-west1", "priority": -7, "verbose": false,
                    "greeting": "Hello, 世界", "padded": " padded ", "lines": "line1\r\nline2",
                    "tab": "\tindented", "inner": "us west 1", "sentinel": "=?base64?literal?=",
                    "nothing": null, "query": "not annotated"}),
        )
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
        let expected: HashMap<String, String> = [
            ("mcp-param-region", "us-west1"),
            ("mcp-param-priority", "-7"),
            ("mcp-param-verbose", "false"),
            // The specification's examples.
            ("mcp-param-greeting", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("mcp-param-padded", "=?base64?IHBhZGRlZCA=?="),
            ("mcp-param-lines", "=?base64?bGluZTENCmxpbmUy?="),
            ("mcp-param-tab", "=?base64?CWluZGVudGVk?="),
            ("mcp-param-inner", "us west 1"),
            ("mcp-param-sentinel", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(headers, expected);
    }

    fn raw(value: &Value) -> RawMessage {
        RawMessage::from_value(value).unwrap()
    }

    #[test]
    fn a_listing_loses_its_invalid_tools_and_calls_get_their_headers_or_are_refused() {
        let learnt = ToolHeaders::default();
        let key: Key = "\"gw:1:1\"".to_owned();
        let mut headers = HeaderMap::new();
        learnt
            .outgoing(
                &raw(&json!({"jsonrpc": "2.0", "id": "gw:1:1", "method": "tools/list"})),
                Some(&key),
                &mut headers,
            )
            .unwrap();
        let answer = raw(
            &json!({"jsonrpc": "2.0", "id": "gw:1:1", "result": {"tools": [
            tool("valid", json!({"region": {"type": "string", "x-mcp-header": "Region"}})),
            tool("broken", json!({"v": {"type": "number", "x-mcp-header": "Score"}})),
        ], "resultType": "complete"}}),
        );
        let answer = learnt.incoming(&Origin::Post(key.clone()), answer);
        let answer: Value = serde_json::from_str(answer.as_str()).unwrap();
        assert_eq!(answer["result"]["tools"].as_array().unwrap().len(), 1);
        assert_eq!(answer["result"]["tools"][0]["name"], "valid");
        assert_eq!(answer["result"]["resultType"], "complete");

        let call = |name: &str| {
            raw(
                &json!({"jsonrpc": "2.0", "id": "gw:1:2", "method": "tools/call",
                       "params": {"name": name, "arguments": {"region": "eu", "v": 1.5}}}),
            )
        };
        let key: Key = "\"gw:1:2\"".to_owned();
        let mut headers = HeaderMap::new();
        learnt
            .outgoing(&call("valid"), Some(&key), &mut headers)
            .unwrap();
        assert_eq!(headers["mcp-param-region"], "eu");
        let refused = learnt
            .outgoing(&call("broken"), Some(&key), &mut HeaderMap::new())
            .unwrap_err();
        let refused: Value = serde_json::from_str(refused.as_str()).unwrap();
        assert_eq!(refused["id"], "gw:1:2");
        assert_eq!(refused["error"]["code"], -32602);
        // Another answer passes untouched, without a listing awaited.
        let other = raw(&json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}));
        let text = other.as_str().to_owned();
        assert_eq!(
            learnt
                .incoming(&Origin::Post("3".to_owned()), other)
                .as_str(),
            text
        );
    }
}
