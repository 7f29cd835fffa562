//! `--server-requests-on-get`: server-to-client requests that rmcp writes on the event stream
//! of the POST that caused them are taken out of that stream and written on the session's
//! standalone GET stream instead, as servers do that do not associate such requests with a
//! client request (the TypeScript SDK, for one). The client's answer arrives as a separate POST
//! and reaches rmcp unchanged, so the tool call completes as usual.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use futures::StreamExt as _;
use futures::channel::mpsc;

use crate::server::{HttpCounters, Shared};
use crate::sse::{self, EventStream};

/// Where one session's moved requests go.
#[derive(Debug, Default)]
struct Outbox {
    /// Requests waiting for a GET stream.
    pending: VecDeque<Bytes>,
    /// The newest GET stream of the session, while it is open.
    live: Option<mpsc::UnboundedSender<Bytes>>,
}

/// The moved requests of every session.
#[derive(Debug)]
pub(crate) struct Reroute {
    shared: Arc<Shared>,
    sessions: Mutex<HashMap<String, Outbox>>,
}

impl Reroute {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            sessions: Mutex::default(),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Outbox>> {
        // Every change leaves the map consistent, so a poisoned lock is still usable.
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `event` on the session's GET stream, or keeps it until one opens.
    fn post(&self, session: &str, event: Bytes) {
        let mut sessions = self.sessions();
        let outbox = sessions.entry(session.to_owned()).or_default();
        let event = match &outbox.live {
            Some(live) => match live.unbounded_send(event) {
                Ok(()) => return,
                // That GET stream has ended; the next one gets the request.
                Err(e) => e.into_inner(),
            },
            None => event,
        };
        outbox.live = None;
        outbox.pending.push_back(event);
    }

    /// The events of a POST of `session`, without the server requests, which go to the GET
    /// stream (as data-only events: rmcp's ids name the POST's stream and must not be resumed
    /// on the GET's).
    pub(crate) fn divert(self: &Arc<Self>, session: String, events: EventStream) -> EventStream {
        let reroute = self.clone();
        events
            .filter_map(move |item| {
                let kept = match item {
                    Ok(event) if sse::is_request(&event) => {
                        if let Some(message) = sse::message(&event) {
                            reroute.post(&session, sse::data_event(&message));
                            HttpCounters::count(&reroute.shared.http.requests_moved_to_get);
                        }
                        None
                    }
                    other => Some(other),
                };
                std::future::ready(kept)
            })
            .boxed()
    }

    /// A standalone GET stream of `session`: rmcp's events with the moved requests between
    /// them; it ends when rmcp's does.
    pub(crate) fn merge(&self, session: String, events: EventStream) -> EventStream {
        let (tx, rx) = mpsc::unbounded();
        {
            let mut sessions = self.sessions();
            let outbox = sessions.entry(session).or_default();
            for event in outbox.pending.drain(..) {
                // The receiver is right here, so the send cannot fail.
                let _ = tx.unbounded_send(event);
            }
            outbox.live = Some(tx);
        }
        // `None` marks the end of rmcp's stream; the moved requests never end on their own.
        let rmcp = events
            .map(Some)
            .chain(futures::stream::once(std::future::ready(None)));
        futures::stream::select(rmcp, rx.map(|event| Some(Ok(event))))
            .take_while(|item| std::future::ready(item.is_some()))
            .filter_map(std::future::ready)
            .boxed()
    }
}
