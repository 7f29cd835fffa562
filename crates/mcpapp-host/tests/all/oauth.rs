//! HTTP apps behind OAuth through the gateway's routes, against the in-tree `oauth-server`
//! (an authorization server and a protected MCP app on loopback): "Connect" through
//! `POST /apps/{id}/authorize` and the redirect to `/oauth/callback`, renewal before expiry
//! and after a 401, a revoked grant, step-up, refused `state`s, a restart, disconnecting, and
//! what the API shows (states, issuers, never a token).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use mcpapp_discovery::Discovery;
use mcpapp_manifest::{AppId, Lifecycle, McpAppEntryConfig, McpAppsConfig, OAuthEntryConfig};
use mcpapp_oauth::{Clock, KeySource, Secret, TokenStore};
use mcpapp_supervisor::AppHandle;
use mcpapp_testkit::{AppsDir, HttpApp};
use serde_json::{Value, json};

use crate::{PATIENCE, policy};

/// The key of the tests' token stores (32 bytes in base64).
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// The gateway's bearer token in these tests.
const TOKEN: &str = "gateway-token-0123456789";

/// A clock the test moves forward.
#[derive(Debug, Default)]
struct ManualClock(Mutex<Duration>);

impl ManualClock {
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        SystemTime::now() + *self.0.lock().unwrap()
    }
}

/// The protected app `crm`, a token store and a clock, from which gateways are started.
struct Setup {
    server: HttpApp,
    apps: AppsDir,
    store: tempfile::TempDir,
    clock: Arc<ManualClock>,
    entry: OAuthEntryConfig,
    settings: mcpapp_host::GatewaySettings,
}

impl Setup {
    fn new(server_args: &[&str]) -> Self {
        let server = HttpApp::start("oauth-server", server_args);
        let apps = AppsDir::new();
        apps.http_app("crm", &server.url, "{}");
        Self {
            server,
            apps,
            store: tempfile::tempdir().unwrap(),
            clock: Arc::new(ManualClock::default()),
            entry: OAuthEntryConfig::default(),
            settings: mcpapp_host::GatewaySettings::default(),
        }
    }

    /// A gateway with a token, a token store in `self.store` and the test's clock.
    async fn start(&self) -> Client {
        let gateway = self.try_start().await.unwrap();
        assert!(gateway.wait_settled(PATIENCE).await);
        Client {
            url: format!("http://{}", gateway.local_addr()),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            answers: Arc::default(),
            gateway,
        }
    }

    async fn try_start(&self) -> Result<mcpapp_host::Gateway, mcpapp_host::StartError> {
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt().with_test_writer().try_init();
        }
        let config = McpAppsConfig {
            enabled: true,
            entries: BTreeMap::from([(
                "crm".to_owned(),
                McpAppEntryConfig {
                    oauth: self.entry.clone(),
                    ..McpAppEntryConfig::default()
                },
            )]),
            ..McpAppsConfig::default()
        };
        let discovery = Discovery::builder(config)
            .discovery_paths(
                vec![self.apps.path().display().to_string()],
                self.apps.path(),
            )
            .build()
            .unwrap();
        let store =
            TokenStore::open(self.store.path(), &KeySource::Text(Secret::new(KEY))).unwrap();
        mcpapp_host::Gateway::builder(discovery)
            .settings(self.settings.clone())
            .bind("127.0.0.1:0".parse().unwrap())
            .policy(policy())
            .token(Some(TOKEN.to_owned()))
            .token_store(store)
            .oauth_clock(self.clock.clone())
            .drain(Duration::ZERO)
            .start()
            .await
    }

    /// `GET /admin/state` of the authorization server.
    async fn seen(&self) -> Value {
        let url = self.server.url.replace("/mcp", "/admin/state");
        reqwest::get(url).await.unwrap().json().await.unwrap()
    }

    async fn count(&self, kind: &str, grant_type: Option<&str>) -> usize {
        self.seen().await["seen"][kind]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| grant_type.is_none_or(|g| r["grantType"] == g))
            .count()
    }

    async fn admin(&self, action: &str) {
        let url = self.server.url.replace("/mcp", &format!("/admin/{action}"));
        let response = reqwest::Client::new().post(url).send().await.unwrap();
        assert!(response.status().is_success(), "{action}");
    }

    /// Every token and client secret the authorization server issued (codes apart).
    async fn secrets(&self) -> Vec<String> {
        self.seen().await["seen"]["secrets"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    }
}

/// The user's side of one gateway: the API with its token, and a browser.
struct Client {
    url: String,
    http: reqwest::Client,
    /// Every API answer seen, to look for secrets in.
    answers: Arc<Mutex<String>>,
    gateway: mcpapp_host::Gateway,
}

impl Client {
    async fn request(&self, method: reqwest::Method, path: &str, token: bool) -> (u16, String) {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if token {
            request = request.bearer_auth(TOKEN);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        self.answers.lock().unwrap().push_str(&body);
        (status, body)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.request(reqwest::Method::GET, path, true).await;
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.request(reqwest::Method::POST, path, true).await;
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    async fn app(&self) -> Value {
        self.get("/apps/crm").await.1
    }

    fn handle(&self) -> AppHandle {
        self.gateway.supervisor().get("crm").unwrap()
    }

    /// `POST /apps/crm/authorize`, then the authorization server's redirect: the callback URL
    /// the browser is sent to (on this gateway).
    async fn authorize(&self) -> String {
        let (status, answer) = self.post("/apps/crm/authorize").await;
        assert_eq!(status, 200, "{answer}");
        let url = answer["url"].as_str().unwrap();
        let response = self.http.get(url).send().await.unwrap();
        assert!(response.status().is_redirection(), "{}", response.status());
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        assert!(
            location.starts_with(&format!("{}/oauth/callback?", self.url)),
            "{location}"
        );
        location
    }

    /// The browser opens the callback URL (no gateway token: a redirect carries none).
    async fn callback(&self, location: &str) -> (u16, String) {
        let response = self.http.get(location).send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        self.answers.lock().unwrap().push_str(&body);
        (status, body)
    }

    /// Connects `crm` and waits until it runs.
    async fn connect(&self) {
        let location = self.authorize().await;
        let (status, page) = self.callback(&location).await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("crm is connected."), "{page}");
        self.wait(Lifecycle::Running).await;
    }

    async fn wait(&self, state: Lifecycle) {
        let handle = self.handle();
        let mut watch = handle.watch();
        let reached =
            tokio::time::timeout(PATIENCE, watch.wait_for(|s| s.state.lifecycle == state)).await;
        assert!(
            reached.is_ok(),
            "crm never became {state}: {:?}",
            handle.snapshot()
        );
    }

    async fn call(&self, tool: &str, arguments: Value) -> Result<String, String> {
        let arguments = arguments.as_object().cloned();
        match tokio::time::timeout(PATIENCE, self.handle().call_tool(tool, arguments, None)).await {
            Ok(Ok(result)) => Ok(result
                .content
                .iter()
                .find_map(|c| c.as_text().map(|t| t.text.clone()))
                .unwrap_or_default()),
            Ok(Err(err)) => Err(err.to_string()),
            Err(_) => panic!("{tool} did not answer"),
        }
    }
}

#[tokio::test]
async fn connect_goes_through_authorize_and_the_callback_and_the_app_runs() {
    let setup = Setup::new(&[]);
    let client = setup.start().await;
    let events = tokio::spawn(read_events(client.url.clone()));

    // Waiting for the user: settled, named with its issuer, no tools.
    let app = client.app().await;
    let issuer = setup.seen().await["issuer"].as_str().unwrap().to_owned();
    assert_eq!(app["lifecycle"], "NeedsAuthorization", "{app}");
    assert_eq!(
        app["authorization"],
        json!({"state": "needsAuthorization", "issuer": issuer, "reason": "notConnected"})
    );
    assert_eq!(
        (app["toolCount"].clone(), app["restartCount"].clone()),
        (json!(0), json!(0))
    );
    assert!(app["tools"].as_array().unwrap().is_empty());
    let (status, ready) = client.get("/readyz").await;
    assert_eq!(
        (status, &ready["needsAuthorization"]),
        (200, &json!(1)),
        "{ready}"
    );

    // The routes: authorize needs the gateway's token; the callback and metadata do not.
    let (status, _) = client
        .request(reqwest::Method::POST, "/apps/crm/authorize", false)
        .await;
    assert_eq!(status, 401);
    let (status, answer) = client.post("/apps/crm/authorize").await;
    assert_eq!(status, 200);
    assert_eq!(answer["issuer"], issuer.as_str());
    assert_eq!(answer["scopes"], json!(["mcp:read"]));
    assert!(
        answer["url"].as_str().unwrap().starts_with(&issuer),
        "{answer}"
    );
    assert!(
        answer["expiresAt"].as_str().unwrap().ends_with('Z'),
        "{answer}"
    );
    assert_eq!(client.app().await["authorization"]["state"], "authorizing");
    let (status, _) = client.post("/apps/nope/authorize").await;
    assert_eq!(status, 404);
    // No metadata document on a plain-http origin.
    let (status, _) = client
        .request(reqwest::Method::GET, "/oauth/client-metadata.json", false)
        .await;
    assert_eq!(status, 404);

    let location = client.authorize().await;
    let response = client.http.get(&location).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'; script-src 'nonce-")
    );
    let page = response.text().await.unwrap();
    assert!(page.contains("crm is connected."), "{page}");
    assert!(
        page.contains("BroadcastChannel(\"mcpapp-oauth\")"),
        "{page}"
    );
    client.wait(Lifecycle::Running).await;

    // Its tools are there now, and calls carry the token.
    assert_eq!(
        client.call("whoami", json!({})).await.unwrap(),
        "hello, authorized client"
    );
    let app = client.app().await;
    assert_eq!(app["authorization"]["state"], "authorized", "{app}");
    assert_eq!(app["authorization"]["issuer"], issuer.as_str());
    let registered: Vec<&str> = app["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["registeredName"].as_str())
        .collect();
    assert!(registered.contains(&"whoami"), "{app}");

    // The event stream told it all, the issuer included.
    let stream = tokio::time::timeout(PATIENCE, events)
        .await
        .unwrap()
        .unwrap();
    assert!(
        stream.contains(&format!(
            "\"authorization\":{{\"state\":\"authorizing\",\"issuer\":\"{issuer}\"}}"
        )),
        "{stream}"
    );
    assert!(
        stream.contains("\"from\":\"NeedsAuthorization\",\"to\":\"Loaded\""),
        "{stream}"
    );
    assert!(stream.contains("\"state\":\"authorized\""), "{stream}");

    // No token or client secret in anything the gateway answered.
    let answers = format!("{}{stream}", client.answers.lock().unwrap());
    for secret in setup.secrets().await {
        if !secret.starts_with("code-") {
            assert!(!answers.contains(&secret), "{secret} in an answer");
        }
    }
    client.gateway.shutdown().await;
}

/// `GET /apps/events` until `crm` runs: the text of the stream.
async fn read_events(url: String) -> String {
    let mut response = reqwest::Client::new()
        .get(format!("{url}/apps/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if text.contains("\"to\":\"Running\"") {
            break;
        }
    }
    text
}

#[tokio::test]
async fn forged_replayed_and_expired_states_are_refused() {
    let setup = Setup::new(&[]);
    let client = setup.start().await;
    // A state the gateway never handed out.
    let forged = format!("{}/oauth/callback?code=code-x&state=forged", client.url);
    let (status, page) = client.callback(&forged).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("unknown or was already used"), "{page}");
    assert_eq!(client.handle().lifecycle(), Lifecycle::NeedsAuthorization);

    // A real one works once; its replay is refused and changes nothing.
    let location = client.authorize().await;
    let (status, _) = client.callback(&location).await;
    assert_eq!(status, 200);
    client.wait(Lifecycle::Running).await;
    let tokens = setup.count("token", None).await;
    let (status, page) = client.callback(&location).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("unknown or was already used"), "{page}");
    assert_eq!(setup.count("token", None).await, tokens);

    // One used after its ten minutes is refused; the running app is left alone.
    let location = client.authorize().await;
    setup.clock.advance(Duration::from_secs(11 * 60));
    let (status, page) = client.callback(&location).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("took too long"), "{page}");
    assert_eq!(setup.count("token", None).await, tokens);
    assert_eq!(client.handle().lifecycle(), Lifecycle::Running);
    assert_eq!(
        client.call("whoami", json!({})).await.unwrap(),
        "hello, authorized client"
    );
    client.gateway.shutdown().await;
}

#[tokio::test]
async fn tokens_are_renewed_before_expiry_and_after_a_401_and_a_revoked_grant_asks_again() {
    let setup = Setup::new(&[]);
    let client = setup.start().await;
    client.connect().await;
    assert_eq!(setup.count("token", Some("refresh_token")).await, 0);

    // Close to its expiry the token is renewed before the request goes.
    setup.clock.advance(Duration::from_secs(3600 - 10));
    assert_eq!(
        client.call("whoami", json!({})).await.unwrap(),
        "hello, authorized client"
    );
    assert_eq!(setup.count("token", Some("refresh_token")).await, 1);

    // A token the app refuses is renewed once and the request sent again.
    setup.admin("expire-access-tokens").await;
    assert_eq!(
        client.call("whoami", json!({})).await.unwrap(),
        "hello, authorized client"
    );
    assert_eq!(setup.count("token", Some("refresh_token")).await, 2);
    assert_eq!(client.handle().snapshot().restart_count, 0);

    // A grant that ended (the refresh token revoked) sends the app back to the user.
    setup.admin("revoke-refresh-tokens").await;
    setup.admin("expire-access-tokens").await;
    let err = client.call("whoami", json!({})).await.unwrap_err();
    assert!(
        err.contains("app 'crm' needs authorization at http://127.0.0.1:"),
        "{err}"
    );
    client.wait(Lifecycle::NeedsAuthorization).await;
    let app = client.app().await;
    assert_eq!(app["authorization"]["reason"], "expired", "{app}");
    assert_eq!(app["restartCount"], 0);
    client.connect().await;
    assert_eq!(
        client.call("whoami", json!({})).await.unwrap(),
        "hello, authorized client"
    );
    client.gateway.shutdown().await;
}

#[tokio::test]
async fn step_up_grants_more_access_while_the_app_keeps_running() {
    let setup = Setup::new(&[]);
    let client = setup.start().await;
    client.connect().await;
    let since = client.app().await["stateChangedAt"].clone();

    let err = client
        .call("write_note", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(
        err.contains("needs more access") && err.contains("(scopes: mcp:read mcp:write)"),
        "{err}"
    );
    let app = client.app().await;
    assert_eq!(app["lifecycle"], "Running");
    assert_eq!(
        app["authorization"]["moreScope"],
        json!(["mcp:read", "mcp:write"])
    );

    // "Grant more access": the union of the scopes, the same callback.
    let location = client.authorize().await;
    let authorize = setup.seen().await["seen"]["authorize"]
        .as_array()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert_eq!(authorize["scope"], "mcp:read mcp:write", "{authorize}");
    let (status, _) = client.callback(&location).await;
    assert_eq!(status, 200);
    let app = client.app().await;
    assert_eq!(app["authorization"]["moreScope"], Value::Null, "{app}");
    assert_eq!(
        app["authorization"]["scopes"],
        json!(["mcp:read", "mcp:write"])
    );
    assert_eq!(
        client
            .call("write_note", json!({"text": "x"}))
            .await
            .unwrap(),
        "noted: x"
    );
    // It never stopped.
    let app = client.app().await;
    assert_eq!(
        (&app["stateChangedAt"], &app["restartCount"]),
        (&since, &json!(0))
    );
    client.gateway.shutdown().await;
}

#[tokio::test]
async fn tokens_survive_a_restart_and_disconnect_revokes_and_deletes_them() {
    let setup = Setup::new(&[]);
    let client = setup.start().await;
    client.connect().await;
    client.gateway.shutdown().await;
    let authorizations = setup.count("authorize", None).await;

    // A new gateway on the same store runs the app at once with the stored tokens.
    let client = setup.start().await;
    client.wait(Lifecycle::Running).await;
    assert_eq!(
        client.call("whoami", json!({})).await.unwrap(),
        "hello, authorized client"
    );
    assert_eq!(setup.count("authorize", None).await, authorizations);

    // Disconnect: revoked at the server, gone from the store, and the app asks again.
    let file = TokenStore::open(setup.store.path(), &KeySource::Text(Secret::new(KEY)))
        .unwrap()
        .file_of(&AppId::new("crm").unwrap());
    assert!(file.exists());
    let (status, answer) = client.post("/apps/crm/disconnect").await;
    assert_eq!(
        (status, &answer["restarted"]),
        (200, &json!(true)),
        "{answer}"
    );
    assert!(setup.count("revoke", None).await >= 1);
    assert!(!file.exists());
    client.wait(Lifecycle::NeedsAuthorization).await;
    client.gateway.shutdown().await;
}

#[tokio::test]
async fn a_refused_entry_or_a_bare_401_is_a_clear_last_error() {
    let mut setup = Setup::new(&[]);
    setup.entry = OAuthEntryConfig {
        enabled: Some(false),
        ..OAuthEntryConfig::default()
    };
    let client = setup.start().await;
    client.wait(Lifecycle::Failed).await;
    let app = client.app().await;
    assert_eq!(
        app["lastError"],
        "app crm asks for OAuth authorization, which its entry refuses (`OAuth.Enabled` is false)"
    );
    assert_eq!(app["authorization"]["state"], "failed", "{app}");
    assert_eq!(
        (&app["restartCount"], &app["nextRestartAt"]),
        (&json!(0), &Value::Null)
    );
    let (status, answer) = client.post("/apps/crm/authorize").await;
    assert_eq!(status, 409, "{answer}");
    client.gateway.shutdown().await;

    let setup = Setup::new(&["--no-challenge", "--prm", "none"]);
    let client = setup.start().await;
    client.wait(Lifecycle::Failed).await;
    let app = client.app().await;
    assert!(
        app["lastError"]
            .as_str()
            .unwrap()
            .contains("answered 401 but publishes no OAuth metadata"),
        "{app}"
    );
    assert_eq!(
        (&app["restartCount"], &app["nextRestartAt"]),
        (&json!(0), &Value::Null)
    );
    client.gateway.shutdown().await;
}

#[tokio::test]
async fn the_client_metadata_document_is_served_and_used_where_the_operator_publishes_it() {
    // An authorization server that accepts client ID metadata documents.
    let mut setup = Setup::new(&["--cimd"]);
    let document_url = "https://gw.example.com/mcpapp/client.json";
    setup.settings.oauth_client_metadata_url = Some(document_url.to_owned());
    let client = setup.start().await;

    // Public, like the callback: authorization servers fetch it without the gateway's token.
    let (status, body) = client
        .request(reqwest::Method::GET, "/oauth/client-metadata.json", false)
        .await;
    assert_eq!(status, 200, "{body}");
    let document: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(document["client_id"], document_url);
    assert_eq!(
        document["redirect_uris"],
        json!([format!("{}/oauth/callback", client.url)])
    );
    assert_eq!(document["token_endpoint_auth_method"], "none");

    // The gateway presents the document's URL as its client ID, registering nothing.
    let (status, answer) = client.post("/apps/crm/authorize").await;
    assert_eq!(status, 200, "{answer}");
    let url = url::Url::parse(answer["url"].as_str().unwrap()).unwrap();
    let client_id = url
        .query_pairs()
        .find(|(k, _)| k == "client_id")
        .map(|(_, v)| v.into_owned());
    assert_eq!(client_id.as_deref(), Some(document_url));
    client.connect().await;
    assert_eq!(setup.count("register", None).await, 0);
    assert_eq!(
        client.call("whoami", json!({})).await.unwrap(),
        "hello, authorized client"
    );
    client.gateway.shutdown().await;

    // Anything but an https URL with a path stops the gateway with an error naming it.
    setup.settings.oauth_client_metadata_url = Some("http://gw.example.com/client.json".into());
    let Err(err) = setup.try_start().await else {
        panic!("a gateway started with a plain-http document URL");
    };
    assert!(
        err.to_string()
            .contains("http://gw.example.com/client.json"),
        "{err}"
    );
}
