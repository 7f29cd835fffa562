//! The Streamable HTTP link: one MCP session with a remote endpoint, carried by our own small
//! client so that every byte, and where it arrived, is visible to the router.
//!
//! Each message is POSTed; whatever comes back on that POST (one JSON body, JSON messages one
//! per line read as they arrive (`json_stream.rs`), or an SSE stream of progress, server
//! requests and finally the response) is tagged with the request's upstream id. After the handshake a single standalone GET stream carries the session's
//! other server messages and is reconnected (with `Last-Event-ID`) when it drops; a server
//! that issued no session id and answers that GET with 404 or 405 simply has none. The
//! session id and negotiated protocol version are taken from the `initialize` exchange and
//! sent on every later request. `close` ends the session with a DELETE.
//!
//! Order: messages leave in the order the session produced them where order matters.
//! `initialize`, notifications and responses are barriers: each waits until every earlier
//! request has been handed to the connection, and nothing after it leaves before the server
//! has acknowledged it (so `notifications/initialized` precedes the first listing, and a
//! cancellation follows the request it cancels). Requests between barriers run concurrently.
//!
//! Resumption (SEP-1699): when a request's event stream ends before its response, after the
//! server gave the stream's events ids, the link waits the server's `retry` interval and
//! resumes the stream with a GET carrying `Last-Event-ID`; what arrives there still belongs
//! to the original request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, warn};

use mcpapp_manifest::Era;
use mcpapp_session::{
    CloseFuture, Link, LinkEvent, LinkEvents, MessageKind, Origin, RawMessage, RequestKey as Key,
    request_protocol_version,
};
use serde_json::value::RawValue;

use self::auth::Sent;
use super::connector::{ClientError, HttpClient};
use super::headers::{PROTOCOL_HEADER, SESSION_HEADER, modern_headers, request_uri};
use super::json_stream::JsonValues;
use super::tool_headers::ToolHeaders;

mod auth;

/// A request's id from its key (its raw JSON text, which the router made from the id).
fn key_id(key: &Key) -> Box<RawValue> {
    RawValue::from_string(key.clone()).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

const LAST_EVENT_HEADER: &str = "last-event-id";
/// Largest JSON response body accepted.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// Failed reconnections of the GET stream, in a row, after which the server counts as gone.
const MAX_GET_FAILURES: u32 = 3;
/// Wait before reconnecting the GET stream when the server did not say (`retry:`).
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
/// Resumptions of one request's event stream after which it counts as lost.
const MAX_RESUMES: u32 = 5;
/// How long a barrier waits for an earlier request's body to be handed over.
const SEND_WAIT: Duration = Duration::from_millis(500);
/// How long the first listing waits for the standalone GET stream to be open.
const GET_OPEN_WAIT: Duration = Duration::from_secs(2);
/// How long a cancellation waits for the server to begin answering the request it cancels.
const CANCEL_WAIT: Duration = Duration::from_secs(2);
/// How long a response stream may take to end after its response (see [`finish`]).
const FINISH_WAIT: Duration = Duration::from_millis(100);
/// How long a barrier (a notification or response) may take to be acknowledged before later
/// messages go anyway; the barrier's own exchange carries on.
const BARRIER_WAIT: Duration = Duration::from_secs(10);

/// What to connect to.
#[derive(Debug, Clone)]
pub(crate) struct HttpSpec {
    pub(crate) url: url::Url,
    /// Extra headers, already resolved (no `env:` references left).
    pub(crate) headers: HeaderMap,
    /// The app's OAuth authorizer, when the gateway authorizes to it (`auth.rs`).
    pub(crate) auth: Option<mcpapp_oauth::AppAuthorizer>,
}

#[derive(Debug, Default)]
struct Session {
    id: Option<String>,
    protocol: Option<String>,
}

/// Where a request's event stream got to: the last event id and the server's retry hint.
#[derive(Debug, Default)]
struct StreamPosition {
    last_event: Option<String>,
    retry: Option<Duration>,
}

type Response = http::Response<Incoming>;

#[derive(Debug)]
struct Inner {
    client: HttpClient<HandedOver>,
    spec: HttpSpec,
    /// Where requests go: the spec's URL without credentials (they travel in `spec.headers`).
    uri: Uri,
    session: Mutex<Session>,
    /// Streams that ended early and may be resumed, by request.
    positions: Mutex<HashMap<Key, StreamPosition>>,
    events: LinkEvents,
    get_started: AtomicBool,
    /// The upstream speaks 2026-07-28 (set once the session is open).
    modern: AtomicBool,
    closed: AtomicBool,
    stop: CancellationToken,
    span: tracing::Span,
    /// What the app's listings say of `x-mcp-header` (2026-07-28 only).
    tool_headers: ToolHeaders,
}

/// An open HTTP session.
#[derive(Debug, Clone)]
pub(crate) struct HttpLink {
    inner: Arc<Inner>,
    outgoing: mpsc::UnboundedSender<(RawMessage, Option<Key>)>,
}

/// Why a link could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the URL cannot be used for HTTP requests")]
    Url,
}

/// Builds the link. Nothing is sent until the first message.
pub(crate) fn connect(mut spec: HttpSpec, events: LinkEvents) -> Result<HttpLink, ConnectError> {
    // Connections are kept alive and reused (on Linux; see `connector` for why they do not
    // stall against servers without TCP_NODELAY, and docs/performance.md for the figures).
    // Redirects are not followed: the link talks to one endpoint, and following one would
    // carry the manifest's headers (credentials) to wherever the server pointed.
    let client = super::connector::client()?;
    let uri = request_uri(&mut spec)?;
    let inner = Arc::new(Inner {
        client,
        spec,
        uri,
        session: Mutex::new(Session::default()),
        positions: Mutex::default(),
        events,
        get_started: AtomicBool::new(false),
        modern: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        stop: CancellationToken::new(),
        span: tracing::Span::current(),
        tool_headers: ToolHeaders::default(),
    });
    let (outgoing, queue) = mpsc::unbounded_channel();
    tokio::spawn(dispatch(inner.clone(), queue).instrument(inner.span.clone()));
    Ok(HttpLink { inner, outgoing })
}

/// Sends messages in order (see the module documentation): requests concurrently once
/// handed over, barriers one at a time.
async fn dispatch(
    inner: Arc<Inner>,
    mut queue: mpsc::UnboundedReceiver<(RawMessage, Option<Key>)>,
) {
    let mut handed_over: Vec<oneshot::Receiver<()>> = Vec::new();
    // Requests whose answer has not begun (no response head yet), by key.
    let mut unanswered: HashMap<Key, oneshot::Receiver<()>> = HashMap::new();
    // The exchanges of requests, to end one when it is cancelled (the modern era's way).
    let mut exchanges: HashMap<Key, tokio::task::AbortHandle> = HashMap::new();
    while let Some((message, request)) = queue.recv().await {
        let method = message.method();
        if inner.modern.load(Ordering::SeqCst) && request.is_none() {
            // A modern HTTP server takes no notifications: a cancellation closes the request's
            // response stream; anything else has no meaning there.
            if method.as_deref() == Some("notifications/cancelled")
                && let Some(key) = message
                    .path(&["params", "requestId"])
                    .map(|id| id.get().trim().to_owned())
                && let Some(exchange) = exchanges.remove(&key)
            {
                exchange.abort();
                inner.fail_request(&Some(key), "the request was cancelled");
            } else if method.as_deref() != Some("notifications/cancelled") {
                debug!(
                    ?method,
                    "a notification has no place on a 2026-07-28 HTTP session; dropped"
                );
            }
            continue;
        }
        let barrier = request.is_none() || method.as_deref() == Some("initialize");
        if let Some(key) = request.clone().filter(|_| !barrier) {
            let (sent, sent_rx) = oneshot::channel();
            let (responding, responding_rx) = oneshot::channel();
            // Forget the ones already handed over and answered, so the tables stay as short
            // as the requests in flight. Both signal by sending or by dropping their sender
            // (`post` drops `responding`), and a receiver whose sender was dropped still counts
            // as empty: only `try_recv` tells waiting from done.
            handed_over.retain_mut(still_waiting);
            handed_over.push(sent_rx);
            unanswered.retain(|_, rx| still_waiting(rx));
            unanswered.insert(key.clone(), responding_rx);
            exchanges.retain(|_, exchange| !exchange.is_finished());
            let inner = inner.clone();
            let span = inner.span.clone();
            let exchange = tokio::spawn(
                async move {
                    inner
                        .post(message, request, Some(sent), Some(responding))
                        .await
                }
                .instrument(span),
            );
            exchanges.insert(key, exchange.abort_handle());
            continue;
        }
        for rx in handed_over.drain(..) {
            let _ = tokio::time::timeout(SEND_WAIT, rx).await;
        }
        // Two POSTs travel on two connections, so a cancellation could reach the server
        // before the request it cancels; wait until the server has begun answering it.
        if method.as_deref() == Some("notifications/cancelled")
            && let Some(key) = message
                .path(&["params", "requestId"])
                .map(|id| id.get().trim().to_owned())
            && let Some(rx) = unanswered.remove(&key)
        {
            let _ = tokio::time::timeout(CANCEL_WAIT, rx).await;
        }
        let exchange = {
            let inner = inner.clone();
            let span = inner.span.clone();
            tokio::spawn(
                async move { inner.post(message, request, None, None).await }.instrument(span),
            )
        };
        if tokio::time::timeout(BARRIER_WAIT, exchange).await.is_err() {
            debug!("a notification was not acknowledged within {BARRIER_WAIT:?}; sending on");
        }
    }
}

/// Whether a signal has neither come nor been given up (its sender still holds it).
fn still_waiting(rx: &mut oneshot::Receiver<()>) -> bool {
    matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty))
}

/// A request body that says when the connection has taken it (so that a barrier after it
/// leaves after it).
struct HandedOver {
    data: Option<bytes::Bytes>,
    len: u64,
    sent: Option<oneshot::Sender<()>>,
}

impl HandedOver {
    /// No body (GET, DELETE).
    fn empty() -> Self {
        HandedOver {
            data: None,
            len: 0,
            sent: None,
        }
    }

    fn signal(&mut self) {
        if let Some(sent) = self.sent.take() {
            let _ = sent.send(());
        }
    }
}

impl http_body::Body for HandedOver {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let frame = self
            .data
            .take()
            .map(|data| Ok(http_body::Frame::data(data)));
        self.signal();
        std::task::Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.len)
    }
}

impl Drop for HandedOver {
    fn drop(&mut self) {
        self.signal();
    }
}

impl Link for HttpLink {
    /// A modern HTTP session has no session id and no GET stream, carries the era's headers
    /// on every POST, and cancels by closing a request's response stream.
    fn set_era(&self, era: Era) {
        self.inner
            .modern
            .store(era == Era::Modern, Ordering::SeqCst);
    }

    fn send(&self, message: RawMessage, request: Option<Key>) {
        if let Err(mpsc::error::SendError((_, request))) = self.outgoing.send((message, request)) {
            self.inner
                .fail_request(&request, "the connection to the app is closed");
        }
    }

    /// Ends the session: stops the GET stream and sends DELETE (best effort); `grace` is a
    /// process's, and means nothing here.
    fn close(&self, _grace: Duration) -> CloseFuture<'_> {
        Box::pin(self.end())
    }
}

impl HttpLink {
    /// Stops the GET stream and sends DELETE (best effort).
    async fn end(&self) {
        let inner = &self.inner;
        inner.stop.cancel();
        let session = inner.session_id();
        if let Some(session) = session {
            let mut headers = inner.spec.headers.clone();
            if let Ok(session) = HeaderValue::from_str(&session) {
                headers.insert(HeaderName::from_static(SESSION_HEADER), session);
            }
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                inner.send(Method::DELETE, headers, None, None),
            )
            .await;
        }
        inner.mark_closed(None);
    }
}

impl Inner {
    fn request(
        &self,
        method: Method,
        headers: HeaderMap,
        body: HandedOver,
    ) -> http::Request<HandedOver> {
        let mut request = http::Request::new(body);
        *request.method_mut() = method;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = headers;
        request
    }

    /// A GET for an event stream (the standalone one, or a resumption).
    async fn get_events(&self, mut headers: HeaderMap) -> Sent {
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        self.send(Method::GET, headers, None, None).await
    }

    fn session_id(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .id
            .clone()
    }

    /// Headers every request after the handshake carries.
    fn session_headers(&self) -> HeaderMap {
        let mut headers = self.spec.headers.clone();
        let session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = session
            .id
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert(HeaderName::from_static(SESSION_HEADER), id);
        }
        if let Some(version) = session
            .protocol
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert(HeaderName::from_static(PROTOCOL_HEADER), version);
        }
        headers
    }

    /// Reports the link closed, once; `None` means closed on request (no event).
    fn mark_closed(&self, reason: Option<String>) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.stop.cancel();
        if let Some(reason) = reason {
            let _ = self.events.send(LinkEvent::Closed(reason));
        }
    }

    fn emit(&self, message: RawMessage, origin: Origin) {
        let message = self.tool_headers.incoming(&origin, message);
        let _ = self.events.send(LinkEvent::Message { message, origin });
    }

    /// Answers a request that will get no answer from the server, so nobody waits forever.
    fn fail_request(&self, request: &Option<Key>, message: &str) {
        if let Some(key) = request {
            let id = key_id(key);
            self.emit(
                RawMessage::error_response(Some(&id), -32603, message),
                Origin::Post(key.clone()),
            );
        }
    }

    async fn post(
        self: Arc<Self>,
        message: RawMessage,
        request: Option<Key>,
        sent: Option<oneshot::Sender<()>>,
        responding: Option<oneshot::Sender<()>>,
    ) {
        if self.closed.load(Ordering::SeqCst) {
            self.fail_request(&request, "the connection to the app is closed");
            return;
        }
        let method = message.method();
        let is_initialize = method.as_deref() == Some("initialize");
        let is_initialized = method.as_deref() == Some("notifications/initialized");
        let (mut headers, modern) = self.post_headers(&message, is_initialize);
        if modern
            && let Err(refusal) =
                self.tool_headers
                    .outgoing(&message, request.as_ref(), &mut headers)
        {
            if let Some(key) = request {
                self.emit(refusal, Origin::Post(key));
            }
            return;
        }
        let body = bytes::Bytes::from(message.into_string());
        let sent = self.send(Method::POST, headers, Some(body), sent).await;
        // The server has begun answering (or failed to): a cancellation may follow now.
        drop(responding);
        let response = match sent {
            Sent::Response(response) => response,
            Sent::Unauthorized(text) => {
                self.fail_request(&request, &text);
                return;
            }
            Sent::Failed(err) => {
                let text = describe_error(&err);
                self.fail_request(&request, &format!("cannot reach the app: {text}"));
                if err.is_connect() {
                    self.mark_closed(Some(format!("cannot reach {}: {text}", self.spec.url)));
                }
                return;
            }
        };
        let status = response.status();
        if is_initialize {
            let id = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            self.session.lock().unwrap_or_else(|p| p.into_inner()).id = id;
        }
        if status == StatusCode::NOT_FOUND && self.session_id().is_some() && !is_initialize {
            self.fail_request(&request, "the app ended the session (HTTP 404)");
            self.mark_closed(Some("the app ended the MCP session (HTTP 404)".to_owned()));
            return;
        }
        if !status.is_success() {
            self.refused(response, &request).await;
            return;
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let origin = request.clone().map_or(Origin::Get, Origin::Post);
        let answered = if content_type.starts_with("text/event-stream") {
            self.read_post_stream(response, &request, is_initialize)
                .await
                || self.resume(&request).await
        } else if content_type.starts_with("application/json") {
            self.read_json_body(response, &origin, is_initialize).await
        } else {
            false
        };
        if request.is_some() && !answered {
            self.fail_request(&request, "the app closed the response without answering");
        }
        if is_initialized && !self.get_started.swap(true, Ordering::SeqCst) {
            self.open_get_stream().await;
        }
    }

    /// The headers of a POST of `message`, and whether it is a modern request.
    fn post_headers(&self, message: &RawMessage, is_initialize: bool) -> (HeaderMap, bool) {
        let (mut headers, modern) = match request_protocol_version(message) {
            // A modern request stands alone: its era's headers, no session.
            Some(version) if Era::of_version(&version) == Era::Modern => {
                (modern_headers(&self.spec.headers, message, &version), true)
            }
            _ if is_initialize => (self.spec.headers.clone(), false),
            _ => (self.session_headers(), false),
        };
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        (headers, modern)
    }

    /// Answers `request` (or warns, for a message without an answer) when the server did not
    /// take a POST: with the JSON-RPC error its body holds, else with the HTTP status.
    async fn refused(&self, response: Response, request: &Option<Key>) {
        let status = response.status();
        let body = read_limited(response)
            .await
            .map(|body| String::from_utf8_lossy(&body).into_owned())
            .unwrap_or_default();
        // A server that could not take the request often says why in a JSON-RPC error;
        // that error, under the request's id, is the best answer for the caller.
        if let Some(key) = request
            && let Ok(mut error) = RawMessage::parse(body.trim())
            && error.kind() == MessageKind::Error
        {
            error.set_id(&key_id(key));
            self.emit(error, Origin::Post(key.clone()));
            return;
        }
        let snippet: String = body.chars().take(300).collect();
        let text = format!(
            "the app answered HTTP {status}{}",
            if snippet.is_empty() {
                String::new()
            } else {
                format!(": {snippet}")
            }
        );
        if request.is_some() {
            self.fail_request(request, &text);
        } else {
            warn!("{text}");
        }
    }

    /// Opens the standalone GET stream and waits (a little) until it is open. Servers may
    /// send what they cannot tie to a request (a tool's elicitation, say) only on this
    /// stream, and drop it when none is open; so it is opened before anything after
    /// `initialized` leaves (that exchange is a barrier).
    async fn open_get_stream(self: &Arc<Self>) {
        let (ready, opened) = oneshot::channel();
        let inner = self.clone();
        let span = self.span.clone();
        tokio::spawn(async move { inner.get_stream(Some(ready)).await }.instrument(span));
        let _ = tokio::time::timeout(GET_OPEN_WAIT, opened).await;
    }

    fn note_initialize(&self, message: &RawMessage) {
        if message.kind() == MessageKind::Response
            && let Some(version) = message
                .path(&["result", "protocolVersion"])
                .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
        {
            self.session
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .protocol = Some(version);
        }
    }

    /// Reads a JSON body as it arrives (see `json_stream.rs`: one object, or messages one
    /// after another, as a listen stream's body is), emitting each message when it is whole;
    /// returns whether the response arrived.
    async fn read_json_body(
        &self,
        response: Response,
        origin: &Origin,
        is_initialize: bool,
    ) -> bool {
        let mut body = response.into_body();
        let mut values = JsonValues::new(MAX_BODY_BYTES);
        let mut answered = false;
        loop {
            let frame = tokio::select! {
                frame = body.frame() => frame,
                () = self.stop.cancelled() => return answered,
            };
            let chunk = match frame {
                None => break,
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(chunk) => chunk,
                    Err(_) => continue,
                },
                Some(Err(err)) => {
                    debug!("a response body broke: {}", describe_body_error(&err));
                    return answered;
                }
            };
            let complete = match values.push(&chunk) {
                Ok(complete) => complete,
                Err(err) => {
                    warn!("reading a response failed: {err}");
                    let _ = self.events.send(LinkEvent::Garbage(err.to_string()));
                    return answered;
                }
            };
            for value in complete {
                let Ok(text) = String::from_utf8(value) else {
                    warn!("the app sent a JSON message that is not UTF-8");
                    continue;
                };
                match RawMessage::parse(text.as_str()) {
                    Ok(message) => {
                        if is_initialize {
                            self.note_initialize(&message);
                        }
                        answered |= message.is_response();
                        self.emit(message, origin.clone());
                    }
                    Err(_) => {
                        let _ = self
                            .events
                            .send(LinkEvent::Garbage(text.chars().take(200).collect()));
                    }
                }
            }
        }
        if let Some(rest) = values.rest() {
            let _ = self.events.send(LinkEvent::Garbage(rest));
        }
        answered
    }

    /// Reads the SSE stream of a POST; returns whether the response arrived.
    async fn read_post_stream(
        &self,
        response: Response,
        request: &Option<Key>,
        is_initialize: bool,
    ) -> bool {
        let mut position = StreamPosition::default();
        let answered = self
            .read_events(response, request, is_initialize, &mut position)
            .await;
        if let Some(key) = request
            && !answered
        {
            self.positions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key.clone(), position);
        }
        answered
    }

    /// Reads SSE events of one request's stream (its POST, or a GET resuming it) until its
    /// response; notes event ids and `retry` hints in `position`.
    async fn read_events(
        &self,
        response: Response,
        request: &Option<Key>,
        is_initialize: bool,
        position: &mut StreamPosition,
    ) -> bool {
        let origin = request.clone().map_or(Origin::Get, Origin::Post);
        let mut events = sse_stream::SseStream::new(response.into_body());
        loop {
            let next = tokio::select! {
                next = events.next() => next,
                () = self.stop.cancelled() => return false,
            };
            let event = match next {
                Some(Ok(event)) => event,
                Some(Err(err)) => {
                    debug!("a response stream broke: {err}");
                    return false;
                }
                None => return false,
            };
            if let Some(id) = event.id.clone() {
                position.last_event = Some(id);
            }
            if let Some(ms) = event.retry {
                position.retry = Some(Duration::from_millis(ms.clamp(0, 60_000)));
            }
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            match RawMessage::parse(data.as_str()) {
                Ok(message) => {
                    if is_initialize {
                        self.note_initialize(&message);
                    }
                    let is_ours = message.is_response()
                        && request
                            .as_ref()
                            .is_some_and(|k| message.id().map(|i| i.get()) == Some(k.as_str()));
                    self.emit(message, origin.clone());
                    if is_ours {
                        finish(events).await;
                        return true;
                    }
                }
                Err(_) => {
                    let _ = self
                        .events
                        .send(LinkEvent::Garbage(data.chars().take(200).collect()));
                }
            }
        }
    }

    /// Resumes a request's stream that ended before its response, if the server made it
    /// resumable (its events had ids): waits the `retry` interval, then GETs with
    /// `Last-Event-ID`, as often as the stream keeps ending early (bounded).
    async fn resume(&self, request: &Option<Key>) -> bool {
        let Some(key) = request else { return false };
        let taken = self
            .positions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        let Some(mut position) = taken.filter(|p| p.last_event.is_some()) else {
            return false;
        };
        for _ in 0..MAX_RESUMES {
            let wait = position.retry.unwrap_or(DEFAULT_RETRY);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.stop.cancelled() => return false,
            }
            let mut headers = self.session_headers();
            if let Some(id) = position
                .last_event
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                headers.insert(HeaderName::from_static(LAST_EVENT_HEADER), id);
            }
            let sent = tokio::select! {
                sent = self.get_events(headers) => sent,
                () = self.stop.cancelled() => return false,
            };
            match sent {
                Sent::Unauthorized(text) => {
                    debug!(request = %key, "resuming a response stream was not authorized: {text}");
                    return false;
                }
                Sent::Response(response) if response.status().is_success() => {
                    debug!(request = %key, "resuming a response stream");
                    if self
                        .read_events(response, request, false, &mut position)
                        .await
                    {
                        return true;
                    }
                }
                Sent::Response(response) => {
                    debug!(request = %key, status = %response.status(), "the app refused to resume a response stream");
                    return false;
                }
                Sent::Failed(err) => {
                    debug!(request = %key, "resuming a response stream failed: {}", describe_error(&err))
                }
            }
        }
        false
    }

    /// The standalone GET stream: reconnects until the link closes; a server that cannot be
    /// reached several times in a row counts as gone.
    /// `ready` fires once the first attempt has its answer (or failed).
    async fn get_stream(self: Arc<Self>, mut ready: Option<oneshot::Sender<()>>) {
        let mut last_event: Option<String> = None;
        let mut retry = DEFAULT_RETRY;
        let mut failures = 0u32;
        while !self.stop.is_cancelled() {
            let mut headers = self.session_headers();
            if let Some(id) = last_event
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                headers.insert(HeaderName::from_static(LAST_EVENT_HEADER), id);
            }
            let sent = tokio::select! {
                sent = self.get_events(headers) => sent,
                () = self.stop.cancelled() => return,
            };
            drop(ready.take());
            match sent {
                // The app's authorization stopped it; its task follows that state.
                Sent::Unauthorized(text) => {
                    debug!("the standalone event stream is not authorized: {text}");
                    return;
                }
                Sent::Failed(err) => {
                    failures += 1;
                    if failures >= MAX_GET_FAILURES {
                        self.mark_closed(Some(format!(
                            "lost the connection to {}: {}",
                            self.spec.url,
                            describe_error(&err)
                        )));
                        return;
                    }
                }
                Sent::Response(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    debug!("the app offers no standalone event stream");
                    return;
                }
                // Without a session there is no session to end: a stateless server that has
                // no GET route answers 404, and that is all it means.
                Sent::Response(response)
                    if response.status() == StatusCode::NOT_FOUND
                        && self.session_id().is_none() =>
                {
                    debug!("the app (stateless) offers no standalone event stream");
                    return;
                }
                Sent::Response(response) if response.status() == StatusCode::NOT_FOUND => {
                    self.mark_closed(Some("the app ended the MCP session (HTTP 404)".to_owned()));
                    return;
                }
                Sent::Response(response) if !response.status().is_success() => {
                    failures += 1;
                    if failures >= MAX_GET_FAILURES {
                        self.mark_closed(Some(format!(
                            "the app's event stream keeps failing (HTTP {})",
                            response.status()
                        )));
                        return;
                    }
                }
                Sent::Response(response) => {
                    failures = 0;
                    let mut events = sse_stream::SseStream::new(response.into_body());
                    loop {
                        let next = tokio::select! {
                            next = events.next() => next,
                            () = self.stop.cancelled() => return,
                        };
                        let Some(Ok(event)) = next else { break };
                        if let Some(id) = event.id.clone() {
                            last_event = Some(id);
                        }
                        if let Some(ms) = event.retry {
                            retry = Duration::from_millis(ms.clamp(100, 30_000));
                        }
                        let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                            continue;
                        };
                        match RawMessage::parse(data.as_str()) {
                            Ok(message) => self.emit(message, Origin::Get),
                            Err(_) => {
                                let _ = self
                                    .events
                                    .send(LinkEvent::Garbage(data.chars().take(200).collect()));
                            }
                        }
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(retry) => {}
                () = self.stop.cancelled() => return,
            }
        }
    }
}

type LegacyError = hyper_util::client::legacy::Error;

/// Reads a response stream to its end (briefly), so that its connection goes back to the
/// pool: a body dropped before its last chunk has been read closes the connection. Servers
/// end the stream right after the response, usually in the same segment; anything else that
/// still comes on it has no request left to belong to.
async fn finish<S>(mut events: S)
where
    S: futures::Stream + Unpin,
{
    use futures::FutureExt;
    match events.next().now_or_never() {
        Some(None) => {}
        _ => {
            let _ = tokio::time::timeout(FINISH_WAIT, async {
                while events.next().await.is_some() {}
            })
            .await;
        }
    }
}

/// Reads a whole response body, up to [`MAX_BODY_BYTES`].
async fn read_limited(response: Response) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    let mut incoming = response.into_body();
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(BodyError::Read)?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error's message with its causes, without the URL (which may carry credentials).
fn describe_error(err: &LegacyError) -> String {
    let text = if err.is_connect() {
        "connection failed"
    } else {
        "the request failed"
    };
    with_causes(text, std::error::Error::source(err))
}

/// Why a response body could not be had whole.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// The connection failed while the body was read.
    #[error("{}", describe_body_error(.0))]
    Read(hyper::Error),
    /// The body exceeded [`MAX_BODY_BYTES`].
    #[error("the response is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
}

fn describe_body_error(err: &hyper::Error) -> String {
    with_causes(
        "the response body could not be read",
        Some(err as &(dyn std::error::Error + 'static)),
    )
}

fn with_causes(text: &str, mut source: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut text = text.to_owned();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
