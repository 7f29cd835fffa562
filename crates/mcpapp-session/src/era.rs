//! The two eras of MCP and what is translated between them (see docs/protocol.md).
//!
//! 2025-11-25 and earlier ("legacy") open a session with `initialize`; 2026-07-28 ("modern")
//! has no handshake: every request carries its protocol version, the client's capabilities
//! and its identity in `params._meta`, `server/discover` describes the server, results carry
//! `resultType` (and cache hints on listings and reads), server-to-client requests become
//! input-required results (SEP-2322), and notifications arrive on `subscriptions/listen`
//! streams. These are the pure pieces: reading and writing the era's fields of a message, and
//! building one era's handshake answer from the other's.

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use mcpapp_manifest::Era;

use crate::raw::{RawMessage, raw_json, raw_string};

/// The first revision without `initialize`.
pub(crate) const MODERN: &str = "2026-07-28";
/// The protocol version of the era without `initialize` (2026-07-28).
pub const MODERN_PROTOCOL_VERSION: &str = MODERN;
/// Request `_meta` keys of the modern era.
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key naming the server.
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Notification `_meta` key tying it to a `subscriptions/listen` request.
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// Every version the gateway offers its clients, oldest first.
pub(crate) const OFFERED_VERSIONS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", MODERN];
/// Results that must carry cache hints in the modern era.
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

fn meta_string(message: &RawMessage, key: &str) -> Option<String> {
    message
        .path(&["params", "_meta", key])
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

/// The protocol version a request names in its `_meta`, if any.
pub(crate) fn request_version(message: &RawMessage) -> Option<String> {
    meta_string(message, META_PROTOCOL_VERSION)
}

/// The protocol version a request names in its `_meta`
/// (`io.modelcontextprotocol/protocolVersion`, as 2026-07-28 requests do), if any.
pub fn request_protocol_version(message: &RawMessage) -> Option<String> {
    request_version(message)
}

/// The client capabilities a modern request declares.
pub(crate) fn request_capabilities(message: &RawMessage) -> Option<Box<RawValue>> {
    message.get_path(&["params", "_meta", META_CLIENT_CAPABILITIES])
}

/// The log level a modern request asks for.
pub(crate) fn request_log_level(message: &RawMessage) -> Option<String> {
    meta_string(message, META_LOG_LEVEL)
}

/// Removes the modern era's request `_meta` keys: a legacy server may refuse a request that
/// names a version it does not speak, even inside its session.
pub(crate) fn strip_request_meta(message: &mut RawMessage) {
    for key in [
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
        META_CLIENT_INFO,
        META_LOG_LEVEL,
    ] {
        message.remove_path(&["params", "_meta", key]);
    }
}

/// Adds the modern era's request `_meta` for a legacy client: its own capabilities and
/// identity, from its `initialize`, and the log level it set.
pub(crate) fn inject_request_meta(
    message: &mut RawMessage,
    capabilities: Option<&RawValue>,
    client_info: Option<&RawValue>,
    log_level: Option<&str>,
) {
    let empty = raw_json("{}".to_owned());
    let entries: [(&str, Option<Box<RawValue>>); 4] = [
        (META_PROTOCOL_VERSION, Some(raw_string(MODERN))),
        (
            META_CLIENT_CAPABILITIES,
            Some(capabilities.map_or(empty, ToOwned::to_owned)),
        ),
        (META_CLIENT_INFO, client_info.map(ToOwned::to_owned)),
        (META_LOG_LEVEL, log_level.map(raw_string)),
    ];
    for (key, value) in entries {
        if let Some(value) = value {
            // A path through objects the client wrote; a non-object `params` is left alone
            // and the server answers it.
            let _ = message.set_path(&["params", "_meta", key], &value);
        }
    }
}

/// Gives a legacy server's result what a modern client expects: `resultType` and, for
/// listings, discovery and reads, cache hints that promise nothing (the gateway does not
/// know how long the app's answer holds). An error response has no result to complete.
pub(crate) fn complete_result(message: &mut RawMessage, method: &str) {
    if message.member_text("result").is_none() {
        return;
    }
    let mut set = |key: &str, value: Box<RawValue>| {
        if message.path(&["result", key]).is_none() {
            let _ = message.set_path(&["result", key], &value);
        }
    };
    set("resultType", raw_string("complete"));
    if CACHEABLE.contains(&method) {
        set("ttlMs", raw_json("0".to_owned()));
        set("cacheScope", raw_string("private"));
    }
}

fn to_raw(value: &Value) -> Box<RawValue> {
    raw_json(value.to_string())
}

fn object(raw: &RawValue) -> Map<String, Value> {
    serde_json::from_str(raw.get()).unwrap_or_default()
}

/// A modern `server/discover` result made from a legacy `InitializeResult`.
pub(crate) fn discover_from_initialize(initialize: &RawValue) -> Box<RawValue> {
    let init = object(initialize);
    let mut capabilities = init
        .get("capabilities")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // 2025-11-25 tasks and the modern tasks extension differ on the wire.
    capabilities.remove("tasks");
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": OFFERED_VERSIONS,
        "capabilities": capabilities,
        "ttlMs": 0,
        "cacheScope": "private",
    });
    if let Some(instructions) = init.get("instructions") {
        result["instructions"] = instructions.clone();
    }
    if let Some(info) = init.get("serverInfo") {
        result["_meta"] = json!({ META_SERVER_INFO: info });
    }
    to_raw(&result)
}

/// A modern `server/discover` result as the gateway gives it to its own clients: the app's,
/// with the versions the gateway offers.
pub(crate) fn discover_for_clients(discover: &RawValue) -> Box<RawValue> {
    let mut result = object(discover);
    result.insert("supportedVersions".to_owned(), json!(OFFERED_VERSIONS));
    result.insert("resultType".to_owned(), json!("complete"));
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities.remove("tasks");
    }
    to_raw(&Value::Object(result))
}

/// A legacy `InitializeResult` made from a modern `server/discover` result, for a client that
/// agreed on `version`; `fallback_name` names the server when the app did not.
pub(crate) fn initialize_from_discover(
    discover: &RawValue,
    version: &str,
    fallback_name: &str,
) -> Box<RawValue> {
    let discover = object(discover);
    let server_info = discover
        .get("_meta")
        .and_then(|m| m.get(META_SERVER_INFO))
        .or_else(|| discover.get("serverInfo"))
        .cloned()
        .unwrap_or_else(|| json!({ "name": fallback_name, "version": "0" }));
    let mut capabilities = discover
        .get("capabilities")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    capabilities.remove("tasks");
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info,
    });
    if let Some(instructions) = discover.get("instructions") {
        result["instructions"] = instructions.clone();
    }
    to_raw(&result)
}

/// Reads the answer to a `server/discover` at 2026-07-28 (the spec's rules for dual-era
/// clients): a result that lists 2026-07-28, or an unsupported-version error that does, is
/// modern; anything else (a result or error without it, method not found, a refusal over
/// HTTP, garbage) is legacy.
pub(crate) fn classify_probe(answer: &RawMessage) -> Era {
    let lists_modern = |path: &[&str]| {
        answer
            .path(path)
            .and_then(|v| serde_json::from_str::<Vec<String>>(v.get()).ok())
            .is_some_and(|versions| versions.iter().any(|v| v == MODERN))
    };
    if lists_modern(&["result", "supportedVersions"])
        || lists_modern(&["error", "data", "supported"])
    {
        Era::Modern
    } else {
        Era::Legacy
    }
}

/// The `server/discover` request of the era probe, as the gateway's own client.
pub(crate) fn probe_request(
    id: &RawValue,
    client_info: &Value,
    capabilities: &Value,
) -> RawMessage {
    let text = json!({
        "jsonrpc": "2.0",
        "id": serde_json::from_str::<Value>(id.get()).unwrap_or(Value::Null),
        "method": "server/discover",
        "params": { "_meta": {
            META_PROTOCOL_VERSION: MODERN,
            META_CLIENT_INFO: client_info,
            META_CLIENT_CAPABILITIES: capabilities,
        }},
    });
    RawMessage::from_value(&text)
        .unwrap_or_else(|_| RawMessage::notification("server/discover", None))
}

/// An input-required result asking a modern client for one input (what a legacy server
/// requested of it), under the opaque `state` its retry must echo.
pub(crate) fn input_required(
    key: &str,
    method: &str,
    params: Option<&RawValue>,
    state: &str,
) -> Box<RawValue> {
    let mut params = params.map(object).unwrap_or_default();
    // Modern input requests carry no `_meta` or `task`.
    params.remove("_meta");
    params.remove("task");
    let mut request = json!({ "method": method });
    if !params.is_empty() || method != "roots/list" {
        request["params"] = Value::Object(params);
    }
    to_raw(&json!({
        "resultType": "input_required",
        "inputRequests": { key: request },
        "requestState": state,
    }))
}

/// The server requests of a modern input-required result, in key order: `(key, method,
/// params)`.
pub(crate) fn input_requests(result: &RawValue) -> Vec<(String, String, Option<Value>)> {
    let result = object(result);
    result
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|requests| {
            requests
                .iter()
                .filter_map(|(key, request)| {
                    let method = request.get("method")?.as_str()?.to_owned();
                    Some((key.clone(), method, request.get("params").cloned()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a result is an input-required one.
pub(crate) fn is_input_required(result: &RawValue) -> bool {
    object(result).get("resultType").and_then(Value::as_str) == Some("input_required")
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn msg(text: &str) -> RawMessage {
        RawMessage::parse(text).unwrap()
    }

    #[test]
    fn request_meta_is_stripped_and_injected_keeping_the_rest() {
        let mut m = msg(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":3,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}"#,
        );
        assert_eq!(request_version(&m).as_deref(), Some(MODERN));
        strip_request_meta(&mut m);
        expect![[r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":3}}}"#]].assert_eq(m.as_str());
        let caps = raw_json(r#"{"elicitation":{}}"#.to_owned());
        inject_request_meta(&mut m, Some(&caps), None, Some("info"));
        assert_eq!(request_version(&m).as_deref(), Some(MODERN));
        assert_eq!(
            request_capabilities(&m).unwrap().get(),
            r#"{"elicitation":{}}"#
        );
        assert_eq!(request_log_level(&m).as_deref(), Some("info"));
    }

    #[test]
    fn legacy_results_get_a_result_type_and_cache_hints_where_due() {
        let mut list = msg(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
        complete_result(&mut list, "tools/list");
        expect![[r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}}"#]].assert_eq(list.as_str());
        let mut call =
            msg(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}"#);
        complete_result(&mut call, "tools/call");
        assert_eq!(
            call.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}"#
        );
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#;
        let mut refused = msg(error);
        complete_result(&mut refused, "tools/list");
        assert_eq!(refused.as_str(), error, "an error stays an error");
    }

    #[test]
    fn handshakes_translate_both_ways() {
        let init = raw_json(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"tasks":{}},"serverInfo":{"name":"app","version":"2"},"instructions":"hi"}"#.to_owned(),
        );
        let discover: Value = serde_json::from_str(discover_from_initialize(&init).get()).unwrap();
        assert_eq!(discover["supportedVersions"], json!(OFFERED_VERSIONS));
        assert_eq!(
            discover["capabilities"],
            json!({"tools": {"listChanged": true}})
        );
        assert_eq!(discover["_meta"][META_SERVER_INFO]["name"], "app");
        assert_eq!(discover["instructions"], "hi");
        assert_eq!(discover["cacheScope"], "private");
        let back: Value = serde_json::from_str(
            initialize_from_discover(&to_raw(&discover), "2025-06-18", "fallback").get(),
        )
        .unwrap();
        assert_eq!(back["protocolVersion"], "2025-06-18");
        assert_eq!(back["serverInfo"]["name"], "app");
        assert_eq!(
            back["capabilities"],
            json!({"tools": {"listChanged": true}})
        );
        let anonymous =
            initialize_from_discover(&raw_json("{}".to_owned()), "2025-11-25", "app-id");
        assert!(
            anonymous
                .get()
                .contains(r#""serverInfo":{"name":"app-id","version":"0"}"#)
        );
    }

    #[test]
    fn probe_answers_are_classified_as_the_spec_says() {
        let modern =
            msg(r#"{"jsonrpc":"2.0","id":"p","result":{"supportedVersions":["2026-07-28"]}}"#);
        assert_eq!(classify_probe(&modern), Era::Modern);
        let modern_error = msg(
            r#"{"jsonrpc":"2.0","id":"p","error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25","2026-07-28"]}}}"#,
        );
        assert_eq!(classify_probe(&modern_error), Era::Modern);
        for legacy in [
            r#"{"jsonrpc":"2.0","id":"p","error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25"]}}}"#,
            r#"{"jsonrpc":"2.0","id":"p","error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":"p","error":{"code":-32603,"message":"the app answered HTTP 400"}}"#,
            r#"{"jsonrpc":"2.0","id":"p","result":{}}"#,
        ] {
            assert_eq!(classify_probe(&msg(legacy)), Era::Legacy, "{legacy}");
        }
    }

    #[test]
    fn input_requests_are_built_and_read() {
        let params = raw_json(
            r#"{"mode":"form","message":"m","_meta":{"x":1},"requestedSchema":{}}"#.to_owned(),
        );
        let result = input_required("input", "elicitation/create", Some(&params), "s1");
        assert!(is_input_required(&result));
        let parsed = input_requests(&result);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].0, "input");
        assert_eq!(parsed[0].1, "elicitation/create");
        assert_eq!(
            parsed[0].2,
            Some(json!({"mode": "form", "message": "m", "requestedSchema": {}}))
        );
        let roots = input_required("input", "roots/list", None, "s2");
        assert!(!roots.get().contains("params"));
    }
}
