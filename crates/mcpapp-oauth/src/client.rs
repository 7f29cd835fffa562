//! [`OAuthClient`]: the gateway-wide part — its builder, the client metadata document, the
//! callback (`complete`), and one [`AppAuthorizer`] per app.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcpapp_manifest::AppId;
use url::Url;

use crate::authorizer::{AppAuthorizer, AppInner};
use crate::checks::{application_type, check_response_issuer, is_loopback};
use crate::error::{AuthorizeError, CallbackError, relay};
use crate::flow::describe;
use crate::secret::Secret;
use crate::settings::AppSettings;
use crate::shared::{
    Clock, Completed, Core, DEFAULT_CLIENT_NAME, DEFAULT_MAX_PENDING, DEFAULT_STATE_TTL,
    PendingFlow, PendingFlows, SystemClock,
};
use crate::store::TokenStore;

/// The query of a redirect to the callback. `Debug` hides the code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallbackParams {
    /// `state`.
    pub state: Option<String>,
    /// `code`.
    pub code: Option<Secret>,
    /// `iss` (RFC 9207).
    pub iss: Option<String>,
    /// `error`.
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
}

impl CallbackParams {
    /// From a query string (`code=…&state=…`); unknown parameters are ignored, a repeated
    /// one keeps its first value.
    pub fn from_query(query: &str) -> Self {
        let mut params = Self::default();
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let value = value.into_owned();
            match name.as_ref() {
                "state" if params.state.is_none() => params.state = Some(value),
                "code" if params.code.is_none() => params.code = Some(Secret::new(value)),
                "iss" if params.iss.is_none() => params.iss = Some(value),
                "error" if params.error.is_none() => params.error = Some(value),
                "error_description" if params.error_description.is_none() => {
                    params.error_description = Some(value);
                }
                _ => {}
            }
        }
        params
    }

    /// From the whole redirect URL.
    pub fn from_url(url: &Url) -> Self {
        Self::from_query(url.query().unwrap_or_default())
    }
}

/// Why [`OAuthClientBuilder::build`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The redirect URI is not `http(s)` with a host.
    #[error("the OAuth redirect URI {0} is not an http or https URL with a host")]
    RedirectUri(String),
    /// The client metadata document URL is not `https` with a path (SEP-991).
    #[error("the OAuth client metadata document URL {0} must be https with a path")]
    ClientMetadataUrl(String),
}

/// Builds an [`OAuthClient`].
#[derive(Debug)]
pub struct OAuthClientBuilder {
    store: TokenStore,
    redirect_uri: Url,
    client_metadata_url: Option<Url>,
    client_name: String,
    clock: Arc<dyn Clock>,
    state_ttl: Duration,
    max_pending: usize,
}

impl OAuthClientBuilder {
    /// The URL of the gateway's client ID metadata document (served at
    /// [`crate::CLIENT_METADATA_PATH`] on an https origin), used with authorization servers
    /// that support them.
    pub fn client_metadata_url(mut self, url: Url) -> Self {
        self.client_metadata_url = Some(url);
        self
    }

    /// The client name sent with registrations and in the metadata document (`mcpapp gateway` by
    /// default).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// The clock (the system's by default).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long a `state` stays valid (ten minutes by default).
    pub fn state_ttl(mut self, ttl: Duration) -> Self {
        self.state_ttl = ttl;
        self
    }

    /// How many flows may wait at once (64 by default, at least 1); beyond it the oldest is
    /// dropped.
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = max.max(1);
        self
    }

    /// The client.
    ///
    /// # Errors
    /// [`BuildError`] for a redirect URI that is not http(s) or a metadata URL that is not
    /// https with a path.
    pub fn build(self) -> Result<OAuthClient, BuildError> {
        let redirect_ok = matches!(self.redirect_uri.scheme(), "http" | "https")
            && self.redirect_uri.host().is_some();
        if !redirect_ok {
            return Err(BuildError::RedirectUri(self.redirect_uri.to_string()));
        }
        if let Some(url) = &self.client_metadata_url
            && (url.scheme() != "https" || url.path() == "/" || url.host().is_none())
        {
            return Err(BuildError::ClientMetadataUrl(url.to_string()));
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(15))
            .build()
            .unwrap_or_default();
        Ok(OAuthClient {
            core: Arc::new(Core {
                store: self.store,
                redirect_uri: self.redirect_uri,
                client_metadata_url: self.client_metadata_url,
                client_name: self.client_name,
                clock: self.clock,
                flows: PendingFlows::new(self.state_ttl, self.max_pending),
                http,
            }),
            apps: Arc::new(Mutex::new(HashMap::new())),
        })
    }
}

/// The gateway as the OAuth client of its apps. Cheap to clone.
///
/// [`OAuthClient::app`] gives each HTTP app its [`AppAuthorizer`] (the HTTP link's and the
/// API's handle); [`OAuthClient::complete`] is the `/oauth/callback` route.
#[derive(Debug, Clone)]
pub struct OAuthClient {
    core: Arc<Core>,
    apps: Arc<Mutex<HashMap<AppId, AppAuthorizer>>>,
}

impl OAuthClient {
    /// Starts building a client that keeps tokens in `store` and has authorization servers
    /// redirect to `redirect_uri` (the gateway's `<origin>/oauth/callback`, see
    /// [`crate::callback_url`]).
    pub fn builder(store: TokenStore, redirect_uri: Url) -> OAuthClientBuilder {
        OAuthClientBuilder {
            store,
            redirect_uri,
            client_metadata_url: None,
            client_name: DEFAULT_CLIENT_NAME.to_owned(),
            clock: Arc::new(SystemClock),
            state_ttl: DEFAULT_STATE_TTL,
            max_pending: DEFAULT_MAX_PENDING,
        }
    }

    /// The token store.
    pub fn store(&self) -> &TokenStore {
        &self.core.store
    }

    /// The gateway's redirect URI.
    pub fn redirect_uri(&self) -> &Url {
        &self.core.redirect_uri
    }

    fn apps(&self) -> std::sync::MutexGuard<'_, HashMap<AppId, AppAuthorizer>> {
        self.apps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The authorizer of `app` at `server_url` (its MCP endpoint). The same one comes back
    /// while the URL and settings stay the same; otherwise a new one replaces it. A new one
    /// starts from the store: tokens issued for this URL make it authorized at once.
    ///
    /// # Errors
    /// [`AuthorizeError::Store`] when the app's record cannot be read.
    pub fn app(
        &self,
        app: AppId,
        server_url: Url,
        settings: AppSettings,
    ) -> Result<AppAuthorizer, AuthorizeError> {
        let mut apps = self.apps();
        if let Some(existing) = apps.get(&app)
            && existing.inner.server_url == server_url
            && existing.inner.settings == settings
        {
            return Ok(existing.clone());
        }
        let authorizer = AppAuthorizer {
            inner: Arc::new(AppInner::restore(
                self.core.clone(),
                app.clone(),
                server_url,
                settings,
            )?),
        };
        apps.insert(app, authorizer.clone());
        Ok(authorizer)
    }

    /// Forgets `app`'s authorizer (the app left the configuration); its tokens stay stored.
    pub fn remove(&self, app: &AppId) {
        self.apps().remove(app);
        self.core.flows.remove_app(app);
    }

    /// Revokes and deletes everything stored for `app` (it was uninstalled).
    ///
    /// # Errors
    /// [`AuthorizeError::Store`] when the record cannot be read or removed.
    pub async fn forget(&self, app: &AppId) -> Result<(), AuthorizeError> {
        let authorizer = self.apps().remove(app);
        match authorizer {
            Some(authorizer) => authorizer.disconnect().await,
            None => {
                crate::authorizer::revoke_stored(&self.core, app, None).await;
                self.core.flows.remove_app(app);
                self.core.store.remove_app(app).await?;
                Ok(())
            }
        }
    }

    /// Completes an authorization from the redirect to `/oauth/callback`: the `state` must be
    /// live and unused (it is used up whatever happens next), `iss` must match the issuer
    /// (before any `error` is believed or any code sent), then the code is exchanged (with
    /// its PKCE verifier and `resource`) and the app's authorizer gets the tokens.
    ///
    /// # Errors
    /// [`CallbackError`]; its message never includes the code.
    pub async fn complete(&self, params: &CallbackParams) -> Result<Completed, CallbackError> {
        let state = params.state.as_deref().ok_or(CallbackError::MissingState)?;
        let flow = match self.core.flows.take(state, self.core.clock.now()) {
            Ok(flow) => flow,
            Err(err) => {
                if let CallbackError::Expired { app, .. } = &err
                    && let Some(authorizer) = self.apps().get(app)
                {
                    authorizer.inner.flow_failed();
                }
                return Err(err);
            }
        };
        let authorizer = self.apps().get(&flow.app).cloned();
        let result = self
            .exchange(params, state, flow, authorizer.as_ref())
            .await;
        if let (Err(err), Some(authorizer)) = (&result, &authorizer) {
            tracing::warn!(app = %authorizer.inner.app, error = %err, "an OAuth authorization was refused");
            authorizer.inner.flow_failed();
        }
        result
    }

    async fn exchange(
        &self,
        params: &CallbackParams,
        state: &str,
        flow: PendingFlow,
        authorizer: Option<&AppAuthorizer>,
    ) -> Result<Completed, CallbackError> {
        let app = flow.app.clone();
        if let Err(problem) =
            check_response_issuer(&flow.issuer, flow.iss_advertised, params.iss.as_deref())
        {
            return Err(CallbackError::Issuer {
                app,
                issuer: flow.issuer,
                problem: problem.to_string(),
            });
        }
        if let Some(error) = &params.error {
            return Err(CallbackError::Denied {
                app,
                issuer: flow.issuer,
                error: relay(error),
                description: params.error_description.as_ref().map(relay),
            });
        }
        let code = params
            .code
            .as_ref()
            .ok_or_else(|| CallbackError::MissingCode { app: app.clone() })?;
        let Some(authorizer) = authorizer else {
            return Err(CallbackError::AppGone { app });
        };
        flow.manager
            .exchange_code_for_token_with_issuer(code.expose(), state, params.iss.as_deref())
            .await
            .map_err(|err| CallbackError::Exchange {
                app: app.clone(),
                issuer: flow.issuer.clone(),
                message: describe(&err),
            })?;
        Ok(authorizer.inner.granted(flow).await?)
    }

    /// The gateway's client ID metadata document (SEP-991), to serve at the metadata URL;
    /// `None` without one.
    pub fn client_metadata_document(&self) -> Option<serde_json::Value> {
        let url = self.core.client_metadata_url.as_ref()?;
        Some(serde_json::json!({
            "client_id": url.as_str(),
            "client_name": self.core.client_name,
            "redirect_uris": [self.core.redirect_uri.as_str()],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": application_type(&self.core.redirect_uri),
        }))
    }

    /// Whether the redirect URI is on a loopback address (a local gateway).
    pub fn redirects_to_loopback(&self) -> bool {
        is_loopback(&self.core.redirect_uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_params_keep_the_first_value_and_hide_the_code() {
        let params = CallbackParams::from_query(
            "code=abc%2Bdef&state=s1&state=s2&iss=https%3A%2F%2Fas&error_description=x&other=1",
        );
        assert_eq!(params.state.as_deref(), Some("s1"));
        assert_eq!(params.code.as_ref().unwrap().expose(), "abc+def");
        assert_eq!(params.iss.as_deref(), Some("https://as"));
        assert_eq!(params.error, None);
        assert!(!format!("{params:?}").contains("abc"));
        let url =
            Url::parse("http://127.0.0.1/oauth/callback?error=access_denied&state=z").unwrap();
        let denied = CallbackParams::from_url(&url);
        assert_eq!(denied.error.as_deref(), Some("access_denied"));
        assert_eq!(denied.code, None);
    }
}
