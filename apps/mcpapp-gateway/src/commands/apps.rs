//! `mcpapp-gateway apps [list | show | start | stop | restart | logs]` and `reload`: what a
//! running gateway runs, and control of it, through its HTTP API (`GET /apps`,
//! `GET /apps/{id}`, `POST /apps/{id}/{action}`, `POST /apps/reload`).
//!
//! For people: aligned tables and short summaries. With `--json`: `list`, `show` and `reload`
//! print the API's JSON as it is; `start`, `stop` and `restart` print the app as `show` does
//! once it has settled (with `--no-wait`, the API's answer to the command); `logs` prints
//! `{"id", "run": "current" | "previous", "lines": [...]}`.

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use super::output::{Out, str_of, table};
use crate::cli::{AppsAction, AppsArgs, ControlArgs, LogsArgs, ReloadArgs};
use crate::remote::{Remote, RemoteError, segment};

/// How often a waiting `start`, `stop` or `restart` asks for the app's state.
const POLL: Duration = Duration::from_millis(100);
/// The longest last error a table shows, in characters.
const ERROR_WIDTH: usize = 60;

pub(crate) async fn run(args: &AppsArgs) -> Result<u8, RemoteError> {
    let remote = super::remote_of(&args.remote)?;
    let json = args.remote.json;
    let mut out = Out::stdout();
    match &args.action {
        None | Some(AppsAction::List) => list(&remote, json, &mut out).await,
        Some(AppsAction::Show(app)) => show(&remote, &app.id, json, &mut out).await,
        Some(AppsAction::Start(control)) => {
            self::control(&remote, Action::Start, control, json, &mut out).await
        }
        Some(AppsAction::Stop(control)) => {
            self::control(&remote, Action::Stop, control, json, &mut out).await
        }
        Some(AppsAction::Restart(control)) => {
            self::control(&remote, Action::Restart, control, json, &mut out).await
        }
        Some(AppsAction::Logs(logs)) => self::logs(&remote, logs, json, &mut out).await,
        Some(AppsAction::Authorize(authorize)) => {
            super::authorize::authorize(&remote, authorize, json, &mut out).await
        }
        Some(AppsAction::Disconnect(app)) => {
            super::authorize::disconnect(&remote, &app.id, json, &mut out).await
        }
    }
}

async fn list(remote: &Remote, json: bool, out: &mut Out) -> Result<u8, RemoteError> {
    let body = remote.get("/apps").await?;
    if json {
        out.json(&body)?;
        return Ok(0);
    }
    let apps = body["apps"].as_array().cloned().unwrap_or_default();
    if apps.is_empty() {
        writeln!(
            out,
            "no apps (the gateway found none in its discovery paths)"
        )?;
    } else {
        write!(out, "{}", apps_table(&apps))?;
    }
    let diagnostics = body["diagnostics"].as_array().map_or(0, Vec::len);
    if diagnostics > 0 {
        let noun = if diagnostics == 1 {
            "diagnostic"
        } else {
            "diagnostics"
        };
        eprintln!("{diagnostics} tool {noun}: see `mcpapp-gateway apps list --json`");
    }
    Ok(0)
}

/// `GET /apps`'s apps as a table: id, state, transport, tools, restarts, last error.
pub(crate) fn apps_table(apps: &[Value]) -> String {
    let rows: Vec<Vec<String>> = apps
        .iter()
        .map(|app| {
            let mut state = str_of(&app["lifecycle"]);
            if app["crashLoop"] == true {
                state.push_str(" (crash loop)");
            }
            if app["authorization"]["moreScope"].is_array() {
                state.push_str(" (wants more access)");
            }
            vec![
                app["id"].as_str().unwrap_or("(no id)").to_owned(),
                state,
                str_of(&app["transport"]),
                app["toolCount"].as_u64().unwrap_or(0).to_string(),
                app["restartCount"].as_u64().unwrap_or(0).to_string(),
                app["lastError"]
                    .as_str()
                    .or_else(|| {
                        app["validationErrors"]
                            .as_array()
                            .and_then(|e| e.first())
                            .and_then(Value::as_str)
                    })
                    .map_or_else(|| "-".to_owned(), |e| shorten(e, ERROR_WIDTH)),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "STATE",
            "TRANSPORT",
            "TOOLS",
            "RESTARTS",
            "LAST ERROR",
        ],
        &rows,
    )
}

/// One line of at most `width` characters: line breaks become spaces, and a longer text is
/// cut with an ellipsis.
pub(crate) fn shorten(text: &str, width: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= width {
        return flat;
    }
    let mut cut: String = flat.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

pub(crate) async fn detail(remote: &Remote, id: &str) -> Result<Value, RemoteError> {
    remote
        .get(&format!("/apps/{}", segment(id)))
        .await
        .map_err(|e| match e {
            RemoteError::NotFound(_) => RemoteError::NotFound(format!(
                "the gateway at {} has no app '{id}' (see `mcpapp-gateway apps list`)",
                remote.base()
            )),
            other => other,
        })
}

async fn show(remote: &Remote, id: &str, json: bool, out: &mut Out) -> Result<u8, RemoteError> {
    let app = detail(remote, id).await?;
    if json {
        out.json(&app)?;
    } else {
        write!(out, "{}", describe(&app))?;
    }
    Ok(0)
}

/// `GET /apps/{id}` for people.
fn describe(app: &Value) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("id", str_of(&app["id"])),
        ("name", str_of(&app["name"])),
        ("version", str_of(&app["version"])),
        ("state", str_of(&app["lifecycle"])),
        ("since", str_of(&app["stateChangedAt"])),
        ("transport", str_of(&app["transport"])),
        ("restarts", str_of(&app["restartCount"])),
    ];
    if app["crashLoop"] == true {
        fields.push((
            "crash loop",
            "yes: restarts stopped; `apps start` ends it".into(),
        ));
    }
    if let Some(next) = app["nextRestartAt"].as_str() {
        fields.push(("next restart", next.to_owned()));
    }
    fields.push(("last error", str_of(&app["lastError"])));
    if let Some(authorization) = super::authorize::describe(&app["authorization"]) {
        fields.push(("authorization", authorization));
    }
    if let Some(server) = app["serverName"].as_str() {
        let version = app["serverVersion"].as_str().unwrap_or_default();
        fields.push((
            "server",
            format!("{server} {version}").trim_end().to_owned(),
        ));
    }
    fields.push(("protocol", str_of(&app["protocolVersion"])));
    fields.push(("manifest", str_of(&app["manifestPath"])));
    fields.push(("mcp", str_of(&app["mcp"])));
    fields.push(("browser sessions", str_of(&app["browserSessions"])));
    fields.extend(sandbox_fields(&app["sandbox"]));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut text = String::new();
    for (key, value) in &fields {
        text.push_str(&format!("{:<width$} {value}\n", format!("{key}:")));
    }
    for (title, key) in [
        ("validation errors", "validationErrors"),
        ("warnings", "warnings"),
    ] {
        let items = app[key].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            text.push_str(&format!("{title}:\n"));
            for item in items {
                text.push_str(&format!("  {}\n", str_of(&item)));
            }
        }
    }
    let section = |text: &mut String, title: &str, rows: Vec<Vec<String>>| {
        text.push_str(&format!("{title} ({}):\n", rows.len()));
        for line in table_body(&rows).lines() {
            text.push_str(&format!("  {}\n", line.trim_end()));
        }
    };
    let list = |key: &str| app[key].as_array().cloned().unwrap_or_default();
    let sandbox_paths = app["sandbox"]["paths"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !sandbox_paths.is_empty() {
        section(
            &mut text,
            "sandbox paths",
            sandbox_paths
                .iter()
                .map(|p| vec![str_of(&p["access"]), str_of(&p["path"])])
                .collect(),
        );
    }
    section(
        &mut text,
        "tools",
        list("tools")
            .iter()
            .map(|t| {
                vec![
                    str_of(&t["name"]),
                    t["registeredName"]
                        .as_str()
                        .map_or_else(|| "(not registered)".to_owned(), |n| format!("as {n}")),
                    shorten(t["description"].as_str().unwrap_or_default(), ERROR_WIDTH),
                ]
            })
            .collect(),
    );
    section(
        &mut text,
        "resources",
        list("resources")
            .iter()
            .map(|r| vec![str_of(&r["uri"]), str_of(&r["mimeType"])])
            .collect(),
    );
    section(
        &mut text,
        "resource templates",
        list("resourceTemplates")
            .iter()
            .map(|r| vec![str_of(&r["uriTemplate"]), str_of(&r["name"])])
            .collect(),
    );
    section(
        &mut text,
        "prompts",
        list("prompts")
            .iter()
            .map(|p| {
                vec![
                    str_of(&p["name"]),
                    shorten(p["description"].as_str().unwrap_or_default(), ERROR_WIDTH),
                ]
            })
            .collect(),
    );
    text
}

/// The `sandbox` of `GET /apps/{id}` as lines for people: what applies, the network, the
/// limits, what is missing.
fn sandbox_fields(sandbox: &Value) -> Vec<(&'static str, String)> {
    if sandbox.is_null() {
        return Vec::new();
    }
    let status = str_of(&sandbox["status"]);
    if status == "none" {
        return vec![("sandbox", format!("none: {}", str_of(&sandbox["note"])))];
    }
    let network = match &sandbox["network"] {
        Value::String(word) => word.clone(),
        other => {
            let ports = other["tcpPorts"].as_array().cloned().unwrap_or_default();
            let hosts = other["hosts"].as_array().cloned().unwrap_or_default();
            ports
                .iter()
                .map(|p| format!("tcp:{p}"))
                .chain(hosts.iter().map(str_of))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let mut fields = vec![
        (
            "sandbox",
            format!(
                "{status} (mode {}, Landlock ABI {} with rules for {}, seccomp {}, capabilities {}, no_new_privs)",
                str_of(&sandbox["mode"]),
                str_of(&sandbox["landlockAbi"]),
                str_of(&sandbox["rulesAbi"]),
                if sandbox["seccomp"] == true {
                    "on"
                } else {
                    "off"
                },
                str_of(&sandbox["capabilities"]),
            ),
        ),
        (
            "network",
            format!(
                "{network} (TCP connect: {}; sockets: {}{})",
                str_of(&sandbox["tcpConnect"]),
                str_of(&sandbox["inetSockets"]),
                if sandbox["unixSockets"] == true {
                    ", unix"
                } else {
                    ""
                },
            ),
        ),
    ];
    if let Some(proxy) = sandbox["proxy"].as_str() {
        fields.push(("egress proxy", proxy.to_owned()));
    }
    fields.push(("home", str_of(&sandbox["home"])));
    let limits = &sandbox["limits"];
    let limit = |key: &str| {
        limits[key]
            .as_u64()
            .map_or_else(|| "unlimited".to_owned(), |v| v.to_string())
    };
    fields.push((
        "limits",
        format!(
            "open files {}, address space {}, processes {}, cpu seconds {}, file size {}, core dumps off",
            limit("openFiles"),
            limit("addressSpaceBytes"),
            limit("processes"),
            limit("cpuSeconds"),
            limit("fileSizeBytes"),
        ),
    ));
    for missing in sandbox["missing"].as_array().into_iter().flatten() {
        fields.push(("missing", str_of(missing)));
    }
    fields
}

/// Rows aligned in columns, without a header.
fn table_body(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let empty = vec![""; columns];
    let text = table(&empty, rows);
    // The header line of blanks is dropped.
    text.split_once('\n')
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_default()
}

/// A control command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Start,
    Stop,
    Restart,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Stop => "stop",
            Self::Restart => "restart",
        }
    }

    fn past(self) -> &'static str {
        match self {
            Self::Start => "started",
            Self::Stop => "stopped",
            Self::Restart => "restarted",
        }
    }

    /// Whether the app, `before` the command and `now`, has done what the command asked.
    /// The API acknowledges a command before the app acts on it, so a state right after the
    /// command may still be the old one; the state's timestamp and the restart count tell
    /// a new state from the old.
    fn done(self, before: &Value, now: &Value) -> bool {
        let state = |app: &Value| app["lifecycle"].as_str().unwrap_or_default().to_owned();
        let outcome = matches!(state(now).as_str(), "Running" | "Failed");
        let changed = before["stateChangedAt"] != now["stateChangedAt"];
        match (self, state(before).as_str()) {
            (Self::Stop, _) => state(now) == "Stopped",
            (Self::Restart, "Running") => {
                now["restartCount"].as_u64() > before["restartCount"].as_u64() && outcome
            }
            // Still starting: it will run or fail without a new command.
            (_, "Loaded") => outcome,
            _ => changed && outcome,
        }
    }
}

async fn control(
    remote: &Remote,
    action: Action,
    args: &ControlArgs,
    json: bool,
    out: &mut Out,
) -> Result<u8, RemoteError> {
    let id = &args.id;
    let before = detail(remote, id).await?;
    let already = match (action, before["lifecycle"].as_str()) {
        (Action::Start, Some("Running")) => Some("Running"),
        (Action::Stop, Some("Stopped")) => Some("Stopped"),
        _ => None,
    };
    if let Some(state) = already {
        if json {
            out.json(&before)?;
        } else {
            writeln!(out, "{id} is already {state}")?;
        }
        return Ok(0);
    }
    let answer = remote
        .post(&format!("/apps/{}/{}", segment(id), action.as_str()))
        .await?;
    if args.no_wait {
        if json {
            out.json(&answer)?;
        } else {
            writeln!(
                out,
                "{id}: {} asked; it is {} now",
                action.as_str(),
                str_of(&answer["lifecycle"])
            )?;
        }
        return Ok(0);
    }
    // The API has no event stream to wait on here, so the state is asked for until the app
    // has done it or the timeout passes.
    let deadline = tokio::time::Instant::now() + remote.timeout();
    let app = loop {
        let now = detail(remote, id).await?;
        if action.done(&before, &now) {
            break now;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(RemoteError::Failed(format!(
                "{id} did not settle within {} s after `{}`: it is {} (see `mcpapp-gateway apps show {id}`)",
                remote.timeout().as_secs(),
                action.as_str(),
                str_of(&now["lifecycle"])
            )));
        }
        tokio::time::sleep(POLL).await;
    };
    let failed = app["lifecycle"] == "Failed";
    if json {
        out.json(&app)?;
    } else if failed {
        writeln!(
            out,
            "{id}: {} but it failed: {}",
            action.past(),
            str_of(&app["lastError"])
        )?;
    } else {
        writeln!(
            out,
            "{id}: {}; it is {} (restarts: {})",
            action.past(),
            str_of(&app["lifecycle"]),
            str_of(&app["restartCount"])
        )?;
    }
    Ok(u8::from(failed))
}

async fn logs(
    remote: &Remote,
    args: &LogsArgs,
    json: bool,
    out: &mut Out,
) -> Result<u8, RemoteError> {
    let app = detail(remote, &args.id).await?;
    let (run, key) = if args.previous {
        ("previous", "previousStderrTail")
    } else {
        ("current", "stderrTail")
    };
    let lines = app[key].as_array().cloned().unwrap_or_default();
    if args.follow {
        return follow(remote, &args.id, app, json, out).await;
    }
    if json {
        out.json(&json!({ "id": args.id, "run": run, "lines": lines }))?;
        return Ok(0);
    }
    for line in &lines {
        writeln!(out, "{}", line.as_str().unwrap_or_default())?;
    }
    if lines.is_empty() {
        let transport = str_of(&app["transport"]);
        let why = if transport == "stdio" {
            format!("{} wrote nothing to stderr in its {run} run", args.id)
        } else {
            format!(
                "{} is a {transport} app: the gateway keeps the stderr of the apps it starts",
                args.id
            )
        };
        eprintln!("{why}");
    }
    Ok(0)
}

/// How often `logs --follow` asks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// `logs --follow`: the current run's lines, then new ones as they come. The gateway keeps
/// the last 200 lines of a run, so new lines are what follows the longest overlap between
/// the tail printed last and the tail now; a new run (a restart, or a start after a failure)
/// is marked and printed from its first kept line. With `--json`, one object per line:
/// `{"id", "line"}`, and `{"id", "run": "new"}` where a run begins.
async fn follow(
    remote: &Remote,
    id: &str,
    mut app: Value,
    json: bool,
    out: &mut Out,
) -> Result<u8, RemoteError> {
    let run_of = |app: &Value| (app["restartCount"].clone(), app["discoveredAt"].clone());
    let tail = |app: &Value| -> Vec<String> {
        app["stderrTail"]
            .as_array()
            .map(|a| a.iter().map(str_of).collect())
            .unwrap_or_default()
    };
    let mut printed: Vec<String> = Vec::new();
    let mut run = run_of(&app);
    loop {
        let now = tail(&app);
        let new_run = run_of(&app) != run;
        if new_run {
            run = run_of(&app);
            printed.clear();
            if json {
                writeln!(out, "{}", json!({ "id": id, "run": "new" }))?;
            } else {
                writeln!(out, "--- {id}: a new run ---")?;
            }
        }
        for line in &now[overlap(&printed, &now)..] {
            if json {
                writeln!(out, "{}", json!({ "id": id, "line": line }))?;
            } else {
                writeln!(out, "{line}")?;
            }
        }
        out.flush()?;
        printed = now;
        tokio::time::sleep(FOLLOW_POLL).await;
        app = detail(remote, id).await?;
    }
}

/// The length of the longest end of `old` that `new` begins with.
fn overlap(old: &[String], new: &[String]) -> usize {
    (0..=old.len().min(new.len()))
        .rev()
        .find(|&k| old[old.len() - k..] == new[..k])
        .unwrap_or(0)
}

pub(crate) async fn reload(args: &ReloadArgs) -> Result<u8, RemoteError> {
    let remote = super::remote_of(&args.remote)?;
    let mut out = Out::stdout();
    let summary = remote.post("/apps/reload").await?;
    if args.remote.json {
        out.json(&summary)?;
        return Ok(0);
    }
    let names = |key: &str| -> Vec<String> {
        summary[key]
            .as_array()
            .map(|a| a.iter().map(str_of).collect())
            .unwrap_or_default()
    };
    let mut parts = Vec::new();
    for key in ["added", "removed", "changed"] {
        let apps = names(key);
        if apps.is_empty() {
            parts.push(format!("0 {key}"));
        } else {
            parts.push(format!("{} {key} ({})", apps.len(), apps.join(", ")));
        }
    }
    parts.push(format!("{} unchanged", names("unchanged").len()));
    writeln!(out, "reloaded: {}", parts.join(", "))?;
    // As `serve` does, only what needs attention; --json has the notes too.
    for diagnostic in summary["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let note = diagnostic["severity"]
            .as_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("info"));
        if !note {
            writeln!(out, "{}", super::output::diagnostic(&diagnostic))?;
        }
    }
    Ok(0)
}
