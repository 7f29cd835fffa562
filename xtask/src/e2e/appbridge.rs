//! The AppBridge test host (`xtask/e2e-appbridge/`): an MCP Apps host page of our own on the
//! official `@modelcontextprotocol/ext-apps` AppBridge and the TypeScript MCP client, with the
//! gateway's `/mcp` as its server. This module installs the pinned npm packages, bundles the
//! page with esbuild and serves it from two loopback origins: the page on one port, the
//! sandbox proxy on another (the MCP Apps spec's different origin).
//!
//! The packages are installed with `npm ci --ignore-scripts` into `target/e2e-appbridge/`
//! and kept there until the committed `package-lock.json` changes, so only the first run (or
//! one after a version bump) talks to the npm registry. Node is the conformance kit's
//! (`conformance::kit`); esbuild runs through its JavaScript API (`build.mjs`), which finds its
//! native binary in the platform package without the install script.

// Running npm and Node is xtask's job.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, ensure};
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::conformance::kit;
use crate::stack::target_dir;

/// The page's own files, embedded so that the install folder can be laid out from them.
const PACKAGE_JSON: &str = include_str!("../../e2e-appbridge/package.json");
const PACKAGE_LOCK: &str = include_str!("../../e2e-appbridge/package-lock.json");
const BUILD_SCRIPT: &str = include_str!("../../e2e-appbridge/build.mjs");
const HOST_SCRIPT: &str = include_str!("../../e2e-appbridge/host.js");
const INDEX_HTML: &str = include_str!("../../e2e-appbridge/index.html");
const SANDBOX_HTML: &str = include_str!("../../e2e-appbridge/sandbox.html");
const SANDBOX_SCRIPT: &str = include_str!("../../e2e-appbridge/sandbox.js");

/// Where `npm ci` records which lockfile the installed `node_modules` came from.
const INSTALLED_LOCK: &str = "node_modules/.e2e-appbridge-lock";

/// The sandbox's policy, inherited by the view's document written into its inner frame. It is
/// the spec's restrictive default with nothing declared: stricter than what the dashboard
/// declares (a host may tighten, never loosen), and enough for a view that talks only to its
/// host.
const SANDBOX_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-inline'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:; \
     font-src 'self'; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'self'";

/// The bundled page, ready to serve.
pub(super) struct Bundle {
    host_js: String,
    /// How long installing (when needed) and bundling took, for the run's report.
    pub(super) prepared_in: std::time::Duration,
    /// Whether `npm ci` ran (false when the cached install matched the lockfile).
    pub(super) installed: bool,
}

/// Installs the packages when the lockfile changed and bundles the page.
pub(super) fn prepare(root: &Path) -> anyhow::Result<Bundle> {
    let started = Instant::now();
    let target = target_dir(root);
    let node = kit::install(root, &target.join("conformance"))?.node;
    let dir = target.join("e2e-appbridge");
    println!("\n==> the AppBridge test host in {}", dir.display());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, text) in [
        ("package.json", PACKAGE_JSON),
        ("package-lock.json", PACKAGE_LOCK),
        ("build.mjs", BUILD_SCRIPT),
        ("host.js", HOST_SCRIPT),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let installed = std::fs::read_to_string(dir.join(INSTALLED_LOCK)).ok();
    let install = installed.as_deref() != Some(PACKAGE_LOCK);
    if install {
        // Scripts stay off: nothing from the registry runs at install time.
        run(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
                .current_dir(&dir),
            "npm ci",
        )?;
        std::fs::write(dir.join(INSTALLED_LOCK), PACKAGE_LOCK)
            .with_context(|| format!("writing {}", dir.join(INSTALLED_LOCK).display()))?;
        println!("  installed the packages of package-lock.json");
    } else {
        println!("  packages already installed from this package-lock.json");
    }
    let dist = dir.join("dist");
    run(
        Command::new(&node)
            .arg("build.mjs")
            .arg(&dist)
            .current_dir(&dir),
        "bundling the page with esbuild",
    )?;
    let bundle = dist.join("host.js");
    let host_js = std::fs::read_to_string(&bundle)
        .with_context(|| format!("reading the bundle {}", bundle.display()))?;
    let prepared_in = started.elapsed();
    println!(
        "  bundled {} ({} KiB) in {:.1} s",
        bundle.display(),
        host_js.len() / 1024,
        prepared_in.as_secs_f64()
    );
    Ok(Bundle {
        host_js,
        prepared_in,
        installed: install,
    })
}

/// Runs `command` with its output on the terminal; a failure names `what`.
fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("{what}: could not start {:?}", command.get_program()))?;
    ensure!(
        status.success(),
        "{what} failed ({status}); its messages are above"
    );
    Ok(())
}

/// The two loopback origins the test host is served from.
pub(super) struct Served {
    /// The page's origin (`http://127.0.0.1:PORT`); the gateway must allow it.
    pub(super) page_origin: String,
    /// The sandbox proxy's URL, on another port.
    pub(super) sandbox_url: String,
}

/// Serves the page (`/`, `/host.js`) and, on a second port, the sandbox proxy
/// (`/sandbox.html` with [`SANDBOX_CSP`], `/sandbox.js`). The servers run until the runtime
/// stops.
pub(super) async fn serve(bundle: Bundle) -> anyhow::Result<Served> {
    let host_js = bundle.host_js;
    let page = Router::new()
        .route("/", get(|| async { html(INDEX_HTML) }))
        .route("/host.js", get(move || async move { script(host_js) }));
    let sandbox = Router::new()
        .route(
            "/sandbox.html",
            get(|| async {
                (
                    [
                        (header::CONTENT_SECURITY_POLICY, SANDBOX_CSP),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    html(SANDBOX_HTML),
                )
            }),
        )
        .route(
            "/sandbox.js",
            get(|| async { script(SANDBOX_SCRIPT.to_owned()) }),
        );
    let page_origin = listen(page).await?;
    let sandbox_origin = listen(sandbox).await?;
    Ok(Served {
        page_origin,
        sandbox_url: format!("{sandbox_origin}/sandbox.html"),
    })
}

fn html(text: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], text)
}

fn script(text: String) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        text,
    )
}

/// Binds `127.0.0.1:0`, serves `router` there and returns the origin.
async fn listen(router: Router) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding a loopback port for the AppBridge test host")?;
    let origin = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(origin)
}
