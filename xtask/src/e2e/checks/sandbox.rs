//! The apps panel shows each stdio app's sandbox: the fixture's line says it is enforced, and
//! its Sandbox section shows the report of `/apps/{id}` (status and mode, the network, the
//! path rules); the HTTP grocery app, which the gateway does not start, has none.

use fantoccini::Client;
use serde_json::json;

use super::Checks;
use crate::e2e::driver::{click, to_top, wait_js};

/// The stdio fixture's id in the demo stack.
const FIXTURE: &str = "fixture-stdio";

pub(super) async fn panel(client: &Client, checks: &mut Checks) -> anyhow::Result<()> {
    to_top(client).await?;
    let line = wait_js(
        client,
        "the fixture's sandbox status",
        "const app = document.querySelector('[data-app-id=\"fixture-stdio\"]'); \
         const grocery = document.querySelector('[data-app-id=\"grocery-inventory\"]'); \
         return app && grocery ? [app.dataset.sandbox, app.querySelector('.app-meta').textContent, \
           grocery.querySelector('.app-sandbox').hidden] : null;",
        |v| v[0] == "enforced",
    )
    .await?;
    anyhow::ensure!(
        line[1]
            .as_str()
            .is_some_and(|meta| meta.contains("sandbox enforced")),
        "the fixture's line does not name its sandbox: {line}"
    );
    anyhow::ensure!(
        line[2] == json!(true),
        "the HTTP app shows a sandbox section: {line}"
    );
    click(
        client,
        &format!("[data-app-id=\"{FIXTURE}\"] .app-sandbox summary"),
    )
    .await?;
    let report = wait_js(
        client,
        "the fixture's sandbox report",
        "const dl = document.querySelector('[data-app-id=\"fixture-stdio\"] .sandbox-report'); \
         const rows = dl ? Array.from(dl.querySelectorAll('dt'), (dt) => [dt.textContent, dt.nextElementSibling.textContent]) : []; \
         return rows.length ? Object.fromEntries(rows) : null;",
        |v| v["Status"].is_string(),
    )
    .await?;
    let field = |name: &str| report[name].as_str().unwrap_or_default().to_owned();
    anyhow::ensure!(
        field("Status") == "enforced (mode enforce)"
            && field("Network").starts_with("none")
            && field("Process").contains("capabilities none")
            && field("Paths").contains("write ")
            && field("Home").ends_with("/apps/fixture-stdio"),
        "the sandbox report on the page: {report}"
    );
    checks.pass(
        "the apps panel shows the stdio fixture's sandbox (enforced, no network, no capabilities, its paths) and none for the HTTP app",
    );
    Ok(())
}
