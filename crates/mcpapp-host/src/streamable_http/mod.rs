//! The Streamable HTTP transport as the gateway serves it, shared by the per-app proxy
//! (`/apps/mcp/{appId}`) and the aggregate (`/mcp`): header names, the checks of `Accept`,
//! `Content-Type`, UTF-8 and `MCP-Protocol-Version`, JSON-RPC answers as HTTP responses
//! (`wire.rs`), the choice between a JSON and an event-stream reply, the reopenable GET
//! stream with replay (`replay.rs`), bounded sessions (`session_store.rs`) and the 2026-07-28
//! checks (`modern.rs`).
//!
//! Both endpoints pass messages through as bytes; only what they route on is read.

// The helpers below return the HTTP response to send instead as their error; it is built once
// per refused request, so its size on the stack does not matter.
#![allow(clippy::result_large_err)]

pub(crate) mod modern;
pub(crate) mod replay;
pub(crate) mod session_store;
mod wire;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream, StreamExt};
use mcpapp_manifest::Era;
use mcpapp_session::{PORT_PROTOCOL_VERSIONS, RawMessage};
use serde_json::value::RawValue;
use tracing::debug;

use self::replay::{EventLog, Resume};
pub(crate) use self::wire::{
    LAST_EVENT_ID_HEADER, PROTOCOL_HEADER, SESSION_HEADER, header_text, json_reply, rpc_error,
};
use self::wire::{VERSION_WITHOUT_HEADER, accepts};
use crate::config::KEEP_ALIVE;

/// How long a response may take before the reply switches from JSON to an event stream.
const JSON_WINDOW: Duration = Duration::from_secs(1);
/// The reconnection interval the GET stream's priming event suggests.
const RETRY: Duration = Duration::from_secs(1);
/// The first protocol version whose clients expect a priming event.
const PRIMING_SINCE: &str = "2025-11-25";

/// Reads a POST: the media types, then one JSON-RPC message in UTF-8.
pub(crate) fn read_message(headers: &HeaderMap, body: &Bytes) -> Result<RawMessage, Response> {
    if !accepts(headers, &["application/json", "text/event-stream"]) {
        return Err(rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "the Accept header must list application/json and text/event-stream",
        ));
    }
    let content_type = header_text(headers, &header::CONTENT_TYPE)
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !content_type.starts_with("application/json") {
        return Err(rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            -32600,
            "the body must be application/json",
        ));
    }
    // Replacing bad bytes would forward something the client never sent.
    let text = std::str::from_utf8(body).map_err(|err| {
        rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32700,
            &format!(
                "the body is not valid UTF-8 (at byte {})",
                err.valid_up_to()
            ),
        )
    })?;
    RawMessage::parse(text)
        .map_err(|err| rpc_error(StatusCode::BAD_REQUEST, None, -32700, &err.to_string()))
}

/// `MCP-Protocol-Version` must name a version the gateway serves; without it the client is
/// taken to speak 2025-03-26, as the specification says. Like the official SDKs' servers, a
/// known version other than the one agreed is accepted (the conformance suite itself sends
/// 2025-03-26 on a 2025-11-25 session); an unknown one is refused.
pub(crate) fn check_version(
    headers: &HeaderMap,
    agreed: &str,
    id: Option<&RawValue>,
) -> Result<(), Response> {
    match header_text(headers, &PROTOCOL_HEADER) {
        None => Ok(()),
        Some(version) if PORT_PROTOCOL_VERSIONS.contains(&version) => Ok(()),
        Some(version) => Err(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            &format!(
                "unsupported MCP-Protocol-Version '{version}': this session speaks {agreed} (the gateway serves {}; without the header, {VERSION_WITHOUT_HEADER} is assumed)",
                PORT_PROTOCOL_VERSIONS.join(", ")
            ),
        )),
    }
}

/// The HTTP status of a final message: 200, or for a modern client the 2026-07-28
/// transport's mapping of its error.
fn status_for(message: &RawMessage, era: Era) -> StatusCode {
    match era {
        Era::Modern => modern::status_of(message),
        Era::Legacy => StatusCode::OK,
    }
}

/// A final message as a JSON reply in the client's era.
pub(crate) fn final_reply(message: RawMessage, era: Era) -> Response {
    let status = status_for(&message, era);
    let mut reply = json_reply(message, None);
    *reply.status_mut() = status;
    reply
}

/// Replies with JSON when the response comes quickly and alone; otherwise with an event
/// stream that carries progress, server requests and finally the response, holding `guard`
/// (what must live as long as the exchange: a busy mark, a port) until it ends. If the client
/// goes away first, dropping the stream cancels the request upstream.
pub(crate) async fn stream_reply<S>(mut stream: S, guard: impl Send + 'static, era: Era) -> Response
where
    S: Stream<Item = RawMessage> + Send + Unpin + 'static,
{
    let first = match tokio::time::timeout(JSON_WINDOW, stream.next()).await {
        Ok(Some(message)) if message.is_response() => return final_reply(message, era),
        Ok(Some(message)) => Some(message),
        Ok(None) => {
            return rpc_error(
                StatusCode::BAD_GATEWAY,
                None,
                -32603,
                "the app closed the request without an answer",
            );
        }
        Err(_) => None,
    };
    // The request's span lasts as long as its event stream.
    let span = tracing::Span::current();
    let rest = stream::unfold(
        (stream, guard, span),
        |(mut stream, guard, span)| async move {
            stream
                .next()
                .await
                .map(|message| (message, (stream, guard, span)))
        },
    );
    let events = stream::iter(first)
        .chain(rest)
        .map(|message| Ok::<_, Infallible>(Event::default().data(message.into_string())));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// A GET must accept an event stream.
pub(crate) fn require_event_stream(headers: &HeaderMap) -> Result<(), Response> {
    if accepts(headers, &["text/event-stream"]) {
        Ok(())
    } else {
        Err(rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            -32600,
            "the Accept header must list text/event-stream",
        ))
    }
}

/// The answer to a session's GET: its standalone event stream, one at a time, resumed after
/// `Last-Event-ID`, primed for clients of 2025-11-25 and later. `guard` keeps the session
/// busy while the client listens.
pub(crate) fn event_stream(
    headers: &HeaderMap,
    events: &Arc<tokio::sync::Mutex<EventLog>>,
    protocol_version: &str,
    guard: impl Send + 'static,
    what: &str,
) -> Response {
    let Ok(log) = events.clone().try_lock_owned() else {
        return rpc_error(
            StatusCode::CONFLICT,
            None,
            -32600,
            "this session already has an open event stream",
        );
    };
    let replay = match header_text(headers, &LAST_EVENT_ID_HEADER) {
        None => Vec::new(),
        Some(last) => match log.resume(last) {
            Resume::Replay(events) => events,
            Resume::Gap(events) => {
                debug!(
                    session = what,
                    "a reconnecting client missed events older than the replay record"
                );
                events
            }
            Resume::Unknown => {
                debug!(
                    session = what,
                    last, "Last-Event-ID names no event of this stream; nothing to replay"
                );
                Vec::new()
            }
        },
    };
    let priming = (protocol_version >= PRIMING_SINCE).then(|| {
        Event::default()
            .id(log.last_id().to_string())
            .retry(RETRY)
            .data("")
    });
    let event = |(id, data): (u64, Arc<str>)| Event::default().id(id.to_string()).data(&*data);
    // The stream holds the log (so one GET at a time) and the guard while the client
    // listens; dropping it, when the client leaves, frees both.
    let live = stream::unfold((log, guard), |(mut log, guard)| async move {
        let next = log.next().await?;
        Some((next, (log, guard)))
    });
    let events = stream::iter(priming)
        .chain(stream::iter(replay).map(event))
        .chain(live.map(event))
        .map(Ok::<_, Infallible>);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}
