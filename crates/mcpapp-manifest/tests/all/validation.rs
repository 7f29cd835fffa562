//! Validation of effective manifests: ids, transports, required fields, URLs, timeouts and
//! entry overrides.

use mcpapp_manifest::{
    AppId, Launch, McpAppEntryConfig, McpAppManifest, Transport, ValidationError,
};

fn manifest(text: &str) -> McpAppManifest {
    McpAppManifest::parse(text).expect("parses").manifest
}

fn errors(text: &str) -> Vec<ValidationError> {
    manifest(text)
        .validate()
        .expect_err("expected validation errors")
}

#[test]
fn missing_null_and_blank_ids_are_validation_errors_not_crashes() {
    for text in [
        r#"{"command":"x"}"#,
        r#"{"id":null,"command":"x"}"#,
        r#"{"id":"","command":"x"}"#,
        r#"{"id":"   ","command":"x"}"#,
    ] {
        assert_eq!(errors(text), [ValidationError::MissingId], "{text}");
    }
    assert_eq!(ValidationError::MissingId.to_string(), "'id' is required");
}

#[test]
fn ids_are_limited_to_a_url_safe_charset() {
    for good in [
        "a",
        "grocery-inventory",
        "App_1.2",
        "9lives",
        &"x".repeat(64),
    ] {
        assert!(AppId::new(good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "-lead",
        ".hidden",
        "_x",
        "has space",
        "slash/x",
        "ünï",
        "a?b",
        &"x".repeat(65),
        " padded",
    ] {
        assert_eq!(
            AppId::new(bad),
            Err(ValidationError::InvalidId { id: bad.to_owned() }),
            "{bad:?}"
        );
    }
    let errs = errors(r#"{"id":"bad id!","command":"x"}"#);
    assert_eq!(
        errs,
        [ValidationError::InvalidId {
            id: "bad id!".into()
        }]
    );
    assert!(errs[0].to_string().contains("1 to 64"));
}

#[test]
fn missing_fields_are_all_reported_at_once() {
    let errs = errors(r#"{"id":"","transport":"stdio","startupTimeoutSeconds":0}"#);
    assert_eq!(
        errs,
        [
            ValidationError::MissingId,
            ValidationError::MissingCommand,
            ValidationError::TimeoutOutOfRange {
                field: "startupTimeoutSeconds",
                value: 0
            },
        ]
    );
    let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert!(text[0].contains("id"));
    assert!(text[1].contains("stdio") && text[1].contains("command"));
}

#[test]
fn http_requires_an_absolute_http_url() {
    assert_eq!(
        errors(r#"{"id":"a","transport":"http"}"#),
        [ValidationError::MissingUrl]
    );
    for bad in [
        "/relative/mcp",
        "ftp://host/mcp",
        "http://",
        "not a url",
        "file:///tmp/x",
    ] {
        let errs = errors(&format!(r#"{{"id":"a","transport":"http","url":"{bad}"}}"#));
        assert!(
            matches!(errs.as_slice(), [ValidationError::InvalidUrl { .. }]),
            "{bad}: {errs:?}"
        );
    }
    let spec = manifest(r#"{"id":"a","transport":"http","url":"https://localhost:5001/mcp"}"#)
        .validate()
        .unwrap();
    match spec.launch {
        Launch::Http { url, .. } => assert_eq!(url.as_str(), "https://localhost:5001/mcp"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn url_errors_never_show_a_password() {
    let errs = errors(r#"{"id":"a","transport":"http","url":"ftp://user:hunter2@host/x"}"#);
    let text = errs[0].to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("redacted"), "{text}");
}

#[test]
fn transports_are_trimmed_case_insensitive_and_aliased() {
    for (raw, expected) in [
        ("stdio", Transport::Stdio),
        ("STDIO", Transport::Stdio),
        ("", Transport::Stdio),
        ("http", Transport::Http),
        ("HTTP", Transport::Http),
        (" http ", Transport::Http),
        ("streamable-http", Transport::Http),
        ("Streamable_HTTP", Transport::Http),
    ] {
        assert_eq!(Transport::parse(raw), Ok(expected), "{raw:?}");
    }
}

#[test]
fn unsupported_transports_name_the_value_and_both_options() {
    for raw in ["websocket", "inprocess"] {
        let errs = errors(&format!(
            r#"{{"id":"a","transport":"{raw}","command":"x"}}"#
        ));
        assert_eq!(
            errs,
            [ValidationError::UnsupportedTransport { value: raw.into() }]
        );
        let text = errs[0].to_string();
        assert!(text.contains("transport") && text.contains(raw), "{text}");
        assert!(text.contains("stdio") && text.contains("http"), "{text}");
    }
}

#[test]
fn sse_is_rejected_with_a_pointer_to_streamable_http() {
    let errs = errors(r#"{"id":"a","transport":"SSE","url":"http://localhost/sse"}"#);
    assert_eq!(errs, [ValidationError::LegacySseTransport]);
    let text = errs[0].to_string();
    assert!(
        text.contains("legacy HTTP+SSE") && text.contains("'http' (Streamable HTTP)"),
        "{text}"
    );
}

#[test]
fn timeouts_must_be_between_one_second_and_an_hour() {
    for ok in [1, 15, 3600] {
        let m = manifest(&format!(
            r#"{{"id":"a","command":"x","requestTimeoutSeconds":{ok}}}"#
        ));
        assert_eq!(m.validate().unwrap().request_timeout.as_secs(), ok);
    }
    for bad in [0, -5, 3601] {
        let errs = errors(&format!(
            r#"{{"id":"a","command":"x","requestTimeoutSeconds":{bad}}}"#
        ));
        assert_eq!(
            errs,
            [ValidationError::TimeoutOutOfRange {
                field: "requestTimeoutSeconds",
                value: bad
            }]
        );
        assert!(errs[0].to_string().contains("between 1 and 3600"));
    }
}

#[test]
fn headers_that_differ_only_in_case_are_an_error() {
    let errs = errors(
        r#"{"id":"a","transport":"http","url":"http://h/mcp","headers":{"X-Key":"1","x-key":"2"}}"#,
    );
    assert!(
        matches!(errs.as_slice(), [ValidationError::DuplicateHeader { .. }]),
        "{errs:?}"
    );
    assert_eq!(errs[0].field(), "headers");
}

#[test]
fn validation_runs_after_entry_overrides() {
    // The manifest alone lacks a command; the entry supplies one.
    let m = manifest(r#"{"id":"app","transport":"stdio"}"#);
    assert_eq!(m.validate().unwrap_err(), [ValidationError::MissingCommand]);
    let entry = McpAppEntryConfig {
        command: Some("server".into()),
        arguments: Some(vec!["--fast".into()]),
        working_directory: Some("bin".into()),
        ..Default::default()
    };
    let spec = m.with_overrides(&entry).validate().unwrap();
    assert_eq!(
        spec.launch,
        Launch::Stdio {
            command: "server".into(),
            arguments: vec!["--fast".into()],
            working_directory: Some("bin".into()),
            environment: Default::default(),
        }
    );

    // Switching a stdio manifest to http needs no placeholder command, only a URL.
    let entry = McpAppEntryConfig {
        transport: Some(" HTTP ".into()),
        url: Some("http://127.0.0.1:9/mcp".into()),
        ..Default::default()
    };
    let spec = m.with_overrides(&entry).validate().unwrap();
    assert_eq!(spec.launch.transport(), Transport::Http);

    // An override can also make a valid manifest invalid.
    let entry = McpAppEntryConfig {
        startup_timeout_seconds: Some(0),
        ..Default::default()
    };
    let valid = manifest(r#"{"id":"app","command":"x"}"#);
    assert!(valid.validate().is_ok());
    assert_eq!(
        valid.with_overrides(&entry).validate().unwrap_err(),
        [ValidationError::TimeoutOutOfRange {
            field: "startupTimeoutSeconds",
            value: 0
        }]
    );
}

#[test]
fn overrides_replace_or_merge_as_documented() {
    let m = manifest(
        r#"{"id":"app","command":"x","toolNamePrefix":"m.","environment":{"A":"1","B":"2"},
            "headers":{"Authorization":"old","X-Keep":"k"}}"#,
    );
    let mut entry = McpAppEntryConfig {
        tool_name_prefix: Some(String::new()),
        request_timeout_seconds: Some(5),
        ..Default::default()
    };
    entry.environment.insert("B".into(), "override".into());
    entry.environment.insert("C".into(), "3".into());
    entry.headers.insert("authorization".into(), "new".into());
    let effective = m.with_overrides(&entry);
    // An empty prefix from the entry removes the manifest's prefix.
    assert_eq!(effective.tool_name_prefix.as_deref(), Some(""));
    assert_eq!(effective.request_timeout_seconds, 5);
    assert_eq!(effective.environment["A"], "1");
    assert_eq!(effective.environment["B"], "override");
    assert_eq!(effective.environment["C"], "3");
    assert_eq!(effective.header("Authorization"), Some("new"));
    assert_eq!(effective.header("x-keep"), Some("k"));
    assert_eq!(effective.headers.len(), 2);
    let spec = effective.validate().unwrap();
    assert_eq!(spec.tool_name_prefix, "");
}

#[test]
fn a_valid_spec_mirrors_the_manifest() {
    let spec = manifest(
        r#"{"id":"viewer","name":"Viewer","version":"2.0.0","command":"v","hasUi":true,
            "uiResourceUri":"ui://viewer/main.html","protocolVersion":"2025-11-25"}"#,
    )
    .validate()
    .unwrap();
    assert_eq!(spec.id.as_str(), "viewer");
    assert_eq!(spec.display_name, "Viewer");
    assert_eq!(spec.version, "2.0.0");
    assert_eq!(spec.protocol_version, "2025-11-25");
    assert!(spec.has_ui);
    assert_eq!(
        spec.ui_resource_uri.as_deref(),
        Some("ui://viewer/main.html")
    );
    assert_eq!(spec.startup_timeout.as_secs(), 15);
    let unnamed = manifest(r#"{"id":"plain","command":"p"}"#)
        .validate()
        .unwrap();
    assert_eq!(unnamed.display_name, "plain");
}
