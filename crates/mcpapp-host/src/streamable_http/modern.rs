//! What a 2026-07-28 client's POST must carry: no `initialize` and no session. Each request
//! states its protocol version, its client's capabilities and identity in `params._meta`, and
//! the transport's headers repeat what routing needs (SEP-2243); the gateway checks them as an
//! intermediary that reads the body must, on `/apps/mcp/{appId}` and `/mcp` alike.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use mcpapp_session::{MODERN_PROTOCOL_VERSION, MessageKind, RawMessage, request_protocol_version};
use serde_json::json;

use super::wire::{PROTOCOL_HEADER, SESSION_HEADER, header_text, rpc_error};

/// The method header of SEP-2243.
const METHOD_HEADER: &str = "mcp-method";
/// The name header of SEP-2243 (the tool, prompt or resource a request is about).
const NAME_HEADER: &str = "mcp-name";

/// Whether a POST speaks the modern era: its header or its `_meta` names 2026-07-28 or later.
pub(crate) fn is_modern(headers: &HeaderMap, message: &RawMessage) -> bool {
    let modern = |v: &str| v >= MODERN_PROTOCOL_VERSION;
    header_text(headers, &PROTOCOL_HEADER).is_some_and(modern)
        || request_protocol_version(message).is_some_and(|v| modern(&v))
}

/// A modern client has no GET stream and no session to delete.
pub(crate) fn refuse_get_or_delete(headers: &HeaderMap) -> Option<Response> {
    let modern = header_text(headers, &PROTOCOL_HEADER)
        .is_some_and(|v| v >= MODERN_PROTOCOL_VERSION)
        && headers.get(SESSION_HEADER).is_none();
    modern.then(|| {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            [(axum::http::header::ALLOW, "POST")],
            "a 2026-07-28 client has no event stream and no session: send each request as a POST",
        )
            .into_response()
    })
}

/// The HTTP status of a JSON-RPC error for a modern client (the 2026-07-28 transport's
/// mapping: unknown methods are 404, header, capability and version errors 400).
pub(crate) fn status_of(message: &RawMessage) -> StatusCode {
    let code = message
        .path(&["error", "code"])
        .and_then(|c| c.get().parse::<i64>().ok());
    match code {
        Some(-32601) => StatusCode::NOT_FOUND,
        Some(-32022..=-32020) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// Decodes a SEP-2243 header value (`=?base64?…?=` or plain).
fn decoded(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// Methods the 2026-07-28 revision removed (its changelog, items 2, 4 and 5): a request of
/// that era naming one gets what a server that does not implement a method answers, 404 with
/// -32601, never a legacy answer a dual-era client could take for support.
const REMOVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The checks a 2026-07-28 server makes of a request's `_meta` and headers, in the order the
/// transport gives them: the required `_meta` keys (-32602), the version header against
/// `_meta` (-32020: only a request whose header and body agree can be judged on its version),
/// the version (-32022), the method and name headers (-32020), then the method itself (a
/// removed one is -32601).
pub(crate) fn check(headers: &HeaderMap, message: &RawMessage) -> Result<(), Response> {
    let id = message.id();
    let version = request_protocol_version(message);
    let capabilities = message.path(&[
        "params",
        "_meta",
        "io.modelcontextprotocol/clientCapabilities",
    ]);
    if message.kind() == MessageKind::Request && (version.is_none() || capabilities.is_none()) {
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32602,
            "request _meta is missing or has malformed required fields: io.modelcontextprotocol/protocolVersion, io.modelcontextprotocol/clientCapabilities",
        ));
    }
    let Some(version) = version else {
        return Ok(());
    };
    let mismatch = |what: String| Err(rpc_error(StatusCode::BAD_REQUEST, id, -32020, &what));
    match header_text(headers, &PROTOCOL_HEADER) {
        None => {
            return mismatch(
                "request _meta protocolVersion requires the MCP-Protocol-Version header".to_owned(),
            );
        }
        Some(header) if header != version => {
            return mismatch(format!(
                "MCP-Protocol-Version header ({header}) does not match request _meta protocolVersion ({version})"
            ));
        }
        Some(_) => {}
    }
    if version != MODERN_PROTOCOL_VERSION {
        let body = json!({"jsonrpc": "2.0", "id": id.map(|i| serde_json::from_str::<serde_json::Value>(i.get()).unwrap_or_default()),
            "error": {"code": -32022, "message": "Unsupported protocol version",
                "data": {"requested": version, "supported": mcpapp_session::PORT_PROTOCOL_VERSIONS.iter().copied().chain([MODERN_PROTOCOL_VERSION]).collect::<Vec<_>>()}}});
        return Err((
            StatusCode::BAD_REQUEST,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response());
    }
    let method = message.method().unwrap_or_default();
    let method_header = headers.get(METHOD_HEADER).and_then(|v| v.to_str().ok());
    match method_header {
        None if message.kind() == MessageKind::Request => {
            return mismatch("missing required Mcp-Method header".to_owned());
        }
        Some(header) if header != method => {
            return mismatch(format!(
                "Mcp-Method header `{header}` does not match body method `{method}`"
            ));
        }
        _ => {}
    }
    let field = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(field) = field {
        let body = message
            .path(&["params", field])
            .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
            .unwrap_or_default();
        match headers
            .get(NAME_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(decoded)
        {
            None => return mismatch(format!("missing required Mcp-Name header for `{method}`")),
            Some(Some(name)) if name == body => {}
            Some(_) => {
                return mismatch(format!(
                    "Mcp-Name header does not match body value `{body}`"
                ));
            }
        }
    }
    if message.kind() == MessageKind::Request && REMOVED_METHODS.contains(&method.as_str()) {
        return Err(rpc_error(
            StatusCode::NOT_FOUND,
            id,
            -32601,
            &format!(
                "Method not found: {method} is not a method of protocol version {MODERN_PROTOCOL_VERSION}"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn request(method: &str, version: &str, params: &str) -> RawMessage {
        RawMessage::parse(format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{{{params}"_meta":{{"io.modelcontextprotocol/protocolVersion":"{version}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        ))
        .unwrap()
    }

    /// The status and JSON-RPC error code of a refusal.
    fn refusal(result: Result<(), Response>) -> (u16, i64) {
        let response = result.expect_err("refused");
        let status = response.status().as_u16();
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), 1 << 20))
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        (status, body["error"]["code"].as_i64().unwrap())
    }

    #[test]
    fn a_header_that_contradicts_the_body_is_a_mismatch_before_the_version_is_judged() {
        let discover = request("server/discover", "v999.0.0", "");
        let modern = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "server/discover"),
        ]);
        assert_eq!(refusal(check(&modern, &discover)), (400, -32020));
        let missing = headers(&[("mcp-method", "server/discover")]);
        assert_eq!(refusal(check(&missing, &discover)), (400, -32020));
        // Header and body agree on a version the gateway does not serve.
        let agreed = headers(&[
            ("mcp-protocol-version", "v999.0.0"),
            ("mcp-method", "server/discover"),
        ]);
        assert_eq!(refusal(check(&agreed, &discover)), (400, -32022));
    }

    #[test]
    fn missing_meta_keys_are_invalid_params_and_method_and_name_headers_must_match() {
        let bare = RawMessage::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        let modern = headers(&[("mcp-protocol-version", "2026-07-28")]);
        assert_eq!(refusal(check(&modern, &bare)), (400, -32602));
        let list = request("tools/list", "2026-07-28", "");
        assert_eq!(refusal(check(&modern, &list)), (400, -32020));
        let wrong = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ]);
        assert_eq!(refusal(check(&wrong, &list)), (400, -32020));
        let call = request("tools/call", "2026-07-28", r#""name":"café","#);
        let named = |name: &str| {
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", name),
            ])
        };
        // base64("café")
        assert!(check(&named("=?base64?Y2Fmw6k=?="), &call).is_ok());
        assert_eq!(refusal(check(&named("cafe"), &call)), (400, -32020));
    }

    #[test]
    fn removed_methods_are_not_found_in_the_modern_era() {
        for method in REMOVED_METHODS {
            let message = request(method, "2026-07-28", "");
            let modern = headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", method),
            ]);
            assert_eq!(refusal(check(&modern, &message)), (404, -32601), "{method}");
        }
        let listen = request("subscriptions/listen", "2026-07-28", "");
        let modern = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "subscriptions/listen"),
        ]);
        assert!(check(&modern, &listen).is_ok());
    }
}
