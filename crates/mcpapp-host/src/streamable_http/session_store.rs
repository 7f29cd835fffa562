//! Bounded sessions by `Mcp-Session-Id`, with idle ones evicted first and swept on a timer:
//! the browser sessions of `/apps/mcp/{appId}` (grouped by app) and the client sessions of
//! `/mcp` (one group).
//!
//! At most `max_per_group` sessions per group: a new one evicts the least recently used
//! *idle* session of its group, or is refused with 503 when every one is busy; an idle
//! session is closed after `idle` by a periodic sweep. Idle means no request in flight (its
//! reply stream included) and no open GET stream. Dropping a session closes what it holds
//! (its ports), so sessions are always dropped outside the lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info};

/// What the session store needs to know of a session.
pub(crate) trait Session: Send + Sync + 'static {
    /// The group whose cap the session counts against (an app id, or one name for `/mcp`).
    fn group(&self) -> &str;
    /// What keeps it busy.
    fn activity(&self) -> &Arc<Activity>;
    /// What it is, for logs (no secrets).
    fn describe(&self) -> String;
}

/// What decides whether a session is idle, shared with the requests and streams that keep it
/// busy (they must not keep the session, and so its port, alive themselves).
pub(crate) struct Activity {
    /// Requests in flight (until their reply, event stream included, has ended) plus the
    /// open GET stream.
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            busy: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        })
    }

    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
}

/// Keeps a session busy while held: neither evicted nor expired.
pub(crate) struct Busy(Arc<Activity>);

impl Busy {
    pub(crate) fn new(activity: &Arc<Activity>) -> Self {
        activity.busy.fetch_add(1, Ordering::AcqRel);
        activity.touch();
        Self(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // Touch first: a sweep that sees the session idle also sees it freshly used.
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a new session could not be added.
pub(crate) struct SessionsFull<S> {
    /// The session that was refused; dropping it closes its ports.
    _refused: Arc<S>,
    pub(crate) max: usize,
}

/// Open sessions by `Mcp-Session-Id`, at most `max_per_group` per group; idle ones are
/// closed after `idle` by a sweep task that ends when the last handle is dropped.
pub(crate) struct Sessions<S> {
    inner: Arc<SessionsInner<S>>,
}

impl<S> Clone for Sessions<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct SessionsInner<S> {
    sessions: Mutex<HashMap<String, Arc<S>>>,
    max_per_group: usize,
    idle: Duration,
    sweeper_started: AtomicBool,
    /// Cancelled on drop, which ends the sweep task at once.
    stop: CancellationToken,
}

impl<S> Drop for SessionsInner<S> {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl<S: Session> Sessions<S> {
    pub(crate) fn new(max_per_group: usize, idle: Duration) -> Self {
        Self {
            inner: Arc::new(SessionsInner {
                sessions: Mutex::new(HashMap::new()),
                max_per_group,
                idle,
                sweeper_started: AtomicBool::new(false),
                stop: CancellationToken::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<S>>> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a session. At its group's cap, the least recently used idle session of that
    /// group makes room; when every one is busy the new session is refused.
    pub(crate) fn insert(&self, id: String, session: Arc<S>) -> Result<(), SessionsFull<S>> {
        self.start_sweeper();
        let max = self.inner.max_per_group;
        let evicted = {
            let mut sessions = self.lock();
            let of_group = sessions
                .values()
                .filter(|s| s.group() == session.group())
                .count();
            let evicted = if of_group >= max {
                let victim = sessions
                    .iter()
                    .filter(|(_, s)| s.group() == session.group() && s.activity().is_idle())
                    .min_by_key(|(_, s)| s.activity().last_used())
                    .map(|(key, _)| key.clone());
                let Some(victim) = victim else {
                    return Err(SessionsFull {
                        _refused: session,
                        max,
                    });
                };
                sessions.remove(&victim)
            } else {
                None
            };
            sessions.insert(id, session);
            evicted
        };
        // Dropped outside the lock: dropping the session closes its ports.
        if let Some(evicted) = evicted {
            info!(
                session = %evicted.describe(),
                "closed the least recently used idle session to stay within {max} for its group"
            );
        }
        Ok(())
    }

    /// The session `id` of `group`, kept busy while the returned guard lives (taken under
    /// the lock, so an eviction cannot slip in between).
    pub(crate) fn get(&self, id: &str, group: &str) -> Option<(Arc<S>, Busy)> {
        let sessions = self.lock();
        let session = sessions.get(id).filter(|s| s.group() == group).cloned()?;
        let busy = Busy::new(session.activity());
        Some((session, busy))
    }

    pub(crate) fn remove(&self, id: &str) -> bool {
        // The lock is released at the end of this statement, before the session (and its
        // port) is dropped.
        let removed = self.lock().remove(id);
        removed.is_some()
    }

    /// The number of open sessions of each group that has any.
    pub(crate) fn counts(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for session in self.lock().values() {
            *counts.entry(session.group().to_owned()).or_insert(0) += 1;
        }
        counts
    }

    /// The number of open sessions of `group`.
    pub(crate) fn count(&self, group: &str) -> usize {
        self.lock().values().filter(|s| s.group() == group).count()
    }

    /// Closes the sessions idle for at least the idle time.
    fn expire(&self) {
        let idle = self.inner.idle;
        let expired: Vec<Arc<S>> = {
            let mut sessions = self.lock();
            let keys: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| {
                    s.activity().is_idle() && s.activity().last_used().elapsed() >= idle
                })
                .map(|(key, _)| key.clone())
                .collect();
            keys.iter().filter_map(|key| sessions.remove(key)).collect()
        };
        for session in &expired {
            info!(
                session = %session.describe(),
                "closed a session idle for {} s",
                idle.as_secs()
            );
        }
    }

    /// Starts the sweep task once, from the first insert (so it runs on the runtime that
    /// serves the routes). It holds only a weak reference and ends when the sessions are
    /// dropped with the host and its routers.
    fn start_sweeper(&self) {
        if self.inner.sweeper_started.swap(true, Ordering::AcqRel) {
            return;
        }
        // Sessions expire between `idle` and a quarter of it later.
        let period =
            (self.inner.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
        let weak = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        let sweep = async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let Some(inner) = weak.upgrade() else { break };
                let sessions = Sessions { inner };
                sessions.expire();
            }
            debug!("the browser session sweep ended");
        };
        tokio::spawn(sweep.instrument(tracing::debug_span!("session_sweep")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Plain(Arc<Activity>);

    impl Session for Plain {
        fn group(&self) -> &str {
            "g"
        }
        fn activity(&self) -> &Arc<Activity> {
            &self.0
        }
        fn describe(&self) -> String {
            "plain".to_owned()
        }
    }

    #[tokio::test]
    async fn a_full_group_evicts_its_least_recently_used_idle_session_or_refuses() {
        let sessions = Sessions::<Plain>::new(2, Duration::from_secs(3600));
        sessions
            .insert("a".into(), Arc::new(Plain(Activity::new())))
            .ok()
            .unwrap();
        sessions
            .insert("b".into(), Arc::new(Plain(Activity::new())))
            .ok()
            .unwrap();
        let (_, busy_b) = sessions.get("b", "g").unwrap();
        // "a" is idle and least recently used: it makes room.
        sessions
            .insert("c".into(), Arc::new(Plain(Activity::new())))
            .ok()
            .unwrap();
        assert!(sessions.get("a", "g").is_none());
        let (_, busy_c) = sessions.get("c", "g").unwrap();
        assert!(
            sessions
                .insert("d".into(), Arc::new(Plain(Activity::new())))
                .is_err()
        );
        drop((busy_b, busy_c));
        assert_eq!(sessions.count("g"), 2);
        assert!(sessions.get("b", "other").is_none());
    }

    #[tokio::test]
    async fn the_sweep_starts_once_and_ends_with_the_sessions() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let before = metrics.num_alive_tasks();
        let sessions = Sessions::<Plain>::new(4, Duration::from_secs(3600));
        sessions.start_sweeper();
        sessions.clone().start_sweeper();
        assert_eq!(metrics.num_alive_tasks(), before + 1);
        drop(sessions);
        let deadline = Instant::now() + Duration::from_secs(60);
        while metrics.num_alive_tasks() > before {
            assert!(Instant::now() < deadline, "the sweep outlived its sessions");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
