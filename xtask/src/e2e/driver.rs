//! The browser side of `cargo xtask e2e`: chromedriver in its own process group, a WebDriver
//! session with a fresh headless Chromium, the WebDriver commands fantoccini lacks, bounded
//! waits on conditions, moving between the page and a view's nested frames, screenshots, and
//! the artefacts saved when a check fails.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use crate::http;
use crate::stack::{Group, Program, Running, Stdout};

/// How long any one condition may take.
pub(super) const PATIENCE: Duration = Duration::from_secs(30);
/// How often a condition is polled.
pub(super) const POLL: Duration = Duration::from_millis(100);

/// The browser window while testing.
pub(super) const WINDOW: (u32, u32) = (1280, 1000);

/// Starts chromedriver on a free loopback port and waits until it says it is ready.
pub(super) fn start_chromedriver(driver: &Path, logs: &Path) -> anyhow::Result<(Running, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let port_arg = format!("--port={port}");
    let log_arg = format!("--log-path={}", logs.join("chromedriver.log").display());
    let running = Running::start(
        &Program {
            name: "chromedriver",
            path: driver,
            // Warnings and errors only: at its default level (INFO) chromedriver logs every
            // command with its arguments, the keys typed into the page (the gateway's token,
            // an API key) among them.
            args: &[
                &port_arg,
                &log_arg,
                "--log-level=WARNING",
                "--allowed-ips=127.0.0.1",
            ],
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
pub(super) async fn connect(
    driver_url: &str,
    chromium: &Path,
    profile: &Path,
) -> anyhow::Result<Client> {
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
pub(super) struct SwitchToTop;

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
pub(super) struct BrowserLog;

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

pub(super) async fn to_top(client: &Client) -> anyhow::Result<()> {
    client.issue_cmd(SwitchToTop).await?;
    Ok(())
}

/// Runs `script` (a function body; `arguments` are `args`) in the current frame.
pub(super) async fn js(client: &Client, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
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
pub(super) async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> anyhow::Result<T>
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
pub(super) async fn wait_js(
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
pub(super) async fn text(client: &Client, css: &str) -> anyhow::Result<Value> {
    js(
        client,
        "const e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : null;",
        vec![json!(css)],
    )
    .await
}

pub(super) async fn wait_text(
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

pub(super) async fn click(client: &Client, css: &str) -> anyhow::Result<()> {
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
pub(super) async fn enter_view(client: &Client, id: &str) -> anyhow::Result<()> {
    enter_view_at(client, &format!(".view[data-tool-call-id=\"{id}\"]")).await
}

/// Like `enter_view`, for the view matching `view_css` (tool call ids are only unique per
/// page client, so views of two clients can share one).
pub(super) async fn enter_view_at(client: &Client, view_css: &str) -> anyhow::Result<()> {
    to_top(client).await?;
    let outer_css = format!("{view_css} iframe.view-frame");
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
pub(super) async fn view_record(client: &Client, id: &str) -> anyhow::Result<Value> {
    to_top(client).await?;
    js(
        client,
        "return window.mcpappHost.views().find(v => v.toolCallId === arguments[0]) || null;",
        vec![json!(id)],
    )
    .await
}

/// Resizes the window to show the whole page (the transcript and the apps panel scroll inside
/// it), takes a screenshot and restores the window.
pub(super) async fn full_page_screenshot(client: &Client, path: &Path) -> anyhow::Result<()> {
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

/// A window-sized screenshot with the top of the view for tool call `id` in sight (the
/// picture for the README).
pub(super) async fn window_screenshot(
    client: &Client,
    id: &str,
    path: &Path,
) -> anyhow::Result<()> {
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

pub(super) async fn save_failure(client: &Client, out: &Path, err: &anyhow::Error) {
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
