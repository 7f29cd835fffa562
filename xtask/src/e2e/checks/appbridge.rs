//! A real MCP Apps host as `/mcp`'s client: the AppBridge test page (`e2e/appbridge.rs`)
//! connects to the gateway's `/mcp` from its own origin, declares the MCP Apps extension,
//! calls the grocery dashboard tool, reads the UI resource through the URI `/mcp` rewrote and
//! renders the view in its own sandbox proxy; the view's buttons then call tools that
//! AppBridge forwards through `/mcp`, and the app's own REST API shows the change.

use anyhow::{Context, bail, ensure};
use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use super::Checks;
use super::dashboard::grocery_quantity;
use crate::e2e::driver::{BrowserLog, click, js, text, to_top, wait_for, wait_js, wait_text};
use crate::e2e::{Ctx, DASHBOARD, TOKEN};

/// The dashboard's URI as the app lists it, and as `/mcp` must advertise it for an app with a
/// prefix: the app's id in place of the authority.
const APP_URI: &str = "ui://grocery/store-dashboard.html";
const MCP_URI: &str = "ui://grocery-inventory/grocery/store-dashboard.html";

pub(super) async fn host_page(
    client: &Client,
    ctx: &Ctx,
    checks: &mut Checks,
) -> anyhow::Result<()> {
    let host = &ctx.appbridge;
    client
        .goto(&format!("{}/", host.page_origin))
        .await
        .context("opening the AppBridge test page")?;
    wait_js(
        client,
        "the AppBridge test page to load",
        "return window.appbridgeHost ? window.appbridgeHost.state().step : null;",
        |v| v == "ready",
    )
    .await?;
    js(
        client,
        "window.appbridgeHost.open(arguments[0]); return true;",
        vec![json!({
            "mcpUrl": format!("{}/mcp", ctx.base),
            "token": TOKEN,
            "sandboxUrl": host.sandbox_url,
            "tool": DASHBOARD,
        })],
    )
    .await?;
    let state = wait_for("the AppBridge host to render the dashboard", || async {
        let state = js(client, "return window.appbridgeHost.state();", vec![]).await?;
        Ok(match state["step"].as_str() {
            Some("rendered" | "failed") => Ok(state),
            _ => Err(state.to_string()),
        })
    })
    .await?;
    if state["step"] == "failed" {
        bail!("the AppBridge host failed: {}", state["error"]);
    }
    ensure!(
        state["resourceUri"] == MCP_URI && state["mimeType"] == "text/html;profile=mcp-app",
        "the dashboard's resource through /mcp: {state} (the app lists it as {APP_URI})"
    );
    ensure!(
        state["toolResultText"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "the dashboard tool returned no text: {state}"
    );
    checks.pass(&format!(
        "the AppBridge host on {} connected to /mcp with the UI extension, listed {} tools, \
         called {DASHBOARD} and read {MCP_URI}",
        host.page_origin, state["toolCount"]
    ));

    enter_view(client).await?;
    wait_text(
        client,
        "the dashboard to render in AppBridge's view",
        "#status",
        |t| t == "rendered",
    )
    .await?;
    let seen = js(
        client,
        "let top; try { top = 'readable:' + window.top.location.href; } \
         catch (e) { top = 'blocked:' + e.name; } \
         return { top, origin: window.origin, proxied: window.parent !== window.top, \
           stores: Array.from(document.querySelectorAll('[data-store-id] h2'), h => h.textContent) };",
        vec![],
    )
    .await?;
    let sandbox_origin = host
        .sandbox_url
        .strip_suffix("/sandbox.html")
        .unwrap_or(&host.sandbox_url);
    ensure!(
        seen["top"] == "blocked:SecurityError"
            && seen["origin"] == sandbox_origin
            && seen["proxied"] == true,
        "the view is not isolated behind the sandbox proxy on {sandbox_origin}: {seen}"
    );
    let stores: Vec<&str> = seen["stores"]
        .as_array()
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    ensure!(
        stores.len() == 3
            && ["Downtown Market", "Uptown Grocery", "Harbor Foods"]
                .iter()
                .all(|n| stores.iter().any(|s| s.contains(n))),
        "AppBridge's view shows these stores: {seen}"
    );
    checks.pass(&format!(
        "AppBridge rendered the dashboard with the 3 stores in a sandbox proxy on {sandbox_origin}"
    ));

    let before: i64 = text(client, "[data-qty=\"2:1\"]")
        .await?
        .as_str()
        .and_then(|t| t.parse().ok())
        .context("no quantity for store 2 / product 1 in AppBridge's view")?;
    ensure!(
        grocery_quantity(ctx, 2, 1)? == before,
        "AppBridge's view and the app disagree"
    );
    click(client, "[data-adjust=\"2:1:+1\"]").await?;
    let after = before + 1;
    wait_text(
        client,
        "adjust_stock's result to reach the view",
        "[data-qty=\"2:1\"]",
        |t| t == after.to_string(),
    )
    .await?;
    ensure!(
        grocery_quantity(ctx, 2, 1)? == after,
        "the app did not record the adjustment made through AppBridge"
    );
    checks.pass(&format!(
        "the view's adjust button went through AppBridge and /mcp: {before} → {after} (the app agrees)"
    ));

    // refresh_dashboard is app-only: /mcp lists and runs it only for a client that declared
    // the MCP Apps extension.
    click(client, "#refresh").await?;
    wait_text(
        client,
        "refresh_dashboard to answer through /mcp",
        "#message",
        |t| t == "Refreshed.",
    )
    .await?;
    let refreshed = text(client, "[data-qty=\"2:1\"]").await?;
    ensure!(
        refreshed.as_str().and_then(|t| t.parse::<i64>().ok()) == Some(after),
        "after refresh AppBridge's view shows {refreshed}"
    );
    checks.pass("the app-only refresh_dashboard works through /mcp for the extension's client");

    to_top(client).await?;
    js(client, "window.scrollTo(0, 0); return true;", vec![]).await?;
    let shot = ctx.out.join("appbridge-host.png");
    let png = client.screenshot().await.context("taking a screenshot")?;
    std::fs::write(&shot, png).with_context(|| format!("writing {}", shot.display()))?;
    let log = client
        .issue_cmd(BrowserLog)
        .await
        .context("reading the browser console")?;
    let errors: Vec<&str> = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["level"] == "SEVERE")
        .filter_map(|entry| entry["message"].as_str())
        .collect();
    ensure!(
        errors.is_empty(),
        "the AppBridge page's console has errors: {errors:#?}"
    );
    checks.pass("the AppBridge page's console shows no errors");
    Ok(())
}

/// Enters the view's frame: the page's `#view` (the sandbox proxy), then its inner frame.
async fn enter_view(client: &Client) -> anyhow::Result<()> {
    to_top(client).await?;
    for (what, css) in [
        ("the sandbox proxy frame", "#view"),
        ("the view frame", "iframe"),
    ] {
        let frame = wait_for(what, || async {
            Ok(client
                .find(Locator::Css(css))
                .await
                .map_err(|e| e.to_string()))
        })
        .await?;
        frame
            .enter_frame()
            .await
            .with_context(|| format!("entering {what}"))?;
    }
    Ok(())
}
