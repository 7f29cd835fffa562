//! `cargo xtask e2e [--update-docs-screenshot]`: the host page in a real headless Chromium.
//!
//! Builds the gateway and the test apps; starts two small loopback "probe" servers, one
//! declared in the dashboard's CSP (`grocery-inventory --csp-connect-domain`) and one not;
//! starts the gateway with a token, `chromedriver` in its own process group and a fresh
//! headless Chromium; then, through WebDriver and inside the view's nested frames, checks that
//! the page shows the apps, that asking the chat for the grocery dashboard renders it, that the
//! view works over the shared session (adjust, refresh, a refused model-only tool), that it is
//! isolated (another origin, CSP), and that ui/message, theme changes, the "run" action and
//! teardown work. Every wait is a bounded poll on a condition.
//!
//! Saves `target/e2e/host-page.png` (the whole page with the dashboard rendered),
//! `host-page-window.png` (the window, the view in sight; `--update-docs-screenshot` copies it
//! to `docs/host-page.png`) and `host-page-dark.png`. On failure it saves `failure.png`, the browser console and the
//! page's protocol log next to it and prints where they are. Needs `/usr/bin/chromium` and
//! `/usr/bin/chromedriver` (Debian's `chromium` and `chromium-driver`; `MCPAPP_CHROMIUM` and
//! `MCPAPP_CHROMEDRIVER` override the paths).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http;
use crate::stack::{self, Group, Program, Running, StackOptions, Stdout, target_dir};

/// The gateway's token in the test (the page must take it from `?token=`).
const TOKEN: &str = "e2e-token-7f3a";
/// How long any one condition may take.
const PATIENCE: Duration = Duration::from_secs(30);
/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(100);
/// The dashboard tool under its registered (prefixed) name.
const DASHBOARD: &str = "grocery.show_store_inventory_dashboard";
/// The browser window while testing.
const WINDOW: (u32, u32) = (1280, 1000);

/// Where artefacts go and what the checks need to know.
struct Ctx {
    base: String,
    grocery_api: String,
    sandbox_origin: String,
    declared: Probe,
    undeclared: Probe,
    out: PathBuf,
}

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let update_docs = match args {
        [] => false,
        [flag] if flag == "--update-docs-screenshot" => true,
        other => bail!("`e2e` takes only `--update-docs-screenshot`, got {other:?}"),
    };
    let started = Instant::now();
    let chromium = tool_path("MCPAPP_CHROMIUM", "/usr/bin/chromium")?;
    let driver = tool_path("MCPAPP_CHROMEDRIVER", "/usr/bin/chromedriver")?;
    stack::build(root)?;
    let target = target_dir(root);
    let out = target.join("e2e");
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let declared = runtime.block_on(Probe::start("declared"))?;
    let undeclared = runtime.block_on(Probe::start("undeclared"))?;
    let stack = stack::start(
        root,
        &StackOptions {
            folder: &out.join("apps"),
            logs: &logs,
            grocery_options: &["--csp-connect-domain", &declared.origin],
            token: Some(TOKEN),
        },
    )?;
    let bearer = format!("Bearer {TOKEN}");
    let health = http::request(
        "GET",
        &format!("{}/apps/health", stack.base),
        &[("Authorization", &bearer)],
        None,
    )?
    .json()?;
    let sandbox_origin = health["sandbox"]
        .as_str()
        .and_then(|s| s.strip_suffix("/sandbox.html"))
        .context("/apps/health names no sandbox")?
        .to_owned();
    let ctx = Ctx {
        base: stack.base.clone(),
        grocery_api: stack
            .grocery_url
            .strip_suffix("/mcp")
            .unwrap_or(&stack.grocery_url)
            .to_owned(),
        sandbox_origin,
        declared,
        undeclared,
        out: out.clone(),
    };

    println!("\n==> starting chromedriver and headless Chromium");
    let (mut chromedriver, driver_url) = start_chromedriver(&driver, &logs)?;
    let profile = tempfile::Builder::new()
        .prefix("mcpapp-e2e-chromium-")
        .tempdir()
        .context("creating a browser profile folder")?;
    let (checks, outcome) = runtime.block_on(async {
        let client = match connect(&driver_url, &chromium, profile.path()).await {
            Ok(client) => client,
            Err(err) => return (Checks::default(), Err(err)),
        };
        let mut checks = Checks::default();
        let mut result = run_checks(&client, &ctx, &mut checks).await;
        if result.is_ok() {
            result = console_is_clean(&client, &ctx, &mut checks).await;
        }
        if let Err(err) = &result {
            save_failure(&client, &ctx.out, err).await;
        }
        let _ = client.close().await;
        (checks, result)
    });
    chromedriver.stop();
    let gateway_log = stack.gateway_log.clone();
    drop(stack);
    if let Err(err) = outcome {
        eprintln!("  gateway log:     {}", gateway_log.display());
        eprintln!("\ne2e: {} passed, 1 failed", checks.passed);
        return Err(err);
    }
    let screenshot = out.join("host-page.png");
    if update_docs {
        // The window-sized picture reads better in the README than the very tall full page.
        let docs = root.join("docs/host-page.png");
        std::fs::copy(out.join("host-page-window.png"), &docs)
            .with_context(|| format!("copying the screenshot to {}", docs.display()))?;
        println!("updated {}", docs.display());
    }
    println!("\nscreenshot: {}", screenshot.display());
    println!("e2e took {:.1} s in all", started.elapsed().as_secs_f64());
    println!("e2e: {} passed, 0 failed", checks.passed);
    Ok(())
}

fn tool_path(variable: &str, default: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os(variable).map_or_else(|| PathBuf::from(default), PathBuf::from);
    ensure!(
        path.is_file(),
        "{} not found: install Debian's chromium and chromium-driver (as root: apt-get install -y \
         --no-install-recommends chromium chromium-driver; .ci/run does it), or set {variable}",
        path.display()
    );
    Ok(path)
}

// ---- Helpers: probes, chromedriver, WebDriver ----------------------------------------------

/// A loopback HTTP server that answers every request with `{"probe": NAME}` (CORS open) and
/// counts the requests it saw.
struct Probe {
    origin: String,
    hits: Arc<AtomicUsize>,
}

impl Probe {
    async fn start(name: &'static str) -> anyhow::Result<Self> {
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

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Starts chromedriver on a free loopback port and waits until it says it is ready.
fn start_chromedriver(driver: &Path, logs: &Path) -> anyhow::Result<(Running, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let port_arg = format!("--port={port}");
    let log_arg = format!("--log-path={}", logs.join("chromedriver.log").display());
    let running = Running::start(
        &Program {
            name: "chromedriver",
            path: driver,
            args: &[&port_arg, &log_arg, "--allowed-ips=127.0.0.1"],
            envs: &[],
            log: &logs.join("chromedriver.stderr.log"),
        },
        // Its own group: stopping it also stops the browser it started.
        Group::Own,
        Stdout::Discarded,
    )?;
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ready = http::request("GET", &format!("{url}/status"), &[], None)
            .ok()
            .and_then(|r| r.json().ok())
            .is_some_and(|status| status["value"]["ready"] == true);
        if ready {
            return Ok((running, url));
        }
        ensure!(
            Instant::now() < deadline,
            "chromedriver did not become ready on {url}; see {}",
            logs.display()
        );
        std::thread::sleep(POLL);
    }
}

/// Opens a WebDriver session with a fresh headless Chromium.
async fn connect(driver_url: &str, chromium: &Path, profile: &Path) -> anyhow::Result<Client> {
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--lang=en-US",
                format!("--window-size={},{}", WINDOW.0, WINDOW.1),
                format!("--user-data-dir={}", profile.display()),
            ],
        },
        "goog:loggingPrefs": { "browser": "ALL" },
    });
    let Value::Object(capabilities) = capabilities else {
        bail!("capabilities are not an object");
    };
    let mut builder =
        fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
    builder.capabilities(capabilities);
    builder
        .connect(driver_url)
        .await
        .with_context(|| format!("opening a browser session through {driver_url}"))
}

/// WebDriver "Switch To Frame" with a null id: back to the top-level document.
#[derive(Debug)]
struct SwitchToTop;

impl WebDriverCompatibleCommand for SwitchToTop {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/frame", session_id.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (::http::Method, Option<String>) {
        (::http::Method::POST, Some(r#"{"id":null}"#.to_owned()))
    }
}

/// ChromeDriver's browser console log.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (::http::Method, Option<String>) {
        (
            ::http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_owned()),
        )
    }
}

async fn to_top(client: &Client) -> anyhow::Result<()> {
    client.issue_cmd(SwitchToTop).await?;
    Ok(())
}

/// Runs `script` (a function body; `arguments` are `args`) in the current frame.
async fn js(client: &Client, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
    client
        .execute(script, args)
        .await
        .with_context(|| format!("running script: {}", first_line(script)))
}

fn first_line(script: &str) -> &str {
    script.trim().lines().next().unwrap_or_default()
}

/// Polls `probe` until it yields a value, at most [`PATIENCE`]; the timeout error names
/// `what` and the last thing the probe saw.
async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<T, String>>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        let last = match probe().await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(seen)) => seen,
            Err(err) => format!("{err:#}"),
        };
        if Instant::now() >= deadline {
            bail!(
                "timed out after {} s waiting for {what}; last seen: {last}",
                PATIENCE.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the script's value satisfies `accept`.
async fn wait_js(
    client: &Client,
    what: &str,
    script: &str,
    accept: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    wait_for(what, || async {
        let value = js(client, script, vec![]).await?;
        Ok(if accept(&value) {
            Ok(value)
        } else {
            Err(value.to_string())
        })
    })
    .await
}

/// The trimmed text of the first element matching `css` in the current frame, or null.
async fn text(client: &Client, css: &str) -> anyhow::Result<Value> {
    js(
        client,
        "const e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : null;",
        vec![json!(css)],
    )
    .await
}

async fn wait_text(
    client: &Client,
    what: &str,
    css: &str,
    accept: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    wait_for(what, || async {
        let value = text(client, css).await?;
        Ok(match value.as_str() {
            Some(t) if accept(t) => Ok(t.to_owned()),
            _ => Err(value.to_string()),
        })
    })
    .await
}

async fn click(client: &Client, css: &str) -> anyhow::Result<()> {
    let element = wait_for(&format!("{css} to be present"), || async {
        Ok(client
            .find(Locator::Css(css))
            .await
            .map_err(|e| e.to_string()))
    })
    .await?;
    element
        .click()
        .await
        .with_context(|| format!("clicking {css}"))?;
    Ok(())
}

/// Enters the inner frame (the view) of the view shown for tool call `id`.
async fn enter_view(client: &Client, id: &str) -> anyhow::Result<()> {
    to_top(client).await?;
    let outer_css = format!(".view[data-tool-call-id=\"{id}\"] iframe.view-frame");
    let outer = wait_for("the view's sandbox frame", || async {
        Ok(client
            .find(Locator::Css(&outer_css))
            .await
            .map_err(|e| e.to_string()))
    })
    .await?;
    outer
        .enter_frame()
        .await
        .context("entering the sandbox frame")?;
    let inner = wait_for("the view's inner frame", || async {
        Ok(client
            .find(Locator::Css("iframe"))
            .await
            .map_err(|e| e.to_string()))
    })
    .await?;
    inner
        .enter_frame()
        .await
        .context("entering the view frame")?;
    Ok(())
}

/// The host page's record of one view (`window.mcpappHost.views()`), from the top document.
async fn view_record(client: &Client, id: &str) -> anyhow::Result<Value> {
    to_top(client).await?;
    js(
        client,
        "return window.mcpappHost.views().find(v => v.toolCallId === arguments[0]) || null;",
        vec![json!(id)],
    )
    .await
}

fn grocery_quantity(ctx: &Ctx, store: u32, product: u32) -> anyhow::Result<i64> {
    let item = http::request(
        "GET",
        &format!("{}/api/inventory/{store}/{product}", ctx.grocery_api),
        &[],
        None,
    )?
    .json()?;
    item["quantityOnHand"]
        .as_i64()
        .with_context(|| format!("no quantityOnHand in {item}"))
}

/// Resizes the window to show the whole page (the transcript and the apps panel scroll inside
/// it), takes a screenshot and restores the window.
async fn full_page_screenshot(client: &Client, path: &Path) -> anyhow::Result<()> {
    to_top(client).await?;
    let needed = js(
        client,
        "const extra = (id) => { const e = document.getElementById(id); \
         return e ? Math.max(0, e.scrollHeight - e.clientHeight) : 0; }; \
         return document.documentElement.scrollHeight \
           + Math.max(extra('transcript-box'), document.querySelector('.apps-panel').scrollHeight \
           - document.querySelector('.apps-panel').clientHeight);",
        vec![],
    )
    .await?
    .as_u64()
    .unwrap_or(u64::from(WINDOW.1));
    let outer = js(
        client,
        "return window.outerHeight - window.innerHeight;",
        vec![],
    )
    .await?
    .as_u64()
    .unwrap_or(0);
    let height = u32::try_from((needed + outer).min(6000)).unwrap_or(WINDOW.1);
    client.set_window_size(WINDOW.0, height).await?;
    wait_js(
        client,
        "the window to take its new size",
        "return window.innerHeight;",
        |v| {
            v.as_u64()
                .is_some_and(|h| h + outer >= u64::from(height) - 2)
        },
    )
    .await?;
    js(
        client,
        "document.getElementById('transcript-box').scrollTop = 0; \
         document.querySelector('.apps-panel').scrollTop = 0;",
        vec![],
    )
    .await?;
    let png = client.screenshot().await?;
    std::fs::write(path, png).with_context(|| format!("writing {}", path.display()))?;
    client.set_window_size(WINDOW.0, WINDOW.1).await?;
    Ok(())
}

/// Saves the browser console and fails on errors the host page caused (the one expected error
/// is the CSP violation the test provoked in the view).
async fn console_is_clean(client: &Client, ctx: &Ctx, checks: &mut Checks) -> anyhow::Result<()> {
    let log = client
        .issue_cmd(BrowserLog)
        .await
        .context("reading the browser console")?;
    let path = ctx.out.join("browser-console.json");
    std::fs::write(&path, serde_json::to_string_pretty(&log)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let errors: Vec<&str> = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["level"] == "SEVERE")
        .filter_map(|entry| entry["message"].as_str())
        .filter(|message| !message.contains(&ctx.undeclared.origin))
        .collect();
    ensure!(
        errors.is_empty(),
        "the browser console has errors: {errors:#?}"
    );
    checks.pass("the browser console shows no errors but the provoked CSP violation");
    Ok(())
}

/// A window-sized screenshot with the top of the view for tool call `id` in sight (the
/// picture for the README).
async fn window_screenshot(client: &Client, id: &str, path: &Path) -> anyhow::Result<()> {
    to_top(client).await?;
    js(
        client,
        "const card = document.querySelector(arguments[0]); \
         const box = document.getElementById('transcript-box'); \
         box.scrollTop += card.getBoundingClientRect().top - box.getBoundingClientRect().top - 12;",
        vec![json!(format!(".msg-tool[data-tool-call-id=\"{id}\"]"))],
    )
    .await?;
    let png = client.screenshot().await?;
    std::fs::write(path, png).with_context(|| format!("writing {}", path.display()))
}

async fn save_failure(client: &Client, out: &Path, err: &anyhow::Error) {
    eprintln!("\ne2e failed: {err:#}");
    let _ = to_top(client).await;
    let shot = out.join("failure.png");
    if let Ok(png) = client.screenshot().await
        && std::fs::write(&shot, png).is_ok()
    {
        eprintln!("  screenshot:      {}", shot.display());
    }
    let console = out.join("browser-console.json");
    if let Ok(log) = client.issue_cmd(BrowserLog).await
        && std::fs::write(
            &console,
            serde_json::to_string_pretty(&log).unwrap_or_default(),
        )
        .is_ok()
    {
        eprintln!("  browser console: {}", console.display());
    }
    let page_log = out.join("host-page-log.json");
    if let Ok(log) = js(
        client,
        "return window.mcpappHost ? {views: window.mcpappHost.views(), log: window.mcpappHost.log(), \
         transcript: document.getElementById('transcript').innerText} : null;",
        vec![],
    )
    .await
        && std::fs::write(&page_log, serde_json::to_string_pretty(&log).unwrap_or_default())
            .is_ok()
    {
        eprintln!("  page log:        {}", page_log.display());
    }
}

// ---- The checks -----------------------------------------------------------------------------

/// Counts and prints passed checks.
#[derive(Debug, Default)]
struct Checks {
    passed: usize,
}

impl Checks {
    fn pass(&mut self, what: &str) {
        self.passed += 1;
        println!("  ok {:>2}  {what}", self.passed);
    }
}

async fn run_checks(client: &Client, ctx: &Ctx, checks: &mut Checks) -> anyhow::Result<()> {
    println!("\n==> checking the host page in Chromium");
    open_page(client, ctx, checks).await?;
    let id = dashboard_from_chat(client, checks).await?;
    inside_the_view(client, ctx, &id, checks).await?;
    isolation(client, ctx, &id, checks).await?;
    host_side(client, &id, checks).await?;
    protocol(client, &id, checks).await?;
    ui_message(client, &id, checks).await?;
    full_page_screenshot(client, &ctx.out.join("host-page.png")).await?;
    checks.pass("a screenshot of the page with the dashboard is saved");
    theme(client, ctx, &id, checks).await?;
    run_action(client, checks).await?;
    teardown(client, &id, checks).await?;
    Ok(())
}

async fn open_page(client: &Client, ctx: &Ctx, checks: &mut Checks) -> anyhow::Result<()> {
    client
        .goto(&format!("{}/?token={TOKEN}", ctx.base))
        .await
        .context("opening the host page")?;
    let url = wait_for("the token to leave the address bar", || async {
        let url = client.current_url().await?;
        Ok(if url.as_str().contains("token") {
            Err(url.to_string())
        } else {
            Ok(url)
        })
    })
    .await?;
    let stored = js(
        client,
        "return sessionStorage.getItem('mcpapp.token');",
        vec![],
    )
    .await?;
    ensure!(stored == TOKEN, "the token was not kept: {stored}");
    checks.pass(&format!(
        "the page moved ?token= into sessionStorage ({url} has none)"
    ));

    for app in ["grocery-inventory", "fixture-stdio"] {
        wait_js(
            client,
            &format!("{app} to show as Running"),
            &format!(
                "const e = document.querySelector('[data-app-id=\"{app}\"]'); \
                 return e ? e.dataset.lifecycle : null;"
            ),
            |v| v == "Running",
        )
        .await?;
    }
    let tools = text(
        client,
        "[data-app-id=\"grocery-inventory\"] .app-counts div:first-child dd",
    )
    .await?;
    ensure!(tools == "14", "the grocery app shows {tools} tools, not 14");
    wait_text(client, "the gateway's health", "#health", |t| {
        t == "Gateway ready"
    })
    .await?;
    checks.pass("the apps panel shows both apps Running, with counts and health");
    Ok(())
}

/// Asks the chat for the dashboard; returns the tool call id.
async fn dashboard_from_chat(client: &Client, checks: &mut Checks) -> anyhow::Result<String> {
    let input = client.find(Locator::Css("#chat-input")).await?;
    input.send_keys(&format!("/call {DASHBOARD} {{}}")).await?;
    click(client, "#chat-send").await?;
    let card = format!(".msg-tool[data-tool-name=\"{DASHBOARD}\"]");
    let id = wait_for("the chat to call the dashboard tool", || async {
        let seen = js(
            client,
            "const e = document.querySelector(arguments[0]); \
             return e ? { id: e.dataset.toolCallId } \
               : { transcript: document.getElementById('transcript').innerText };",
            vec![json!(card)],
        )
        .await?;
        Ok(match seen["id"].as_str() {
            Some(id) => Ok(id.to_owned()),
            None => Err(format!("transcript: {}", seen["transcript"])),
        })
    })
    .await?;
    wait_js(
        client,
        "the tool call to finish",
        &format!("return document.querySelector('{card}').dataset.status || null;"),
        |v| v == "done",
    )
    .await?;
    wait_js(
        client,
        "the view to initialise",
        &format!(
            "const v = document.querySelector('.view[data-tool-call-id=\"{id}\"]'); \
             return v ? v.dataset.state : null;"
        ),
        |v| v == "initialized",
    )
    .await?;
    checks.pass(&format!(
        "the chat called {DASHBOARD} (call {id}) and the page opened its view"
    ));
    Ok(id)
}

async fn inside_the_view(
    client: &Client,
    ctx: &Ctx,
    id: &str,
    checks: &mut Checks,
) -> anyhow::Result<()> {
    enter_view(client, id).await?;
    wait_text(client, "the dashboard to render", "#status", |t| {
        t == "rendered"
    })
    .await?;
    let stores = js(
        client,
        "return Array.from(document.querySelectorAll('[data-store-id]'), \
         s => s.querySelector('h2').textContent);",
        vec![],
    )
    .await?;
    let names: Vec<&str> = stores
        .as_array()
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    ensure!(
        names.len() == 3
            && ["Downtown Market", "Uptown Grocery", "Harbor Foods"]
                .iter()
                .all(|n| names.iter().any(|s| s.contains(n))),
        "the dashboard shows these stores: {stores}"
    );
    checks.pass("inside the view: initialised, got the tool result, shows the 3 stores");

    let before: i64 = text(client, "[data-qty=\"1:1\"]")
        .await?
        .as_str()
        .and_then(|t| t.parse().ok())
        .context("no quantity for store 1 / product 1")?;
    ensure!(
        grocery_quantity(ctx, 1, 1)? == before,
        "the view and the app disagree"
    );
    click(client, "[data-adjust=\"1:1:+1\"]").await?;
    let after = before + 1;
    wait_text(
        client,
        "the quantity to change",
        "[data-qty=\"1:1\"]",
        |t| t == after.to_string(),
    )
    .await?;
    let message = text(client, "#message").await?;
    ensure!(
        message.as_str().is_some_and(|m| m.contains('→')),
        "unexpected message {message}"
    );
    ensure!(
        grocery_quantity(ctx, 1, 1)? == after,
        "the app did not record the adjustment"
    );
    checks.pass(&format!(
        "the adjust button changed the stock {before} → {after} through tools/call (the app agrees)"
    ));
    window_screenshot(client, id, &ctx.out.join("host-page-window.png")).await?;
    enter_view(client, id).await?;

    click(client, "#refresh").await?;
    wait_text(client, "refresh_dashboard to answer", "#message", |t| {
        t == "Refreshed."
    })
    .await?;
    let refreshed = text(client, "[data-qty=\"1:1\"]").await?;
    ensure!(
        refreshed.as_str().and_then(|t| t.parse::<i64>().ok()) == Some(after),
        "after refresh the view shows {refreshed}"
    );
    checks.pass("the app-only refresh_dashboard works from the view");

    click(client, "#reset").await?;
    let refused = wait_text(client, "reset_inventory to be refused", "#message", |t| {
        t.starts_with("reset_inventory")
    })
    .await?;
    ensure!(
        refused.starts_with("reset_inventory refused:")
            && refused.contains("cannot be called from an app view"),
        "the model-only tool was not refused: {refused}"
    );
    ensure!(
        grocery_quantity(ctx, 1, 1)? == after,
        "reset_inventory reached the app"
    );
    checks.pass("the model-only reset_inventory is refused to the view and never runs");
    Ok(())
}

async fn isolation(
    client: &Client,
    ctx: &Ctx,
    id: &str,
    checks: &mut Checks,
) -> anyhow::Result<()> {
    enter_view(client, id).await?;
    let probe = js(
        client,
        "let top; try { top = 'readable:' + window.top.location.href; } \
         catch (e) { top = 'blocked:' + e.name; } \
         return { top, origin: window.origin, proxied: window.parent !== window.top };",
        vec![],
    )
    .await?;
    ensure!(
        probe["top"] == "blocked:SecurityError",
        "the view can read the host page: {probe}"
    );
    ensure!(
        probe["origin"] == ctx.sandbox_origin.as_str(),
        "the view's origin is {} (sandbox {})",
        probe["origin"],
        ctx.sandbox_origin
    );
    ensure!(
        probe["proxied"] == true,
        "the view is not behind a sandbox proxy"
    );
    checks.pass(&format!(
        "window.top is unreachable from the view (origin {}, behind the proxy)",
        ctx.sandbox_origin
    ));

    let result = client
        .execute_async(
            "const [declared, undeclared, done] = arguments; \
             const violations = []; \
             document.addEventListener('securitypolicyviolation', (e) => \
               violations.push({ directive: e.effectiveDirective || e.violatedDirective, blocked: e.blockedURI })); \
             const attempt = (url) => fetch(url, { cache: 'no-store' }) \
               .then((r) => r.text().then((t) => 'ok:' + t), (e) => 'blocked:' + e.name); \
             Promise.all([attempt(declared + '/d'), attempt(undeclared + '/u')]).then(([a, b]) => { \
               const until = Date.now() + 5000; \
               const finish = () => (violations.length || Date.now() > until) \
                 ? done({ declared: a, undeclared: b, violations }) : setTimeout(finish, 50); \
               finish(); \
             });",
            vec![json!(ctx.declared.origin), json!(ctx.undeclared.origin)],
        )
        .await
        .context("fetching from the view")?;
    ensure!(
        result["declared"] == "ok:{\"probe\":\"declared\"}",
        "the declared origin was not reachable: {result}"
    );
    ensure!(
        result["undeclared"]
            .as_str()
            .is_some_and(|r| r.starts_with("blocked:")),
        "the undeclared origin was reachable: {result}"
    );
    let violation = result["violations"]
        .as_array()
        .and_then(|v| v.first())
        .cloned()
        .unwrap_or(Value::Null);
    ensure!(
        violation["directive"] == "connect-src"
            && violation["blocked"]
                .as_str()
                .is_some_and(|b| b.starts_with(&ctx.undeclared.origin)),
        "no connect-src violation for the undeclared origin: {result}"
    );
    ensure!(
        ctx.undeclared.hits() == 0 && ctx.declared.hits() >= 1,
        "probe requests: declared {}, undeclared {}",
        ctx.declared.hits(),
        ctx.undeclared.hits()
    );
    checks.pass("CSP: the declared origin is reachable, the undeclared one blocked (connect-src) and never contacted");
    Ok(())
}

async fn host_side(client: &Client, id: &str, checks: &mut Checks) -> anyhow::Result<()> {
    let record = view_record(client, id).await?;
    ensure!(
        record["initialized"] == true
            && record["sent"]
                == json!([
                    "ui/notifications/tool-input",
                    "ui/notifications/tool-result"
                ]),
        "the host sent {} to the view",
        record["sent"]
    );
    ensure!(
        record["appInfo"]["name"] == "grocery-store-dashboard",
        "the view's appInfo: {}",
        record["appInfo"]
    );
    checks
        .pass("after ui/initialize the host sent tool-input once, then tool-result, nothing else");

    let calls = js(
        client,
        "const sid = window.mcpappHost.sessionId(); \
         const urls = performance.getEntriesByType('resource').map((e) => e.name) \
           .filter((n) => n.includes('/apps/mcp/grocery-inventory')); \
         return { sid, urls, shared: urls.length > 0 && urls.every((u) => \
           new URL(u).searchParams.get('sessionId') === sid) };",
        vec![],
    )
    .await?;
    ensure!(
        calls["shared"] == true,
        "view calls are not attributed to the chat session: {calls}"
    );
    let height = js(
        client,
        "return document.querySelector(arguments[0]).getBoundingClientRect().height;",
        vec![json!(format!(
            ".view[data-tool-call-id=\"{id}\"] iframe.view-frame"
        ))],
    )
    .await?
    .as_f64()
    .unwrap_or_default();
    ensure!(
        height > 600.0,
        "the frame did not follow size-changed ({height} px)"
    );
    checks.pass(&format!(
        "view calls went to /apps/mcp/grocery-inventory?sessionId=<chat session>; the frame grew to {height:.0} px"
    ));
    Ok(())
}

/// Requests the dashboard never makes, sent from the view's own frame through the sandbox.
const PROTOCOL_PROBE: &str = "\
const done = arguments[arguments.length - 1];
const calls = [
  ['ping', {}],
  ['tools/list', {}],
  ['ui/request-display-mode', { mode: 'fullscreen' }],
  ['ui/open-link', { url: 'javascript:alert(1)' }],
  ['ui/update-model-context', { content: [{ type: 'text', text: 'first context' }] }],
  ['ui/update-model-context', { content: [{ type: 'text', text: 'Store 2 is selected' }],
    structuredContent: { storeId: 2 } }],
  ['no/such-method', {}],
];
const answers = {};
const expected = calls.length + 1;
window.addEventListener('message', (event) => {
  const m = event.data;
  if (event.source !== window.parent || !m || typeof m.id !== 'string' || !m.id.startsWith('e2e-')) {
    return;
  }
  answers[m.id] = m;
  if (Object.keys(answers).length === expected) {
    done(answers);
  }
});
calls.forEach(([method, params], i) =>
  window.parent.postMessage({ jsonrpc: '2.0', id: 'e2e-' + i, method, params }, '*'));
window.parent.postMessage({ jsonrpc: '2.0', id: 'e2e-bad' }, '*');
setTimeout(() => done(answers), 10000);";

async fn protocol(client: &Client, id: &str, checks: &mut Checks) -> anyhow::Result<()> {
    enter_view(client, id).await?;
    let answers = client
        .execute_async(PROTOCOL_PROBE, vec![])
        .await
        .context("sending requests from the view")?;
    let answer = |n: &str| answers[format!("e2e-{n}")].clone();
    ensure!(answer("0")["result"] == json!({}), "ping: {}", answer("0"));
    let tools: Vec<&str> = answers["e2e-1"]["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        tools.contains(&"refresh_dashboard")
            && tools.contains(&"adjust_stock")
            && !tools.contains(&"reset_inventory"),
        "tools/list for the view: {tools:?}"
    );
    ensure!(
        answer("2")["result"] == json!({"mode": "inline"}),
        "a mode the view did not declare was granted: {}",
        answer("2")
    );
    ensure!(
        answer("3")["error"]["code"] == -32000,
        "a javascript: link was not refused: {}",
        answer("3")
    );
    ensure!(
        answer("4")["result"] == json!({}) && answer("5")["result"] == json!({}),
        "ui/update-model-context: {} {}",
        answer("4"),
        answer("5")
    );
    ensure!(
        answer("6")["error"]["code"] == -32601,
        "unknown method: {}",
        answer("6")
    );
    ensure!(
        answer("bad")["error"]["code"] == -32600,
        "malformed request: {}",
        answer("bad")
    );
    checks.pass("ping, tools/list (app tools only), display mode (undeclared refused), open-link (javascript: refused), -32601, -32600");

    // A message from a window that is not a view's frame must be ignored.
    to_top(client).await?;
    js(
        client,
        "window.postMessage({ jsonrpc: '2.0', id: 1, method: 'ui/message', \
           params: { role: 'user', content: [{ type: 'text', text: 'forged message' }] } }, '*');",
        vec![],
    )
    .await?;
    // The next turn carries the latest model context and the view's tool calls.
    js(
        client,
        "window.__chatBodies = []; const original = window.fetch; \
         window.fetch = (url, init) => { \
           if (String(url).includes('/apps/chat')) { window.__chatBodies.push(init.body); } \
           return original(url, init); };",
        vec![],
    )
    .await?;
    wait_text(client, "the model-context note", "#composer-notes", |t| {
        t.contains("Context from")
    })
    .await?;
    let input = client.find(Locator::Css("#chat-input")).await?;
    input.send_keys("/tools").await?;
    click(client, "#chat-send").await?;
    let body = wait_js(
        client,
        "the chat request",
        "return window.__chatBodies.length ? JSON.parse(window.__chatBodies[0]) : null;",
        Value::is_object,
    )
    .await?;
    wait_js(
        client,
        "the chat to be idle",
        "return document.getElementById('chat-send').disabled;",
        |v| v == false,
    )
    .await?;
    let context = body["modelContext"].as_str().unwrap_or_default();
    ensure!(
        context.contains("Store 2 is selected")
            && context.contains("\"storeId\":2")
            && !context.contains("first context"),
        "modelContext sent: {context:?}"
    );
    let events: Vec<&str> = body["appEvents"]
        .as_array()
        .map(|e| e.iter().filter_map(|e| e["tool"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        events.iter().any(|t| t.ends_with("adjust_stock"))
            && events.iter().any(|t| t.ends_with("refresh_dashboard"))
            && !events.iter().any(|t| t.ends_with("reset_inventory")),
        "appEvents sent: {events:?}"
    );
    ensure!(
        body["sessionId"] == js(client, "return window.mcpappHost.sessionId();", vec![]).await?,
        "the chat used another session: {}",
        body["sessionId"]
    );
    checks.pass("the next chat turn carried the last model context only and the view's tool calls as appEvents");
    Ok(())
}

async fn ui_message(client: &Client, id: &str, checks: &mut Checks) -> anyhow::Result<()> {
    to_top(client).await?;
    let replies = js(
        client,
        "return document.querySelectorAll('.msg-assistant').length;",
        vec![],
    )
    .await?
    .as_u64()
    .unwrap_or_default();
    enter_view(client, id).await?;
    click(client, "#ask-agent").await?;
    wait_text(client, "the host to accept ui/message", "#message", |t| {
        t == "Sent to the agent."
    })
    .await?;
    to_top(client).await?;
    wait_js(
        client,
        "the view's message to become a chat turn",
        "const users = Array.from(document.querySelectorAll('.msg-user')); \
         const last = users[users.length - 1]; \
         return last ? last.innerText : null;",
        |v| {
            v.as_str()
                .is_some_and(|t| t.contains("via") && t.contains("Please review"))
        },
    )
    .await?;
    wait_js(
        client,
        "the agent to answer it",
        "return document.querySelectorAll('.msg-assistant').length;",
        |v| v.as_u64().is_some_and(|n| n > replies),
    )
    .await?;
    wait_js(
        client,
        "the chat to be idle",
        "return document.getElementById('chat-send').disabled;",
        |v| v == false,
    )
    .await?;
    let forged = js(
        client,
        "return document.getElementById('transcript').innerText.includes('forged message');",
        vec![],
    )
    .await?;
    ensure!(
        forged == false,
        "a message from outside the view frames reached the chat"
    );
    checks.pass("ui/message from the view became a chat turn and the agent answered; a forged one from another window was ignored");
    Ok(())
}

async fn theme(client: &Client, ctx: &Ctx, id: &str, checks: &mut Checks) -> anyhow::Result<()> {
    let earlier = view_record(client, id).await?["contextChanges"]
        .as_array()
        .map_or(0, Vec::len);
    click(client, "#theme-toggle").await?;
    enter_view(client, id).await?;
    wait_js(
        client,
        "the view to follow the theme",
        "return document.documentElement.dataset.theme;",
        |v| v == "dark",
    )
    .await?;
    let record = view_record(client, id).await?;
    // Resizes may send containerDimensions too; the toggle must send the theme alone.
    let changes: Vec<Value> = record["contextChanges"]
        .as_array()
        .map(|all| all.iter().skip(earlier).cloned().collect())
        .unwrap_or_default();
    let with_theme: Vec<&Value> = changes
        .iter()
        .filter(|keys| keys.as_array().is_some_and(|k| k.contains(&json!("theme"))))
        .collect();
    ensure!(
        with_theme == [&json!(["theme"])],
        "host-context-changed after the toggle carried {changes:?}"
    );
    full_page_screenshot(client, &ctx.out.join("host-page-dark.png")).await?;
    click(client, "#theme-toggle").await?;
    checks.pass("the theme toggle sent host-context-changed with only {theme}; the view followed");
    Ok(())
}

async fn run_action(client: &Client, checks: &mut Checks) -> anyhow::Result<()> {
    to_top(client).await?;
    let before = js(
        client,
        "return Array.from(document.querySelectorAll('.msg-tool'), (e) => e.dataset.toolCallId);",
        vec![],
    )
    .await?;
    click(
        client,
        "[data-app-id=\"grocery-inventory\"] .app-tools summary",
    )
    .await?;
    wait_js(
        client,
        "the tool list",
        "const run = document.querySelector('[data-run=\"show_store_inventory_dashboard\"]'); \
         const reset = document.querySelector('[data-run=\"reset_inventory\"]'); \
         return run && reset ? [run.disabled, reset.disabled] : null;",
        |v| *v == json!([false, true]),
    )
    .await?;
    click(client, "[data-run=\"show_store_inventory_dashboard\"]").await?;
    wait_js(
        client,
        "the run dialog",
        "return document.getElementById('run-dialog').open;",
        |v| v == true,
    )
    .await?;
    click(client, "#run-submit").await?;
    let id = wait_for("the run to start", || async {
        let value = js(
            client,
            "const known = arguments[0]; \
             const e = Array.from(document.querySelectorAll('.msg-tool[data-app-id=\"grocery-inventory\"]')) \
               .find((n) => !known.includes(n.dataset.toolCallId)); \
             return e ? e.dataset.toolCallId : null;",
            vec![before.clone()],
        )
        .await?;
        Ok(value.as_str().map(str::to_owned).ok_or_else(|| value.to_string()))
    })
    .await?;
    enter_view(client, &id).await?;
    wait_text(client, "the second dashboard to render", "#status", |t| {
        t == "rendered"
    })
    .await?;
    checks.pass(&format!(
        "the \"run\" action called the tool through the app's session and rendered its view (call {id})"
    ));
    Ok(())
}

async fn teardown(client: &Client, id: &str, checks: &mut Checks) -> anyhow::Result<()> {
    to_top(client).await?;
    click(
        client,
        &format!(".view[data-tool-call-id=\"{id}\"] button[aria-label^=\"Close\"]"),
    )
    .await?;
    let state = wait_js(
        client,
        "the view to close",
        &format!(
            "const v = document.querySelector('.view[data-tool-call-id=\"{id}\"]'); \
             return v.dataset.state === 'closed' \
               ? {{ teardown: v.dataset.teardown, frames: v.querySelectorAll('iframe').length }} : null;"
        ),
        |v| v.is_object(),
    )
    .await?;
    ensure!(
        state["teardown"] == "answered" && state["frames"] == 0,
        "teardown: {state}"
    );
    let record = view_record(client, id).await?;
    ensure!(
        record["sent"]
            .as_array()
            .and_then(|s| s.last())
            .is_some_and(|m| m == "ui/resource-teardown"),
        "the last message to the view: {}",
        record["sent"]
    );
    checks
        .pass("closing sent ui/resource-teardown, waited for the answer, then removed the frames");

    let session = js(client, "return window.mcpappHost.sessionId();", vec![]).await?;
    click(client, "#new-chat").await?;
    let after = wait_js(
        client,
        "a new conversation",
        "const open = window.mcpappHost.views().filter((v) => v.state !== 'closed'); \
         return open.length === 0 && document.querySelectorAll('#transcript > li').length === 0 \
           ? { session: window.mcpappHost.sessionId(), \
               teardowns: window.mcpappHost.views().map((v) => v.teardown) } : null;",
        Value::is_object,
    )
    .await?;
    ensure!(
        after["session"] != session
            && after["teardowns"]
                .as_array()
                .is_some_and(|t| t.len() == 2 && t.iter().all(|t| t == "answered")),
        "new conversation: {after} (was session {session})"
    );
    checks.pass("a new conversation tore down the other view (answered) and started a new session");
    Ok(())
}
