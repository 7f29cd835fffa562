//! `GET /apps/events`: what happens to the apps, as server-sent events, in the order it
//! happened.
//!
//! One forwarding task turns the supervisor's events (lifecycle transitions, scheduled
//! restarts, list changes, apps added and removed) and the reloads' outcomes into numbered
//! events: each gets the next SSE `id`, the last [`KEPT_EVENTS`] are kept, and every open
//! stream gets them through a broadcast channel. A stream opened with `Last-Event-ID` first
//! gets the kept events after that id again. Whenever events cannot be delivered (a client
//! too slow for the channel, an id that is unknown or older than what is kept, the forwarder
//! itself lagging behind the supervisor) the stream says `resync` instead of skipping them
//! silently: the client reads `GET /apps` again. The wire format is documented in
//! docs/operations.md ("Events") and is a contract: the page and the CLI read it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{StreamExt, stream};
use mcpapp_supervisor::{Supervisor, SupervisorEvent};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::config::KEEP_ALIVE;

/// Events kept for `Last-Event-ID`.
const KEPT_EVENTS: usize = 512;
/// Events an open stream may fall behind before it gets `resync`.
const STREAM_BACKLOG: usize = 256;

/// One numbered event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Numbered {
    pub(crate) id: u64,
    /// The SSE event name, also the data's `type`.
    pub(crate) kind: &'static str,
    /// The data, one line of JSON.
    pub(crate) data: String,
}

/// The kept events.
#[derive(Debug, Default)]
struct Log {
    last: u64,
    kept: VecDeque<Arc<Numbered>>,
}

/// Where a stream opened with a `Last-Event-ID` starts.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// Nothing to replay: no id was given.
    Fresh,
    /// These kept events came after the id (possibly none).
    Replay(Vec<Arc<Numbered>>),
    /// The id is not one of this gateway's, or events after it were dropped: the client
    /// must read the state again. The reason goes into the `resync` event.
    Resync(&'static str),
}

impl Log {
    fn push(&mut self, kind: &'static str, data: String) -> Arc<Numbered> {
        self.last += 1;
        let event = Arc::new(Numbered {
            id: self.last,
            kind,
            data,
        });
        if self.kept.len() == KEPT_EVENTS {
            self.kept.pop_front();
        }
        self.kept.push_back(event.clone());
        event
    }

    fn resume(&self, last_event_id: Option<&str>) -> Resume {
        let Some(text) = last_event_id else {
            return Resume::Fresh;
        };
        let Ok(seen) = text.trim().parse::<u64>() else {
            return Resume::Resync("unknown_id");
        };
        if seen > self.last {
            // From another gateway, or from before this one restarted.
            return Resume::Resync("unknown_id");
        }
        let oldest = self.kept.front().map_or(self.last + 1, |e| e.id);
        if seen + 1 < oldest {
            return Resume::Resync("gap");
        }
        Resume::Replay(self.kept.iter().filter(|e| e.id > seen).cloned().collect())
    }
}

/// What the forwarder and the streams share.
#[derive(Debug)]
struct Shared {
    log: Mutex<Log>,
    live: broadcast::Sender<Arc<Numbered>>,
}

impl Shared {
    fn publish(&self, kind: &'static str, data: &Value) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let event = log.push(kind, data.to_string());
        // Sent under the lock, so a stream that subscribes under it misses nothing in between.
        let _ = self.live.send(event);
    }
}

/// The event hub behind `/apps/events`. Cheap to clone; dropping the last clone ends its
/// forwarding task.
#[derive(Clone, Debug)]
pub(crate) struct AppEvents {
    shared: Arc<Shared>,
    forwarder: Arc<Forwarder>,
    shutdown: CancellationToken,
}

/// The forwarding task, started once.
#[derive(Debug)]
struct Forwarder {
    supervisor: Supervisor,
    notes: mpsc::UnboundedSender<(&'static str, Value)>,
    pending: Mutex<Option<mpsc::UnboundedReceiver<(&'static str, Value)>>>,
    task: OnceLock<tokio::task::AbortHandle>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }
}

impl AppEvents {
    /// A hub over `supervisor`'s events; streams end when `shutdown` is cancelled. The
    /// forwarder starts now when there is a runtime, else with the first stream.
    pub(crate) fn new(supervisor: Supervisor, shutdown: CancellationToken) -> Self {
        let (live, _) = broadcast::channel(STREAM_BACKLOG);
        let (notes, pending) = mpsc::unbounded_channel();
        let events = Self {
            shared: Arc::new(Shared {
                log: Mutex::new(Log::default()),
                live,
            }),
            forwarder: Arc::new(Forwarder {
                supervisor,
                notes,
                pending: Mutex::new(Some(pending)),
                task: OnceLock::new(),
            }),
            shutdown,
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            events.ensure_started();
        }
        events
    }

    fn ensure_started(&self) {
        let forwarder = &self.forwarder;
        forwarder.task.get_or_init(|| {
            let notes = forwarder
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            let supervisor = forwarder.supervisor.subscribe();
            let shared = self.shared.clone();
            tokio::spawn(forward(shared, supervisor, notes)).abort_handle()
        });
    }

    /// Publishes a reload's outcome (its wire shape), after every supervisor event it caused.
    pub(crate) fn reloaded(&self, outcome: &impl Serialize) {
        let mut data = serde_json::to_value(outcome).unwrap_or_else(|_| json!({}));
        if let Some(object) = data.as_object_mut() {
            object.insert("type".into(), json!("reload"));
        }
        let _ = self.forwarder.notes.send(("reload", data));
    }

    /// Subscribes a stream: where it starts, the id of the last event so far, and the
    /// channel of what comes next.
    fn subscribe(
        &self,
        last_event_id: Option<&str>,
    ) -> (Resume, u64, broadcast::Receiver<Arc<Numbered>>) {
        self.ensure_started();
        let log = self.shared.log.lock().unwrap_or_else(|p| p.into_inner());
        (
            log.resume(last_event_id),
            log.last,
            self.shared.live.subscribe(),
        )
    }
}

/// Turns supervisor events and reload notes into numbered events, in order. A note (a
/// reload's outcome) is sent after the supervisor's reload returned, so the supervisor
/// events it caused are already in the channel: they are taken first.
async fn forward(
    shared: Arc<Shared>,
    mut supervisor: broadcast::Receiver<SupervisorEvent>,
    notes: Option<mpsc::UnboundedReceiver<(&'static str, Value)>>,
) {
    let Some(mut notes) = notes else { return };
    let take = |shared: &Shared, received: Result<SupervisorEvent, broadcast::error::RecvError>| {
        match received {
            Ok(event) => {
                if let Some((kind, data)) = describe(&event) {
                    shared.publish(kind, &data);
                }
                true
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                shared.publish(
                    "resync",
                    &json!({"type": "resync", "reason": "lagged", "missed": missed}),
                );
                true
            }
            Err(broadcast::error::RecvError::Closed) => false,
        }
    };
    loop {
        tokio::select! {
            biased;
            received = supervisor.recv() => {
                if !take(&shared, received) {
                    return;
                }
            }
            note = notes.recv() => {
                let Some((kind, data)) = note else { return };
                loop {
                    match supervisor.try_recv() {
                        Ok(event) => { take(&shared, Ok(event)); }
                        Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                            take(&shared, Err(broadcast::error::RecvError::Lagged(missed)));
                        }
                        Err(_) => break,
                    }
                }
                shared.publish(kind, &data);
            }
        }
    }
}

/// The wire form of a supervisor event: its SSE event name and data.
pub(crate) fn describe(event: &SupervisorEvent) -> Option<(&'static str, Value)> {
    Some(match event {
        SupervisorEvent::Lifecycle {
            app_id,
            from,
            to,
            reason,
            at,
        } => (
            "lifecycle",
            json!({"type": "lifecycle", "appId": app_id, "from": from, "to": to, "reason": reason, "at": at}),
        ),
        SupervisorEvent::RestartScheduled {
            app_id,
            attempt,
            delay,
        } => (
            "restart_scheduled",
            json!({
                "type": "restart_scheduled",
                "appId": app_id,
                "attempt": attempt,
                "delayMs": u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            }),
        ),
        SupervisorEvent::ToolsChanged { app_id } => list_changed(app_id, "tools"),
        SupervisorEvent::ResourcesChanged { app_id } => list_changed(app_id, "resources"),
        SupervisorEvent::PromptsChanged { app_id } => list_changed(app_id, "prompts"),
        SupervisorEvent::Authorization { app_id, state } => {
            let authorization = crate::oauth::authorization_json(Some(state));
            (
                "authorization",
                json!({"type": "authorization", "appId": app_id, "authorization": authorization}),
            )
        }
        SupervisorEvent::Added { app_id } => {
            ("app_added", json!({"type": "app_added", "appId": app_id}))
        }
        SupervisorEvent::Removed { app_id } => (
            "app_removed",
            json!({"type": "app_removed", "appId": app_id}),
        ),
        _ => return None,
    })
}

fn list_changed(app_id: &str, list: &str) -> (&'static str, Value) {
    (
        "list_changed",
        json!({"type": "list_changed", "appId": app_id, "list": list}),
    )
}

fn sse(event: &Numbered) -> Event {
    Event::default()
        .id(event.id.to_string())
        .event(event.kind)
        .data(&event.data)
}

fn resync(reason: &str, missed: Option<u64>) -> Event {
    Event::default()
        .event("resync")
        .data(json!({"type": "resync", "reason": reason, "missed": missed}).to_string())
}

/// `GET /apps/events`.
pub(crate) async fn stream(State(events): State<AppEvents>, headers: HeaderMap) -> Response {
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (resume, last, live) = events.subscribe(last_event_id.as_deref());
    // `ready` first: the client knows from here on it misses nothing.
    let mut head = vec![
        Event::default()
            .event("ready")
            .data(json!({"type": "ready", "lastEventId": last}).to_string()),
    ];
    match resume {
        Resume::Fresh => {}
        Resume::Replay(events) => head.extend(events.iter().map(|e| sse(e))),
        Resume::Resync(reason) => head.push(resync(reason, None)),
    }
    let live = stream::unfold(live, |mut live| async move {
        match live.recv().await {
            Ok(event) => Some((sse(&event), live)),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                Some((resync("lagged", Some(missed)), live))
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    });
    let shutdown = events.shutdown;
    let events = stream::iter(head)
        .chain(live)
        .take_until(shutdown.cancelled_owned())
        .map(Ok::<_, Infallible>);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcpapp_manifest::{Lifecycle, Timestamp};

    use super::*;

    fn log_of(n: u64) -> Log {
        let mut log = Log::default();
        for i in 0..n {
            log.push("lifecycle", format!("{{\"n\":{i}}}"));
        }
        log
    }

    fn ids(resume: &Resume) -> Vec<u64> {
        match resume {
            Resume::Replay(events) => events.iter().map(|e| e.id).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_known_id_replays_what_came_after_it() {
        let log = log_of(5);
        assert_eq!(log.resume(None), Resume::Fresh);
        assert_eq!(ids(&log.resume(Some("2"))), vec![3, 4, 5]);
        assert_eq!(ids(&log.resume(Some(" 5 "))), Vec::<u64>::new());
        assert_eq!(ids(&log.resume(Some("0"))), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn unknown_ids_and_dropped_events_ask_for_a_resync() {
        let log = log_of(5);
        assert_eq!(log.resume(Some("6")), Resume::Resync("unknown_id"));
        assert_eq!(log.resume(Some("x")), Resume::Resync("unknown_id"));
        let long = log_of(u64::try_from(KEPT_EVENTS).unwrap() + 10);
        assert_eq!(long.kept.len(), KEPT_EVENTS);
        assert_eq!(long.resume(Some("5")), Resume::Resync("gap"));
        // The event right before the oldest kept one is still a clean resume.
        assert_eq!(ids(&long.resume(Some("10"))).first(), Some(&11));
    }

    #[test]
    fn supervisor_events_have_a_documented_wire_form() {
        let at = Timestamp::now();
        let (kind, data) = describe(&SupervisorEvent::Lifecycle {
            app_id: "a".into(),
            from: Lifecycle::Loaded,
            to: Lifecycle::Failed,
            reason: Some("exited with status 3".into()),
            at,
        })
        .unwrap();
        assert_eq!(kind, "lifecycle");
        assert_eq!(
            data,
            json!({"type": "lifecycle", "appId": "a", "from": "Loaded", "to": "Failed", "reason": "exited with status 3", "at": at})
        );
        let (kind, data) = describe(&SupervisorEvent::RestartScheduled {
            app_id: "a".into(),
            attempt: 2,
            delay: Duration::from_millis(1500),
        })
        .unwrap();
        assert_eq!(kind, "restart_scheduled");
        assert_eq!(data["delayMs"], 1500);
        let (kind, data) =
            describe(&SupervisorEvent::PromptsChanged { app_id: "a".into() }).unwrap();
        assert_eq!(
            (kind, data["list"].as_str()),
            ("list_changed", Some("prompts"))
        );
        let (kind, _) = describe(&SupervisorEvent::Removed { app_id: "a".into() }).unwrap();
        assert_eq!(kind, "app_removed");
    }
}
