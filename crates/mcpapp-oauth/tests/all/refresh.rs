//! Tokens renewed before they expire and once after a 401; a grant that ended sends the app
//! back to the user.

use std::time::Duration;

use mcpapp_oauth::{AppSettings, AuthState, NeedsReason, Next};
use serde_json::json;

use crate::support::{Harness, Refused, call_tool};

async fn grant_types(harness: &Harness) -> Vec<String> {
    harness.seen().await["seen"]["token"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["grantType"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_token_near_its_expiry_is_renewed_before_it_is_sent() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    let first = app.bearer().await.unwrap().unwrap();
    assert_eq!(app.bearer().await.unwrap().unwrap(), first);

    // 3570 s into a 3600 s token, the refresh margin (30 s) begins.
    harness.clock.advance(Duration::from_secs(3575));
    let second = app.bearer().await.unwrap().unwrap();
    assert_ne!(second, first);
    assert_eq!(app.bearer().await.unwrap().unwrap(), second);
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();

    // The rotated refresh token was kept: a second renewal works too.
    harness.clock.advance(Duration::from_secs(3575));
    let third = app.bearer().await.unwrap().unwrap();
    assert_ne!(third, second);
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    assert_eq!(
        grant_types(&harness).await,
        ["authorization_code", "refresh_token", "refresh_token"]
    );
    let refresh = &harness.seen().await["seen"]["token"][1];
    assert_eq!(refresh["resource"], harness.server.url.as_str());
    assert!(matches!(app.state(), AuthState::Authorized { .. }));
}

#[tokio::test]
async fn concurrent_requests_share_one_renewal() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    harness.clock.advance(Duration::from_secs(3590));
    let tokens =
        futures::future::join_all([app.bearer(), app.bearer(), app.bearer(), app.bearer()]).await;
    let first = tokens[0].as_ref().unwrap().as_ref().unwrap();
    assert!(
        tokens
            .iter()
            .all(|t| t.as_ref().unwrap().as_ref().unwrap() == first)
    );
    assert_eq!(
        grant_types(&harness).await,
        ["authorization_code", "refresh_token"]
    );
}

#[tokio::test]
async fn a_rejected_token_is_renewed_once_and_the_request_sent_again() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    let before = app.bearer().await.unwrap().unwrap();
    harness.admin("expire-access-tokens").await;
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    assert_ne!(app.bearer().await.unwrap().unwrap(), before);
    assert_eq!(
        grant_types(&harness).await,
        ["authorization_code", "refresh_token"]
    );
    let statuses: Vec<u64> = harness.seen().await["seen"]["mcp"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [401, 401, 200]);
}

#[tokio::test]
async fn a_renewed_token_that_is_rejected_too_is_not_renewed_again() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    let used = app.bearer().await.unwrap().unwrap();
    harness.admin("expire-access-tokens").await;
    let unauthorized = unauthorized_headers(&harness);
    let status = reqwest::StatusCode::UNAUTHORIZED;
    assert!(matches!(
        app.on_rejected(Some(&used), status, &unauthorized).await,
        Next::Retry
    ));
    let renewed = app.bearer().await.unwrap().unwrap();
    // The server refuses the renewed token as well: the user must act.
    match app.on_rejected(Some(&renewed), status, &unauthorized).await {
        Next::NeedsAuthorization { .. } => {}
        other => panic!("expected NeedsAuthorization, got {other:?}"),
    }
    assert_eq!(
        grant_types(&harness).await,
        ["authorization_code", "refresh_token"]
    );
}

fn unauthorized_headers(harness: &Harness) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    let prm = harness
        .server
        .url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    headers.insert(
        reqwest::header::WWW_AUTHENTICATE,
        format!("Bearer error=\"invalid_token\", resource_metadata=\"{prm}\"")
            .parse()
            .unwrap(),
    );
    headers
}

#[tokio::test]
async fn a_revoked_refresh_token_sends_the_app_back_to_needs_authorization() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let done = harness.connect(&app).await;
    harness.admin("expire-access-tokens").await;
    harness.admin("revoke-refresh-tokens").await;
    match call_tool(&app, &harness.url(), "whoami", json!({})).await {
        Err(Refused::Next(Next::NeedsAuthorization { issuer })) => assert_eq!(issuer, done.issuer),
        other => panic!("expected NeedsAuthorization, got {other:?}"),
    }
    assert_eq!(
        app.state(),
        AuthState::NeedsAuthorization {
            issuer: done.issuer.clone(),
            reason: NeedsReason::Expired
        }
    );
    assert!(app.bearer().await.is_err());
    // The registration survives: connecting again does not register again.
    harness.connect(&app).await;
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    assert_eq!(harness.count("register").await, 1);
}

#[tokio::test]
async fn an_expired_token_without_a_refresh_token_needs_authorization() {
    let harness = Harness::start(&["--no-refresh-tokens"]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    harness.clock.advance(Duration::from_secs(3600));
    assert!(matches!(
        app.bearer().await,
        Err(mcpapp_oauth::AuthorizeError::NeedsAuthorization { .. })
    ));
    assert!(matches!(
        app.state(),
        AuthState::NeedsAuthorization {
            reason: NeedsReason::Expired,
            ..
        }
    ));
    assert_eq!(grant_types(&harness).await, ["authorization_code"]);
}
