//! The serve loop over raw sockets: header and body read timeouts, the connection cap, and
//! graceful shutdown with a bounded drain.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::routing::get;
use futures::StreamExt;
use mcpapp_host::ConnectionLimits;
use mcpapp_testkit::{AppsDir, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Gateway, PATIENCE};

/// How long a test waits for the gateway to close a connection: generous next to the short
/// timeouts configured here, yet below hyper's own 30 s default header timeout, so a test
/// fails if the configured timeouts were not applied.
const CLOSE_BOUND: Duration = Duration::from_secs(20);

fn addr(gateway: &Gateway) -> String {
    gateway.url.strip_prefix("http://").unwrap().to_owned()
}

/// Writes `head`, then (if `trickle`) one more byte every 50 ms, reading whatever comes
/// back. Returns what was read once the gateway closes the connection, or `None` when it
/// was still open after [`CLOSE_BOUND`].
async fn send_until_closed(addr: &str, head: &[u8], trickle: bool) -> Option<String> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    write.write_all(head).await.unwrap();
    let mut received = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let closed = tokio::time::timeout(CLOSE_BOUND, async {
        let mut buf = [0_u8; 4096];
        loop {
            tokio::select! {
                n = read.read(&mut buf) => match n {
                    // A reset counts as closed too: the gateway may close with our bytes unread.
                    Ok(0) | Err(_) => return,
                    Ok(n) => received.extend_from_slice(&buf[..n]),
                },
                _ = tick.tick(), if trickle => {
                    let _ = write.write_all(b"x").await;
                }
            }
        }
    })
    .await;
    closed
        .ok()
        .map(|()| String::from_utf8_lossy(&received).into_owned())
}

/// One `Connection: close` GET on a fresh connection; everything the gateway sent.
async fn raw_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = Vec::new();
    // A read error still leaves what arrived before it in `response`.
    let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response))
        .await
        .unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn a_slow_request_head_is_cut_off_while_others_are_served() {
    let gateway = Gateway::start(AppsDir::new(), |c| {
        c.connections.header_read_timeout = Duration::from_millis(500);
    })
    .await;
    let addr = addr(&gateway);
    let slow = {
        let addr = addr.clone();
        tokio::spawn(async move {
            send_until_closed(
                &addr,
                b"GET /apps/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
                true,
            )
            .await
        })
    };
    // Another client is served normally meanwhile.
    let (status, health) = gateway.get_json("/apps/health").await;
    assert_eq!(status, 200, "{health}");
    let reply = slow
        .await
        .unwrap()
        .expect("the slow connection was still open");
    // Closed without being served.
    assert!(!reply.contains("200 OK"), "{reply}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn idle_keep_alive_connections_close_after_the_header_timeout() {
    let gateway = Gateway::start(AppsDir::new(), |c| {
        c.connections.header_read_timeout = Duration::from_millis(500);
    })
    .await;
    let reply = send_until_closed(
        &addr(&gateway),
        b"GET /apps/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        false,
    )
    .await
    .expect("the idle keep-alive connection was still open");
    // Served once, then closed while waiting for a next request that never came.
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    assert_eq!(reply.matches("HTTP/1.1 ").count(), 1, "{reply}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_trickling_request_body_is_cut_off_as_a_whole() {
    let gateway = Gateway::start(AppsDir::new(), |c| {
        c.connections.body_read_timeout = Duration::from_secs(1);
        c.max_body_bytes = 1024;
    })
    .await;
    let addr = addr(&gateway);
    // A byte every 50 ms: no single read waits long, so only a deadline for the whole body
    // stops it (1000 bytes would take 50 s).
    let slow = {
        let addr = addr.clone();
        tokio::spawn(async move {
            send_until_closed(
                &addr,
                b"POST /apps/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
                true,
            )
            .await
        })
    };
    let (status, health) = gateway.get_json("/apps/health").await;
    assert_eq!(status, 200, "{health}");
    let reply = slow
        .await
        .unwrap()
        .expect("the trickling connection was still open");
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("did not arrive within 1000 ms"), "{reply}");
    // Bodies over the limit still get 413 on the same serve loop.
    let response = reqwest::Client::new()
        .post(format!("{}/apps/chat", gateway.url))
        .header("Content-Type", "application/json")
        .body("x".repeat(4096))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    gateway.shutdown().await;
}

#[tokio::test]
async fn connections_over_the_cap_get_503_until_one_closes() {
    let gateway = Gateway::start(AppsDir::new(), |c| {
        c.connections.max_connections = 2;
        // Long enough that the held connections stay open for the whole test.
        c.connections.header_read_timeout = Duration::from_secs(300);
    })
    .await;
    let addr = addr(&gateway);
    // The kernel hands connections to the gateway in order, so these two fill the cap
    // before the next one is accepted.
    let first = TcpStream::connect(&addr).await.unwrap();
    let _second = TcpStream::connect(&addr).await.unwrap();
    let refused = raw_get(&addr, "/apps/health").await;
    assert!(
        refused.starts_with("HTTP/1.1 503 Service Unavailable"),
        "{refused}"
    );
    assert!(refused.contains("too many connections"), "{refused}");
    // An HTTP client reads the refusal as an ordinary response.
    let response = reqwest::get(format!("{}/apps/health", gateway.url))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);

    // Closing one frees its slot once the gateway notices.
    drop(first);
    let mut served = String::new();
    eventually(PATIENCE, async || {
        served = raw_get(&addr, "/apps/health").await;
        assert!(
            served.starts_with("HTTP/1.1 200") || served.starts_with("HTTP/1.1 503"),
            "{served}"
        );
        served.starts_with("HTTP/1.1 200")
    })
    .await;
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn shutdown_finishes_requests_lets_streams_drain_then_cuts_them() {
    let (entered_tx, mut entered) = tokio::sync::mpsc::channel::<()>(1);
    let (release_tx, release) = tokio::sync::watch::channel(false);
    let app = axum::Router::new()
        .route(
            "/wait",
            get(move || {
                let entered_tx = entered_tx.clone();
                let mut release = release.clone();
                async move {
                    entered_tx.send(()).await.unwrap();
                    release.wait_for(|r| *r).await.unwrap();
                    "done"
                }
            }),
        )
        .route(
            "/stream",
            get(|| async {
                let first = futures::stream::once(async { Ok(Bytes::from_static(b"hello\n")) });
                Body::from_stream(
                    first.chain(futures::stream::pending::<Result<Bytes, Infallible>>()),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(mcpapp_host::serve(
        listener,
        app,
        ConnectionLimits::default(),
        async {
            let _ = stop.await;
        },
        Duration::from_secs(2),
    ));
    let client = reqwest::Client::new();
    let stream = client
        .get(format!("http://{addr}/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let waiting = tokio::spawn(
        client
            .get(format!("http://{addr}/wait"))
            .header("Connection", "close")
            .send(),
    );
    entered.recv().await.unwrap();

    stop_tx.send(()).unwrap();
    // No new connections once shutting down.
    assert!(
        eventually(PATIENCE, async || TcpStream::connect(addr).await.is_err()).await,
        "still accepting after shutdown"
    );
    // The request in progress still gets its answer.
    release_tx.send(true).unwrap();
    let answer = waiting.await.unwrap().unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "done");
    // The endless stream is cut after the drain, and serve returns.
    let mut body = stream.bytes_stream();
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Some(Ok(_)) = body.next().await {}
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived the drain");
    tokio::time::timeout(PATIENCE, server)
        .await
        .expect("serve did not return after the drain")
        .unwrap();
}
