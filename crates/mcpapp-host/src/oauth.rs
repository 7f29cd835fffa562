//! The gateway as the OAuth client of its HTTP apps, over HTTP: "Connect" and "Disconnect"
//! (`POST /apps/{id}/authorize`, `POST /apps/{id}/disconnect`, behind the token), the
//! redirect back from an authorization server (`GET /oauth/callback`) and the gateway's client
//! ID metadata document (`GET /oauth/client-metadata.json`), both public.
//!
//! The callback needs no bearer token (an authorization server's redirect carries none): a
//! live, single-use `state` handed out by `authorize` guards it, and everything else about
//! the response (`iss`, the code exchange with its PKCE verifier) is `mcpapp_oauth`'s. It
//! answers with a small page that tells the host page (a `BroadcastChannel` on the gateway's
//! origin) and closes itself; it is never cached, sends no referrer, and runs only its own
//! script (a nonce-only CSP). Tokens never appear in any answer of this module: only the
//! authorization URL, the issuer, scopes and states.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpapp_manifest::Timestamp;
use mcpapp_oauth::{AppAuthorizer, AuthorizeError, CallbackError, CallbackParams, OAuthClient};
use mcpapp_supervisor::{AppHandle, Supervisor};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::error::ApiError;

/// What the OAuth routes use.
#[derive(Clone)]
pub(crate) struct OAuthState {
    pub(crate) supervisor: Supervisor,
    /// The gateway's OAuth client; without one (no token store) the routes say so.
    pub(crate) client: Option<OAuthClient>,
}

fn find(state: &OAuthState, id: &str) -> Result<AppHandle, ApiError> {
    state
        .supervisor
        .get(id)
        .ok_or_else(|| ApiError::NotFound(format!("no app with id '{id}'")))
}

fn authorizer(state: &OAuthState, handle: &AppHandle) -> Result<AppAuthorizer, ApiError> {
    if state.client.is_none() {
        return Err(ApiError::Conflict(
            "this gateway authorizes to no app: it was started without an OAuth token store"
                .to_owned(),
        ));
    }
    handle.authorizer().ok_or_else(|| {
        ApiError::Conflict(format!(
            "app '{}' is not one the gateway authorizes to with OAuth (only HTTP apps without an \
             Authorization header or URL credentials of their own are)",
            handle.id()
        ))
    })
}

/// How an authorization error is answered: the operator's settings are a conflict, the
/// authorization server's answers a bad gateway.
fn authorize_error(err: &AuthorizeError) -> Response {
    let status = match err {
        AuthorizeError::Refused { .. }
        | AuthorizeError::NoClientIdentity { .. }
        | AuthorizeError::ClientIssuerMismatch { .. }
        | AuthorizeError::StepUpExhausted { .. } => StatusCode::CONFLICT,
        AuthorizeError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_GATEWAY,
    };
    (status, Json(json!({ "error": err.to_string() }))).into_response()
}

/// `POST /apps/{id}/authorize`: an authorization URL for the user ("Connect", or "Grant more
/// access" when the app asked for more scope): `{url, issuer, scopes, expiresAt}`. The URL is
/// `https:`, or `http:` on a loopback address; its `state` is single-use and expires at
/// `expiresAt`.
pub(crate) async fn authorize(
    State(state): State<OAuthState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let handle = find(&state, &id)?;
    let authorizer = authorizer(&state, &handle)?;
    match authorizer.authorization_url().await {
        Ok(url) => {
            info!(app = %id, issuer = %url.issuer, "handed out an OAuth authorization URL");
            Ok(Json(json!({
                "url": url.url.as_str(),
                "issuer": url.issuer,
                "scopes": url.scopes,
                "expiresAt": Timestamp::from_system_time(url.expires_at),
            }))
            .into_response())
        }
        Err(err) => {
            warn!(app = %id, error = %err, "no OAuth authorization URL");
            Ok(authorize_error(&err))
        }
    }
}

/// `POST /apps/{id}/disconnect`: revokes the app's tokens where its authorization server
/// offers revocation, deletes everything stored for it, and restarts it (it then asks to be
/// connected again).
pub(crate) async fn disconnect(
    State(state): State<OAuthState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let handle = find(&state, &id)?;
    let authorizer = authorizer(&state, &handle)?;
    if let Err(err) = authorizer.disconnect().await {
        warn!(app = %id, error = %err, "disconnecting failed");
        return Ok(authorize_error(&err));
    }
    info!(app = %id, "disconnected the app from its authorization server");
    // A stopped app stays stopped; any other starts again without tokens.
    let restarted = match handle.lifecycle() {
        mcpapp_manifest::Lifecycle::Stopped => false,
        _ => handle.restart().is_ok(),
    };
    Ok((
        StatusCode::OK,
        Json(json!({ "ok": true, "id": id, "restarted": restarted })),
    )
        .into_response())
}

/// `GET /oauth/client-metadata.json`: the gateway's client ID metadata document, when its
/// public origin is https (authorization servers fetch it to learn the gateway's redirect
/// URI); 404 otherwise.
pub(crate) async fn client_metadata(State(state): State<OAuthState>) -> Response {
    match state
        .client
        .as_ref()
        .and_then(OAuthClient::client_metadata_document)
    {
        Some(document) => (
            [(
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=300"),
            )],
            Json(document),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `GET /oauth/callback?code&state&iss`: completes the authorization the `state` belongs to.
/// The app starts (or gets its new scopes) as soon as its tokens are in; the answer is a page
/// for the user's browser.
pub(crate) async fn callback(
    State(state): State<OAuthState>,
    RawQuery(query): RawQuery,
) -> Response {
    let Some(client) = state.client.as_ref() else {
        return callback_page(
            StatusCode::NOT_FOUND,
            None,
            "This gateway does not authorize to apps.",
        );
    };
    let params = CallbackParams::from_query(query.as_deref().unwrap_or_default());
    match client.complete(&params).await {
        Ok(done) => {
            info!(app = %done.app, issuer = %done.issuer, "completed an OAuth authorization");
            callback_page(
                StatusCode::OK,
                Some(done.app.as_str()),
                &format!("{} is connected.", done.app),
            )
        }
        Err(err) => {
            warn!(error = %err, "an OAuth redirect was refused");
            let status = match err {
                CallbackError::Exchange { .. } => StatusCode::BAD_GATEWAY,
                CallbackError::AppGone { .. } => StatusCode::NOT_FOUND,
                CallbackError::Authorize(_) => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::BAD_REQUEST,
            };
            callback_page(status, None, &format!("Not connected: {err}"))
        }
    }
}

/// The callback's page: says what happened, tells the host page on this origin, and closes.
fn callback_page(status: StatusCode, app: Option<&str>, message: &str) -> Response {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let ok = app.is_some();
    // App ids are `[A-Za-z0-9._-]`, but the note is escaped for a script element anyway.
    let note = json!({ "type": "mcpapp-oauth", "ok": ok, "app": app, "message": message })
        .to_string()
        .replace('<', "\\u003c");
    let title = if ok { "Connected" } else { "Not connected" };
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>mcpapp: {title}</title>\
         <style nonce=\"{nonce}\">body{{font:15px system-ui,sans-serif;margin:3em auto;\
         max-width:40em;padding:0 1em}}</style></head>\
         <body><h1>{title}</h1><p id=\"message\">{message}</p>\
         <p>You can close this window.</p>\
         <script nonce=\"{nonce}\">(() => {{ const note = {note};\n\
         try {{ new BroadcastChannel(\"mcpapp-oauth\").postMessage(note); }} catch (_) {{}}\n\
         try {{ if (window.opener) window.opener.postMessage(note, location.origin); }} \
         catch (_) {{}}\n\
         if (note.ok) setTimeout(() => window.close(), 1500); }})();</script>\
         </body></html>\n",
        message = escape_html(message),
    );
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    // The URL carried a code and a state: nothing may keep or repeat it.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The `authorization` of an app as the API shows it: `null` for apps the gateway does not
/// authorize to, or that need nothing (anonymous).
pub(crate) fn authorization_json(state: Option<&mcpapp_oauth::AuthState>) -> Value {
    match state {
        None | Some(mcpapp_oauth::AuthState::Anonymous) => Value::Null,
        Some(state) => serde_json::to_value(state).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_callback_page_is_never_cached_and_runs_only_its_own_script() {
        let response = callback_page(StatusCode::BAD_REQUEST, None, "<b>bad</b> & \"worse\"");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let headers = response.headers().clone();
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(
            csp.starts_with("default-src 'none'; script-src 'nonce-"),
            "{csp}"
        );
        let nonce = csp
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            body.contains("&lt;b&gt;bad&lt;/b&gt; &amp; &quot;worse&quot;"),
            "{body}"
        );
        assert!(!body.contains("<b>"), "{body}");
        assert!(
            body.contains(&format!("<script nonce=\"{nonce}\">")),
            "{body}"
        );
        // The note in the script cannot close the script element.
        assert!(body.contains("\\u003cb>bad"), "{body}");
    }
}
