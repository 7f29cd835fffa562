//! The `probe_*` tools: what a process may do where it runs, tried for real and reported,
//! for the tests of the gateway's app sandbox. Every probe answers `{"ok": bool, "error":
//! text or null, "errno": number or null}` plus what it read; a refusal is a normal answer,
//! never a tool error, so that tests compare outcomes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::tool;
use rmcp::tool_router;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::server::FixtureServer;

/// `probe_open` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct OpenArgs {
    /// The path.
    path: String,
    /// Open for writing (created if missing, appended to) instead of reading.
    #[serde(default)]
    write: bool,
}

/// `probe_list` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ListArgs {
    /// The folder.
    path: String,
}

/// `probe_exec` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ExecArgs {
    /// The program.
    program: String,
    /// Its arguments.
    #[serde(default)]
    args: Vec<String>,
}

/// `probe_connect` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ConnectArgs {
    /// `tcp`, `udp` (a datagram sent), `unix` (a path) or `abstract` (an abstract name).
    kind: String,
    /// `host:port`, a socket path or an abstract name.
    address: String,
}

/// `probe_bind` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct BindArgs {
    /// The loopback TCP port to listen on (0: any).
    port: u16,
}

/// `probe_proxy` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ProxyArgs {
    /// The host to ask the proxy (from `HTTPS_PROXY`) to reach.
    host: String,
    /// Its port.
    port: u16,
}

/// `probe_kill` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct KillArgs {
    /// The process to signal with signal 0 (which only checks permission).
    pid: i32,
}

/// `probe_proc` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ProcArgs {
    /// The process.
    pid: u32,
    /// The file under `/proc/PID/` (`environ`, `mem`, `cmdline`, ...).
    file: String,
}

fn answer(outcome: Result<Value, std::io::Error>) -> CallToolResult {
    let value = match outcome {
        Ok(Value::Object(mut object)) => {
            object.insert("ok".into(), Value::Bool(true));
            object.insert("error".into(), Value::Null);
            object.insert("errno".into(), Value::Null);
            Value::Object(object)
        }
        Ok(other) => json!({"ok": true, "error": null, "errno": null, "value": other}),
        Err(err) => json!({"ok": false, "error": err.to_string(), "errno": err.raw_os_error()}),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

/// Fields of `/proc/self/status`.
fn status_field(status: &str, name: &str) -> Value {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map_or(Value::Null, |v| Value::from(v.trim()))
}

fn connect(kind: &str, address: &str) -> std::io::Result<Value> {
    let timeout = Duration::from_secs(5);
    match kind {
        "tcp" => {
            let addr: SocketAddr = address
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| std::io::Error::other("no address"))?;
            TcpStream::connect_timeout(&addr, timeout)?;
        }
        "udp" => {
            let socket = UdpSocket::bind("127.0.0.1:0")?;
            socket.send_to(b"probe", address)?;
        }
        "unix" => {
            std::os::unix::net::UnixStream::connect(address)?;
        }
        "abstract" => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(address.as_bytes())?;
            std::os::unix::net::UnixStream::connect_addr(&addr)?;
        }
        other => return Err(std::io::Error::other(format!("unknown kind {other}"))),
    }
    Ok(json!({}))
}

/// Asks the proxy in `HTTPS_PROXY` for a tunnel to `host:port`, sends a GET through it and
/// returns the proxy's status line and, once through, the server's answer.
fn through_proxy(host: &str, port: u16) -> std::io::Result<Value> {
    let proxy =
        std::env::var("HTTPS_PROXY").map_err(|_| std::io::Error::other("no HTTPS_PROXY"))?;
    let authority = proxy.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
    )?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte)? == 1 {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.lines().next().unwrap_or_default().to_owned();
    if !status.contains(" 200 ") {
        let mut body = String::new();
        let _ = stream.read_to_string(&mut body);
        return Ok(json!({"proxyStatus": status, "body": body}));
    }
    write!(stream, "GET / HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(json!({"proxyStatus": status, "body": answer}))
}

#[tool_router(router = probe_router, vis = "pub(crate)")]
impl FixtureServer {
    /// Open a path for reading (the first 4 KiB are returned as `text`) or writing (one line
    /// appended); `{ok, error, errno, text}`.
    #[tool]
    fn probe_open(&self, Parameters(args): Parameters<OpenArgs>) -> CallToolResult {
        answer(if args.write {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&args.path)
                .and_then(|mut f| f.write_all(b"probe\n"))
                .map(|()| json!({}))
        } else {
            std::fs::File::open(&args.path).and_then(|f| {
                let mut text = String::new();
                f.take(4096)
                    .read_to_string(&mut text)
                    .map(|_| json!({"text": text}))
            })
        })
    }

    /// List a folder: `{ok, error, errno, names}`.
    #[tool]
    fn probe_list(&self, Parameters(args): Parameters<ListArgs>) -> CallToolResult {
        answer(std::fs::read_dir(&args.path).and_then(|entries| {
            let mut names = entries
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect::<Result<Vec<_>, _>>()?;
            names.sort();
            Ok(json!({"names": names}))
        }))
    }

    /// Run a program to its end: `{ok, error, errno, status, stdout, stderr}` (`ok` is whether
    /// it could be started).
    #[tool]
    fn probe_exec(&self, Parameters(args): Parameters<ExecArgs>) -> CallToolResult {
        // The probe's whole point is to start what it is asked to, as an app may.
        #[allow(clippy::disallowed_methods)]
        let output = std::process::Command::new(&args.program)
            .args(&args.args)
            .stdin(std::process::Stdio::null())
            .output();
        answer(output.map(|o| {
            json!({
                "status": o.status.code(),
                "stdout": String::from_utf8_lossy(&o.stdout),
                "stderr": String::from_utf8_lossy(&o.stderr),
            })
        }))
    }

    /// Open a socket of a kind and connect it (or send a datagram): `{ok, error, errno}`.
    #[tool]
    fn probe_connect(&self, Parameters(args): Parameters<ConnectArgs>) -> CallToolResult {
        answer(connect(&args.kind, &args.address))
    }

    /// Listen on a loopback TCP port: `{ok, error, errno}`.
    #[tool]
    fn probe_bind(&self, Parameters(args): Parameters<BindArgs>) -> CallToolResult {
        answer(std::net::TcpListener::bind(("127.0.0.1", args.port)).map(|_| json!({})))
    }

    /// Reach a host through the egress proxy in HTTPS_PROXY (CONNECT, then GET /):
    /// `{ok, error, errno, proxyStatus, body}`.
    #[tool]
    fn probe_proxy(&self, Parameters(args): Parameters<ProxyArgs>) -> CallToolResult {
        answer(through_proxy(&args.host, args.port))
    }

    /// Send signal 0 to a process (a permission check that delivers nothing): `{ok, error,
    /// errno}`.
    #[tool]
    fn probe_kill(&self, Parameters(args): Parameters<KillArgs>) -> CallToolResult {
        answer(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(args.pid), None)
                .map(|()| json!({}))
                .map_err(std::io::Error::from),
        )
    }

    /// Read `/proc/PID/FILE` (at most 4 KiB): `{ok, error, errno, bytes}`.
    #[tool]
    fn probe_proc(&self, Parameters(args): Parameters<ProcArgs>) -> CallToolResult {
        let path = format!("/proc/{}/{}", args.pid, args.file);
        answer(std::fs::File::open(path).and_then(|f| {
            let mut bytes = Vec::new();
            f.take(4096)
                .read_to_end(&mut bytes)
                .map(|n| json!({"bytes": n}))
        }))
    }

    /// This process's standing: `{ok, capEff, capPrm, capBnd, noNewPrivs, seccomp, uid,
    /// limits}` (`limits` is `/proc/self/limits`).
    #[tool]
    fn probe_status(&self) -> CallToolResult {
        answer(
            std::fs::read_to_string("/proc/self/status").and_then(|status| {
                let limits = std::fs::read_to_string("/proc/self/limits")?;
                Ok(json!({
                    "capEff": status_field(&status, "CapEff:"),
                    "capPrm": status_field(&status, "CapPrm:"),
                    "capBnd": status_field(&status, "CapBnd:"),
                    "noNewPrivs": status_field(&status, "NoNewPrivs:"),
                    "seccomp": status_field(&status, "Seccomp:"),
                    "uid": status_field(&status, "Uid:"),
                    "limits": limits,
                }))
            }),
        )
    }
}
