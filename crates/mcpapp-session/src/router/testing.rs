//! What the router's unit tests share: building messages and ports, reading deliveries.

pub(super) use mcpapp_manifest::Era;

pub(super) use super::ids::{Key, PortId};
use super::ports::{PortCapabilities, PortSpec};
use super::requests::PendingRequest;
pub(super) use super::{Accepted, Delivery, Router};
use crate::link::Origin;
use crate::raw::RawMessage;
pub(super) use crate::raw::raw_json;

pub(super) fn msg(text: &str) -> RawMessage {
    RawMessage::parse(text).unwrap()
}

pub(super) fn legacy(capabilities: PortCapabilities) -> PortSpec {
    PortSpec {
        capabilities,
        ..PortSpec::default()
    }
}

pub(super) fn modern_port(capabilities: PortCapabilities) -> PortSpec {
    PortSpec {
        era: Era::Modern,
        capabilities,
        ..PortSpec::default()
    }
}

pub(super) fn all_caps() -> PortCapabilities {
    PortCapabilities {
        elicitation: true,
        sampling: true,
        roots: true,
    }
}

/// A router on a legacy upstream whose handshake offered tool list changes and resource
/// subscriptions.
pub(super) fn legacy_upstream_with_caps() -> Router {
    let mut r = Router::with_secret([1, 2]);
    r.rmcp_outgoing(msg(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
    ));
    r.upstream(
        msg(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}}"#),
        &Origin::Stdio,
    );
    r
}

/// A legacy `tools/call` of `port` in flight under the stream `key`.
pub(super) fn pending_for(port: PortId, key: &Key) -> PendingRequest {
    PendingRequest {
        port,
        stream: key.clone(),
        original_id: raw_json("1".to_owned()),
        token: None,
        subscribes: None,
        method: "tools/call".to_owned(),
        modern_client: false,
        log_level: None,
        sent: None,
        held: None,
    }
}

/// The texts of what goes upstream.
pub(super) fn upstream_text(d: &[Delivery]) -> Vec<String> {
    d.iter()
        .filter_map(|d| match d {
            Delivery::Upstream { message, .. } => Some(message.as_str().to_owned()),
            _ => None,
        })
        .collect()
}

/// The upstream id of the request the first delivery sends.
pub(super) fn request_key(d: &[Delivery]) -> Key {
    match &d[0] {
        Delivery::Upstream {
            request: Some(k), ..
        } => k.clone(),
        other => panic!("{other:?}"),
    }
}

/// The first delivery to a request's stream.
pub(super) fn last_request(d: &[Delivery]) -> (&Key, &RawMessage, bool) {
    d.iter()
        .find_map(|d| match d {
            Delivery::Request {
                request,
                message,
                last,
            } => Some((request, message, *last)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no request delivery in {d:?}"))
}

/// The ports session notifications go to.
pub(super) fn ports_of(d: &[Delivery]) -> Vec<PortId> {
    d.iter()
        .filter_map(|d| match d {
            Delivery::Port { port, .. } => Some(*port),
            _ => None,
        })
        .collect()
}
