//! A real `mcpapp-gateway serve` hosting the scenario's server as the HTTP app `conformance`
//! with an empty tool prefix, on `127.0.0.1:0`, in a temporary folder of its own; stopped
//! with SIGTERM (as a service manager stops it) when the scenario is done.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// The app id the scenario's server is hosted under (as the server side hosts the reference
/// server).
pub(crate) const APP_ID: &str = "conformance";
/// How long the gateway may take to listen and the app to settle. Above the app's startup
/// timeout, so a failed start is reported by the gateway rather than by this bound.
const SETTLE: Duration = Duration::from_secs(40);
/// The app's startup and request timeouts (seconds): below the suite's client timeout.
const STARTUP_SECONDS: u64 = 20;
const REQUEST_SECONDS: u64 = 20;
/// How often the app's state is read while it settles.
const POLL: Duration = Duration::from_millis(50);
/// How long a stopped gateway may take to exit before it is killed.
const STOP: Duration = Duration::from_secs(10);

/// A running gateway.
#[derive(Debug)]
pub(crate) struct Gateway {
    child: Child,
    base: String,
    /// The app as `/apps/conformance` showed it once it settled.
    app: Value,
    /// The configuration and app folder; removed when the gateway is dropped.
    _folder: tempfile::TempDir,
}

/// `mcpapp-gateway` in this program's own folder (cargo builds both into `target/debug`).
pub(crate) fn beside_me() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding this program's path")?;
    let bin = me.with_file_name("mcpapp-gateway");
    ensure!(
        bin.is_file(),
        "no gateway at {}; build it (cargo build -p mcpapp-gateway) or pass --gateway PATH",
        bin.display()
    );
    Ok(bin)
}

impl Gateway {
    /// Writes the app folder (the manifest with `extras` merged in) and the configuration,
    /// starts the gateway, and waits until the app has settled and its model-visible tools
    /// are registered (so `/mcp` lists them).
    /// `settings` is merged into the configuration, `env` set in the gateway's environment.
    pub(crate) async fn start(
        bin: &Path,
        url: &str,
        extras: &Value,
        settings: &Value,
        env: &[(String, String)],
    ) -> anyhow::Result<Self> {
        let folder = tempfile::Builder::new()
            .prefix("conformance-driver-")
            .tempdir()
            .context("creating the gateway's folder")?;
        let config = lay_out(folder.path(), url, extras, settings)?;
        let mut child = Command::new(bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .args(["--bind", "127.0.0.1:0"])
            .current_dir(folder.path())
            // The gateway asks for no token here; one from the caller's environment would
            // only lock the end client out.
            .env_remove("MCPAPP_TOKEN")
            // The OAuth token store's key file is made in the folder, with the store.
            .env_remove("MCPAPP_OAUTH_KEY")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("the gateway's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(SETTLE, lines.next_line())
            .await
            .context("the gateway printed nothing within the startup bound")?
            .context("reading the gateway's stdout")?
            .unwrap_or_default();
        // Keep reading what follows (the sandbox origin): a closed pipe would fail its writes.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let Some(base) = first
            .trim()
            .strip_prefix("listening on ")
            .map(str::to_owned)
        else {
            bail!("the gateway did not start; it printed {first:?} (its log is above on stderr)");
        };
        let app = wait_settled(&base).await?;
        Ok(Self {
            child,
            base,
            app,
            _folder: folder,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The app's lifecycle and last error once it settled.
    pub(crate) fn app(&self) -> &Value {
        &self.app
    }

    /// `GET /apps/conformance` as it stands.
    pub(crate) async fn detail(&self) -> anyhow::Result<Value> {
        get_json(&format!("{}/apps/{APP_ID}", self.base)).await
    }

    /// Whether every model-visible tool in `detail` is registered (so `/mcp` lists it).
    pub(crate) fn tools_registered(&self, detail: &Value) -> bool {
        all_registered(detail)
    }

    /// The names of the app's tools the gateway registered for its agent (its registry's
    /// view of the app, the one a model is offered).
    pub(crate) async fn registered_tools(&self) -> anyhow::Result<Vec<String>> {
        let detail = get_json(&format!("{}/apps/{APP_ID}", self.base)).await?;
        Ok(detail["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["registeredName"].as_str().map(str::to_owned))
            .collect())
    }

    /// SIGTERM, then a bounded wait, then SIGKILL.
    pub(crate) async fn stop(mut self) {
        if let Some(pid) = self
            .child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(nix::unistd::Pid::from_raw)
        {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        if tokio::time::timeout(STOP, self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// `FOLDER/apps/conformance/openclaw.mcpapp.json` and `FOLDER/appsettings.json`.
fn lay_out(
    folder: &Path,
    url: &str,
    extras: &Value,
    more_settings: &Value,
) -> anyhow::Result<PathBuf> {
    let mut manifest = json!({
        "id": APP_ID,
        "name": "MCP conformance test server",
        "description": "The conformance suite's scenario server, hosted by conformance-driver.",
        "version": "1.0.0",
        "transport": "http",
        "url": url,
        // No prefix: the end client calls the scenario's own tool names, also through /mcp.
        "toolNamePrefix": "",
        "startupTimeoutSeconds": STARTUP_SECONDS,
        "requestTimeoutSeconds": REQUEST_SECONDS,
    });
    if let (Some(target), Some(extras)) = (manifest.as_object_mut(), extras.as_object()) {
        target.extend(extras.clone());
    }
    let app_folder = folder.join("apps").join(APP_ID);
    std::fs::create_dir_all(&app_folder)
        .with_context(|| format!("creating {}", app_folder.display()))?;
    let manifest_path = app_folder.join("openclaw.mcpapp.json");
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&manifest)?)
        .with_context(|| format!("writing {}", manifest_path.display()))?;
    let config = folder.join("appsettings.json");
    let mut settings = json!({
        // No restarts and no pings: a failure is final and shows at once, and nothing but
        // the scenario's own traffic reaches the scenario's server.
        "McpApps": {
            "Enabled": true,
            "DiscoveryPaths": ["./apps"],
            "Supervision": { "AutoRestart": false, "HealthCheckIntervalMs": 0 },
            // The secret store and the state directory (the OAuth token store, the apps'
            // state folders) stay in this folder.
            "SecretsFile": "./state/secrets.json",
            "StateDirectory": "./state",
        },
    });
    merge(&mut settings, more_settings);
    std::fs::write(&config, serde_json::to_string_pretty(&settings)?)
        .with_context(|| format!("writing {}", config.display()))?;
    Ok(config)
}

/// Waits until the app left its starting states and, if it runs, every model-visible tool of
/// it is registered; returns its lifecycle and last error.
async fn wait_settled(base: &str) -> anyhow::Result<Value> {
    let started = Instant::now();
    let url = format!("{base}/apps/{APP_ID}");
    loop {
        let detail = get_json(&url).await?;
        let lifecycle = detail["lifecycle"].as_str().unwrap_or_default();
        let starting = matches!(lifecycle, "" | "Discovered" | "Validated" | "Loaded");
        // A running app's tools reach the agent's registry (and /mcp) just after it runs.
        let registering = lifecycle == "Running" && !all_registered(&detail);
        if !(starting || registering) {
            return Ok(json!({
                "lifecycle": lifecycle,
                "lastError": detail["lastError"],
                "protocolVersion": detail["protocolVersion"],
                "tools": detail["toolCount"],
            }));
        }
        ensure!(
            started.elapsed() < SETTLE,
            "the app did not settle within {} s: {detail}",
            SETTLE.as_secs()
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Whether every model-visible tool of an app's detail is registered.
fn all_registered(detail: &Value) -> bool {
    !detail["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|tool| tool["visibility"]["model"] == true && tool["registeredName"].is_null())
}

/// Merges `more` into `into`, objects key by key, anything else replaced.
fn merge(into: &mut Value, more: &Value) {
    match (into, more) {
        (Value::Object(into), Value::Object(more)) => {
            for (key, value) in more {
                merge(into.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (into, more) => *into = more.clone(),
    }
}

async fn get_json(url: &str) -> anyhow::Result<Value> {
    let response = reqwest::get(url)
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .with_context(|| format!("GET {url}: not JSON"))?;
    ensure!(status.is_success(), "GET {url}: {status}: {body}");
    Ok(body)
}
