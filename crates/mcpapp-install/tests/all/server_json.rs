//! `server.json` documents modelled on real published ones, planned against the real npm
//! registry and PyPI: packages with runtime and package arguments, environment variables with
//! secrets and choices, a remote with headers and URL variables; and the documents refused.

use std::path::Path;

use expect_test::expect;
use mcpapp_install::{InstallError, PackageChoice, Plan, Request, Source, resolve};
use mcpapp_manifest::McpAppManifest;
use serde_json::json;

use crate::{Place, fixture};

/// Plans `document` (written to a file in `place`).
async fn plan(place: &Place, document: &str, package: PackageChoice) -> Result<Plan, InstallError> {
    let file = place.dir.path().join("server.json");
    std::fs::write(&file, document).unwrap();
    let source = Source::parse(&file.display().to_string(), Path::new("/")).unwrap();
    place
        .installer(false)
        .plan(
            &source,
            &Request {
                package,
                ..Request::default()
            },
        )
        .await
}

fn given(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The consent text with the temporary folder replaced.
fn consent(place: &Place, plan: &Plan, pairs: &[(&str, &str)]) -> String {
    let values = resolve(&plan.inputs, &given(pairs), None).unwrap();
    plan.consent(&values)
        .unwrap()
        .replace(&place.dir.path().display().to_string(), "<tmp>")
}

#[tokio::test]
async fn a_pypi_package_with_a_runner_hint_runs_from_its_own_environment() {
    let place = Place::new();
    let plan = plan(&place, &fixture("server-time.json"), PackageChoice::Auto)
        .await
        .unwrap();
    assert_eq!(plan.id, "server-time");
    assert_eq!(plan.package_type.as_deref(), Some("pypi"));
    assert!(plan.integrity.as_deref().unwrap().starts_with("sha256-"));
    let text = consent(&place, &plan, &[("timezone", "Europe/Paris")]);
    let text = text.replace(plan.integrity.as_deref().unwrap(), "<integrity>");
    expect![[r#"
        Install io.github.modelcontextprotocol/server-time 0.6.2 as app 'server-time' in <tmp>/apps/server-time
          from: server.json io.github.modelcontextprotocol/server-time (pypi package), registry https://pypi.org
          integrity: <integrity>
        It first runs (no shell):
          python3 -m venv <tmp>/apps/server-time/.mcpapp-runtime/0.6.2/venv (or uv venv), then <tmp>/apps/server-time/.mcpapp-runtime/0.6.2/venv/bin/python -m pip install mcp-server-time==0.6.2
        The gateway then starts it as (no shell):
          .mcpapp-runtime/0.6.2/venv/bin/mcp-server-time --local-timezone Europe/Paris
        Permissions it requests: none beyond its own folder and state folder
        Sandbox: the gateway's app sandbox on Linux (McpApps.Isolation): it reads its folder and the system's programs, writes only its state folder, and has no network; grant more under McpApps.Entries.server-time.Isolation"#]]
    .assert_eq(&text);
    // The default applies when nothing is given.
    assert!(consent(&place, &plan, &[]).contains("--local-timezone UTC"));
}

#[tokio::test]
async fn a_version_missing_from_npm_is_named_with_the_latest_one() {
    let place = Place::new();
    // The upstream document pins 2.0.0, which was never published to npm.
    let err = plan(
        &place,
        &fixture("server-everything.json"),
        PackageChoice::Auto,
    )
    .await
    .unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with("version 2.0.0 of npm package @modelcontextprotocol/server-everything was not found in https://registry.npmjs.org; the latest version is "),
        "{shown}"
    );
}

#[tokio::test]
async fn of_two_packages_the_stdio_one_is_chosen_and_runner_arguments_are_noted() {
    let place = Place::new();
    let document = fixture("server-everything.json").replace("2.0.0", "2026.8.31");
    let plan = plan(&place, &document, PackageChoice::Npm).await.unwrap();
    let text = consent(&place, &plan, &[]);
    assert!(
        text.contains(
            "\n  .mcpapp-runtime/2026.8.31/node_modules/.bin/mcp-server-everything stdio\n"
        ),
        "{text}"
    );
    assert!(!text.contains("streamableHttp"), "{text}");
    assert_eq!(
        plan.integrity.as_deref(),
        Some(
            "sha512-5U3OZh8Xq0Li4nA26l6uNvV9/1suMDuWSn+NjLZIhzinhMY6N3A4DCrxVecBGPf2PsNFKTEv5krxGPRwzxc7jQ=="
        )
    );

    let plan = plan_vanilla(&place).await;
    assert_eq!(plan.name, "Basic MCP App (vanilla JS)");
    let text = consent(&place, &plan, &[]);
    assert!(
        text.contains("node_modules/.bin/mcp-server-basic-vanillajs --stdio\n"),
        "{text}"
    );
    assert!(
        text.contains("Note: runtimeArguments (for npx) are not used"),
        "{text}"
    );
}

async fn plan_vanilla(place: &Place) -> Plan {
    plan(
        place,
        &fixture("server-basic-vanillajs.json"),
        PackageChoice::Auto,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn environment_secrets_choices_and_repeated_arguments_become_inputs() {
    let place = Place::new();
    let document = json!({
        "name": "io.github.example/everything-configured",
        "description": "server-everything with settings",
        "version": "2026.8.31",
        "packages": [{
            "registryType": "npm",
            "identifier": "@modelcontextprotocol/server-everything",
            "version": "2026.8.31",
            "transport": {"type": "stdio"},
            "packageArguments": [
                {"type": "positional", "value": "stdio"},
                {"type": "named", "name": "--root", "valueHint": "root_dir", "isRepeated": true, "format": "filepath"},
                {"type": "named", "name": "--token", "value": "{token}", "variables": {"token": {"isSecret": true}}}
            ],
            "environmentVariables": [
                {"name": "API_KEY", "description": "The service's key", "isSecret": true, "isRequired": true},
                {"name": "LOG_LEVEL", "choices": ["debug", "info"], "default": "info"},
                {"name": "ENDPOINT", "value": "https://{region}.example.com", "variables": {"region": {"choices": ["eu", "us"], "default": "eu"}}}
            ]
        }]
    })
    .to_string();
    let plan = plan(&place, &document, PackageChoice::Auto).await.unwrap();
    let keys: Vec<(&str, bool, bool)> = plan
        .inputs
        .iter()
        .map(|i| (i.key.as_str(), i.secret, i.required))
        .collect();
    assert_eq!(
        keys,
        [
            ("root_dir", false, false),
            ("token", true, false),
            ("API_KEY", true, true),
            ("LOG_LEVEL", false, false),
            ("region", false, false)
        ]
    );
    let missing = resolve(&plan.inputs, &[], None).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "missing required input: API_KEY; pass --set API_KEY=…"
    );
    let bad = resolve(
        &plan.inputs,
        &given(&[("API_KEY", "k"), ("LOG_LEVEL", "trace")]),
        None,
    );
    assert_eq!(
        bad.unwrap_err().to_string(),
        "input LOG_LEVEL must be one of debug, info"
    );
    let text = consent(
        &place,
        &plan,
        &[
            ("API_KEY", "k3y-9"),
            ("root_dir", "/a"),
            ("root_dir", "/b"),
            ("token", "t0k"),
            ("region", "us"),
        ],
    );
    expect![[r#"
        The gateway then starts it as (no shell):
          .mcpapp-runtime/2026.8.31/node_modules/.bin/mcp-server-everything stdio --root /a --root /b --token <secret>
          environment API_KEY=<secret>
          environment ENDPOINT=https://us.example.com
          environment LOG_LEVEL=info
        Permissions it requests beyond its own folder and state folder (written into its manifest; granted only in the operator's configuration):
          read=/a  (input root_dir, a path the app reads)
          read=/b  (input root_dir, a path the app reads)
        Sandbox: the gateway's app sandbox on Linux (McpApps.Isolation): it reads its folder and the system's programs, writes only its state folder, and has no network; grant more under McpApps.Entries.everything-configured.Isolation
        Secret inputs (token, API_KEY) go to the gateway's secret store, not into the app folder"#]]
    .assert_eq(&text[text.find("The gateway").unwrap()..]);
    assert!(!text.contains("k3y-9") && !text.contains("t0k"));
}

#[tokio::test]
async fn a_remote_with_url_variables_and_a_secret_header_keeps_the_secret_apart() {
    let place = Place::new();
    let document = json!({
        "name": "io.github.example/tenant-remote",
        "description": "A hosted server per tenant",
        "version": "1.4.0",
        "remotes": [
            {"type": "sse", "url": "https://sse.example.com/sse"},
            {
                "type": "streamable-http",
                "url": "https://{tenant}.mcp.example.com/mcp",
                "variables": {"tenant": {"description": "Your tenant", "isRequired": true}},
                "headers": [
                    {"name": "Authorization", "value": "Bearer {api_key}", "variables": {"api_key": {"isRequired": true}}},
                    {"name": "X-Region", "choices": ["eu", "us"], "default": "eu"}
                ]
            }
        ]
    })
    .to_string();
    let remote = plan(&place, &document, PackageChoice::Auto).await.unwrap();
    assert_eq!(remote.transport, "http");
    assert_eq!(remote.package_type.as_deref(), Some("remote"));
    let values = resolve(
        &remote.inputs,
        &given(&[("tenant", "acme"), ("api_key", "r3mote-key")]),
        None,
    )
    .unwrap();
    let installed = place
        .installer(false)
        .install(&remote, &values, &|_| {})
        .await
        .unwrap();
    let manifest =
        McpAppManifest::parse(&std::fs::read_to_string(&installed.manifest_path).unwrap())
            .unwrap()
            .manifest;
    assert_eq!(manifest.transport, "http");
    assert_eq!(
        manifest.url.as_deref(),
        Some("https://acme.mcp.example.com/mcp")
    );
    // A header named like a credential is secret even when the document does not say so.
    assert_eq!(
        manifest.headers["Authorization"],
        "secret:header-Authorization"
    );
    assert_eq!(manifest.headers["X-Region"], "eu");
    assert!(place.files_containing("r3mote-key").is_empty());
    let stored = place
        .store()
        .get("tenant-remote", &installed.folder)
        .unwrap();
    assert_eq!(stored["header-Authorization"], "Bearer r3mote-key");
    assert!(installed.folder.join("server.json").is_file());

    let only_sse = json!({"name": "a.b/c", "version": "1", "remotes": [{"type": "sse", "url": "https://x/sse"}]});
    let err = plan(&place, &only_sse.to_string(), PackageChoice::Auto)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("remotes[0] is 'sse'"), "{err}");
}

#[tokio::test]
async fn unknown_registry_types_and_old_documents_are_refused_where_they_are_written() {
    let place = Place::new();
    let cargo = "{\n  \"name\": \"io.github.example/crate-server\",\n  \"version\": \"0.3.0\",\n  \"packages\": [\n    {\n      \"registryType\": \"cargo\",\n      \"identifier\": \"crate-server\",\n      \"version\": \"0.3.0\",\n      \"transport\": {\"type\": \"stdio\"}\n    }\n  ]\n}";
    let err = plan(&place, cargo, PackageChoice::Auto).await.unwrap_err();
    let InstallError::Format(format) = &err else {
        panic!("{err}")
    };
    assert_eq!(format.field, "packages[0].registryType");
    assert_eq!((format.line, format.column), (6, 23));
    assert!(
        format.message.starts_with("registryType 'cargo' is not supported: the gateway installs npm, pypi and mcpb packages"),
        "{err}"
    );
    assert!(err.to_string().ends_with("server.json:6:23: packages[0].registryType: registryType 'cargo' is not supported: the gateway installs npm, pypi and mcpb packages and streamable-http remotes"), "{err}");

    let old = "{\n  \"name\": \"io.github.example/old\",\n  \"version\": \"1.0.0\",\n  \"packages\": [{\"registry_type\": \"npm\", \"identifier\": \"x\"}]\n}";
    let err = plan(&place, old, PackageChoice::Auto).await.unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("server.json:4:"), "{shown}");
    assert!(
        shown.contains("packages[0].registry_type: this document uses the snake_case names"),
        "{shown}"
    );

    let wrong_type = "{\"name\": \"a.b/c\", \"version\": \"1\", \"packages\": [{\"registryType\": \"npm\", \"identifier\": 7, \"transport\": {\"type\": \"stdio\"}}]}";
    let err = plan(&place, wrong_type, PackageChoice::Auto)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("server.json:1:"), "{err}");
    assert!(
        err.to_string()
            .contains("packages[0].identifier: invalid type: integer `7`"),
        "{err}"
    );
    assert!(!place.apps().exists());
}

#[tokio::test]
async fn a_toolhive_profile_and_a_filepath_input_become_the_apps_requests() {
    let place = Place::new();
    let mut document: serde_json::Value =
        serde_json::from_str(&fixture("server-time.json")).unwrap();
    document["packages"][0]["environmentVariables"] = json!([
        {"name": "TZ_DATABASE", "format": "filepath", "description": "A tzdata file"}
    ]);
    document["_meta"] = json!({
        "io.modelcontextprotocol.registry/publisher-provided": {
            "io.github.stacklok": {
                "ghcr.io/acme/time:0.6.2": {
                    "tier": "Community",
                    "permissions": {
                        "read": ["/usr/share/zoneinfo-extra"],
                        "network": {"outbound": {"allow_host": [".time.example"], "allow_port": [443]}}
                    }
                }
            }
        }
    });
    let plan = plan(&place, &document.to_string(), PackageChoice::Auto)
        .await
        .unwrap();
    assert_eq!(
        plan.permissions,
        [
            "read=/usr/share/zoneinfo-extra (the publisher's ToolHive profile)",
            "net=time.example:443 (the publisher's ToolHive profile)",
            "net=*.time.example:443 (the publisher's ToolHive profile)",
            "read the path given for input TZ_DATABASE (a path the app reads)"
        ]
    );
    let text = consent(&place, &plan, &[("TZ_DATABASE", "/srv/tz/db")]);
    let requests: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Permissions it requests"))
        .take_while(|l| !l.starts_with("Sandbox:"))
        .collect();
    expect![[r#"
        Permissions it requests beyond its own folder and state folder (written into its manifest; granted only in the operator's configuration):
          read=/usr/share/zoneinfo-extra  (the publisher's ToolHive profile)
          net=time.example:443  (the publisher's ToolHive profile)
          net=*.time.example:443  (the publisher's ToolHive profile)
          read=/srv/tz/db  (input TZ_DATABASE, a path the app reads)"#]]
    .assert_eq(&requests.join("\n"));
    // The manifest's request is what an operator grants with --grant-requested.
    let values = resolve(&plan.inputs, &given(&[("TZ_DATABASE", "/srv/tz/db")]), None).unwrap();
    let requested: Vec<mcpapp_install::Permission> = plan
        .permission_requests(&values)
        .into_iter()
        .map(|r| r.permission)
        .collect();
    expect![[r#"{"filesystem":{"read":["/usr/share/zoneinfo-extra","/srv/tz/db"]},"network":{"tcpPorts":[],"hosts":["*.time.example:443","time.example:443"]}}"#]]
    .assert_eq(&serde_json::to_string(&mcpapp_install::request_of(&requested)).unwrap());
}
