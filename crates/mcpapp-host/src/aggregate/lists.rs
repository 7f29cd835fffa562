//! `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list` of `/mcp`:
//! every running app's list, fetched from the app itself (every page, in the client's era, so
//! each entry keeps every field the app wrote), in discovery order, with names and URIs moved
//! into `/mcp`'s namespace (see `names.rs`). One complete page is returned.
//!
//! Tools are the agent's: a model-visible tool is listed when the registry gave its name to
//! this app (collisions are decided once, for the agent and `/mcp` alike). A client that
//! declared the MCP Apps extension also gets the app-only tools (visibility `["app"]`: its
//! views call them, its model must not), named the same way, unless the name is taken; a
//! client that did not gets only what a model may use, as the MCP Apps specification asks of
//! a host. A tool's UI resource (`_meta.ui.resourceUri`, and the older flat
//! `_meta["ui/resourceUri"]`) is rewritten like every URI, so the client reads it through
//! `/mcp`. Tools the registry holds from elsewhere (built-in, plugins) come last.
//!
//! Prompts take the app's prefix; when two apps give the same name, the first app's is
//! listed. An app that does not answer a list (no such capability, a failure) adds nothing.

use std::collections::HashSet;

use indexmap::IndexMap;
use mcpapp_bridge::{ToolRegistry, app_registration_id};
use mcpapp_session::{RawMessage, raw_string};
use mcpapp_supervisor::{AppHandle, Supervisor, Visibility};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tracing::debug;

use super::link::{Link, ask};
use super::names::{Scope, running_apps};

/// The most pages read from one app for one list.
const MAX_PAGES: usize = 100;

type RawObject = IndexMap<String, Box<RawValue>>;

/// One of the four lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl ListKind {
    pub(crate) fn of(method: &str) -> Option<Self> {
        match method {
            "tools/list" => Some(Self::Tools),
            "resources/list" => Some(Self::Resources),
            "resources/templates/list" => Some(Self::Templates),
            "prompts/list" => Some(Self::Prompts),
            _ => None,
        }
    }

    fn method(self) -> &'static str {
        match self {
            Self::Tools => "tools/list",
            Self::Resources => "resources/list",
            Self::Templates => "resources/templates/list",
            Self::Prompts => "prompts/list",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Resources => "resources",
            Self::Templates => "resourceTemplates",
            Self::Prompts => "prompts",
        }
    }
}

/// What one app listed: its entries and, for 2026-07-28 clients, how long the list may be
/// cached.
struct Listed {
    items: Vec<Box<RawValue>>,
    ttl_ms: Option<u64>,
    private: bool,
}

/// The answer to the client's list `request`.
pub(crate) async fn list(
    supervisor: &Supervisor,
    registry: &ToolRegistry,
    link: &Link,
    request: &RawMessage,
    kind: ListKind,
) -> RawMessage {
    let apps = running_apps(supervisor);
    let meta = request.path(&["params", "_meta"]).map(|meta| {
        // A progress token names the client's request, not the gateway's page requests.
        let mut meta: RawObject = serde_json::from_str(meta.get()).unwrap_or_default();
        meta.shift_remove("progressToken");
        meta
    });
    let listed = futures::future::join_all(
        apps.iter()
            .map(|(app, _)| list_app(link, app, kind, meta.as_ref())),
    )
    .await;
    let ui = link.ui();
    let mut entries: Vec<Box<RawValue>> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    let mut ttl_ms: Option<u64> = None;
    let mut private = false;
    for ((app, scope), listed) in apps.iter().zip(listed) {
        let Some(listed) = listed else { continue };
        ttl_ms = match (ttl_ms, listed.ttl_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        private |= listed.private;
        for item in listed.items {
            let entry = match kind {
                ListKind::Tools => tool_entry(registry, app, scope, ui, &item, &mut taken),
                ListKind::Prompts => named_entry(scope, &item, &mut taken),
                ListKind::Resources => uri_entry(scope, &item, "uri"),
                ListKind::Templates => uri_entry(scope, &item, "uriTemplate"),
            };
            entries.extend(entry);
        }
    }
    if kind == ListKind::Tools {
        entries.extend(gateway_tools(registry, &taken));
    }
    let mut result: RawObject = IndexMap::new();
    let array = serde_json::to_string(&entries).unwrap_or_else(|_| "[]".to_owned());
    result.insert(
        kind.field().to_owned(),
        RawValue::from_string(array).unwrap_or_else(|_| raw_string("")),
    );
    if link.era() == mcpapp_manifest::Era::Modern {
        result.insert("resultType".to_owned(), raw_string("complete"));
        result.insert(
            "ttlMs".to_owned(),
            raw_json(&ttl_ms.unwrap_or(0).to_string()),
        );
        result.insert(
            "cacheScope".to_owned(),
            raw_string(if private { "private" } else { "public" }),
        );
    }
    let text = serde_json::to_string(&result).unwrap_or_else(|_| "{}".to_owned());
    let null = raw_json("null");
    RawMessage::response(request.id().unwrap_or(&null), &raw_json(&text))
}

fn raw_json(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap_or_else(|_| raw_string(""))
}

/// Every page of one app's list, or nothing when the app does not answer it.
async fn list_app(
    link: &Link,
    app: &AppHandle,
    kind: ListKind,
    meta: Option<&RawObject>,
) -> Option<Listed> {
    let channel = match link.open(app) {
        Ok(channel) => channel,
        Err(err) => {
            debug!(app = %app.id(), "no list from an app: {err}");
            return None;
        }
    };
    let mut listed = Listed {
        items: Vec::new(),
        ttl_ms: None,
        private: false,
    };
    let mut cursor: Option<Box<RawValue>> = None;
    for page in 0..MAX_PAGES {
        let mut params: RawObject = IndexMap::new();
        if let Some(cursor) = cursor.take() {
            params.insert("cursor".to_owned(), cursor);
        }
        if let Some(meta) = meta {
            let meta = serde_json::to_string(meta).unwrap_or_else(|_| "{}".to_owned());
            params.insert("_meta".to_owned(), raw_json(&meta));
        }
        let params = raw_json(&serde_json::to_string(&params).unwrap_or_else(|_| "{}".to_owned()));
        let result = match ask(link, &channel, page, kind.method(), &params).await {
            Ok(result) => result,
            Err(why) => {
                debug!(app = %app.id(), method = kind.method(), "an app did not list: {why}");
                // What earlier pages gave still counts.
                return (page > 0).then_some(listed);
            }
        };
        let result: RawObject = serde_json::from_str(result.get()).unwrap_or_default();
        if let Some(items) = result.get(kind.field()) {
            let items: Vec<Box<RawValue>> = serde_json::from_str(items.get()).unwrap_or_default();
            listed.items.extend(items);
        }
        if let Some(ttl) = result
            .get("ttlMs")
            .and_then(|t| t.get().parse::<u64>().ok())
        {
            listed.ttl_ms = Some(listed.ttl_ms.map_or(ttl, |t| t.min(ttl)));
        }
        listed.private |= result
            .get("cacheScope")
            .is_some_and(|s| s.get() == "\"private\"");
        cursor = result
            .get("nextCursor")
            .filter(|c| c.get() != "null")
            .cloned();
        if cursor.is_none() {
            return Some(listed);
        }
    }
    debug!(app = %app.id(), method = kind.method(), "an app's list has more than {MAX_PAGES} pages; the rest is left out");
    Some(listed)
}

fn text(object: &RawObject, key: &str) -> Option<String> {
    object
        .get(key)
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

fn set(object: &mut RawObject, key: &str, value: &str) {
    object.insert(key.to_owned(), raw_string(value));
}

fn render(object: &RawObject) -> Option<Box<RawValue>> {
    serde_json::to_string(object)
        .ok()
        .and_then(|t| RawValue::from_string(t).ok())
}

/// A tool entry as `/mcp` lists it, or nothing when this client must not see it.
fn tool_entry(
    registry: &ToolRegistry,
    app: &AppHandle,
    scope: &Scope,
    ui: bool,
    item: &RawValue,
    taken: &mut HashSet<String>,
) -> Option<Box<RawValue>> {
    let mut tool: RawObject = serde_json::from_str(item.get()).ok()?;
    let remote = text(&tool, "name")?;
    let meta: Option<Map<String, Value>> = tool
        .get("_meta")
        .and_then(|m| serde_json::from_str(m.get()).ok());
    let visibility = Visibility::from_meta(meta.as_ref());
    let name = scope.name_out(&remote);
    if taken.contains(&name) {
        return None;
    }
    let listed = if visibility.model {
        registry
            .resolve(&name)
            .is_some_and(|entry| entry.registration_id == app_registration_id(app.id()))
    } else {
        ui && visibility.app && registry.resolve(&name).is_none()
    };
    if !listed {
        return None;
    }
    taken.insert(name.clone());
    set(&mut tool, "name", &name);
    if !scope.is_bare()
        && let Some(mut meta) = meta
    {
        if let Some(Value::Object(ui_meta)) = meta.get_mut("ui")
            && let Some(Value::String(uri)) = ui_meta.get_mut("resourceUri")
        {
            *uri = scope.uri_out(uri.as_str());
        }
        if let Some(Value::String(uri)) = meta.get_mut("ui/resourceUri") {
            *uri = scope.uri_out(uri.as_str());
        }
        if let Ok(meta) = serde_json::value::to_raw_value(&meta) {
            tool.insert("_meta".to_owned(), meta);
        }
    }
    render(&tool)
}

/// A prompt entry under its prefixed name; the first app to give a name keeps it.
fn named_entry(
    scope: &Scope,
    item: &RawValue,
    taken: &mut HashSet<String>,
) -> Option<Box<RawValue>> {
    let mut entry: RawObject = serde_json::from_str(item.get()).ok()?;
    let name = scope.name_out(&text(&entry, "name")?);
    if !taken.insert(name.clone()) {
        debug!(prompt = %name, app = %scope.id(), "a prompt name is taken by an earlier app");
        return None;
    }
    if scope.is_bare() {
        return Some(item.to_owned());
    }
    set(&mut entry, "name", &name);
    render(&entry)
}

/// A resource or template entry with its URI in `/mcp`'s namespace.
fn uri_entry(scope: &Scope, item: &RawValue, key: &str) -> Option<Box<RawValue>> {
    if scope.is_bare() {
        return Some(item.to_owned());
    }
    let mut entry: RawObject = serde_json::from_str(item.get()).ok()?;
    let uri = text(&entry, key)?;
    set(&mut entry, key, &scope.uri_out(&uri));
    render(&entry)
}

/// The registry's tools that no app owns (built-in tools, plugins), as plain MCP tools.
fn gateway_tools(registry: &ToolRegistry, taken: &HashSet<String>) -> Vec<Box<RawValue>> {
    registry
        .list()
        .into_iter()
        .filter(|entry| {
            !entry.registration_id.starts_with("mcpapp:") && !taken.contains(&entry.name)
        })
        .filter_map(|entry| {
            let mut tool = serde_json::json!({
                "name": entry.name,
                "description": entry.tool.description(),
                "inputSchema": entry.tool.input_schema(),
            });
            if let Some(meta) = entry.tool.meta() {
                tool["_meta"] = meta.clone();
            }
            serde_json::value::to_raw_value(&tool).ok()
        })
        .collect()
}
