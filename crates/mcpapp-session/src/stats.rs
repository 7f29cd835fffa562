//! What one upstream session holds for its clients at a moment: the sizes of the hub's and
//! the router's tables, answered by the hub ([`crate::Connection::session_stats`]). A session
//! whose clients have all gone, and with nothing of theirs in flight, holds nothing: every
//! entry left behind is a request that could outlive every caller, or memory kept for the
//! session's life. Tests read it to prove that; operators may too.

/// The sizes of an upstream session's tables. Everything but the gateway's own share
/// (`rmcp_in_flight`, `subscriptions`) belongs to client sessions (ports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// Ports open: client sessions, and one per 2026-07-28 exchange in flight.
    pub ports: usize,
    /// Port requests the router is waiting on an answer for.
    pub port_requests: usize,
    /// Port requests in flight as the ports count them.
    pub in_flight: usize,
    /// Response streams the hub still delivers to.
    pub streams: usize,
    /// Request timeouts still running (answered requests' are not counted).
    pub deadlines: usize,
    /// `tools/call`s being timed for the metrics (the gateway's own included).
    pub calls: usize,
    /// Ids of retries standing for an earlier request of theirs (input-required rounds).
    pub aliases: usize,
    /// Progress tokens rewritten for requests in flight.
    pub progress_tokens: usize,
    /// Server requests routed to a port and not answered yet.
    pub server_requests: usize,
    /// Resource subscriptions held upstream (for ports and for the gateway).
    pub subscriptions: usize,
    /// Input-required rounds in progress, and round counts kept for them.
    pub rounds: usize,
    /// How many rounds each translated request has taken (kept while it is in flight).
    pub round_counts: usize,
    /// Calls held for a modern client's retry, and the server requests they wait on.
    pub held: usize,
    /// Server requests held calls wait on.
    pub held_requests: usize,
    /// `subscriptions/listen` streams the gateway serves itself (modern clients of a legacy
    /// app), and the listens it keeps upstream for legacy clients of a modern app.
    pub listens: usize,
    /// Upstream listens the gateway holds for ports.
    pub gateway_listens: usize,
    /// The gateway's own requests in flight (rmcp's; a modern app's listen is one).
    pub rmcp_in_flight: usize,
    /// The hub's own probes waiting for an answer.
    pub probes: usize,
}

impl SessionStats {
    /// Whether nothing of any client session is left: no port, nothing in flight for one,
    /// no subscription, listen, round or held call of one. The gateway's own requests and
    /// subscriptions do not count.
    pub fn is_idle(&self) -> bool {
        Self {
            rmcp_in_flight: 0,
            subscriptions: 0,
            ..*self
        } == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_gateways_own_share_may_remain_when_idle() {
        let gateways = SessionStats {
            rmcp_in_flight: 1,
            subscriptions: 2,
            ..SessionStats::default()
        };
        assert!(gateways.is_idle());
        for leftover in [
            SessionStats {
                ports: 1,
                ..gateways
            },
            SessionStats {
                deadlines: 1,
                ..gateways
            },
            SessionStats {
                held: 1,
                ..gateways
            },
            SessionStats {
                calls: 1,
                ..gateways
            },
        ] {
            assert!(!leftover.is_idle(), "{leftover:?}");
        }
    }
}
