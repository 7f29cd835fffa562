//! What every app's authorizer shares with the gateway-wide client: the store, the redirect
//! URI, the clock, and the flows waiting for their redirect (single-use `state`, a lifetime,
//! a cap); and the values the flow hands out. `client.rs` and `authorizer.rs` both build on
//! it, so neither imports the other's internals back.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use mcpapp_manifest::AppId;
use rmcp::transport::auth::AuthorizationManager;
use url::Url;

use crate::error::CallbackError;
use crate::store::TokenStore;

/// How long a handed-out authorization URL (its `state`) stays valid.
pub(crate) const DEFAULT_STATE_TTL: Duration = Duration::from_secs(600);
/// How many authorization flows may wait for their redirect at once; beyond it the oldest is
/// dropped.
pub(crate) const DEFAULT_MAX_PENDING: usize = 64;
/// The name the gateway registers under.
pub(crate) const DEFAULT_CLIENT_NAME: &str = "mcpapp gateway";

/// The time, injectable so tests and simulations can move it.
///
/// Extension point: given to [`OAuthClientBuilder::clock`](crate::OAuthClientBuilder::clock);
/// the system's clock by default.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// An authorization URL to open in the user's browser ("Connect", "Grant more access").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationUrl {
    /// The URL: `https:`, or `http:` on a loopback address.
    pub url: Url,
    /// The authorization server.
    pub issuer: String,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// When its `state` stops being accepted.
    pub expires_at: SystemTime,
}

/// A completed authorization: the app has tokens now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The app.
    pub app: AppId,
    /// The authorization server.
    pub issuer: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
}

/// What every app's authorizer shares.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) store: TokenStore,
    pub(crate) redirect_uri: Url,
    pub(crate) client_metadata_url: Option<Url>,
    pub(crate) client_name: String,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) flows: PendingFlows,
    /// For revocations.
    pub(crate) http: reqwest::Client,
}

/// A flow waiting for its redirect, keyed by its `state`.
pub(crate) struct PendingFlow {
    pub(crate) app: AppId,
    pub(crate) manager: AuthorizationManager,
    pub(crate) issuer: String,
    pub(crate) iss_advertised: bool,
    pub(crate) created: SystemTime,
    pub(crate) revocation_endpoint: Option<String>,
    pub(crate) auth_methods: Vec<String>,
}

pub(crate) struct PendingFlows {
    flows: Mutex<HashMap<String, PendingFlow>>,
    ttl: Duration,
    max: usize,
}

impl fmt::Debug for PendingFlows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingFlows")
            .field("waiting", &self.lock().len())
            .field("ttl", &self.ttl)
            .field("max", &self.max)
            .finish()
    }
}

impl PendingFlows {
    pub(crate) fn new(ttl: Duration, max: usize) -> Self {
        Self {
            flows: Mutex::new(HashMap::new()),
            ttl,
            max,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PendingFlow>> {
        self.flows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn expired(&self, flow: &PendingFlow, now: SystemTime) -> bool {
        now.duration_since(flow.created)
            .is_ok_and(|age| age > self.ttl)
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Adds a flow, dropping expired ones and, at the cap, the oldest.
    pub(crate) fn insert(&self, state: String, flow: PendingFlow, now: SystemTime) {
        let mut flows = self.lock();
        flows.retain(|_, waiting| !self.expired(waiting, now));
        while flows.len() >= self.max {
            let Some(oldest) = flows
                .iter()
                .min_by_key(|(_, waiting)| waiting.created)
                .map(|(state, _)| state.clone())
            else {
                break;
            };
            if let Some(dropped) = flows.remove(&oldest) {
                tracing::info!(app = %dropped.app, "dropped the oldest waiting OAuth authorization (too many at once)");
            }
        }
        flows.insert(state, flow);
    }

    /// Takes the flow of `state` out (a `state` is used once, whatever follows).
    pub(crate) fn take(&self, state: &str, now: SystemTime) -> Result<PendingFlow, CallbackError> {
        let flow = self
            .lock()
            .remove(state)
            .ok_or(CallbackError::UnknownState)?;
        if self.expired(&flow, now) {
            return Err(CallbackError::Expired {
                app: flow.app,
                ttl_secs: self.ttl.as_secs(),
            });
        }
        Ok(flow)
    }

    /// Drops every flow of `app`.
    pub(crate) fn remove_app(&self, app: &AppId) {
        self.lock().retain(|_, flow| &flow.app != app);
    }
}
