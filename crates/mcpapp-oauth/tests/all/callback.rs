//! What stops a flow: a forged, replayed or expired `state`, a wrong or missing `iss`, an
//! authorization server whose metadata lies about its issuer or lacks PKCE, protected resource
//! metadata for another resource — each before any code reaches the token endpoint.

use std::time::Duration;

use mcpapp_oauth::{
    AppSettings, AuthState, AuthorizeError, CallbackError, CallbackParams, Next, OAuthClient,
};
use serde_json::json;
use url::Url;

use crate::support::{Harness, Refused, call_tool, follow};

/// The app challenged, then one authorization URL followed to its callback URL.
async fn redirect(harness: &Harness) -> (mcpapp_oauth::AppAuthorizer, Url) {
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let url = app.authorization_url().await.unwrap();
    (app, follow(&url.url).await)
}

fn with_state(callback: &Url, state: &str) -> CallbackParams {
    let mut params = CallbackParams::from_url(callback);
    params.state = Some(state.to_owned());
    params
}

#[tokio::test]
async fn a_forged_state_is_refused_and_the_real_one_still_works() {
    let harness = Harness::start(&[]);
    let (app, callback) = redirect(&harness).await;
    let forged = harness
        .client
        .complete(&with_state(&callback, "forged-state"))
        .await
        .unwrap_err();
    assert!(matches!(forged, CallbackError::UnknownState), "{forged}");
    let missing = CallbackParams {
        state: None,
        ..CallbackParams::from_url(&callback)
    };
    assert!(matches!(
        harness.client.complete(&missing).await,
        Err(CallbackError::MissingState)
    ));
    assert_eq!(harness.count("token").await, 0);
    harness
        .client
        .complete(&CallbackParams::from_url(&callback))
        .await
        .unwrap();
    assert!(matches!(app.state(), AuthState::Authorized { .. }));
}

#[tokio::test]
async fn a_state_is_used_once() {
    let harness = Harness::start(&[]);
    let (_app, callback) = redirect(&harness).await;
    let params = CallbackParams::from_url(&callback);
    harness.client.complete(&params).await.unwrap();
    let replay = harness.client.complete(&params).await.unwrap_err();
    assert!(matches!(replay, CallbackError::UnknownState), "{replay}");
    assert_eq!(harness.count("token").await, 1);
}

#[tokio::test]
async fn an_expired_state_is_refused_before_the_token_request() {
    let harness = Harness::start(&[]);
    let (app, callback) = redirect(&harness).await;
    assert!(matches!(app.state(), AuthState::Authorizing { .. }));
    harness.clock.advance(Duration::from_secs(601));
    let err = harness
        .client
        .complete(&CallbackParams::from_url(&callback))
        .await
        .unwrap_err();
    assert!(matches!(err, CallbackError::Expired { .. }), "{err}");
    assert!(err.to_string().contains("600 s"), "{err}");
    assert_eq!(harness.count("token").await, 0);
    assert!(matches!(app.state(), AuthState::NeedsAuthorization { .. }));
    assert!(!err.to_string().contains("code-"), "{err}");
}

#[tokio::test]
async fn the_oldest_waiting_flow_is_dropped_at_the_cap() {
    let harness = Harness::start(&[]);
    let store =
        mcpapp_oauth::TokenStore::open(harness.dir.path(), &crate::support::key_file(&harness.dir))
            .unwrap();
    let redirect_uri =
        mcpapp_oauth::callback_url(&Url::parse(crate::support::GATEWAY_ORIGIN).unwrap());
    let client = OAuthClient::builder(store, redirect_uri)
        .max_pending(2)
        .build()
        .unwrap();
    let app = client
        .app(
            mcpapp_manifest::AppId::new("crm").unwrap(),
            harness.url(),
            AppSettings::new(),
        )
        .unwrap();
    let mut callbacks = Vec::new();
    for _ in 0..3 {
        let url = app.authorization_url().await.unwrap();
        callbacks.push(follow(&url.url).await);
    }
    let oldest = client
        .complete(&CallbackParams::from_url(&callbacks[0]))
        .await
        .unwrap_err();
    assert!(matches!(oldest, CallbackError::UnknownState), "{oldest}");
    client
        .complete(&CallbackParams::from_url(&callbacks[2]))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_wrong_or_missing_iss_stops_the_flow_before_the_token_request() {
    let refused: &[&[&str]] = &[
        &["--iss", "wrong"],
        &["--iss", "normalized"],
        &["--iss", "omit"],
        &["--iss", "wrong", "--iss-supported", "absent"],
        &["--iss", "wrong", "--iss-supported", "no"],
    ];
    for args in refused {
        let harness = Harness::start(args);
        let (app, callback) = redirect(&harness).await;
        let err = harness
            .client
            .complete(&CallbackParams::from_url(&callback))
            .await
            .unwrap_err();
        assert!(
            matches!(err, CallbackError::Issuer { .. }),
            "{args:?}: {err}"
        );
        assert_eq!(harness.count("token").await, 0, "{args:?}");
        assert!(
            matches!(app.state(), AuthState::NeedsAuthorization { .. }),
            "{args:?}"
        );
    }
    let accepted: &[&[&str]] = &[
        &["--iss", "omit", "--iss-supported", "absent"],
        &["--iss", "omit", "--iss-supported", "no"],
        &["--iss", "correct", "--iss-supported", "absent"],
    ];
    for args in accepted {
        let harness = Harness::start(args);
        let (_app, callback) = redirect(&harness).await;
        harness
            .client
            .complete(&CallbackParams::from_url(&callback))
            .await
            .unwrap();
        assert_eq!(harness.count("token").await, 1, "{args:?}");
    }
}

#[tokio::test]
async fn an_error_answer_is_believed_only_from_the_right_issuer() {
    let harness = Harness::start(&["--deny"]);
    let (_app, callback) = redirect(&harness).await;
    let err = harness
        .client
        .complete(&CallbackParams::from_url(&callback))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CallbackError::Denied { error, .. } if error == "access_denied"),
        "{err}"
    );

    let forged = Harness::start(&["--deny", "--iss", "wrong"]);
    let (_app, callback) = redirect(&forged).await;
    let err = forged
        .client
        .complete(&CallbackParams::from_url(&callback))
        .await
        .unwrap_err();
    assert!(matches!(err, CallbackError::Issuer { .. }), "{err}");
    assert!(!err.to_string().contains("access_denied"), "{err}");
}

/// The first call's verdict, and the authorization server's counters afterwards.
async fn refused_at_discovery(args: &[&str]) -> (AuthorizeError, Harness) {
    let harness = Harness::start(args);
    let app = harness.app(AppSettings::new());
    let err = match call_tool(&app, &harness.url(), "whoami", json!({})).await {
        Err(Refused::Next(Next::Fail(err))) => err,
        other => panic!("{args:?}: expected a failure, got {other:?}"),
    };
    assert!(matches!(app.state(), AuthState::Failed { .. }), "{args:?}");
    assert!(app.authorization_url().await.is_err(), "{args:?}");
    for kind in ["register", "authorize", "token"] {
        assert_eq!(harness.count(kind).await, 0, "{args:?}: {kind}");
    }
    (err, harness)
}

#[tokio::test]
async fn metadata_claiming_another_issuer_is_not_used() {
    let (err, _harness) =
        refused_at_discovery(&["--metadata-issuer", "https://attacker.example.com"]).await;
    assert!(matches!(err, AuthorizeError::Discovery { .. }), "{err}");
    assert!(err.to_string().contains("attacker.example.com"), "{err}");
}

#[tokio::test]
async fn an_authorization_server_without_pkce_methods_is_refused() {
    let (err, _harness) = refused_at_discovery(&["--no-pkce-methods"]).await;
    assert!(
        matches!(err, AuthorizeError::PkceUnsupported { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn metadata_for_another_resource_is_refused() {
    let (err, _harness) =
        refused_at_discovery(&["--prm-resource", "https://evil.example.com/mcp"]).await;
    assert!(err.to_string().contains("evil.example.com"), "{err}");
    // Not advertised in the challenge: the guessed document does not count, and nothing else
    // describes the app.
    let (err, _harness) = refused_at_discovery(&[
        "--prm-resource",
        "https://evil.example.com/mcp",
        "--no-prm-in-header",
    ])
    .await;
    assert!(matches!(err, AuthorizeError::NoMetadata { .. }), "{err}");
}

#[tokio::test]
async fn a_401_without_a_challenge_still_finds_published_metadata_or_says_there_is_none() {
    let harness = Harness::start(&["--no-challenge"]);
    let app = harness.app(AppSettings::new());
    assert!(matches!(
        call_tool(&app, &harness.url(), "whoami", json!({})).await,
        Err(Refused::Next(Next::NeedsAuthorization { .. }))
    ));
    let (err, _harness) = refused_at_discovery(&["--no-challenge", "--prm", "none"]).await;
    assert!(matches!(err, AuthorizeError::NoMetadata { .. }), "{err}");
    assert!(err.to_string().contains("no OAuth metadata"), "{err}");
}
