//! The hub: the task that owns one upstream session's router and link, through which every
//! message passes, rmcp's (whole, through `pipe.rs`) and the ports' alike.
//!
//! It carries out the router's deliveries, keeps each port request's deadline, times the
//! `tools/call`s that cross it for the [`SessionObserver`], and when the link closes answers
//! everything still waiting. See docs/architecture.md, "One upstream session".

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use mcpapp_manifest::Era;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::link::{Link, LinkEvent};
use crate::observe::{CallOutcome, CallPath, SessionObserver, ToolObserver};
use crate::raw::{MessageKind, RawMessage};
use crate::router::{Delivery, Key, PortId, PortSpec, Router, key_of};
use crate::stats::SessionStats;

/// Notifications kept for a port that does not read them fast enough.
pub(crate) const PORT_BACKLOG: usize = 256;
/// Non-JSON lines kept for error reports.
const GARBAGE_KEPT: usize = 3;

/// Work for the hub.
#[derive(Debug)]
pub(crate) enum HubCommand {
    FromRmcp(RawMessage),
    OpenPort {
        port: PortId,
        spec: PortSpec,
        notifications: mpsc::Sender<RawMessage>,
    },
    PortRequest {
        port: PortId,
        message: RawMessage,
        stream: mpsc::UnboundedSender<RawMessage>,
        accepted: oneshot::Sender<Result<Key, RawMessage>>,
        /// Set for a `tools/call`, timed from here.
        call: Option<Call>,
    },
    PortNotification {
        port: PortId,
        message: RawMessage,
    },
    PortResponse {
        port: PortId,
        message: RawMessage,
    },
    Abandon {
        key: Key,
        reason: String,
    },
    ClosePort {
        port: PortId,
        reason: String,
    },
    Handshake {
        reply: oneshot::Sender<(Era, Option<Box<RawValue>>)>,
    },
    /// Sends a `server/discover` of the hub's own and hands back its answer.
    Probe {
        reply: oneshot::Sender<RawMessage>,
    },
    SetEra(Era),
    /// Reports the sizes of the hub's and the router's tables.
    Stats {
        reply: oneshot::Sender<SessionStats>,
    },
}

pub(crate) struct Hub {
    router: Router,
    link: Arc<dyn Link>,
    to_rmcp: mpsc::UnboundedSender<String>,
    ports: HashMap<PortId, mpsc::Sender<RawMessage>>,
    requests: HashMap<Key, mpsc::UnboundedSender<RawMessage>>,
    /// When each port request runs out, soonest first; kept whether or not anyone still
    /// waits for the answer, so no request stays pending upstream for ever. Every bounded
    /// request gets the same timeout, so arrival order is deadline order: a queue, whose
    /// answered entries are skipped when they come up (and swept out when they pile up).
    deadlines: VecDeque<(Instant, Key)>,
    request_timeout: Duration,
    /// Ports already warned about for not reading their notifications.
    lagging: std::collections::HashSet<PortId>,
    /// The hub's own requests (the era probe) waiting for their answer.
    probes: HashMap<Key, oneshot::Sender<RawMessage>>,
    garbage: Vec<String>,
    closed: watch::Sender<Option<String>>,
    meters: Arc<dyn SessionObserver>,
    /// The `tools/call`s in flight, by port request stream or rmcp id (the router keeps the
    /// two apart: port requests go upstream as `"gw:…"` strings, rmcp's ids are numbers).
    calls: HashMap<Key, Call>,
}

/// The reasons rmcp gives when it cancels a request it timed out.
const RMCP_TIMEOUT_REASON: &str =
    rmcp::service::RequestHandle::<rmcp::RoleClient>::REQUEST_TIMEOUT_REASON;
const RMCP_TOTAL_TIMEOUT_REASON: &str =
    rmcp::service::RequestHandle::<rmcp::RoleClient>::REQUEST_MAX_TOTAL_TIMEOUT_REASON;

/// A `tools/call` being timed.
#[derive(Debug)]
pub(crate) struct Call {
    tool: Arc<dyn ToolObserver>,
    path: CallPath,
    port: Option<PortId>,
    started: Instant,
}

/// Whether `message` is a request of `method`, without decoding the method when it is
/// written plainly (as every client writes it).
fn is_method(message: &RawMessage, method: &str) -> bool {
    match message.member("method").map(RawValue::get) {
        Some(raw) if !raw.contains('\\') => raw
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .is_some_and(|m| m == method),
        Some(_) => message.method().as_deref() == Some(method),
        None => false,
    }
}

/// How a `tools/call` ended, from its response.
fn outcome_of(message: &RawMessage) -> CallOutcome {
    #[derive(serde::Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    // The result's text as it is (member() would check the whole result once more first).
    match message.member_text("result") {
        None => CallOutcome::Failed,
        Some(result) => match serde_json::from_str::<Flag>(result) {
            Ok(Flag {
                is_error: Some(true),
            }) => CallOutcome::Error,
            _ => CallOutcome::Ok,
        },
    }
}

/// How many `notifications/cancelled` go upstream among `deliveries`.
fn cancellations(deliveries: &[Delivery]) -> u64 {
    let sent = deliveries.iter().filter(|d| {
        matches!(d, Delivery::Upstream { message, request: None }
            if message.kind() == MessageKind::Notification
                && is_method(message, "notifications/cancelled"))
    });
    sent.count() as u64
}

/// Starts timing `message` if it is a `tools/call`.
pub(crate) fn begin_call(
    meters: &dyn SessionObserver,
    message: &RawMessage,
    path: CallPath,
    port: Option<PortId>,
) -> Option<Call> {
    if !is_method(message, "tools/call") {
        return None;
    }
    let name = message.path(&["params", "name"]);
    let name = name.map(RawValue::get);
    // A plain string is looked up as written; one with escapes is decoded first.
    let decoded;
    let name = match name {
        Some(raw) if !raw.contains('\\') => raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')),
        Some(raw) => {
            decoded = serde_json::from_str::<String>(raw).ok();
            decoded.as_deref()
        }
        None => None,
    };
    Some(Call {
        tool: meters.tool(name),
        path,
        port,
        started: Instant::now(),
    })
}

impl Hub {
    /// A hub over `link` that answers rmcp on `to_rmcp`, bounds port requests by
    /// `request_timeout`, says on `closed` why the link closed, and tells `meters` how calls
    /// end. [`Hub::run`] starts it.
    pub(crate) fn new(
        link: Arc<dyn Link>,
        to_rmcp: mpsc::UnboundedSender<String>,
        request_timeout: Duration,
        closed: watch::Sender<Option<String>>,
        meters: Arc<dyn SessionObserver>,
    ) -> Self {
        Self {
            router: Router::with_secret(secret()),
            link,
            to_rmcp,
            ports: HashMap::new(),
            requests: HashMap::new(),
            deadlines: VecDeque::new(),
            request_timeout,
            lagging: std::collections::HashSet::new(),
            probes: HashMap::new(),
            garbage: Vec::new(),
            closed,
            meters,
            calls: HashMap::new(),
        }
    }

    /// Times the gateway's own `tools/call`s, and counts what rmcp gives up: rmcp cancels a
    /// request on its own timeout with a reason of its own; any other cancellation is a
    /// caller that stopped waiting.
    fn note_rmcp(&mut self, message: &RawMessage) {
        match message.kind() {
            MessageKind::Request => {
                if let Some(id) = message.id()
                    && let Some(call) =
                        begin_call(self.meters.as_ref(), message, CallPath::Agent, None)
                {
                    self.calls.insert(key_of(id), call);
                }
            }
            MessageKind::Notification if is_method(message, "notifications/cancelled") => {
                let Some(id) = message.path(&["params", "requestId"]) else {
                    return;
                };
                let reason = message
                    .path(&["params", "reason"])
                    .and_then(|r| serde_json::from_str::<String>(r.get()).ok());
                let timed_out = matches!(
                    reason.as_deref(),
                    Some(RMCP_TIMEOUT_REASON | RMCP_TOTAL_TIMEOUT_REASON)
                );
                if timed_out {
                    self.meters.timed_out();
                } else {
                    self.meters.cancelled(1);
                }
                let outcome = if timed_out {
                    CallOutcome::Timeout
                } else {
                    CallOutcome::Cancelled
                };
                self.end_call(&key_of(id), || outcome);
            }
            _ => {}
        }
    }

    /// Counts the `tools/call` under `key`, if one is being timed.
    fn end_call(&mut self, key: &Key, outcome: impl FnOnce() -> CallOutcome) {
        if let Some(call) = self.calls.remove(key) {
            call.tool
                .finish(call.path, outcome(), call.started.elapsed());
        }
    }

    /// A closing port's calls still in flight are cancelled with it.
    fn end_port_calls(&mut self, port: PortId) {
        self.calls.retain(|_, call| {
            if call.port != Some(port) {
                return true;
            }
            call.tool
                .finish(call.path, CallOutcome::Cancelled, call.started.elapsed());
            false
        });
    }

    fn deliver(&mut self, deliveries: Vec<Delivery>) {
        for delivery in deliveries {
            match delivery {
                Delivery::Upstream { message, request } => self.link.send(message, request),
                Delivery::Rmcp(message) => {
                    if message.is_response()
                        && !self.calls.is_empty()
                        && let Some(id) = message.id()
                    {
                        self.end_call(&key_of(id), || outcome_of(&message));
                    }
                    let _ = self.to_rmcp.send(message.into_string());
                }
                Delivery::Request {
                    request,
                    message,
                    last,
                } => {
                    let stream = if last {
                        self.end_call(&request, || outcome_of(&message));
                        self.requests.remove(&request)
                    } else {
                        self.requests.get(&request).cloned()
                    };
                    if let Some(stream) = stream {
                        // The caller may have gone; the response is then simply dropped.
                        let _ = stream.send(message);
                    }
                }
                Delivery::Port { port, message } => {
                    if let Some(stream) = self.ports.get(&port)
                        && stream.try_send(message).is_err()
                    {
                        // Sessions that never open their event stream are common; say it once.
                        if self.lagging.insert(port) {
                            warn!(
                                port,
                                "a browser session is not reading its notifications (its backlog of {PORT_BACKLOG} is full); newer ones are dropped"
                            );
                        } else {
                            debug!(
                                port,
                                "dropped a notification for a browser session that is not reading"
                            );
                        }
                    }
                }
                Delivery::Gateway { key, message } => {
                    if let Some(waiter) = self.probes.remove(&key) {
                        let _ = waiter.send(message);
                    }
                }
                Delivery::Drop { reason } => debug!("dropped a message: {reason}"),
            }
        }
    }

    fn command(&mut self, command: HubCommand) {
        match command {
            HubCommand::FromRmcp(message) => {
                self.note_rmcp(&message);
                let deliveries = self.router.rmcp_outgoing(message);
                self.deliver(deliveries);
            }
            HubCommand::OpenPort {
                port,
                spec,
                notifications,
            } => {
                self.router.open_port(port, spec);
                self.ports.insert(port, notifications);
            }
            HubCommand::PortRequest {
                port,
                message,
                stream,
                accepted,
                call,
            } => self.port_request(port, message, stream, accepted, call),
            HubCommand::PortNotification { port, message } => {
                let deliveries = self.router.port_notification(port, message);
                self.deliver(deliveries);
            }
            HubCommand::PortResponse { port, message } => {
                let deliveries = self.router.port_response(port, message);
                self.deliver(deliveries);
            }
            HubCommand::Abandon { key, reason } => self.abandon(&key, &reason),
            HubCommand::ClosePort { port, reason } => {
                self.ports.remove(&port);
                self.lagging.remove(&port);
                self.end_port_calls(port);
                let deliveries = self.router.close_port(port, &reason);
                self.meters.cancelled(cancellations(&deliveries));
                self.deliver(deliveries);
            }
            HubCommand::Handshake { reply } => {
                let _ = reply.send((
                    self.router.upstream_era(),
                    self.router.handshake_result().map(ToOwned::to_owned),
                ));
            }
            HubCommand::Probe { reply } => {
                let (key, delivery) = self.router.probe(
                    &crate::client::gateway_info_json(),
                    &crate::client::gateway_capabilities_json(),
                );
                self.probes.insert(key, reply);
                self.deliver(vec![delivery]);
            }
            HubCommand::SetEra(era) => {
                self.router.set_upstream_era(era);
                self.link.set_era(era);
            }
            HubCommand::Stats { reply } => {
                let _ = reply.send(self.stats());
            }
        }
    }

    /// A port's request: routed and sent upstream, unless its client has already gone.
    ///
    /// The port waits for `accepted` with a guard that, when its client goes away, closes
    /// the channel and abandons a key already sent (see `port.rs`). So a client that left
    /// before the request was routed shows as a closed channel here (the request never goes
    /// upstream), and one that leaves once it was sent, as a failed send (it is abandoned at
    /// once): no request outlives every caller until its timeout.
    fn port_request(
        &mut self,
        port: PortId,
        message: RawMessage,
        stream: mpsc::UnboundedSender<RawMessage>,
        accepted: oneshot::Sender<Result<Key, RawMessage>>,
        call: Option<Call>,
    ) {
        if accepted.is_closed() {
            if let Some(call) = call {
                call.tool
                    .finish(call.path, CallOutcome::Cancelled, call.started.elapsed());
            }
            debug!(port, "a request's client went away before it was sent");
            return;
        }
        match self.router.port_request(port, message) {
            Ok(taken) => {
                if let Some(call) = call {
                    self.calls.insert(taken.stream.clone(), call);
                }
                if taken.bounded {
                    self.add_deadline(taken.stream.clone());
                }
                self.requests.insert(taken.stream.clone(), stream);
                let key = taken.stream.clone();
                let gone = accepted.send(Ok(taken.stream)).is_err();
                self.deliver(taken.deliveries);
                if gone {
                    self.abandon(&key, "the client went away");
                }
            }
            Err(response) => {
                let _ = accepted.send(Err(response));
                let pending = self.router.take_pending();
                self.deliver(pending);
            }
        }
    }

    /// The client of the port request `key` went away: it is cancelled upstream.
    fn abandon(&mut self, key: &Key, reason: &str) {
        self.requests.remove(key);
        self.end_call(key, || CallOutcome::Cancelled);
        let deliveries = self.router.abandon(key, reason);
        self.meters.cancelled(cancellations(&deliveries));
        self.deliver(deliveries);
    }

    /// The sizes of the hub's tables and the router's.
    fn stats(&self) -> SessionStats {
        let sizes = self.router.sizes();
        let deadlines = self
            .deadlines
            .iter()
            .filter(|(_, key)| self.requests.contains_key(key))
            .count();
        SessionStats {
            ports: sizes.ports.max(self.ports.len()),
            port_requests: sizes.requests,
            in_flight: sizes.in_flight,
            streams: self.requests.len(),
            deadlines,
            calls: self.calls.len(),
            aliases: sizes.aliases,
            progress_tokens: sizes.tokens,
            server_requests: sizes.server_requests,
            subscriptions: sizes.subscriptions,
            rounds: sizes.rounds,
            round_counts: sizes.round_counts,
            held: sizes.held,
            held_requests: sizes.held_requests,
            listens: sizes.listens,
            gateway_listens: sizes.gateway_listens,
            rmcp_in_flight: sizes.rmcp_in_flight,
            probes: sizes.probes.max(self.probes.len()),
        }
    }

    /// Starts the request timeout of the port request `key`.
    fn add_deadline(&mut self, key: Key) {
        // Answered requests stay queued until their deadline comes up; once they are most of
        // the queue, they go, so the queue stays about as long as the requests in flight.
        if self.deadlines.len() >= 64 && self.deadlines.len() > 2 * self.requests.len() {
            let requests = &self.requests;
            self.deadlines.retain(|(_, key)| requests.contains_key(key));
        }
        self.deadlines
            .push_back((Instant::now() + self.request_timeout, key));
    }

    /// Requests whose time is up: the caller (if still there) gets an error, and the server is
    /// told to stop.
    fn expire(&mut self, now: Instant) {
        while let Some((due, _)) = self.deadlines.front()
            && *due <= now
        {
            let Some((_, key)) = self.deadlines.pop_front() else {
                break;
            };
            let Some(stream) = self.requests.remove(&key) else {
                // Answered or abandoned already.
                continue;
            };
            self.meters.timed_out();
            self.end_call(&key, || CallOutcome::Timeout);
            let reason = format!("timed out after {} s", self.request_timeout.as_secs_f64());
            let id = self.router.original_id(&key).map(ToOwned::to_owned);
            let _ = stream.send(RawMessage::error_response(
                id.as_deref(),
                -32001,
                &format!("the app did not answer: the request {reason}"),
            ));
            let deliveries = self.router.abandon(&key, &reason);
            self.deliver(deliveries);
        }
    }

    /// The link is gone: every waiting request gets an error, streams end, rmcp sees EOF.
    fn link_closed(&mut self, reason: String) {
        let mut reason = reason;
        if !self.garbage.is_empty() {
            reason.push_str(&format!(
                "; it wrote text that is not JSON-RPC: {}",
                self.garbage
                    .iter()
                    .map(|g| format!("'{g}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        debug!(tables = ?self.router.sizes(), "the link closed: {reason}");
        for (key, stream) in self.requests.drain() {
            let id = self.router.original_id(&key).map(ToOwned::to_owned);
            let _ = stream.send(RawMessage::error_response(
                id.as_deref(),
                -32603,
                &format!("the connection to the app was lost: {reason}"),
            ));
        }
        self.ports.clear();
        for (_, call) in self.calls.drain() {
            call.tool
                .finish(call.path, CallOutcome::Failed, call.started.elapsed());
        }
        let _ = self.closed.send(Some(reason));
    }

    /// Serves the session until the link closes or everyone holding the connection is gone.
    pub(crate) async fn run(
        mut self,
        mut link_events: mpsc::UnboundedReceiver<LinkEvent>,
        mut commands: mpsc::UnboundedReceiver<HubCommand>,
    ) {
        // One timer for the hub's life, set to the oldest queued deadline. It is not moved
        // when that request is answered (requests are answered far more often than they time
        // out): it fires, finds nothing due, and is set to the next one.
        let timer = tokio::time::sleep_until(Instant::now());
        let mut timer = std::pin::pin!(timer);
        let mut armed: Option<Instant> = None;
        loop {
            let next_deadline = self.deadlines.front().map(|(due, _)| *due);
            if next_deadline.is_some() && armed.is_none() {
                armed = next_deadline;
                if let Some(due) = armed {
                    timer.as_mut().reset(due);
                }
            }
            tokio::select! {
                () = timer.as_mut(), if armed.is_some() => {
                    armed = None;
                    self.expire(Instant::now());
                }
                event = link_events.recv() => match event {
                    Some(LinkEvent::Message { message, origin }) => {
                        let deliveries = self.router.upstream(message, &origin);
                        self.deliver(deliveries);
                    }
                    Some(LinkEvent::Garbage(line)) => {
                        warn!("the app wrote something that is not JSON-RPC: {line}");
                        if self.garbage.len() < GARBAGE_KEPT {
                            self.garbage.push(line);
                        }
                    }
                    Some(LinkEvent::Closed(reason)) => {
                        self.link_closed(reason);
                        return;
                    }
                    None => {
                        self.link_closed("the link stopped".to_owned());
                        return;
                    }
                },
                command = commands.recv() => match command {
                    Some(command) => self.command(command),
                    // Everyone holding the connection has gone.
                    None => return,
                },
            }
        }
    }
}

/// A random secret for the router's `requestState` handles: the process's random hash keys.
fn secret() -> [u64; 2] {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let mut parts = [0u64; 2];
    for (i, part) in parts.iter_mut().enumerate() {
        let mut hasher = state.build_hasher();
        hasher.write_usize(i);
        *part = hasher.finish();
    }
    parts
}
