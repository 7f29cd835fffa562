//! The fixture app's checks: a chat-opened view gets the app's whole result (text, image and
//! audio blocks, `_meta`) exactly as a direct rmcp client gets it; calls of app-only tools are
//! not reported to the model and identical repeats collapse, as the panel near the input
//! shows, and Clear empties it; elicitation forms, built from every kind of schema field with
//! its defaults, and URL elicitations opened only on consent; and the fixture's `elicit`
//! answered in the page, called from a view and from an agent turn.

// The direct rmcp client starts its own copy of the fixture app; that is what xtask is for.
#![allow(clippy::disallowed_methods)]

use anyhow::{Context, ensure};
use fantoccini::{Client, Locator};
use rmcp::ServiceExt as _;
use serde_json::{Value, json};

use super::Checks;
use crate::e2e::Ctx;
use crate::e2e::driver::{click, enter_view, js, to_top, wait_for, wait_js, wait_text};

/// The fixture's UI tool with every kind of result part, under its registered name.
const SHOW_MEDIA: &str = "fixture.show_media";
/// Makes a view call tools (see the file).
const VIEW_CALLS: &str = include_str!("view-calls.js");
/// Opens an elicitation card with the page's own module (see the file).
const SCHEMA_FORM: &str = include_str!("schema-form.js");

/// What the fixture's `show_media` returns to a plain rmcp client over stdio, as JSON.
async fn direct_show_media(ctx: &Ctx) -> anyhow::Result<Value> {
    let mut command = tokio::process::Command::new(&ctx.fixture);
    command.arg("stdio").kill_on_drop(true);
    let transport = rmcp::transport::TokioChildProcess::new(command)
        .context("starting fixture-app for a direct client")?;
    let client = ().serve(transport).await.context("initializing with fixture-app")?;
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new("show_media"))
        .await
        .context("calling show_media directly")?;
    let _ = client.cancel().await;
    Ok(serde_json::to_value(result)?)
}

/// Types `message` into the chat and sends it, once the chat is idle.
async fn send_chat(client: &Client, message: &str) -> anyhow::Result<()> {
    to_top(client).await?;
    wait_idle(client).await?;
    let input = client.find(Locator::Css("#chat-input")).await?;
    input.send_keys(message).await?;
    click(client, "#chat-send").await
}

async fn wait_idle(client: &Client) -> anyhow::Result<()> {
    wait_js(
        client,
        "the chat to be idle",
        "return document.getElementById('chat-send').disabled;",
        |v| v == false,
    )
    .await?;
    Ok(())
}

/// The id of the newest tool call of `tool` in the transcript, once it finished.
async fn finished_call(client: &Client, tool: &str) -> anyhow::Result<(String, String)> {
    let value = wait_for(&format!("a finished call of {tool}"), || async {
        let value = js(
            client,
            "const all = document.querySelectorAll(`.msg-tool[data-tool-name=\"${arguments[0]}\"]`); \
             const e = all[all.length - 1]; \
             return e && e.dataset.status ? { id: e.dataset.toolCallId, status: e.dataset.status, \
               text: e.querySelector('.tool-result-text').textContent } : null;",
            vec![json!(tool)],
        )
        .await?;
        Ok(if value.is_object() {
            Ok(value)
        } else {
            Err(value.to_string())
        })
    })
    .await?;
    Ok((
        value["id"].as_str().unwrap_or_default().to_owned(),
        value["text"].as_str().unwrap_or_default().to_owned(),
    ))
}

pub(super) async fn full_result(
    ctx: &Ctx,
    client: &Client,
    checks: &mut Checks,
) -> anyhow::Result<String> {
    let direct = direct_show_media(ctx).await?;
    send_chat(client, &format!("/call {SHOW_MEDIA} {{}}")).await?;
    let (id, _) = finished_call(client, SHOW_MEDIA).await?;
    enter_view(client, &id).await?;
    wait_text(client, "the fixture view to render", "#status", |t| {
        t == "rendered"
    })
    .await?;
    let shown = js(
        client,
        "return document.getElementById('result').textContent;",
        vec![],
    )
    .await?;
    let received: Value = serde_json::from_str(shown.as_str().unwrap_or_default())
        .with_context(|| format!("the view's #result is not JSON: {shown}"))?;
    ensure!(
        received == direct,
        "the view received\n{received:#}\nbut the app returns\n{direct:#}"
    );
    let types: Vec<&str> = received["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["type"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        types == ["text", "image", "audio"] && received["_meta"]["fixture/media"].is_object(),
        "unexpected result parts: {types:?}, _meta {}",
        received["_meta"]
    );
    checks.pass(&format!(
        "the chat-opened {SHOW_MEDIA} view received the app's CallToolResult exactly (text, image, audio, block and result _meta)"
    ));
    Ok(id)
}

async fn view_calls(client: &Client, id: &str, calls: Value) -> anyhow::Result<Value> {
    enter_view(client, id).await?;
    let answers = client
        .execute_async(VIEW_CALLS, vec![calls.clone()])
        .await
        .context("calling tools from the view")?;
    let expected = calls.as_array().map_or(0, Vec::len);
    ensure!(
        answers
            .as_object()
            .is_some_and(|a| a.len() == expected && a.values().all(|m| m["result"].is_object())),
        "the view's calls were not all answered: {answers}"
    );
    to_top(client).await?;
    Ok(answers)
}

pub(super) async fn ui_events(
    client: &Client,
    id: &str,
    checks: &mut Checks,
) -> anyhow::Result<()> {
    let calls = json!([
        ["app_only_tool", {}],
        ["echo", {"message": "same"}],
        ["app_only_tool", {}],
        ["echo", {"message": "same"}],
        ["app_only_tool", {}],
        ["echo", {"message": "same"}],
    ]);
    view_calls(client, id, calls).await?;
    let pending = wait_js(
        client,
        "the repeated echo to be counted",
        "return window.mcpappHost.pendingEvents();",
        |v| {
            v.as_array()
                .is_some_and(|e| e.iter().any(|e| e["count"] == 3))
        },
    )
    .await?;
    ensure!(
        pending
            == json!([{"tool": "fixture.echo", "args": {"message": "same"}, "resultText": "same", "count": 3}]),
        "pending UI events: {pending}"
    );
    let shown = js(
        client,
        "const items = Array.from(document.querySelectorAll('#pending-list .pending-event')); \
         return { items: items.map((li) => [li.dataset.tool, li.dataset.count]), \
                  visible: !document.getElementById('pending').hidden, \
                  note: document.getElementById('composer-notes').textContent };",
        vec![],
    )
    .await?;
    ensure!(
        shown["items"] == json!([["fixture.echo", "3"]]) && shown["visible"] == true,
        "the panel near the input shows {shown}"
    );
    // The next turn carries exactly that one event.
    js(
        client,
        "window.__chatBodies = []; if (!window.__fetchWrapped) { window.__fetchWrapped = true; \
           const original = window.fetch; \
           window.fetch = (url, init) => { \
             if (String(url).endsWith('/apps/chat')) { window.__chatBodies.push(init.body); } \
             return original(url, init); }; }",
        vec![],
    )
    .await?;
    send_chat(client, "/tools").await?;
    let body = wait_js(
        client,
        "the chat request",
        "return window.__chatBodies.length ? JSON.parse(window.__chatBodies[0]) : null;",
        Value::is_object,
    )
    .await?;
    ensure!(
        body["appEvents"]
            == json!([{"tool": "fixture.echo", "args": {"message": "same"}, "resultText": "same", "count": 3}]),
        "the turn carried appEvents {}",
        body["appEvents"]
    );
    wait_idle(client).await?;
    checks.pass("6 view calls: the app-only tool's 3 were not reported, the 3 identical echoes became one event ×3, shown near the input and sent with the next turn");

    // Clear: what is pending is not reported.
    view_calls(client, id, json!([["echo", {"message": "to be cleared"}]])).await?;
    wait_js(
        client,
        "the new event to be pending",
        "return window.mcpappHost.pendingEvents().length;",
        |v| v == 1,
    )
    .await?;
    click(client, "#pending-clear").await?;
    let after = wait_js(
        client,
        "the pending events to clear",
        "return { events: window.mcpappHost.pendingEvents().length, \
                  shown: document.querySelectorAll('#pending-list li').length };",
        |v| v["events"] == 0,
    )
    .await?;
    ensure!(after["shown"] == 0, "the panel still lists {after}");
    checks.pass("Clear near the input emptied the pending UI events");
    Ok(())
}

/// A schema with every kind of field an elicitation may ask for, each with a default.
fn every_field() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name", "minLength": 2, "default": "Ada"},
            "email": {"type": "string", "format": "email", "default": "ada@example.org"},
            "site": {"type": "string", "format": "uri"},
            "born": {"type": "string", "format": "date", "default": "1815-12-10"},
            "when": {"type": "string", "format": "date-time", "default": "2026-01-26T10:30:00.000Z"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 36},
            "score": {"type": "number", "default": 0.5},
            "agree": {"type": "boolean", "default": true},
            "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"], "default": "m"},
            "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}], "default": "g"},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "Alpha"}, {"const": "b", "title": "Beta"}, {"const": "c", "title": "Gamma"}]}, "default": ["a", "c"]},
            "motto": {"type": "string", "title": "Motto"}
        },
        "required": ["name", "motto"]
    })
}

pub(super) async fn forms(ctx: &Ctx, client: &Client, checks: &mut Checks) -> anyhow::Result<()> {
    to_top(client).await?;
    let opened = client
        .execute_async(
            SCHEMA_FORM,
            vec![every_field(), json!("form"), Value::Null, json!("e2e-form")],
        )
        .await?;
    ensure!(opened == true, "the form did not open: {opened}");
    let card = ".msg-elicitation[data-elicitation-id=\"e2e-form\"]";
    let form = js(
        client,
        "const card = document.querySelector(arguments[0]); \
         const f = (n) => card.querySelector(`[data-field=\"${n}\"]`); \
         const input = (n) => f(n).querySelector('input, select'); \
         return { \
           types: ['name', 'email', 'site', 'born', 'when', 'age', 'score', 'agree', 'size', 'colour'] \
             .map((n) => [n, input(n).type, input(n).type === 'checkbox' ? input(n).checked : input(n).value]), \
           labels: Array.from(f('size').querySelectorAll('option'), (o) => o.textContent), \
           colours: Array.from(f('colour').querySelectorAll('option'), (o) => o.textContent), \
           tags: Array.from(f('tags').querySelectorAll('label'), (l) => [l.textContent.trim(), l.querySelector('input').checked]), \
           age: [input('age').min, input('age').max, input('age').step], \
           title: f('name').querySelector('label').textContent };",
        vec![json!(card)],
    )
    .await?;
    let types = form["types"].as_array().cloned().unwrap_or_default();
    let kind = |name: &str| {
        types
            .iter()
            .find(|t| t[0] == name)
            .map(|t| (t[1].as_str().unwrap_or_default().to_owned(), t[2].clone()))
            .unwrap_or_default()
    };
    ensure!(
        kind("email") == ("email".into(), json!("ada@example.org"))
            && kind("site").0 == "url"
            && kind("born") == ("date".into(), json!("1815-12-10"))
            && kind("when").0 == "datetime-local"
            && kind("age") == ("number".into(), json!("36"))
            && kind("agree") == ("checkbox".into(), json!(true))
            && kind("size") == ("select-one".into(), json!("m"))
            && kind("colour") == ("select-one".into(), json!("g"))
            && form["age"] == json!(["0", "150", "1"]),
        "the form's fields: {form}"
    );
    ensure!(
        form["labels"] == json!(["(none)", "Small", "Medium", "Large"]),
        "enumNames are not the labels: {}",
        form["labels"]
    );
    ensure!(
        form["colours"] == json!(["(none)", "Red", "Green"])
            && form["tags"] == json!([["Alpha", true], ["Beta", false], ["Gamma", true]])
            && form["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("Your name")),
        "titles or defaults are missing: {form}"
    );
    // The required motto is empty: Accept does nothing until it is filled.
    click(client, &format!("{card} button[data-action=\"accept\"]")).await?;
    let early = js(
        client,
        "return (window.__e2eAnswers || {})['e2e-form'] || null;",
        vec![],
    )
    .await?;
    ensure!(
        early.is_null(),
        "a form missing a required field was submitted: {early}"
    );
    client
        .find(Locator::Css(&format!(
            "{card} [data-field=\"motto\"] input"
        )))
        .await?
        .send_keys("Imagination")
        .await?;
    click(client, &format!("{card} button[data-action=\"accept\"]")).await?;
    let answer = wait_js(
        client,
        "the form's answer",
        "return (window.__e2eAnswers || {})['e2e-form'] || null;",
        Value::is_object,
    )
    .await?;
    let expected = json!({"action": "accept", "content": {
        "name": "Ada", "email": "ada@example.org", "born": "1815-12-10",
        "when": "2026-01-26T10:30:00.000Z", "age": 36, "score": 0.5, "agree": true,
        "size": "m", "colour": "g", "tags": ["a", "c"], "motto": "Imagination"
    }});
    ensure!(
        answer == expected,
        "the form answered {answer}, not {expected}"
    );
    checks.pass("an elicitation form has the right input for every field type, SEP-1330 titles, SEP-1034 defaults pre-filled, and holds back a missing required field");

    // URL mode: the link is shown, and opened only when the user agrees.
    let url = format!("{}/sign-in", ctx.declared.origin);
    let before = ctx.declared.hits();
    let windows = client.windows().await?.len();
    client
        .execute_async(
            SCHEMA_FORM,
            vec![Value::Null, json!("url"), json!(url), json!("e2e-url")],
        )
        .await?;
    let card = ".msg-elicitation[data-elicitation-id=\"e2e-url\"]";
    let shown = wait_text(
        client,
        "the URL to show",
        &format!("{card} .elicit-url code"),
        |t| !t.is_empty(),
    )
    .await?;
    ensure!(shown == url, "the card shows {shown:?}, not {url:?}");
    ensure!(
        ctx.declared.hits() == before && client.windows().await?.len() == windows,
        "the URL was opened before the user agreed"
    );
    click(client, &format!("{card} button[data-action=\"accept\"]")).await?;
    wait_for("the link to open in a new tab", || async {
        let hits = ctx.declared.hits();
        Ok(if hits > before {
            Ok(())
        } else {
            Err(format!("{hits} hit(s)"))
        })
    })
    .await?;
    let answer = js(client, "return window.__e2eAnswers['e2e-url'];", vec![]).await?;
    ensure!(
        answer == json!({"action": "accept"}),
        "the URL elicitation answered {answer}"
    );
    // Close the tab the link opened; the test goes on in the page.
    let page = client.window().await?;
    for handle in client.windows().await? {
        if handle != page {
            client.switch_to_window(handle).await?;
            client.close_window().await?;
        }
    }
    client.switch_to_window(page).await?;
    checks.pass("a URL elicitation showed its URL and opened it only after the user agreed");
    Ok(())
}

/// Fills the open elicitation card whose message is `message`: `name`, the agree box, Accept;
/// returns the card's id once it closed as accepted.
async fn answer_form(client: &Client, message: &str, name: &str) -> anyhow::Result<String> {
    to_top(client).await?;
    let id = wait_for(&format!("the form asking {message:?}"), || async {
        let value = js(
            client,
            "const card = Array.from(document.querySelectorAll('.msg-elicitation[data-state=\"open\"]')) \
               .find((c) => c.querySelector('.elicit-message').textContent === arguments[0]); \
             return card ? card.dataset.elicitationId : null;",
            vec![json!(message)],
        )
        .await?;
        Ok(value.as_str().map(str::to_owned).ok_or_else(|| value.to_string()))
    })
    .await?;
    let card = format!(".msg-elicitation[data-elicitation-id=\"{id}\"]");
    client
        .find(Locator::Css(&format!("{card} [data-field=\"name\"] input")))
        .await?
        .send_keys(name)
        .await?;
    click(client, &format!("{card} [data-field=\"agree\"] input")).await?;
    click(client, &format!("{card} button[data-action=\"accept\"]")).await?;
    wait_js(
        client,
        "the card to close as answered",
        &format!("return document.querySelector('{card}').dataset.state;"),
        |v| v == "accept",
    )
    .await?;
    Ok(id)
}

pub(super) async fn elicit_from_view(
    client: &Client,
    id: &str,
    checks: &mut Checks,
) -> anyhow::Result<()> {
    enter_view(client, id).await?;
    click(client, "#call-elicit").await?;
    answer_form(client, "The fixture view asks who you are", "Ada").await?;
    enter_view(client, id).await?;
    let outcome = wait_text(
        client,
        "the view's elicit call to finish",
        "#message",
        |t| t.starts_with("elicit: "),
    )
    .await?;
    ensure!(
        outcome == r#"elicit: accepted: {"name":"Ada","agree":true}"#,
        "the view's call ended with {outcome:?}"
    );
    checks.pass("the fixture's elicit called from a view asked in the page; the answer reached the app and the view");
    Ok(())
}

pub(super) async fn elicit_from_agent(client: &Client, checks: &mut Checks) -> anyhow::Result<()> {
    send_chat(
        client,
        r#"/call fixture.elicit {"message": "Who is at the keyboard?"}"#,
    )
    .await?;
    answer_form(client, "Who is at the keyboard?", "Grace").await?;
    let (_, text) = finished_call(client, "fixture.elicit").await?;
    ensure!(
        text.starts_with(r#"accepted: {"name":"Grace","agree":true}"#),
        "the agent's call ended with {text:?}"
    );
    wait_idle(client).await?;
    checks.pass("the fixture's elicit called by an agent turn asked in the page (chat stream, POST /apps/chat/elicitation); the answer reached the app");
    Ok(())
}
