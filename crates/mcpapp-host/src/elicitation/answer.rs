//! Checking a page's answer to an elicitation before it reaches the app: the shape of an
//! `ElicitResult`, and for an accepted form, every value against the type the requested schema
//! gives its field (the primitive types of MCP elicitation schemas: strings with their
//! formats and lengths, numbers and integers with their bounds, booleans, single-select enums
//! in their legacy (`enum`/`enumNames`) and titled (`oneOf` of `const`/`title`) forms, and
//! multi-select arrays of those).
//!
//! The page checks the same rules in its form; the gateway checks again because the route
//! is an HTTP API that anything holding the token can call, and an app should never receive
//! an answer its own schema rules out. A pure function of two JSON values, tested on its own.

use mcpapp_manifest::json_kind;
use serde_json::{Map, Value};

/// Why an answer was refused; the message names the member at fault (`content.age`).
pub(crate) type Refusal = String;

/// Checks `answer` (the POSTed body) against `params` (the app's `elicitation/create`
/// parameters) and returns it as an `ElicitResult`.
pub(crate) fn check(params: &Value, answer: &Value) -> Result<rmcp::model::ElicitResult, Refusal> {
    let Value::Object(answer_object) = answer else {
        return Err(format!(
            "the answer must be a JSON object such as {{\"action\": \"accept\", \"content\": {{…}}}}, not {}",
            json_kind(answer)
        ));
    };
    for key in answer_object.keys() {
        if !matches!(key.as_str(), "action" | "content" | "_meta") {
            return Err(format!(
                "the answer has an unknown member '{key}' (allowed: action, content, _meta)"
            ));
        }
    }
    let action = match answer_object.get("action") {
        Some(Value::String(action)) => action.as_str(),
        Some(other) => return Err(format!("action must be a string, not {}", json_kind(other))),
        None => return Err("the answer has no action (accept, decline or cancel)".to_owned()),
    };
    let content = answer_object.get("content").filter(|c| !c.is_null());
    match action {
        "decline" | "cancel" => {
            if content.is_some() {
                return Err(format!(
                    "content is sent only with accept, not with {action}"
                ));
            }
        }
        "accept" => {
            if params["mode"] == "url" {
                if content.is_some() {
                    return Err("an accepted URL elicitation has no content".to_owned());
                }
            } else {
                let content = content
                    .ok_or("an accepted form needs content: an object with the form's fields")?;
                check_form(&params["requestedSchema"], content)?;
            }
        }
        other => {
            return Err(format!(
                "action must be \"accept\", \"decline\" or \"cancel\", not \"{other}\""
            ));
        }
    }
    if let Some(meta) = answer_object.get("_meta")
        && !meta.is_object()
    {
        return Err(format!("_meta must be an object, not {}", json_kind(meta)));
    }
    serde_json::from_value(answer.clone()).map_err(|e| format!("not an elicitation result: {e}"))
}

/// Checks an accepted form's content against the requested schema.
fn check_form(schema: &Value, content: &Value) -> Result<(), Refusal> {
    let Value::Object(content) = content else {
        return Err(format!(
            "content must be an object, not {}",
            json_kind(content)
        ));
    };
    let empty = Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&empty);
    for (name, value) in content {
        let Some(property) = properties.get(name) else {
            return Err(format!("content.{name} is not a field of the form"));
        };
        check_value(&format!("content.{name}"), property, value)?;
    }
    for required in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = required.as_str()
            && !content.contains_key(name)
        {
            return Err(format!("content.{name} is required"));
        }
    }
    Ok(())
}

fn check_value(at: &str, property: &Value, value: &Value) -> Result<(), Refusal> {
    match property["type"].as_str() {
        Some("string") => {
            let Value::String(text) = value else {
                return Err(format!("{at} must be a string, not {}", json_kind(value)));
            };
            check_string(at, property, text)
        }
        Some("number") => {
            let number = value
                .as_f64()
                .ok_or_else(|| format!("{at} must be a number, not {}", json_kind(value)))?;
            check_bounds(at, property, number)
        }
        Some("integer") => {
            let number = value
                .as_f64()
                .filter(|n| n.fract() == 0.0)
                .ok_or_else(|| format!("{at} must be an integer, not {}", describe(value)))?;
            check_bounds(at, property, number)
        }
        Some("boolean") => {
            if value.is_boolean() {
                Ok(())
            } else {
                Err(format!("{at} must be a boolean, not {}", json_kind(value)))
            }
        }
        Some("array") => check_multi_select(at, property, value),
        // A type the elicitation schemas do not have: nothing to hold the value to.
        _ => Ok(()),
    }
}

fn check_string(at: &str, property: &Value, text: &str) -> Result<(), Refusal> {
    if let Some(allowed) = choices(property) {
        if !allowed.contains(&text) {
            return Err(format!(
                "{at} must be one of {}, not \"{}\"",
                list(&allowed),
                shorten(text)
            ));
        }
        return Ok(());
    }
    let length = text.chars().count();
    if let Some(min) = property["minLength"].as_u64()
        && (length as u64) < min
    {
        return Err(format!("{at} must have at least {min} characters"));
    }
    if let Some(max) = property["maxLength"].as_u64()
        && (length as u64) > max
    {
        return Err(format!("{at} must have at most {max} characters"));
    }
    let valid = match property["format"].as_str() {
        Some("email") => is_email(text),
        Some("uri") => is_uri(text),
        Some("date") => is_date(text),
        Some("date-time") => is_date_time(text),
        _ => true,
    };
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{at} must be a valid {}, not \"{}\"",
            property["format"].as_str().unwrap_or_default(),
            shorten(text)
        ))
    }
}

fn check_bounds(at: &str, property: &Value, number: f64) -> Result<(), Refusal> {
    if let Some(min) = property["minimum"].as_f64()
        && number < min
    {
        return Err(format!("{at} must be at least {}", property["minimum"]));
    }
    if let Some(max) = property["maximum"].as_f64()
        && number > max
    {
        return Err(format!("{at} must be at most {}", property["maximum"]));
    }
    Ok(())
}

fn check_multi_select(at: &str, property: &Value, value: &Value) -> Result<(), Refusal> {
    let Value::Array(items) = value else {
        return Err(format!(
            "{at} must be an array of choices, not {}",
            json_kind(value)
        ));
    };
    let allowed = choices(&property["items"]);
    let mut seen: Vec<&str> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Value::String(choice) = item else {
            return Err(format!(
                "{at}[{index}] must be a string, not {}",
                json_kind(item)
            ));
        };
        if let Some(allowed) = &allowed
            && !allowed.contains(&choice.as_str())
        {
            return Err(format!(
                "{at}[{index}] must be one of {}, not \"{}\"",
                list(allowed),
                shorten(choice)
            ));
        }
        if seen.contains(&choice.as_str()) {
            return Err(format!("{at} lists \"{}\" twice", shorten(choice)));
        }
        seen.push(choice);
    }
    let count = items.len() as u64;
    if let Some(min) = property["minItems"].as_u64()
        && count < min
    {
        return Err(format!("{at} needs at least {min} choices"));
    }
    if let Some(max) = property["maxItems"].as_u64()
        && count > max
    {
        return Err(format!("{at} allows at most {max} choices"));
    }
    Ok(())
}

/// The values an enum schema allows: `enum`, or the `const`s of `oneOf` / `anyOf` (SEP-1330's
/// titled forms); `None` when the schema is not an enum.
fn choices(schema: &Value) -> Option<Vec<&str>> {
    if let Some(values) = schema["enum"].as_array() {
        return Some(values.iter().filter_map(Value::as_str).collect());
    }
    let options = schema["oneOf"]
        .as_array()
        .or_else(|| schema["anyOf"].as_array())?;
    Some(
        options
            .iter()
            .filter_map(|option| option["const"].as_str())
            .collect(),
    )
}

fn is_email(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !text.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

/// An absolute URI: a scheme (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`), a colon and a
/// rest without spaces.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !text.chars().any(char::is_whitespace)
}

/// `YYYY-MM-DD` naming a real day.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (
        digits(&text[0..4]),
        digits(&text[5..7]),
        digits(&text[8..10]),
    ) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 `date-time`: a date, `T`, `hh:mm:ss` with optional fractions, and `Z` or an
/// offset `±hh:mm`.
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let (clock, offset) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, None)
    } else if let Some(at) = time.rfind(['+', '-']) {
        (&time[..at], Some(&time[at + 1..]))
    } else {
        return false;
    };
    let clock = clock.split_once('.').map_or(clock, |(whole, fraction)| {
        if !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit()) {
            whole
        } else {
            ""
        }
    });
    is_clock(clock, true) && offset.is_none_or(|o| is_clock(o, false))
}

/// `hh:mm:ss` (or `hh:mm` without seconds), in range (a leap second 60 allowed).
fn is_clock(text: &str, seconds: bool) -> bool {
    let parts: Vec<&str> = text.split(':').collect();
    let expected = if seconds { 3 } else { 2 };
    if parts.len() != expected || parts.iter().any(|p| p.len() != 2) {
        return false;
    }
    let limits = [23, 59, 60];
    parts
        .iter()
        .zip(limits)
        .all(|(part, limit)| digits(part).is_some_and(|n| n <= limit))
}

fn digits(text: &str) -> Option<u32> {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// A value for a message: numbers as written, anything else by its kind.
fn describe(value: &Value) -> String {
    match value {
        Value::Number(number) => number.to_string(),
        other => json_kind(other).to_owned(),
    }
}

fn list(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("\"{}\"", shorten(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// At most 60 characters of a value the user typed, so a message stays short.
fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!({
            "mode": "form",
            "message": "Tell us",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 2, "maxLength": 5},
                    "email": {"type": "string", "format": "email"},
                    "site": {"type": "string", "format": "uri"},
                    "born": {"type": "string", "format": "date"},
                    "at": {"type": "string", "format": "date-time"},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "score": {"type": "number", "maximum": 1.5},
                    "agree": {"type": "boolean"},
                    "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
                    "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
                    "tags": {"type": "array", "minItems": 1, "maxItems": 2,
                             "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}, {"const": "c", "title": "C"}]}},
                    "plain": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}}
                },
                "required": ["name", "agree"]
            }
        })
    }

    #[allow(clippy::needless_pass_by_value)] // Callers build the content inline.
    fn accept(content: Value) -> Result<rmcp::model::ElicitResult, Refusal> {
        check(&form(), &json!({"action": "accept", "content": content}))
    }

    #[test]
    fn a_good_answer_passes_unchanged() {
        let content = json!({
            "name": "Ada", "email": "ada@example.org", "site": "https://example.org/x",
            "born": "2000-02-29", "at": "2026-01-26T10:30:00.5+01:00", "age": 36, "score": 1.5,
            "agree": true, "size": "m", "colour": "g", "tags": ["a", "c"], "plain": []
        });
        let result = accept(content.clone()).unwrap();
        assert_eq!(result.content, Some(content));
        for action in ["decline", "cancel"] {
            let result = check(&form(), &json!({"action": action})).unwrap();
            assert!(result.content.is_none());
        }
    }

    #[test]
    fn each_type_is_held_to_its_schema() {
        let base = json!({"name": "Ada", "agree": true});
        let with = |key: &str, value: Value| {
            let mut content = base.clone();
            content[key] = value;
            accept(content).unwrap_err()
        };
        assert_eq!(
            with("agree", json!("yes")),
            "content.agree must be a boolean, not a string"
        );
        assert_eq!(
            with("name", json!("A")),
            "content.name must have at least 2 characters"
        );
        assert_eq!(
            with("name", json!("Adalove")),
            "content.name must have at most 5 characters"
        );
        assert_eq!(
            with("age", json!(3.5)),
            "content.age must be an integer, not 3.5"
        );
        assert_eq!(with("age", json!(151)), "content.age must be at most 150");
        assert_eq!(with("age", json!(-1)), "content.age must be at least 0");
        assert_eq!(
            with("score", json!("1")),
            "content.score must be a number, not a string"
        );
        assert_eq!(
            with("email", json!("ada.example.org")),
            "content.email must be a valid email, not \"ada.example.org\""
        );
        assert_eq!(
            with("site", json!("example.org")),
            "content.site must be a valid uri, not \"example.org\""
        );
        assert_eq!(
            with("born", json!("2001-02-29")),
            "content.born must be a valid date, not \"2001-02-29\""
        );
        assert!(
            with("at", json!("2026-01-26 10:30"))
                .starts_with("content.at must be a valid date-time")
        );
        assert!(
            with("at", json!("2026-01-26T10:30:00"))
                .starts_with("content.at must be a valid date-time")
        );
        assert_eq!(
            with("size", json!("l")),
            "content.size must be one of \"s\", \"m\", not \"l\""
        );
        assert_eq!(
            with("colour", json!("Red")),
            "content.colour must be one of \"r\", \"g\", not \"Red\""
        );
        assert_eq!(
            with("tags", json!([])),
            "content.tags needs at least 1 choices"
        );
        assert_eq!(
            with("tags", json!(["a", "b", "c"])),
            "content.tags allows at most 2 choices"
        );
        assert_eq!(
            with("tags", json!(["a", "a"])),
            "content.tags lists \"a\" twice"
        );
        assert_eq!(
            with("tags", json!(["d"])),
            "content.tags[0] must be one of \"a\", \"b\", \"c\", not \"d\""
        );
        assert_eq!(
            with("plain", json!("x")),
            "content.plain must be an array of choices, not a string"
        );
        assert_eq!(
            with("extra", json!(1)),
            "content.extra is not a field of the form"
        );
        assert_eq!(
            accept(json!({"agree": false})).unwrap_err(),
            "content.name is required"
        );
    }

    #[test]
    fn the_shape_of_the_answer_is_checked() {
        let params = form();
        let refuse = |answer: Value| check(&params, &answer).unwrap_err();
        assert!(refuse(json!([1])).starts_with("the answer must be a JSON object"));
        assert_eq!(
            refuse(json!({})),
            "the answer has no action (accept, decline or cancel)"
        );
        assert_eq!(
            refuse(json!({"action": "maybe"})),
            "action must be \"accept\", \"decline\" or \"cancel\", not \"maybe\""
        );
        assert_eq!(
            refuse(json!({"action": 1})),
            "action must be a string, not a number"
        );
        assert_eq!(
            refuse(json!({"action": "decline", "content": {}})),
            "content is sent only with accept, not with decline"
        );
        assert_eq!(
            refuse(json!({"action": "accept"})),
            "an accepted form needs content: an object with the form's fields"
        );
        assert_eq!(
            refuse(json!({"action": "accept", "content": "Ada"})),
            "content must be an object, not a string"
        );
        assert_eq!(
            refuse(json!({"action": "accept", "extra": 1})),
            "the answer has an unknown member 'extra' (allowed: action, content, _meta)"
        );
        assert_eq!(
            refuse(json!({"action": "cancel", "_meta": 3})),
            "_meta must be an object, not a number"
        );
    }

    #[test]
    fn url_elicitations_are_accepted_without_content() {
        let params = json!({"mode": "url", "message": "Sign in", "url": "https://example.org/", "elicitationId": "e1"});
        assert!(check(&params, &json!({"action": "accept"})).is_ok());
        assert_eq!(
            check(&params, &json!({"action": "accept", "content": {"a": 1}})).unwrap_err(),
            "an accepted URL elicitation has no content"
        );
    }

    #[test]
    fn formats() {
        assert!(is_date_time("1990-12-31T23:59:60Z"));
        assert!(is_date_time("2026-01-26t00:00:00-05:30"));
        assert!(!is_date_time("2026-01-26T24:00:00Z"));
        assert!(!is_date_time("2026-01-26T10:00:00.Z"));
        assert!(is_uri("mailto:a@b") && is_uri("urn:isbn:0451450523"));
        assert!(!is_uri("1http://x") && !is_uri("http:") && !is_uri("http://a b"));
        assert!(is_date("2024-02-29") && !is_date("2023-13-01") && !is_date("2023-1-01"));
        assert!(!is_email("a@b@c") && !is_email("@b") && !is_email("a @b"));
    }
}
