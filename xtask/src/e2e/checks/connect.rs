//! "Connect": the app `crm` (`test-apps/oauth-server`'s protected app, whose authorization
//! server signs the user in at once) waits in NeedsAuthorization with its authorization
//! server named; the page's Connect opens the authorization URL in a new window, the
//! authorization server sends that window back to the gateway's `/oauth/callback`, whose page
//! closes itself, and the app turns Running with Disconnect offered; then its view (the
//! contacts of `show_contacts`, read over the authorized link), run from the apps panel,
//! renders.

use anyhow::ensure;
use fantoccini::Client;

use super::Checks;
use crate::e2e::driver::{click, enter_view_at, text, to_top, wait_for, wait_js, wait_text};
use crate::e2e::{Ctx, TOKEN};
use crate::http;

const APP: &str = "[data-app-id=\"crm\"]";

pub(in crate::e2e) async fn connect(
    client: &Client,
    ctx: &Ctx,
    checks: &mut Checks,
) -> anyhow::Result<()> {
    to_top(client).await?;
    let line = wait_js(
        client,
        "crm to wait for authorization, with Connect",
        &format!(
            "const e = document.querySelector('{APP}'); \
             const b = e && e.querySelector('.app-auth button[data-action=\"connect\"]'); \
             return e && b && !b.hidden ? [e.dataset.lifecycle, \
               e.querySelector('.app-auth-text').textContent] : null;"
        ),
        |v| v[0] == "NeedsAuthorization",
    )
    .await?;
    let auth_text = line[1].as_str().unwrap_or_default();
    ensure!(
        auth_text.starts_with("Not connected to http://127.0.0.1:"),
        "the authorization line names no authorization server: {auth_text:?}"
    );
    checks.pass("crm waits in NeedsAuthorization, naming its authorization server, with Connect");

    let windows = client.windows().await?.len();
    click(
        client,
        &format!("{APP} .app-auth button[data-action=\"connect\"]"),
    )
    .await?;
    wait_js(
        client,
        "crm to run after Connect",
        &format!(
            "const e = document.querySelector('{APP}'); \
             const d = e && e.querySelector('.app-auth button[data-action=\"disconnect\"]'); \
             return e && d && !d.hidden ? e.dataset.lifecycle : null;"
        ),
        |v| v == "Running",
    )
    .await?;
    // The callback's page closes the window it was opened in.
    wait_for("the sign-in window to close itself", || async {
        let now = client.windows().await?.len();
        Ok(if now == windows {
            Ok(())
        } else {
            Err(format!("{now} windows"))
        })
    })
    .await?;
    checks.pass(
        "Connect opens the authorization URL in a new window, the callback page closes it, and \
         crm turns Running with Disconnect",
    );

    // The gateway holds the grant (the API names the issuer and scopes, never a token).
    let detail = http::request(
        "GET",
        &format!("{}/apps/crm", ctx.base),
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        None,
    )?
    .json()?;
    ensure!(
        detail["authorization"]["state"] == "authorized"
            && detail["authorization"]["scopes"] == serde_json::json!(["mcp:read"]),
        "crm's authorization: {}",
        detail["authorization"]
    );
    checks.pass("the API shows crm authorized for mcp:read at its issuer");

    // Its view, fetched through the link that now carries the token, renders the result.
    click(client, &format!("{APP} .app-tools summary")).await?;
    click(client, &format!("{APP} [data-run$=\"show_contacts\"]")).await?;
    wait_js(
        client,
        "the run dialog",
        "return document.getElementById('run-dialog').open;",
        |v| v == true,
    )
    .await?;
    click(client, "#run-submit").await?;
    // crm has no other view; its call id may repeat another client's, so find it by app.
    let view = ".view[data-app-id=\"crm\"]";
    let call = wait_js(
        client,
        "the show_contacts run to open crm's view",
        &format!(
            "const e = document.querySelector('{view}'); return e ? e.dataset.toolCallId : null;"
        ),
        serde_json::Value::is_string,
    )
    .await?;
    enter_view_at(client, view).await?;
    wait_text(client, "crm's view to render", "#status", |t| {
        t == "rendered"
    })
    .await?;
    let contacts = text(client, "#contacts").await?;
    to_top(client).await?;
    let contacts = contacts.as_str().unwrap_or_default();
    ensure!(
        contacts.contains("Ada Lovelace <ada@example.com>")
            && contacts.contains("Alan Turing <alan@example.com>"),
        "crm's view shows {contacts:?}"
    );
    checks.pass(&format!(
        "crm's show_contacts, run from the apps panel once authorized, renders its view with the contacts in the sandboxed frame (call {})",
        call.as_str().unwrap_or_default()
    ));
    Ok(())
}
