//! Turning a chat request (a message and the UI events the browser reports) into the user
//! prompt of a turn, as the original gateway does, in English.

use serde::{Deserialize, Deserializer};

/// The marker that starts the UI-events block of a prompt.
pub(crate) const UI_EVENTS_MARKER: &str = "[UI events]";

/// The header line of the UI-events block.
pub(crate) const UI_EVENTS_HEADER: &str = "[UI events] The user performed these tool calls \
directly in the app's UI, bypassing the agent. Their results are final:";

/// The line added when the user sent UI events but no message.
pub(crate) const NO_MESSAGE_LINE: &str = "The user sent no message. Decide the next step \
briefly, call tools when you are ready, and do not repeat what the UI already shows.";

/// A tool call the user made directly in an app's UI, reported by the browser with the next
/// chat message (`{"tool": .., "args": .., "resultText": .., "count": ..}`). Values of the
/// wrong type count as absent. Identical repeats (same tool, arguments and outcome, as a view
/// that polls makes) arrive as one event with their `count`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppEvent {
    /// The tool that was called.
    #[serde(default, deserialize_with = "string_or_none")]
    pub tool: Option<String>,
    /// Its arguments, any JSON value.
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// The text of its result.
    #[serde(default, deserialize_with = "string_or_none")]
    pub result_text: Option<String>,
    /// How many times this same call, with this same outcome, was made (absent: once).
    #[serde(default, deserialize_with = "count_or_none")]
    pub count: Option<u64>,
}

/// Why a turn has no prompt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// The message is blank and there are no UI events (HTTP hosts answer 400).
    #[error("the request has neither a message nor UI events")]
    Empty,
}

/// Builds the user prompt of a turn.
///
/// With UI events, the prompt starts with a header line beginning with [`UI_EVENTS_MARKER`],
/// then one line per event, `- Tool {tool}({args}) → {resultText}` (a missing tool is `?`,
/// missing args are `{}`, args are compact JSON, a missing result is empty), followed by
/// ` ({count} times)` when the event stands for more than one identical call. If the message is
/// blank, a line asks the agent to decide the next step briefly, call tools when ready and not
/// repeat what the UI shows. A non-blank message follows after an empty line.
///
/// # Errors
///
/// [`PromptError::Empty`] when the message is blank and there are no events.
pub(crate) fn build_prompt(
    message: Option<&str>,
    app_events: &[AppEvent],
) -> Result<String, PromptError> {
    let message = message.filter(|m| !m.trim().is_empty());
    if app_events.is_empty() {
        return message.map(str::to_owned).ok_or(PromptError::Empty);
    }

    let mut prompt = String::from(UI_EVENTS_HEADER);
    for event in app_events {
        let tool = event.tool.as_deref().unwrap_or("?");
        let args = event
            .args
            .as_ref()
            .map_or_else(|| "{}".to_owned(), serde_json::Value::to_string);
        let result = event.result_text.as_deref().unwrap_or("");
        prompt.push_str(&format!("\n- Tool {tool}({args}) → {result}"));
        if let Some(count) = event.count.filter(|n| *n > 1) {
            prompt.push_str(&format!(" ({count} times)"));
        }
    }
    match message {
        Some(message) => {
            prompt.push_str("\n\n");
            prompt.push_str(message);
        }
        None => {
            prompt.push('\n');
            prompt.push_str(NO_MESSAGE_LINE);
        }
    }
    Ok(prompt)
}

/// The user's own message inside a prompt built by [`build_prompt`], without the UI-events
/// block; `None` if the prompt carries events only. Used by the offline model, which reads
/// commands. A message is found after the last empty line of the block.
pub(crate) fn user_message(prompt: &str) -> Option<&str> {
    if !prompt.starts_with(UI_EVENTS_MARKER) {
        return Some(prompt);
    }
    if prompt.ends_with(NO_MESSAGE_LINE) {
        return None;
    }
    prompt
        .rsplit_once("\n\n")
        .map(|(_, message)| message)
        .filter(|m| !m.trim().is_empty())
}

/// Reads a positive integer, treating anything else as absent.
fn count_or_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(value.as_u64().filter(|n| *n >= 1))
}

/// Reads a string, treating any other JSON type as absent.
fn string_or_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(match value {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_message_is_found_after_the_events_block() {
        let events = [AppEvent {
            tool: Some("t".into()),
            args: None,
            result_text: Some("line one\nline two".into()),
            count: None,
        }];
        let with = build_prompt(Some("/tools"), &events).unwrap();
        assert_eq!(user_message(&with), Some("/tools"));
        let without = build_prompt(None, &events).unwrap();
        assert_eq!(user_message(&without), None);
        assert_eq!(user_message("plain"), Some("plain"));
    }
}
