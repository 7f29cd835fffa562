//! The browser sessions of `/apps/mcp/{appId}`: each a port on the app's upstream session,
//! bounded per app, with idle ones evicted first and swept on a timer.
//!
//! At most `max_proxy_sessions_per_app` sessions per app: a new one evicts the least
//! recently used *idle* session of that app, or is refused with 503 when every one is busy;
//! an idle session is closed after `proxy_session_idle` by a periodic sweep. Idle means no
//! request in flight (its reply stream included) and no open GET stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpapp_supervisor::Port;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info};

use super::events::EventLog;

/// One browser session of `/apps/mcp/{appId}`.
pub(super) struct ProxySession {
    pub(super) app_id: String,
    pub(super) port: Port,
    /// The session's standalone event stream: held by the GET that serves it, so one GET
    /// at a time; what it sent is kept for a reconnecting client.
    pub(super) events: Arc<tokio::sync::Mutex<EventLog>>,
    pub(super) activity: Arc<Activity>,
}

impl ProxySession {
    pub(super) fn new(app_id: String, port: Port) -> Self {
        let events = EventLog::new(port.take_notifications());
        Self {
            app_id,
            port,
            events: Arc::new(tokio::sync::Mutex::new(events)),
            activity: Activity::new(),
        }
    }
}

/// What decides whether a session is idle, shared with the requests and streams that keep it
/// busy (they must not keep the session, and so its port, alive themselves).
pub(super) struct Activity {
    /// Requests in flight (until their reply, event stream included, has ended) plus the
    /// open GET stream.
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl Activity {
    fn new() -> Arc<Self> {
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
pub(super) struct Busy(Arc<Activity>);

impl Busy {
    pub(super) fn new(activity: &Arc<Activity>) -> Self {
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
pub(super) struct SessionsFull {
    /// The session that was refused; dropping it closes its port.
    _refused: ProxySession,
    pub(super) max: usize,
}

/// Open browser sessions by `Mcp-Session-Id`, at most `max_per_app` per app; idle ones are
/// closed after `idle` by a sweep task that ends when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct ProxySessions {
    inner: Arc<SessionsInner>,
}

struct SessionsInner {
    sessions: Mutex<HashMap<String, Arc<ProxySession>>>,
    max_per_app: usize,
    idle: Duration,
    sweeper_started: AtomicBool,
    /// Cancelled on drop, which ends the sweep task at once.
    stop: CancellationToken,
}

impl Drop for SessionsInner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ProxySessions {
    pub(crate) fn new(max_per_app: usize, idle: Duration) -> Self {
        Self {
            inner: Arc::new(SessionsInner {
                sessions: Mutex::new(HashMap::new()),
                max_per_app,
                idle,
                sweeper_started: AtomicBool::new(false),
                stop: CancellationToken::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ProxySession>>> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a session. At the app's cap, the least recently used idle session of that app
    /// makes room; when every one is busy the new session is refused.
    pub(super) fn insert(&self, id: String, session: ProxySession) -> Result<(), SessionsFull> {
        self.start_sweeper();
        let max = self.inner.max_per_app;
        let evicted = {
            let mut sessions = self.lock();
            let of_app = sessions
                .values()
                .filter(|s| s.app_id == session.app_id)
                .count();
            let evicted = if of_app >= max {
                let victim = sessions
                    .iter()
                    .filter(|(_, s)| s.app_id == session.app_id && s.activity.is_idle())
                    .min_by_key(|(_, s)| s.activity.last_used())
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
            sessions.insert(id, Arc::new(session));
            evicted
        };
        // Dropped outside the lock: dropping the session closes its port.
        if let Some(evicted) = evicted {
            info!(
                app = %evicted.app_id,
                port = evicted.port.id(),
                "closed the least recently used idle browser session to stay within {max} for the app"
            );
        }
        Ok(())
    }

    /// The session `id` of `app_id`, kept busy while the returned guard lives (taken under
    /// the lock, so an eviction cannot slip in between).
    pub(super) fn get(&self, id: &str, app_id: &str) -> Option<(Arc<ProxySession>, Busy)> {
        let sessions = self.lock();
        let session = sessions.get(id).filter(|s| s.app_id == app_id).cloned()?;
        let busy = Busy::new(&session.activity);
        Some((session, busy))
    }

    pub(super) fn remove(&self, id: &str) -> bool {
        // The lock is released at the end of this statement, before the session (and its
        // port) is dropped.
        let removed = self.lock().remove(id);
        removed.is_some()
    }

    /// The number of open sessions of each app that has any.
    pub(crate) fn counts(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for session in self.lock().values() {
            *counts.entry(session.app_id.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// The number of open sessions of `app_id`.
    pub(crate) fn count(&self, app_id: &str) -> usize {
        self.lock().values().filter(|s| s.app_id == app_id).count()
    }

    /// Closes the sessions idle for at least the idle time.
    fn expire(&self) {
        let idle = self.inner.idle;
        let expired: Vec<Arc<ProxySession>> = {
            let mut sessions = self.lock();
            let keys: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.activity.is_idle() && s.activity.last_used().elapsed() >= idle)
                .map(|(key, _)| key.clone())
                .collect();
            keys.iter().filter_map(|key| sessions.remove(key)).collect()
        };
        for session in &expired {
            info!(
                app = %session.app_id,
                port = session.port.id(),
                "closed a browser session idle for {} s",
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
                let sessions = ProxySessions { inner };
                sessions.expire();
            }
            debug!("the browser session sweep ended");
        };
        tokio::spawn(sweep.instrument(tracing::debug_span!("proxy_session_sweep")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_sweep_starts_once_and_ends_with_the_sessions() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let before = metrics.num_alive_tasks();
        let sessions = ProxySessions::new(4, Duration::from_secs(3600));
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
