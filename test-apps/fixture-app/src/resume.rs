//! `--resumable-after-ms MS`: a `tools/call` response stream that the server ends early, and the
//! GET with `Last-Event-ID` that delivers the rest of it (SEP-1699).
//!
//! rmcp already gives every request's stream event ids (`INDEX/STREAM`) and a priming event
//! with a `retry` hint; with this flag the hint is [`RETRY`]. It can also close a request's
//! stream and replay it on a GET (`LocalSessionHandle::close_sse_stream`), but it drops a
//! request's replay buffer as soon as the response is written, so a client that resumes after
//! that gets an empty stream. The middleware therefore keeps reading rmcp's stream itself,
//! whoever is listening: the POST's body gets the events until the deadline, and a GET naming
//! the last event it saw gets every later one, the response included, however late it comes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use futures::StreamExt as _;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::server::{HttpCounters, Shared};
use crate::sse::{self, EventStream};

/// The `retry` hint of response streams with `--resumable-after-ms`: how long a client waits
/// before resuming a stream that ended early.
pub(crate) const RETRY: Duration = Duration::from_millis(200);

/// What rmcp has written on one response stream so far.
#[derive(Debug, Default)]
struct Written {
    events: Vec<Bytes>,
    /// rmcp's stream has ended.
    finished: bool,
}

/// One `tools/call` response stream, read to its end by a task of its own.
#[derive(Debug)]
struct Held {
    /// The id of the request the stream answers.
    request: Value,
    written: watch::Sender<Written>,
}

/// A session and one of its streams (the part of rmcp's event ids after the `/`).
type StreamKey = (String, String);

/// The `--resumable-after-ms` state of the process.
#[derive(Debug)]
pub(crate) struct Resumable {
    after: Duration,
    shared: Arc<Shared>,
    /// Streams ended early, until a GET has delivered their response.
    closed: Mutex<HashMap<StreamKey, Arc<Held>>>,
}

impl Resumable {
    pub(crate) fn new(after: Duration, shared: Arc<Shared>) -> Self {
        Self {
            after,
            shared,
            closed: Mutex::default(),
        }
    }

    fn closed(&self) -> std::sync::MutexGuard<'_, HashMap<StreamKey, Arc<Held>>> {
        // Inserts and removals cannot be seen half-done, so a poisoned lock is still usable.
        self.closed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The body of the POST of `tools/call` `request` in `session`, which started at
    /// `started`: rmcp's `events` until the response, or until the deadline if the response
    /// has not been written by then.
    pub(crate) fn hold(
        self: &Arc<Self>,
        session: String,
        request: Value,
        started: Instant,
        mut events: EventStream,
    ) -> EventStream {
        let held = Arc::new(Held {
            request,
            written: watch::Sender::new(Written::default()),
        });
        let pump = held.clone();
        tokio::spawn(
            async move {
                while let Some(Ok(event)) = events.next().await {
                    pump.written.send_modify(|w| w.events.push(event));
                }
                pump.written.send_modify(|w| w.finished = true);
            }
            .in_current_span(),
        );
        Reader {
            resumable: self.clone(),
            seen: held.written.subscribe(),
            held,
            session,
            cursor: 0,
            deadline: Some(started + self.after),
            resumed: None,
            answered: false,
        }
        .into_stream()
    }

    /// The rest of a stream ended early, for a GET of `session` whose `Last-Event-ID` is
    /// `last`; `None` when no such stream was ended early.
    pub(crate) fn resume(self: &Arc<Self>, session: &str, last: &str) -> Option<EventStream> {
        let (_, stream) = last.split_once('/')?;
        let key = (session.to_owned(), stream.to_owned());
        let held = self.closed().get(&key)?.clone();
        let cursor = held
            .written
            .borrow()
            .events
            .iter()
            .position(|e| sse::field(e, "id") == Some(last))
            .map_or(0, |i| i + 1);
        HttpCounters::count(&self.shared.http.streams_resumed);
        Some(
            Reader {
                resumable: self.clone(),
                seen: held.written.subscribe(),
                held,
                session: session.to_owned(),
                cursor,
                deadline: None,
                resumed: Some(key),
                answered: false,
            }
            .into_stream(),
        )
    }
}

/// One HTTP response's view of a held stream.
struct Reader {
    resumable: Arc<Resumable>,
    held: Arc<Held>,
    seen: watch::Receiver<Written>,
    session: String,
    /// The next event to deliver.
    cursor: usize,
    /// When to end the POST's body if the response has not been delivered (POST only).
    deadline: Option<Instant>,
    /// The stream this GET resumes, forgotten once its response is delivered.
    resumed: Option<StreamKey>,
    answered: bool,
}

impl Reader {
    fn into_stream(self) -> EventStream {
        futures::stream::unfold(self, |mut reader| async move {
            let event = reader.next().await?;
            Some((Ok(event), reader))
        })
        .boxed()
    }

    async fn next(&mut self) -> Option<Bytes> {
        let mut writer_gone = false;
        loop {
            if self.answered {
                return None;
            }
            let (event, finished) = {
                let written = self.seen.borrow_and_update();
                (written.events.get(self.cursor).cloned(), written.finished)
            };
            if let Some(event) = event {
                self.cursor += 1;
                if sse::is_response_to(&event, &self.held.request) {
                    self.answered = true;
                    if let Some(key) = &self.resumed {
                        self.resumable.closed().remove(key);
                    }
                }
                return Some(event);
            }
            if finished || writer_gone {
                return None;
            }
            match self.deadline {
                Some(deadline) => {
                    tokio::select! {
                        changed = self.seen.changed() => writer_gone = changed.is_err(),
                        () = tokio::time::sleep_until(deadline) => {
                            self.deadline = None;
                            if self.close_early() {
                                return None;
                            }
                        }
                    }
                }
                None => writer_gone = self.seen.changed().await.is_err(),
            }
        }
    }

    /// Ends the POST's body, keeping the stream for a GET; only a stream whose delivered
    /// events named it (rmcp's priming event does) can be resumed, so only such a stream ends.
    fn close_early(&self) -> bool {
        let stream = {
            let written = self.seen.borrow();
            written.events[..self.cursor].iter().find_map(|e| {
                let (_, stream) = sse::field(e, "id")?.split_once('/')?;
                Some(stream.to_owned())
            })
        };
        let Some(stream) = stream else {
            return false;
        };
        self.resumable
            .closed()
            .insert((self.session.clone(), stream), self.held.clone());
        HttpCounters::count(&self.resumable.shared.http.streams_closed_early);
        true
    }
}
