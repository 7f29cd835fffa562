//! The token store across restarts, on disk, and when an app disconnects, is uninstalled,
//! moves to another URL or another authorization server.

use std::time::Duration;

use mcpapp_manifest::AppId;
use mcpapp_oauth::{AppSettings, AuthState, NeedsReason, Next, TokenStore};
use serde_json::json;

use crate::support::{Harness, Refused, call_tool, key_file};

fn crm() -> AppId {
    AppId::new("crm").unwrap()
}

#[tokio::test]
async fn an_authorized_app_stays_authorized_across_a_restart() {
    // Confidential registration, so the restart must keep the client secret too.
    let harness = Harness::start(&["--auth-methods", "client_secret_basic"]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let done = harness.connect(&app).await;
    let token = app.bearer().await.unwrap().unwrap();
    drop(app);

    let restarted = Harness::client_on(&harness.dir, harness.clock.clone(), None);
    let app = restarted
        .app(crm(), harness.url(), AppSettings::new())
        .unwrap();
    assert_eq!(
        app.state(),
        AuthState::Authorized {
            issuer: done.issuer.clone(),
            scopes: done.scopes.clone(),
            more_scope: None
        }
    );
    assert_eq!(
        app.bearer().await.unwrap().unwrap().header_value(),
        token.header_value()
    );
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    assert_eq!(harness.count("authorize").await, 1);
    assert_eq!(harness.count("token").await, 1);

    // Renewing after the restart authenticates as the registered client with its secret.
    harness.clock.advance(Duration::from_secs(3590));
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    let seen = harness.seen().await["seen"].clone();
    let refresh = &seen["token"][1];
    assert_eq!(refresh["grantType"], "refresh_token");
    assert_eq!(refresh["authMethod"], "client_secret_basic");
    assert_eq!(refresh["clientId"], seen["token"][0]["clientId"]);
    assert_eq!(seen["register"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_store_file_is_sealed_and_only_its_owner_may_read_it() {
    let harness = Harness::start(&["--auth-methods", "client_secret_basic"]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    let file = harness.client.store().file_of(&crm());
    let bytes = std::fs::read(&file).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let secrets = harness.seen().await["seen"]["secrets"].clone();
    for secret in secrets.as_array().unwrap() {
        assert!(!text.contains(secret.as_str().unwrap()), "{secret} on disk");
    }
    assert!(!text.contains("client-"), "the client id is sealed too");
    assert!(!text.contains("127.0.0.1"), "the issuer is sealed too");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        for path in [file, harness.dir.path().join("oauth.key")] {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
    }
    // Another key cannot open it: the app starts unauthorized and the file is kept aside.
    let other_dir = tempfile::tempdir().unwrap();
    let other_key = key_file(&other_dir);
    let other = TokenStore::open(harness.dir.path(), &other_key).unwrap();
    assert!(!other.has(&crm()).unwrap());
}

#[tokio::test]
async fn tokens_are_never_sent_to_another_url_of_the_app() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    let restarted = Harness::client_on(&harness.dir, harness.clock.clone(), None);
    let elsewhere = url::Url::parse("http://127.0.0.1:9/mcp").unwrap();
    let moved = restarted.app(crm(), elsewhere, AppSettings::new()).unwrap();
    assert_eq!(moved.state(), AuthState::Anonymous);
    assert!(moved.bearer().await.unwrap().is_none());
    // Refusing OAuth ignores stored tokens as well.
    let refused = restarted
        .app(crm(), harness.url(), AppSettings::refused())
        .unwrap();
    assert!(refused.bearer().await.unwrap().is_none());
}

#[tokio::test]
async fn disconnecting_revokes_and_deletes_the_tokens() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    let token = app.bearer().await.unwrap().unwrap();
    app.disconnect().await.unwrap();
    assert_eq!(app.state(), AuthState::Anonymous);
    assert!(app.bearer().await.unwrap().is_none());
    assert!(!harness.client.store().file_of(&crm()).exists());
    let seen = harness.seen().await["seen"].clone();
    let hints: Vec<&str> = seen["revoke"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tokenTypeHint"].as_str().unwrap())
        .collect();
    assert_eq!(hints, ["refresh_token", "access_token"]);
    assert!(
        seen["revoke"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["authMethod"] == "none")
    );
    // The server no longer takes the old token.
    let response = reqwest::Client::new()
        .post(harness.url())
        .header("authorization", token.header_value())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn forgetting_an_uninstalled_app_revokes_without_its_authorizer() {
    let harness = Harness::start(&["--auth-methods", "client_secret_basic"]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    let restarted = Harness::client_on(&harness.dir, harness.clock.clone(), None);
    restarted.forget(&crm()).await.unwrap();
    assert!(!restarted.store().file_of(&crm()).exists());
    let seen = harness.seen().await["seen"].clone();
    let methods: Vec<&str> = seen["revoke"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["authMethod"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["client_secret_basic", "client_secret_basic"]);
}

#[tokio::test]
async fn a_new_authorization_server_gets_its_own_registration_and_never_the_old_client() {
    let harness = Harness::start(&["--second-as"]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let first = harness.connect(&app).await;
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    harness.admin("migrate").await;
    let second = match call_tool(&app, &harness.url(), "whoami", json!({})).await {
        Err(Refused::Next(Next::NeedsAuthorization { issuer })) => issuer,
        other => panic!("expected NeedsAuthorization, got {other:?}"),
    };
    assert_ne!(second, first.issuer);
    assert_eq!(
        app.state(),
        AuthState::NeedsAuthorization {
            issuer: second.clone(),
            reason: NeedsReason::IssuerChanged
        }
    );
    harness.connect(&app).await;
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();

    let seen = harness.seen().await["seen"].clone();
    let registrations = seen["register"].as_array().unwrap();
    assert_eq!(registrations.len(), 2);
    assert_eq!(registrations[1]["issuer"], second.as_str());
    let first_client = seen["token"][0]["clientId"].as_str().unwrap().to_owned();
    for request in seen["authorize"].as_array().unwrap() {
        if request["issuer"] == second.as_str() {
            assert_ne!(request["client_id"], first_client.as_str());
        }
    }
    for request in seen["token"].as_array().unwrap() {
        if request["issuer"] == second.as_str() {
            assert_ne!(request["clientId"], first_client.as_str());
        }
    }
}
