//! The checks of `cargo xtask e2e`, in the order they run: the grocery dashboard from the
//! chat (`dashboard.rs`), the fixture app's whole results, UI events and elicitations
//! (`fixture.rs`), the apps' sandbox in the apps panel (`sandbox.rs`), the "Add apps" view
//! (`install.rs`), Connect for an app behind OAuth and then its view (`connect.rs`), a clean
//! browser console, then the AppBridge test host on `/mcp` (`appbridge.rs`).

mod appbridge;
mod connect;
mod dashboard;
mod fixture;
mod install;
mod sandbox;

use anyhow::{Context, ensure};
use fantoccini::Client;

use super::Ctx;
use super::driver::{BrowserLog, full_page_screenshot};

/// Counts and prints passed checks.
#[derive(Debug, Default)]
pub(super) struct Checks {
    pub(super) passed: usize,
}

impl Checks {
    pub(super) fn pass(&mut self, what: &str) {
        self.passed += 1;
        println!("  ok {:>2}  {what}", self.passed);
    }
}

/// Runs every check in order, stopping at the first failure.
pub(super) async fn run_all(client: &Client, ctx: &Ctx, checks: &mut Checks) -> anyhow::Result<()> {
    println!("\n==> checking the host page in Chromium");
    dashboard::open_page(client, ctx, checks).await?;
    let id = dashboard::from_chat(client, checks).await?;
    dashboard::inside_the_view(client, ctx, &id, checks).await?;
    dashboard::isolation(client, ctx, &id, checks).await?;
    dashboard::host_side(client, &id, checks).await?;
    dashboard::protocol(client, &id, checks).await?;
    dashboard::ui_message(client, &id, checks).await?;
    full_page_screenshot(client, &ctx.out.join("host-page.png")).await?;
    checks.pass("a screenshot of the page with the dashboard is saved");
    dashboard::theme(client, ctx, &id, checks).await?;
    dashboard::run_action(client, checks).await?;
    dashboard::teardown(client, &id, checks).await?;
    let media = fixture::full_result(ctx, client, checks).await?;
    fixture::ui_events(client, &media, checks).await?;
    fixture::forms(ctx, client, checks).await?;
    fixture::elicit_from_view(client, &media, checks).await?;
    fixture::elicit_from_agent(client, checks).await?;
    sandbox::panel(client, checks).await?;
    install::add_apps(client, ctx, checks).await?;
    connect::connect(client, ctx, checks).await?;
    console_is_clean(client, ctx, checks).await?;
    // Last, because it leaves the host page for the test host's own.
    appbridge::host_page(client, ctx, checks).await
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
