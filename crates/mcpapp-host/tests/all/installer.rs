//! The "Add apps" view's routes (`/installer/…`): behind the token, a plan with its inputs,
//! an install run as a job, bad values refused naming the input, secret values in no answer
//! or job line, and removal.

use std::path::Path;
use std::time::Duration;

use mcpapp_discovery::Discovery;
use mcpapp_host::Gateway;
use mcpapp_install::{Installer, SecretStore};
use mcpapp_manifest::{McpAppsConfig, RegistryConfig};
use mcpapp_testkit::{PATIENCE, TinyBundle, eventually};
use serde_json::{Value, json};

const TOKEN: &str = "installer-token-41aa";
const SECRET: &str = "Bearer inst4ller-s3cret";

async fn request(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client.request(method.parse().unwrap(), url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert!(
        !text.contains("inst4ller-s3cret"),
        "an answer holds the secret: {text}"
    );
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Polls a job until it ends.
async fn finish(base: &str, job: &str) -> Value {
    let mut body = Value::Null;
    let ended = eventually(PATIENCE, async || {
        let (status, now) = request(
            "GET",
            &format!("{base}/installer/jobs/{job}"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!(status, 200, "{now}");
        body = now;
        body["state"] != "running"
    })
    .await;
    assert!(ended, "the job did not end: {body}");
    body
}

/// A gateway behind [`TOKEN`] whose "Add apps" routes install into `dir/apps`, secrets in
/// `dir/state`, without probe starts; and its base URL.
async fn start(dir: &Path, config: McpAppsConfig) -> (Gateway, String) {
    let apps = dir.join("apps");
    let discovery = Discovery::builder(config.clone())
        .discovery_paths(vec![apps.display().to_string()], "/")
        .build()
        .unwrap();
    let installer = Installer::builder(&apps, SecretStore::new(dir.join("state/secrets.json")))
        .config(config)
        .discovery(discovery.clone())
        .probe(false)
        .build()
        .unwrap();
    let gateway = Gateway::builder(discovery)
        .bind("127.0.0.1:0".parse().unwrap())
        .token(Some(TOKEN.to_owned()))
        .installer(installer)
        .drain(Duration::ZERO)
        .start()
        .await
        .unwrap();
    let base = format!("http://{}", gateway.local_addr());
    (gateway, base)
}

#[tokio::test]
async fn the_add_apps_routes_are_behind_the_token_and_keep_secrets_out_of_answers() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let config = McpAppsConfig {
        enabled: true,
        registries: vec![RegistryConfig {
            name: "nowhere".into(),
            url: "http://127.0.0.1:9".into(),
        }],
        ..McpAppsConfig::default()
    };
    // No probe: the remote endpoint of this test does not exist.
    let (gateway, base) = start(dir.path(), config).await;

    for (method, path) in [
        ("GET", "/installer/registries"),
        ("GET", "/installer/search?q=x"),
        ("POST", "/installer/plan"),
        ("POST", "/installer/jobs"),
        ("GET", "/installer/installed"),
    ] {
        let (status, _) = request(method, &format!("{base}{path}"), None, Some(json!({}))).await;
        assert_eq!(status, 401, "{method} {path}");
    }

    let (status, registries) = request(
        "GET",
        &format!("{base}/installer/registries"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(
        (status, registries),
        (
            200,
            json!([{"name": "nowhere", "url": "http://127.0.0.1:9"}])
        )
    );
    // A registry that does not answer is reported beside the (empty) results.
    let (status, found) = request(
        "GET",
        &format!("{base}/installer/search?q=x"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(found["servers"], json!([]));
    assert!(
        found["errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("cannot fetch"),
        "{found}"
    );

    let (status, plan) = request(
        "POST",
        &format!("{base}/installer/plan"),
        Some(TOKEN),
        Some(json!({"source": "http://127.0.0.1:9/mcp", "id": "remote-one"})),
    )
    .await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["id"], "remote-one");
    assert_eq!(plan["transport"], "http");
    assert_eq!(plan["permissions"], json!([]));
    assert_eq!(plan["inputs"][0]["key"], "authorization");
    assert_eq!(plan["inputs"][0]["secret"], true);

    let plan_id = plan["planId"].as_str().unwrap();
    let (status, refused) = request(
        "POST",
        &format!("{base}/installer/jobs"),
        Some(TOKEN),
        Some(json!({"planId": plan_id, "values": {"nope": "1"}})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        refused["error"],
        "this source has no input 'nope'; its inputs are: authorization"
    );

    let (status, started) = request(
        "POST",
        &format!("{base}/installer/jobs"),
        Some(TOKEN),
        Some(json!({"planId": plan_id, "values": {"authorization": SECRET}})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let done = finish(&base, started["job"].as_str().unwrap()).await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["result"]["id"], "remote-one");
    let manifest = std::fs::read_to_string(apps.join("remote-one/openclaw.mcpapp.json")).unwrap();
    assert!(
        manifest.contains("\"Authorization\": \"secret:header-Authorization\""),
        "{manifest}"
    );
    assert!(!manifest.contains("inst4ller-s3cret"));

    let (_, installed) = request(
        "GET",
        &format!("{base}/installer/installed"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(installed[0]["id"], "remote-one");
    assert_eq!(installed[0]["source"], "remote");

    let (status, started) = request(
        "POST",
        &format!("{base}/installer/jobs"),
        Some(TOKEN),
        Some(json!({"action": "uninstall", "id": "remote-one"})),
    )
    .await;
    assert_eq!(status, 202);
    let done = finish(&base, started["job"].as_str().unwrap()).await;
    assert_eq!(done["state"], "done", "{done}");
    assert!(!apps.join("remote-one").exists());
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_plan_and_the_install_say_what_the_app_requests_and_what_is_not_granted() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let bundle = dir.path().join("notes.mcpb");
    // A node server (never started here) that asks for a `directory`.
    TinyBundle::new("notes")
        .description("Reads your notes")
        .args(&["${user_config.notes_dir}"])
        .user_config(
            json!({"notes_dir": {"type": "directory", "title": "Notes folder", "required": true}}),
        )
        .script("process.exit(0);\n")
        .write(&bundle);
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    let config = McpAppsConfig {
        enabled: true,
        ..McpAppsConfig::default()
    };
    let (gateway, base) = start(dir.path(), config).await;

    let (status, plan) = request(
        "POST",
        &format!("{base}/installer/plan"),
        Some(TOKEN),
        Some(json!({"source": bundle.display().to_string()})),
    )
    .await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(
        plan["permissions"],
        json!(["read and write the path given for input notes_dir (a folder the app works in)"])
    );
    let (status, started) = request(
        "POST",
        &format!("{base}/installer/jobs"),
        Some(TOKEN),
        Some(
            json!({"planId": plan["planId"], "values": {"notes_dir": notes.display().to_string()}}),
        ),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let done = finish(&base, started["job"].as_str().unwrap()).await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(
        done["result"]["requested"],
        json!([format!("write={}", notes.display())])
    );
    let ungranted = done["result"]["ungranted"].to_string();
    assert!(
        ungranted.contains("grant it in McpApps.Entries.notes.Isolation.Write"),
        "{done}"
    );
    // The request is the app's, in its manifest; no grant is written anywhere by the page.
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(apps.join("notes/openclaw.mcpapp.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["permissions"]["filesystem"]["write"],
        json!([notes.display().to_string()])
    );
    gateway.shutdown().await;
}
