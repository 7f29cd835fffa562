//! Loopback origins for the CSP check: small HTTP servers that answer every request with
//! `{"probe": NAME}` (CORS open) and count the requests they saw, one declared in the
//! dashboard's CSP and one not.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback HTTP server that answers every request with `{"probe": NAME}` (CORS open) and
/// counts the requests it saw.
pub(super) struct Probe {
    pub(super) origin: String,
    hits: Arc<AtomicUsize>,
}

impl Probe {
    pub(super) async fn start(name: &'static str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let origin = format!("http://{}", listener.local_addr()?);
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut head = vec![0_u8; 8192];
                    let read = stream.read(&mut head).await.unwrap_or(0);
                    // A connection without a request (a preconnect) is not a request.
                    if read == 0 {
                        return;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    let body = format!("{{\"probe\":\"{name}\"}}");
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                         Access-Control-Allow-Origin: *\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Ok(Self { origin, hits })
    }

    pub(super) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}
