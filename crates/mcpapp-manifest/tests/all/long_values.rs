//! Over-long values from a file never reach a message whole: validation errors, findings and
//! parse errors show the start of the value and its size in bytes.

use mcpapp_manifest::{ConfigDocument, McpAppManifest, ValidationError};

/// The size of every long value here: far beyond anything a message should carry.
const LONG: usize = 900_000;

/// Messages stay this small whatever the value.
const BOUND: usize = 400;

fn long(c: char) -> String {
    std::iter::repeat_n(c, LONG).collect()
}

fn assert_short(message: &str, names: &str) {
    assert!(
        message.len() < BOUND,
        "{} bytes: {}…",
        message.len(),
        &message[..BOUND]
    );
    assert!(message.contains(names), "{message}");
    assert!(shown_size(message) >= LONG, "{message}");
}

/// The byte count a shortened value shows: `… (N bytes)`.
fn shown_size(message: &str) -> usize {
    let (before, _) = message.split_once(" bytes)").expect("a size is shown");
    let (_, digits) = before.rsplit_once('(').expect("a size is shown");
    digits.parse().expect("a number")
}

fn validation_messages(text: &str) -> Vec<(String, &'static str)> {
    McpAppManifest::parse(text)
        .expect("parses")
        .manifest
        .validate()
        .expect_err("invalid")
        .iter()
        .map(|e: &ValidationError| (e.to_string(), e.field()))
        .collect()
}

#[test]
fn long_ids_urls_transports_and_header_names_are_shortened_in_validation_errors() {
    let cases = [
        (
            format!(r#"{{"id": "{}", "command": "x"}}"#, long('a')),
            "id",
            "'id' \"aaaa",
        ),
        (
            format!(r#"{{"id": "a", "transport": "{}"}}"#, long('t')),
            "transport",
            "unsupported transport 'tttt",
        ),
        (
            format!(
                r#"{{"id": "a", "transport": "http", "url": "http://a b{}"}}"#,
                long('u')
            ),
            "url",
            "'url' \"http://a buuuu",
        ),
        (
            format!(
                r#"{{"id": "a", "transport": "http", "url": "{}:x"}}"#,
                long('s')
            ),
            "url",
            "the scheme is 'ssss",
        ),
    ];
    for (text, field, names) in cases {
        let messages = validation_messages(&text);
        assert_eq!(messages.len(), 1, "{field}");
        assert_eq!(messages[0].1, field);
        assert_short(&messages[0].0, names);
    }

    let a = long('h');
    let b = a.to_uppercase();
    let text = format!(
        r#"{{"id": "a", "transport": "http", "url": "http://x", "headers": {{"{a}": "1", "{b}": "2"}}}}"#
    );
    let messages = validation_messages(&text);
    let message = &messages[0].0;
    assert!(message.len() < BOUND, "{}", message.len());
    assert_eq!(message.matches(&format!("({LONG} bytes)")).count(), 2);
}

#[test]
fn long_unknown_field_names_are_shortened_in_findings() {
    let text = format!(r#"{{"id": "a", "command": "x", "{}": 1}}"#, long('k'));
    let parsed = McpAppManifest::parse(&text).expect("parses");
    assert_eq!(parsed.findings.len(), 1);
    assert_short(&parsed.findings[0].message, "unknown field `kkkk");

    let config = format!(
        r#"{{"McpApps": {{"Enabled": true, "Entries": {{"{}": {{"Enabld": true, "{}": 1}}}}}}}}"#,
        long('e'),
        long('z')
    );
    let section = ConfigDocument::parse(&config).unwrap().mcp_apps().unwrap();
    let messages: Vec<&str> = section
        .findings
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    // The path of the parent names the long entry key; the suggestion still comes through.
    assert_short(messages[0], "in `McpApps.Entries.eeee");
    assert!(
        messages[0].contains("did you mean `Enabled`?"),
        "{}",
        messages[0]
    );
    assert_short(messages[1], "unknown key `zzzz");
}

#[test]
fn type_errors_shorten_the_refused_value_and_the_field_path() {
    let text = format!(r#"{{"id": "a", "startupTimeoutSeconds": "{}"}}"#, long('9'));
    let err = McpAppManifest::parse(&text).unwrap_err();
    assert_short(
        &err.to_string(),
        "field `startupTimeoutSeconds`: invalid type: string",
    );

    let config = format!(
        r#"{{"McpApps": {{"Entries": {{"{}": {{"Enabled": "yes"}}}}}}}}"#,
        long('e')
    );
    let err = ConfigDocument::parse(&config)
        .unwrap()
        .mcp_apps()
        .unwrap_err();
    assert_short(&err.to_string(), "field `McpApps.Entries.eeee");
    assert_short(&err.detail(), "field `McpApps.Entries.eeee");
}
