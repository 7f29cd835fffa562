//! The bounded, expiring in-memory store of chat sessions. Each session holds its conversation
//! behind an async lock, which also serialises the turns on that session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::ChatMessage;

/// One chat session.
#[derive(Debug)]
pub(crate) struct Session {
    /// The conversation without the system prompt. Holding this lock is holding the session's
    /// turn: a second turn on the same session waits for it.
    pub(crate) history: tokio::sync::Mutex<Vec<ChatMessage>>,
    last_used: Mutex<Instant>,
}

impl Session {
    /// Marks the session as used now, which restarts its idle expiry.
    pub(crate) fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn last_used(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sessions by id, at most `capacity`, each dropped after `idle_expiry` without use.
#[derive(Debug)]
pub(crate) struct SessionStore {
    capacity: usize,
    idle_expiry: Duration,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

/// Every session is busy and the store is full.
#[derive(Debug)]
pub(crate) struct StoreFull {
    pub(crate) capacity: usize,
}

impl SessionStore {
    pub(crate) fn new(capacity: usize, idle_expiry: Duration) -> Self {
        Self {
            capacity: capacity.max(1),
            idle_expiry,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The session `id`, created if it does not exist (or has expired).
    ///
    /// Expired idle sessions are dropped first. When the store is full, the least recently
    /// used idle session makes room; a session in use by a turn is never dropped, so if every
    /// session is busy the request is refused.
    pub(crate) fn get_or_create(&self, id: &str) -> Result<Arc<Session>, StoreFull> {
        let mut sessions = self.lock();
        let now = Instant::now();
        // A session is busy while a turn holds a reference besides the store's own.
        let idle = |s: &Arc<Session>| Arc::strong_count(s) == 1;
        sessions.retain(|_, s| !(idle(s) && now.duration_since(s.last_used()) >= self.idle_expiry));

        if let Some(session) = sessions.get(id) {
            session.touch();
            return Ok(Arc::clone(session));
        }
        if sessions.len() >= self.capacity {
            let oldest = sessions
                .iter()
                .filter(|(_, s)| idle(s))
                .min_by_key(|(key, s)| (s.last_used(), (*key).clone()))
                .map(|(key, _)| key.clone());
            match oldest {
                Some(key) => {
                    tracing::debug!(session_id = %key, "dropping the least recently used session");
                    sessions.remove(&key);
                }
                None => {
                    return Err(StoreFull {
                        capacity: self.capacity,
                    });
                }
            }
        }
        let session = Arc::new(Session {
            history: tokio::sync::Mutex::new(Vec::new()),
            last_used: Mutex::new(now),
        });
        sessions.insert(id.to_owned(), Arc::clone(&session));
        Ok(session)
    }

    /// The session `id` if it exists and has not expired.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        let sessions = self.lock();
        let session = sessions.get(id)?;
        let expired = Arc::strong_count(session) == 1
            && Instant::now().duration_since(session.last_used()) >= self.idle_expiry;
        (!expired).then(|| Arc::clone(session))
    }

    /// Drops the session `id`. A turn running on it finishes normally.
    pub(crate) fn remove(&self, id: &str) -> bool {
        self.lock().remove(id).is_some()
    }

    /// The number of sessions held, expired ones included until the next lookup.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        // The map stays consistent even if a holder panicked: every change is one call.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
