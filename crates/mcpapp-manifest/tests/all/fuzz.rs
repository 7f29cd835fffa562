//! Property tests: no input makes the parsers or the validator panic.

use mcpapp_manifest::{ConfigDocument, McpAppManifest};
use proptest::prelude::*;

use crate::{SEED_APPSETTINGS, SEED_MANIFEST};

/// Parses and, when that works, validates and re-serializes: every path must return.
fn exercise_manifest(text: &str) {
    if let Ok(parsed) = McpAppManifest::parse(text) {
        let _ = parsed.manifest.validate();
        let again = McpAppManifest::parse(&parsed.manifest.to_json_pretty())
            .expect("a serialized manifest parses again");
        assert_eq!(again.manifest, parsed.manifest);
    }
}

fn exercise_config(text: &str) {
    if let Ok(doc) = ConfigDocument::parse(text)
        && let Ok(section) = doc.mcp_apps()
    {
        for entry in section.value.entries.values() {
            let m = McpAppManifest::default().with_overrides(entry);
            let _ = m.validate();
        }
    }
}

/// Byte-level mutations of a valid document: deletions, insertions and replacements.
fn mutate(base: &'static str) -> impl Strategy<Value = String> {
    let len = base.len();
    prop::collection::vec((0..=len, 0..4usize, any::<char>(), 0u8..3), 1..6).prop_map(move |ops| {
        let mut text: Vec<char> = base.chars().collect();
        for (at, n, c, kind) in ops {
            let at = at.min(text.len());
            match kind {
                0 => {
                    let end = (at + n).min(text.len());
                    text.drain(at..end);
                }
                1 => text.insert(at, c),
                _ => {
                    if at < text.len() {
                        text[at] = c;
                    }
                }
            }
        }
        text.into_iter().collect()
    })
}

/// Structured JSON values with the manifest's field names mixed in, so values of the wrong
/// type reach the typed decoder.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        "[a-z:/ .-]{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("id".to_owned()),
                    Just("transport".to_owned()),
                    Just("url".to_owned()),
                    Just("command".to_owned()),
                    Just("headers".to_owned()),
                    Just("startupTimeoutSeconds".to_owned()),
                    Just("Entries".to_owned()),
                    Just("Enabled".to_owned()),
                    "[a-zA-Z]{1,8}",
                ],
                inner,
                0..5
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in ".{0,200}") {
        exercise_manifest(&text);
        exercise_config(&text);
    }

    #[test]
    fn mutated_manifests_never_panic(text in mutate(SEED_MANIFEST)) {
        exercise_manifest(&text);
    }

    #[test]
    fn mutated_configs_never_panic(text in mutate(SEED_APPSETTINGS)) {
        exercise_config(&text);
    }

    #[test]
    fn structured_values_never_panic(value in json_value()) {
        let text = value.to_string();
        exercise_manifest(&text);
        exercise_config(&format!(r#"{{"McpApps": {text}}}"#));
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let text = format!(
        "{{\"metadata\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(McpAppManifest::parse(&text).is_err());
}
