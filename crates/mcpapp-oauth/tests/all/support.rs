//! The harness: the in-tree `oauth-server` as a child process, an [`OAuthClient`] on a
//! temporary store, a clock the tests can move, the browser (follow the authorization URL's
//! redirect, hand the callback URL to the client) and a tiny HTTP link that sends JSON-RPC
//! with the authorizer's token and hands every 401/403 back to it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use mcpapp_manifest::AppId;
use mcpapp_oauth::{
    AppAuthorizer, AppSettings, CallbackParams, Clock, Completed, KeySource, Next, OAuthClient,
    TokenStore, callback_url,
};
use mcpapp_testkit::HttpApp;
use serde_json::{Value, json};
use url::Url;

/// The redirect URI the tests register: the authorization server only checks it; the test
/// delivers the redirect to the client itself.
pub(crate) const GATEWAY_ORIGIN: &str = "http://127.0.0.1:8787";

/// A clock the test moves forward.
#[derive(Debug, Default)]
pub(crate) struct ManualClock {
    offset: Mutex<Duration>,
}

impl ManualClock {
    pub(crate) fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        SystemTime::now() + *self.offset.lock().unwrap()
    }
}

/// One server, one store folder, one client over them.
pub(crate) struct Harness {
    pub(crate) server: HttpApp,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) client: OAuthClient,
}

pub(crate) fn key_file(dir: &tempfile::TempDir) -> KeySource {
    KeySource::File(dir.path().join("oauth.key"))
}

impl Harness {
    /// `oauth-server http ARGS` and a client with a fresh store.
    pub(crate) fn start(args: &[&str]) -> Self {
        let server = HttpApp::start("oauth-server", args);
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::default());
        let client = Self::client_on(&dir, clock.clone(), None);
        Self {
            server,
            dir,
            clock,
            client,
        }
    }

    /// A client over the store in `dir` (a restart makes a new one).
    pub(crate) fn client_on(
        dir: &tempfile::TempDir,
        clock: Arc<ManualClock>,
        metadata_url: Option<&str>,
    ) -> OAuthClient {
        let store = TokenStore::open(dir.path(), &key_file(dir)).unwrap();
        let redirect = callback_url(&Url::parse(GATEWAY_ORIGIN).unwrap());
        let mut builder = OAuthClient::builder(store, redirect).clock(clock);
        if let Some(url) = metadata_url {
            builder = builder.client_metadata_url(Url::parse(url).unwrap());
        }
        builder.build().unwrap()
    }

    pub(crate) fn url(&self) -> Url {
        Url::parse(&self.server.url).unwrap()
    }

    pub(crate) fn app(&self, settings: AppSettings) -> AppAuthorizer {
        self.client
            .app(AppId::new("crm").unwrap(), self.url(), settings)
            .unwrap()
    }

    /// `GET /admin/state` of the server.
    pub(crate) async fn seen(&self) -> Value {
        let url = self.server.url.replace("/mcp", "/admin/state");
        reqwest::get(url).await.unwrap().json().await.unwrap()
    }

    pub(crate) async fn admin(&self, action: &str) {
        let url = self.server.url.replace("/mcp", &format!("/admin/{action}"));
        let status = reqwest::Client::new()
            .post(url)
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_success(), "{action}: {status}");
    }

    /// How many requests of `kind` (`authorize`, `token`, `register`, `revoke`) the
    /// authorization server saw.
    pub(crate) async fn count(&self, kind: &str) -> usize {
        self.seen().await["seen"][kind].as_array().unwrap().len()
    }

    /// Plays the user: opens the authorization URL, follows its redirect into the client.
    pub(crate) async fn connect(&self, app: &AppAuthorizer) -> Completed {
        let url = app.authorization_url().await.unwrap();
        let callback = follow(&url.url).await;
        self.client
            .complete(&CallbackParams::from_url(&callback))
            .await
            .unwrap()
    }
}

/// The `Location` the authorization endpoint redirects to.
pub(crate) async fn follow(url: &Url) -> Url {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = browser.get(url.clone()).send().await.unwrap();
    assert!(
        response.status().is_redirection(),
        "the authorization endpoint answered {}",
        response.status()
    );
    let location = response.headers()[reqwest::header::LOCATION]
        .to_str()
        .unwrap();
    Url::parse(location).unwrap()
}

/// What the link ends with when the app does not answer the call.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The authorizer's verdict after a rejection (never `Retry`).
    Next(Next),
    /// `bearer()` refused.
    #[expect(dead_code, reason = "read through Debug in assertion messages")]
    Bearer(mcpapp_oauth::AuthorizeError),
}

/// Calls `tool` as an HTTP link would: the authorizer's token on the request, a rejection
/// handed back, one retry when it says so.
pub(crate) async fn call_tool(
    app: &AppAuthorizer,
    url: &Url,
    tool: &str,
    arguments: Value,
) -> Result<Value, Refused> {
    let http = reqwest::Client::new();
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    });
    let mut retried = false;
    loop {
        let bearer = app.bearer().await.map_err(Refused::Bearer)?;
        let mut request = http
            .post(url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(bearer) = &bearer {
            request = request.header("authorization", bearer.header_value());
        }
        let response = request.send().await.unwrap();
        if response.status().is_success() {
            app.on_success();
            let answer: Value = response.json().await.unwrap();
            return Ok(answer["result"].clone());
        }
        match app
            .on_rejected(bearer.as_ref(), response.status(), response.headers())
            .await
        {
            Next::Retry if !retried => retried = true,
            Next::Retry => panic!("the authorizer asked for a second retry"),
            other => return Err(Refused::Next(other)),
        }
    }
}

/// The text of a tool result.
pub(crate) fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}
