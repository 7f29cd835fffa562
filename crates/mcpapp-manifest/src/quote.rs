//! Quoting values from files and configuration in messages.
//!
//! A value written in a manifest or a configuration file can be as long as the file. Messages
//! about it end up in diagnostics, install states, logs and API answers, often more than once,
//! so a message shows at most the start of a long value and says how long it really is.

use std::fmt;

/// What kind of JSON value `value` is, as a message says it: `null`, `a boolean`, `a number`,
/// `a string`, `an array`, `an object`.
///
/// ```
/// use mcpapp_manifest::json_kind;
///
/// let answer = serde_json::json!([1]);
/// assert_eq!(format!("content must be an object, not {}", json_kind(&answer)),
///            "content must be an object, not an array");
/// ```
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The most characters of a value that [`quoted`] shows.
pub(crate) const MAX_QUOTED_CHARS: usize = 120;

/// A value rendered for a message by [`quoted`].
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a> {
    value: &'a str,
    mark: Option<char>,
}

/// Renders `value` between two `mark`s for a message, shortened when it is long.
///
/// A value of at most 120 characters is shown whole. A longer one is cut on
/// a character boundary after that many characters, ends in `…` inside the marks and is
/// followed by its length in bytes: `"aaaa…" (900000 bytes)`. Control characters (a newline,
/// an escape) are shown escaped, so a value cannot break a log line in two.
///
/// ```
/// use mcpapp_manifest::quoted;
///
/// assert_eq!(quoted("grocery", '\'').to_string(), "'grocery'");
/// let long = "a".repeat(900_000);
/// let shown = format!("'id' {} is not valid", quoted(&long, '"'));
/// assert!(shown.ends_with("…\" (900000 bytes) is not valid"));
/// assert!(shown.len() < 200);
/// ```
pub fn quoted(value: &str, mark: char) -> Quoted<'_> {
    Quoted {
        value,
        mark: Some(mark),
    }
}

/// Free text that may embed a value (a message from serde quotes the string it refused),
/// shortened like a [`quoted`] value but without marks.
pub(crate) fn clipped(text: &str) -> Quoted<'_> {
    Quoted {
        value: text,
        mark: None,
    }
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = self
            .value
            .char_indices()
            .nth(MAX_QUOTED_CHARS)
            .map(|(index, _)| index);
        let shown = &self.value[..cut.unwrap_or(self.value.len())];
        if let Some(mark) = self.mark {
            write!(f, "{mark}")?;
        }
        for c in shown.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        if cut.is_some() {
            f.write_str("…")?;
        }
        if let Some(mark) = self.mark {
            write!(f, "{mark}")?;
        }
        if cut.is_some() {
            write!(f, " ({} bytes)", self.value.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_shown_whole() {
        assert_eq!(quoted("", '"').to_string(), "\"\"");
        assert_eq!(quoted("comand", '`').to_string(), "`comand`");
        let exact = "é".repeat(MAX_QUOTED_CHARS);
        assert_eq!(quoted(&exact, '\'').to_string(), format!("'{exact}'"));
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary_with_their_size() {
        // Two-byte characters: a cut by bytes would split one.
        let long = "é".repeat(MAX_QUOTED_CHARS + 1);
        let shown = quoted(&long, '"').to_string();
        let expected = format!(
            "\"{}…\" ({} bytes)",
            "é".repeat(MAX_QUOTED_CHARS),
            long.len()
        );
        assert_eq!(shown, expected);
        assert_eq!(
            clipped(&long).to_string(),
            format!("{}… ({} bytes)", "é".repeat(MAX_QUOTED_CHARS), long.len())
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(quoted("a\nb\u{1b}", '\'').to_string(), "'a\\nb\\u{1b}'");
    }
}
