//! The egress proxy: a granted host is reached by name, anything else is refused, and the
//! gateway's own ports are never reached through a name.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use mcpapp_manifest::HostPort;
use mcpapp_sandbox::EgressProxy;

/// A loopback server that answers every connection with an HTTP/1.0 200 and `body`, after
/// echoing the request line it got into the body.
fn server(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 2048];
            let n = stream.read(&mut buf).unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let line = request.lines().next().unwrap_or_default().to_owned();
            let _ = write!(stream, "HTTP/1.0 200 OK\r\n\r\n{body} <{line}>");
        }
    });
    port
}

/// Sends `request` to the proxy and reads everything it answers.
fn ask(proxy: &EgressProxy, request: &str) -> String {
    let mut stream = TcpStream::connect(proxy.addr()).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// `CONNECT host:port`, then a GET through the tunnel once it is open.
fn tunnel(proxy: &EgressProxy, host: &str, port: u16) -> String {
    let mut stream = TcpStream::connect(proxy.addr()).unwrap();
    write!(
        stream,
        "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    if head.contains(" 200 ") {
        stream.write_all(b"GET /through HTTP/1.0\r\n\r\n").unwrap();
    }
    let mut rest = String::new();
    let _ = stream.read_to_string(&mut rest);
    head + &rest
}

#[tokio::test(flavor = "multi_thread")]
async fn a_granted_name_is_tunnelled_and_everything_else_is_refused() {
    let granted = server("granted");
    let other = server("other");
    let proxy = EgressProxy::start(
        "notes",
        [HostPort::parse(&format!("localhost:{granted}")).unwrap()],
        &[],
    )
    .unwrap();
    let reached = tokio::task::block_in_place(|| tunnel(&proxy, "LocalHost", granted));
    assert!(reached.starts_with("HTTP/1.1 200 "), "{reached}");
    assert!(
        reached.ends_with("granted <GET /through HTTP/1.0>"),
        "{reached}"
    );
    for (host, port) in [("localhost", other), ("127.0.0.1", granted)] {
        let refused = tokio::task::block_in_place(|| tunnel(&proxy, host, port));
        assert!(refused.starts_with("HTTP/1.1 403 "), "{refused}");
        assert!(
            refused.contains(&format!("{host}:{port} is not granted to app notes"))
                && refused.contains("McpApps.Entries.notes.Isolation.Network.Hosts"),
            "{refused}"
        );
    }
    // Plain HTTP in absolute form is forwarded in origin form, without Proxy-* headers.
    let forwarded = tokio::task::block_in_place(|| {
        ask(
            &proxy,
            &format!(
                "GET http://localhost:{granted}/a?b=1 HTTP/1.0\r\nProxy-Authorization: x\r\n\r\n"
            ),
        )
    });
    assert!(
        forwarded.ends_with("granted <GET /a?b=1 HTTP/1.0>"),
        "{forwarded}"
    );
    let bad = tokio::task::block_in_place(|| ask(&proxy, "GET /relative HTTP/1.1\r\n\r\n"));
    assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateways_ports_are_never_reached_through_a_name() {
    let gateway = server("the gateway");
    let proxy = EgressProxy::start(
        "sneaky",
        [HostPort::parse(&format!("localhost:{gateway}")).unwrap()],
        &[gateway],
    )
    .unwrap();
    let refused = tokio::task::block_in_place(|| tunnel(&proxy, "localhost", gateway));
    assert!(refused.starts_with("HTTP/1.1 502 "), "{refused}");
    assert!(refused.contains("the gateway's own listener"), "{refused}");
    assert!(!refused.contains("the gateway <"), "{refused}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_proxy_stops_listening() {
    let proxy = EgressProxy::start("gone", [], &[]).unwrap();
    let addr = proxy.addr();
    assert_eq!(proxy.url(), format!("http://{addr}"));
    drop(proxy);
    let mut refused = false;
    for _ in 0..100 {
        if TcpStream::connect(addr).is_err() {
            refused = true;
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        refused,
        "the proxy still accepts connections after it was dropped"
    );
}
