//! `cargo xtask cluster`: two `mcpapp-gateway serve` replicas behind a real HAProxy on
//! loopback, run with the committed `deploy/haproxy/haproxy.cfg` as it is (its addresses come
//! from the environment). It checks the affinity scheme of docs/operations.md ("Replicas and
//! the affinity key") end to end:
//!
//! 1. every request of one chat session (its turns, the agent's tool calls, the browser
//!    session of an app, the app list, a view's preparation and its sandbox frame on the
//!    balancer's second port) reaches one replica, named by `Mcpapp-Replica`;
//! 2. another chat session can land on the other replica;
//! 3. a browser session id of one replica presented to the other is refused (404, a JSON-RPC
//!    error saying to initialize again), and an external `/mcp` client, which sends no key,
//!    stays with the replica that issued its `Mcp-Session-Id` while keyless requests spread;
//! 4. after that replica is killed (SIGKILL), the same session's requests reach the survivor
//!    and get clean answers: 404 and "initialize again" for the old browser session, 404 for
//!    the old view, a new session on initialize, the key's own session id in every tool call,
//!    never the other session's.
//!
//! HAProxy is Debian's `haproxy` package; `.ci/run` installs it when it is missing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::http::{self, Response};
use crate::stack::{self, Group, Program, Running, Stdout, start_listening, write_json};

/// How long replicas and the balancer may take to become ready.
const READY: Duration = Duration::from_secs(60);
/// The balancer's config, used as committed.
const HAPROXY_CFG: &str = "deploy/haproxy/haproxy.cfg";
/// The fixture app's id and tool prefix in the cluster.
const FIXTURE: &str = "fixture";
/// The grocery app (a UI, for the sandbox check).
const GROCERY: &str = "grocery";
const GROCERY_VIEW: &str = "ui://grocery/store-dashboard.html";

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    if let Some(extra) = args.first() {
        bail!("`cluster` takes no arguments, got `{extra}`");
    }
    let haproxy = find_haproxy()?;
    stack::build(root)?;
    stack::stop_all_on_signal()?;
    let work = stack::target_dir(root).join("cluster");
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("clearing {}", work.display()))?;
    }
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs)?;
    let bin = stack::target_dir(root).join("debug");
    lay_out_apps(&work, &bin)?;

    // The balancer's ports are fixed before the replicas start: their public sandbox origin
    // names the balancer's sandbox port.
    let lb = format!("127.0.0.1:{}", stack::free_port()?);
    let lb_sandbox = format!("127.0.0.1:{}", stack::free_port()?);
    println!("\n==> starting two replicas");
    let mut replicas = Vec::new();
    for name in ["replica-a", "replica-b"] {
        replicas.push(Replica::start(&work, &bin, name, &lb_sandbox)?);
    }
    for replica in &replicas {
        wait_ready(&format!("{}/readyz", replica.base))?;
        println!(
            "  {} on {} (sandbox {})",
            replica.name, replica.base, replica.sandbox
        );
    }

    println!("\n==> starting HAProxy on {lb} (sandbox {lb_sandbox}) with {HAPROXY_CFG}");
    let cfg = root.join(HAPROXY_CFG);
    let cfg_arg = cfg.display().to_string();
    let haproxy_log = logs.join("haproxy.log");
    let addr = |base: &str| base.trim_start_matches("http://").to_owned();
    let (r1, r2) = (addr(&replicas[0].base), addr(&replicas[1].base));
    let (s1, s2) = (addr(&replicas[0].sandbox), addr(&replicas[1].sandbox));
    let envs = haproxy_env(&lb, &lb_sandbox, [&r1, &r2, &s1, &s2]);
    let env_refs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let haproxy_arg = haproxy.display().to_string();
    crate::util::run(&haproxy_arg, &["-c", "-q", "-f", &cfg_arg], &env_refs)
        .with_context(|| format!("haproxy -c refused {HAPROXY_CFG}"))?;
    let _balancer = Running::start(
        &Program {
            name: "haproxy",
            path: &haproxy,
            args: &["-db", "-f", &cfg_arg],
            envs: &env_refs,
            log: &haproxy_log,
        },
        Group::Inherit,
        Stdout::Logged,
    )?;
    let lb = format!("http://{lb}");
    let lb_sandbox = format!("http://{lb_sandbox}");
    wait_ready(&format!("{lb}/readyz"))?;

    let names: Vec<String> = replicas.iter().map(|r| r.name.clone()).collect();
    println!("\n==> one chat session, every request on one replica");
    let first = Conversation::open(&lb, &lb_sandbox, new_key())?;
    first.exercise(3)?;
    println!(
        "  {} -> {} ({} requests)",
        first.key,
        first.replica,
        first.count()
    );

    println!("\n==> another chat session on the other replica");
    let second = (0..64)
        .map(|_| Conversation::open(&lb, &lb_sandbox, new_key()))
        .find(|c| c.as_ref().map_or(true, |c| c.replica != first.replica))
        .context("64 new keys all landed on one replica: the balancer does not hash the key")??;
    second.exercise(2)?;
    println!("  {} -> {}", second.key, second.replica);
    ensure!(
        names.contains(&first.replica) && names.contains(&second.replica),
        "unknown replica names {} and {}",
        first.replica,
        second.replica
    );

    println!("\n==> a browser session of one replica is refused by the other");
    let other = replicas
        .iter()
        .find(|r| r.name == second.replica)
        .context("no second replica")?;
    let direct = first.proxy_request_to(&other.base, &tools_list(90))?;
    expect_reinitialize(&direct, &second.replica)?;
    println!(
        "  {} -> {}: {} {}",
        first.key,
        other.name,
        direct.status,
        direct.body.trim()
    );

    println!("\n==> an external /mcp client without a key sticks to its session's replica");
    // Requests without a key are the balancer's to spread (round-robin, which health checks
    // and retries may bunch up): within 16 they reach both replicas.
    let mut spread: Vec<String> = Vec::new();
    while !names.iter().all(|name| spread.contains(name)) {
        ensure!(
            spread.len() < 16,
            "16 requests without a key all reached one replica: {spread:?}"
        );
        let response = http::request("GET", &format!("{lb}/healthz"), &[], None)?;
        spread.push(
            response
                .header("mcpapp-replica")
                .unwrap_or_default()
                .to_owned(),
        );
    }
    let external = McpClient::connect(&lb)?;
    for id in 2..6 {
        let response = external.request(&tools_list(id))?;
        ensure!(
            response.status == 200 && response.header("mcpapp-replica") == Some(&external.replica),
            "/mcp request {id} of a session of {}: {} from {:?}",
            external.replica,
            response.status,
            response.header("mcpapp-replica")
        );
    }
    println!(
        "  keyless requests spread over {spread:?}; the /mcp session stays on {}",
        external.replica
    );

    println!("\n==> {} is killed (SIGKILL)", first.replica);
    let index = replicas
        .iter()
        .position(|r| r.name == first.replica)
        .context("no first replica")?;
    replicas[index].process.kill();
    // The first session's requests now reach the survivor, which holds none of its state.
    let stale = first.proxy_request(&tools_list(91))?;
    expect_reinitialize(&stale, &second.replica)?;
    println!(
        "  old browser session: {} {}",
        stale.status,
        stale.body.trim()
    );
    let view = http::request("GET", &first.sandbox_url, &[], None)?;
    ensure!(
        view.status == 404 && view.header("mcpapp-replica") == Some(second.replica.as_str()),
        "the dead replica's view through the balancer: {} from {:?}",
        view.status,
        view.header("mcpapp-replica")
    );
    println!("  old view: {} from {}", view.status, second.replica);
    let after = external.request(&tools_list(7))?;
    if external.replica == first.replica {
        expect_reinitialize(&after, &second.replica)?;
        println!(
            "  the /mcp session of {}: {} {}",
            first.replica,
            after.status,
            after.body.trim()
        );
    } else {
        ensure!(
            after.status == 200 && after.header("mcpapp-replica") == Some(&external.replica),
            "the /mcp session on the survivor: {} {}",
            after.status,
            after.body
        );
        println!("  the /mcp session on {} goes on", external.replica);
    }
    // Starting over works, under the same key, on the survivor, with the key's own session.
    let reopened = Conversation::open(&lb, &lb_sandbox, first.key)?;
    ensure!(
        reopened.replica == second.replica,
        "after the kill, {} landed on {}",
        reopened.key,
        reopened.replica
    );
    reopened.exercise(1)?;
    second.exercise(1)?;
    println!(
        "  {} starts over on {}; {} is untouched",
        reopened.key, reopened.replica, second.key
    );
    println!("\ncluster: ok");
    Ok(())
}

/// Debian's HAProxy, or how to get it.
fn find_haproxy() -> anyhow::Result<PathBuf> {
    for candidate in [
        "/usr/sbin/haproxy",
        "/usr/local/sbin/haproxy",
        "/usr/bin/haproxy",
    ] {
        if Path::new(candidate).is_file() {
            return Ok(PathBuf::from(candidate));
        }
    }
    bail!(
        "`cluster` needs HAProxy: as root, run apt-get install -y --no-install-recommends haproxy"
    )
}

fn haproxy_env(lb: &str, lb_sandbox: &str, servers: [&String; 4]) -> Vec<(&'static str, String)> {
    vec![
        ("MCPAPP_LB_BIND", lb.to_owned()),
        ("MCPAPP_LB_SANDBOX_BIND", lb_sandbox.to_owned()),
        ("MCPAPP_REPLICA_1", servers[0].clone()),
        ("MCPAPP_REPLICA_2", servers[1].clone()),
        ("MCPAPP_SANDBOX_1", servers[2].clone()),
        ("MCPAPP_SANDBOX_2", servers[3].clone()),
    ]
}

/// The apps every replica runs (each replica its own processes): the fixture and the grocery
/// app, both over stdio.
fn lay_out_apps(work: &Path, bin: &Path) -> anyhow::Result<()> {
    write_json(
        &work.join("apps/fixture/openclaw.mcpapp.json"),
        &json!({
            "id": FIXTURE, "name": "Fixture", "version": "0.1.0",
            "protocolVersion": "2025-11-25", "transport": "stdio",
            "command": bin.join("fixture-app"), "arguments": ["stdio"],
            "toolNamePrefix": "fixture.",
        }),
    )?;
    write_json(
        &work.join("apps/grocery/openclaw.mcpapp.json"),
        &json!({
            "id": GROCERY, "name": "Grocery", "version": "1.0.0",
            "protocolVersion": "2025-11-25", "transport": "stdio",
            "command": bin.join("grocery-inventory"), "arguments": ["stdio"],
            "hasUi": true, "uiResourceUri": GROCERY_VIEW, "toolNamePrefix": "grocery.",
        }),
    )
}

/// One `serve` replica.
struct Replica {
    name: String,
    base: String,
    sandbox: String,
    process: Running,
}

impl Replica {
    fn start(work: &Path, bin: &Path, name: &str, lb_sandbox: &str) -> anyhow::Result<Self> {
        let sandbox = format!("127.0.0.1:{}", stack::free_port()?);
        let config = work.join(format!("{name}.json"));
        write_json(
            &config,
            &json!({
                "McpApps": {
                    "Enabled": true,
                    "DiscoveryPaths": [work.join("apps")],
                    "StateDirectory": work.join("state"),
                    "AllowlistSemantics": "legacy",
                    "Allow": ["*"]
                },
                "Gateway": {
                    "ReplicaName": name,
                    "SandboxBind": sandbox,
                    "SandboxOrigin": format!("http://{lb_sandbox}")
                }
            }),
        )?;
        let config_arg = config.display().to_string();
        let log = work.join("logs").join(format!("{name}.log"));
        let (process, base) = start_listening(&Program {
            name: "mcpapp-gateway",
            path: &bin.join("mcpapp-gateway"),
            args: &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
            envs: &[],
            log: &log,
        })?;
        Ok(Self {
            name: name.to_owned(),
            base,
            sandbox: format!("http://{sandbox}"),
            process,
        })
    }
}

/// Polls a readiness URL until it answers 200.
fn wait_ready(url: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if http::request("GET", url, &[], None).is_ok_and(|r| r.status == 200) {
            return Ok(());
        }
        ensure!(
            started.elapsed() < READY,
            "{url} was not ready within {} s",
            READY.as_secs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A fresh affinity key, as the host page makes one: a prefix and 32 hex digits.
fn new_key() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut random, &mut bytes);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("cluster-{hex}")
}

fn tools_list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

/// A 404 from `replica` whose JSON-RPC error says to initialize again.
fn expect_reinitialize(response: &Response, replica: &str) -> anyhow::Result<()> {
    ensure!(
        response.status == 404,
        "a session the replica does not hold got {}: {}",
        response.status,
        response.body
    );
    ensure!(
        response.header("mcpapp-replica") == Some(replica),
        "answered by {:?}, not {replica}",
        response.header("mcpapp-replica")
    );
    let error = response.json()?;
    ensure!(
        error["error"]["code"] == -32001
            && error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("initialize")),
        "not a re-initialize error: {error}"
    );
    Ok(())
}

/// An MCP client of `/mcp` through the balancer that sends no affinity key, as external
/// clients do: only its `Mcp-Session-Id`.
struct McpClient {
    url: String,
    session: String,
    replica: String,
}

impl McpClient {
    fn connect(lb: &str) -> anyhow::Result<Self> {
        let url = format!("{lb}/mcp");
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "xtask-cluster-external", "version": "0"}}
        })
        .to_string();
        let init = http::request(
            "POST",
            &url,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            Some(&body),
        )?;
        ensure!(
            init.status == 200,
            "/mcp initialize: {} {}",
            init.status,
            init.body
        );
        let client = Self {
            url,
            session: init
                .header("mcp-session-id")
                .context("/mcp gave no Mcp-Session-Id")?
                .to_owned(),
            replica: init
                .header("mcpapp-replica")
                .context("no Mcpapp-Replica")?
                .to_owned(),
        };
        let initialized =
            client.request(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        ensure!(
            initialized.status == 202
                && initialized.header("mcpapp-replica") == Some(&client.replica),
            "/mcp initialized: {} from {:?}",
            initialized.status,
            initialized.header("mcpapp-replica")
        );
        Ok(client)
    }

    fn request(&self, message: &Value) -> anyhow::Result<Response> {
        http::request(
            "POST",
            &self.url,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", &self.session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            Some(&message.to_string()),
        )
    }
}

/// One chat session through the balancer: its key, the replica it landed on, a browser
/// session of the fixture app opened under it, and a prepared view's sandbox URL.
struct Conversation {
    lb: String,
    key: String,
    replica: String,
    mcp_session: String,
    sandbox_url: String,
    requests: std::cell::Cell<usize>,
}

impl Conversation {
    /// Starts a chat session under `key` (one turn), opens the fixture's browser session and
    /// prepares the grocery view, checking that all of it reached one replica.
    fn open(lb: &str, lb_sandbox: &str, key: String) -> anyhow::Result<Self> {
        let mut conversation = Self {
            lb: lb.to_owned(),
            key,
            replica: String::new(),
            mcp_session: String::new(),
            sandbox_url: String::new(),
            requests: std::cell::Cell::new(0),
        };
        let turn = conversation.chat("/tools")?;
        conversation.replica = turn
            .header("mcpapp-replica")
            .context("no Mcpapp-Replica header on the chat")?
            .to_owned();
        let init = conversation.on_my_replica(
            "initialize",
            conversation.proxy_request(&json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "xtask-cluster", "version": "0"}}
            }))?,
        )?;
        ensure!(
            init.status == 200,
            "initialize: {} {}",
            init.status,
            init.body
        );
        conversation.mcp_session = init
            .header("mcp-session-id")
            .context("initialize gave no Mcp-Session-Id")?
            .to_owned();
        let initialized = conversation.on_my_replica(
            "notifications/initialized",
            conversation
                .proxy_request(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?,
        )?;
        ensure!(
            initialized.status == 202,
            "initialized: {}",
            initialized.status
        );
        let view = conversation.api(
            "POST",
            &format!("/apps/{GROCERY}/views"),
            Some(&json!({ "uri": GROCERY_VIEW }).to_string()),
        )?;
        let sandbox_url = view.json()?["sandboxUrl"]
            .as_str()
            .context("no sandboxUrl")?
            .to_owned();
        ensure!(
            sandbox_url.starts_with(&format!("{lb_sandbox}/sandbox.html?view="))
                && sandbox_url.ends_with(&format!("&affinity={}", conversation.key)),
            "the sandbox URL is not the balancer's with the key: {sandbox_url}"
        );
        conversation.sandbox_url = sandbox_url;
        Ok(conversation)
    }

    fn count(&self) -> usize {
        self.requests.get()
    }

    /// Checks that a response came from this conversation's replica.
    fn on_my_replica(&self, what: &str, response: Response) -> anyhow::Result<Response> {
        self.requests.set(self.requests.get() + 1);
        if !self.replica.is_empty() {
            ensure!(
                response.header("mcpapp-replica") == Some(self.replica.as_str()),
                "{what} of {} reached {:?}, not {}",
                self.key,
                response.header("mcpapp-replica"),
                self.replica
            );
        }
        Ok(response)
    }

    fn chat(&self, message: &str) -> anyhow::Result<Response> {
        let body = json!({ "message": message }).to_string();
        let response = http::request(
            "POST",
            &format!("{}/apps/chat", self.lb),
            &[
                ("Content-Type", "application/json"),
                ("Mcpapp-Affinity", &self.key),
            ],
            Some(&body),
        )?;
        ensure!(
            response.status == 200,
            "chat: {} {}",
            response.status,
            response.body
        );
        let session = response
            .events()
            .into_iter()
            .find(|e| e["type"] == "session")
            .map(|e| e["sessionId"].clone());
        ensure!(
            session == Some(json!(self.key)),
            "the turn ran in session {session:?}, not {}",
            self.key
        );
        self.on_my_replica("a chat turn", response)
    }

    fn api(&self, method: &str, path: &str, body: Option<&str>) -> anyhow::Result<Response> {
        let response = http::request(
            method,
            &format!("{}{path}", self.lb),
            &[
                ("Content-Type", "application/json"),
                ("Mcpapp-Affinity", &self.key),
            ],
            body,
        )?;
        ensure!(
            response.status == 200,
            "{method} {path}: {} {}",
            response.status,
            response.body
        );
        self.on_my_replica(path, response)
    }

    fn proxy_request(&self, message: &Value) -> anyhow::Result<Response> {
        self.proxy_request_to(&self.lb, message)
    }

    /// Sends one message of this conversation's browser session to `base` (the balancer, or
    /// one replica directly).
    fn proxy_request_to(&self, base: &str, message: &Value) -> anyhow::Result<Response> {
        let body = message.to_string();
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcpapp-Affinity", self.key.as_str()),
        ];
        if !self.mcp_session.is_empty() {
            headers.push(("Mcp-Session-Id", self.mcp_session.as_str()));
            headers.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        http::request(
            "POST",
            &format!("{base}/apps/mcp/{FIXTURE}?sessionId={}", self.key),
            &headers,
            Some(&body),
        )
    }

    /// The JSON-RPC reply of a proxy request, whether it came as JSON or as an event stream.
    fn reply(response: &Response) -> anyhow::Result<Value> {
        if response
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            response.events().pop().context("an empty event stream")
        } else {
            response.json()
        }
    }

    /// `rounds` times: a chat turn with a tool call by the agent, the app list and detail, a
    /// browser `tools/list` and `tools/call`, and the sandbox frame, each on this replica;
    /// both tool calls see this session's id and no other.
    fn exercise(&self, rounds: usize) -> anyhow::Result<()> {
        for round in 0..rounds {
            let turn = self.chat(&format!("/call {FIXTURE}.echo_session {{}}"))?;
            let seen: Vec<Value> = turn
                .events()
                .into_iter()
                .filter(|e| e["type"] == "tool_result")
                .collect();
            ensure!(
                seen.len() == 1 && seen[0].to_string().contains(&self.key),
                "the agent's call did not run in {}: {seen:?}",
                self.key
            );
            self.api("GET", "/apps", None)?;
            self.api("GET", &format!("/apps/{FIXTURE}"), None)?;
            let id = 10 + u64::try_from(round).unwrap_or_default() * 2;
            let listed = self.on_my_replica("tools/list", self.proxy_request(&tools_list(id))?)?;
            ensure!(
                listed.status == 200,
                "tools/list: {} {}",
                listed.status,
                listed.body
            );
            let called = self.on_my_replica(
                "tools/call",
                self.proxy_request(&json!({
                    "jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
                    "params": {"name": "echo_session", "arguments": {}}
                }))?,
            )?;
            let result = Self::reply(&called)?;
            ensure!(
                result["result"]["structuredContent"]["sessionId"] == json!(self.key),
                "the browser call of {} saw {result}",
                self.key
            );
            let frame = http::request("GET", &self.sandbox_url, &[], None)?;
            ensure!(frame.status == 200, "the sandbox frame: {}", frame.status);
            self.on_my_replica("the sandbox frame", frame)?;
        }
        Ok(())
    }
}
