//! The calls made through an app's current connection, which `AppHandle` exposes: requests
//! bounded by the app's request timeout (a timed-out request, or one whose caller stopped
//! waiting, is cancelled upstream), the health check, and ports on the current session.

use std::time::Duration;

use mcpapp_manifest::Era;
use mcpapp_session::{Causes, Port, PortError, RawMessage, SessionStats, inject_trace_context};
use rmcp::ServiceError;
use rmcp::model::{CancelledNotificationParam, ClientRequest, RequestMetaObject, ServerResult};
use rmcp::service::PeerRequestOptions;
use tracing::{Instrument, info_span};

use super::AppShared;
use crate::error::CallError;

impl AppShared {
    /// Sends a request through the current connection, bounded by the app's request timeout;
    /// a timed-out request is cancelled upstream.
    pub(crate) async fn request(
        &self,
        method: &str,
        request: ClientRequest,
        mut meta: Option<RequestMetaObject>,
    ) -> Result<ServerResult, CallError> {
        let span = if traced(method) {
            info_span!("mcp_upstream_request", app = %self.id, method, path = "agent")
        } else {
            tracing::Span::none()
        };
        inject_trace_context(&mut meta, &span);
        self.send(method, request, meta).instrument(span).await
    }

    async fn send(
        &self,
        method: &str,
        request: ClientRequest,
        meta: Option<RequestMetaObject>,
    ) -> Result<ServerResult, CallError> {
        let connection = self.current().ok_or_else(|| self.not_running())?;
        let timeout = connection.request_timeout;
        let mut options = PeerRequestOptions::with_timeout(timeout);
        let session = session_of(meta.as_ref());
        if let Some(meta) = meta {
            options = options.with_meta(meta);
        }
        let handle = connection
            .client
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|e| CallError::Transport {
                app_id: self.id.clone(),
                method: method.to_owned(),
                message: e.to_string(),
            })?;
        // The chat session a call belongs to, for an elicitation it causes.
        let _cause = session.map(|session| {
            self.causes.note(&handle.id, session);
            CauseGuard {
                causes: self.causes.clone(),
                id: handle.id.clone(),
            }
        });
        // rmcp cancels upstream on its own timeout, but not when the caller stops waiting
        // (an agent turn cancelled, a select! lost): the guard covers that case.
        let mut guard = AbandonGuard {
            peer: Some(connection.client.peer().clone()),
            id: handle.id.clone(),
        };
        let outcome = handle.await_response().await;
        guard.peer = None;
        // A call cut short because the app's grant ended says so, not "transport closed".
        outcome.map_err(|e| {
            self.authorization_error()
                .unwrap_or_else(|| call_error(&self.id, method, timeout, e))
        })
    }

    /// Asks the app whether it is alive: `ping`, or `server/discover` for a modern app (the
    /// modern era has no `ping`).
    pub(crate) async fn health_check(&self) -> Result<(), CallError> {
        let modern = self.current().is_some_and(|c| c.era == Era::Modern);
        if modern {
            let discover = rmcp::model::DiscoverRequest::new(rmcp::model::DiscoverRequestParams {});
            self.request(
                "server/discover",
                ClientRequest::DiscoverRequest(discover),
                None,
            )
            .await
            .map(|_| ())
        } else {
            self.request("ping", ClientRequest::PingRequest(Default::default()), None)
                .await
                .map(|_| ())
        }
    }

    /// Opens a port on the current upstream session for one request of a modern client.
    pub(crate) fn open_modern_port(&self, request: &RawMessage) -> Result<Port, PortError> {
        let connection = self
            .current()
            .ok_or_else(|| PortError::NotRunning(self.lifecycle()))?;
        connection.open_modern_port(request)
    }

    /// The sizes of the current upstream session's tables.
    pub(crate) async fn session_stats(&self) -> Result<SessionStats, PortError> {
        let connection = self
            .current()
            .ok_or_else(|| PortError::NotRunning(self.lifecycle()))?;
        connection.session_stats().await
    }

    /// Opens a port on the current upstream session for the client that sent `initialize`.
    pub(crate) async fn open_port(
        &self,
        initialize: &RawMessage,
    ) -> Result<(Port, RawMessage), PortError> {
        let connection = self
            .current()
            .ok_or_else(|| PortError::NotRunning(self.lifecycle()))?;
        connection.open_port(initialize).await
    }
}

/// The chat session a request's `_meta` names (the agent puts `sessionId` there).
pub(crate) fn session_of(meta: Option<&RequestMetaObject>) -> Option<String> {
    meta.and_then(|m| m.0.get("sessionId"))
        .and_then(|s| s.as_str())
        .map(str::to_owned)
}

/// Whether a request gets a span of its own: health checks stay out of traces, since they
/// belong to no caller's work.
fn traced(method: &str) -> bool {
    !matches!(method, "ping" | "server/discover")
}

/// What rmcp's error for a request of `method`, bounded by `timeout`, means for the caller.
fn call_error(app_id: &str, method: &str, timeout: Duration, error: ServiceError) -> CallError {
    match error {
        ServiceError::Timeout { .. } => CallError::Timeout {
            app_id: app_id.to_owned(),
            method: method.to_owned(),
            seconds: timeout.as_secs(),
        },
        ServiceError::McpError(error) => CallError::Remote {
            app_id: app_id.to_owned(),
            method: method.to_owned(),
            code: error.code.0,
            message: error.message.to_string(),
        },
        other => CallError::Transport {
            app_id: app_id.to_owned(),
            method: method.to_owned(),
            message: other.to_string(),
        },
    }
}

/// Forgets a request's session once it is answered (or given up).
struct CauseGuard {
    causes: Causes,
    id: rmcp::model::RequestId,
}

impl Drop for CauseGuard {
    fn drop(&mut self) {
        self.causes.forget(&self.id);
    }
}

/// Sends `notifications/cancelled` for a request whose caller dropped the future before the
/// answer came, so that the app stops working on a result nobody will read.
struct AbandonGuard {
    /// Set while the answer is awaited; cleared once it arrived (or rmcp timed it out, which
    /// sends its own cancellation).
    peer: Option<rmcp::Peer<rmcp::RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        // Dropping happens inside the runtime that polled the call; without one (the runtime
        // is going away) the connection goes with it and nothing needs cancelling.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let params = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the caller stopped waiting".to_owned()),
        );
        runtime.spawn(
            async move {
                let _ = peer.notify_cancelled(params).await;
            }
            .in_current_span(),
        );
    }
}

#[cfg(test)]
mod tests {
    use mcpapp_manifest::Lifecycle;
    use rmcp::model::{ErrorCode, ErrorData};

    use super::*;
    use crate::app::tests::shared;

    #[test]
    fn rmcp_errors_become_call_errors_that_name_the_app_and_method() {
        let timeout = Duration::from_secs(7);
        let timed_out = ServiceError::Timeout { timeout };
        assert_eq!(
            call_error("weather", "tools/call", timeout, timed_out),
            CallError::Timeout {
                app_id: "weather".to_owned(),
                method: "tools/call".to_owned(),
                seconds: 7,
            }
        );
        let remote =
            ServiceError::McpError(ErrorData::new(ErrorCode::INVALID_PARAMS, "no city", None));
        assert_eq!(
            call_error("weather", "tools/call", timeout, remote).to_string(),
            "app 'weather' returned error -32602 for tools/call: no city"
        );
        let closed = call_error("weather", "ping", timeout, ServiceError::TransportClosed);
        assert!(
            matches!(&closed, CallError::Transport { app_id, method, .. } if app_id == "weather" && method == "ping"),
            "{closed:?}"
        );
    }

    #[test]
    fn a_calls_session_comes_from_its_meta() {
        let meta = |value: serde_json::Value| {
            let serde_json::Value::Object(map) = value else {
                unreachable!()
            };
            RequestMetaObject(map.into())
        };
        assert_eq!(
            session_of(Some(&meta(serde_json::json!({ "sessionId": "chat-1" })))),
            Some("chat-1".to_owned())
        );
        assert_eq!(
            session_of(Some(&meta(serde_json::json!({ "sessionId": 7 })))),
            None
        );
        assert_eq!(session_of(None), None);
    }

    #[test]
    fn health_checks_stay_out_of_traces() {
        assert!(!traced("ping"));
        assert!(!traced("server/discover"));
        assert!(traced("tools/call"));
    }

    #[tokio::test]
    async fn without_a_connection_calls_and_ports_say_the_app_is_not_running() {
        let (shared, _commands, _events) = shared("weather");
        assert_eq!(
            shared.health_check().await,
            Err(CallError::NotRunning {
                app_id: "weather".to_owned(),
                state: Lifecycle::Discovered,
            })
        );
        let request = RawMessage::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
            .expect("valid JSON-RPC");
        assert!(matches!(
            shared.open_modern_port(&request),
            Err(PortError::NotRunning(Lifecycle::Discovered))
        ));
    }
}
