//! Token revocation (RFC 7009) when the user disconnects an app: rmcp has none. The refresh
//! token first (servers revoke its access tokens with it), then the access token; best effort,
//! a failure is logged (without the token) and the tokens are deleted anyway.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use oauth2::TokenResponse as _;
use rmcp::transport::auth::StoredCredentials;
use url::form_urlencoded;

use crate::checks::check_authorization_url;
use crate::error::relay;
use crate::secret::Secret;

/// The client that authenticates a revocation.
#[derive(Debug, Clone)]
pub(crate) struct RevokingClient {
    pub(crate) client_id: String,
    pub(crate) secret: Option<Secret>,
    /// `token_endpoint_auth_methods_supported` of the issuer: `client_secret_post` is used
    /// only when `client_secret_basic` is not offered, as for the token endpoint.
    pub(crate) auth_methods: Vec<String>,
}

/// Revokes the tokens in `credentials` at `endpoint`; returns how many were accepted.
pub(crate) async fn revoke_all(
    http: &reqwest::Client,
    endpoint: &str,
    client: &RevokingClient,
    credentials: &StoredCredentials,
) -> usize {
    let Some(tokens) = credentials.token_response.as_ref() else {
        return 0;
    };
    let mut pairs = Vec::new();
    if let Some(refresh) = tokens.refresh_token() {
        pairs.push((refresh.secret().as_str(), "refresh_token"));
    }
    pairs.push((tokens.access_token().secret().as_str(), "access_token"));
    let mut accepted = 0;
    for (token, hint) in pairs {
        match revoke(http, endpoint, client, token, hint).await {
            Ok(()) => accepted += 1,
            Err(message) => tracing::warn!(
                endpoint,
                token_type = hint,
                error = %message,
                "revoking an OAuth token failed; it is deleted here anyway"
            ),
        }
    }
    accepted
}

async fn revoke(
    http: &reqwest::Client,
    endpoint: &str,
    client: &RevokingClient,
    token: &str,
    hint: &str,
) -> Result<(), String> {
    let url = check_authorization_url(endpoint)
        .map_err(|reason| format!("the revocation endpoint is refused: {reason}"))?;
    let use_post = client
        .auth_methods
        .iter()
        .any(|m| m == "client_secret_post")
        && !client
            .auth_methods
            .iter()
            .any(|m| m == "client_secret_basic");
    // The form is built before any await: its serializer cannot cross threads.
    let (body, basic) = {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("token", token)
            .append_pair("token_type_hint", hint);
        let mut basic = None;
        match &client.secret {
            Some(secret) if !use_post => {
                // RFC 6749 §2.3.1: both parts form-encoded before the Basic encoding.
                let encode = |text: &str| {
                    form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>()
                };
                let credentials =
                    format!("{}:{}", encode(&client.client_id), encode(secret.expose()));
                let mut value = reqwest::header::HeaderValue::from_str(&format!(
                    "Basic {}",
                    STANDARD.encode(credentials)
                ))
                .map_err(|_| "the client credentials cannot go in a header".to_owned())?;
                value.set_sensitive(true);
                basic = Some(value);
            }
            Some(secret) => {
                form.append_pair("client_id", &client.client_id)
                    .append_pair("client_secret", secret.expose());
            }
            None => {
                form.append_pair("client_id", &client.client_id);
            }
        }
        (form.finish(), basic)
    };
    let mut request = http.post(url);
    if let Some(value) = basic {
        request = request.header(reqwest::header::AUTHORIZATION, value);
    }
    let response = request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|err| relay(err.without_url()))?;
    // RFC 7009 §2.2: 200 also for a token the server no longer knows.
    if response.status().is_success() {
        Ok(())
    } else {
        Err(format!("the server answered HTTP {}", response.status()))
    }
}
