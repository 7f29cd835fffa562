//! A browser session's standalone event stream (its GET): numbered events, a bounded record
//! of what was sent, and replay after `Last-Event-ID`, so a client whose stream dropped can
//! reopen it without losing notifications.
//!
//! The notifications of the session's port wait in its channel while no GET is open (bounded
//! by the port's backlog). Every event sent on a GET gets the next number as its SSE `id`;
//! the last [`REPLAY_EVENTS`] (at most [`REPLAY_BYTES`]) are kept. A GET carrying
//! `Last-Event-ID: N` first gets the kept events after N again, then what is new. Response
//! streams of POSTs carry no ids: a request whose client goes away is cancelled (see the
//! module above), so there is nothing to resume there.

use std::collections::VecDeque;
use std::sync::Arc;

use mcpapp_session::RawMessage;
use tokio::sync::mpsc;

/// Events kept for replay, per session.
const REPLAY_EVENTS: usize = 256;
/// Bytes kept for replay, per session.
const REPLAY_BYTES: usize = 1024 * 1024;

/// What a session's GET streams have sent and what they will send next.
#[derive(Debug)]
pub(crate) struct EventLog {
    notifications: Option<mpsc::Receiver<RawMessage>>,
    sent: VecDeque<(u64, Arc<str>)>,
    sent_bytes: usize,
    last: u64,
}

/// Where a reconnecting client's `Last-Event-ID` leaves it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// These events came after it and are sent again (possibly none).
    Replay(Vec<(u64, Arc<str>)>),
    /// It is not an id of this stream (or is in the future): nothing can be replayed.
    Unknown,
    /// Events after it were already dropped from the record; what is kept is sent.
    Gap(Vec<(u64, Arc<str>)>),
}

impl EventLog {
    pub(crate) fn new(notifications: Option<mpsc::Receiver<RawMessage>>) -> Self {
        Self {
            notifications,
            sent: VecDeque::new(),
            sent_bytes: 0,
            last: 0,
        }
    }

    /// The id of the last event sent (0 before the first).
    pub(crate) fn last_id(&self) -> u64 {
        self.last
    }

    /// The events to send again to a client that last saw `last_event_id`.
    pub(crate) fn resume(&self, last_event_id: &str) -> Resume {
        let Ok(seen) = last_event_id.trim().parse::<u64>() else {
            return Resume::Unknown;
        };
        if seen > self.last {
            return Resume::Unknown;
        }
        let after: Vec<(u64, Arc<str>)> = self
            .sent
            .iter()
            .filter(|(id, _)| *id > seen)
            .cloned()
            .collect();
        let oldest_kept = self.sent.front().map_or(self.last + 1, |(id, _)| *id);
        if seen + 1 < oldest_kept {
            Resume::Gap(after)
        } else {
            Resume::Replay(after)
        }
    }

    /// Waits for the next notification and records it; `None` once the port has closed.
    pub(crate) async fn next(&mut self) -> Option<(u64, Arc<str>)> {
        let message = self.notifications.as_mut()?.recv().await?;
        Some(self.record(message.into_string()))
    }

    fn record(&mut self, data: String) -> (u64, Arc<str>) {
        self.last += 1;
        let data: Arc<str> = data.into();
        self.sent_bytes += data.len();
        self.sent.push_back((self.last, data.clone()));
        while self.sent.len() > REPLAY_EVENTS || self.sent_bytes > REPLAY_BYTES {
            match self.sent.pop_front() {
                Some((_, dropped)) => self.sent_bytes -= dropped.len(),
                None => break,
            }
        }
        (self.last, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(events: &[(u64, Arc<str>)]) -> Vec<u64> {
        events.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn events_after_the_last_seen_one_are_replayed() {
        let mut log = EventLog::new(None);
        for n in 0..5 {
            log.record(format!("event {n}"));
        }
        assert_eq!(log.last_id(), 5);
        match log.resume("3") {
            Resume::Replay(events) => {
                assert_eq!(ids(&events), [4, 5]);
                assert_eq!(&*events[0].1, "event 3");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(log.resume("5"), Resume::Replay(Vec::new()));
        assert_eq!(
            log.resume("0"),
            Resume::Replay(log.sent.iter().cloned().collect())
        );
        assert_eq!(log.resume("6"), Resume::Unknown);
        assert_eq!(log.resume("p1-3"), Resume::Unknown);
    }

    #[test]
    fn the_record_is_bounded_and_a_gap_is_told_apart() {
        let mut log = EventLog::new(None);
        for n in 0..(REPLAY_EVENTS + 10) {
            log.record(format!("{n}"));
        }
        assert_eq!(log.sent.len(), REPLAY_EVENTS);
        match log.resume("2") {
            Resume::Gap(events) => assert_eq!(events.len(), REPLAY_EVENTS),
            other => panic!("{other:?}"),
        }
        let big = "x".repeat(REPLAY_BYTES / 2 + 1);
        log.record(big.clone());
        log.record(big);
        assert!(log.sent_bytes <= REPLAY_BYTES);
        assert_eq!(log.sent.len(), 1);
    }
}
