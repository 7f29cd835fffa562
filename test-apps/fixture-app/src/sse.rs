//! Server-sent events as the HTTP middleware handles them: a response body cut into whole
//! events, so that a rewritten, removed or injected event never lands inside another one, and
//! the few fields the middleware reads.
//!
//! rmcp ends every event with a blank line written as `\n\n`; `\r\n\r\n` is accepted too.

use axum::body::{Body, Bytes};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::Value;

/// A body as a stream of chunks; after [`events`], each chunk is one whole event.
pub(crate) type EventStream = BoxStream<'static, Result<Bytes, axum::Error>>;

/// Cuts `body` into whole events, each with its terminating blank line. Bytes left after the
/// last blank line (a stream cut short) come out as a last, incomplete chunk.
pub(crate) fn events(body: Body) -> EventStream {
    struct Cutter {
        inner: axum::body::BodyDataStream,
        buffer: Vec<u8>,
        /// How far `buffer` has been searched for an event end, so that a large event arriving
        /// in many chunks is scanned once.
        searched: usize,
        done: bool,
    }
    let cutter = Cutter {
        inner: body.into_data_stream(),
        buffer: Vec::new(),
        searched: 0,
        done: false,
    };
    futures::stream::unfold(cutter, |mut c| async move {
        if c.done {
            return None;
        }
        loop {
            if let Some(end) = event_end(&c.buffer, c.searched) {
                let event: Vec<u8> = c.buffer.drain(..end).collect();
                c.searched = 0;
                return Some((Ok(Bytes::from(event)), c));
            }
            // An end marker may straddle two chunks: search again from a little before.
            c.searched = c.buffer.len().saturating_sub(3);
            match c.inner.next().await {
                Some(Ok(chunk)) => c.buffer.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    c.done = true;
                    return Some((Err(e), c));
                }
                None => {
                    c.done = true;
                    if c.buffer.is_empty() {
                        return None;
                    }
                    let rest = Bytes::from(std::mem::take(&mut c.buffer));
                    return Some((Ok(rest), c));
                }
            }
        }
    })
    .boxed()
}

/// Where the first event in `buffer` ends (just after its blank line), searching from `from`.
fn event_end(buffer: &[u8], from: usize) -> Option<usize> {
    (from..buffer.len()).find_map(|i| {
        let rest = &buffer[i..];
        if rest.starts_with(b"\n\n") {
            Some(i + 2)
        } else if rest.starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else {
            None
        }
    })
}

/// The lines of one event, without their line ends.
fn lines(event: &[u8]) -> impl Iterator<Item = &[u8]> {
    event
        .split(|b| *b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

/// The value of the first field `name` of one event (`id`, `retry`, ...).
pub(crate) fn field<'a>(event: &'a [u8], name: &str) -> Option<&'a str> {
    lines(event).find_map(|line| {
        let value = line.strip_prefix(name.as_bytes())?.strip_prefix(b":")?;
        let value = value.strip_prefix(b" ").unwrap_or(value);
        std::str::from_utf8(value).ok()
    })
}

/// The JSON value in an event's data lines, if there is one.
pub(crate) fn message(event: &[u8]) -> Option<Value> {
    let data: Vec<&[u8]> = lines(event)
        .filter_map(|line| {
            let value = line.strip_prefix(b"data:")?;
            Some(value.strip_prefix(b" ").unwrap_or(value))
        })
        .collect();
    if data.iter().all(|d| d.is_empty()) {
        return None;
    }
    serde_json::from_slice(&data.join(&b'\n')).ok()
}

/// Whether an event carries a JSON-RPC request (a message with a method and an id).
pub(crate) fn is_request(event: &[u8]) -> bool {
    message(event).is_some_and(|m| m.get("method").is_some() && m.get("id").is_some())
}

/// Whether an event carries the response (a result or an error) to request `id`.
pub(crate) fn is_response_to(event: &[u8], id: &Value) -> bool {
    message(event).is_some_and(|m| {
        m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
    })
}

/// An event whose only field is `message` as its data.
pub(crate) fn data_event(message: &Value) -> Bytes {
    Bytes::from(format!("data: {message}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cuts_a_body_into_whole_events_across_chunks() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"id: 0/1\nretry: 200\ndata:\n")),
            Ok(Bytes::from_static(
                b"\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,",
            )),
            Ok(Bytes::from_static(
                b"\"result\":{}}\nid: 1/1\n\r\n\r\n:\n\nrest",
            )),
        ];
        let body = Body::from_stream(futures::stream::iter(chunks));
        let got: Vec<Bytes> = events(body).map(Result::unwrap).collect().await;
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(&got[0][..], b"id: 0/1\nretry: 200\ndata:\n\n");
        assert_eq!(field(&got[0], "id"), Some("0/1"));
        assert_eq!(field(&got[0], "retry"), Some("200"));
        assert_eq!(message(&got[0]), None);
        assert!(is_response_to(&got[1], &serde_json::json!(7)));
        assert!(!is_response_to(&got[1], &serde_json::json!("7")));
        assert!(!is_request(&got[1]));
        assert_eq!(field(&got[1], "id"), Some("1/1"));
        assert_eq!(&got[2][..], b":\n\n");
        assert_eq!(&got[3][..], b"rest");
    }

    #[test]
    fn requests_and_data_events() {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "roots/list"});
        let event = data_event(&request);
        assert!(is_request(&event));
        assert_eq!(message(&event), Some(request));
        assert!(!is_request(
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
        ));
    }
}
