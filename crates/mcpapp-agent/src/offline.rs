//! The offline model: what answers when no language model is configured. It understands a few
//! commands (`/tools`, `/call TOOL {json}`, `TOOL, key=value, ...`) and behaves like a real
//! model towards the agent: it asks for a tool call, then summarises the result.

use std::collections::BTreeSet;

use futures::stream;
use serde_json::{Map, Value};

use crate::model::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, ModelEvent, ModelStream, ToolCall, ToolSpec,
};
use crate::prompt::user_message;

/// The label every offline reply starts with.
pub(crate) const OFFLINE_LABEL: &str = "[offline mode]";

/// Longest tool result text quoted in a summary.
const MAX_SUMMARY_CHARS: usize = 4000;

/// Most tools named in a help reply.
const MAX_SUGGESTIONS: usize = 5;

/// Words too common to say anything about which tool is meant.
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "that", "this", "what", "which", "are", "you", "your",
    "can", "please", "all", "any", "how", "there", "about", "have", "has", "into", "its", "our",
    "was", "were", "will", "would", "could", "should", "not", "but", "get", "set", "use",
];

/// A [`ChatModel`] that needs no language model: the default when none is configured.
///
/// Every text reply starts with `[offline mode]`. It reads the user's message:
///
/// - `/tools` lists the tools (registered names and descriptions);
/// - `/call TOOL {json}` calls a tool with JSON arguments (empty means `{}`);
/// - `TOOL, key=value, ...` (the original module's `get_low_stock, storeId=1`) calls a tool
///   with arguments typed from the text: integers, decimals, `true`, `false` and `null`
///   become JSON values, quoted text (`"..."` or `'...'`) and anything else become strings;
/// - anything else gets a short help naming the tools whose names or descriptions share words
///   with the message.
///
/// `TOOL` is a registered name (`grocery.get_low_stock`), its safe model name, or the part
/// after the last `.` when exactly one tool ends that way (`get_low_stock`).
///
/// A call is a real tool call: the model asks for it, the agent runs it through the registry,
/// and on the next step the model summarises the result. A client sees the same event
/// sequence as with a language model.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineModel;

impl OfflineModel {
    /// The offline model.
    pub fn new() -> Self {
        Self
    }
}

impl ChatModel for OfflineModel {
    fn label(&self) -> &str {
        "offline"
    }

    fn stream(&self, request: ChatRequest) -> ModelStream {
        let events = match reply(&request) {
            Reply::Text(text) => vec![
                ModelEvent::TextDelta(text),
                ModelEvent::Finish(FinishReason::Stop),
            ],
            Reply::Call(call) => vec![
                ModelEvent::ToolCall(call),
                ModelEvent::Finish(FinishReason::ToolCalls),
            ],
        };
        Box::pin(stream::iter(events.into_iter().map(Ok)))
    }
}

enum Reply {
    Text(String),
    Call(ToolCall),
}

fn reply(request: &ChatRequest) -> Reply {
    match request.messages.last() {
        Some(ChatMessage::Tool { .. }) => Reply::Text(summarise_results(request)),
        Some(ChatMessage::User { content }) => match user_message(content) {
            Some(message) => command(message.trim(), &request.tools),
            None => {
                let events = content.lines().filter(|l| l.starts_with("- Tool ")).count();
                Reply::Text(format!(
                    "{OFFLINE_LABEL} Noted {events} UI event(s) from the app. Without a language \
                     model I do not decide next steps on my own.\n{}",
                    usage()
                ))
            }
        },
        _ => Reply::Text(format!("{OFFLINE_LABEL} {}", usage())),
    }
}

/// Reads one command.
fn command(message: &str, tools: &[ToolSpec]) -> Reply {
    if message == "/tools" {
        return Reply::Text(list_tools(tools));
    }
    if message == "/help" || message == "/call" {
        return Reply::Text(format!("{OFFLINE_LABEL} {}", usage()));
    }
    if let Some(rest) = message.strip_prefix("/call ") {
        let rest = rest.trim_start();
        let (name, json) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let json = json.trim();
        let tool = match find_tool(name, tools) {
            Ok(tool) => tool,
            Err(text) => return Reply::Text(text),
        };
        let arguments = if json.is_empty() {
            "{}".to_owned()
        } else {
            json.to_owned()
        };
        if let Err(e) = serde_json::from_str::<Value>(&arguments) {
            return Reply::Text(format!(
                "{OFFLINE_LABEL} The arguments for {} are not valid JSON: {e}",
                tool.registered_name
            ));
        }
        return Reply::Call(call(tool, arguments));
    }

    // `TOOL` alone, or `TOOL, key=value, ...`.
    let split = message
        .find(|c: char| c == ',' || c.is_whitespace())
        .unwrap_or(message.len());
    let (name, rest) = message.split_at(split);
    if !name.is_empty()
        && let Ok(tool) = find_tool(name, tools)
        && let Some(arguments) =
            parse_pairs(rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace()))
    {
        return Reply::Call(call(tool, Value::Object(arguments).to_string()));
    }
    Reply::Text(help(message, tools))
}

fn call(tool: &ToolSpec, arguments: String) -> ToolCall {
    ToolCall {
        id: format!("offline_{}", uuid::Uuid::new_v4().simple()),
        name: tool.name.clone(),
        arguments,
    }
}

/// Finds a tool by registered name, safe name, or unique last segment.
fn find_tool<'a>(name: &str, tools: &'a [ToolSpec]) -> Result<&'a ToolSpec, String> {
    if let Some(tool) = tools
        .iter()
        .find(|t| t.registered_name == name)
        .or_else(|| tools.iter().find(|t| t.name == name))
    {
        return Ok(tool);
    }
    let matches: Vec<&ToolSpec> = tools
        .iter()
        .filter(|t| t.registered_name.rsplit('.').next() == Some(name))
        .collect();
    match matches.as_slice() {
        [tool] => Ok(tool),
        [] => Err(format!(
            "{OFFLINE_LABEL} There is no tool named '{name}'. Type /tools to list them."
        )),
        several => Err(format!(
            "{OFFLINE_LABEL} '{name}' could mean {}; use the full name.",
            several
                .iter()
                .map(|t| t.registered_name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Parses `key=value, key2="text, with comma"`; `None` if a piece is not `key=value`.
fn parse_pairs(text: &str) -> Option<Map<String, Value>> {
    let mut map = Map::new();
    for piece in split_outside_quotes(text) {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        let (key, value) = piece.split_once('=')?;
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return None;
        }
        map.insert(key.to_owned(), typed_value(value.trim()));
    }
    Some(map)
}

/// Splits on commas that are not inside `"..."` or `'...'`.
fn split_outside_quotes(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut start = 0;
    // A quote opens a string only where a value starts, so `note=it's` stays plain text.
    let mut value_start = false;
    for (i, c) in text.char_indices() {
        let opens_value = value_start;
        if quote.is_none() && !c.is_whitespace() {
            value_start = c == '=';
        }
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if opens_value && (c == '"' || c == '\'') => quote = Some(c),
            None if c == ',' => {
                pieces.push(&text[start..i]);
                start = i + 1;
            }
            None => {}
        }
    }
    pieces.push(&text[start..]);
    pieces
}

/// Types a value written in a command.
fn typed_value(text: &str) -> Value {
    for q in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(q) && text.ends_with(q) {
            return Value::String(unescape(&text[1..text.len() - 1]));
        }
    }
    match text {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    if let Ok(n) = text.parse::<i64>() {
        return Value::from(n);
    }
    // `f64::from_str` also accepts `inf` and `NaN`; only plain decimals count as numbers.
    let numeric = text.bytes().any(|b| b.is_ascii_digit())
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
    if numeric
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = serde_json::Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn list_tools(tools: &[ToolSpec]) -> String {
    if tools.is_empty() {
        return format!("{OFFLINE_LABEL} No tools are registered.");
    }
    let mut text = format!("{OFFLINE_LABEL} {} tool(s) available:", tools.len());
    for tool in tools {
        let description = tool.description.lines().next().unwrap_or("").trim();
        if description.is_empty() {
            text.push_str(&format!("\n- {}", tool.registered_name));
        } else {
            text.push_str(&format!("\n- {}: {description}", tool.registered_name));
        }
    }
    text
}

fn usage() -> &'static str {
    "No language model is configured (set MCPAPP_MODEL, and OPENAI_BASE_URL and OPENAI_API_KEY \
     as needed). Commands: /tools lists the tools; /call TOOL {json} calls one; \
     TOOL, key=value, ... calls one with simple arguments."
}

fn help(message: &str, tools: &[ToolSpec]) -> String {
    let words = words(message);
    let mut scored: Vec<(usize, &str)> = tools
        .iter()
        .filter_map(|tool| {
            let tool_words: BTreeSet<String> = words_of(&tool.registered_name)
                .chain(words_of(&tool.description))
                .collect();
            let score = words
                .iter()
                .filter(|w| tool_words.iter().any(|t| similar(w, t)))
                .count();
            (score > 0).then_some((score, tool.registered_name.as_str()))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut text = format!("{OFFLINE_LABEL} {}", usage());
    if !scored.is_empty() {
        let names: Vec<&str> = scored
            .iter()
            .take(MAX_SUGGESTIONS)
            .map(|(_, n)| *n)
            .collect();
        text.push_str(&format!(
            "\nTools that match your message: {}.",
            names.join(", ")
        ));
    }
    text
}

/// The meaningful lower-case words of a message.
fn words(text: &str) -> BTreeSet<String> {
    words_of(text)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
}

/// Whether two words are the same or one is a longer form of the other (`store`, `stores`).
fn similar(a: &str, b: &str) -> bool {
    a == b || (a.len() >= 4 && b.len() >= 4 && (a.starts_with(b) || b.starts_with(a)))
}

/// The text reply after tool results: what each call returned.
fn summarise_results(request: &ChatRequest) -> String {
    let results: Vec<(&str, &str)> = request
        .messages
        .iter()
        .rev()
        .map_while(|m| match m {
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    let calls: Vec<&ToolCall> = request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                Some(tool_calls.iter().collect())
            }
            _ => None,
        })
        .unwrap_or_default();

    let mut parts = Vec::new();
    for (id, content) in results.into_iter().rev() {
        let name = calls
            .iter()
            .find(|c| c.id == id)
            .map(|c| {
                request
                    .tools
                    .iter()
                    .find(|t| t.name == c.name)
                    .map_or(c.name.as_str(), |t| t.registered_name.as_str())
            })
            .unwrap_or("the tool");
        let verb = if content.starts_with(mcpapp_bridge::ERROR_PREFIX) {
            "failed"
        } else {
            "returned"
        };
        let shown = truncate(content, MAX_SUMMARY_CHARS);
        parts.push(format!("{name} {verb}:\n{shown}"));
    }
    format!("{OFFLINE_LABEL} {}", parts.join("\n\n"))
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_typed() {
        assert_eq!(typed_value("1"), json!(1));
        assert_eq!(typed_value("-2.5"), json!(-2.5));
        assert_eq!(typed_value("true"), json!(true));
        assert_eq!(typed_value("null"), json!(null));
        assert_eq!(typed_value("inf"), json!("inf"));
        assert_eq!(typed_value("NaN"), json!("NaN"));
        assert_eq!(typed_value("\"a, \\\"b\\\"\""), json!("a, \"b\""));
        assert_eq!(typed_value("'7'"), json!("7"));
        assert_eq!(typed_value("Downtown Market"), json!("Downtown Market"));
    }

    #[test]
    fn pairs_split_outside_quotes() {
        let map = parse_pairs(r#"name="A, B", storeId=1 , flag=false"#).unwrap();
        assert_eq!(
            Value::Object(map),
            json!({"name": "A, B", "storeId": 1, "flag": false})
        );
        assert!(parse_pairs("is it working").is_none());
        let map = parse_pairs("note=it's fine, x=1").unwrap();
        assert_eq!(Value::Object(map), json!({"note": "it's fine", "x": 1}));
        assert_eq!(parse_pairs("").unwrap().len(), 0);
    }
}
