//! One upstream session: a link, the router, the gateway's rmcp client, and the ports that
//! share it.
//!
//! rmcp does not talk to the app directly. It hands whole JSON-RPC messages through channels
//! (`pipe.rs`) to the *hub*, a task that owns the [`Router`] and the link. Every
//! message, rmcp's and the ports', passes through the hub, which is what lets the agent and
//! any number of browser sessions share one upstream session byte for byte, over stdio and
//! HTTP alike (see docs/architecture.md, "One upstream session").

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{Instrument, debug, warn};

use mcpapp_manifest::Era;

use crate::era;
use crate::link::{Link, LinkEvent};
use crate::observe::{CallOutcome, CallPath, PathCell, SessionObserver, ToolObserver};
use crate::pipe::HubPipe;
use crate::raw::{MessageKind, RawError, RawMessage, raw_json, raw_string};
use crate::router::{Delivery, Key, PortCapabilities, PortId, PortSpec, Router, key_of};

/// Notifications kept for a port that does not read them fast enough.
const PORT_BACKLOG: usize = 256;
/// Non-JSON lines kept for error reports.
const GARBAGE_KEPT: usize = 3;
/// Protocol versions a client session may have, oldest first: the Streamable HTTP era up to
/// the last one with `initialize`. Between them only fields and features were added, which a
/// client of an older version ignores, so one upstream session serves them all.
pub const PORT_PROTOCOL_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];

/// Work for the hub.
#[derive(Debug)]
enum HubCommand {
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
}

struct Hub {
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
struct Call {
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
fn begin_call(
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
            } => match self.router.port_request(port, message) {
                Ok(taken) => {
                    if let Some(call) = call {
                        self.calls.insert(taken.stream.clone(), call);
                    }
                    if taken.bounded {
                        self.add_deadline(taken.stream.clone());
                    }
                    self.requests.insert(taken.stream.clone(), stream);
                    let _ = accepted.send(Ok(taken.stream));
                    self.deliver(taken.deliveries);
                }
                Err(response) => {
                    let _ = accepted.send(Err(response));
                    let pending = self.router.take_pending();
                    self.deliver(pending);
                }
            },
            HubCommand::PortNotification { port, message } => {
                let deliveries = self.router.port_notification(port, message);
                self.deliver(deliveries);
            }
            HubCommand::PortResponse { port, message } => {
                let deliveries = self.router.port_response(port, message);
                self.deliver(deliveries);
            }
            HubCommand::Abandon { key, reason } => {
                self.requests.remove(&key);
                self.end_call(&key, || CallOutcome::Cancelled);
                let deliveries = self.router.abandon(&key, &reason);
                self.meters.cancelled(cancellations(&deliveries));
                self.deliver(deliveries);
            }
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

    async fn run(
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

/// Waits until the link has closed and returns why.
pub async fn closed_reason(closed: &mut watch::Receiver<Option<String>>) -> String {
    // The guard returned by `wait_for` must not live across an await, so copy the reason out
    // at once.
    match closed.wait_for(Option::is_some).await {
        Ok(reason) => reason.clone().unwrap_or_default(),
        Err(_) => "the connection ended".to_owned(),
    }
}

/// A live upstream session with its rmcp client.
pub struct Connection {
    /// The gateway's own rmcp client on this session.
    pub client: rmcp::service::RunningService<rmcp::RoleClient, crate::client::GatewayClient>,
    /// The era the upstream speaks.
    pub era: Era,
    hub: mpsc::UnboundedSender<HubCommand>,
    link: Arc<dyn Link>,
    closed: watch::Receiver<Option<String>>,
    next_port: AtomicU64,
    /// The bound of every request sent on this session.
    pub request_timeout: Duration,
    app_id: String,
    meters: Arc<dyn SessionObserver>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("app_id", &self.app_id)
            .finish_non_exhaustive()
    }
}

/// How to find out which era an app speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraChoice {
    /// Ask with `server/discover` first; fall back to `initialize`.
    Auto,
    /// `initialize` at once.
    Legacy,
}

/// How long the era probe waits for an answer before taking the server for a legacy one.
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The link closed while the era probe waited (some servers end on any request before
    /// `initialize`); start again without probing.
    #[error("the app ended when asked for its era: {0}")]
    ProbeClosed(String),
    /// The link closed first; the reason says how.
    #[error("{0}")]
    LinkClosed(String),
    /// rmcp refused the handshake.
    #[error("the MCP handshake failed: {0}")]
    Protocol(String),
}

impl Connection {
    /// Starts the hub over `link` and performs the MCP handshake through rmcp. The caller
    /// bounds the whole thing with the startup timeout.
    pub async fn open(
        app_id: &str,
        link: Arc<dyn Link>,
        link_events: mpsc::UnboundedReceiver<LinkEvent>,
        handler: crate::client::GatewayClient,
        request_timeout: Duration,
        choice: EraChoice,
        meters: Arc<dyn SessionObserver>,
    ) -> Result<Connection, HandshakeError> {
        let (to_rmcp, to_rmcp_rx) = mpsc::unbounded_channel::<String>();
        let (commands, commands_rx) = mpsc::unbounded_channel::<HubCommand>();
        let (closed_tx, closed_rx) = watch::channel::<Option<String>>(None);
        let span = tracing::Span::current();

        // rmcp's messages go to the hub as they are sent; the hub's come back through
        // `to_rmcp`, and end when the hub drops it.
        let from_rmcp = commands.clone();
        let rmcp_io = HubPipe::new(
            move |message| from_rmcp.send(HubCommand::FromRmcp(message)).is_ok(),
            to_rmcp_rx,
        );
        let hub = Hub {
            router: Router::with_secret(secret()),
            link: link.clone(),
            to_rmcp,
            ports: HashMap::new(),
            requests: HashMap::new(),
            deadlines: VecDeque::new(),
            request_timeout,
            lagging: std::collections::HashSet::new(),
            probes: HashMap::new(),
            garbage: Vec::new(),
            closed: closed_tx,
            meters: meters.clone(),
            calls: HashMap::new(),
        };
        tokio::spawn(hub.run(link_events, commands_rx).instrument(span));

        let mut closed = closed_rx.clone();
        let era = match choice {
            EraChoice::Legacy => Era::Legacy,
            EraChoice::Auto => {
                let (reply, answer) = oneshot::channel();
                let _ = commands.send(HubCommand::Probe { reply });
                tokio::select! {
                    answer = tokio::time::timeout(PROBE_WAIT, answer) => match answer {
                        Ok(Ok(answer)) => era::classify_probe(&answer),
                        // An error, a refusal or silence: a server of the initialize era.
                        _ => Era::Legacy,
                    },
                    reason = closed_reason(&mut closed) => return Err(HandshakeError::ProbeClosed(reason)),
                }
            }
        };
        debug!(?era, "the app's protocol era");
        let _ = commands.send(HubCommand::SetEra(era));
        let handshake = async {
            match era {
                Era::Legacy => rmcp::ServiceExt::serve(handler, rmcp_io).await,
                Era::Modern => {
                    rmcp::ClientServiceExt::serve_with_lifecycle(
                        handler,
                        rmcp_io,
                        rmcp::ClientLifecycleMode::Discover {
                            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                        },
                    )
                    .await
                }
            }
        };
        let client = tokio::select! {
            result = handshake => result.map_err(|e| {
                let reason = closed_rx.borrow().clone();
                match reason {
                    Some(reason) => HandshakeError::LinkClosed(reason),
                    None => HandshakeError::Protocol(e.to_string()),
                }
            })?,
            reason = closed_reason(&mut closed) => return Err(HandshakeError::LinkClosed(reason)),
        };
        Ok(Connection {
            client,
            era,
            hub: commands,
            link,
            closed: closed_rx,
            next_port: AtomicU64::new(1),
            request_timeout,
            app_id: app_id.to_owned(),
            meters,
        })
    }

    /// Resolves with the reason once the link has closed.
    pub fn closed(&self) -> watch::Receiver<Option<String>> {
        self.closed.clone()
    }

    /// Closes rmcp and the link.
    pub async fn shutdown(&self, grace: Duration) {
        self.client.cancellation_token().cancel();
        self.link.close(grace).await;
    }

    /// Opens a port on this session for a client whose `initialize` request is `initialize`,
    /// and returns it with the answer to give that client.
    ///
    /// The answer is the upstream's own `InitializeResult` under the client's id (for a
    /// modern upstream, one made from its `server/discover` result), with the protocol
    /// version the port will speak: the client's, when it is one of
    /// [`PORT_PROTOCOL_VERSIONS`] the session can serve; else the newest the session can.
    pub async fn open_port(
        self: &Arc<Self>,
        initialize: &RawMessage,
    ) -> Result<(Port, RawMessage), PortError> {
        let Some(id) = initialize.id().map(ToOwned::to_owned) else {
            return Err(PortError::Invalid(RawError::InvalidEnvelope(
                "initialize needs an id".to_owned(),
            )));
        };
        let client_capabilities = initialize.path(&["params", "capabilities"]);
        let spec = PortSpec {
            era: Era::Legacy,
            capabilities: PortCapabilities::from_json(client_capabilities),
            client_capabilities: client_capabilities.map(ToOwned::to_owned),
            client_info: initialize.get_path(&["params", "clientInfo"]),
        };
        let requested = initialize
            .path(&["params", "protocolVersion"])
            .and_then(|v| serde_json::from_str::<String>(v.get()).ok());
        let (upstream_era, handshake) = self.handshake().await?;
        let (version, result) = match upstream_era {
            Era::Legacy => {
                let upstream = serde_json::from_str::<serde_json::Value>(handshake.get())
                    .ok()
                    .and_then(|r| r["protocolVersion"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| newest_port_version().to_owned());
                let version = negotiate(requested.as_deref(), &upstream);
                let mut result = handshake;
                if version != upstream {
                    let mut edited = RawMessage::response(&id, &result);
                    if edited
                        .set_path(&["result", "protocolVersion"], &raw_string(&version))
                        .is_ok()
                        && let Some(member) = edited.member("result")
                    {
                        result = member.to_owned();
                    }
                }
                (version, result)
            }
            Era::Modern => {
                // Every legacy version can be served from a modern upstream.
                let version = negotiate(requested.as_deref(), newest_port_version());
                let result = era::initialize_from_discover(&handshake, &version, &self.app_id);
                (version, result)
            }
        };
        let port = self.new_port(spec, version)?;
        Ok((port, RawMessage::response(&id, &result)))
    }

    /// Opens a port for one request of a modern client (no session: each request declares
    /// its own capabilities). It lives as long as the request's exchange.
    pub fn open_modern_port(self: &Arc<Self>, request: &RawMessage) -> Result<Port, PortError> {
        let client_capabilities = era::request_capabilities(request);
        let spec = PortSpec {
            era: Era::Modern,
            capabilities: PortCapabilities::from_json(client_capabilities.as_deref()),
            client_capabilities,
            client_info: None,
        };
        self.new_port(spec, era::MODERN.to_owned())
    }

    /// The `server/discover` result a modern client gets: the app's own (or one made from
    /// its `InitializeResult`), listing the versions the gateway offers.
    pub(crate) async fn discover_result(&self) -> Result<Box<RawValue>, PortError> {
        let (upstream_era, handshake) = self.handshake().await?;
        Ok(match upstream_era {
            Era::Legacy => era::discover_from_initialize(&handshake),
            Era::Modern => era::discover_for_clients(&handshake),
        })
    }

    async fn handshake(&self) -> Result<(Era, Box<RawValue>), PortError> {
        let (reply, result) = oneshot::channel();
        self.hub
            .send(HubCommand::Handshake { reply })
            .map_err(|_| PortError::SessionGone)?;
        let (upstream_era, handshake) = result.await.map_err(|_| PortError::SessionGone)?;
        Ok((upstream_era, handshake.ok_or(PortError::SessionGone)?))
    }

    fn new_port(
        self: &Arc<Self>,
        spec: PortSpec,
        protocol_version: String,
    ) -> Result<Port, PortError> {
        let port = self.next_port.fetch_add(1, Ordering::Relaxed);
        let (notifications, notifications_rx) = mpsc::channel(PORT_BACKLOG);
        self.hub
            .send(HubCommand::OpenPort {
                port,
                spec,
                notifications,
            })
            .map_err(|_| PortError::SessionGone)?;
        Ok(Port {
            id: port,
            path: PathCell::new(CallPath::Proxy),
            meters: self.meters.clone(),
            app_id: self.app_id.clone(),
            hub: self.hub.clone(),
            notifications: std::sync::Mutex::new(Some(notifications_rx)),
            protocol_version,
            connection: Arc::downgrade(self),
        })
    }
}

fn newest_port_version() -> &'static str {
    PORT_PROTOCOL_VERSIONS[PORT_PROTOCOL_VERSIONS.len() - 1]
}

/// The version a port speaks: the client's when the gateway serves it and the upstream
/// session is at least that new (versions are dates, so they compare as text).
fn negotiate(requested: Option<&str>, upstream: &str) -> String {
    match requested {
        Some(v) if PORT_PROTOCOL_VERSIONS.contains(&v) && v <= upstream => v.to_owned(),
        _ => upstream.to_owned(),
    }
}

/// Why a port cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PortError {
    /// The app is not running, so there is no session to join.
    #[error("the app is not running (it is {0})")]
    NotRunning(mcpapp_manifest::Lifecycle),
    /// The upstream session this port belonged to has ended (the app stopped or restarted);
    /// a client should start a new session.
    #[error("the app's session has ended; start a new session")]
    SessionGone,
    /// The message is not valid JSON-RPC for this endpoint.
    #[error("{0}")]
    Invalid(#[from] RawError),
}

/// What the gateway says back to a message a port sent.
#[derive(Debug)]
pub enum PortReply {
    /// A notification or response was accepted (HTTP 202).
    Accepted,
    /// The gateway answered at once (`initialize`, `ping`, a malformed request).
    Response(RawMessage),
    /// The request went upstream; its progress, server requests and response follow.
    Stream(ResponseStream),
}

/// One browser session's share of an app's upstream session.
///
/// Requests keep their own ids and progress tokens as far as the port can see; the port
/// receives only its own responses, plus session notifications on
/// [`Port::take_notifications`]. Dropping the port ends it: its requests still in flight are
/// cancelled upstream.
#[derive(Debug)]
pub struct Port {
    id: PortId,
    /// The surface this port's client came through, for the call metrics.
    path: PathCell,
    meters: Arc<dyn SessionObserver>,
    /// For the span of each request.
    app_id: String,
    hub: mpsc::UnboundedSender<HubCommand>,
    notifications: std::sync::Mutex<Option<mpsc::Receiver<RawMessage>>>,
    protocol_version: String,
    /// For `server/discover`, answered from the session's handshake.
    connection: std::sync::Weak<Connection>,
}

impl Port {
    /// This port's number within its session (for logs).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The surface this port's client came through: [`CallPath::Proxy`] unless
    /// [`Port::set_call_path`] said otherwise.
    pub fn call_path(&self) -> CallPath {
        self.path.get()
    }

    /// Names the surface this port's client came through (`/mcp` ports are
    /// [`CallPath::Mcp`]); its `tools/call`s are counted under that path from now on.
    pub fn set_call_path(&self, path: CallPath) {
        self.path.set(path);
    }

    /// The protocol version agreed with this port's client.
    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    /// The session-wide notifications for this port (list changes, `resources/updated`,
    /// logging); available once.
    pub fn take_notifications(&self) -> Option<mpsc::Receiver<RawMessage>> {
        self.notifications
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Sends one message from the client.
    ///
    /// `ping` is answered by the gateway, and a second `initialize` is refused (the port was
    /// opened with the first). Every other request goes upstream, bounded by the app's request
    /// timeout whether or not anyone still waits for it: when it runs out the request is
    /// cancelled upstream and its stream ends with an error response.
    ///
    /// # Errors
    /// [`PortError::SessionGone`] when the upstream session has ended, and
    /// [`PortError::Invalid`] for a notification or response that is not valid JSON-RPC.
    pub async fn send(&self, message: RawMessage) -> Result<PortReply, PortError> {
        if let Err(err) = message.check_envelope() {
            return match message.kind() {
                MessageKind::Request => Ok(PortReply::Response(RawMessage::error_response(
                    message.id(),
                    -32600,
                    &err.to_string(),
                ))),
                _ => Err(PortError::Invalid(err)),
            };
        }
        match message.kind() {
            MessageKind::Request => self.request(message).await,
            MessageKind::Notification => {
                self.hub
                    .send(HubCommand::PortNotification {
                        port: self.id,
                        message,
                    })
                    .map_err(|_| PortError::SessionGone)?;
                Ok(PortReply::Accepted)
            }
            MessageKind::Response | MessageKind::Error => {
                self.hub
                    .send(HubCommand::PortResponse {
                        port: self.id,
                        message,
                    })
                    .map_err(|_| PortError::SessionGone)?;
                Ok(PortReply::Accepted)
            }
        }
    }

    async fn request(&self, mut message: RawMessage) -> Result<PortReply, PortError> {
        let id = message
            .id()
            .map(ToOwned::to_owned)
            .unwrap_or_else(|| raw_json("null".to_owned()));
        match message.method().as_deref() {
            Some("initialize") => {
                return Ok(PortReply::Response(RawMessage::error_response(
                    Some(&id),
                    -32600,
                    "this session is already initialized",
                )));
            }
            Some("server/discover") => {
                let connection = self.connection.upgrade().ok_or(PortError::SessionGone)?;
                let result = connection.discover_result().await?;
                return Ok(PortReply::Response(RawMessage::response(&id, &result)));
            }
            Some("ping") => {
                return Ok(PortReply::Response(RawMessage::response(
                    &id,
                    &raw_json("{}".to_owned()),
                )));
            }
            _ => {}
        }
        // The upstream leg of the client's request, a child of the caller's span; it lasts
        // until the response (the stream keeps it).
        let span = tracing::info_span!(
            "mcp_upstream_request",
            app = %self.app_id,
            method = message.method().as_deref().unwrap_or_default(),
            path = self.path.get().as_str(),
        );
        crate::trace_context::inject_raw(&mut message, &span);
        let (stream, stream_rx) = mpsc::unbounded_channel();
        let (accepted, accepted_rx) = oneshot::channel();
        let call = begin_call(
            self.meters.as_ref(),
            &message,
            self.path.get(),
            Some(self.id),
        );
        self.hub
            .send(HubCommand::PortRequest {
                port: self.id,
                message,
                stream,
                accepted,
                call,
            })
            .map_err(|_| PortError::SessionGone)?;
        match accepted_rx.await.map_err(|_| PortError::SessionGone)? {
            Ok(key) => Ok(PortReply::Stream(ResponseStream {
                rx: stream_rx,
                key,
                hub: self.hub.clone(),
                done: false,
                _span: span,
            })),
            Err(response) => Ok(PortReply::Response(response)),
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        let _ = self.hub.send(HubCommand::ClosePort {
            port: self.id,
            reason: "the client's session ended".to_owned(),
        });
    }
}

/// What comes back for one request: zero or more notifications and server requests, then
/// its response.
///
/// Dropping it before the response (the client went away) cancels the request upstream at
/// once.
#[derive(Debug)]
pub struct ResponseStream {
    rx: mpsc::UnboundedReceiver<RawMessage>,
    key: Key,
    hub: mpsc::UnboundedSender<HubCommand>,
    done: bool,
    /// The request's span, closed with the stream.
    _span: tracing::Span,
}

impl ResponseStream {
    /// The next message for this request, or `None` after its response. When the request
    /// timeout runs out first, the request is cancelled upstream and an error response is the
    /// last message.
    pub async fn next(&mut self) -> Option<RawMessage> {
        if self.done {
            return None;
        }
        match self.rx.recv().await {
            Some(message) => {
                if message.is_response() {
                    self.done = true;
                }
                Some(message)
            }
            None => {
                self.done = true;
                None
            }
        }
    }
}

/// The same messages as [`ResponseStream::next`], for stream combinators.
impl futures::Stream for ResponseStream {
    type Item = RawMessage;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<RawMessage>> {
        if self.done {
            return std::task::Poll::Ready(None);
        }
        let polled = self.rx.poll_recv(cx);
        if let std::task::Poll::Ready(message) = &polled {
            match message {
                Some(message) if !message.is_response() => {}
                _ => self.done = true,
            }
        }
        polled
    }
}

impl Drop for ResponseStream {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.hub.send(HubCommand::Abandon {
                key: self.key.clone(),
                reason: "the client went away".to_owned(),
            });
        }
    }
}
