//! `subscriptions/listen` on `/mcp` for 2026-07-28 clients: one stream per listen that tells
//! of list changes across every app and of updates to the resources the client named.
//!
//! List changes are the gateway's to tell (its lists are the merge of every app's, and apps
//! come and go), so they come from the supervisor's events, as for legacy sessions. Resource
//! updates come from the apps: each app with a named resource gets a listen of its own (through
//! a port of this request, in the app's era; the app's router emulates listens for legacy
//! apps), whose acknowledgement decides what this listen acknowledges, and whose updates are
//! passed on with their URIs in `/mcp`'s namespace. An app that restarts gets its listen
//! again when it is back.
//!
//! The listen's stream carries the acknowledgement first, then the notifications, each with
//! `_meta["io.modelcontextprotocol/subscriptionId"]` = the listen's request id. It ends when
//! the client closes it, when the client stops taking notifications (past
//! [`DELIVERY_PATIENCE`]), or with the final result when the gateway shuts down.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{SelectAll, StreamExt};
use mcpapp_bridge::ToolRegistry;
use mcpapp_session::{Port, PortReply, RawMessage, ResponseStream, raw_string};
use mcpapp_supervisor::{AppHandle, Supervisor};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug};

use super::changes::next_changes;
use super::names::{Scope, rewrite_uri, running_apps};
use super::route::{Claim, uri_targets};
use crate::config::KEEP_ALIVE;

/// How long one listen's client may take to accept a notification before the listen is
/// ended (the client may listen again); a client that stops reading must not hold anything up.
const DELIVERY_PATIENCE: Duration = Duration::from_secs(10);
/// How long an app may take to acknowledge its part of a listen.
const ACK_PATIENCE: Duration = Duration::from_secs(5);
/// Notifications buffered for one listen's client.
const BACKLOG: usize = 64;
/// The `_meta` key naming the listen a notification belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The open listens of one `/mcp` endpoint (a count, for logs).
#[derive(Debug, Default)]
pub(crate) struct Listens {
    open: AtomicU64,
}

/// Counts a listen while it lives.
struct Open(Arc<Listens>);

impl Open {
    fn new(listens: &Arc<Listens>) -> Self {
        let open = listens.open.fetch_add(1, Ordering::AcqRel) + 1;
        debug!(listens = open, "an /mcp client listens");
        Self(listens.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let open = self.0.open.fetch_sub(1, Ordering::AcqRel) - 1;
        debug!(listens = open, "an /mcp listen ended");
    }
}

/// What the client asked to hear.
#[derive(Debug, Default)]
struct Wanted {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
}

impl Wanted {
    fn of(request: &RawMessage) -> Self {
        let filter: Value = request
            .path(&["params", "notifications"])
            .and_then(|f| serde_json::from_str(f.get()).ok())
            .unwrap_or(Value::Null);
        let flag = |key: &str| filter.get(key).and_then(Value::as_bool) == Some(true);
        Self {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris: filter
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .map(|uris| {
                    uris.iter()
                        .filter_map(|u| u.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// One app's part of a listen: the URIs (the app's own, with the client's spelling).
struct Part {
    app: AppHandle,
    scope: Scope,
    uris: Vec<(String, String)>,
}

/// The app's upstream listen for one part, kept open while the stream is read.
struct Upstream {
    _port: Port,
    stream: ResponseStream,
}

/// Serves one `subscriptions/listen` request.
pub(crate) async fn listen(
    supervisor: &Supervisor,
    registry: &ToolRegistry,
    listens: &Arc<Listens>,
    shutdown: &CancellationToken,
    request: RawMessage,
) -> Response {
    let id = request
        .id()
        .map_or_else(|| raw_json("null"), ToOwned::to_owned);
    let wanted = Wanted::of(&request);
    let mut parts: BTreeMap<String, Part> = BTreeMap::new();
    for uri in &wanted.uris {
        for (app, scope, original) in uri_targets(running_apps(supervisor), uri, Claim::Resource) {
            parts
                .entry(app.id().to_owned())
                .or_insert_with(|| Part {
                    app,
                    scope,
                    uris: Vec::new(),
                })
                .uris
                .push((original, uri.clone()));
        }
    }
    // Every app's part at once; each acknowledgement names the URIs it will tell about.
    let opened =
        futures::future::join_all(parts.values().map(|part| open_part(&request, part))).await;
    let mut acknowledged: Vec<String> = Vec::new();
    let mut upstreams = SelectAll::new();
    for (part, opened) in parts.values().zip(opened) {
        if let Some((upstream, acked)) = opened {
            acknowledged.extend(
                part.uris
                    .iter()
                    .filter(|(original, _)| acked.contains(original))
                    .map(|(_, outward)| outward.clone()),
            );
            upstreams.push(tagged(part.scope.clone(), upstream));
        }
    }
    acknowledged.dedup();
    let mut accepted = serde_json::Map::new();
    for (key, asked) in [
        ("toolsListChanged", wanted.tools),
        ("promptsListChanged", wanted.prompts),
        ("resourcesListChanged", wanted.resources),
    ] {
        if asked {
            accepted.insert(key.to_owned(), Value::Bool(true));
        }
    }
    if !wanted.uris.is_empty() {
        accepted.insert("resourceSubscriptions".to_owned(), json!(acknowledged));
    }
    let ack = notification(
        "notifications/subscriptions/acknowledged",
        json!({ "notifications": accepted }),
        &id,
    );
    let (tx, rx) = mpsc::channel::<RawMessage>(BACKLOG);
    // The acknowledgement is the stream's first event; the channel is empty, so it fits.
    let _ = tx.try_send(ack);
    let task = Listening {
        supervisor: supervisor.clone(),
        registry: registry.clone(),
        request,
        id,
        wanted,
        parts,
        tx,
        shutdown: shutdown.clone(),
        open: Open::new(listens),
    };
    tokio::spawn(
        task.run(upstreams)
            .instrument(tracing::debug_span!(parent: None, "mcp_listen")),
    );
    let events = ReceiverStream::new(rx)
        .map(|message| Ok::<_, Infallible>(Event::default().data(message.into_string())));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

type Tagged = futures::stream::BoxStream<'static, (Scope, Option<RawMessage>)>;

/// An upstream listen's messages, tagged with its app, ending with a `None` when it ends.
fn tagged(scope: Scope, upstream: Upstream) -> Tagged {
    let end = scope.clone();
    let Upstream {
        _port: port,
        stream,
    } = upstream;
    stream
        .map(move |message| {
            // The port lives as long as its stream is read.
            let _ = &port;
            (scope.clone(), Some(message))
        })
        .chain(futures::stream::once(async move { (end, None) }))
        .boxed()
}

/// Opens an app's part of a listen, and reads what it acknowledged (the app's URIs).
async fn open_part(request: &RawMessage, part: &Part) -> Option<(Upstream, Vec<String>)> {
    let port = match part.app.open_modern_port(request) {
        Ok(port) => port,
        Err(err) => {
            debug!(app = %part.app.id(), "no listen at an app: {err}");
            return None;
        }
    };
    let mut message = request.clone();
    let uris: Vec<&str> = part
        .uris
        .iter()
        .map(|(original, _)| original.as_str())
        .collect();
    let filter = json!({ "resourceSubscriptions": uris });
    let filter = serde_json::value::to_raw_value(&filter).ok()?;
    message
        .set_path(&["params", "notifications"], &filter)
        .ok()?;
    let Ok(PortReply::Stream(mut stream)) = port.send(message).await else {
        debug!(app = %part.app.id(), "an app refused a listen");
        return None;
    };
    let first = tokio::time::timeout(ACK_PATIENCE, stream.next())
        .await
        .ok()??;
    if first.method().as_deref() != Some("notifications/subscriptions/acknowledged") {
        debug!(app = %part.app.id(), "an app's listen did not start with an acknowledgement");
        return None;
    }
    let acked: Vec<String> = first
        .path(&["params", "notifications", "resourceSubscriptions"])
        .and_then(|u| serde_json::from_str(u.get()).ok())
        .unwrap_or_default();
    Some((
        Upstream {
            _port: port,
            stream,
        },
        acked,
    ))
}

/// One listen, running.
struct Listening {
    supervisor: Supervisor,
    registry: ToolRegistry,
    request: RawMessage,
    id: Box<RawValue>,
    wanted: Wanted,
    parts: BTreeMap<String, Part>,
    tx: mpsc::Sender<RawMessage>,
    shutdown: CancellationToken,
    open: Open,
}

impl Listening {
    async fn run(self, mut upstreams: SelectAll<Tagged>) {
        let mut events = self.supervisor.subscribe();
        let mut registry = self.registry.subscribe();
        registry.borrow_and_update();
        loop {
            tokio::select! {
                () = self.tx.closed() => {
                    debug!("an /mcp client closed its listen");
                    break;
                }
                () = self.shutdown.cancelled() => {
                    debug!("ending an /mcp listen: the endpoint closes");
                    let result = json!({
                        "resultType": "complete",
                        "_meta": { SUBSCRIPTION_ID: serde_json::from_str::<Value>(self.id.get()).unwrap_or(Value::Null) },
                    });
                    if let Ok(result) = serde_json::value::to_raw_value(&result) {
                        let _ = self.deliver(RawMessage::response(&self.id, &result)).await;
                    }
                    break;
                }
                next = next_changes(&mut events, &mut registry) => {
                    let Some((changes, started)) = next else { break };
                    for app_id in started {
                        if let Some(part) = self.parts.get(&app_id)
                            && let Some(app) = self.supervisor.get(&app_id)
                        {
                            let part = Part { app, scope: part.scope.clone(), uris: part.uris.clone() };
                            if let Some((upstream, _)) = open_part(&self.request, &part).await {
                                upstreams.push(tagged(part.scope, upstream));
                            }
                        }
                    }
                    let mut gone = false;
                    for (changed, asked, method) in [
                        (changes.tools, self.wanted.tools, "notifications/tools/list_changed"),
                        (changes.prompts, self.wanted.prompts, "notifications/prompts/list_changed"),
                        (changes.resources, self.wanted.resources, "notifications/resources/list_changed"),
                    ] {
                        if changed && asked && !self.deliver(notification(method, json!({}), &self.id)).await {
                            gone = true;
                            break;
                        }
                    }
                    if gone {
                        break;
                    }
                }
                Some((scope, message)) = upstreams.next(), if !upstreams.is_empty() => {
                    let Some(message) = message else {
                        debug!(app = %scope.id(), "an app's part of an /mcp listen ended");
                        continue;
                    };
                    if message.method().as_deref() != Some("notifications/resources/updated") {
                        continue;
                    }
                    if !self.deliver(self.updated(&scope, message)).await {
                        break;
                    }
                }
            }
        }
        drop(self.open);
    }

    /// A resource update as this listen's client must see it.
    fn updated(&self, scope: &Scope, mut message: RawMessage) -> RawMessage {
        rewrite_uri(&mut message, &["params", "uri"], scope);
        let _ = message.set_path(&["params", "_meta", SUBSCRIPTION_ID], &self.id);
        message
    }

    /// Sends one message to the client; false when the listen must end.
    async fn deliver(&self, message: RawMessage) -> bool {
        match tokio::time::timeout(DELIVERY_PATIENCE, self.tx.send(message)).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                debug!("ending an /mcp listen: its client took no notification in time");
                false
            }
        }
    }
}

fn raw_json(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap_or_else(|_| raw_string(""))
}

/// A notification of this listen.
fn notification(method: &str, mut params: Value, id: &RawValue) -> RawMessage {
    let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    if let Some(object) = params.as_object_mut() {
        object.insert("_meta".to_owned(), json!({ SUBSCRIPTION_ID: id }));
    }
    let params = serde_json::value::to_raw_value(&params).ok();
    RawMessage::notification(method, params.as_deref())
}
