//! The transport between the gateway's own rmcp client and the hub: whole messages through
//! channels, in the process.
//!
//! The hub speaks [`RawMessage`]s and rmcp typed messages; in between, rmcp's usual transport
//! for a byte stream (`AsyncRwTransport` over an in-memory duplex pipe) would frame every
//! message as a line, copy it through the pipe's buffer, read it back through a buffered
//! reader and a line buffer, and need two tasks on the hub's side to turn lines into messages
//! and back. Handing messages over directly keeps one serialisation each way (rmcp's types to
//! text, text to rmcp's types), saves about 40 KiB of buffers per app and two task hops per
//! message, and has no line-length limit of its own (rmcp's stream transport drops lines over
//! 16 MiB; the links bound what an app may send).
//!
//! What rmcp's stream transport does with a message it cannot read is kept: text that does
//! not parse is ignored; a well-formed message of the wrong shape is answered with an
//! `Invalid request` error, except a notification, which is ignored (the hub only forwards
//! what the app sent, so a server's own extensions must not turn into errors).

use std::future::Future;

use rmcp::model::ErrorData;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::raw::RawMessage;

/// Why a message for the hub could not be handed over.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PipeError {
    #[error("the session's hub has ended")]
    HubGone,
    #[error("cannot write rmcp's message: {0}")]
    Encode(String),
}

/// rmcp's end of the pipe. `deliver` hands a message to the hub and says whether the hub
/// is still there; `from_hub` carries what the hub sends rmcp, one message per item.
pub(crate) struct HubPipe<F> {
    deliver: F,
    from_hub: mpsc::UnboundedReceiver<String>,
}

impl<F> std::fmt::Debug for HubPipe<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubPipe").finish_non_exhaustive()
    }
}

impl<F> HubPipe<F>
where
    F: Fn(RawMessage) -> bool + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(deliver: F, from_hub: mpsc::UnboundedReceiver<String>) -> Self {
        Self { deliver, from_hub }
    }

    fn hand_over(deliver: &F, item: &TxJsonRpcMessage<RoleClient>) -> Result<(), PipeError> {
        let text = serde_json::to_string(item).map_err(|e| PipeError::Encode(e.to_string()))?;
        let message = RawMessage::parse(&text).map_err(|e| PipeError::Encode(e.to_string()))?;
        if deliver(message) {
            Ok(())
        } else {
            Err(PipeError::HubGone)
        }
    }
}

/// How a message from the hub reads as rmcp's type.
enum Read {
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    Ignore,
    /// Well-formed, but not a message rmcp knows: answered with `Invalid request`.
    Refuse,
}

fn read(text: &str) -> Read {
    match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(text) {
        Ok(message) => Read::Message(Box::new(message)),
        Err(err) => match err.classify() {
            serde_json::error::Category::Data | serde_json::error::Category::Io => {
                let notification = serde_json::from_str::<serde_json::Value>(text)
                    .is_ok_and(|value| value.get("id").is_none());
                debug!("rmcp cannot read a message from the session: {err}");
                if notification {
                    Read::Ignore
                } else {
                    Read::Refuse
                }
            }
            // The hub forwards only what parsed as JSON, so this is not expected; ignoring
            // unparsable input is what every MCP SDK does.
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                warn!("a message for rmcp did not parse: {err}");
                Read::Ignore
            }
        },
    }
}

impl<F> Transport<RoleClient> for HubPipe<F>
where
    F: Fn(RawMessage) -> bool + Clone + Send + Sync + 'static,
{
    type Error = PipeError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Handed over at once, so messages reach the hub in the order rmcp sends them.
        std::future::ready(Self::hand_over(&self.deliver, &item))
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let text = self.from_hub.recv().await?;
            match read(&text) {
                Read::Message(message) => return Some(*message),
                Read::Ignore => {}
                Read::Refuse => {
                    let refusal = TxJsonRpcMessage::<RoleClient>::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    if Self::hand_over(&self.deliver, &refusal).is_err() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.from_hub.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_requests_and_notifications_read_as_rmcp_messages() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        ] {
            assert!(matches!(read(text), Read::Message(_)), "{text}");
        }
    }

    #[test]
    fn vendor_methods_are_rmcp_custom_messages() {
        for text in [
            r#"{"jsonrpc":"2.0","method":"notifications/vendor/thing","params":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"vendor/thing"}"#,
        ] {
            assert!(matches!(read(text), Read::Message(_)), "{text}");
        }
    }

    #[test]
    fn misshapen_requests_are_refused_and_misshapen_notifications_ignored() {
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#),
            Read::Refuse
        ));
        assert!(matches!(
            read(r#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#),
            Read::Ignore
        ));
        assert!(matches!(read("not json"), Read::Ignore));
    }
}
