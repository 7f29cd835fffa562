//! Serving over stdio: a transport wrapper that implements `--crash-after-calls`, the `freeze`
//! tool, the `tools/list` vendor fields and `--era modern`'s refusal of `initialize` at the
//! message level, and the `--never-initialize` reader.

use std::collections::HashSet;
use std::io::Write as _;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientRequest, CustomResult, JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, ServiceExt as _, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::AsyncBufReadExt as _;

use crate::server::{FixtureServer, Shared};
use crate::vendor::add_vendor_fields;

/// Exit status of the deliberate crashes (`--crash-after-calls`, `--exit-after-ms`).
pub(crate) const CRASH_STATUS: i32 = 17;

/// Wraps the stdio transport to watch `tools/call` traffic.
struct FixtureTransport<T> {
    inner: T,
    shared: Arc<Shared>,
    crash_after_calls: Option<u64>,
    calls_seen: u64,
    crash_id: Option<RequestId>,
    freeze_ids: HashSet<RequestId>,
    list_tools_ids: HashSet<RequestId>,
}

fn reply_id(message: &TxJsonRpcMessage<RoleServer>) -> Option<&RequestId> {
    match message {
        JsonRpcMessage::Response(response) => Some(&response.id),
        JsonRpcMessage::Error(error) => error.id.as_ref(),
        _ => None,
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for FixtureTransport<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Response(response) = &mut item
            && self.list_tools_ids.remove(&response.id)
            && let ServerResult::ListToolsResult(list) = &response.result
            && let Ok(mut value) = serde_json::to_value(list)
            && add_vendor_fields(&mut value)
        {
            response.result = ServerResult::CustomResult(CustomResult(value));
        }
        let id = reply_id(&item);
        let crash = id.is_some() && id == self.crash_id.as_ref();
        let freeze_reply = id.is_some_and(|id| self.freeze_ids.contains(id));
        let frozen = self.shared.frozen.clone();
        let send = self.inner.send(item);
        async move {
            if frozen.is_cancelled() && !freeze_reply {
                // Frozen: nothing leaves the process any more.
                std::future::pending::<()>().await;
            }
            let sent = send.await;
            if crash {
                // The inner send flushed stdout, so the client has the whole response.
                eprintln!("fixture-app: crashing after the configured number of tool calls");
                let _ = std::io::stderr().flush();
                std::process::exit(CRASH_STATUS);
            }
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let frozen = self.shared.frozen.clone();
            if frozen.is_cancelled() {
                // Stop reading stdin for good; the process stays alive.
                std::future::pending::<()>().await;
            }
            let message = tokio::select! {
                message = self.inner.receive() => message,
                () = frozen.cancelled() => std::future::pending().await,
            };
            let mut message = message;
            if let Some(JsonRpcMessage::Request(request)) = &mut message {
                match &mut request.request {
                    ClientRequest::InitializeRequest(init) if self.shared.era.is_modern_only() => {
                        // rmcp would refuse it the same way and then end the session; answering
                        // here keeps the pipes open for a client that goes on in 2026-07-28.
                        let refusal = McpError::unsupported_protocol_version(
                            init.params.protocol_version.clone(),
                            &self.shared.era.supported_versions(),
                        );
                        let reply = ServerJsonRpcMessage::error(refusal, Some(request.id.clone()));
                        if self.inner.send(reply).await.is_err() {
                            return None;
                        }
                        continue;
                    }
                    ClientRequest::CallToolRequest(call) => {
                        self.calls_seen += 1;
                        if Some(self.calls_seen) == self.crash_after_calls {
                            self.crash_id = Some(request.id.clone());
                        }
                        if call.params.name == "freeze" {
                            self.freeze_ids.insert(request.id.clone());
                        }
                    }
                    ClientRequest::ListToolsRequest(_) => {
                        self.list_tools_ids.insert(request.id.clone());
                    }
                    ClientRequest::SubscriptionsListenRequest(listen) => {
                        // See notify.rs: changes after this point reach the stream.
                        listen.extensions.insert(self.shared.notifier.mark());
                    }
                    _ => {}
                }
            }
            return message;
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Serves MCP over stdin/stdout until stdin closes.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    crash_after_calls: Option<u64>,
) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio();
    let transport = FixtureTransport {
        inner: AsyncRwTransport::new_server(stdin, stdout),
        shared: shared.clone(),
        crash_after_calls,
        calls_seen: 0,
        crash_id: None,
        freeze_ids: HashSet::new(),
        list_tools_ids: HashSet::new(),
    };
    let running = FixtureServer::new(shared).serve(transport).await?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "stdio session ended");
    Ok(())
}

/// `--never-initialize`: read and discard stdin, answer nothing, and stay alive even after
/// stdin closes.
pub(crate) async fn never_initialize() -> anyhow::Result<()> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        tracing::debug!(bytes = line.len(), "ignoring input (--never-initialize)");
    }
    std::future::pending::<()>().await;
    Ok(())
}
