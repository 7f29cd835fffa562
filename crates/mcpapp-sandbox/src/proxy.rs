//! The egress proxy: how an app with host grants reaches those hosts and no others.
//!
//! Landlock filters TCP by port only, so a grant such as `api.example.com:443` cannot be
//! given to the kernel. Instead each such app gets a proxy of its own on a loopback port,
//! which it finds in `HTTPS_PROXY`/`HTTP_PROXY`; its sandbox lets it connect to that port
//! (and the TCP ports granted by number) and nowhere else, so a program that ignores the proxy
//! settings fails closed. The proxy speaks HTTP/1.1 `CONNECT host:port` (what HTTPS clients
//! send) and absolute-form requests (`GET http://host/path`, what plain-HTTP clients send),
//! checks the name against the app's grants, resolves it itself (the app needs no DNS), and
//! never connects to the gateway's own listeners unless their port was granted by number.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mcpapp_manifest::HostPort;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info};

/// Longest request head read from an app.
const MAX_HEAD: usize = 16 * 1024;
/// How long an app has to send its request head, and the proxy to connect onwards.
const TIMEOUT: Duration = Duration::from_secs(15);

/// A running egress proxy; stops (with every connection through it) when dropped.
#[derive(Debug)]
pub struct EgressProxy {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Who may go where.
#[derive(Debug)]
struct Grants {
    app: String,
    hosts: Vec<HostPort>,
    /// The gateway's listening ports: never reached through a name, even one that resolves
    /// to a local address.
    protected: Vec<u16>,
}

impl EgressProxy {
    /// Starts a proxy on a free loopback port for app `app`, allowing `hosts` and never the
    /// local ports `protected`. Must be called within a Tokio runtime.
    ///
    /// # Errors
    /// The I/O error when no loopback port can be bound.
    pub fn start(
        app: &str,
        hosts: impl IntoIterator<Item = HostPort>,
        protected: &[u16],
    ) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let addr = listener.local_addr()?;
        let grants = Arc::new(Grants {
            app: app.to_owned(),
            hosts: hosts.into_iter().collect(),
            protected: protected.to_vec(),
        });
        let span = tracing::info_span!("egress_proxy", app = %app, %addr);
        let task = tokio::spawn(
            async move {
                let mut connections = JoinSet::new();
                loop {
                    tokio::select! {
                        accepted = listener.accept() => match accepted {
                            Ok((stream, _)) => {
                                connections.spawn(serve(stream, grants.clone()).in_current_span());
                            }
                            Err(err) => debug!("accept failed: {err}"),
                        },
                        Some(_) = connections.join_next(), if !connections.is_empty() => {}
                    }
                }
            }
            .instrument(span),
        );
        Ok(Self { addr, task })
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy URL for `HTTPS_PROXY` and `HTTP_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A request head: the target and the bytes to forward for a plain HTTP request.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// `CONNECT host:port`: a tunnel.
    Tunnel { host: String, port: u16 },
    /// `METHOD http://host[:port]/path`: the request to forward, rewritten to origin form.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Reads a request head (up to the blank line) and what follows it in the same reads.
async fn read_head(stream: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), &'static str> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|_| "the request could not be read")?;
        if n == 0 {
            return Err("the connection closed before a request");
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err("the request head is too long");
        }
    }
}

/// Splits `host:port` (a bracketed IPv6 address is allowed), with `default` when there is
/// no port.
fn host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, port.parse().ok()?),
        _ => (authority, default?),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

/// Parses a request head into its target.
fn parse(head: &[u8]) -> Result<Target, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
    let (line, rest) = text.split_once("\r\n").ok_or("no request line")?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("a malformed request line");
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = host_port(target, None).ok_or("CONNECT needs host:port")?;
        return Ok(Target::Tunnel { host, port });
    }
    let after_scheme = target
        .strip_prefix("http://")
        .ok_or("only CONNECT and http:// requests are proxied")?;
    let (authority, path) = match after_scheme.find('/') {
        Some(i) => after_scheme.split_at(i),
        None => (after_scheme, "/"),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = host_port(authority, Some(80)).ok_or("the URL has no host")?;
    let mut forward = format!("{method} {path} {version}\r\n");
    for header in rest.split("\r\n").filter(|h| !h.is_empty()) {
        let name = header.split(':').next().unwrap_or_default().trim();
        if !name.to_ascii_lowercase().starts_with("proxy-") {
            forward.push_str(header);
            forward.push_str("\r\n");
        }
    }
    forward.push_str("\r\n");
    Ok(Target::Forward {
        host,
        port,
        head: forward.into_bytes(),
    })
}

async fn reply(stream: &mut TcpStream, status: &str, message: &str) {
    let body = format!("mcpapp egress proxy: {message}\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Resolves `host` and connects to the first address that is not one of the gateway's
/// listeners.
async fn connect(host: &str, port: u16, protected: &[u16]) -> Result<TcpStream, String> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let local = |ip: IpAddr| ip.is_loopback() || ip.is_unspecified();
    let usable: Vec<SocketAddr> = addresses
        .into_iter()
        .filter(|a| !(local(a.ip()) && protected.contains(&a.port())))
        .collect();
    if usable.is_empty() {
        return Err(format!(
            "{host}:{port} resolves only to the gateway's own listener"
        ));
    }
    let mut last = String::new();
    for address in usable {
        match tokio::time::timeout(TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("cannot connect to {address}: {e}"),
            Err(_) => last = format!("connecting to {address} timed out"),
        }
    }
    Err(last)
}

async fn serve(mut client: TcpStream, grants: Arc<Grants>) {
    let (head, early) = match tokio::time::timeout(TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(problem)) => return reply(&mut client, "400 Bad Request", problem).await,
        Err(_) => return,
    };
    let target = match parse(&head) {
        Ok(target) => target,
        Err(problem) => return reply(&mut client, "400 Bad Request", problem).await,
    };
    let (host, port) = match &target {
        Target::Tunnel { host, port } | Target::Forward { host, port, .. } => (host, *port),
    };
    if !grants.hosts.iter().any(|grant| grant.covers(host, port)) {
        info!(app = %grants.app, "refused {host}:{port}: not granted");
        let message = format!(
            "{host}:{port} is not granted to app {}; grant it in McpApps.Entries.{}.Isolation.Network.Hosts",
            grants.app, grants.app
        );
        return reply(&mut client, "403 Forbidden", &message).await;
    }
    let mut upstream = match connect(host, port, &grants.protected).await {
        Ok(stream) => stream,
        Err(problem) => return reply(&mut client, "502 Bad Gateway", &problem).await,
    };
    debug!(app = %grants.app, "connected to {host}:{port}");
    let first = match target {
        Target::Tunnel { .. } => {
            if client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            early
        }
        Target::Forward { mut head, .. } => {
            head.extend_from_slice(&early);
            head
        }
    };
    if !first.is_empty() && upstream.write_all(&first).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_become_targets() {
        assert_eq!(
            parse(b"CONNECT API.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap(),
            Target::Tunnel {
                host: "api.example.com".into(),
                port: 443
            }
        );
        let forward = parse(
            b"GET http://h.example:8080/a?b HTTP/1.1\r\nHost: h.example:8080\r\nProxy-Authorization: x\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            forward,
            Target::Forward {
                host: "h.example".into(),
                port: 8080,
                head: b"GET /a?b HTTP/1.1\r\nHost: h.example:8080\r\n\r\n".to_vec()
            }
        );
        assert!(matches!(
            parse(b"GET http://h.example HTTP/1.1\r\n\r\n").unwrap(),
            Target::Forward { port: 80, .. }
        ));
        assert_eq!(
            parse(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").unwrap(),
            Target::Tunnel {
                host: "::1".into(),
                port: 443
            }
        );
        for bad in [
            &b"CONNECT host HTTP/1.1\r\n\r\n"[..],
            b"GET /relative HTTP/1.1\r\n\r\n",
            b"GET https://h/ HTTP/1.1\r\n\r\n",
            b"nonsense\r\n\r\n",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
