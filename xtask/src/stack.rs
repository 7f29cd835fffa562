//! The test apps and the gateway, started for real from their built binaries: what `demo`,
//! `e2e` and `conformance` share (processes that stop when dropped, or on a signal to xtask,
//! the demo folder, waiting for apps).

// xtask starts the programs it demonstrates and tests; that is its job.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::http;

/// How long apps may take to settle.
const SETTLE: Duration = Duration::from_secs(60);

/// Whether a started program gets its own process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// Stay in xtask's group, so Ctrl-C in a terminal reaches it too.
    Inherit,
    /// Lead a new group, so stopping it also stops everything it started (a WebDriver
    /// server and its browser).
    Own,
}

/// What happens to a started program's stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdout {
    /// Piped to xtask (see [`start_listening`]).
    Piped,
    /// Discarded.
    Discarded,
    /// Into the same log file as stderr.
    Logged,
}

/// How long a program may take to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Every program started and not yet known to have exited, as (pid, group), so that
/// [`stop_all_on_signal`] can stop them from its own thread while their [`Running`] values
/// belong to the task's thread; and whether that is under way (then nothing new starts).
static STARTED: Mutex<Started> = Mutex::new(Started {
    stopping: false,
    list: Vec::new(),
});

#[derive(Debug)]
struct Started {
    stopping: bool,
    list: Vec<(i32, Group)>,
}

fn started() -> std::sync::MutexGuard<'static, Started> {
    STARTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A program to start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Program<'a> {
    /// A short name for messages.
    pub(crate) name: &'static str,
    /// The executable.
    pub(crate) path: &'a Path,
    /// Its arguments.
    pub(crate) args: &'a [&'a str],
    /// Extra environment variables.
    pub(crate) envs: &'a [(&'a str, &'a str)],
    /// Where its stderr goes.
    pub(crate) log: &'a Path,
}

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    name: &'static str,
    child: Child,
    group: Group,
}

impl Running {
    /// Starts `program`.
    pub(crate) fn start(
        program: &Program<'_>,
        group: Group,
        stdout: Stdout,
    ) -> anyhow::Result<Self> {
        let log = program.log;
        let log_file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let stdout = match stdout {
            Stdout::Piped => Stdio::piped(),
            Stdout::Discarded => Stdio::null(),
            Stdout::Logged => Stdio::from(
                log_file
                    .try_clone()
                    .with_context(|| format!("sharing {}", log.display()))?,
            ),
        };
        let mut command = Command::new(program.path);
        command
            .args(program.args)
            .envs(program.envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(log_file);
        if group == Group::Own {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        // Spawned under the lock, so a signal either sees the child in the list or stops it
        // from starting.
        let mut started = started();
        ensure!(
            !started.stopping,
            "not starting {}: xtask is stopping",
            program.name
        );
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", program.path.display()))?;
        let pid = i32::try_from(child.id()).unwrap_or_default();
        started.list.push((pid, group));
        drop(started);
        Ok(Self {
            name: program.name,
            child,
            group,
        })
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or_default()
    }

    /// The process id.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Forgets the program in [`STARTED`] once it has exited.
    fn exited(&self) {
        let pid = self.pid();
        started().list.retain(|(p, _)| *p != pid);
    }

    /// Stops the program (and its group, if it leads one).
    pub(crate) fn stop(&mut self) {
        self.stop_child();
        self.exited();
    }

    fn stop_child(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let id = self.pid();
        // A negative pid signals the whole process group.
        let target = if self.group == Group::Own { -id } else { id };
        let pid = nix::unistd::Pid::from_raw(target);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop after SIGTERM; killing it", self.name);
        if self.group == Group::Own {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the program at once with SIGKILL, as a crash would end it, and reaps it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.exited();
    }

    /// Waits until the program exits by itself.
    pub(crate) fn wait(&mut self) {
        let _ = self.child.wait();
        self.exited();
    }

    /// The exit status, once the program has exited.
    pub(crate) fn status(&mut self) -> Option<ExitStatus> {
        let status = self.child.try_wait().ok().flatten();
        if status.is_some() {
            self.exited();
        }
        status
    }

    /// Waits until the program exits by itself, at most `within`; past that it is stopped
    /// and this is an error.
    pub(crate) fn wait_within(&mut self, within: Duration) -> anyhow::Result<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.exited();
                return Ok(status);
            }
            if Instant::now() >= deadline {
                self.stop();
                bail!("{} did not finish within {} s", self.name, within.as_secs());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// From now on, SIGINT, SIGTERM or SIGHUP to xtask stops every program it started and still
/// runs (SIGTERM to each, to its whole group if it leads one; SIGKILL after the grace period),
/// then exits with 128 + the signal. Without it, Ctrl-C in a terminal reaches only programs in
/// xtask's own group, and a signal sent to xtask alone (a CI timeout) reaches none.
pub(crate) fn stop_all_on_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal watcher")?;
    // Registered here, before returning, so that no signal in between is missed.
    let (mut interrupt, mut terminate, mut hangup) = {
        let _guard = runtime.enter();
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
        )
    };
    std::thread::spawn(move || {
        let (name, number) = runtime.block_on(async {
            tokio::select! {
                _ = interrupt.recv() => ("SIGINT", nix::sys::signal::Signal::SIGINT),
                _ = terminate.recv() => ("SIGTERM", nix::sys::signal::Signal::SIGTERM),
                _ = hangup.recv() => ("SIGHUP", nix::sys::signal::Signal::SIGHUP),
            }
        });
        eprintln!("\n{name}: stopping every program xtask started");
        stop_all();
        std::process::exit(128 + number as i32);
    });
    Ok(())
}

/// Stops everything in [`STARTED`] without their [`Running`] values (see
/// [`stop_all_on_signal`]).
fn stop_all() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let list = {
        let mut started = started();
        started.stopping = true;
        started.list.clone()
    };
    let target =
        |(pid, group): (i32, Group)| Pid::from_raw(if group == Group::Own { -pid } else { pid });
    for entry in &list {
        let _ = kill(target(*entry), Signal::SIGTERM);
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline && list.iter().any(|(pid, _)| is_alive(*pid)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Whatever is left, also a group's members whose leader has exited.
    for entry in &list {
        let _ = kill(target(*entry), Signal::SIGKILL);
    }
}

/// Whether `pid` still runs: it exists and is not a zombie (`/proc/PID/stat`'s state, after
/// the command name in parentheses, is not `Z`).
fn is_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
        .is_some_and(|state| state != 'Z' && state != 'X')
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `program` in xtask's process group and waits for its `listening on URL` line.
pub(crate) fn start_listening(program: &Program<'_>) -> anyhow::Result<(Running, String)> {
    let mut running = Running::start(program, Group::Inherit, Stdout::Piped)?;
    let stdout = running.child.stdout.take().context("no stdout")?;
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    // Keep reading what follows (the gateway prints its sandbox origin next): a closed pipe
    // would make the program's next write to stdout fail.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let Some(url) = line.trim().strip_prefix("listening on ") else {
        running.stop();
        bail!(
            "{} did not start (it printed {line:?}); see {}",
            program.name,
            program.log.display()
        );
    };
    Ok((running, url.to_owned()))
}

/// Cargo's target folder.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// Writes pretty JSON, creating folders.
pub(crate) fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// Lays out `demo/` with a config and two app folders; `allowed_origins` go to
/// `Gateway.AllowedOrigins` (browser pages on other origins allowed to call the gateway).
pub(crate) fn lay_out(
    demo: &Path,
    grocery_url: &str,
    fixture: &Path,
    allowed_origins: &[&str],
    registry: Option<&str>,
) -> anyhow::Result<PathBuf> {
    if demo.exists() {
        std::fs::remove_dir_all(demo).with_context(|| format!("clearing {}", demo.display()))?;
    }
    write_json(
        &demo.join("mcpapps/grocery-inventory/openclaw.mcpapp.json"),
        &json!({
            "id": "grocery-inventory",
            "name": "Grocery Inventory Dashboard",
            "description": "Multi-store grocery inventory management MCP App with interactive dashboard.",
            "version": "1.0.0",
            "protocolVersion": "2025-11-25",
            "transport": "http",
            "url": grocery_url,
            "hasUi": true,
            "uiResourceUri": "ui://grocery/store-dashboard.html",
            "category": "data",
            "capabilities": ["tools", "resources", "prompts", "completions"],
            "startupTimeoutSeconds": 10,
            "requestTimeoutSeconds": 60,
            "toolNamePrefix": "grocery.",
            "headers": {}
        }),
    )?;
    write_json(
        &demo.join("mcpapps/fixture-stdio/openclaw.mcpapp.json"),
        &json!({
            "id": "fixture-stdio",
            "name": "Fixture (stdio)",
            "version": "0.1.0",
            "protocolVersion": "2025-11-25",
            "transport": "stdio",
            "command": fixture,
            "arguments": ["stdio"],
            "hasUi": true,
            "toolNamePrefix": "fixture.",
        }),
    )?;
    let config = demo.join("appsettings.json");
    let mut settings = json!({
        "McpApps": {
            "Enabled": true,
            "DiscoveryPaths": ["./mcpapps"],
            // The stdio app's HOME and TMPDIR, in its sandbox (docs/security.md).
            "StateDirectory": "./state",
            "AllowlistSemantics": "legacy",
            "Allow": ["*"],
            "Entries": { "grocery-inventory": { "Enabled": true } }
        }
    });
    if !allowed_origins.is_empty() {
        settings["Gateway"] = json!({ "AllowedOrigins": allowed_origins });
    }
    // The page's "Add apps" view searches this registry; secrets go beside, not under,
    // the discovery path.
    if let Some(url) = registry {
        settings["McpApps"]["Registries"] = json!([{ "Name": "local", "Url": url }]);
        settings["McpApps"]["SecretsFile"] = json!("./state/secrets.json");
    }
    write_json(&config, &settings)?;
    Ok(config)
}

/// Polls `/apps` (sending `headers`) until every app has settled, printing changes.
pub(crate) fn wait_for_apps(base: &str, headers: &[(&str, &str)]) -> anyhow::Result<Value> {
    wait_settled(base, headers, true)
}

/// [`wait_for_apps`] without printing (for many apps).
pub(crate) fn wait_for_apps_quietly(base: &str, headers: &[(&str, &str)]) -> anyhow::Result<Value> {
    wait_settled(base, headers, false)
}

fn wait_settled(base: &str, headers: &[(&str, &str)], print: bool) -> anyhow::Result<Value> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let apps = http::request("GET", &format!("{base}/apps"), headers, None)?.json()?;
        let states: Vec<String> = apps["apps"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|a| {
                        format!(
                            "{} {}",
                            a["id"].as_str().unwrap_or("?"),
                            a["lifecycle"].as_str().unwrap_or("?")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let line = states.join(", ");
        if print && line != last {
            println!("  apps: {line}");
            last = line;
        }
        let settled = apps["apps"].as_array().is_some_and(|list| {
            list.iter()
                .all(|a| !matches!(a["lifecycle"].as_str(), Some("Validated" | "Loaded")))
        });
        // Running apps' tools reach the agent's registry just after; wait for those too.
        if settled && tools_registered(base, &apps, headers)? {
            return Ok(apps);
        }
        ensure!(
            started.elapsed() < SETTLE,
            "apps did not settle within {} s",
            SETTLE.as_secs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether every running app's model-visible tools are registered for the agent.
fn tools_registered(base: &str, apps: &Value, headers: &[(&str, &str)]) -> anyhow::Result<bool> {
    for app in apps["apps"].as_array().into_iter().flatten() {
        if app["lifecycle"] != "Running" {
            continue;
        }
        let id = app["id"].as_str().unwrap_or_default();
        let detail = http::request("GET", &format!("{base}/apps/{id}"), headers, None)?.json()?;
        let missing = detail["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|tool| tool["visibility"]["model"] == true && tool["registeredName"].is_null());
        if missing {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Builds the binaries the stack runs.
pub(crate) fn build(root: &Path) -> anyhow::Result<()> {
    crate::util::cargo(
        root,
        &[
            "build",
            "-p",
            "mcpapp-gateway",
            "-p",
            "grocery-inventory",
            "-p",
            "fixture-app",
            "-p",
            "mcp-registry",
            "-p",
            "oauth-server",
        ],
    )
}

/// How to start the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackOptions<'a> {
    /// The folder for the configuration and app folders (cleared first).
    pub(crate) folder: &'a Path,
    /// The folder for the programs' logs.
    pub(crate) logs: &'a Path,
    /// Options for `grocery-inventory` before its `http` mode (e.g. `--csp-connect-domain`).
    pub(crate) grocery_options: &'a [&'a str],
    /// A bearer token for the gateway (`MCPAPP_TOKEN`), if any.
    pub(crate) token: Option<&'a str>,
    /// Browser origins besides the gateway's own that may call it (`Gateway.AllowedOrigins`).
    pub(crate) allowed_origins: &'a [&'a str],
    /// An MCP Registry for the page's "Add apps" view (`McpApps.Registries`), if any.
    pub(crate) registry: Option<&'a str>,
    /// Also host `test-apps/oauth-server`'s protected app as the HTTP app `crm`, which waits
    /// for the page's "Connect" (its tokens go to the store in `McpApps.StateDirectory`).
    pub(crate) oauth_app: bool,
}

/// `grocery-inventory` over HTTP and the gateway in front of it, with every app settled.
#[derive(Debug)]
pub(crate) struct Stack {
    /// The gateway; declared first so that it stops first.
    pub(crate) gateway: Running,
    /// The grocery app.
    pub(crate) grocery: Running,
    /// The OAuth-protected app and its authorization server, if asked for (held so that it
    /// stops with the stack).
    _oauth: Option<Running>,
    /// The grocery app's MCP URL (`http://HOST:PORT/mcp`).
    pub(crate) grocery_url: String,
    /// The gateway's base URL (`http://HOST:PORT`).
    pub(crate) base: String,
    /// The gateway's log.
    pub(crate) gateway_log: PathBuf,
    /// `GET /apps` once everything settled.
    pub(crate) apps: Value,
}

/// Starts `grocery-inventory`, lays out `options.folder`, starts the gateway and waits for
/// the apps and their tools.
pub(crate) fn start(root: &Path, options: &StackOptions<'_>) -> anyhow::Result<Stack> {
    let bin = target_dir(root).join("debug");
    std::fs::create_dir_all(options.logs)
        .with_context(|| format!("creating {}", options.logs.display()))?;

    println!("\n==> starting grocery-inventory over HTTP");
    let mut grocery_args = options.grocery_options.to_vec();
    grocery_args.extend(["http", "--bind", "127.0.0.1:0"]);
    let grocery_log = options.logs.join("grocery-inventory.log");
    let (grocery, grocery_url) = start_listening(&Program {
        name: "grocery-inventory",
        path: &bin.join("grocery-inventory"),
        args: &grocery_args,
        envs: &[],
        log: &grocery_log,
    })?;
    println!("  {grocery_url}");
    let config = lay_out(
        options.folder,
        &grocery_url,
        &bin.join("fixture-app"),
        options.allowed_origins,
        options.registry,
    )?;
    println!("  app folder: {}", options.folder.display());
    let oauth = if options.oauth_app {
        Some(start_oauth_app(&bin, options)?)
    } else {
        None
    };

    println!("\n==> starting the gateway");
    let gateway_log = options.logs.join("gateway.log");
    let config_arg = config.display().to_string();
    let cache = target_dir(root).join("install-cache").display().to_string();
    let mut envs: Vec<(&str, &str)> = options
        .token
        .map(|token| ("MCPAPP_TOKEN", token))
        .into_iter()
        .collect();
    // Packages the page installs are downloaded once across runs.
    envs.push(("MCPAPP_INSTALL_CACHE", &cache));
    let (gateway, base) = start_listening(&Program {
        name: "mcpapp-gateway",
        path: &bin.join("mcpapp-gateway"),
        args: &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
        envs: &envs,
        log: &gateway_log,
    })?;
    let bearer = options.token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .as_deref()
        .map(|b| ("Authorization", b))
        .into_iter()
        .collect();
    let apps = wait_for_apps(&base, &headers)?;
    Ok(Stack {
        gateway,
        grocery,
        _oauth: oauth,
        grocery_url,
        base,
        gateway_log,
        apps,
    })
}

/// Starts `oauth-server` (an authorization server that signs the user in at once, and the MCP
/// app it protects) and writes the app `crm` into the discovery path.
fn start_oauth_app(bin: &Path, options: &StackOptions<'_>) -> anyhow::Result<Running> {
    println!("\n==> starting oauth-server (an app behind OAuth)");
    let (server, url) = start_listening(&Program {
        name: "oauth-server",
        path: &bin.join("oauth-server"),
        args: &["http", "--bind", "127.0.0.1:0"],
        envs: &[],
        log: &options.logs.join("oauth-server.log"),
    })?;
    println!("  {url}");
    write_json(
        &options.folder.join("mcpapps/crm/openclaw.mcpapp.json"),
        &json!({
            "id": "crm",
            "name": "CRM (behind OAuth)",
            "version": "1.0.0",
            "transport": "http",
            "url": url,
            "toolNamePrefix": "crm.",
        }),
    )?;
    Ok(server)
}

/// Polls `url` until the program serving it answers anything at all over HTTP, at most
/// `within`; fails at once if the program exits first.
pub(crate) fn wait_answering(
    server: &mut Running,
    url: &str,
    log: &Path,
    within: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        if http::request("GET", url, &[], None).is_ok() {
            return Ok(());
        }
        if let Some(status) = server.status() {
            bail!(
                "{} exited ({status}) before answering; see {}",
                server.name,
                log.display()
            );
        }
        ensure!(
            Instant::now() < deadline,
            "{} did not answer on {url} within {} s; see {}",
            server.name,
            within.as_secs(),
            log.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A port that was free a moment ago (for servers that take their port from a variable).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
