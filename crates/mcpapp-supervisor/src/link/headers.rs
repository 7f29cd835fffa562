//! The headers of the HTTP link's requests: the URL's credentials turned into an
//! `Authorization` header (and out of the URI), and the headers a 2026-07-28 POST carries
//! (SEP-2243; a call's `Mcp-Param-*` headers come from `tool_headers.rs`). Pure functions of the spec and the message, tested on their own.

use http::Uri;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use mcpapp_session::RawMessage;

use super::http::{ConnectError, HttpSpec};

/// The session id the server issues at `initialize` (2025 era), sent on every later request.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version agreed on, sent on every request after the handshake.
pub(super) const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// The spec's URL as a request URI. Credentials in it become a basic `Authorization` header
/// (unless the manifest sets one), as reqwest made them, and leave the URI; a fragment is
/// never sent.
pub(super) fn request_uri(spec: &mut HttpSpec) -> Result<Uri, ConnectError> {
    use base64::Engine;
    let mut url = spec.url.clone();
    url.set_fragment(None);
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8_lossy()
            .into_owned()
    };
    let username = decode(url.username());
    let password = url.password().map(decode);
    if (!username.is_empty() || password.is_some()) && !spec.headers.contains_key(AUTHORIZATION) {
        let credentials = format!("{username}:{}", password.unwrap_or_default());
        let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
        let mut value =
            HeaderValue::from_str(&format!("Basic {encoded}")).map_err(|_| ConnectError::Url)?;
        value.set_sensitive(true);
        spec.headers.insert(AUTHORIZATION, value);
    }
    url.set_username("").map_err(|()| ConnectError::Url)?;
    url.set_password(None).map_err(|()| ConnectError::Url)?;
    url.as_str().parse().map_err(|_| ConnectError::Url)
}

/// The headers of a 2026-07-28 POST (SEP-2243): the version, the method and, for a call,
/// prompt or read, its name or URI (encoded when it is not plain visible ASCII).
pub(super) fn modern_headers(base: &HeaderMap, message: &RawMessage, version: &str) -> HeaderMap {
    let mut headers = base.clone();
    if let Ok(value) = HeaderValue::from_str(version) {
        headers.insert(HeaderName::from_static(PROTOCOL_HEADER), value);
    }
    let method = message.method().unwrap_or_default();
    if let Ok(value) = HeaderValue::from_str(&method) {
        headers.insert(HeaderName::from_static("mcp-method"), value);
    }
    let name_field = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(field) = name_field
        && let Some(name) = message
            .path(&["params", field])
            .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
        && let Ok(value) = HeaderValue::from_str(&header_text(&name))
    {
        headers.insert(HeaderName::from_static("mcp-name"), value);
    }
    headers
}

/// A header value as SEP-2243 writes it: plain visible ASCII as is, anything else (and text
/// that could be mistaken for the encoding) as `=?base64?…?=`.
pub(super) fn header_text(text: &str) -> String {
    use base64::Engine;
    let plain = !text.is_empty()
        && text.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.starts_with("=?");
    if plain {
        text.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str, headers: &[(&'static str, &str)]) -> HttpSpec {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        HttpSpec {
            url: url::Url::parse(url).unwrap(),
            headers: map,
            auth: None,
        }
    }

    #[test]
    fn credentials_in_the_url_become_a_sensitive_basic_header_and_leave_the_uri() {
        let mut with = spec("https://ann:p%40ss@example.test:8443/mcp?x=1#frag", &[]);
        let uri = request_uri(&mut with).unwrap();
        assert_eq!(uri.to_string(), "https://example.test:8443/mcp?x=1");
        let auth = &with.headers[AUTHORIZATION];
        // base64("ann:p@ss")
        assert_eq!(auth, "Basic YW5uOnBAc3M=");
        assert!(auth.is_sensitive());
    }

    fn message(text: &str) -> RawMessage {
        RawMessage::parse(text).unwrap()
    }

    #[test]
    fn plain_text_goes_as_is_and_anything_else_in_base64() {
        assert_eq!(header_text("get_weather"), "get_weather");
        assert_eq!(header_text("ui://app/view.html"), "ui://app/view.html");
        // base64("café"), base64(" x"), base64("=?x")
        assert_eq!(header_text("café"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(header_text(" x"), "=?base64?IHg=?=");
        assert_eq!(header_text("=?x"), "=?base64?PT94?=");
        assert_eq!(header_text(""), "=?base64??=");
    }

    #[test]
    fn a_modern_post_names_its_version_method_and_target() {
        let base = spec("http://127.0.0.1:1/mcp", &[("x-team", "blue")]).headers;
        let call = message(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"météo","arguments":{}}}"#,
        );
        let headers = modern_headers(&base, &call, "2026-07-28");
        assert_eq!(headers["x-team"], "blue");
        assert_eq!(headers[PROTOCOL_HEADER], "2026-07-28");
        assert_eq!(headers["mcp-method"], "tools/call");
        assert_eq!(headers["mcp-name"], header_text("météo").as_str());
        let read = message(
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"ui://w/app.html"}}"#,
        );
        let headers = modern_headers(&base, &read, "2026-07-28");
        assert_eq!(headers["mcp-name"], "ui://w/app.html");
        let list = message(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
        let headers = modern_headers(&base, &list, "2026-07-28");
        assert_eq!(headers["mcp-method"], "tools/list");
        assert!(!headers.contains_key("mcp-name"));
    }

    #[test]
    fn the_manifests_own_authorization_header_wins_over_url_credentials() {
        let mut with = spec(
            "http://ann:secret@127.0.0.1:1/mcp",
            &[("authorization", "Bearer t")],
        );
        let uri = request_uri(&mut with).unwrap();
        assert_eq!(uri.to_string(), "http://127.0.0.1:1/mcp");
        assert_eq!(with.headers[AUTHORIZATION], "Bearer t");
        let mut without = spec("http://127.0.0.1:1/mcp", &[]);
        request_uri(&mut without).unwrap();
        assert!(!without.headers.contains_key(AUTHORIZATION));
    }
}
