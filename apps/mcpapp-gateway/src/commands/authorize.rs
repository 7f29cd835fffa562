//! `mcpapp-gateway apps authorize ID` and `apps disconnect ID`: connecting an HTTP app behind
//! OAuth from a terminal (`POST /apps/{id}/authorize`, `POST /apps/{id}/disconnect`).
//!
//! `authorize` prints the authorization URL on a line of its own on stdout (what to do goes to
//! stderr), so the user opens it in any browser: the authorization server sends that browser
//! back to the gateway's `/oauth/callback`, never to this program. It then waits until the
//! app runs with its new grant (exit 0), fails, has its redirect refused, or the wait ends
//! (exit 1). With `--json`: the API's answer on one line, then the app as `apps show --json`
//! prints it.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::apps::detail;
use super::output::{Out, str_of};
use crate::cli::AuthorizeArgs;
use crate::remote::{Remote, RemoteError, segment};

/// How often the waiting `authorize` asks for the app's state.
const POLL: Duration = Duration::from_millis(250);

/// An app's `authorization` for people: `authorized at ISSUER (scopes: …)`, `waiting for
/// authorization at ISSUER`, …; `None` when the gateway does not authorize to it.
pub(crate) fn describe(authorization: &Value) -> Option<String> {
    let issuer = str_of(&authorization["issuer"]);
    let scopes = |key: &str| {
        authorization[key]
            .as_array()
            .map(|list| list.iter().map(str_of).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    let text = match authorization["state"].as_str()? {
        "needsAuthorization" => format!(
            "needs authorization at {issuer} ({}): `mcpapp-gateway apps authorize`",
            str_of(&authorization["reason"])
        ),
        "authorizing" => format!("being authorized at {issuer}"),
        "authorized" | "refreshing" => {
            let mut text = format!("authorized at {issuer} (scopes: {})", scopes("scopes"));
            if authorization["moreScope"].is_array() {
                text.push_str(&format!(
                    "; wants more access ({}): `mcpapp-gateway apps authorize`",
                    scopes("moreScope")
                ));
            }
            text
        }
        "failed" => format!("failed: {}", str_of(&authorization["reason"])),
        other => other.to_owned(),
    };
    Some(text)
}

/// `apps authorize ID`.
pub(crate) async fn authorize(
    remote: &Remote,
    args: &AuthorizeArgs,
    json: bool,
    out: &mut Out,
) -> Result<u8, RemoteError> {
    let id = &args.id;
    let before = detail(remote, id).await?;
    let answer = remote
        .post(&format!("/apps/{}/authorize", segment(id)))
        .await?;
    let url = answer["url"].as_str().unwrap_or_default();
    // The page checks this too: only a web URL is ever shown to open.
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(RemoteError::Failed(format!(
            "the gateway handed out an authorization URL that is not http(s): {url:?}"
        )));
    }
    if json {
        writeln!(out, "{answer}")?;
    } else {
        eprintln!(
            "Open this URL in a browser to connect {id} at {} (scopes: {}; valid until {}):",
            str_of(&answer["issuer"]),
            answer["scopes"]
                .as_array()
                .map(|list| list.iter().map(str_of).collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
            str_of(&answer["expiresAt"])
        );
        writeln!(out, "{url}")?;
    }
    out.flush()?;
    if args.no_wait {
        return Ok(0);
    }
    if !json {
        eprintln!("Waiting for {id} to be connected (Ctrl-C stops waiting; the URL stays valid)…");
    }
    let app = wait(remote, id, &before, Duration::from_secs(args.wait)).await?;
    let failed = app["lifecycle"] == "Failed";
    if json {
        out.json(&app)?;
    } else if failed {
        writeln!(out, "{id} failed: {}", str_of(&app["lastError"]))?;
    } else {
        writeln!(
            out,
            "{id} is connected; it is {} ({})",
            str_of(&app["lifecycle"]),
            describe(&app["authorization"]).unwrap_or_default()
        )?;
    }
    Ok(u8::from(failed))
}

/// Waits until the app runs with a grant that differs from the one `before` had and wants
/// nothing more, or fails; an authorization that goes back to waiting (its redirect was
/// refused) or a wait past `patience` is an error.
async fn wait(
    remote: &Remote,
    id: &str,
    before: &Value,
    patience: Duration,
) -> Result<Value, RemoteError> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut seen_authorizing = false;
    loop {
        let now = detail(remote, id).await?;
        let authorization = &now["authorization"];
        let state = authorization["state"].as_str().unwrap_or_default();
        let granted = now["lifecycle"] == "Running"
            && state == "authorized"
            && authorization["moreScope"].is_null()
            && *authorization != before["authorization"];
        if granted || now["lifecycle"] == "Failed" {
            return Ok(now);
        }
        if state == "authorizing" {
            seen_authorizing = true;
        } else if seen_authorizing && state == "needsAuthorization" {
            return Err(RemoteError::Failed(format!(
                "the authorization of {id} was refused (the browser's page and the gateway's log say why); run `mcpapp-gateway apps authorize {id}` again"
            )));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(RemoteError::Failed(format!(
                "{id} was not connected within {} s (see --wait); it is {}",
                patience.as_secs(),
                str_of(&now["lifecycle"])
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `apps disconnect ID`.
pub(crate) async fn disconnect(
    remote: &Remote,
    id: &str,
    json: bool,
    out: &mut Out,
) -> Result<u8, RemoteError> {
    let answer = remote
        .post(&format!("/apps/{}/disconnect", segment(id)))
        .await?;
    if json {
        out.json(&answer)?;
    } else {
        writeln!(
            out,
            "{id}: its OAuth tokens are revoked and deleted{}",
            if answer["restarted"] == true {
                "; it restarts and asks to be connected again"
            } else {
                ""
            }
        )?;
    }
    Ok(0)
}
