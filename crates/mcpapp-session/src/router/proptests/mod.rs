//! Property tests of the routing core: random interleavings of what clients (legacy and
//! modern ports), the server (of either era), the gateway's rmcp client and the hub do to one
//! shared session, across restarts, with every delivery checked against a model of the
//! parties (`model.rs`, `world.rs`) as it happens, and at the end of each case everything
//! settled: every request answered once or cancelled upstream, the tables empty.
//!
//! Failures are kept in the crate's `proptest-regressions/` and run first next time.

mod drive;
mod model;
mod ops;
mod world;

use proptest::prelude::*;

use self::ops::{Op, Outcome as Answer, ops};
use self::world::{Outcome, World};
use crate::router::ids::Key;

impl World {
    /// Lets everything finish: clients answer what they were asked and retry what is held,
    /// rmcp answers, the server answers all but the listens; then what is left (listens)
    /// is dropped, every port closes, and nothing may remain anywhere.
    fn settle(&mut self) -> Outcome {
        self.finish()?;
        for n in 0..self.exchanges.len() {
            let e = &self.exchanges[n];
            if e.generation == self.generation && e.waiting && e.method != "subscriptions/listen" {
                return Err(format!(
                    "once: exchange #{n} ({} on port {}) was never answered",
                    e.method, e.port
                ));
            }
        }
        for n in 0..self.exchanges.len() {
            let e = &mut self.exchanges[n];
            if e.generation == self.generation && e.hub_open {
                e.hub_open = false;
                e.waiting = false;
                let stream = e.stream.clone();
                let d = self.router.abandon(&stream, "the client went away");
                self.apply(d)?;
            }
        }
        let ports: Vec<_> = self.ports.keys().copied().collect();
        for port in ports {
            self.close(port)?;
            self.check_orphans()?;
        }
        self.finish()?;
        self.check_settled()
    }

    /// Answers everything answerable until nothing changes.
    fn finish(&mut self) -> Outcome {
        for _ in 0..50 {
            let mut busy = false;
            let seen: Vec<usize> = (0..self.seen.len())
                .filter(|i| {
                    let s = &self.seen[*i];
                    s.generation == self.generation
                        && !s.answered
                        && self.ports.contains_key(&s.port)
                })
                .collect();
            for i in seen {
                busy = true;
                self.seen[i].answered = true;
                let (port, id) = (self.seen[i].port, self.seen[i].id.clone());
                let answer = crate::raw::RawMessage::parse(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"action":"accept"}}}}"#
                ))
                .map_err(|e| e.to_string())?;
                let d = self.router.port_response(port, answer);
                self.apply(d)?;
            }
            for i in 0..self.rmcp.asks.len() {
                if !self.rmcp.asks[i].1 {
                    busy = true;
                    self.rmcp_answer(i)?;
                }
            }
            for h in 0..self.held.len() {
                if !self.held[h].resolved && self.held[h].generation == self.generation {
                    busy = true;
                    self.retry(h, true)?;
                }
            }
            let pending: Vec<Key> = self
                .server
                .pending
                .iter()
                .filter(|(_, p)| p.method != "subscriptions/listen" || self.ports.is_empty())
                .map(|(k, _)| k.clone())
                .collect();
            for key in pending {
                busy = true;
                self.respond(&key, &Answer::Result)?;
            }
            self.check_orphans()?;
            if !busy {
                return Ok(());
            }
        }
        Err("settled: the session never came to rest".to_owned())
    }

    /// *settled*: no table holds anything, nothing is pending upstream, every server request
    /// was answered, a legacy server is subscribed to nothing, and every client request got
    /// exactly one answer or was given up by its client.
    fn check_settled(&self) -> Outcome {
        let sizes = self.router.sizes();
        if !sizes.is_settled() {
            return Err(format!("settled: the router still holds {sizes:?}"));
        }
        if let Some((key, upstream)) = self.server.pending.iter().next() {
            return Err(format!(
                "settled: {key} ({upstream:?}) is still pending upstream"
            ));
        }
        if let Some((key, _)) = self.server.asks.iter().find(|(_, a)| !a.answered) {
            return Err(format!(
                "settled: the server's request {key} was never answered"
            ));
        }
        if !self.server.subs.is_empty() {
            return Err(format!(
                "settled: the server is still subscribed to {:?}",
                self.server.subs
            ));
        }
        if let Some((n, e)) = self
            .exchanges
            .iter()
            .enumerate()
            .find(|(_, e)| e.waiting || e.finals > 1)
        {
            return Err(format!("once: exchange #{n} ended as {e:?}"));
        }
        Ok(())
    }
}

/// Runs one case: the steps, each checked, then the settling.
fn run(modern: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut world = World::new(modern).map_err(TestCaseError::fail)?;
    for (i, op) in ops.iter().enumerate() {
        world
            .step(op)
            .map_err(|e| TestCaseError::fail(format!("step {i} ({op:?}): {e}")))?;
    }
    world
        .settle()
        .map_err(|e| TestCaseError::fail(format!("settling: {e}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A legacy (2025-11-25) upstream: ports of both eras, server requests, subscriptions.
    #[test]
    fn a_legacy_upstream_keeps_every_promise(ops in ops()) {
        run(false, &ops)?;
    }

    /// A modern (2026-07-28) upstream: ports of both eras, input rounds, listens.
    #[test]
    fn a_modern_upstream_keeps_every_promise(ops in ops()) {
        run(true, &ops)?;
    }
}
