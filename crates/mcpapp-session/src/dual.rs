//! The legacy session of a dual-era app: a second upstream session, opened with `initialize`,
//! for the legacy clients of an app that speaks both eras on one endpoint.
//!
//! A modern app's session carries every client, legacy ones translated (docs/protocol.md).
//! But a dual-era server serves a legacy client by its legacy rules ("An `initialize` request
//! selects legacy semantics, scoped to ... the session", `basic/versioning.mdx`), which
//! translation cannot always reproduce: a tool written for sessions asks its client with
//! `elicitation/create` during the call, and on the modern path it cannot ask at all. So when
//! the first legacy client of a modern HTTP app arrives, the gateway asks the app for a legacy
//! session too (a second link, the gateway's `initialize`): if the app accepts, it is
//! dual-era, and every legacy client's port is opened on that session, as it would be on a
//! legacy app; modern clients and the gateway's own calls stay on the modern session (a
//! modern request needs no session, so one session per app still holds). If it refuses, it
//! speaks only 2026-07-28, and legacy clients stay translated; the answer is kept for the
//! connection's life. A legacy session that ends (the server dropped it) is opened again by
//! the next legacy client.
//!
//! Only links that can be opened twice offer this (HTTP: the supervisor gives a
//! [`LinkOpener`]); a stdio process speaks the one era its first message chose.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{Instrument, info};

use crate::client::GatewayClient;
use crate::connection::{Connection, EraChoice};
use crate::elicit::Causes;
use crate::link::{Link, LinkEvent};
use crate::observe::SessionObserver;

/// Opens another link to the same app, for a second session of it.
pub trait LinkOpener: Send + Sync + std::fmt::Debug {
    /// A new link and the events it reports; nothing is sent yet.
    ///
    /// # Errors
    /// Why no link could be made, in words.
    fn open(&self) -> Result<(Arc<dyn Link>, mpsc::UnboundedReceiver<LinkEvent>), String>;
}

/// Whether the app has been asked for a legacy session, and what it said.
#[derive(Debug)]
enum State {
    Untried,
    Open(Arc<Connection>),
    Refused,
}

/// A modern app's legacy session, opened on first use.
#[derive(Debug)]
pub(crate) struct LegacyLeg {
    opener: Arc<dyn LinkOpener>,
    state: tokio::sync::Mutex<State>,
}

impl LegacyLeg {
    pub(crate) fn new(opener: Arc<dyn LinkOpener>) -> Self {
        Self {
            opener,
            state: tokio::sync::Mutex::new(State::Untried),
        }
    }

    /// The legacy session for legacy clients: opened now if it was not (or has ended), or
    /// `None` when the app refused one (it then speaks only 2026-07-28). Concurrent first
    /// clients wait for one attempt.
    pub(crate) async fn session(
        &self,
        app_id: &str,
        request_timeout: Duration,
        meters: &Arc<dyn SessionObserver>,
    ) -> Option<Arc<Connection>> {
        let mut state = self.state.lock().await;
        match &*state {
            State::Refused => return None,
            State::Open(connection) if connection.closed().borrow().is_none() => {
                return Some(connection.clone());
            }
            State::Open(_) | State::Untried => {}
        }
        match self.open(app_id, request_timeout, meters).await {
            Ok(connection) => {
                info!(app = %app_id, "the app also serves legacy clients (it is dual-era): they get a legacy session of their own");
                let connection = Arc::new(connection);
                *state = State::Open(connection.clone());
                Some(connection)
            }
            Err(reason) => {
                info!(app = %app_id, "the app speaks only 2026-07-28 ({reason}): legacy clients are translated");
                *state = State::Refused;
                None
            }
        }
    }

    async fn open(
        &self,
        app_id: &str,
        request_timeout: Duration,
        meters: &Arc<dyn SessionObserver>,
    ) -> Result<Connection, String> {
        let (link, events) = self.opener.open()?;
        // The gateway's client on this session only opens it: list changes are the modern
        // session's to report, and it makes no calls that could cause an elicitation.
        let (notices, _) = mpsc::unbounded_channel();
        let handler = GatewayClient::new(app_id.to_owned(), notices, Causes::default(), None);
        let opening = Connection::open(
            app_id,
            link.clone(),
            events,
            handler,
            request_timeout,
            EraChoice::Legacy,
            meters.clone(),
        )
        .instrument(tracing::info_span!("legacy_session", app = %app_id));
        match tokio::time::timeout(request_timeout, opening).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(err)) => {
                link.close(Duration::ZERO).await;
                Err(err.to_string())
            }
            Err(_) => {
                link.close(Duration::ZERO).await;
                Err(format!(
                    "no answer to initialize within {} s",
                    request_timeout.as_secs()
                ))
            }
        }
    }

    /// Ends the legacy session, if one is open.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        let state = std::mem::replace(&mut *self.state.lock().await, State::Refused);
        if let State::Open(connection) = state {
            // Boxed: shutting a connection down shuts its legacy session down.
            Box::pin(connection.shutdown(grace)).await;
        }
    }
}
