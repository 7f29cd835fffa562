//! The whole flow, from the first 401 to a tool call with the token, over every way of
//! finding the authorization server and every way of identifying the gateway to it.

use mcpapp_oauth::{AppSettings, AuthState, NeedsReason, Next, Secret};
use serde_json::json;

use crate::support::{Harness, Refused, call_tool, text};

/// The first call is refused and names the authorization server; after "Connect" it works.
async fn full_flow(harness: &Harness) {
    let app = harness.app(AppSettings::new());
    assert_eq!(app.state(), AuthState::Anonymous);
    let issuer = harness.seen().await["issuer"].as_str().unwrap().to_owned();
    match call_tool(&app, &harness.url(), "whoami", json!({})).await {
        Err(Refused::Next(Next::NeedsAuthorization { issuer: named })) => {
            assert_eq!(named, issuer);
        }
        other => panic!("expected NeedsAuthorization, got {other:?}"),
    }
    assert_eq!(
        app.state(),
        AuthState::NeedsAuthorization {
            issuer: issuer.clone(),
            reason: NeedsReason::NotConnected
        }
    );
    assert_eq!(app.state().waiting_for(), Some(issuer.as_str()));
    assert!(matches!(
        app.bearer().await,
        Err(mcpapp_oauth::AuthorizeError::NeedsAuthorization { .. })
    ));

    let done = harness.connect(&app).await;
    assert_eq!(done.app.as_str(), "crm");
    assert_eq!(done.issuer, issuer);
    assert_eq!(done.scopes, ["mcp:read"]);
    assert!(matches!(app.state(), AuthState::Authorized { .. }));
    let result = call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    assert_eq!(text(&result), "hello, authorized client");
}

#[tokio::test]
async fn the_full_flow_with_dynamic_registration() {
    let harness = Harness::start(&[]);
    full_flow(&harness).await;
    let seen = harness.seen().await["seen"].clone();
    let registration = &seen["register"][0];
    assert_eq!(registration["application_type"], "native");
    assert_eq!(registration["token_endpoint_auth_method"], "none");
    assert_eq!(
        registration["redirect_uris"],
        json!(["http://127.0.0.1:8787/oauth/callback"])
    );
    let grants = registration["grant_types"].as_array().unwrap();
    assert!(grants.iter().any(|g| g == "refresh_token"));
    let authorize = &seen["authorize"][0];
    assert_eq!(authorize["code_challenge_method"], "S256");
    assert_eq!(authorize["resource"], harness.server.url.as_str());
    assert_eq!(authorize["scope"], "mcp:read");
    let token = &seen["token"][0];
    assert_eq!(token["grantType"], "authorization_code");
    assert_eq!(token["resource"], harness.server.url.as_str());
    assert_eq!(token["authMethod"], "none");
}

#[tokio::test]
async fn a_second_authorization_reuses_the_registration() {
    let harness = Harness::start(&[]);
    full_flow(&harness).await;
    let app = harness.app(AppSettings::new());
    app.disconnect().await.unwrap();
    // Disconnecting deletes the registration too: a new one follows.
    harness.connect(&app).await;
    assert_eq!(harness.count("register").await, 2);
    // A new authorization while the registration is stored does not register again.
    harness.connect(&app).await;
    assert_eq!(harness.count("register").await, 2);
    assert_eq!(harness.count("authorize").await, 3);
}

#[tokio::test]
async fn discovery_finds_every_metadata_layout() {
    let layouts: &[&[&str]] = &[
        // PRM path-suffixed and not in the header; AS metadata only as OIDC.
        &["--no-prm-in-header", "--metadata-at", "oidc"],
        // PRM only at the root; issuer with a tenant path (RFC 8414 path insertion).
        &["--prm", "root", "--no-prm-in-header", "--tenant", "tenant1"],
        // PRM at a URL only the header names; OIDC appended to the tenant path.
        &[
            "--prm",
            "custom",
            "--tenant",
            "tenant1",
            "--metadata-at",
            "oidc-appended",
        ],
        // OIDC with path insertion.
        &["--tenant", "tenant1", "--metadata-at", "oidc"],
    ];
    for args in layouts {
        let harness = Harness::start(args);
        full_flow(&harness).await;
    }
}

#[tokio::test]
async fn a_pre_registered_confidential_client_authenticates_as_the_server_asks() {
    for (method, expected) in [
        ("client_secret_basic", "client_secret_basic"),
        ("client_secret_post", "client_secret_post"),
    ] {
        let harness = Harness::start(&[
            "--no-dcr",
            "--client",
            "gw-client:gw-secret",
            "--auth-methods",
            method,
        ]);
        let settings = AppSettings::new().with_client("gw-client", Some(Secret::new("gw-secret")));
        let app = harness.app(settings);
        let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
        harness.connect(&app).await;
        call_tool(&app, &harness.url(), "whoami", json!({}))
            .await
            .unwrap();
        let seen = harness.seen().await["seen"].clone();
        assert_eq!(seen["token"][0]["authMethod"], expected, "{method}");
        assert_eq!(seen["token"][0]["clientId"], "gw-client");
        assert_eq!(seen["register"].as_array().unwrap().len(), 0);
    }
}

#[tokio::test]
async fn a_pre_registered_client_of_another_issuer_is_never_shown() {
    let harness = Harness::start(&["--no-dcr", "--client", "gw-client"]);
    let settings = AppSettings::new()
        .with_client("gw-client", None)
        .with_client_issuer("https://login.example.com");
    let app = harness.app(settings);
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let err = app.authorization_url().await.unwrap_err();
    assert!(
        matches!(
            err,
            mcpapp_oauth::AuthorizeError::ClientIssuerMismatch { .. }
        ),
        "{err}"
    );
    assert_eq!(harness.count("authorize").await, 0);
}

#[tokio::test]
async fn a_client_metadata_document_is_preferred_to_registration() {
    let harness = Harness::start(&["--cimd"]);
    let document = "https://gw.example.com/oauth/client-metadata.json";
    let client = Harness::client_on(&harness.dir, harness.clock.clone(), Some(document));
    let app = client
        .app(
            mcpapp_manifest::AppId::new("crm").unwrap(),
            harness.url(),
            AppSettings::new(),
        )
        .unwrap();
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let url = app.authorization_url().await.unwrap();
    let callback = crate::support::follow(&url.url).await;
    client
        .complete(&mcpapp_oauth::CallbackParams::from_url(&callback))
        .await
        .unwrap();
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    let seen = harness.seen().await["seen"].clone();
    assert_eq!(seen["authorize"][0]["client_id"], document);
    assert_eq!(seen["register"].as_array().unwrap().len(), 0);
    let served = client.client_metadata_document().unwrap();
    assert_eq!(served["client_id"], document);
    assert_eq!(
        served["redirect_uris"],
        json!(["http://127.0.0.1:8787/oauth/callback"])
    );
}

#[tokio::test]
async fn without_registration_or_a_client_connecting_says_what_to_configure() {
    let harness = Harness::start(&["--no-dcr"]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let err = app.authorization_url().await.unwrap_err();
    assert!(err.to_string().contains("`OAuth.ClientId`"), "{err}");
}

#[tokio::test]
async fn configured_scopes_replace_the_challenge_and_offline_access_joins_when_listed() {
    let harness = Harness::start(&["--offline-access"]);
    let app = harness.app(AppSettings::new().with_scopes(["mcp:read", "mcp:write"]));
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    let url = app.authorization_url().await.unwrap();
    assert_eq!(url.scopes, ["mcp:read", "mcp:write", "offline_access"]);
    let default = Harness::start(&["--challenge-scope", "", "--scopes-supported", ""]);
    let app = default.app(AppSettings::new());
    let _ = call_tool(&app, &default.url(), "whoami", json!({})).await;
    let url = app.authorization_url().await.unwrap();
    assert!(url.scopes.is_empty(), "{:?}", url.scopes);
    assert!(!url.url.query().unwrap().contains("scope="));
}

#[tokio::test]
async fn an_app_whose_entry_refuses_oauth_fails_clearly() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::refused());
    match call_tool(&app, &harness.url(), "whoami", json!({})).await {
        Err(Refused::Next(Next::Fail(err))) => {
            assert!(
                err.to_string().contains("`OAuth.Enabled` is false"),
                "{err}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(matches!(app.state(), AuthState::Failed { .. }));
    assert!(app.authorization_url().await.is_err());
    assert_eq!(harness.count("authorize").await, 0);
}

/// The HTTP link and the host call these from spawned tasks: the handles and their futures
/// must be `Send` (and the handles `Sync`).
#[test]
fn the_handles_and_their_futures_can_cross_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let dir = tempfile::tempdir().unwrap();
    let clock = std::sync::Arc::new(crate::support::ManualClock::default());
    let client = Harness::client_on(&dir, clock, None);
    let app = client
        .app(
            mcpapp_manifest::AppId::new("crm").unwrap(),
            url::Url::parse("http://127.0.0.1:9/mcp").unwrap(),
            AppSettings::new(),
        )
        .unwrap();
    send_sync(&client);
    send_sync(&app);
    let headers = http::HeaderMap::new();
    send(app.bearer());
    send(app.on_rejected(None, http::StatusCode::UNAUTHORIZED, &headers));
    send(app.authorization_url());
    send(app.disconnect());
    send(client.complete(&mcpapp_oauth::CallbackParams::default()));
    send(client.forget(app.app()));
}
