//! HTTP apps behind OAuth, against the in-tree `oauth-server` (an authorization server and a
//! protected MCP app on loopback): the app waits in `NeedsAuthorization` (no failure, no
//! restart, no tools), runs once authorized with its token on every request, and a 401 the
//! gateway cannot act on (OAuth refused by the entry, no metadata) is a clear `lastError`
//! with nothing scheduled.

use std::collections::BTreeMap;

use mcpapp_manifest::{AppId, Lifecycle, McpAppEntryConfig, McpAppsConfig, OAuthEntryConfig};
use mcpapp_oauth::{
    AuthState, CallbackParams, KeySource, OAuthClient, Secret, TokenStore, callback_url,
};
use mcpapp_supervisor::{Supervisor, SupervisorEvent};
use mcpapp_testkit::{AppsDir, HttpApp, wait_state};
use serde_json::Value;
use url::Url;

use crate::{PATIENCE, fast_policy, first_text, logging};

/// A key for the tests' token stores (32 bytes, base64).
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

fn oauth_client(dir: &tempfile::TempDir) -> OAuthClient {
    let store = TokenStore::open(dir.path(), &KeySource::Text(Secret::new(KEY))).unwrap();
    let redirect = callback_url(&Url::parse("http://127.0.0.1:8787").unwrap());
    OAuthClient::builder(store, redirect).build().unwrap()
}

/// A supervisor with an OAuth client over the app `crm` at `url`, its entry's OAuth settings
/// `oauth`.
fn supervise_crm(url: &str, oauth: OAuthEntryConfig, client: OAuthClient) -> (AppsDir, Supervisor) {
    logging();
    let apps = AppsDir::new();
    apps.http_app("crm", url, "{}");
    let config = McpAppsConfig {
        enabled: true,
        entries: BTreeMap::from([(
            "crm".to_owned(),
            McpAppEntryConfig {
                oauth,
                ..McpAppEntryConfig::default()
            },
        )]),
        ..McpAppsConfig::default()
    };
    let report = apps.discover_with(config.clone());
    let supervisor = Supervisor::builder()
        .config(&config)
        .policy(fast_policy())
        .oauth(client)
        .build();
    supervisor.load(&report);
    (apps, supervisor)
}

/// Plays the user's browser: the authorization URL's redirect, handed to the client.
async fn connect(client: &OAuthClient, supervisor: &Supervisor) {
    let authorizer = supervisor.get("crm").unwrap().authorizer().unwrap();
    let url = authorizer.authorization_url().await.unwrap();
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = browser.get(url.url.as_str()).send().await.unwrap();
    let location = Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    let done = client
        .complete(&CallbackParams::from_url(&location))
        .await
        .unwrap();
    assert_eq!(done.app, AppId::new("crm").unwrap());
}

/// Every event the supervisor published for `crm` until it shut down.
async fn events_until_shutdown(
    supervisor: Supervisor,
    mut events: tokio::sync::broadcast::Receiver<SupervisorEvent>,
) -> Vec<SupervisorEvent> {
    supervisor.shutdown().await;
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    seen
}

#[tokio::test]
async fn an_app_behind_oauth_waits_for_the_user_then_runs_with_its_token() {
    let server = HttpApp::start("oauth-server", &[]);
    let dir = tempfile::tempdir().unwrap();
    let client = oauth_client(&dir);
    let (_apps, supervisor) =
        supervise_crm(&server.url, OAuthEntryConfig::default(), client.clone());
    let events = supervisor.subscribe();
    let app = supervisor.get("crm").unwrap();
    wait_state(app.watch(), Lifecycle::NeedsAuthorization).await;

    let issuer = match app.snapshot().authorization {
        Some(AuthState::NeedsAuthorization { issuer, .. }) => issuer,
        other => panic!("expected NeedsAuthorization, got {other:?}"),
    };
    let admin: Value = reqwest::get(server.url.replace("/mcp", "/admin/state"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(issuer, admin["issuer"].as_str().unwrap());
    let snapshot = app.snapshot();
    assert_eq!((snapshot.restart_count, snapshot.crash_loop), (0, false));
    assert!(snapshot.next_restart.is_none());
    assert!(app.descriptors().tools.is_empty());

    connect(&client, &supervisor).await;
    wait_state(app.watch(), Lifecycle::Running).await;
    assert!(matches!(
        app.snapshot().authorization,
        Some(AuthState::Authorized { .. })
    ));
    let names: Vec<String> = app
        .descriptors()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"whoami".to_owned()), "{names:?}");
    let result = tokio::time::timeout(PATIENCE, app.call_tool("whoami", None, None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first_text(&result), "hello, authorized client");

    let seen = events_until_shutdown(supervisor, events).await;
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, SupervisorEvent::RestartScheduled { .. })),
        "{seen:?}"
    );
    // The lifecycle went Loaded → NeedsAuthorization → Loaded → Running, and the
    // authorization events told each step with the issuer.
    let lifecycle: Vec<Lifecycle> = seen
        .iter()
        .filter_map(|e| match e {
            SupervisorEvent::Lifecycle { to, .. } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(
        lifecycle,
        [
            Lifecycle::Loaded,
            Lifecycle::NeedsAuthorization,
            Lifecycle::Loaded,
            Lifecycle::Running,
            Lifecycle::Stopped
        ]
    );
    assert!(seen.iter().any(|e| matches!(
        e,
        SupervisorEvent::Authorization { state: AuthState::Authorized { issuer: i, .. }, .. } if *i == issuer
    )));
}

/// Supervises crm at `url` until it fails; asserts no restart was scheduled and returns its
/// last error.
async fn fails_once(url: &str, oauth: OAuthEntryConfig, dir: &tempfile::TempDir) -> String {
    let (_apps, supervisor) = supervise_crm(url, oauth, oauth_client(dir));
    let events = supervisor.subscribe();
    let app = supervisor.get("crm").unwrap();
    wait_state(app.watch(), Lifecycle::Failed).await;
    let error = app.snapshot().state.last_error.unwrap_or_default();
    let seen = events_until_shutdown(supervisor, events).await;
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, SupervisorEvent::RestartScheduled { .. })),
        "{seen:?}"
    );
    error
}

#[tokio::test]
async fn a_401_the_gateway_cannot_act_on_fails_once_with_a_clear_reason() {
    // The entry refuses OAuth.
    let server = HttpApp::start("oauth-server", &[]);
    let dir = tempfile::tempdir().unwrap();
    let refused = OAuthEntryConfig {
        enabled: Some(false),
        ..OAuthEntryConfig::default()
    };
    let error = fails_once(&server.url, refused, &dir).await;
    assert_eq!(
        error,
        "app crm asks for OAuth authorization, which its entry refuses (`OAuth.Enabled` is false)"
    );

    // No challenge and no metadata anywhere.
    let bare = HttpApp::start("oauth-server", &["--no-challenge", "--prm", "none"]);
    let dir = tempfile::tempdir().unwrap();
    let error = fails_once(&bare.url, OAuthEntryConfig::default(), &dir).await;
    assert!(
        error.contains("answered 401 but publishes no OAuth metadata"),
        "{error}"
    );
}
