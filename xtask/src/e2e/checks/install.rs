//! The "Add apps" view: from the local registry (`e2e/registry.rs`), install a bundle that
//! asks for a secret input (a password field), see the app Running in the apps panel with
//! Update and Uninstall, the secret nowhere in the page or the API; then install the ext-apps
//! example from npm the same way and render its view from the apps panel.

use anyhow::{Context, ensure};
use fantoccini::{Client, Locator};
use serde_json::Value;

use super::Checks;
use crate::e2e::driver::{click, full_page_screenshot, js, to_top, view_record, wait_for, wait_js};
use crate::e2e::registry::{HELLO, VANILLA};
use crate::e2e::{Ctx, TOKEN};
use crate::http;

/// The secret typed into the form.
const SECRET: &str = "e2e-api-key-93b1";

/// Opens the view, searches for `query` and picks `name`'s Install button.
async fn pick(client: &Client, query: &str, name: &str) -> anyhow::Result<()> {
    to_top(client).await?;
    click(client, "#add-apps").await?;
    wait_js(
        client,
        "the Add apps view to open",
        "return document.getElementById('add-apps-dialog').open;",
        |v| *v == Value::Bool(true),
    )
    .await?;
    let field = client.find(Locator::Css("#add-apps-query")).await?;
    field.clear().await?;
    field.send_keys(query).await?;
    click(client, "#add-apps-search").await?;
    let result = format!(
        "#add-apps-results[data-query=\"{query}\"] .add-apps-result[data-name=\"{name}\"] button"
    );
    wait_js(
        client,
        &format!("{name} in the search results"),
        &format!(
            "return !!document.querySelector('{}');",
            result.replace('\'', "\\'")
        ),
        |v| *v == Value::Bool(true),
    )
    .await?;
    click(client, &result).await?;
    wait_js(
        client,
        &format!("the plan of {name}"),
        &format!(
            "const p = document.getElementById('add-apps-plan'); \
             return !p.hidden && p.dataset.identifier === '{name}';"
        ),
        |v| *v == Value::Bool(true),
    )
    .await?;
    Ok(())
}

/// Presses Install and waits for the job to end; returns the progress lines it showed.
async fn install(client: &Client, what: &str) -> anyhow::Result<String> {
    click(client, "#add-apps-install").await?;
    let state = wait_js(
        client,
        &format!("{what} to install"),
        "const s = document.getElementById('add-apps-status'); \
         const state = s && s.dataset.state; \
         return state === 'done' || state === 'failed' ? state : null;",
        Value::is_string,
    )
    .await?;
    if state != "done" {
        let error = js(
            client,
            "return document.getElementById('add-apps-error').textContent;",
            vec![],
        )
        .await?;
        anyhow::bail!("installing {what} failed: {error}");
    }
    let progress = js(
        client,
        "return document.getElementById('add-apps-progress').textContent;",
        vec![],
    )
    .await?;
    click(client, "#add-apps-close").await?;
    Ok(progress.as_str().unwrap_or_default().to_owned())
}

async fn running(client: &Client, id: &str) -> anyhow::Result<()> {
    wait_js(
        client,
        &format!("{id} to show as Running"),
        &format!(
            "const e = document.querySelector('[data-app-id=\"{id}\"]'); \
             return e ? e.dataset.lifecycle : null;"
        ),
        |v| v == "Running",
    )
    .await?;
    Ok(())
}

pub(super) async fn add_apps(
    client: &Client,
    ctx: &Ctx,
    checks: &mut Checks,
) -> anyhow::Result<()> {
    pick(client, "hello", HELLO).await?;
    let kind = wait_js(
        client,
        "the form asking for api_key",
        "const i = document.querySelector('#add-apps-form input[name=\"api_key\"]'); \
         return i ? i.type : null;",
        Value::is_string,
    )
    .await?;
    ensure!(kind == "password", "the secret input is a {kind} field");
    let facts = js(
        client,
        "return document.querySelector('.add-apps-facts').textContent;",
        vec![],
    )
    .await?;
    ensure!(
        facts
            .as_str()
            .is_some_and(|f| f.contains("Permissions") && f.contains("stdio")),
        "the plan shows no permissions or transport: {facts}"
    );
    client
        .find(Locator::Css("#add-apps-form input[name=\"api_key\"]"))
        .await?
        .send_keys(SECRET)
        .await?;
    let progress = install(client, "hello").await?;
    ensure!(
        progress.contains("unpacking"),
        "no progress was shown: {progress:?}"
    );
    checks.pass("the Add apps view found hello in the local registry, asked for its api_key in a password field, and showed the install's progress");

    running(client, "hello").await?;
    wait_js(
        client,
        "hello's Update and Uninstall buttons",
        "const b = document.querySelector('[data-app-id=\"hello\"] button[data-installer=\"uninstall\"]'); \
         return b ? !b.hidden : null;",
        |v| *v == Value::Bool(true),
    )
    .await?;
    let page = js(client, "return document.documentElement.outerHTML + JSON.stringify(sessionStorage) + JSON.stringify(localStorage);", vec![]).await?;
    ensure!(
        !page.as_str().unwrap_or_default().contains(SECRET),
        "the page kept the secret"
    );
    let bearer = format!("Bearer {TOKEN}");
    for path in ["/apps", "/apps/hello", "/installer/installed"] {
        let body = http::request(
            "GET",
            &format!("{}{path}", ctx.base),
            &[("Authorization", &bearer)],
            None,
        )?
        .body;
        ensure!(!body.contains(SECRET), "{path} answers with the secret");
    }
    checks.pass("hello appears Running in the apps panel with Update and Uninstall; the secret is in neither the page nor the API");

    pick(client, "vanillajs", VANILLA).await?;
    install(client, "the ext-apps example from npm").await?;
    let id = "ext-apps-basic-vanillajs";
    running(client, id).await?;
    let before = js(
        client,
        "return Array.from(document.querySelectorAll('.msg-tool'), (e) => e.dataset.toolCallId);",
        vec![],
    )
    .await?;
    click(
        client,
        &format!("[data-app-id=\"{id}\"] .app-tools summary"),
    )
    .await?;
    click(client, "[data-run=\"get-time\"]").await?;
    wait_js(
        client,
        "the run dialog",
        "return document.getElementById('run-dialog').open;",
        |v| *v == Value::Bool(true),
    )
    .await?;
    click(client, "#run-submit").await?;
    let call = wait_for("the get-time run to start", || async {
        let value = js(
            client,
            "const known = arguments[0]; \
             const e = Array.from(document.querySelectorAll('.msg-tool[data-app-id=\"ext-apps-basic-vanillajs\"]')) \
               .find((n) => !known.includes(n.dataset.toolCallId)); \
             return e ? e.dataset.toolCallId : null;",
            vec![before.clone()],
        )
        .await?;
        Ok(value.as_str().map(str::to_owned).ok_or_else(|| value.to_string()))
    })
    .await?;
    wait_for(
        "the example's view to initialize and get its result",
        || async {
            let record = view_record(client, &call).await?;
            let got_result = record["sent"]
                .as_array()
                .is_some_and(|sent| sent.iter().any(|m| m == "ui/notifications/tool-result"));
            Ok(
                if record["initialized"] == Value::Bool(true) && got_result {
                    Ok(())
                } else {
                    Err(record.to_string())
                },
            )
        },
    )
    .await?;
    full_page_screenshot(client, &ctx.out.join("add-apps-vanillajs.png"))
        .await
        .context("the screenshot of the example's view")?;
    checks.pass(&format!(
        "the ext-apps example installed from npm through the Add apps view runs, and its view renders from the apps panel (call {call})"
    ));
    Ok(())
}
