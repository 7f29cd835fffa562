//! Parsing manifests: defaults, round trips, the JSON dialect, unknown fields and errors.

use mcpapp_manifest::{McpAppManifest, ParseError, Severity};

use crate::SEED_MANIFEST;

fn parse(text: &str) -> McpAppManifest {
    McpAppManifest::parse(text)
        .expect("manifest parses")
        .manifest
}

#[test]
fn round_trip_keeps_every_field() {
    let original = parse(SEED_MANIFEST);
    let again = parse(&original.to_json_pretty());
    assert_eq!(again, original);
    assert_eq!(again.id.as_deref(), Some("grocery-inventory"));
    assert_eq!(again.name.as_deref(), Some("Grocery Inventory Dashboard"));
    assert!(
        again
            .description
            .as_deref()
            .unwrap()
            .starts_with("Multi-store grocery")
    );
    assert_eq!(again.version, "1.0.0");
    assert_eq!(again.transport, "http");
    assert_eq!(again.url.as_deref(), Some("https://localhost:5001/mcp"));
    assert!(again.has_ui);
    assert_eq!(
        again.ui_resource_uri.as_deref(),
        Some("ui://grocery/store-dashboard.html")
    );
    assert_eq!(again.category.as_deref(), Some("data"));
    assert_eq!(
        again.tags,
        [
            "grocery",
            "inventory",
            "retail",
            "supply-chain",
            "dashboard"
        ]
    );
    assert_eq!(
        again.capabilities,
        ["tools", "resources", "prompts", "completions"]
    );
    assert_eq!(again.startup_timeout_seconds, 10);
    assert_eq!(again.request_timeout_seconds, 60);
    assert_eq!(again.tool_name_prefix.as_deref(), Some("grocery."));
}

#[test]
fn seed_manifest_loads_verbatim_and_is_a_valid_http_app() {
    let parsed = McpAppManifest::parse(SEED_MANIFEST).unwrap();
    assert!(parsed.findings.is_empty(), "{:?}", parsed.findings);
    let m = &parsed.manifest;
    assert_eq!(m.protocol_version, "2025-03-26");
    assert_eq!(
        m.icon_url.as_deref(),
        Some("https://img.icons8.com/color/48/grocery-store.png")
    );
    assert_eq!(m.author.as_deref(), Some("OpenClaw MCP App Demo"));
    assert_eq!(m.license.as_deref(), Some("MIT"));
    assert_eq!(
        m.homepage_url.as_deref(),
        Some("https://github.com/boclifton-MSFT/MCPAppsDemo")
    );
    assert!(m.headers.is_empty());
    let spec = m.validate().expect("the seed manifest is valid");
    assert_eq!(spec.launch.transport(), mcpapp_manifest::Transport::Http);
    assert_eq!(spec.tool_name_prefix, "grocery.");
    assert_eq!(spec.startup_timeout.as_secs(), 10);
}

#[test]
fn minimal_manifest_takes_the_original_defaults() {
    let m = parse(r#"{"id":"minimal","version":"1.0.0"}"#);
    assert_eq!(m.name, None);
    assert_eq!(m.description, None);
    assert_eq!(m.transport, "stdio");
    assert!(!m.has_ui);
    assert_eq!(m.capabilities, ["tools"]);
    assert_eq!(m.protocol_version, "2025-03-26");
    assert_eq!(m.startup_timeout_seconds, 15);
    assert_eq!(m.request_timeout_seconds, 60);
    assert_eq!(
        m,
        McpAppManifest {
            id: Some("minimal".into()),
            version: "1.0.0".into(),
            ..Default::default()
        }
    );
}

#[test]
fn blank_and_null_values_take_defaults() {
    let m = parse(
        r#"{"id":"x","version":"  ","protocolVersion":"","transport":" ","capabilities":[],
            "tags":null,"arguments":null,"headers":null,"metadata":null,"name":null}"#,
    );
    assert_eq!(m.version, "0.1.0");
    assert_eq!(m.protocol_version, "2025-03-26");
    assert_eq!(m.transport, "stdio");
    assert_eq!(m.capabilities, ["tools"]);
    assert!(m.tags.is_empty() && m.arguments.is_empty() && m.headers.is_empty());
    assert_eq!(m.name, None);
}

#[test]
fn stdio_fields_are_read_in_order() {
    let m = parse(
        r#"{
            "id": "tool-runner",
            "transport": "stdio",
            "command": "node",
            "arguments": ["server.js", "--port", "0"],
            "workingDirectory": "./srv",
            "environment": {"API_KEY": "k", "api_key": "lower"},
            "headers": {"X-Api-Key": "secret"}
        }"#,
    );
    assert_eq!(m.command.as_deref(), Some("node"));
    assert_eq!(m.arguments, ["server.js", "--port", "0"]);
    assert_eq!(m.working_directory.as_deref(), Some("./srv"));
    // Environment keys are case-sensitive; header names are not.
    assert_eq!(m.environment.len(), 2);
    assert_eq!(m.header("x-api-key"), Some("secret"));
    assert_eq!(m.header("X-API-KEY"), Some("secret"));
}

#[test]
fn invalid_json_is_a_parse_error_with_line_and_column() {
    let err = McpAppManifest::parse("{\n  \"id\": \"a\",\n  \"name\": oops\n}").unwrap_err();
    let position = err.position().expect("syntax errors have a position");
    assert_eq!((position.line, position.column), (3, 11));
    assert!(err.to_string().starts_with("line 3, column 11: "), "{err}");

    assert!(matches!(
        McpAppManifest::parse("not json at all"),
        Err(ParseError::Syntax { .. })
    ));
    assert!(matches!(McpAppManifest::parse(""), Err(ParseError::Empty)));
    assert!(matches!(
        McpAppManifest::parse("[1, 2]"),
        Err(ParseError::NotAnObject { .. })
    ));
    assert!(matches!(
        McpAppManifest::parse("null"),
        Err(ParseError::NotAnObject { .. })
    ));
}

#[test]
fn wrong_types_name_the_field_and_where_it_is() {
    let err = McpAppManifest::parse("{\n  \"id\": \"a\",\n  \"startupTimeoutSeconds\": \"10\"\n}")
        .unwrap_err();
    match &err {
        ParseError::Type {
            field,
            position,
            message,
        } => {
            assert_eq!(field, "startupTimeoutSeconds");
            assert_eq!(position.map(|p| (p.line, p.column)), Some((3, 28)));
            assert!(message.contains("invalid type"), "{message}");
        }
        other => panic!("expected a type error, got {other:?}"),
    }
    let err = McpAppManifest::parse(r#"{"id":"a","arguments":["ok", 5]}"#).unwrap_err();
    assert!(
        matches!(&err, ParseError::Type { field, .. } if field == "arguments[1]"),
        "{err:?}"
    );
}

#[test]
fn comments_trailing_commas_and_a_byte_order_mark_are_accepted() {
    let m = parse("\u{feff}{\n // the id\n \"id\": \"c\", /* inline */\n \"tags\": [\"a\",],\n}");
    assert_eq!(m.id.as_deref(), Some("c"));
    assert_eq!(m.tags, ["a"]);
}

#[test]
fn unknown_fields_warn_with_a_suggestion_and_schema_is_silent() {
    let parsed = McpAppManifest::parse(
        "{\n  \"$schema\": \"./manifest.schema.json\",\n  \"id\": \"a\",\n  \"comand\": \"node\",\n  \"Id\": \"b\",\n  \"flavour\": 1\n}",
    )
    .unwrap();
    let messages: Vec<_> = parsed.findings.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "unknown field `comand`; did you mean `command`?",
            "unknown field `Id`; field names are case-sensitive: did you mean `id`?",
            "unknown field `flavour` is ignored",
        ]
    );
    assert!(
        parsed
            .findings
            .iter()
            .all(|f| f.severity == Severity::Warning)
    );
    let first = parsed.findings[0].position.unwrap();
    assert_eq!((first.line, first.column), (4, 3));
    // The unknown field does not bind, so `command` stays unset.
    assert_eq!(parsed.manifest.command, None);
    assert_eq!(parsed.manifest.id.as_deref(), Some("a"));
}

#[test]
fn metadata_is_free_form_and_unchecked() {
    let parsed =
        McpAppManifest::parse(r#"{"id":"a","metadata":{"anything":{"goes":[1,null]}}}"#).unwrap();
    assert!(parsed.findings.is_empty());
    assert_eq!(
        parsed.manifest.metadata["anything"]["goes"][1],
        serde_json::Value::Null
    );
}

#[test]
fn duplicate_keys_last_one_wins() {
    let m = parse(r#"{"id":"first","id":"second"}"#);
    assert_eq!(m.id.as_deref(), Some("second"));
}

#[test]
fn field_positions_point_at_values() {
    let parsed = McpAppManifest::parse("{\n  \"id\": \"a\",\n  \"transport\": \"sse\"\n}").unwrap();
    let p = parsed.field_position("transport").unwrap();
    assert_eq!((p.line, p.column), (3, 16));
    assert_eq!(parsed.field_position("command"), None);
    assert_eq!(
        (parsed.root_position().line, parsed.root_position().column),
        (1, 1)
    );
}

#[test]
fn display_name_falls_back_to_the_id() {
    let m = parse(r#"{"id":"no-name"}"#);
    assert_eq!(m.display_name(), "no-name");
    let m = parse(r#"{"id":"x","name":"  "}"#);
    assert_eq!(m.display_name(), "x");
    let m = parse(r#"{"id":"x","name":"Named"}"#);
    assert_eq!(m.display_name(), "Named");
}

#[test]
fn an_install_record_round_trips_and_its_fields_are_checked() {
    let text = r#"{
        "id": "time", "command": ".mcpapp-runtime/1/venv/bin/mcp-server-time",
        "environment": {"TOKEN": "secret:TOKEN"},
        "install": {"source": "pypi", "requested": "pypi:mcp-server-time", "identifier": "mcp-server-time",
                    "version": "2026.10.19", "integrity": "sha256-ab", "inputs": {"tz": "UTC"},
                    "secretInputs": ["token"], "instaledAt": "typo"}
    }"#;
    let parsed = mcpapp_manifest::McpAppManifest::parse(text).unwrap();
    let record = parsed.manifest.install.clone().unwrap();
    assert_eq!(record.version, "2026.10.19");
    assert_eq!(record.inputs["tz"], "UTC");
    assert_eq!(record.secret_inputs, ["token"]);
    assert_eq!(parsed.findings.len(), 1, "{:?}", parsed.findings);
    assert!(
        parsed.findings[0].message.contains("installedAt"),
        "{}",
        parsed.findings[0].message
    );
    let again = mcpapp_manifest::McpAppManifest::parse(&parsed.manifest.to_json_pretty()).unwrap();
    assert_eq!(again.manifest, parsed.manifest);
    assert_eq!(
        mcpapp_manifest::secret_reference(&parsed.manifest.environment["TOKEN"]),
        Some("TOKEN")
    );
}
