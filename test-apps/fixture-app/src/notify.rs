//! Where the fixture's change notifications go beyond the connection that caused them: the
//! open `subscriptions/listen` streams (2026-07-28) and the legacy sessions that sent
//! `resources/subscribe` (up to 2025-11-25). Both live in process-wide state because a
//! notification is caused by one connection and owed to others (over HTTP every 2026 request,
//! listen included, is a connection of its own).
//!
//! rmcp acknowledges a listen request before it hands the stream to the handler, so a client
//! can see the acknowledgment, and cause a change, before the stream is registered here. The
//! transports therefore stamp each listen request with a [`ListenMark`] when it arrives (the
//! number of changes so far), and a stream that registers late is sent the changes after its
//! mark that it missed. The last [`LOG_LIMIT`] changes are kept for this.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::Peer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{RoleServer, SubscriptionSendError, SubscriptionSink};

/// Identifies one MCP connection (a stdio session, an HTTP session or one stateless request).
pub(crate) type ConnectionId = u64;

/// How many past changes are kept for listen streams that register late.
const LOG_LIMIT: usize = 256;

/// The number of list and resource changes announced to listen streams before a listen
/// request arrived; carried in the request's extensions from the transport to the handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListenMark(u64);

/// The notification targets of the process.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    next_id: AtomicU64,
    targets: Mutex<Targets>,
}

#[derive(Debug, Default)]
struct Targets {
    /// Open listen streams, by a registration number.
    listens: Vec<(u64, SubscriptionSink)>,
    /// Legacy `resources/subscribe` subscriptions.
    subscribers: Vec<Subscriber>,
    /// How many changes have been announced to listen streams.
    changes: u64,
    /// The most recent of them, numbered.
    log: VecDeque<(u64, Change)>,
}

#[derive(Debug)]
struct Subscriber {
    connection: ConnectionId,
    peer: Peer<RoleServer>,
    uri: String,
}

/// Where one `notifications/resources/updated` was delivered.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Delivered {
    /// Legacy sessions subscribed to the URI.
    pub(crate) sessions: usize,
    /// Listen streams whose `resourceSubscriptions` include the URI.
    pub(crate) listens: usize,
}

/// Which kind of change a notification announces, for choosing listen streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Tools,
    Resources,
    Updated(String),
}

impl Change {
    /// True if a stream that was acknowledged `sink`'s filter asked for this change.
    fn wanted_by(&self, sink: &SubscriptionSink) -> bool {
        let accepted = sink.accepted();
        match self {
            Self::Tools => accepted.tools_list_changed == Some(true),
            Self::Resources => accepted.resources_list_changed == Some(true),
            Self::Updated(uri) => accepted
                .resource_subscriptions
                .as_ref()
                .is_some_and(|uris| uris.contains(uri)),
        }
    }

    async fn send(&self, sink: &SubscriptionSink) -> Result<(), SubscriptionSendError> {
        match self {
            Self::Tools => sink.notify_tool_list_changed().await,
            Self::Resources => sink.notify_resource_list_changed().await,
            Self::Updated(uri) => sink.notify_resource_updated(uri.clone()).await,
        }
    }
}

/// Keeps a listen stream registered; dropping it (the listen ended, however) unregisters it.
#[derive(Debug)]
pub(crate) struct ListenGuard {
    notifier: Arc<Notifier>,
    id: u64,
}

impl Drop for ListenGuard {
    fn drop(&mut self) {
        self.notifier
            .targets()
            .listens
            .retain(|(id, _)| *id != self.id);
    }
}

impl Notifier {
    fn targets(&self) -> MutexGuard<'_, Targets> {
        // Every change is one push or retain, so a poisoned lock is still consistent.
        self.targets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh connection id.
    pub(crate) fn new_connection(&self) -> ConnectionId {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The mark of a listen request arriving now.
    pub(crate) fn mark(&self) -> ListenMark {
        ListenMark(self.targets().changes)
    }

    /// Registers an open listen stream until the guard is dropped, and sends it the changes
    /// it asked for that were announced after `mark` but before it was registered.
    pub(crate) async fn add_listen(
        self: &Arc<Self>,
        sink: SubscriptionSink,
        mark: Option<ListenMark>,
    ) -> ListenGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let missed: Vec<Change> = {
            // Under the same lock as an announcement: each change is either announced to this
            // stream live or found here, never both and never neither.
            let mut targets = self.targets();
            targets.listens.push((id, sink.clone()));
            let since = mark.map_or(targets.changes, |ListenMark(n)| n);
            targets
                .log
                .iter()
                .filter(|(n, change)| *n > since && change.wanted_by(&sink))
                .map(|(_, change)| change.clone())
                .collect()
        };
        for change in missed {
            if let Err(error) = change.send(&sink).await {
                tracing::debug!(%error, "a listen stream closed while catching up");
                break;
            }
        }
        ListenGuard {
            notifier: self.clone(),
            id,
        }
    }

    /// Records a legacy `resources/subscribe`; subscribing twice is the same as once.
    pub(crate) fn subscribe(&self, connection: ConnectionId, peer: Peer<RoleServer>, uri: String) {
        let mut targets = self.targets();
        if !targets
            .subscribers
            .iter()
            .any(|s| s.connection == connection && s.uri == uri)
        {
            targets.subscribers.push(Subscriber {
                connection,
                peer,
                uri,
            });
        }
    }

    /// Forgets a legacy subscription; an unknown one is ignored.
    pub(crate) fn unsubscribe(&self, connection: ConnectionId, uri: &str) {
        self.targets()
            .subscribers
            .retain(|s| !(s.connection == connection && s.uri == uri));
    }

    /// Sends `notifications/tools/list_changed` on every listen stream that asked for it;
    /// returns how many there were.
    pub(crate) async fn tools_changed(&self) -> usize {
        self.announce(Change::Tools).await
    }

    /// Sends `notifications/resources/list_changed` on every listen stream that asked for it;
    /// returns how many there were.
    pub(crate) async fn resources_changed(&self) -> usize {
        self.announce(Change::Resources).await
    }

    /// Sends `notifications/resources/updated` for `uri` to the legacy sessions subscribed to
    /// it and on the listen streams whose `resourceSubscriptions` include it.
    pub(crate) async fn resource_updated(&self, uri: &str) -> Delivered {
        let peers: Vec<(ConnectionId, Peer<RoleServer>)> = self
            .targets()
            .subscribers
            .iter()
            .filter(|s| s.uri == uri)
            .map(|s| (s.connection, s.peer.clone()))
            .collect();
        let mut sessions = 0;
        for (connection, peer) in peers {
            match peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
            {
                Ok(()) => sessions += 1,
                Err(error) => {
                    // The session is gone; so are all of its subscriptions.
                    tracing::debug!(%error, connection, "dropping a closed subscriber");
                    self.targets()
                        .subscribers
                        .retain(|s| s.connection != connection);
                }
            }
        }
        let listens = self.announce(Change::Updated(uri.to_owned())).await;
        Delivered { sessions, listens }
    }

    /// Logs `change` and sends it on every registered listen stream that asked for it;
    /// returns how many were reached.
    async fn announce(&self, change: Change) -> usize {
        let sinks: Vec<(u64, SubscriptionSink)> = {
            let mut targets = self.targets();
            targets.changes += 1;
            let n = targets.changes;
            targets.log.push_back((n, change.clone()));
            if targets.log.len() > LOG_LIMIT {
                targets.log.pop_front();
            }
            // The filters were fixed by each stream's acknowledgment; choose by them rather
            // than let the sink refuse, so a failure below always means the stream is gone.
            targets
                .listens
                .iter()
                .filter(|(_, sink)| change.wanted_by(sink))
                .cloned()
                .collect()
        };
        let mut reached = 0;
        for (id, sink) in sinks {
            match change.send(&sink).await {
                Ok(()) => reached += 1,
                Err(error) => {
                    tracing::debug!(%error, "dropping a closed listen stream");
                    self.targets().listens.retain(|(other, _)| *other != id);
                }
            }
        }
        reached
    }
}
