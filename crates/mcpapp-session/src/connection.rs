//! One upstream session: a link, the hub, the gateway's rmcp client, and the ports that
//! share it.
//!
//! rmcp does not talk to the app directly. It hands whole JSON-RPC messages through channels
//! (`pipe.rs`) to the *hub* (`hub.rs`), a task that owns the router and the link. Every
//! message, rmcp's and the ports', passes through the hub, which is what lets the agent and
//! any number of browser sessions share one upstream session byte for byte, over stdio and
//! HTTP alike (see docs/architecture.md, "One upstream session").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpapp_manifest::Era;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{Instrument, debug};

use crate::dual::{LegacyLeg, LinkOpener};
use crate::era;
use crate::hub::{Hub, HubCommand, PORT_BACKLOG};
use crate::link::{Link, LinkEvent};
use crate::observe::SessionObserver;
use crate::pipe::HubPipe;
use crate::port::{Port, PortError};
use crate::raw::{RawError, RawMessage, raw_string};
use crate::router::{PortCapabilities, PortSpec};
use crate::stats::SessionStats;

/// Protocol versions a client session may have, oldest first: the Streamable HTTP era up to
/// the last one with `initialize`. Between them only fields and features were added, which a
/// client of an older version ignores, so one upstream session serves them all.
pub const PORT_PROTOCOL_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];

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
    /// For a modern app that can be reached again: the legacy session of legacy clients,
    /// if the app is dual-era (`dual.rs`).
    legacy: Option<LegacyLeg>,
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
        let hub = Hub::new(
            link.clone(),
            to_rmcp,
            request_timeout,
            closed_tx,
            meters.clone(),
        );
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
            legacy: None,
        })
    }

    /// Lets a modern session open a legacy session of the same app for legacy clients, on a
    /// link `opener` makes, if the app serves both eras (see `dual.rs`). Nothing is sent
    /// until the first legacy client arrives. A legacy session ignores it. (The supervisor
    /// offers it for HTTP apps whose manifest names no protocol version: one that names
    /// 2026-07-28 asks for that era alone.)
    #[must_use]
    pub fn with_legacy_session(mut self, opener: Arc<dyn LinkOpener>) -> Self {
        if self.era == Era::Modern {
            self.legacy = Some(LegacyLeg::new(opener));
        }
        self
    }

    /// Resolves with the reason once the link has closed.
    pub fn closed(&self) -> watch::Receiver<Option<String>> {
        self.closed.clone()
    }

    /// Closes rmcp and the link (and a dual-era app's legacy session).
    pub async fn shutdown(&self, grace: Duration) {
        if let Some(legacy) = &self.legacy {
            legacy.shutdown(grace).await;
        }
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
    /// On a dual-era app (see [`Connection::with_legacy_session`]) the port is opened on the
    /// app's legacy session.
    pub async fn open_port(
        self: &Arc<Self>,
        initialize: &RawMessage,
    ) -> Result<(Port, RawMessage), PortError> {
        if let Some(legacy) = &self.legacy
            && let Some(session) = legacy
                .session(&self.app_id, self.request_timeout, &self.meters)
                .await
        {
            // Boxed: a port of the legacy session is opened by that session's own method.
            return Box::pin(session.open_port(initialize)).await;
        }
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

    /// The sizes of this session's tables, as the hub sees them now (see [`SessionStats`]).
    ///
    /// # Errors
    /// [`PortError::SessionGone`] when the session has ended.
    pub async fn session_stats(&self) -> Result<SessionStats, PortError> {
        let (reply, stats) = oneshot::channel();
        self.hub
            .send(HubCommand::Stats { reply })
            .map_err(|_| PortError::SessionGone)?;
        stats.await.map_err(|_| PortError::SessionGone)
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
        Ok(Port::new(
            port,
            self.meters.clone(),
            self.app_id.clone(),
            self.hub.clone(),
            notifications_rx,
            protocol_version,
            Arc::downgrade(self),
        ))
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
