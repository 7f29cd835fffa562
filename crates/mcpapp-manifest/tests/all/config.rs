//! The `McpApps` configuration section: defaults, binding rules and findings.

use mcpapp_manifest::{ConfigDocument, McpAppEntryConfig, McpAppsConfig, ParseError, Severity};

use crate::SEED_APPSETTINGS;

fn mcp_apps(text: &str) -> mcpapp_manifest::ParsedSection<McpAppsConfig> {
    ConfigDocument::parse(text)
        .expect("config parses")
        .mcp_apps()
        .expect("section binds")
}

#[test]
fn config_defaults_are_the_originals() {
    let c = McpAppsConfig::default();
    assert!(!c.enabled);
    assert_eq!(c.discovery_paths, ["./mcpapps"]);
    assert_eq!(c.allowlist_semantics, "legacy");
    assert!(c.allow.is_empty() && c.deny.is_empty() && c.entries.is_empty());
    assert_eq!(c.max_manifest_bytes, 1024 * 1024);
}

#[test]
fn the_manifest_size_limit_is_a_setting() {
    let section = mcp_apps(r#"{"McpApps": {"Enabled": true, "maxmanifestbytes": 4096}}"#);
    assert!(section.findings.is_empty(), "{:?}", section.findings);
    assert_eq!(section.value.max_manifest_bytes, 4096);
    let err = ConfigDocument::parse(r#"{"McpApps": {"MaxManifestBytes": -1}}"#)
        .unwrap()
        .mcp_apps()
        .unwrap_err();
    assert!(
        err.to_string().contains("McpApps.MaxManifestBytes"),
        "{err}"
    );
}

#[test]
fn entry_defaults_enable_with_no_overrides() {
    let e = McpAppEntryConfig::default();
    assert!(e.enabled);
    assert_eq!(
        (
            &e.transport,
            &e.command,
            &e.url,
            &e.tool_name_prefix,
            &e.arguments,
            &e.working_directory
        ),
        (&None, &None, &None, &None, &None, &None)
    );
    assert_eq!(
        (e.startup_timeout_seconds, e.request_timeout_seconds),
        (None, None)
    );
    assert!(e.environment.is_empty() && e.headers.is_empty());
}

#[test]
fn seed_appsettings_load_verbatim() {
    let section = mcp_apps(SEED_APPSETTINGS);
    assert!(section.findings.is_empty(), "{:?}", section.findings);
    let c = section.value;
    assert!(c.enabled);
    assert_eq!(c.discovery_paths, ["./mcpapps"]);
    assert_eq!(c.allow, ["*"]);
    let entry = &c.entries["grocery-inventory"];
    assert!(entry.enabled);
    assert_eq!(entry.url.as_deref(), Some("https://localhost:5001/mcp"));
    assert_eq!(entry.tool_name_prefix.as_deref(), Some("grocery."));
    assert_eq!(entry.startup_timeout_seconds, Some(15));
}

#[test]
fn the_section_may_sit_under_openclaw_and_keys_ignore_case() {
    let section = mcp_apps(
        r#"{ "openclaw": { "mcpapps": {
              "enabled": true, "DISCOVERYPATHS": ["a", "b"], "allowListSemantics": "Strict",
              "entries": { "App-One": { "enabled": false, "toolnameprefix": "one." } } } } }"#,
    );
    assert!(section.findings.is_empty(), "{:?}", section.findings);
    let c = section.value;
    assert!(c.enabled);
    assert_eq!(c.discovery_paths, ["a", "b"]);
    assert_eq!(c.allowlist_semantics, "Strict");
    // Entry keys are app ids and keep their case.
    let entry = &c.entries["App-One"];
    assert!(!entry.enabled);
    assert_eq!(entry.tool_name_prefix.as_deref(), Some("one."));
}

#[test]
fn a_configured_path_list_replaces_the_default() {
    let c = mcp_apps(r#"{"McpApps":{"Enabled":true,"DiscoveryPaths":["/opt/apps"]}}"#).value;
    assert_eq!(c.discovery_paths, ["/opt/apps"]);
}

#[test]
fn unknown_keys_warn_with_suggestions_and_positions() {
    let section = mcp_apps(
        "{\n \"McpApps\": {\n  \"Enabled\": true,\n  \"Alow\": [\"*\"],\n  \"Entries\": { \"a\": { \"Comand\": \"x\" } }\n },\n \"Logging\": {}\n}",
    );
    let messages: Vec<_> = section
        .findings
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "unknown key `Alow` in `McpApps`; did you mean `Allow`?",
            "unknown key `Comand` in `McpApps.Entries.a`; did you mean `Command`?",
        ]
    );
    let first = section.findings[0].position.unwrap();
    assert_eq!((first.line, first.column), (4, 3));
    assert!(
        section
            .findings
            .iter()
            .all(|f| f.severity == Severity::Warning)
    );
}

#[test]
fn a_missing_enabled_key_keeps_apps_off_and_says_so() {
    let section = mcp_apps(r#"{"McpApps":{"DiscoveryPaths":["x"]}}"#);
    assert!(!section.value.enabled);
    assert_eq!(section.findings.len(), 1);
    assert!(
        section.findings[0]
            .message
            .contains("`McpApps.Enabled` is not set")
    );

    let section = mcp_apps(r#"{"Logging":{}}"#);
    assert!(!section.value.enabled);
    assert_eq!(section.position, None);
    assert!(section.findings[0].message.contains("no `McpApps` section"));
}

#[test]
fn malformed_config_fails_with_line_and_column() {
    let err =
        ConfigDocument::parse("{\n  \"McpApps\": {\n    \"Enabled\": tru\n  }\n}").unwrap_err();
    let p = err.position().unwrap();
    assert_eq!(p.line, 3);
    let doc = ConfigDocument::parse("{\n \"McpApps\": {\n  \"Enabled\": \"yes\"\n }\n}").unwrap();
    match doc.mcp_apps().unwrap_err() {
        ParseError::Type {
            field, position, ..
        } => {
            assert_eq!(field, "McpApps.Enabled");
            assert_eq!(position.map(|p| (p.line, p.column)), Some((3, 14)));
        }
        other => panic!("{other:?}"),
    }
    let doc = ConfigDocument::parse(r#"{"McpApps": {"Allow": [null]}}"#).unwrap();
    assert!(
        matches!(doc.mcp_apps(), Err(ParseError::Type { field, .. }) if field == "McpApps.Allow[0]")
    );
    let doc = ConfigDocument::parse(r#"{"McpApps": 5}"#).unwrap();
    assert!(matches!(doc.mcp_apps(), Err(ParseError::Type { .. })));
}

#[test]
fn other_sections_bind_generically() {
    #[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "PascalCase")]
    struct Gateway {
        #[serde(default)]
        bind: Option<String>,
    }
    let doc = ConfigDocument::parse(r#"{"gateway": {"BIND": "127.0.0.1:0", "Extra": 1}}"#).unwrap();
    let section = doc.section::<Gateway>("Gateway").unwrap();
    assert_eq!(section.value.bind.as_deref(), Some("127.0.0.1:0"));
    assert_eq!(section.findings.len(), 1);
}

#[test]
fn registries_and_the_secrets_file_bind_case_insensitively() {
    let parsed = mcp_apps(
        r#"{"McpApps": {"Enabled": true, "registries": [{"name": "local", "URL": "http://127.0.0.1:9/"}],
            "SecretsFile": "state/secrets.json", "Registries2": 1}}"#,
    );
    assert_eq!(parsed.value.registries.len(), 1);
    assert_eq!(parsed.value.registries[0].name, "local");
    assert_eq!(parsed.value.registries[0].url, "http://127.0.0.1:9/");
    assert_eq!(
        parsed.value.secrets_file.as_deref(),
        Some("state/secrets.json")
    );
    assert_eq!(parsed.findings.len(), 1, "{:?}", parsed.findings);
    assert!(parsed.findings[0].message.contains("Registries2"));
}

#[test]
fn an_entry_reads_its_oauth_settings_case_insensitively() {
    let section = mcp_apps(
        r#"{"McpApps": {"Enabled": true, "Entries": {"crm": {"oauth": {
            "enabled": true, "clientid": "gw-client", "CLIENTSECRET": "env:CRM_SECRET",
            "Issuer": "https://login.example.com", "Scopes": ["crm.read", "crm.write"],
            "RedirectBaseUrl": "https://gw.example.com"
        }}}}}"#,
    );
    assert!(section.findings.is_empty(), "{:?}", section.findings);
    let oauth = &section.value.entries["crm"].oauth;
    assert!(oauth.is_enabled());
    assert_eq!(oauth.client_id.as_deref(), Some("gw-client"));
    assert_eq!(oauth.client_secret.as_deref(), Some("env:CRM_SECRET"));
    assert_eq!(oauth.issuer.as_deref(), Some("https://login.example.com"));
    assert_eq!(oauth.scopes, ["crm.read", "crm.write"]);
    assert_eq!(
        oauth.redirect_base_url.as_deref(),
        Some("https://gw.example.com")
    );
    assert!(oauth.problems().is_empty(), "{:?}", oauth.problems());

    let refused = mcp_apps(r#"{"McpApps": {"Entries": {"crm": {"OAuth": {"Enabled": false}}}}}"#);
    assert!(!refused.value.entries["crm"].oauth.is_enabled());
    assert!(McpAppEntryConfig::default().oauth.is_enabled());
    let typo = mcp_apps(r#"{"McpApps": {"Entries": {"crm": {"OAuth": {"ClientSecrets": "x"}}}}}"#);
    assert!(
        typo.findings
            .iter()
            .any(|f| f.message.contains("did you mean `ClientSecret`")),
        "{:?}",
        typo.findings
    );
}

#[test]
fn oauth_settings_name_their_problems_without_quoting_a_secret() {
    let oauth = mcpapp_manifest::OAuthEntryConfig {
        client_secret: Some("s3cr3t-value".into()),
        client_id: Some(" ".into()),
        scopes: vec!["a b".into()],
        redirect_base_url: Some("https://gw.example.com/path".into()),
        ..Default::default()
    };
    let problems = oauth.problems();
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(problems[0].contains("`OAuth.ClientSecret` must be an `env:NAME` reference"));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`OAuth.ClientId` is blank"))
    );
    assert!(problems.iter().any(|p| p.contains("`OAuth.Scopes`")));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`OAuth.RedirectBaseUrl`"))
    );
    assert!(problems.iter().all(|p| !p.contains("s3cr3t")));
    let orphan = mcpapp_manifest::OAuthEntryConfig {
        client_secret: Some("env:X".into()),
        ..Default::default()
    };
    assert_eq!(
        orphan.problems(),
        ["`OAuth.ClientSecret` is set without `OAuth.ClientId`"]
    );
}
