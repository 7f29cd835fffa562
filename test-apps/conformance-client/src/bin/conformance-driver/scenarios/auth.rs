//! The `auth` family: the `auth/*` client scenarios of the 2025-11-25 and 2026-07-28 sets,
//! with the gateway as the OAuth client. The scenario's server answers 401; the gateway's app
//! waits in `NeedsAuthorization`; the driver plays the user: `POST /apps/conformance/authorize`
//! for the authorization URL, then the user's browser, which follows the suite's fake
//! authorization server's immediate redirect into the gateway's own `/oauth/callback`. Then
//! the end client lists and calls `test-tool`; when the app asks again (more scope, another
//! authorization server) the driver connects again, a bounded number of times. Discovery,
//! client identification, PKCE, `resource`, `iss` and the rest are the gateway's doing: the
//! suite's servers judge what reached them.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

use crate::client::Session;
use crate::gateway::{APP_ID, Gateway};

pub(super) const SCENARIOS: &[&str] = &[
    // 2025-11-25 (and 2026-07-28).
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    // 2026-07-28 only.
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

/// The client ID metadata document's URL the suite's `auth/basic-cimd` expects (the suite
/// never fetches it): the gateway is told its document is published there.
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";
/// The variable the gateway reads a pre-registered client's secret from.
const SECRET_VAR: &str = "CONFORMANCE_OAUTH_CLIENT_SECRET";
/// Authorizations the driver goes through at most in one scenario (the gateway stops asking
/// after three step-ups in a row; `auth/scope-retry-limit` checks that).
const CONNECTS: usize = 5;
/// How long the app may take to run (or give up) after the redirect came back.
const SETTLE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

/// The gateway's settings for `scenario`: where its client ID metadata document is published
/// for the metadata document scenario, the suite's pre-registered client (its secret through an `env:` reference).
pub(super) fn settings_extras(scenario: &str, context: &Value) -> Value {
    match scenario {
        "auth/basic-cimd" => json!({ "Gateway": { "OAuthClientMetadataUrl": CIMD_URL } }),
        "auth/pre-registration" => {
            let mut oauth = json!({ "ClientId": context["client_id"] });
            if context["client_secret"].is_string() {
                oauth["ClientSecret"] = json!(format!("env:{SECRET_VAR}"));
            }
            json!({ "McpApps": { "Entries": { APP_ID: { "OAuth": oauth } } } })
        }
        _ => json!({}),
    }
}

/// The gateway's environment for `scenario` (the pre-registered client's secret).
pub(super) fn gateway_env(context: &Value) -> Vec<(String, String)> {
    context["client_secret"]
        .as_str()
        .map(|secret| vec![(SECRET_VAR.to_owned(), secret.to_owned())])
        .unwrap_or_default()
}

/// Before the end client connects: connects the app if it waits for the user.
pub(super) async fn prepare(gateway: &Gateway) -> anyhow::Result<Vec<Value>> {
    let mut steps = Vec::new();
    if waiting(&gateway.detail().await?) {
        connect(gateway, &mut steps).await?;
    }
    Ok(steps)
}

/// Lists and calls `test-tool`; when the app asks for the user again (more access, another
/// authorization server), connects it again and retries, up to [`CONNECTS`] times in all.
pub(super) async fn run(session: &mut Session<'_>) -> anyhow::Result<()> {
    let gateway = session
        .gateway()
        .context("the auth family needs a gateway")?;
    for _ in 0..CONNECTS {
        let called = match session.list_tools().await {
            Ok(_) => session.call("test-tool", json!({})).await.map(drop),
            Err(err) => Err(err),
        };
        let detail = gateway.detail().await?;
        if called.is_ok() && !waiting(&detail) {
            return Ok(());
        }
        if !waiting(&detail) {
            return called.with_context(|| {
                format!(
                    "the app is {} ({})",
                    detail["lifecycle"], detail["lastError"]
                )
            });
        }
        // The failed request is answered by connecting again and retrying.
        session.supersede_failures();
        let mut steps = Vec::new();
        let connected = connect(gateway, &mut steps).await;
        for step in steps {
            session.push_step(step);
        }
        connected?;
    }
    bail!("the app still asks to be connected after {CONNECTS} authorizations")
}

/// Whether the app waits for the user: to be connected, or to grant more access.
fn waiting(detail: &Value) -> bool {
    let auth = &detail["authorization"];
    detail["lifecycle"] == "NeedsAuthorization"
        || auth["state"] == "needsAuthorization"
        || auth["moreScope"].is_array()
}

/// The user's part of one authorization: asks for the URL, follows the authorization
/// server's redirect into the gateway's callback, and waits for the app to settle.
async fn connect(gateway: &Gateway, steps: &mut Vec<Value>) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let authorize = format!("{}/apps/{APP_ID}/authorize", gateway.base());
    let response = http.post(&authorize).send().await?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    steps.push(json!({
        "step": "authorize",
        "ok": status.is_success(),
        "status": status.as_u16(),
        "result": {"issuer": answer["issuer"], "scopes": answer["scopes"], "error": answer["error"]},
    }));
    ensure!(status.is_success(), "POST {authorize}: {status}: {answer}");
    let url = answer["url"].as_str().context("no authorization URL")?;

    // The browser: the suite's authorization server redirects at once.
    let response = http
        .get(url)
        .send()
        .await
        .context("GET the authorization URL")?;
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(location) = location else {
        bail!(
            "the authorization server answered {} without a redirect",
            response.status()
        );
    };
    let callback = location;
    ensure!(
        callback.starts_with(gateway.base()),
        "the authorization server redirected elsewhere than the gateway"
    );
    let response = http
        .get(&callback)
        .send()
        .await
        .context("GET the callback")?;
    let status = response.status();
    let page = response.text().await.unwrap_or_default();
    let message = page
        .split("<p id=\"message\">")
        .nth(1)
        .and_then(|rest| rest.split("</p>").next())
        .unwrap_or_default()
        .to_owned();
    steps.push(json!({
        "step": "callback",
        "ok": status.is_success(),
        "status": status.as_u16(),
        "result": message,
    }));
    ensure!(
        status.is_success(),
        "the callback refused the redirect: {message}"
    );

    let started = Instant::now();
    loop {
        let detail = gateway.detail().await?;
        let lifecycle = detail["lifecycle"].as_str().unwrap_or_default();
        let settled = match lifecycle {
            "Running" => gateway.tools_registered(&detail),
            "Failed" | "Stopped" | "NeedsAuthorization" => true,
            _ => false,
        } && detail["authorization"]["state"] != "authorizing";
        if settled {
            // Asked for the user again (another authorization server, say): the run
            // connects it again, within its bound.
            steps.push(json!({
                "step": "app",
                "ok": lifecycle == "Running" || lifecycle == "NeedsAuthorization",
                "result": {"lifecycle": lifecycle, "lastError": detail["lastError"],
                           "authorization": detail["authorization"]},
            }));
            return Ok(());
        }
        ensure!(
            started.elapsed() < SETTLE,
            "the app did not settle within {} s: {detail}",
            SETTLE.as_secs()
        );
        tokio::time::sleep(POLL).await;
    }
}
