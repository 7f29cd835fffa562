//! The HTTP link's connections: a pooled HTTP/1.1 client over TCP (`TCP_NODELAY` on, 10 s to
//! connect) and, for `https://`, rustls with the platform's trust (as reqwest's `rustls`
//! feature has it: `rustls-platform-verifier` over aws-lc-rs).
//!
//! Keep-alive without the 44 ms stall (docs/performance.md, "The 44 ms stall"): a server
//! without `TCP_NODELAY` holds the second small write of an event-stream answer until its
//! first is acknowledged, and Linux delays that ACK by 40 ms on a connection in interactive
//! ("ping-pong") mode, which a reused connection is. So on Linux every read that returned data
//! sets `TCP_QUICKACK`: the kernel then leaves ping-pong mode and sends the ACK it was holding
//! at once (`__tcp_sock_set_quickack` → `tcp_cleanup_rbuf`), which releases the server's held
//! piece. The option is not sticky (the next request sent re-enters ping-pong mode), hence
//! after every read. Elsewhere there is no such option, and connections are not reused.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How long a TCP connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an idle connection is kept: below the 5 s after which uvicorn and Node.js close
/// theirs, so that a request is not sent on a connection the server is closing.
const IDLE_TIMEOUT: Duration = Duration::from_secs(3);
/// Whether quick ACKs can be re-armed here, and so whether connections are reused.
const QUICK_ACKS: bool = cfg!(target_os = "linux");

/// The link's client, with the request body type `B`.
pub(crate) type HttpClient<B> = Client<HttpsConnector<TcpConnector>, B>;

/// What can stop the client from being built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("cannot set up TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// A pooled client (on Linux; one connection per request elsewhere, see the module docs).
pub(crate) fn client<B>() -> Result<HttpClient<B>, ClientError>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    let mut http = HttpConnector::new();
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    // `https://` is allowed through to the TLS layer above.
    http.enforce_http(false);
    let connector = HttpsConnector::from((TcpConnector { http }, tls_config()?));
    Ok(Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_max_idle_per_host(if QUICK_ACKS { usize::MAX } else { 0 })
        .build(connector))
}

/// TLS as reqwest 0.13's `rustls` feature sets it up by default: the process's default
/// crypto provider or aws-lc-rs, TLS 1.2 and 1.3, the platform verifier, HTTP/1.1 by ALPN.
fn tls_config() -> Result<rustls::ClientConfig, ClientError> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone())?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Opens TCP connections (hyper-util's connector: resolution, happy eyeballs, the timeout)
/// and hands them over as [`Tcp`].
#[derive(Debug, Clone)]
pub(crate) struct TcpConnector {
    http: HttpConnector,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<Uri> for TcpConnector {
    type Response = TokioIo<Tcp>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.http.call(uri);
        Box::pin(async move {
            let stream = connecting.await?.into_inner();
            Ok(TokioIo::new(Tcp { stream }))
        })
    }
}

/// A TCP connection that re-arms `TCP_QUICKACK` after every read that returned data (Linux).
#[derive(Debug)]
pub(crate) struct Tcp {
    stream: TcpStream,
}

impl Tcp {
    #[cfg(target_os = "linux")]
    fn quick_ack(&self) {
        // Best effort: a failure only means this ACK may be delayed.
        if let Err(err) = socket2::SockRef::from(&self.stream).set_tcp_quickack(true) {
            tracing::trace!("cannot set TCP_QUICKACK: {err}");
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn quick_ack(&self) {}
}

impl Connection for Tcp {
    fn connected(&self) -> Connected {
        self.stream.connected()
    }
}

impl AsyncRead for Tcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.quick_ack();
        }
        polled
    }
}

impl AsyncWrite for Tcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
