//! `/mcp`: one MCP server for external clients (Claude Desktop, MCP Inspector, Codex) with
//! every model-visible app tool under its registered name (`grocery.get_stores`), calls routed
//! through the bridge, and a notice whenever the set changes, in both protocol eras.
//!
//! This surface is the gateway's own, so rmcp's typed server is the right tool here (unlike
//! the per-app proxy, which must pass messages through untouched). rmcp decides the era per
//! POST: `initialize` opens a legacy (2025-11-25 and earlier) session, and a request carrying
//! the 2026-07-28 `_meta` is served on its own, with a fresh [`AggregateServer`] from the
//! factory. So the handler keeps nothing per client: what must outlive one request (the open
//! `subscriptions/listen` streams) lives in [`Listens`], shared by every instance.
//!
//! Tool list changes reach legacy sessions as `notifications/tools/list_changed` on their
//! session, and modern clients on each of their listen streams, which the fan-out task
//! feeds from the registry. A listen lasts until its client closes it, its stream stops
//! taking notifications, or the endpoint goes away; in the last case it ends with its final
//! result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcpapp_bridge::{ToolContext, ToolRegistry};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool,
};
use rmcp::service::{
    NotificationContext, RequestContext, RoleServer, SubscriptionContext, SubscriptionSink,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{Instrument, debug};

/// How long one listen stream may take to accept a change notification. A client that stops
/// reading would otherwise hold up every other listen's next notification; past this its
/// listen is ended (it may listen again) and the others go on.
const DELIVERY_PATIENCE: Duration = Duration::from_secs(10);

/// The MCP server of one legacy `/mcp` session, or of one modern request.
#[derive(Clone)]
struct AggregateServer {
    registry: ToolRegistry,
    listens: Arc<Listens>,
    /// The registry version when this instance accepted a listen, just before rmcp sends the
    /// acknowledgement. A change between then and the listen's registration would reach no
    /// sink, so `listen` compares against it. One value per instance is enough: a listen only
    /// comes as a modern request, and each of those gets an instance of its own.
    accepted_at: Arc<AtomicU64>,
}

impl ServerHandler for AggregateServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcpapp-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Tools of the MCP Apps this gateway runs, each named with its app's prefix.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .registry
            .list()
            .into_iter()
            .map(|entry| {
                let schema = match entry.tool.input_schema() {
                    serde_json::Value::Object(object) => object.clone(),
                    _ => serde_json::Map::new(),
                };
                Tool::new(
                    entry.name.clone(),
                    entry.tool.description().to_owned(),
                    Arc::new(schema),
                )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(entry) = self.registry.resolve(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", request.name),
                None,
            ));
        };
        let arguments = request.arguments.map_or_else(
            || "{}".to_owned(),
            |args| serde_json::Value::Object(args).to_string(),
        );
        // The chat session a view's call belongs to, not an MCP session: modern requests
        // have none, and this works the same in both eras.
        let session_id = context
            .meta
            .get("sessionId")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let mut ctx = ToolContext::new().with_cancel(context.ct.clone());
        if let Some(session_id) = session_id {
            ctx = ctx.with_session_id(session_id);
        }
        let output = entry.tool.invoke(arguments, ctx).await;
        let mut result = if output.is_error {
            CallToolResult::error(vec![ContentBlock::text(output.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(output.text)])
        };
        result.structured_content = output.structured;
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Only legacy sessions are initialized. Tell this one whenever the tool set changes,
        // until it goes away or the endpoint does.
        let mut changes = self.registry.subscribe();
        let closing = self.listens.closing.clone();
        let peer = context.peer;
        tokio::spawn(
            async move {
                loop {
                    tokio::select! {
                        () = closing.cancelled() => break,
                        changed = changes.changed() => if changed.is_err() { break },
                    }
                    if peer.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                    debug!("told an /mcp session that the tool list changed");
                }
            }
            .in_current_span(),
        );
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.accepted_at
            .store(self.registry.version(), Ordering::SeqCst);
        // Tool list changes are all /mcp has to tell; rmcp acknowledges the intersection with
        // what was asked, so the acknowledgement holds exactly what will be sent.
        let offered = SubscriptionFilter::builder().tools_list_changed().build();
        Some(requested.intersection(&offered))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        if context.accepted().tools_list_changed != Some(true) {
            // Nothing was accepted, so nothing will come: hold the stream as asked.
            tokio::select! {
                () = context.cancelled() => {}
                () = self.listens.closing.cancelled() => {}
            }
            return Ok(());
        }
        let registration = self.listens.open(context.sink().clone());
        self.listens.start_fanout(&self.registry);
        if self.registry.version() != self.accepted_at.load(Ordering::SeqCst) {
            // The set changed while the acknowledgement was on its way.
            self.listens
                .deliver(vec![(registration.key, context.sink().clone())])
                .await;
        }
        tokio::select! {
            () = context.cancelled() => debug!("an /mcp client closed its listen"),
            () = registration.given_up.cancelled() => {}
            () = self.listens.closing.cancelled() => debug!("ending an /mcp listen: the endpoint closes"),
        }
        // Dropping the registration removes the sink; `Ok` sends the final listen result
        // where the stream still takes it.
        drop(registration);
        Ok(())
    }
}

/// The open `subscriptions/listen` streams of one `/mcp` endpoint, shared by every server
/// instance rmcp makes for it.
struct Listens {
    sinks: Mutex<HashMap<u64, Listen>>,
    next_key: AtomicU64,
    fanout_started: AtomicBool,
    /// Cancelled when the endpoint is dropped: listens end with their final result, and the
    /// fan-out and legacy notifier tasks stop.
    closing: CancellationToken,
}

/// One open listen.
struct Listen {
    sink: SubscriptionSink,
    /// Cancelled when its sink failed or was too slow, to end the listen.
    given_up: CancellationToken,
}

/// A listen's place in [`Listens`], removed when dropped, however the listen ends.
struct Registration {
    listens: Arc<Listens>,
    key: u64,
    given_up: CancellationToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.listens.remove(self.key, "it ended");
    }
}

impl Listens {
    fn new(closing: CancellationToken) -> Self {
        Self {
            sinks: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(0),
            fanout_started: AtomicBool::new(false),
            closing,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Listen>> {
        // The map stays consistent whatever panicked while holding it.
        self.sinks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keys by our own counter: listen ids are the clients' request ids, which only one
    /// client keeps unique.
    fn open(self: &Arc<Self>, sink: SubscriptionSink) -> Registration {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let given_up = CancellationToken::new();
        let open = {
            let mut sinks = self.lock();
            sinks.insert(
                key,
                Listen {
                    sink,
                    given_up: given_up.clone(),
                },
            );
            sinks.len()
        };
        debug!(
            listens = open,
            "an /mcp client listens for tool list changes"
        );
        Registration {
            listens: self.clone(),
            key,
            given_up,
        }
    }

    /// Removes a listen (once: the later call finds nothing) and ends it.
    fn remove(&self, key: u64, why: &str) {
        let (removed, open) = {
            let mut sinks = self.lock();
            (sinks.remove(&key), sinks.len())
        };
        if let Some(listen) = removed {
            listen.given_up.cancel();
            debug!(listens = open, "an /mcp listen ended: {why}");
        }
    }

    /// Starts the task that tells every listen of registry changes, once; it is started by
    /// the first listen (inside the runtime, which building the router need not be).
    fn start_fanout(self: &Arc<Self>, registry: &ToolRegistry) {
        if self.fanout_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let listens = self.clone();
        let mut changes = registry.subscribe();
        tokio::spawn(
            async move {
                loop {
                    tokio::select! {
                        () = listens.closing.cancelled() => break,
                        changed = changes.changed() => if changed.is_err() { break },
                    }
                    let targets = listens
                        .lock()
                        .iter()
                        .map(|(key, listen)| (*key, listen.sink.clone()))
                        .collect();
                    listens.deliver(targets).await;
                }
            }
            .instrument(tracing::debug_span!(parent: None, "mcp_listen_fanout")),
        );
    }

    /// Sends `notifications/tools/list_changed` to each target at once, giving up on those
    /// that fail or take longer than [`DELIVERY_PATIENCE`]. Changes during a round collapse
    /// into one more round (the registry's watch keeps only the latest).
    async fn deliver(&self, targets: Vec<(u64, SubscriptionSink)>) {
        let outcomes =
            futures::future::join_all(targets.into_iter().map(|(key, sink)| async move {
                let outcome =
                    tokio::time::timeout(DELIVERY_PATIENCE, sink.notify_tool_list_changed()).await;
                (key, outcome)
            }))
            .await;
        for (key, outcome) in outcomes {
            match outcome {
                Ok(Ok(())) => debug!("told an /mcp listen that the tool list changed"),
                Ok(Err(err)) => self.remove(key, &format!("its stream failed ({err})")),
                Err(_) => self.remove(key, "it took no notification in time"),
            }
        }
    }
}

/// Owned by the service factory only, so it is dropped with the endpoint (not with a
/// request's server instance) and then ends the listens.
struct Endpoint {
    registry: ToolRegistry,
    listens: Arc<Listens>,
    _closing: DropGuard,
}

impl Endpoint {
    /// A server instance: one per legacy session, or per modern request.
    fn server(&self) -> AggregateServer {
        AggregateServer {
            registry: self.registry.clone(),
            listens: self.listens.clone(),
            accepted_at: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// The tower service behind `/mcp`.
pub(crate) fn service(
    registry: ToolRegistry,
    max_body_bytes: usize,
    shutdown: &CancellationToken,
) -> StreamableHttpService<impl ServerHandler + Clone, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked by the gateway's own middleware for every route.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(max_body_bytes);
    // Closing when the host shuts down ends open listens with their final result.
    let closing = shutdown.child_token();
    let endpoint = Endpoint {
        registry,
        listens: Arc::new(Listens::new(closing.clone())),
        _closing: closing.drop_guard(),
    };
    // A method call, so the closure owns the whole endpoint (guard included), not just the
    // fields it reads.
    StreamableHttpService::new(
        move || Ok(endpoint.server()),
        LocalSessionManager::default().into(),
        config,
    )
}
