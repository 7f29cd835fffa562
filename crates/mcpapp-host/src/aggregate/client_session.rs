//! One legacy `/mcp` client session: a port on every running app's upstream session, opened
//! with the client's own `initialize` (so each app routes server requests by what this client
//! declared), and one event stream that merges what the apps send the session.
//!
//! Ports open when the session starts and whenever an app (re)enters Running; an app that
//! restarts ends its port, and the new one gets the session's state again: `initialized`,
//! the logging level and the resource subscriptions the client made on that app. The client
//! never has to notice (unlike `/apps/mcp/{appId}`, where a restart ends the session: here
//! one app's restart must not cost the client every other app).
//!
//! Server requests of different apps could carry the same id, so they reach the client under
//! ids of this session's own (`mcpapp-N`), and the client's answers are routed back by them.
//! List changes are told from the supervisor's events (every app's tools, resources and
//! prompts, and apps coming and going), not relayed from the ports, so one change is one
//! notification.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use mcpapp_bridge::ToolRegistry;
use mcpapp_session::{CallPath, MessageKind, Port, PortError, PortReply, RawMessage, raw_string};
use mcpapp_supervisor::{AppHandle, Supervisor};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{Instrument, debug, info};

use super::changes::next_changes;
use super::names::{Scope, rewrite_uri, running_apps, scope_of};
use crate::streamable_http::replay::EventLog;
use crate::streamable_http::session_store::{Activity, Session};

/// The MCP Apps extension's id in capabilities.
pub(crate) const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The one group all `/mcp` sessions count against.
pub(crate) const GROUP: &str = "/mcp";
/// Notifications waiting for the client's GET stream; past this the relays wait (and the
/// ports' own backlogs take over).
const EVENT_BACKLOG: usize = 1024;
/// Server requests awaiting the client's answer; the oldest is forgotten past this.
const PENDING_SERVER_REQUESTS: usize = 1024;

/// The ids of server requests sent to the client, and where their answers go.
#[derive(Default)]
struct ServerRequests {
    next: u64,
    pending: VecDeque<(String, String, Box<RawValue>)>,
}

impl ServerRequests {
    fn outward(&mut self, app_id: &str, id: &RawValue) -> Box<RawValue> {
        self.next += 1;
        let outward = format!("mcpapp-{}", self.next);
        if self.pending.len() >= PENDING_SERVER_REQUESTS {
            self.pending.pop_front();
        }
        self.pending
            .push_back((outward.clone(), app_id.to_owned(), id.to_owned()));
        raw_string(&outward)
    }

    fn inward(&mut self, id: &RawValue) -> Option<(String, Box<RawValue>)> {
        let id: String = serde_json::from_str(id.get()).ok()?;
        let index = self.pending.iter().position(|(o, _, _)| *o == id)?;
        self.pending.remove(index).map(|(_, app, id)| (app, id))
    }
}

/// A legacy client's session on `/mcp`.
pub(crate) struct ClientSession {
    key: String,
    initialize: RawMessage,
    protocol_version: String,
    /// Whether the client declared the MCP Apps extension.
    ui: bool,
    supervisor: Supervisor,
    ports: Mutex<HashMap<String, Arc<Port>>>,
    /// Serialises opening ports, so two requests never open two for one app.
    opening: tokio::sync::Mutex<()>,
    out: mpsc::Sender<RawMessage>,
    pub(crate) events: Arc<tokio::sync::Mutex<EventLog>>,
    activity: Arc<Activity>,
    server_requests: Mutex<ServerRequests>,
    /// The app each request of the client in flight went to, by the request's id (as JSON
    /// text), for its cancellation.
    in_flight: Mutex<HashMap<String, String>>,
    /// The params of the client's last `logging/setLevel`.
    log_level: Mutex<Option<Box<RawValue>>>,
    /// The client's resource subscriptions: (app id, the app's URI).
    subscriptions: Mutex<BTreeSet<(String, String)>>,
    initialized: AtomicBool,
    next_internal: AtomicU64,
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every map here stays consistent whatever panicked while holding it.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Session for ClientSession {
    fn group(&self) -> &str {
        GROUP
    }

    fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    fn describe(&self) -> String {
        format!("/mcp session {}", &self.key[..8.min(self.key.len())])
    }
}

impl ClientSession {
    /// A session for the client whose `initialize` this is; it starts opening ports to
    /// every running app and following the apps' changes at once.
    pub(crate) fn start(
        key: String,
        initialize: RawMessage,
        protocol_version: String,
        supervisor: Supervisor,
        registry: &ToolRegistry,
    ) -> Arc<Self> {
        let ui = initialize
            .path(&["params", "capabilities", "extensions", UI_EXTENSION])
            .is_some();
        let (out, out_rx) = mpsc::channel(EVENT_BACKLOG);
        let stop = CancellationToken::new();
        let session = Arc::new(Self {
            key,
            initialize,
            protocol_version,
            ui,
            supervisor,
            ports: Mutex::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
            out,
            events: Arc::new(tokio::sync::Mutex::new(EventLog::new(Some(out_rx)))),
            activity: Activity::new(),
            server_requests: Mutex::new(ServerRequests::default()),
            in_flight: Mutex::new(HashMap::new()),
            log_level: Mutex::new(None),
            subscriptions: Mutex::new(BTreeSet::new()),
            initialized: AtomicBool::new(false),
            next_internal: AtomicU64::new(0),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        });
        session.follow(registry);
        session
    }

    pub(crate) fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    pub(crate) fn ui(&self) -> bool {
        self.ui
    }

    /// An id for a request the gateway makes on the client's behalf (listing every page of
    /// an app), distinct from any the client is likely to use.
    pub(crate) fn internal_id(&self) -> Box<RawValue> {
        let n = self.next_internal.fetch_add(1, Ordering::Relaxed);
        raw_string(&format!("io.mcpapp/{n}"))
    }

    /// Follows the supervisor: opens ports to apps that start, and tells the client when
    /// the lists change. Ends with the session.
    fn follow(self: &Arc<Self>, registry: &ToolRegistry) {
        let weak = Arc::downgrade(self);
        let mut events = self.supervisor.subscribe();
        let mut registry = registry.subscribe();
        let stop = self.stop.clone();
        let follow = async move {
            // The apps running now, before the first change.
            if let Some(session) = weak.upgrade() {
                for (app, _) in running_apps(&session.supervisor) {
                    if let Err(err) = session.port(&app).await {
                        debug!(app = %app.id(), "no port for a new /mcp session: {err}");
                    }
                }
            }
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => break,
                    next = next_changes(&mut events, &mut registry) => next,
                };
                let Some((changes, started)) = next else {
                    break;
                };
                let Some(session) = weak.upgrade() else { break };
                for app_id in started {
                    if let Some(app) = session.supervisor.get(&app_id)
                        && let Err(err) = session.port(&app).await
                    {
                        debug!(app = %app_id, "could not reopen an /mcp session's port: {err}");
                    }
                }
                if changes.any() && session.initialized.load(Ordering::Acquire) {
                    for method in changes.methods() {
                        session.tell(RawMessage::notification(method, None)).await;
                    }
                }
            }
        };
        tokio::spawn(follow.instrument(tracing::debug_span!(parent: None, "mcp_session")));
    }

    /// Queues a message for the client's event stream.
    async fn tell(&self, message: RawMessage) {
        if self.out.send(message).await.is_err() {
            debug!("an /mcp session's event stream is gone");
        }
    }

    /// This session's port to `app`, opened (and brought up to the session's state) when
    /// there is none or the last one ended.
    pub(crate) async fn port(self: &Arc<Self>, app: &AppHandle) -> Result<Arc<Port>, PortError> {
        if let Some(port) = lock(&self.ports).get(app.id()) {
            return Ok(port.clone());
        }
        let _opening = self.opening.lock().await;
        if let Some(port) = lock(&self.ports).get(app.id()) {
            return Ok(port.clone());
        }
        let (port, _answer) = app.open_port(&self.initialize).await?;
        port.set_call_path(CallPath::Mcp);
        let port = Arc::new(port);
        lock(&self.ports).insert(app.id().to_owned(), port.clone());
        self.relay(app, &port);
        self.restore(app, &port).await;
        debug!(app = %app.id(), port = port.id(), "an /mcp session joined an app");
        Ok(port)
    }

    /// Forgets `port` of `app` (its session ended), unless a newer one took its place.
    fn forget(&self, app_id: &str, port: &Arc<Port>) {
        let mut ports = lock(&self.ports);
        if ports.get(app_id).is_some_and(|p| Arc::ptr_eq(p, port)) {
            ports.remove(app_id);
        }
    }

    /// Sends `message` to `app` through this session's port, opening a new port once when
    /// the app restarted since.
    pub(crate) async fn send(
        self: &Arc<Self>,
        app: &AppHandle,
        message: RawMessage,
    ) -> Result<PortReply, PortError> {
        let port = self.port(app).await?;
        match port.send(message.clone()).await {
            Err(PortError::SessionGone) => {
                self.forget(app.id(), &port);
                self.port(app).await?.send(message).await
            }
            other => other,
        }
    }

    /// Passes what the app sends the session to the client: notifications (URIs in the
    /// client's namespace; list changes are told from events instead) and server requests
    /// (under this session's ids).
    fn relay(self: &Arc<Self>, app: &AppHandle, port: &Arc<Port>) {
        let Some(mut notifications) = port.take_notifications() else {
            return;
        };
        let weak: Weak<Self> = Arc::downgrade(self);
        let scope = scope_of(app);
        let port = Arc::downgrade(port);
        let stop = self.stop.clone();
        let relay = async move {
            loop {
                let message = tokio::select! {
                    () = stop.cancelled() => break,
                    message = notifications.recv() => message,
                };
                let Some(message) = message else { break };
                let Some(session) = weak.upgrade() else { break };
                if let Some(message) = session.outward(&scope, message) {
                    session.tell(message).await;
                }
            }
            if let (Some(session), Some(port)) = (weak.upgrade(), port.upgrade()) {
                session.forget(scope.id(), &port);
                debug!(app = %scope.id(), "an /mcp session's port to an app ended");
            }
        };
        tokio::spawn(relay.instrument(tracing::debug_span!(parent: None, "mcp_session_relay")));
    }

    /// Brings a new port up to the session's state.
    async fn restore(self: &Arc<Self>, app: &AppHandle, port: &Port) {
        if self.initialized.load(Ordering::Acquire) {
            let _ = port
                .send(RawMessage::notification("notifications/initialized", None))
                .await;
        }
        let level = lock(&self.log_level).clone();
        if let Some(params) = level {
            self.ask_quietly(port, "logging/setLevel", &params).await;
        }
        let uris: Vec<String> = lock(&self.subscriptions)
            .iter()
            .filter(|(app_id, _)| app_id == app.id())
            .map(|(_, uri)| uri.clone())
            .collect();
        for uri in uris {
            let params = serde_json::json!({ "uri": uri });
            if let Ok(params) = serde_json::value::to_raw_value(&params) {
                self.ask_quietly(port, "resources/subscribe", &params).await;
            }
        }
    }

    /// Sends a request of the gateway's own and waits for (and drops) its answer.
    async fn ask_quietly(&self, port: &Port, method: &str, params: &RawValue) {
        let request = request(&self.internal_id(), method, Some(params));
        if let Ok(PortReply::Stream(mut stream)) = port.send(request).await {
            while let Some(message) = stream.next().await {
                if message.is_response() {
                    break;
                }
            }
        }
    }

    /// A message from `scope`'s app to the client, as the client must see it, or nothing.
    pub(crate) fn outward(&self, scope: &Scope, mut message: RawMessage) -> Option<RawMessage> {
        match message.kind() {
            MessageKind::Request => {
                let id = message.id()?.to_owned();
                let outward = lock(&self.server_requests).outward(scope.id(), &id);
                message.set_id(&outward);
                Some(message)
            }
            MessageKind::Notification => match message.method().as_deref() {
                Some(
                    "notifications/tools/list_changed"
                    | "notifications/resources/list_changed"
                    | "notifications/prompts/list_changed",
                ) => None,
                Some("notifications/resources/updated") => {
                    rewrite_uri(&mut message, &["params", "uri"], scope);
                    Some(message)
                }
                _ => Some(message),
            },
            MessageKind::Response | MessageKind::Error => Some(message),
        }
    }

    /// Routes the client's answer to a server request back to the app that asked.
    pub(crate) async fn answer(self: &Arc<Self>, mut message: RawMessage) {
        let Some(id) = message.id().map(ToOwned::to_owned) else {
            return;
        };
        let Some((app_id, original)) = lock(&self.server_requests).inward(&id) else {
            debug!("an /mcp client answered a server request this session does not know");
            return;
        };
        message.set_id(&original);
        let Some(port) = lock(&self.ports).get(&app_id).cloned() else {
            debug!(app = %app_id, "an answer to a server request came after the app's session ended");
            return;
        };
        let _ = port.send(message).await;
    }

    /// A notification from the client: `initialized` and `roots/list_changed` go to every
    /// app, a cancellation to the app that has the request.
    pub(crate) async fn notify(self: &Arc<Self>, message: RawMessage) {
        let method = message.method().unwrap_or_default();
        if method == "notifications/initialized" {
            self.initialized.store(true, Ordering::Release);
        }
        let targets: Vec<Arc<Port>> = if method == "notifications/cancelled" {
            let request = message
                .path(&["params", "requestId"])
                .map(|id| id.get().to_owned());
            let app = request.and_then(|id| lock(&self.in_flight).get(&id).cloned());
            app.and_then(|app| lock(&self.ports).get(&app).cloned())
                .into_iter()
                .collect()
        } else {
            lock(&self.ports).values().cloned().collect()
        };
        for port in targets {
            let _ = port.send(message.clone()).await;
        }
    }

    /// `logging/setLevel`: every app's port gets it, and so will ports opened later.
    pub(crate) async fn set_log_level(self: &Arc<Self>, params: Option<Box<RawValue>>) {
        // An empty object: the apps answer what is wrong with it.
        let params = params.unwrap_or_else(|| {
            RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| raw_string(""))
        });
        *lock(&self.log_level) = Some(params.clone());
        let ports: Vec<Arc<Port>> = lock(&self.ports).values().cloned().collect();
        let asks = ports
            .iter()
            .map(|port| self.ask_quietly(port, "logging/setLevel", &params));
        futures::future::join_all(asks).await;
    }

    /// Remembers (or forgets) a resource subscription, to restore it on a new port.
    pub(crate) fn note_subscription(&self, app_id: &str, uri: &str, subscribed: bool) {
        let key = (app_id.to_owned(), uri.to_owned());
        let mut subscriptions = lock(&self.subscriptions);
        if subscribed {
            subscriptions.insert(key);
        } else {
            subscriptions.remove(&key);
        }
    }

    /// Marks a client request as in flight at `app_id` until the guard is dropped.
    pub(crate) fn in_flight(self: &Arc<Self>, id: &RawValue, app_id: &str) -> InFlight {
        let id = id.get().to_owned();
        lock(&self.in_flight).insert(id.clone(), app_id.to_owned());
        InFlight {
            session: Arc::downgrade(self),
            id,
        }
    }

    /// Closes the session's ports (the client said goodbye or the session expired).
    pub(crate) fn close(&self) {
        self.stop.cancel();
        let ports: Vec<Arc<Port>> = lock(&self.ports).drain().map(|(_, p)| p).collect();
        drop(ports);
        info!(session = %self.describe(), "an /mcp session ended");
    }
}

/// A client request in flight at one app; dropped when its reply has ended.
pub(crate) struct InFlight {
    session: Weak<ClientSession>,
    id: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(session) = self.session.upgrade() {
            lock(&session.in_flight).remove(&self.id);
        }
    }
}

/// A request message.
pub(crate) fn request(id: &RawValue, method: &str, params: Option<&RawValue>) -> RawMessage {
    let mut text = format!(
        r#"{{"jsonrpc":"2.0","id":{},"method":{}"#,
        id.get(),
        raw_string(method).get()
    );
    if let Some(params) = params {
        text.push_str(r#","params":"#);
        text.push_str(params.get());
    }
    text.push('}');
    // Built from valid JSON pieces.
    RawMessage::parse(text).unwrap_or_else(|_| RawMessage::notification(method, params))
}
