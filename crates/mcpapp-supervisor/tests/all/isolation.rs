//! Apps are third-party code: a child sees only the variables it may inherit and its own
//! environment, never the gateway's credentials or another app's secrets.

use std::collections::BTreeSet;

use mcpapp_manifest::{Lifecycle, McpAppEntryConfig, McpAppsConfig};
use mcpapp_supervisor::{AppHandle, Supervisor};
use mcpapp_testkit::{AppsDir, bin, wait_state};
use serde_json::{Value, json};

use crate::{fast_policy, logging};

/// The gateway's environment in these tests: what an operator typically has set.
const GATEWAY_ENV: &[(&str, &str)] = &[
    ("PATH", "/usr/bin:/bin"),
    ("HOME", "/home/operator"),
    ("LANG", "C.UTF-8"),
    ("LC_TIME", "C"),
    ("MCPAPP_TOKEN", "gateway-token-value"),
    ("OPENAI_API_KEY", "model-key-value"),
    ("OTHER_SECRET", "neighbour-secret-value"),
    ("AWS_SECRET_ACCESS_KEY", "cloud-secret-value"),
    ("NODE_OPTIONS", "--max-old-space-size=64"),
];

fn lookup(name: &str) -> Option<String> {
    GATEWAY_ENV
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| (*v).to_owned())
}

async fn call(app: &AppHandle, tool: &str, args: Value) -> Value {
    app.call_tool(tool, args.as_object().cloned(), None)
        .await
        .unwrap()
        .structured_content
        .unwrap()
}

async fn names(app: &AppHandle) -> BTreeSet<String> {
    let listed = call(app, "list_env", json!({})).await;
    listed["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn children_see_only_their_allowlist_and_their_own_environment() {
    logging();
    let apps = AppsDir::new();
    let fixture = bin("fixture-app");
    apps.stdio_app(
        "probe",
        &fixture,
        &["stdio"],
        r#"{"environment": {"PLAIN": "visible", "REGION": "env:DEPLOY_REGION"}}"#,
    );
    apps.stdio_app("neighbour", &fixture, &["stdio"], "{}");
    let mut config = McpAppsConfig {
        enabled: true,
        allow_manifest_env: vec!["DEPLOY_*".into()],
        ..McpAppsConfig::default()
    };
    config.entries.insert(
        "neighbour".into(),
        McpAppEntryConfig {
            environment: [("NEIGHBOUR_SECRET".to_owned(), "env:OTHER_SECRET".to_owned())].into(),
            inherit_environment: vec!["NODE_*".into()],
            ..McpAppEntryConfig::default()
        },
    );
    let supervisor = Supervisor::builder()
        .config(&config)
        .policy(fast_policy())
        .inherited_environment(GATEWAY_ENV.iter().copied())
        .env_lookup(|name| {
            lookup(name).or_else(|| (name == "DEPLOY_REGION").then(|| "eu-1".to_owned()))
        })
        .build();
    supervisor.load(&apps.discover_with(config.clone()));
    let probe = supervisor.get("probe").unwrap();
    let neighbour = supervisor.get("neighbour").unwrap();
    wait_state(probe.watch(), Lifecycle::Running).await;
    wait_state(neighbour.watch(), Lifecycle::Running).await;

    // Exactly the default allowlist's names that are set, plus its own.
    let expected: BTreeSet<String> = ["HOME", "LANG", "LC_TIME", "PATH", "PLAIN", "REGION"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(names(&probe).await, expected);
    for name in [
        "MCPAPP_TOKEN",
        "OPENAI_API_KEY",
        "OTHER_SECRET",
        "NEIGHBOUR_SECRET",
        "AWS_SECRET_ACCESS_KEY",
        "NODE_OPTIONS",
    ] {
        let got = call(&probe, "get_env", json!({ "name": name })).await;
        assert_eq!(got["value"], Value::Null, "{name} reached the probe");
    }
    let region = call(&probe, "get_env", json!({"name": "REGION"})).await;
    assert_eq!(region["value"], "eu-1");

    // The operator's entry hands its app one secret and one more inherited name.
    let secret = call(&neighbour, "get_env", json!({"name": "NEIGHBOUR_SECRET"})).await;
    assert_eq!(secret["value"], "neighbour-secret-value");
    let seen = names(&neighbour).await;
    assert!(seen.contains("NODE_OPTIONS"), "{seen:?}");
    assert!(
        !seen.contains("OTHER_SECRET") && !seen.contains("MCPAPP_TOKEN"),
        "{seen:?}"
    );
    supervisor.shutdown().await;
}

#[tokio::test]
async fn credentials_are_withheld_even_when_everything_is_inherited() {
    logging();
    let apps = AppsDir::new();
    apps.stdio_app("greedy", &bin("fixture-app"), &["stdio"], "{}");
    let config = McpAppsConfig {
        enabled: true,
        inherit_environment: vec!["*".into()],
        ..McpAppsConfig::default()
    };
    let supervisor = Supervisor::builder()
        .config(&config)
        .policy(fast_policy())
        .inherited_environment(GATEWAY_ENV.iter().copied())
        .build();
    supervisor.load(&apps.discover_with(config.clone()));
    let greedy = supervisor.get("greedy").unwrap();
    wait_state(greedy.watch(), Lifecycle::Running).await;
    let seen = names(&greedy).await;
    assert!(seen.contains("AWS_SECRET_ACCESS_KEY"), "{seen:?}");
    assert!(
        !seen.contains("MCPAPP_TOKEN") && !seen.contains("OPENAI_API_KEY"),
        "{seen:?}"
    );
    supervisor.shutdown().await;
}
