//! [`AppAuthorizer`]: one app's side of the flow, the small API an HTTP link and the host's
//! routes use — a token for each request ([`AppAuthorizer::bearer`], renewed before it
//! expires), what a 401 or 403 means ([`AppAuthorizer::on_rejected`]: renew once and retry,
//! the user must connect, more scope is needed, or not an OAuth matter), the URL to send the
//! user to ([`AppAuthorizer::authorization_url`]) and disconnecting
//! ([`AppAuthorizer::disconnect`]). The decisions about state are the pure machine's
//! (`state.rs`); this file carries them out.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode, header::WWW_AUTHENTICATE};
use mcpapp_manifest::AppId;
use oauth2::TokenResponse as _;
use rmcp::transport::auth::{AuthError, AuthorizationManager, StoredCredentials};
use tokio::sync::watch;
use url::Url;

use crate::checks::{Challenge, bearer_challenge, refresh_at};
use crate::error::{AuthorizeError, StoreError};
use crate::flow::{self, FlowContext, ResumeError, describe};
use crate::revoke::{RevokingClient, revoke_all};
use crate::secret::Bearer;
use crate::settings::AppSettings;
use crate::shared::{AuthorizationUrl, Completed, Core, PendingFlow};
use crate::state::{
    AuthEvent, AuthMachine, AuthState, MAX_AUTHORIZATIONS_WITHOUT_SUCCESS, NeedsReason, Verdict,
};

/// What an HTTP link does after a 401 or 403, from [`AppAuthorizer::on_rejected`].
#[derive(Debug)]
#[must_use]
pub enum Next {
    /// Send the request again with [`AppAuthorizer::bearer`]'s token: a renewed one is ready.
    /// At most once per request; a second rejection is reported again and answered with
    /// another variant.
    Retry,
    /// The user must connect the app at `issuer` (the app's state is
    /// [`AuthState::NeedsAuthorization`]); fail the request.
    NeedsAuthorization {
        /// The authorization server.
        issuer: String,
    },
    /// The app wants scopes the grant lacks; the user may grant more access (the state's
    /// `more_scope` says which); fail this request, the app keeps running.
    NeedsMoreScope {
        /// The authorization server.
        issuer: String,
        /// The scopes to ask for: the union of held and challenged ones.
        scopes: Vec<String>,
    },
    /// Not an authorization matter (a 403 without `insufficient_scope`, another status):
    /// handle the response as usual.
    NotOAuth,
    /// Authorization cannot proceed; fail the request with this error.
    Fail(AuthorizeError),
}

/// The access token in use.
struct CurrentToken {
    bearer: Bearer,
    issuer: String,
    client_id: String,
    refresh_at: Option<SystemTime>,
    expires_at: Option<SystemTime>,
    /// Obtained by renewing a token a server rejected: if it is rejected too, renewing again
    /// is pointless.
    after_rejection: bool,
}

/// A manager ready to refresh, for the issuer of the current tokens.
struct Session {
    manager: AuthorizationManager,
    issuer: String,
}

/// One app's OAuth state and tokens. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct AppAuthorizer {
    pub(crate) inner: Arc<AppInner>,
}

impl fmt::Debug for AppAuthorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppAuthorizer")
            .field("app", &self.inner.app)
            .field("server_url", &self.inner.server_url.as_str())
            .field("state", &self.inner.state_tx.borrow())
            .finish()
    }
}

pub(crate) struct AppInner {
    core: Arc<Core>,
    pub(crate) app: AppId,
    pub(crate) server_url: Url,
    pub(crate) settings: AppSettings,
    machine: Mutex<AuthMachine>,
    state_tx: watch::Sender<AuthState>,
    token: RwLock<Option<CurrentToken>>,
    /// Held while a refresh or an installation runs, so one request renews and the others
    /// use its token.
    session: tokio::sync::Mutex<Option<Session>>,
    /// The last `Bearer` challenge, to seed discovery for "Connect".
    last_challenge: Mutex<Option<String>>,
    generation: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn epoch(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

impl AppInner {
    /// A new authorizer, authorized at once when the store holds tokens issued for this URL.
    pub(crate) fn restore(
        core: Arc<Core>,
        app: AppId,
        server_url: Url,
        settings: AppSettings,
    ) -> Result<Self, AuthorizeError> {
        let inner = Self {
            state_tx: watch::Sender::new(AuthState::Anonymous),
            core,
            app,
            server_url,
            settings,
            machine: Mutex::new(AuthMachine::default()),
            token: RwLock::new(None),
            session: tokio::sync::Mutex::new(None),
            last_challenge: Mutex::new(None),
            generation: AtomicU64::new(0),
        };
        if !inner.settings.enabled {
            return Ok(inner);
        }
        let record = inner.core.store.record(&inner.app)?;
        let Some((issuer, credentials)) = record.active() else {
            return Ok(inner);
        };
        if record.server_url.as_deref() != Some(inner.server_url.as_str()) {
            // Tokens are bound to the server they were issued for; never send them elsewhere.
            tracing::warn!(app = %inner.app, "stored OAuth tokens were issued for another URL of this app; they are not used");
            return Ok(inner);
        }
        let received = credentials.token_received_at.map(epoch);
        let token = inner.token_from(issuer, credentials, received, false)?;
        let scopes = credentials.granted_scopes.clone();
        *inner.token.write().unwrap_or_else(PoisonError::into_inner) = Some(token);
        inner.apply(AuthEvent::Restored {
            issuer: issuer.to_owned(),
            scopes,
        });
        Ok(inner)
    }

    fn context(&self) -> FlowContext<'_> {
        let redirect_uri = self
            .settings
            .redirect_uri
            .as_ref()
            .unwrap_or(&self.core.redirect_uri);
        FlowContext {
            app: &self.app,
            server_url: &self.server_url,
            settings: &self.settings,
            store: &self.core.store,
            redirect_uri,
            // The document lists the gateway's redirect URI only.
            client_metadata_url: self
                .core
                .client_metadata_url
                .as_ref()
                .filter(|_| redirect_uri == &self.core.redirect_uri),
            client_name: &self.core.client_name,
        }
    }

    fn state(&self) -> AuthState {
        self.state_tx.borrow().clone()
    }

    fn apply(&self, event: AuthEvent) -> Verdict {
        let mut machine = lock(&self.machine);
        let verdict = machine.apply(event);
        let state = machine.state().clone();
        self.state_tx.send_if_modified(|current| {
            if *current == state {
                return false;
            }
            tracing::info!(app = %self.app, state = ?state, "OAuth state changed");
            *current = state;
            true
        });
        verdict
    }

    /// A [`CurrentToken`] from rmcp's record; `received` anchors its expiry (the clock's now
    /// for a token just obtained).
    fn token_from(
        &self,
        issuer: &str,
        credentials: &StoredCredentials,
        received: Option<SystemTime>,
        after_rejection: bool,
    ) -> Result<CurrentToken, AuthorizeError> {
        let unusable = || AuthorizeError::UnusableToken {
            app: self.app.clone(),
            issuer: issuer.to_owned(),
        };
        let response = credentials.token_response.as_ref().ok_or_else(unusable)?;
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let bearer =
            Bearer::new(response.access_token().secret(), generation).ok_or_else(unusable)?;
        let lifetime = response.expires_in();
        Ok(CurrentToken {
            bearer,
            issuer: issuer.to_owned(),
            client_id: credentials.client_id.clone(),
            refresh_at: received
                .zip(lifetime)
                .map(|(at, life)| refresh_at(at, life)),
            expires_at: received.zip(lifetime).map(|(at, life)| at + life),
            after_rejection,
        })
    }

    /// The token just saved for `issuer`, as the current one.
    fn load_token(&self, issuer: &str, after_rejection: bool) -> Result<Bearer, AuthorizeError> {
        let record = self.core.store.record(&self.app)?;
        let credentials = record
            .issuers
            .get(issuer)
            .and_then(|entry| entry.credentials.as_ref())
            .ok_or_else(|| AuthorizeError::UnusableToken {
                app: self.app.clone(),
                issuer: issuer.to_owned(),
            })?;
        let token = self.token_from(
            issuer,
            credentials,
            Some(self.core.clock.now()),
            after_rejection,
        )?;
        let bearer = token.bearer.clone();
        *self.token.write().unwrap_or_else(PoisonError::into_inner) = Some(token);
        Ok(bearer)
    }

    fn current(&self) -> Option<(Bearer, bool, bool)> {
        let now = self.core.clock.now();
        let token = self.token.read().unwrap_or_else(PoisonError::into_inner);
        token.as_ref().map(|t| {
            (
                t.bearer.clone(),
                t.refresh_at.is_some_and(|at| now >= at),
                t.after_rejection,
            )
        })
    }

    fn needs_authorization(&self, issuer: &str) -> AuthorizeError {
        AuthorizeError::NeedsAuthorization {
            app: self.app.clone(),
            issuer: issuer.to_owned(),
        }
    }

    /// Drops the current tokens, here and in the store (the registration stays).
    async fn drop_tokens(&self, session: &mut Option<Session>) -> Result<(), StoreError> {
        let issuer = self
            .token
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .map(|t| t.issuer);
        *session = None;
        if let Some(issuer) = issuer {
            self.core
                .store
                .update(&self.app, |record| {
                    if let Some(entry) = record.issuers.get_mut(&issuer) {
                        entry.credentials = None;
                    }
                })
                .await?;
        }
        Ok(())
    }

    /// Renews the token of `generation` (unless another request already did).
    async fn renew(
        &self,
        generation: u64,
        after_rejection: bool,
    ) -> Result<Option<Bearer>, AuthorizeError> {
        let mut session = self.session.lock().await;
        let (issuer, client_id, old, expired) = {
            let token = self.token.read().unwrap_or_else(PoisonError::into_inner);
            let Some(token) = token.as_ref() else {
                return Ok(None);
            };
            if token.bearer.generation != generation {
                return Ok(Some(token.bearer.clone()));
            }
            let expired = token
                .expires_at
                .is_some_and(|at| self.core.clock.now() >= at);
            (
                token.issuer.clone(),
                token.client_id.clone(),
                token.bearer.clone(),
                expired || after_rejection,
            )
        };
        self.apply(AuthEvent::RefreshStarted);
        if session.as_ref().is_none_or(|s| s.issuer != issuer) {
            let challenge = lock(&self.last_challenge).clone();
            match flow::resume(self.context(), &issuer, &client_id, challenge.as_deref()).await {
                Ok(manager) => {
                    *session = Some(Session {
                        manager,
                        issuer: issuer.clone(),
                    });
                }
                Err(ResumeError::IssuerChanged(new_issuer)) => {
                    self.drop_tokens(&mut session).await?;
                    self.apply(AuthEvent::Challenged {
                        issuer: new_issuer.clone(),
                        reason: NeedsReason::IssuerChanged,
                    });
                    return Err(self.needs_authorization(&new_issuer));
                }
                Err(ResumeError::ClientChanged) => {
                    self.drop_tokens(&mut session).await?;
                    self.apply(AuthEvent::Challenged {
                        issuer: issuer.clone(),
                        reason: NeedsReason::Expired,
                    });
                    return Err(self.needs_authorization(&issuer));
                }
                Err(ResumeError::Failed(err)) => {
                    self.apply(AuthEvent::RefreshFailed);
                    return if expired { Err(err) } else { Ok(Some(old)) };
                }
            }
        }
        let Some(current) = session.as_ref() else {
            return Ok(None);
        };
        match current.manager.refresh_token().await {
            Ok(_) => {
                let bearer = self.load_token(&issuer, after_rejection)?;
                let scopes = self
                    .core
                    .store
                    .record(&self.app)?
                    .issuers
                    .get(&issuer)
                    .and_then(|entry| entry.credentials.as_ref())
                    .map(|c| c.granted_scopes.clone())
                    .unwrap_or_default();
                tracing::info!(app = %self.app, issuer = %issuer, "refreshed the OAuth access token");
                self.apply(AuthEvent::Refreshed { scopes });
                Ok(Some(bearer))
            }
            Err(AuthError::TokenRefreshRejected(_) | AuthError::AuthorizationRequired) => {
                tracing::warn!(app = %self.app, issuer = %issuer, "the OAuth grant ended (refresh refused or impossible); the app needs authorization");
                self.drop_tokens(&mut session).await?;
                self.apply(AuthEvent::Challenged {
                    issuer: issuer.clone(),
                    reason: NeedsReason::Expired,
                });
                Err(self.needs_authorization(&issuer))
            }
            Err(err) => {
                self.apply(AuthEvent::RefreshFailed);
                let message = describe(&err);
                tracing::warn!(app = %self.app, issuer = %issuer, error = %message, "refreshing the OAuth access token failed");
                if expired {
                    Err(AuthorizeError::RefreshFailed {
                        app: self.app.clone(),
                        issuer,
                        message,
                    })
                } else {
                    Ok(Some(old))
                }
            }
        }
    }

    /// The server wants authorization the gateway cannot supply: find its authorization server
    /// and wait for the user.
    /// `had_grant`: the rejected request carried a token (so the grant ended, rather than
    /// never existed).
    async fn challenged(&self, challenge: Option<Challenge>, had_grant: bool) -> Next {
        *lock(&self.last_challenge) = challenge.as_ref().map(|c| c.header.clone());
        let previous = self.state().issuer().map(str::to_owned);
        {
            let mut session = self.session.lock().await;
            if let Err(err) = self.drop_tokens(&mut session).await {
                return Next::Fail(err.into());
            }
        }
        let header = challenge.as_ref().map(|c| c.header.as_str());
        match flow::discover(&self.app, &self.server_url, header).await {
            Ok(found) => {
                let reason = match previous {
                    Some(previous) if previous != found.issuer => NeedsReason::IssuerChanged,
                    _ if had_grant => NeedsReason::Expired,
                    _ => NeedsReason::NotConnected,
                };
                tracing::info!(app = %self.app, issuer = %found.issuer, "the app needs OAuth authorization");
                self.apply(AuthEvent::Challenged {
                    issuer: found.issuer.clone(),
                    reason,
                });
                Next::NeedsAuthorization {
                    issuer: found.issuer,
                }
            }
            Err(err) => {
                self.apply(AuthEvent::Unusable {
                    reason: err.to_string(),
                });
                Next::Fail(err)
            }
        }
    }

    fn step_up(&self, challenge: Challenge) -> Next {
        let issuer = self.state().issuer().unwrap_or_default().to_owned();
        match self.apply(AuthEvent::ScopeChallenged {
            scopes: challenge.scopes.clone(),
        }) {
            Verdict::StepUp { scopes } => {
                *lock(&self.last_challenge) = Some(challenge.header);
                tracing::info!(app = %self.app, issuer = %issuer, scopes = %scopes.join(" "), "the app asks for more OAuth scope");
                Next::NeedsMoreScope { issuer, scopes }
            }
            Verdict::StepUpExhausted { scopes } => Next::Fail(AuthorizeError::StepUpExhausted {
                app: self.app.clone(),
                attempts: MAX_AUTHORIZATIONS_WITHOUT_SUCCESS,
                scopes: scopes.join(" "),
            }),
            Verdict::Done | Verdict::Ignored => Next::NotOAuth,
        }
    }

    /// A redirect came back refused.
    pub(crate) fn flow_failed(&self) {
        self.apply(AuthEvent::FlowFailed);
    }

    /// Tokens came from `flow`'s exchange (saved by rmcp into the store): use them.
    pub(crate) async fn granted(&self, flow: PendingFlow) -> Result<Completed, AuthorizeError> {
        let mut session = self.session.lock().await;
        let issuer = flow.issuer.clone();
        let server_url = self.server_url.to_string();
        let (endpoint, methods, key) =
            (flow.revocation_endpoint, flow.auth_methods, issuer.clone());
        let record = self
            .core
            .store
            .update(&self.app, move |record| {
                record.server_url = Some(server_url);
                record.active_issuer = Some(key.clone());
                // Tokens of another issuer are never used again (SEP-2352).
                for (other, entry) in record.issuers.iter_mut() {
                    if other != &key {
                        entry.credentials = None;
                    }
                }
                let entry = record.issuers.entry(key).or_default();
                entry.revocation_endpoint = endpoint;
                entry.auth_methods = methods;
                record.clone()
            })
            .await?;
        let scopes = record
            .issuers
            .get(&issuer)
            .and_then(|entry| entry.credentials.as_ref())
            .map(|c| c.granted_scopes.clone())
            .unwrap_or_default();
        self.load_token(&issuer, false)?;
        *session = Some(Session {
            manager: flow.manager,
            issuer: issuer.clone(),
        });
        drop(session);
        tracing::info!(app = %self.app, issuer = %issuer, scopes = %scopes.join(" "), "the app is authorized");
        self.apply(AuthEvent::Granted {
            issuer: issuer.clone(),
            scopes: scopes.clone(),
        });
        Ok(Completed {
            app: self.app.clone(),
            issuer,
            scopes,
        })
    }
}

/// Revokes what the store holds for `app` (best effort), authenticating with the stored
/// registration or the configured client.
pub(crate) async fn revoke_stored(core: &Core, app: &AppId, settings: Option<&AppSettings>) {
    let Ok(record) = core.store.record(app) else {
        return;
    };
    let Some((issuer, credentials)) = record.active() else {
        return;
    };
    let entry = &record.issuers[issuer];
    let Some(endpoint) = entry.revocation_endpoint.as_deref() else {
        tracing::info!(app = %app, issuer, "the authorization server offers no revocation; deleting the tokens only");
        return;
    };
    let secret = match (&entry.client, settings) {
        (Some(client), _) if client.client_id == credentials.client_id => {
            client.client_secret.clone()
        }
        (_, Some(settings)) if settings.client_id.as_deref() == Some(&credentials.client_id) => {
            settings.client_secret.clone()
        }
        _ => None,
    };
    let client = RevokingClient {
        client_id: credentials.client_id.clone(),
        secret,
        auth_methods: entry.auth_methods.clone(),
    };
    let accepted = revoke_all(&core.http, endpoint, &client, credentials).await;
    tracing::info!(app = %app, issuer, accepted, "revoked the app's OAuth tokens");
}

impl AppAuthorizer {
    /// The app.
    pub fn app(&self) -> &AppId {
        &self.inner.app
    }

    /// Whether the app's entry allows OAuth (`OAuth.Enabled`); a refusing authorizer turns
    /// every 401 into an error.
    pub fn is_enabled(&self) -> bool {
        self.inner.settings.enabled
    }

    /// The app's authorization state now.
    pub fn state(&self) -> AuthState {
        self.inner.state()
    }

    /// The state as it changes.
    pub fn subscribe(&self) -> watch::Receiver<AuthState> {
        self.inner.state_tx.subscribe()
    }

    /// The token to send with a request: `Ok(None)` when the app has none (send the request
    /// bare; a 401 goes to [`AppAuthorizer::on_rejected`]). A token near its expiry is
    /// renewed first (one refresh for all concurrent callers).
    ///
    /// # Errors
    /// [`AuthorizeError::NeedsAuthorization`] while the app waits for the user (or when its
    /// grant just ended); [`AuthorizeError::RefreshFailed`] when an expired token could not
    /// be renewed.
    pub async fn bearer(&self) -> Result<Option<Bearer>, AuthorizeError> {
        let inner = &self.inner;
        if !inner.settings.enabled {
            return Ok(None);
        }
        match inner.current() {
            Some((bearer, false, _)) => Ok(Some(bearer)),
            Some((bearer, true, _)) => inner.renew(bearer.generation, false).await,
            None => match inner.state().waiting_for() {
                Some(issuer) => Err(inner.needs_authorization(issuer)),
                None => Ok(None),
            },
        }
    }

    /// What to do about a response with `status` and `headers` to a request sent with
    /// `used` (`None` for a bare request). A 401 renews the token once and says [`Next::Retry`],
    /// else finds the authorization server and says [`Next::NeedsAuthorization`]; a 403
    /// `insufficient_scope` says [`Next::NeedsMoreScope`] with the union of scopes (bounded:
    /// three authorizations in a row without a success); anything else is [`Next::NotOAuth`].
    pub async fn on_rejected(
        &self,
        used: Option<&Bearer>,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Next {
        let inner = &self.inner;
        let challenge = bearer_challenge(
            headers
                .get_all(WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        let is_oauth = status == StatusCode::UNAUTHORIZED
            || (status == StatusCode::FORBIDDEN
                && challenge
                    .as_ref()
                    .is_some_and(Challenge::is_insufficient_scope));
        if !is_oauth {
            return Next::NotOAuth;
        }
        if !inner.settings.enabled {
            let err = AuthorizeError::Refused {
                app: inner.app.clone(),
            };
            inner.apply(AuthEvent::Unusable {
                reason: err.to_string(),
            });
            return Next::Fail(err);
        }
        if status == StatusCode::FORBIDDEN {
            return match challenge {
                Some(challenge) => inner.step_up(challenge),
                None => Next::NotOAuth,
            };
        }
        match (used, inner.current()) {
            // A newer token than the one rejected (or one now, for a bare request).
            (used, Some((current, _, _)))
                if used.map(|u| u.generation) != Some(current.generation) =>
            {
                return Next::Retry;
            }
            (Some(used), Some((_, _, false))) => match inner.renew(used.generation, true).await {
                Ok(Some(_)) => return Next::Retry,
                Ok(None) | Err(AuthorizeError::NeedsAuthorization { .. }) => {}
                Err(err) => return Next::Fail(err),
            },
            _ => {}
        }
        inner.challenged(challenge, used.is_some()).await
    }

    /// Tells the authorizer a request with the token went through (so the step-up bound
    /// counts from here).
    pub fn on_success(&self) {
        self.inner.apply(AuthEvent::Succeeded);
    }

    /// An authorization URL for the user: "Connect", or "Grant more access" when the state
    /// has `more_scope`. Discovery runs again (seeded by the last challenge), the client is
    /// chosen (pre-registered, a registration kept for this issuer, the metadata document,
    /// dynamic registration), and the URL's `state` is live for the client's state lifetime.
    ///
    /// # Errors
    /// [`AuthorizeError`] when OAuth is refused for the app or any step fails.
    pub async fn authorization_url(&self) -> Result<AuthorizationUrl, AuthorizeError> {
        let inner = &self.inner;
        if !inner.settings.enabled {
            return Err(AuthorizeError::Refused {
                app: inner.app.clone(),
            });
        }
        let step_up = match inner.state() {
            AuthState::Authorized { more_scope, .. } | AuthState::Refreshing { more_scope, .. } => {
                more_scope
            }
            _ => None,
        };
        let challenge = lock(&inner.last_challenge).clone();
        let discovered =
            flow::discover(&inner.app, &inner.server_url, challenge.as_deref()).await?;
        let prepared = flow::prepare(inner.context(), discovered, step_up).await?;
        let now = inner.core.clock.now();
        let url = AuthorizationUrl {
            url: prepared.url,
            issuer: prepared.issuer.clone(),
            scopes: prepared.scopes,
            expires_at: now + inner.core.flows.ttl(),
        };
        inner.core.flows.insert(
            prepared.state,
            PendingFlow {
                app: inner.app.clone(),
                manager: prepared.manager,
                issuer: prepared.issuer.clone(),
                iss_advertised: prepared.iss_advertised,
                created: now,
                revocation_endpoint: prepared.revocation_endpoint,
                auth_methods: prepared.auth_methods,
            },
            now,
        );
        inner.apply(AuthEvent::FlowStarted {
            issuer: prepared.issuer,
        });
        Ok(url)
    }

    /// Revokes the app's tokens at its authorization server (best effort, RFC 7009) and
    /// deletes everything stored for it; the app is anonymous again.
    ///
    /// # Errors
    /// [`AuthorizeError::Store`] when the record cannot be removed.
    pub async fn disconnect(&self) -> Result<(), AuthorizeError> {
        let inner = &self.inner;
        let mut session = inner.session.lock().await;
        *inner.token.write().unwrap_or_else(PoisonError::into_inner) = None;
        *session = None;
        *lock(&inner.last_challenge) = None;
        revoke_stored(&inner.core, &inner.app, Some(&inner.settings)).await;
        inner.core.flows.remove_app(&inner.app);
        inner.core.store.remove_app(&inner.app).await?;
        drop(session);
        inner.apply(AuthEvent::Disconnected);
        Ok(())
    }
}
