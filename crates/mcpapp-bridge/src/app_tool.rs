//! [`McpAppTool`]: one tool of one supervised MCP App, seen by the agent as a [`Tool`]. It
//! checks the model's arguments, calls the app through its [`AppHandle`] with the chat
//! session id in `_meta`, and turns the MCP result into text a model can read.

use std::sync::Arc;

use futures::future::BoxFuture;
use mcpapp_manifest::json_kind;
use mcpapp_supervisor::mcp::{CallToolResult, ContentBlock, ResourceContents};
use mcpapp_supervisor::{AppHandle, CallError, Descriptors, ToolDescriptor};
use serde_json::{Map, Value};
use tracing::Instrument as _;

use crate::tool::{Tool, ToolContext, ToolOutput};

/// Separates the pieces of a result's text.
const PIECE_SEPARATOR: &str = "\n\n";

/// One tool of one MCP App, registered for the agent under the app's prefix.
///
/// - **Name**: the app's tool-name prefix followed by the remote name, as written
///   (`grocery.` + `get_stores` = `grocery.get_stores`); the registry's
///   [`ModelNames`](crate::ModelNames) turns it into a name model providers accept.
/// - **Description**: the tool's own, or one naming the remote tool and the app when the app
///   gave none. **Input schema** and **meta** (`_meta`, UI metadata included): the tool's, as
///   listed.
/// - **Calls**: blank arguments mean `{}`; arguments that are not a JSON object are answered
///   with an `Error: invalid JSON arguments …` text without calling the app. The call goes
///   through the app's current connection, bounded by its request timeout, with
///   `_meta.sessionId` set to the caller's session id. When the caller's token fires the call
///   is abandoned (the app receives `notifications/cancelled`) and the result says so.
/// - **Results**: non-empty text blocks and embedded text resources, in order; images, audio
///   and binary resources as a placeholder with their MIME type and decoded size (never
///   base64); resource links as `[resource link: URI]`; then `structuredContent` as compact
///   JSON, unless the tool renders in a UI (its structured content is for the view) or a text
///   block already holds the same JSON. Pieces are joined with a blank line. A result with
///   `isError: true` and every failure to call become texts starting with `Error: `, with
///   [`ToolOutput::is_error`] set. [`ToolOutput::structured`] always carries the structured
///   content, and for a tool with a UI [`ToolOutput::raw`] carries the whole `CallToolResult`
///   (for its view, never for the model).
///
/// Extension point: [`AppToolSync`](crate::AppToolSync) registers these for every app; a host
/// that picks app tools itself builds them with [`McpAppTool::new`].
#[derive(Clone)]
pub struct McpAppTool {
    inner: Arc<Inner>,
}

struct Inner {
    app: AppHandle,
    name: String,
    remote_name: String,
    description: String,
    /// The app's listing the tool is in, shared with the supervisor rather than copied (its
    /// input schema is read from there): with many apps, schemas are much of the gateway's
    /// memory.
    listing: Arc<Descriptors>,
    index: usize,
    meta: Option<Value>,
    ui_resource_uri: Option<String>,
}

impl std::fmt::Debug for McpAppTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpAppTool")
            .field("name", &self.inner.name)
            .field("app", &self.inner.app.id())
            .field("remote_name", &self.inner.remote_name)
            .finish_non_exhaustive()
    }
}

impl McpAppTool {
    /// The tool `descriptor` of `app`, registered as `prefix` + its remote name.
    pub fn new(app: AppHandle, descriptor: &ToolDescriptor, prefix: &str) -> Self {
        let listing = Arc::new(Descriptors {
            tools: vec![descriptor.clone()],
            ..Descriptors::default()
        });
        Self::in_listing(app, &listing, 0, descriptor, prefix)
    }

    /// `descriptor`, tool `index` of the app's `listing`, registered as `prefix` + its remote
    /// name; the listing is shared, not copied.
    pub(crate) fn in_listing(
        app: AppHandle,
        listing: &Arc<Descriptors>,
        index: usize,
        descriptor: &ToolDescriptor,
        prefix: &str,
    ) -> Self {
        let description = match descriptor.description.as_deref().map(str::trim) {
            Some(text) if !text.is_empty() => text.to_owned(),
            _ => synthetic_description(&app, &descriptor.name),
        };
        Self {
            inner: Arc::new(Inner {
                name: format!("{prefix}{}", descriptor.name),
                remote_name: descriptor.name.clone(),
                description,
                listing: Arc::clone(listing),
                index,
                meta: descriptor.meta.clone().map(Value::Object),
                ui_resource_uri: descriptor.ui_resource_uri.clone(),
                app,
            }),
        }
    }

    /// The app's id.
    pub fn app_id(&self) -> &str {
        self.inner.app.id()
    }

    /// The tool's name on the app (without the prefix).
    pub fn remote_name(&self) -> &str {
        &self.inner.remote_name
    }

    /// The UI resource the tool's results render in, if any. Such a tool's structured content
    /// is left out of the model's text.
    pub fn ui_resource_uri(&self) -> Option<&str> {
        self.inner.ui_resource_uri.as_deref()
    }
}

impl Tool for McpAppTool {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn input_schema(&self) -> &Value {
        // The index was checked when the tool was made, and a listing never changes.
        static NONE: Value = Value::Null;
        self.inner
            .listing
            .tools
            .get(self.inner.index)
            .map_or(&NONE, |tool| &tool.input_schema)
    }

    fn meta(&self) -> Option<&Value> {
        self.inner.meta.as_ref()
    }

    fn invoke(&self, arguments_json: String, ctx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let inner = Arc::clone(&self.inner);
        // Info, so that traces show the tool call between the chat turn and the app's request.
        let span = tracing::info_span!("mcpapp_tool", tool = %inner.name, app = %inner.app.id());
        Box::pin(async move { inner.call(&arguments_json, ctx).await }.instrument(span))
    }
}

impl Inner {
    async fn call(&self, arguments_json: &str, ctx: ToolContext) -> ToolOutput {
        let arguments = match parse_arguments(arguments_json) {
            Ok(arguments) => arguments,
            Err(problem) => {
                return ToolOutput::error(format!(
                    "invalid JSON arguments for tool '{}': {problem}",
                    self.name
                ));
            }
        };
        let meta = ctx.session_id.map(|session_id| {
            let mut meta = Map::new();
            meta.insert("sessionId".to_owned(), Value::String(session_id));
            meta
        });
        let call = self.app.call_tool(&self.remote_name, Some(arguments), meta);
        // Losing the race drops the call future, which cancels the request upstream.
        let result = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => {
                tracing::debug!("the caller cancelled the call");
                return ToolOutput::error(format!(
                    "MCP App tool '{}' from '{}' was cancelled before it answered",
                    self.name,
                    self.app.id()
                ));
            }
            result = call => result,
        };
        match result {
            Ok(result) => {
                let has_ui = self.ui_resource_uri.is_some();
                let output = convert_result(&result, has_ui, &self.name);
                // A view gets the app's result as it is; the model only the text above.
                match serde_json::to_value(&result) {
                    Ok(raw) if has_ui => output.with_raw(raw),
                    _ => output,
                }
            }
            Err(error) => {
                tracing::debug!(%error, "the call failed");
                ToolOutput::error(self.failure(&error))
            }
        }
    }

    /// The text for a call that produced no result.
    fn failure(&self, error: &CallError) -> String {
        let (name, app) = (&self.name, self.app.id());
        match error {
            CallError::Timeout { seconds, .. } => format!(
                "MCP App tool '{name}' from '{app}' timed out after {seconds} s; the request was cancelled"
            ),
            CallError::NotRunning { state, .. } => format!(
                "MCP App tool '{name}' from '{app}' failed: the app is not running (it is {state})"
            ),
            CallError::Remote { code, message, .. } => format!(
                "MCP App tool '{name}' from '{app}' failed: the app returned error {code}: {message}"
            ),
            CallError::Transport { message, .. } => {
                format!("MCP App tool '{name}' from '{app}' failed: {message}")
            }
            other => format!("MCP App tool '{name}' from '{app}' failed: {other}"),
        }
    }
}

fn synthetic_description(app: &AppHandle, remote_name: &str) -> String {
    let id = app.id();
    match app.spec().map(|spec| spec.display_name) {
        Some(display) if display != id => {
            format!("Calls the tool '{remote_name}' of the MCP App '{display}' ({id}).")
        }
        _ => format!("Calls the tool '{remote_name}' of the MCP App '{id}'."),
    }
}

/// Reads the model's arguments: blank means `{}`; anything but a JSON object is refused with
/// the reason (for a syntax error, serde_json's message with line and column).
fn parse_arguments(json: &str) -> Result<Map<String, Value>, String> {
    if json.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, not {}",
            json_kind(&other)
        )),
        Err(error) => Err(error.to_string()),
    }
}

/// Turns an MCP tool result into the model's text (see [`McpAppTool`] for the rules).
pub(crate) fn convert_result(
    result: &CallToolResult,
    suppress_structured: bool,
    tool_name: &str,
) -> ToolOutput {
    let mut pieces: Vec<String> = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => {
                if !text.text.is_empty() {
                    pieces.push(text.text.clone());
                }
            }
            ContentBlock::Image(image) => {
                pieces.push(placeholder("image", &image.mime_type, &image.data));
            }
            ContentBlock::Audio(audio) => {
                pieces.push(placeholder("audio", &audio.mime_type, &audio.data));
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { text, .. } => {
                    if !text.is_empty() {
                        pieces.push(text.clone());
                    }
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => {
                    let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
                    pieces.push(format!(
                        "[resource: {uri}, {}, {} bytes]",
                        mime_or_unknown(mime),
                        base64_decoded_len(blob)
                    ));
                }
                other => pieces.push(format!("[resource: {}]", content_type(other))),
            },
            ContentBlock::ResourceLink(link) => {
                pieces.push(format!("[resource link: {}]", link.uri));
            }
            other => pieces.push(format!("[{} content]", content_type(other))),
        }
    }

    if let Some(structured) = result.structured_content.as_ref().filter(|v| !v.is_null())
        && !suppress_structured
        && !pieces.iter().any(|piece| holds_json(piece, structured))
    {
        pieces.push(structured.to_string());
    }

    let text = pieces.join(PIECE_SEPARATOR);
    let mut output = if result.is_error == Some(true) {
        if text.is_empty() {
            ToolOutput::error(format!(
                "MCP App tool '{tool_name}' reported an error without details"
            ))
        } else {
            ToolOutput::error(text)
        }
    } else {
        ToolOutput::text(text)
    };
    output.structured.clone_from(&result.structured_content);
    output
}

/// `[KIND: MIME, N bytes]`, N being the decoded size of the base64 `data`.
fn placeholder(kind: &str, mime: &str, data: &str) -> String {
    format!(
        "[{kind}: {}, {} bytes]",
        mime_or_unknown(mime),
        base64_decoded_len(data)
    )
}

fn mime_or_unknown(mime: &str) -> &str {
    if mime.trim().is_empty() {
        "unknown type"
    } else {
        mime
    }
}

/// The number of bytes base64 `data` decodes to, counted without decoding: every 4 symbols
/// (padding and whitespace left out) carry 3 bytes. Exact for valid base64, padded or not.
fn base64_decoded_len(data: &str) -> usize {
    let symbols = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    symbols * 3 / 4
}

/// The wire `type` of a content item the conversion does not know, for its placeholder.
fn content_type<T: serde::Serialize>(item: &T) -> String {
    serde_json::to_value(item)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Whether a text piece is the same JSON value as `structured` (many servers send their
/// structured content again as a text block; repeating it would only cost the model tokens).
fn holds_json(piece: &str, structured: &Value) -> bool {
    let trimmed = piece.trim_start();
    (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<Value>(piece).is_ok_and(|v| v == *structured)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn convert(result: Value, suppress: bool) -> ToolOutput {
        let result: CallToolResult = serde_json::from_value(result).unwrap();
        convert_result(&result, suppress, "app.tool")
    }

    #[test]
    fn arguments_must_be_an_object() {
        assert_eq!(parse_arguments("  ").unwrap(), Map::new());
        assert_eq!(parse_arguments(r#"{"a":1,"a":2}"#).unwrap()["a"], json!(2));
        assert_eq!(
            parse_arguments("[1, 2, 3]").unwrap_err(),
            "the arguments must be a JSON object, not an array"
        );
        assert_eq!(
            parse_arguments("null").unwrap_err(),
            "the arguments must be a JSON object, not null"
        );
        let error = parse_arguments("{\"a\":\n  tru}").unwrap_err();
        assert!(error.contains("line 2 column"), "{error}");
    }

    #[test]
    fn text_pieces_keep_their_order_and_skip_empty_ones() {
        let output = convert(
            json!({"content": [
                {"type": "text", "text": "first"},
                {"type": "text", "text": ""},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "embedded"}},
                {"type": "resource", "resource": {"uri": "file:///b.txt", "text": ""}},
                {"type": "text", "text": "last"}
            ]}),
            false,
        );
        assert_eq!(output, ToolOutput::text("first\n\nembedded\n\nlast"));
    }

    #[test]
    fn binary_content_becomes_placeholders() {
        let output = convert(
            json!({"content": [
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "AAEC", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AAECAw==", "mimeType": "application/x-thing"}},
                {"type": "resource", "resource": {"uri": "file:///y.bin", "blob": "AA"}},
                {"type": "resource_link", "uri": "file:///report.pdf", "name": "report"}
            ]}),
            false,
        );
        assert_eq!(
            output.text,
            "[image: image/png, 8 bytes]\n\n[audio: audio/wav, 3 bytes]\n\n\
             [resource: file:///x.bin, application/x-thing, 4 bytes]\n\n\
             [resource: file:///y.bin, application/octet-stream, 1 bytes]\n\n\
             [resource link: file:///report.pdf]"
        );
        assert!(!output.text.contains("iVBOR"));
    }

    #[test]
    fn structured_content_is_appended_unless_suppressed_or_repeated() {
        let result = json!({
            "content": [{"type": "text", "text": "called:show"}],
            "structuredContent": {"ok": true, "name": "show"}
        });
        let plain = convert(result.clone(), false);
        assert_eq!(plain.text, "called:show\n\n{\"ok\":true,\"name\":\"show\"}");
        let ui = convert(result, true);
        assert_eq!(ui.text, "called:show");
        assert_eq!(ui.structured, Some(json!({"ok": true, "name": "show"})));

        // The same JSON already given as text (member order aside) is not repeated.
        let repeated = convert(
            json!({
                "content": [{"type": "text", "text": "{\"b\": 2, \"a\": 1}"}],
                "structuredContent": {"a": 1, "b": 2}
            }),
            false,
        );
        assert_eq!(repeated.text, "{\"b\": 2, \"a\": 1}");
        // Structured content alone is the text.
        let alone = convert(json!({"structuredContent": [1, 2]}), false);
        assert_eq!(alone.text, "[1,2]");
        let nothing = convert(json!({"content": []}), false);
        assert_eq!(nothing, ToolOutput::text(""));
    }

    #[test]
    fn remote_errors_are_prefixed() {
        let output = convert(
            json!({"content": [{"type": "text", "text": "no store 99"}], "isError": true}),
            false,
        );
        assert_eq!(output, ToolOutput::error("no store 99"));
        assert_eq!(output.text, "Error: no store 99");
        let silent = convert(json!({"content": [], "isError": true}), false);
        assert!(silent.is_error);
        assert_eq!(
            silent.text,
            "Error: MCP App tool 'app.tool' reported an error without details"
        );
        let not_error = convert(
            json!({"content": [{"type": "text", "text": "fine"}], "isError": false}),
            false,
        );
        assert!(!not_error.is_error);
    }

    #[test]
    fn decoded_lengths() {
        assert_eq!(base64_decoded_len(""), 0);
        assert_eq!(base64_decoded_len("AA=="), 1);
        assert_eq!(base64_decoded_len("AAA="), 2);
        assert_eq!(base64_decoded_len("AAAA"), 3);
        assert_eq!(base64_decoded_len("AAAA\nAA"), 4);
    }
}
