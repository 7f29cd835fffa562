//! Resource change notifications: `resources/subscribe` bookkeeping and the fan-out of
//! `notifications/resources/updated` after a change.
//!
//! A change made through an MCP tool is always announced to the connection that made it (for
//! the URIs it touched), whether or not that connection subscribed; other connections hear
//! about it only for URIs they subscribed to. Changes made through the REST API reach the
//! subscribers only.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer};

/// The URI of a store's summary resource.
pub(crate) fn store_summary_uri(store_id: u32) -> String {
    format!("inventory://stores/{store_id}/summary")
}

/// The URI of a product's details resource.
pub(crate) fn product_details_uri(product_id: u32) -> String {
    format!("inventory://products/{product_id}/details")
}

/// Identifies one MCP connection (one stdio session or one HTTP session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ConnectionId(u64);

#[derive(Debug)]
struct Subscription {
    connection: ConnectionId,
    peer: Peer<RoleServer>,
    uri: String,
}

/// Tracks subscriptions and sends update notifications.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    next_connection: AtomicU64,
    subscriptions: Mutex<Vec<Subscription>>,
}

impl Notifier {
    /// A fresh id for a new connection.
    pub(crate) fn new_connection(&self) -> ConnectionId {
        ConnectionId(self.next_connection.fetch_add(1, Ordering::Relaxed))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Subscription>> {
        // The vector stays consistent even if a holder panicked: every change is one push or
        // one retain.
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `connection` wants updates for `uri`.
    pub(crate) fn subscribe(&self, connection: ConnectionId, peer: Peer<RoleServer>, uri: String) {
        let mut subs = self.lock();
        if !subs
            .iter()
            .any(|s| s.connection == connection && s.uri == uri)
        {
            subs.push(Subscription {
                connection,
                peer,
                uri,
            });
        }
    }

    /// Forgets a subscription; unknown ones are ignored.
    pub(crate) fn unsubscribe(&self, connection: ConnectionId, uri: &str) {
        self.lock()
            .retain(|s| !(s.connection == connection && s.uri == uri));
    }

    /// Announces that `uris` changed. `origin` is the connection whose tool call made the change;
    /// it hears about every URI unconditionally.
    pub(crate) async fn changed(
        &self,
        uris: &[String],
        origin: Option<(ConnectionId, &Peer<RoleServer>)>,
    ) {
        let mut targets: Vec<(Option<ConnectionId>, Peer<RoleServer>, String)> = Vec::new();
        if let Some((_, peer)) = origin {
            targets.extend(uris.iter().map(|u| (None, peer.clone(), u.clone())));
        }
        {
            let subs = self.lock();
            let origin_id = origin.map(|(id, _)| id);
            for sub in subs.iter() {
                if Some(sub.connection) != origin_id && uris.contains(&sub.uri) {
                    targets.push((Some(sub.connection), sub.peer.clone(), sub.uri.clone()));
                }
            }
        }
        let mut dead = BTreeSet::new();
        for (connection, peer, uri) in targets {
            if let Err(error) = peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone()))
                .await
            {
                tracing::debug!(%uri, %error, "could not send resources/updated");
                if let Some(id) = connection {
                    dead.insert(id);
                }
            }
        }
        if !dead.is_empty() {
            // A connection that cannot take a notification has gone away.
            self.lock().retain(|s| !dead.contains(&s.connection));
        }
    }
}
