//! The authorization server: metadata, `/authorize` (an immediate redirect), `/token`,
//! `/register` and `/revoke`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::shared::{AccessToken, Client, Code, Grant, RefreshToken, Shared, random, s256};
use crate::{Iss, IssSupported, MetadataAt};

/// One authorization server: the shared tables seen through issuer `index` (0, or 1 for the
/// server an app migrates to).
#[derive(Debug, Clone)]
pub(crate) struct Authority {
    shared: Arc<Shared>,
    index: usize,
}

impl Authority {
    fn issuer(&self) -> &str {
        &self.shared.options.issuers[self.index]
    }
}

pub(crate) fn router(shared: Arc<Shared>, index: usize) -> Router {
    let options = &shared.options;
    let tenant = options
        .tenant
        .as_deref()
        .map(|t| format!("/{t}"))
        .unwrap_or_default();
    let metadata_path = match options.metadata_at {
        MetadataAt::Oauth => format!("/.well-known/oauth-authorization-server{tenant}"),
        MetadataAt::Oidc => format!("/.well-known/openid-configuration{tenant}"),
        MetadataAt::OidcAppended => format!("{tenant}/.well-known/openid-configuration"),
    };
    Router::new()
        .route(&metadata_path, get(metadata))
        .route(&format!("{tenant}/authorize"), get(authorize))
        .route(&format!("{tenant}/token"), post(token))
        .route(&format!("{tenant}/register"), post(register))
        .route(&format!("{tenant}/revoke"), post(revoke))
        .with_state(Authority { shared, index })
}

async fn metadata(State(authority): State<Authority>) -> Json<Value> {
    let o = &authority.shared.options;
    let issuer = authority.issuer();
    let mut doc = json!({
        "issuer": o.metadata_issuer.as_deref().unwrap_or(issuer),
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": o.auth_methods,
    });
    if o.dcr {
        doc["registration_endpoint"] = json!(format!("{issuer}/register"));
    }
    if o.revocation {
        doc["revocation_endpoint"] = json!(format!("{issuer}/revoke"));
    }
    if o.pkce_methods {
        doc["code_challenge_methods_supported"] = json!(["S256"]);
    }
    let mut scopes = o.scopes_supported.clone();
    if o.offline_access {
        scopes.push("offline_access".into());
    }
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    match o.iss_supported {
        IssSupported::Yes => doc["authorization_response_iss_parameter_supported"] = json!(true),
        IssSupported::No => doc["authorization_response_iss_parameter_supported"] = json!(false),
        IssSupported::Absent => {}
    }
    if o.cimd {
        doc["client_id_metadata_document_supported"] = json!(true);
    }
    Json(doc)
}

fn is_loopback_redirect(uri: &str) -> bool {
    url::Url::parse(uri).is_ok_and(|url| {
        url.scheme() == "http"
            && matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"))
    })
}

/// The client `id` names, if it may use `redirect_uri`.
fn client_for(authority: &Authority, id: &str) -> Option<Client> {
    let shared = &authority.shared;
    let key = (authority.index, id.to_owned());
    if let Some(client) = shared.tables().clients.get(&key) {
        return Some(client.clone());
    }
    let metadata_document = url::Url::parse(id)
        .is_ok_and(|url| url.scheme() == "https" && url.path() != "/" && url.host().is_some());
    (shared.options.cimd && metadata_document).then_some(Client {
        secret: None,
        redirect_uris: None,
    })
}

/// A redirect back to the client with `params`, `state` and the `iss` of `--iss`.
fn redirect_back(
    authority: &Authority,
    redirect_uri: &str,
    params: &[(&str, &str)],
    state: Option<&String>,
) -> Response {
    let Ok(mut url) = url::Url::parse(redirect_uri) else {
        return (StatusCode::BAD_REQUEST, "bad redirect_uri").into_response();
    };
    for (name, value) in params {
        url.query_pairs_mut().append_pair(name, value);
    }
    if let Some(state) = state {
        url.query_pairs_mut().append_pair("state", state);
    }
    let issuer = authority.issuer();
    let iss = match authority.shared.options.iss {
        Iss::Correct => Some(issuer.to_owned()),
        Iss::Omit => None,
        Iss::Wrong => Some("https://evil.example.com".to_owned()),
        Iss::Normalized => Some(format!("{issuer}/")),
    };
    if let Some(iss) = iss {
        url.query_pairs_mut().append_pair("iss", &iss);
    }
    Redirect::to(url.as_str()).into_response()
}

async fn authorize(
    State(authority): State<Authority>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let shared = &authority.shared;
    let o = &shared.options;
    let mut seen = json!(q);
    seen["issuer"] = json!(authority.issuer());
    shared.tables().seen.authorize.push(seen);
    let (Some(client_id), Some(redirect_uri)) = (q.get("client_id"), q.get("redirect_uri")) else {
        return (
            StatusCode::BAD_REQUEST,
            "client_id and redirect_uri are required",
        )
            .into_response();
    };
    let Some(client) = client_for(&authority, client_id) else {
        return (StatusCode::BAD_REQUEST, "unknown client").into_response();
    };
    let redirect_ok = match &client.redirect_uris {
        Some(uris) => uris.iter().any(|u| u == redirect_uri),
        None => is_loopback_redirect(redirect_uri),
    };
    if !redirect_ok {
        return (StatusCode::BAD_REQUEST, "unregistered redirect_uri").into_response();
    }
    let state = q.get("state");
    if o.deny {
        return redirect_back(
            &authority,
            redirect_uri,
            &[("error", "access_denied")],
            state,
        );
    }
    if q.get("response_type").map(String::as_str) != Some("code") {
        return redirect_back(
            &authority,
            redirect_uri,
            &[("error", "unsupported_response_type")],
            state,
        );
    }
    let (Some(challenge), Some("S256")) = (
        q.get("code_challenge"),
        q.get("code_challenge_method").map(String::as_str),
    ) else {
        return redirect_back(
            &authority,
            redirect_uri,
            &[("error", "invalid_request")],
            state,
        );
    };
    if q.get("resource") != Some(&o.resource) {
        return redirect_back(
            &authority,
            redirect_uri,
            &[("error", "invalid_target")],
            state,
        );
    }
    let scopes: Vec<String> = q
        .get("scope")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let code = random("code");
    {
        let mut tables = shared.tables();
        tables.seen.secrets.push(code.clone());
        tables.codes.insert(
            code.clone(),
            Code {
                grant: Grant {
                    authority: authority.index,
                    client_id: client_id.clone(),
                    scopes: scopes
                        .into_iter()
                        .filter(|s| !o.withheld.contains(s))
                        .collect(),
                    resource: o.resource.clone(),
                },
                redirect_uri: redirect_uri.clone(),
                challenge: challenge.clone(),
            },
        );
    }
    redirect_back(&authority, redirect_uri, &[("code", &code)], state)
}

/// An RFC 6749 error answer.
#[derive(Debug)]
struct Refusal(StatusCode, &'static str);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

/// The client authenticating a token or revocation request, and how.
fn authenticate(
    authority: &Authority,
    headers: &HeaderMap,
    form: &HashMap<String, String>,
) -> Result<(String, &'static str), Refusal> {
    let invalid = || Refusal(StatusCode::UNAUTHORIZED, "invalid_client");
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|pair| {
            let (id, secret) = pair.split_once(':')?;
            let decode = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
            };
            Some((decode(id)?, decode(secret)?))
        });
    let (id, secret, method) = match (basic, form.get("client_secret")) {
        (Some((id, secret)), _) => (id, Some(secret), "client_secret_basic"),
        (None, Some(secret)) => (
            form.get("client_id").cloned().ok_or_else(invalid)?,
            Some(secret.clone()),
            "client_secret_post",
        ),
        (None, None) => (
            form.get("client_id").cloned().ok_or_else(invalid)?,
            None,
            "none",
        ),
    };
    if !authority
        .shared
        .options
        .auth_methods
        .iter()
        .any(|m| m == method)
    {
        return Err(invalid());
    }
    let client = client_for(authority, &id).ok_or_else(invalid)?;
    if client.secret != secret {
        return Err(invalid());
    }
    Ok((id, method))
}

async fn token(
    State(authority): State<Authority>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let shared = &authority.shared;
    let client = authenticate(&authority, &headers, &form);
    shared.tables().seen.token.push(json!({
        "issuer": authority.issuer(),
        "grantType": form.get("grant_type"),
        "authMethod": client.as_ref().map(|c| c.1).unwrap_or("refused"),
        "clientId": client.as_ref().map(|c| c.0.clone()).ok(),
        "resource": form.get("resource"),
        "scope": form.get("scope"),
    }));
    let (client_id, _) = match client {
        Ok(client) => client,
        Err(refused) => return refused.into_response(),
    };
    let grant = match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => code_grant(&authority, &client_id, &form),
        Some("refresh_token") => refresh_grant(&authority, &client_id, &form),
        _ => Err(Refusal(StatusCode::BAD_REQUEST, "unsupported_grant_type")),
    };
    match grant {
        Ok(grant) => issue(shared, grant),
        Err(refused) => refused.into_response(),
    }
}

fn code_grant(
    authority: &Authority,
    client_id: &str,
    form: &HashMap<String, String>,
) -> Result<Grant, Refusal> {
    let invalid_grant = || Refusal(StatusCode::BAD_REQUEST, "invalid_grant");
    let code = form.get("code").ok_or_else(invalid_grant)?;
    let found = authority
        .shared
        .tables()
        .codes
        .remove(code)
        .ok_or_else(invalid_grant)?;
    let verifier = form.get("code_verifier").ok_or_else(invalid_grant)?;
    if found.grant.client_id != client_id
        || found.grant.authority != authority.index
        || form.get("redirect_uri") != Some(&found.redirect_uri)
        || s256(verifier) != found.challenge
    {
        return Err(invalid_grant());
    }
    if form.get("resource") != Some(&found.grant.resource) {
        return Err(Refusal(StatusCode::BAD_REQUEST, "invalid_target"));
    }
    Ok(found.grant)
}

fn refresh_grant(
    authority: &Authority,
    client_id: &str,
    form: &HashMap<String, String>,
) -> Result<Grant, Refusal> {
    let invalid_grant = || Refusal(StatusCode::BAD_REQUEST, "invalid_grant");
    let presented = form.get("refresh_token").ok_or_else(invalid_grant)?;
    let mut tables = authority.shared.tables();
    let found = tables
        .refresh
        .get_mut(presented)
        .ok_or_else(invalid_grant)?;
    if found.revoked
        || found.grant.client_id != client_id
        || found.grant.authority != authority.index
    {
        return Err(invalid_grant());
    }
    if form
        .get("resource")
        .is_some_and(|resource| resource != &found.grant.resource)
    {
        return Err(Refusal(StatusCode::BAD_REQUEST, "invalid_target"));
    }
    // Rotation: the presented token is used up.
    found.revoked = true;
    Ok(found.grant.clone())
}

fn issue(shared: &Shared, grant: Grant) -> Response {
    let access = random("at");
    let mut body = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": shared.options.expires_in,
    });
    if !grant.scopes.is_empty() {
        body["scope"] = json!(grant.scopes.join(" "));
    }
    let mut tables = shared.tables();
    tables.seen.secrets.push(access.clone());
    if shared.options.refresh_tokens {
        let refresh = random("rt");
        body["refresh_token"] = json!(refresh);
        tables.seen.secrets.push(refresh.clone());
        tables.refresh.insert(
            refresh,
            RefreshToken {
                grant: grant.clone(),
                revoked: false,
            },
        );
    }
    tables.access.insert(
        access,
        AccessToken {
            grant,
            expires_at: Instant::now() + shared.expires_in(),
            revoked: false,
        },
    );
    ([(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

async fn register(State(authority): State<Authority>, Json(body): Json<Value>) -> Response {
    let shared = &authority.shared;
    let mut seen = body.clone();
    seen["issuer"] = json!(authority.issuer());
    shared.tables().seen.register.push(seen);
    let redirect_uris: Vec<String> = body["redirect_uris"]
        .as_array()
        .map(|uris| {
            uris.iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if redirect_uris.is_empty() {
        return Refusal(StatusCode::BAD_REQUEST, "invalid_redirect_uri").into_response();
    }
    // A public client when it asks for `none` and the server offers it; otherwise a
    // confidential one with a secret, whatever it asked for.
    let public = body["token_endpoint_auth_method"].as_str() == Some("none")
        && shared.options.auth_methods.iter().any(|m| m == "none");
    let method = if public {
        "none"
    } else {
        shared
            .options
            .auth_methods
            .iter()
            .find(|m| m.starts_with("client_secret"))
            .map_or("client_secret_basic", String::as_str)
    };
    let client_id = random("client");
    let secret = (!public).then(|| random("secret"));
    let mut tables = shared.tables();
    if let Some(secret) = &secret {
        tables.seen.secrets.push(secret.clone());
    }
    tables.clients.insert(
        (authority.index, client_id.clone()),
        Client {
            secret: secret.clone(),
            redirect_uris: Some(redirect_uris.clone()),
        },
    );
    let mut answer = json!({
        "client_id": client_id,
        "redirect_uris": redirect_uris,
        "token_endpoint_auth_method": method,
    });
    if let Some(secret) = secret {
        answer["client_secret"] = json!(secret);
    }
    (StatusCode::CREATED, Json(answer)).into_response()
}

async fn revoke(
    State(authority): State<Authority>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let shared = &authority.shared;
    let client = authenticate(&authority, &headers, &form);
    shared.tables().seen.revoke.push(json!({
        "tokenTypeHint": form.get("token_type_hint"),
        "authMethod": client.as_ref().map(|c| c.1).unwrap_or("refused"),
    }));
    if let Err(refused) = client {
        return refused.into_response();
    }
    let Some(token) = form.get("token") else {
        return Refusal(StatusCode::BAD_REQUEST, "invalid_request").into_response();
    };
    let mut tables = shared.tables();
    if let Some(found) = tables.refresh.get_mut(token) {
        found.revoked = true;
    }
    if let Some(found) = tables.access.get_mut(token) {
        found.revoked = true;
    }
    StatusCode::OK.into_response()
}
