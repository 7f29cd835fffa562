//! Our own accept loop on hyper, because `axum::serve` offers no timeouts and no connection
//! cap: a client that sends its request a byte at a time would hold its connection (and a
//! task) for as long as it likes.
//!
//! What each connection gets:
//! - **Header read timeout** (hyper's `header_read_timeout`). Hyper starts the timer when it
//!   begins reading a request head: at the connection's start and, on a keep-alive
//!   connection, as soon as the previous response is written. So it bounds the time to send a
//!   head *and* the idle time between requests. A late client's connection is closed
//!   (hyper sends no response).
//! - **Body read deadline**: [`DeadlineBody`] bounds the whole body from the end of its head
//!   (not each read, so a trickle cannot stretch it); a late body gets 408 and the connection
//!   closes. The routers' own body limit (413) works as before, on top of it.
//! - **A cap on concurrent connections.** Over the cap a connection is answered `503` as soon
//!   as its request head is in, and closed, rather than left waiting in the kernel's backlog: a client learns right away
//!   that the gateway is busy (and can retry) instead of hanging in a queue indistinguishable
//!   from a dead gateway, and the loop keeps draining the backlog. The slots themselves are
//!   freed by the timeouts above, so slow clients cannot keep them for long.
//! - `TCP_NODELAY`: responses are small JSON bodies and event-stream lines that should leave
//!   at once, not wait for Nagle's algorithm.
//!
//! Only HTTP/1.1 is served: HTTP/2 would need the `h2` crate, which is not in the tree. The
//! connection builder is told so (`http1_only`) also because its protocol sniffing would
//! otherwise wait for the first bytes *before* hyper's header timer starts, so a client that
//! connects and sends nothing would never time out.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use axum::response::IntoResponse;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;
use tracing::{Instrument, debug, warn};

use crate::config::ConnectionLimits;

/// The body of the answer to a connection over the cap.
const BUSY_BODY: &str = "{\"error\":\"the gateway has too many connections\"}\n";
/// How long refusing one connection may take (reading the request head, answering, then
/// reading what the client sends until it closes).
const REFUSAL_LINGER: Duration = Duration::from_secs(2);
/// How much of a refused connection's request is read, looking for the end of its head.
const MAX_REFUSED_HEAD: usize = 16 * 1024;
/// Refusals in progress at once; past this, connections over the cap are closed unanswered,
/// so a flood cannot make the refusals themselves unbounded.
const MAX_REFUSING: usize = 64;
/// Pause after an accept error that is not about one connection (such as running out of
/// file descriptors), so the loop does not spin while the condition lasts.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(250);

/// Serves `app` on `listener` under `limits` until `shutdown` resolves; connections still
/// open then (event streams stay open until their clients leave) get `drain` to finish
/// before they are cut. Returns once every connection has ended.
///
/// Accept errors never end the loop: errors about one connection are skipped, others (such
/// as running out of file descriptors) are logged and retried after a short pause.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
    drain: Duration,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let builder = Arc::new(builder);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut refusals = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            Some(_) = refusals.join_next(), if !refusals.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                warn!("accepting a connection failed: {err}; retrying shortly");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        // Finished tasks still count in `len` until joined.
        while connections.try_join_next().is_some() {}
        if connections.len() >= limits.max_connections {
            while refusals.try_join_next().is_some() {}
            if refusals.len() < MAX_REFUSING {
                debug!(%peer, "refused a connection over the cap of {}", limits.max_connections);
                refusals.spawn(refuse(stream));
            } else {
                debug!(%peer, "closed a connection over the cap unanswered");
            }
            continue;
        }
        if let Err(err) = stream.set_nodelay(true) {
            debug!(%peer, "could not set TCP_NODELAY: {err}");
        }
        let span = tracing::debug_span!("connection", %peer);
        connections.spawn(
            connection(
                stream,
                app.clone(),
                builder.clone(),
                limits.body_read_timeout,
                stop_rx.clone(),
            )
            .instrument(span),
        );
    }
    // No new connections from here on; open ones finish their current request.
    drop(listener);
    refusals.abort_all();
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            "{} connections still open after {} s; closing them",
            connections.len(),
            drain.as_secs_f64()
        );
        connections.shutdown().await;
    }
}

/// Errors about one connection (the client gave up before it was accepted), after which
/// accepting can go on at once.
fn is_connection_error(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Serves one connection until it ends, or shuts it down gracefully (the request in
/// progress finishes, then it closes) once `stop` turns true.
async fn connection(
    stream: TcpStream,
    app: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    body_read_timeout: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        handle(app.clone(), request, body_read_timeout)
    });
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    // A closed channel means the server is gone: stop as well.
    let stopping = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = stopping => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(err) = result {
        // Timeouts, resets and malformed requests: routine, and the client's doing.
        debug!("connection closed: {err}");
    }
}

/// Runs one request through the router with its body under the deadline, and answers 408
/// (closing the connection) when the body was late, whatever the handler made of the error.
async fn handle(
    app: Router,
    request: Request<Incoming>,
    body_read_timeout: Duration,
) -> Result<Response<Body>, Infallible> {
    let late = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| DeadlineBody::new(body, body_read_timeout, late.clone()));
    let response = app.oneshot(request).await?;
    if late.load(Ordering::Acquire) {
        debug!(
            "a request body did not arrive within {} ms",
            body_read_timeout.as_millis()
        );
        return Ok(body_timeout_response(body_read_timeout));
    }
    Ok(response)
}

fn body_timeout_response(limit: Duration) -> Response<Body> {
    let mut response = (
        StatusCode::REQUEST_TIMEOUT,
        axum::Json(json!({
            "error": format!("the request body did not arrive within {} ms", limit.as_millis())
        })),
    )
        .into_response();
    // Hyper closes the connection after a response that says so; the rest of the body is
    // never read.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Answers a connection over the cap with 503 and closes it, all within [`REFUSAL_LINGER`].
/// The answer waits for the request head (HTTP clients treat an answer to a request they
/// have not sent yet as a protocol error); afterwards the client's bytes are read and
/// discarded until it closes, because closing a socket with unread input resets the
/// connection, and a reset can destroy the answer before the client reads it.
async fn refuse(mut stream: TcpStream) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{BUSY_BODY}",
        BUSY_BODY.len()
    );
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        let mut head = Vec::new();
        let mut buf = [0_u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REFUSED_HEAD {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            head.extend_from_slice(&buf[..n]);
        }
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        while stream.read(&mut buf).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
enum BodyReadError {
    /// The deadline passed before the body was complete.
    #[error("the request body did not arrive within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The connection failed while reading.
    #[error("reading the request body failed: {0}")]
    Read(#[from] hyper::Error),
}

/// A request body that fails once its deadline passes, however the bytes trickle in. The
/// timer is created only when a read has to wait, so requests without a body (or whose body
/// is already buffered) cost nothing.
struct DeadlineBody {
    inner: Incoming,
    deadline: Instant,
    limit: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    late: Arc<AtomicBool>,
}

impl DeadlineBody {
    fn new(inner: Incoming, limit: Duration, late: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            deadline: Instant::now() + limit,
            limit,
            timer: None,
            late,
        }
    }

    fn timed_out(&self) -> Poll<Option<Result<Frame<Bytes>, BodyReadError>>> {
        self.late.store(true, Ordering::Release);
        Poll::Ready(Some(Err(BodyReadError::TimedOut(self.limit))))
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = BodyReadError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            // A body whose bytes are always ready when asked for is still bounded.
            Poll::Ready(Some(Ok(_))) if Instant::now() >= this.deadline => this.timed_out(),
            Poll::Ready(frame) => {
                Poll::Ready(frame.map(|frame| frame.map_err(BodyReadError::from)))
            }
            Poll::Pending => {
                let deadline = this.deadline;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => this.timed_out(),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
