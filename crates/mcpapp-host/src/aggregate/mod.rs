//! `/mcp`: one MCP server for external clients (desktop assistants, IDEs, MCP Apps hosts,
//! the MCP Inspector) with every app behind it, in both protocol eras.
//!
//! It serves what the apps serve, merged into one namespace (`names.rs`): tools under the
//! names the agent's registry gave them, with every field the app wrote and their UI resources
//! readable here; resources, templates and prompts of every app; completions; logging. A
//! routed request (`tools/call`, `prompts/get`, `resources/read`, subscriptions, completions)
//! goes to the app it belongs to (`route.rs`) and its reply comes back as the app sent it:
//! results unchanged (the model-text conversion is the agent's, not a client's), progress and
//! log messages relayed, server requests (elicitation, sampling, roots) forwarded to this
//! client when it declared the capability, and its answers routed back. Lists are merged from
//! the apps' own (`lists.rs`). The MCP Apps extension (`io.modelcontextprotocol/ui`) decides
//! whether a client sees app-only tools.
//!
//! Like `/apps/mcp/{appId}`, and unlike a typed MCP server, every message passes as bytes:
//! only what routing needs is read or rewritten. A legacy client's session
//! (`client_session.rs`) has a port on every running app's upstream session, opened with the
//! client's own `initialize`; a 2026-07-28 request reaches apps through ports of its own
//! (`link.rs`), and `subscriptions/listen` merges list changes and resource updates
//! (`listen.rs`). The HTTP transport is the proxy's (`streamable_http/`).

// The helpers below return the HTTP response to send instead as their error; it is built once
// per refused request, so its size on the stack does not matter.
#![allow(clippy::result_large_err)]

mod changes;
mod client_session;
mod link;
mod listen;
mod lists;
mod names;
mod route;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use mcpapp_bridge::{ToolContext, ToolEntry, ToolRegistry};
use mcpapp_manifest::Era;
use mcpapp_session::{
    MODERN_PROTOCOL_VERSION, MessageKind, PORT_PROTOCOL_VERSIONS, PortError, PortReply, RawMessage,
    ResponseStream, raw_string,
};
use mcpapp_supervisor::Supervisor;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use self::client_session::{ClientSession, GROUP, InFlight};
use self::link::{Channel, Link};
use self::lists::ListKind;
use self::names::Scope;
use self::route::{Plan, Target};
use crate::streamable_http::session_store::{Busy, Session, Sessions};
use crate::streamable_http::{
    SESSION_HEADER, check_version, event_stream, final_reply, header_text, json_reply, modern,
    read_message, require_event_stream, rpc_error, stream_reply,
};

/// `/mcp`: the apps it serves, the agent's registry that names their tools, and what it
/// keeps between requests.
pub(crate) struct Aggregate {
    supervisor: Supervisor,
    registry: ToolRegistry,
    sessions: Sessions<ClientSession>,
    listens: Arc<listen::Listens>,
    /// Cancelled when the host shuts down: listens end with their final result.
    shutdown: CancellationToken,
}

impl Aggregate {
    /// `/mcp` over `supervisor`'s apps; its sessions count against `max_sessions` (the
    /// proxy's cap per app: `/mcp` counts as one more app) and close after `idle`.
    pub(crate) fn new(
        supervisor: Supervisor,
        registry: ToolRegistry,
        max_sessions: usize,
        idle: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            supervisor,
            registry,
            sessions: Sessions::new(max_sessions, idle),
            listens: Arc::default(),
            shutdown,
        }
    }
}

/// The capabilities `/mcp` declares: all it serves for whatever apps run now or later.
fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": true },
        "resources": { "subscribe": true, "listChanged": true },
        "prompts": { "listChanged": true },
        "completions": {},
        "logging": {},
    })
}

const INSTRUCTIONS: &str = "The tools, resources and prompts of the MCP Apps this gateway runs; each app's names carry its prefix and its URIs its namespace.";

fn server_info() -> Value {
    json!({
        "name": "mcpapp-gateway",
        "title": "mcpapp",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

fn raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| raw_string(""))
}

fn null() -> Box<RawValue> {
    raw(&Value::Null)
}

/// `POST /mcp`.
pub(crate) async fn post(
    State(state): State<Arc<Aggregate>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let message = match read_message(&headers, &body) {
        Ok(message) => message,
        Err(response) => return response,
    };
    // The era first: a 2026-07-28 request is modern whatever its method (its `initialize`,
    // `ping` and subscriptions are removed methods, refused by the checks).
    if modern::is_modern(&headers, &message) {
        if let Err(response) = modern::check(&headers, &message) {
            return response;
        }
        if message.kind() != MessageKind::Request {
            // The 2026-07-28 transport defines no client notifications or responses.
            return StatusCode::ACCEPTED.into_response();
        }
        let link = Link::Request(Arc::new(message.clone()));
        return request(&state, link, message, ()).await;
    }
    if message.kind() == MessageKind::Request && message.method().as_deref() == Some("initialize") {
        return initialize(&state, &message);
    }
    let id = message.id().map(ToOwned::to_owned);
    let (session, busy) = match session_of(&state, &headers, id.as_deref()) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Err(response) = check_version(&headers, session.protocol_version(), id.as_deref()) {
        return response;
    }
    match message.kind() {
        MessageKind::Request => request(&state, Link::Session(session), message, busy).await,
        MessageKind::Notification => {
            session.notify(message).await;
            StatusCode::ACCEPTED.into_response()
        }
        MessageKind::Response | MessageKind::Error => {
            session.answer(message).await;
            StatusCode::ACCEPTED.into_response()
        }
    }
}

/// A new legacy session, answered by the gateway in the version agreed with the client.
fn initialize(state: &Aggregate, message: &RawMessage) -> Response {
    let id = message.id().map_or_else(null, ToOwned::to_owned);
    let requested = route::text_at(message, &["params", "protocolVersion"]);
    let version = requested
        .filter(|v| PORT_PROTOCOL_VERSIONS.contains(&v.as_str()))
        .unwrap_or_else(|| PORT_PROTOCOL_VERSIONS[PORT_PROTOCOL_VERSIONS.len() - 1].to_owned());
    let key = uuid::Uuid::new_v4().simple().to_string();
    let session = ClientSession::start(
        key.clone(),
        message.clone(),
        version.clone(),
        state.supervisor.clone(),
        &state.registry,
    );
    let described = session.describe();
    // The store keeps the session; a full store refuses it (and the refused one is dropped).
    match state.sessions.insert(key.clone(), session) {
        Ok(()) => {
            info!(session = %described, %version, "an /mcp session started");
            let result = json!({
                "protocolVersion": version,
                "capabilities": capabilities(),
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            });
            json_reply(RawMessage::response(&id, &raw(&result)), Some(&key))
        }
        Err(full) => rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(&id),
            -32002,
            &format!(
                "/mcp already has {} sessions, all busy (a request in flight or an event stream open): close one or try again later",
                full.max
            ),
        ),
    }
}

/// The session a request names, kept busy while the guard lives, or why there is none.
fn session_of(
    state: &Aggregate,
    headers: &HeaderMap,
    id: Option<&RawValue>,
) -> Result<(Arc<ClientSession>, Busy), Response> {
    let Some(key) = header_text(headers, &SESSION_HEADER) else {
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            "missing Mcp-Session-Id: send initialize first",
        ));
    };
    state.sessions.get(key, GROUP).ok_or_else(|| {
        rpc_error(
            StatusCode::NOT_FOUND,
            id,
            -32001,
            "unknown or expired session: send initialize again",
        )
    })
}

/// One request of either era; `guard` lives as long as its reply.
async fn request(
    state: &Aggregate,
    link: Link,
    message: RawMessage,
    guard: impl Send + 'static,
) -> Response {
    let era = link.era();
    let id = message.id().map_or_else(null, ToOwned::to_owned);
    let method = message.method().unwrap_or_default();
    let answer = |result: Value| final_reply(RawMessage::response(&id, &raw(&result)), era);
    let refuse =
        |code: i64, text: &str| final_reply(RawMessage::error_response(Some(&id), code, text), era);
    match (method.as_str(), era) {
        ("ping", _) => return answer(json!({})),
        ("initialize", _) => return refuse(-32600, "this session is already initialized"),
        ("server/discover", _) => return answer(discover()),
        ("logging/setLevel", Era::Legacy) => {
            if let Some(session) = link.session() {
                session
                    .set_log_level(message.member("params").map(ToOwned::to_owned))
                    .await;
            }
            return answer(json!({}));
        }
        ("subscriptions/listen", Era::Modern) => {
            return listen::listen(
                &state.supervisor,
                &state.registry,
                &state.listens,
                &state.shutdown,
                message,
            )
            .await;
        }
        _ => {}
    }
    if let Some(kind) = ListKind::of(&method) {
        let list = lists::list(&state.supervisor, &state.registry, &link, &message, kind).await;
        return final_reply(list, era);
    }
    match route::plan(&state.supervisor, &state.registry, link.ui(), &message) {
        Plan::Refuse(code, text) => refuse(code, &text),
        Plan::Gateway(entry) => answer(run_gateway_tool(&entry, &message).await),
        Plan::Forward(target) => forward(&link, target, guard, &method).await,
        Plan::Try(targets) => try_each(&link, targets, &method, era).await,
    }
}

/// The `server/discover` result.
fn discover() -> Value {
    let mut versions: Vec<&str> = PORT_PROTOCOL_VERSIONS.to_vec();
    versions.push(MODERN_PROTOCOL_VERSION);
    json!({
        "resultType": "complete",
        "supportedVersions": versions,
        "capabilities": capabilities(),
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": { "io.modelcontextprotocol/serverInfo": server_info() },
    })
}

/// Keeps what a forwarded request's reply needs alive: the caller's guard, the channel (a
/// modern request's own port) and its in-flight mark.
struct Exchange<G> {
    _guard: G,
    _channel: Channel,
    _in_flight: Option<InFlight>,
}

/// Sends a routed request to its app and replies with what comes back.
async fn forward(
    link: &Link,
    target: Target,
    guard: impl Send + 'static,
    method: &str,
) -> Response {
    let era = link.era();
    let Target {
        app,
        scope,
        message,
    } = target;
    let id = message.id().map_or_else(null, ToOwned::to_owned);
    let channel = match link.open(&app) {
        Ok(channel) => channel,
        Err(err) => return unavailable(&id, &err),
    };
    let session = link.session().cloned();
    if let Some(session) = &session
        && matches!(method, "resources/subscribe" | "resources/unsubscribe")
        && let Some(uri) = route::text_at(&message, &["params", "uri"])
    {
        session.note_subscription(app.id(), &uri, method == "resources/subscribe");
    }
    let in_flight = session.as_ref().map(|s| s.in_flight(&id, app.id()));
    let read = method == "resources/read";
    match channel.send(message).await {
        Ok(PortReply::Response(response)) => {
            final_reply(outward_final(&scope, read, response), era)
        }
        Ok(PortReply::Stream(stream)) => {
            let relayed = Relayed {
                stream,
                session,
                scope,
                read,
            };
            let exchange = Exchange {
                _guard: guard,
                _channel: channel,
                _in_flight: in_flight,
            };
            stream_reply(relayed, exchange, era).await
        }
        Ok(PortReply::Accepted) => StatusCode::ACCEPTED.into_response(),
        Err(err) => unavailable(&id, &err),
    }
}

fn unavailable(id: &RawValue, err: &PortError) -> Response {
    let text = match err {
        PortError::SessionGone => "the app restarted: send the request again".to_owned(),
        other => other.to_string(),
    };
    rpc_error(StatusCode::SERVICE_UNAVAILABLE, Some(id), -32002, &text)
}

/// Tries a request on each app in turn until one answers with a result (a URI no app
/// claims); the first app's error otherwise.
async fn try_each(link: &Link, targets: Vec<Target>, method: &str, era: Era) -> Response {
    let mut first_error: Option<RawMessage> = None;
    let id = targets
        .first()
        .and_then(|t| t.message.id().map(ToOwned::to_owned))
        .unwrap_or_else(null);
    for Target {
        app,
        scope,
        message,
    } in targets
    {
        let Ok(channel) = link.open(&app) else {
            continue;
        };
        let uri = route::text_at(&message, &["params", "uri"]);
        let response = match channel.send(message).await {
            Ok(PortReply::Response(response)) => Some(response),
            Ok(PortReply::Stream(mut stream)) => final_of(&mut stream).await,
            _ => None,
        };
        let Some(response) = response else { continue };
        if response.member("result").is_some() {
            if let (Some(session), Some(uri)) = (link.session(), uri)
                && matches!(method, "resources/subscribe" | "resources/unsubscribe")
            {
                session.note_subscription(app.id(), &uri, method == "resources/subscribe");
            }
            return final_reply(
                outward_final(&scope, method == "resources/read", response),
                era,
            );
        }
        first_error.get_or_insert(response);
    }
    final_reply(
        first_error.unwrap_or_else(|| {
            RawMessage::error_response(Some(&id), -32002, "Resource not found: no app has it")
        }),
        era,
    )
}

/// The final message of a reply, skipping anything before it.
async fn final_of(stream: &mut ResponseStream) -> Option<RawMessage> {
    while let Some(message) = stream.next().await {
        if message.is_response() {
            return Some(message);
        }
    }
    None
}

/// A final response as the client must see it: a read's contents carry the URIs the client
/// asked for.
fn outward_final(scope: &Scope, read: bool, mut response: RawMessage) -> RawMessage {
    if !read || scope.is_bare() {
        return response;
    }
    let Some(contents) = response.path(&["result", "contents"]) else {
        return response;
    };
    let Ok(mut contents) = serde_json::from_str::<Vec<Value>>(contents.get()) else {
        return response;
    };
    for content in &mut contents {
        if let Some(Value::String(uri)) = content.get_mut("uri") {
            *uri = scope.uri_out(uri.as_str());
        }
    }
    let _ = response.set_path(&["result", "contents"], &raw(&Value::Array(contents)));
    response
}

/// A reply's messages as the client must see them: server requests under the session's ids,
/// URIs in `/mcp`'s namespace.
struct Relayed {
    stream: ResponseStream,
    session: Option<Arc<ClientSession>>,
    scope: Scope,
    read: bool,
}

impl Stream for Relayed {
    type Item = RawMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RawMessage>> {
        loop {
            let message = match Pin::new(&mut self.stream).poll_next(cx) {
                Poll::Ready(Some(message)) => message,
                other => return other,
            };
            if message.is_response() {
                return Poll::Ready(Some(outward_final(&self.scope, self.read, message)));
            }
            let outward = match &self.session {
                Some(session) => session.outward(&self.scope, message),
                None => Some(message),
            };
            if let Some(outward) = outward {
                return Poll::Ready(Some(outward));
            }
        }
    }
}

/// Runs a tool the registry has from outside the apps; its output is all there is.
async fn run_gateway_tool(entry: &ToolEntry, message: &RawMessage) -> Value {
    let arguments = message
        .path(&["params", "arguments"])
        .map_or_else(|| "{}".to_owned(), |a| a.get().to_owned());
    let output = entry.tool.invoke(arguments, ToolContext::new()).await;
    let mut result = json!({
        "content": [{ "type": "text", "text": output.text }],
        "isError": output.is_error,
    });
    if let Some(structured) = output.structured {
        result["structuredContent"] = structured;
    }
    result
}

/// `GET /mcp`: a legacy session's stream of notifications and server requests from every app.
pub(crate) async fn get(State(state): State<Arc<Aggregate>>, headers: HeaderMap) -> Response {
    if let Some(refused) = modern::refuse_get_or_delete(&headers) {
        return refused;
    }
    if let Err(response) = require_event_stream(&headers) {
        return response;
    }
    let (session, busy) = match session_of(&state, &headers, None) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Err(response) = check_version(&headers, session.protocol_version(), None) {
        return response;
    }
    event_stream(
        &headers,
        &session.events,
        session.protocol_version(),
        busy,
        &session.describe(),
    )
}

/// `DELETE /mcp`: ends the session; its requests in flight are cancelled at their apps.
pub(crate) async fn delete(State(state): State<Arc<Aggregate>>, headers: HeaderMap) -> Response {
    if let Some(refused) = modern::refuse_get_or_delete(&headers) {
        return refused;
    }
    let Some(key) = header_text(&headers, &SESSION_HEADER).map(str::to_owned) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32600,
            "missing Mcp-Session-Id",
        );
    };
    match state.sessions.get(&key, GROUP) {
        Some((session, busy)) => {
            drop(busy);
            state.sessions.remove(&key);
            session.close();
            StatusCode::OK.into_response()
        }
        None => {
            debug!("DELETE of an unknown /mcp session");
            rpc_error(
                StatusCode::NOT_FOUND,
                None,
                -32001,
                "unknown or expired session",
            )
        }
    }
}
