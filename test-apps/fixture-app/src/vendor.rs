//! The vendor fields the fixture adds to its raw `tools/list` result, so tests can check that a
//! proxy passes unknown fields through.
//!
//! rmcp's typed `Tool` and `ListToolsResult` cannot carry unknown fields, so the fields are added
//! where the result leaves the process: the stdio transport wrapper swaps the typed result for
//! its JSON (a `CustomResult`) and the HTTP middleware rewrites the response stream, one whole
//! event at a time.

use axum::body::Bytes;
use serde_json::{Value, json};

/// Adds `"x-vendor": {"fixture": true}` to every tool and `"x-fixture-page": 1` to the result.
/// Values that are not a `tools/list` result are left alone; returns whether anything changed.
pub(crate) fn add_vendor_fields(result: &mut Value) -> bool {
    let Some(object) = result.as_object_mut() else {
        return false;
    };
    let Some(Value::Array(tools)) = object.get_mut("tools") else {
        return false;
    };
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        tool.insert("x-vendor".into(), json!({"fixture": true}));
    }
    object.insert("x-fixture-page".into(), json!(1));
    true
}

/// Rewrites one line of an SSE stream: a `data:` line holding a JSON-RPC response with a
/// `tools/list` result gets the vendor fields; every other line is returned unchanged.
pub(crate) fn rewrite_sse_line(line: &[u8]) -> Vec<u8> {
    let Some(payload) = line.strip_prefix(b"data:") else {
        return line.to_vec();
    };
    let Ok(mut message) = serde_json::from_slice::<Value>(payload) else {
        return line.to_vec();
    };
    if !message.get_mut("result").is_some_and(add_vendor_fields) {
        return line.to_vec();
    }
    let mut out = b"data: ".to_vec();
    out.extend(message.to_string().into_bytes());
    out.push(b'\n');
    out
}

/// Rewrites one whole SSE event line by line with [`rewrite_sse_line`].
pub(crate) fn rewrite_event(event: &[u8]) -> Bytes {
    let rewritten: Vec<u8> = event
        .split_inclusive(|b| *b == b'\n')
        .flat_map(rewrite_sse_line)
        .collect();
    Bytes::from(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_only_tools_list_results() {
        let line = br#"data: {"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo"}]}}
"#;
        let out: Value =
            serde_json::from_slice(rewrite_sse_line(line).strip_prefix(b"data: ").unwrap())
                .unwrap();
        assert_eq!(out["result"]["x-fixture-page"], 1);
        assert_eq!(out["result"]["tools"][0]["x-vendor"]["fixture"], true);
        let other = b"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n";
        assert_eq!(rewrite_sse_line(other), other.to_vec());
        assert_eq!(rewrite_sse_line(b"id: 0\n"), b"id: 0\n".to_vec());
    }
}
