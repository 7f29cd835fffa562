//! A port: one client session's share of an app's upstream session, and the stream of what
//! comes back for each of its requests.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::connection::Connection;
use crate::hub::{HubCommand, begin_call};
use crate::observe::{CallPath, PathCell, SessionObserver};
use crate::raw::{MessageKind, RawError, RawMessage, raw_json};
use crate::router::{Key, PortId};

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
    /// A port of the session whose hub is `hub`, numbered `id`, speaking `protocol_version`
    /// with its client; session notifications arrive on `notifications`.
    pub(crate) fn new(
        id: PortId,
        meters: Arc<dyn SessionObserver>,
        app_id: String,
        hub: mpsc::UnboundedSender<HubCommand>,
        notifications: mpsc::Receiver<RawMessage>,
        protocol_version: String,
        connection: std::sync::Weak<Connection>,
    ) -> Self {
        Self {
            id,
            path: PathCell::new(CallPath::Proxy),
            meters,
            app_id,
            hub,
            notifications: std::sync::Mutex::new(Some(notifications)),
            protocol_version,
            connection,
        }
    }

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
            // The 2026-07-28 revision removed `ping`; the endpoints refuse it before a port
            // is opened, and a modern port refuses it too.
            Some("ping") if self.protocol_version == crate::era::MODERN => {
                return Ok(PortReply::Response(RawMessage::error_response(
                    Some(&id),
                    -32601,
                    "Method not found: ping is not a method of protocol version 2026-07-28",
                )));
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
        // The drop guard exists before the request can reach the hub: if this future is
        // dropped (the client went away) at any point from here until the stream below
        // exists, the request is abandoned.
        let mut waiting = Accepting {
            rx: Some(accepted_rx),
            hub: self.hub.clone(),
        };
        self.hub
            .send(HubCommand::PortRequest {
                port: self.id,
                message,
                stream,
                accepted,
                call,
            })
            .map_err(|_| PortError::SessionGone)?;
        match waiting.answer().await? {
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

/// Waits for the hub to take a port request, and abandons it if dropped while waiting.
///
/// The hub either finds the channel closed (the request is not sent) or sends the request's
/// key; a key sent but not yet read is read here on drop and abandoned. Closing the channel
/// first makes the two exclusive: after `close`, the hub's send fails (and the hub abandons
/// the request itself) or its key is in the channel.
struct Accepting {
    rx: Option<oneshot::Receiver<Result<Key, RawMessage>>>,
    hub: mpsc::UnboundedSender<HubCommand>,
}

impl Accepting {
    async fn answer(&mut self) -> Result<Result<Key, RawMessage>, PortError> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(PortError::SessionGone);
        };
        let answer = rx.await.map_err(|_| PortError::SessionGone);
        self.rx = None;
        answer
    }
}

impl Drop for Accepting {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        rx.close();
        if let Ok(Ok(key)) = rx.try_recv() {
            let _ = self.hub.send(HubCommand::Abandon {
                key,
                reason: "the client went away".to_owned(),
            });
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
