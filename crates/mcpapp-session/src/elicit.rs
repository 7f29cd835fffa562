//! Who answers an app's elicitation when the gateway's own client caused it (an agent's tool
//! call): the embedder's [`Elicitor`], which knows the chat session the call belongs to and
//! can ask that session's user; without one, the gateway declines.
//!
//! The gateway's client tells the elicitor which session a request belongs to: every request
//! it sends with `_meta.sessionId` is remembered until answered, and the router marks each
//! server request it hands to the gateway's client with the request that caused it, when that
//! is known (over HTTP, the response stream it arrived on; elsewhere, when the gateway's client
//! has exactly one request in flight).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use rmcp::model::{ElicitRequestParams, ElicitResult};

/// The `_meta` key under which the router names the request a server request was caused by.
pub(crate) const CAUSE_META: &str = "io.mcpapp/cause";

/// An elicitation the gateway's own client was asked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// The app asking.
    pub app_id: String,
    /// The chat session whose call caused it, when known.
    pub session_id: Option<String>,
    /// What the app asks.
    pub params: ElicitRequestParams,
}

impl ElicitationRequest {
    /// What `app_id` asks (`params`) of the chat session `session_id`, when known.
    pub fn new(app_id: String, session_id: Option<String>, params: ElicitRequestParams) -> Self {
        Self {
            app_id,
            session_id,
            params,
        }
    }
}

/// The future an [`Elicitor`] answers with: the user's answer, or `None` to decline.
pub type ElicitFuture = Pin<Box<dyn Future<Output = Option<ElicitResult>> + Send>>;

/// Answers elicitations of the gateway's own calls (for example by asking the user of the
/// chat session they belong to). Answers must come within the app's request timeout.
pub trait Elicitor: Send + Sync + 'static {
    /// Asks for `request`; `None` declines.
    fn elicit(&self, request: ElicitationRequest) -> ElicitFuture;
}

/// The sessions of the gateway's own requests in flight, by their JSON-RPC id.
#[derive(Debug, Clone, Default)]
pub struct Causes {
    sessions: Arc<Mutex<HashMap<String, String>>>,
}

impl Causes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that the gateway's request `id` was sent for the chat session `session`.
    pub fn note(&self, id: &rmcp::model::RequestId, session: String) {
        self.lock().insert(id_text(id), session);
    }

    /// Forgets request `id` once it is answered or given up.
    pub fn forget(&self, id: &rmcp::model::RequestId) {
        self.lock().remove(&id_text(id));
    }

    /// The session of the request named by a router's cause mark.
    pub(crate) fn session_of(&self, cause: &str) -> Option<String> {
        self.lock().get(cause).cloned()
    }
}

/// A request id as the router writes it (its JSON text).
fn id_text(id: &rmcp::model::RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}
