//! `cargo xtask e2e [--update-docs-screenshot]`: the host page in a real headless Chromium.
//!
//! Builds the gateway and the test apps; starts two small loopback "probe" servers, one
//! declared in the dashboard's CSP (`grocery-inventory --csp-connect-domain`) and one not;
//! starts the gateway with a token, `chromedriver` in its own process group and a fresh
//! headless Chromium; then, through WebDriver and inside the view's nested frames, checks that
//! the page shows the apps, that asking the chat for the grocery dashboard renders it, that the
//! view works over the shared session (adjust, refresh, a refused model-only tool), that it is
//! isolated (another origin, CSP), and that ui/message, theme changes, the "run" action and
//! teardown work; then, on a page of its own, that a real MCP Apps host built on the official
//! ext-apps AppBridge (`appbridge.rs`) renders the dashboard through `/mcp` and that the view's
//! buttons reach the app through it. Every wait is a bounded poll on a condition.
//!
//! Saves `target/e2e/host-page.png` (the whole page with the dashboard rendered),
//! `host-page-window.png` (the window, the view in sight; `--update-docs-screenshot` copies it
//! to `docs/host-page.png`), `host-page-dark.png` and `appbridge-host.png` (the AppBridge
//! test host with the dashboard). On failure it saves `failure.png`, the browser console and the
//! page's protocol log next to it and prints where they are. Needs `/usr/bin/chromium` and
//! `/usr/bin/chromedriver` (Debian's `chromium` and `chromium-driver`; `MCPAPP_CHROMIUM` and
//! `MCPAPP_CHROMEDRIVER` override the paths), and `npm` with the conformance kit for the
//! AppBridge test host's packages and Node.
//!
//! `driver.rs` is the browser plumbing (chromedriver, WebDriver commands, bounded waits,
//! frames, screenshots, failure artefacts); `checks/` holds the checks, with the JavaScript
//! they run inside views in files of their own; `origins.rs` the loopback servers the CSP
//! check fetches from; `appbridge.rs` the AppBridge test host (npm install, bundle, its two
//! origins).

mod appbridge;
mod checks;
mod driver;
mod origins;
mod registry;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail, ensure};

use self::checks::Checks;
use self::origins::Probe;
use crate::http;
use crate::stack::{self, StackOptions, target_dir};

/// The gateway's token in the test (the page must take it from `?token=`).
const TOKEN: &str = "e2e-token-7f3a";

/// The dashboard tool under its registered (prefixed) name.
const DASHBOARD: &str = "grocery.show_store_inventory_dashboard";

/// Where artefacts go and what the checks need to know.
pub(super) struct Ctx {
    base: String,
    grocery_api: String,
    sandbox_origin: String,
    declared: Probe,
    undeclared: Probe,
    out: PathBuf,
    /// The fixture-app binary, for a direct client to compare with.
    fixture: PathBuf,
    /// The AppBridge test host's origins.
    appbridge: appbridge::Served,
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
    let bundle = appbridge::prepare(root)?;
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
    let prepared_in = bundle.prepared_in;
    let installed = bundle.installed;
    let test_host = runtime.block_on(appbridge::serve(bundle))?;
    let registry = registry::start(root, &target.join("debug"), &out.join("registry"), &logs)?;
    let stack = stack::start(
        root,
        &StackOptions {
            folder: &out.join("apps"),
            logs: &logs,
            grocery_options: &["--csp-connect-domain", &declared.origin],
            token: Some(TOKEN),
            // The AppBridge test host calls /mcp from its own origin, as an operator would
            // allow an external MCP Apps host page.
            allowed_origins: &[&test_host.page_origin],
            registry: Some(&registry.url),
            oauth_app: true,
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
        fixture: target.join("debug/fixture-app"),
        appbridge: test_host,
    };

    println!("\n==> starting chromedriver and headless Chromium");
    let (mut chromedriver, driver_url) = driver::start_chromedriver(&driver, &logs)?;
    let profile = tempfile::Builder::new()
        .prefix("mcpapp-e2e-chromium-")
        .tempdir()
        .context("creating a browser profile folder")?;
    let (checks, outcome) = runtime.block_on(async {
        let client = match driver::connect(&driver_url, &chromium, profile.path()).await {
            Ok(client) => client,
            Err(err) => return (Checks::default(), Err(err)),
        };
        let mut checks = Checks::default();
        let result = checks::run_all(&client, &ctx, &mut checks).await;
        if let Err(err) = &result {
            driver::save_failure(&client, &ctx.out, err).await;
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
    println!(
        "AppBridge test host: {:.1} s to {} and bundle",
        prepared_in.as_secs_f64(),
        if installed {
            "install"
        } else {
            "check the install"
        }
    );
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
