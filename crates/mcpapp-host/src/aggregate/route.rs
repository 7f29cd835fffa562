//! Which app a request of `/mcp` is for, and the request as that app must see it.
//!
//! - `tools/call`: a name the agent's registry gave an app's tool goes to that app (the
//!   registry decides collisions, so `/mcp` and the agent never disagree about a name); a
//!   client that declared the MCP Apps extension may also call app-only tools (its views do),
//!   found by prefix among the running apps in discovery order; and, because a view knows only
//!   its own app's names, an app's own tool name that no other running app has (and that
//!   views may call). Tools the registry got from elsewhere (built-in, plugins) are run by the
//!   gateway. A name nobody lists goes to the one running app without a prefix, if there is
//!   exactly one (its namespace is its own), as its server would take it.
//! - `prompts/get` and `completion/complete` of a prompt: by prefix, among the apps that list
//!   the prompt.
//! - `resources/read`, `resources/subscribe`, `resources/unsubscribe`, and completions of a
//!   template: a namespaced URI names its app; a bare app's URI goes to the app that lists it
//!   (as a resource, a template or a tool's UI); a URI nobody claims (a link in a tool's
//!   result, a resource an app never listed) is tried on every running app in order, bare
//!   apps first.
//!
//! This module only decides; `mod.rs` sends.

use mcpapp_bridge::{ToolEntry, ToolRegistry, app_registration_id};
use mcpapp_session::{RawMessage, raw_string};
use mcpapp_supervisor::{AppHandle, Supervisor};

use super::names::{Scope, running_apps, template_matches};

/// What to do with a routed request.
pub(crate) enum Plan {
    /// Send it to one app, as rewritten.
    Forward(Target),
    /// Try these in order until one answers without an error.
    Try(Vec<Target>),
    /// A tool of the gateway's own registry.
    Gateway(ToolEntry),
    /// Refuse it with this JSON-RPC error.
    Refuse(i64, String),
}

/// One app and the request as it must see it.
pub(crate) struct Target {
    pub(crate) app: AppHandle,
    pub(crate) scope: Scope,
    pub(crate) message: RawMessage,
}

/// Where a routed method's request goes.
pub(crate) fn plan(
    supervisor: &Supervisor,
    registry: &ToolRegistry,
    ui: bool,
    message: &RawMessage,
) -> Plan {
    let method = message.method().unwrap_or_default();
    let apps = running_apps(supervisor);
    match method.as_str() {
        "tools/call" => {
            let Some(name) = text_at(message, &["params", "name"]) else {
                return Plan::Refuse(-32602, "tools/call needs params.name".to_owned());
            };
            tool(registry, &apps, ui, &name).map_or_else(
                || Plan::Refuse(-32602, format!("Unknown tool: {name}")),
                |found| match found {
                    Found::App(app, scope, remote) => {
                        rewritten(app, scope, message, &["params", "name"], &remote)
                    }
                    Found::Gateway(entry) => Plan::Gateway(entry),
                    Found::Ambiguous(names) => Plan::Refuse(
                        -32602,
                        format!(
                            "Unknown tool: {name} (several apps have a tool of that name: call it as {})",
                            names.join(" or ")
                        ),
                    ),
                },
            )
        }
        "prompts/get" => {
            let Some(name) = text_at(message, &["params", "name"]) else {
                return Plan::Refuse(-32602, "prompts/get needs params.name".to_owned());
            };
            prompt(&apps, &name).map_or_else(
                || Plan::Refuse(-32602, format!("Unknown prompt: {name}")),
                |(app, scope, remote)| rewritten(app, scope, message, &["params", "name"], &remote),
            )
        }
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            let Some(uri) = text_at(message, &["params", "uri"]) else {
                return Plan::Refuse(-32602, format!("{method} needs params.uri"));
            };
            by_uri(apps, &uri, message, &["params", "uri"], Claim::Resource)
        }
        "completion/complete" => {
            let kind = text_at(message, &["params", "ref", "type"]).unwrap_or_default();
            match kind.as_str() {
                "ref/prompt" => {
                    let name = text_at(message, &["params", "ref", "name"]).unwrap_or_default();
                    prompt(&apps, &name).map_or_else(
                        || Plan::Refuse(-32602, format!("Unknown prompt: {name}")),
                        |(app, scope, remote)| {
                            rewritten(app, scope, message, &["params", "ref", "name"], &remote)
                        },
                    )
                }
                "ref/resource" => {
                    let uri = text_at(message, &["params", "ref", "uri"]).unwrap_or_default();
                    by_uri(
                        apps,
                        &uri,
                        message,
                        &["params", "ref", "uri"],
                        Claim::Template,
                    )
                }
                other => Plan::Refuse(
                    -32602,
                    format!("unknown completion reference type '{other}'"),
                ),
            }
        }
        other => Plan::Refuse(-32601, format!("Method not found: {other}")),
    }
}

/// A string at a path of the message.
pub(crate) fn text_at(message: &RawMessage, path: &[&str]) -> Option<String> {
    message
        .path(path)
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

fn rewritten(
    app: AppHandle,
    scope: Scope,
    message: &RawMessage,
    path: &[&str],
    value: &str,
) -> Plan {
    let mut message = message.clone();
    if let Err(err) = message.set_path(path, &raw_string(value)) {
        return Plan::Refuse(-32602, err.to_string());
    }
    Plan::Forward(Target {
        app,
        scope,
        message,
    })
}

enum Found {
    App(AppHandle, Scope, String),
    Gateway(ToolEntry),
    /// An app's own name that several apps have: these are its `/mcp` names.
    Ambiguous(Vec<String>),
}

/// The tool a name shown on `/mcp` stands for.
fn tool(
    registry: &ToolRegistry,
    apps: &[(AppHandle, Scope)],
    ui: bool,
    name: &str,
) -> Option<Found> {
    if let Some(entry) = registry.resolve(name) {
        let owner = apps
            .iter()
            .find(|(app, _)| entry.registration_id == app_registration_id(app.id()));
        return match owner {
            Some((app, scope)) => {
                let remote = scope.name_in(name)?.to_owned();
                Some(Found::App(app.clone(), scope.clone(), remote))
            }
            // An app's registration whose app is not running has no one to answer.
            None if entry.registration_id.starts_with("mcpapp:") => None,
            None => Some(Found::Gateway(entry)),
        };
    }
    if !ui {
        return unlisted(apps, name);
    }
    // App-only tools are not in the agent's registry; views call them.
    let app_only = apps.iter().find_map(|(app, scope)| {
        let remote = scope.name_in(name)?;
        let descriptors = app.descriptors();
        let tool = descriptors.tool(remote)?;
        (tool.visibility.app && !tool.visibility.model && !tool.visibility.malformed)
            .then(|| Found::App(app.clone(), scope.clone(), remote.to_owned()))
    });
    if app_only.is_some() {
        return app_only;
    }
    // A view knows only its own app's names: a name that is no `/mcp` name but the own name
    // of a tool views may call, in exactly one running app, is that tool.
    let mut owners = apps.iter().filter(|(app, _)| {
        app.descriptors()
            .tool(name)
            .is_some_and(|t| t.visibility.app && !t.visibility.malformed)
    });
    match (owners.next(), owners.next()) {
        (Some((app, scope)), None) => Some(Found::App(app.clone(), scope.clone(), name.to_owned())),
        (Some(first), Some(second)) => {
            let names = [first, second]
                .into_iter()
                .chain(owners)
                .map(|(_, scope)| scope.name_out(name))
                .collect();
            Some(Found::Ambiguous(names))
        }
        _ => unlisted(apps, name),
    }
}

/// A name no app lists may still be a tool of the one running app without a prefix: servers
/// may answer calls to tools they do not list (the conformance suite's reference server
/// changes its lists through such tools), and such an app's namespace is its own, which `/mcp`
/// passes through as it is. With several bare apps nobody can tell which it would be; a
/// prefixed app's names are the gateway's, and only those it lists exist. A tool the app does
/// list, but this client may not see, stays unknown to it.
fn unlisted(apps: &[(AppHandle, Scope)], name: &str) -> Option<Found> {
    let mut bare = apps.iter().filter(|(_, scope)| scope.is_bare());
    match (bare.next(), bare.next()) {
        (Some((app, scope)), None) if app.descriptors().tool(name).is_none() => {
            Some(Found::App(app.clone(), scope.clone(), name.to_owned()))
        }
        _ => None,
    }
}

/// The app a prompt name shown on `/mcp` belongs to, and its own name for it.
fn prompt(apps: &[(AppHandle, Scope)], name: &str) -> Option<(AppHandle, Scope, String)> {
    let listed = apps.iter().find_map(|(app, scope)| {
        let remote = scope.name_in(name)?;
        app.descriptors()
            .prompts
            .iter()
            .any(|p| p.name == remote)
            .then(|| (app.clone(), scope.clone(), remote.to_owned()))
    });
    // An app whose prompts were not enumerated (yet) may still have it: the first app the
    // name can belong to answers.
    listed.or_else(|| {
        apps.iter().find_map(|(app, scope)| {
            let remote = scope.name_in(name)?;
            (!scope.is_bare() || apps.iter().filter(|(_, s)| s.is_bare()).count() == 1)
                .then(|| (app.clone(), scope.clone(), remote.to_owned()))
        })
    })
}

/// What claims a URI: a resource (read, subscribe) or a template (completion).
#[derive(Clone, Copy)]
pub(crate) enum Claim {
    Resource,
    Template,
}

fn claims(app: &AppHandle, uri: &str, claim: Claim) -> bool {
    let descriptors = app.descriptors();
    match claim {
        Claim::Resource => {
            descriptors.resources.iter().any(|r| r.uri == uri)
                || descriptors
                    .tools
                    .iter()
                    .any(|t| t.ui_resource_uri.as_deref() == Some(uri))
                || descriptors
                    .templates
                    .iter()
                    .any(|t| template_matches(&t.uri_template, uri))
        }
        Claim::Template => descriptors.templates.iter().any(|t| t.uri_template == uri),
    }
}

/// The apps a URI shown on `/mcp` may belong to, in the order to try them, each with the
/// app's own URI: one when the URI is namespaced or claimed, else every running app (bare
/// apps first).
pub(crate) fn uri_targets(
    apps: Vec<(AppHandle, Scope)>,
    uri: &str,
    claim: Claim,
) -> Vec<(AppHandle, Scope, String)> {
    if let Some(found) = apps
        .iter()
        .find_map(|(app, scope)| scope.uri_in(uri).map(|o| (app.clone(), scope.clone(), o)))
    {
        return vec![found];
    }
    if let Some((app, scope)) = apps
        .iter()
        .find(|(app, scope)| scope.is_bare() && claims(app, uri, claim))
    {
        return vec![(app.clone(), scope.clone(), uri.to_owned())];
    }
    let (bare, prefixed): (Vec<_>, Vec<_>) = apps.into_iter().partition(|(_, s)| s.is_bare());
    bare.into_iter()
        .chain(prefixed)
        .map(|(app, scope)| (app, scope, uri.to_owned()))
        .collect()
}

fn by_uri(
    apps: Vec<(AppHandle, Scope)>,
    uri: &str,
    message: &RawMessage,
    path: &[&str],
    claim: Claim,
) -> Plan {
    let mut targets: Vec<Target> = Vec::new();
    for (app, scope, original) in uri_targets(apps, uri, claim) {
        let mut message = message.clone();
        if let Err(err) = message.set_path(path, &raw_string(&original)) {
            return Plan::Refuse(-32602, err.to_string());
        }
        targets.push(Target {
            app,
            scope,
            message,
        });
    }
    if targets.len() > 1 {
        return Plan::Try(targets);
    }
    targets.into_iter().next().map_or_else(
        || {
            Plan::Refuse(
                -32002,
                format!("Resource not found: {uri} (no app is running)"),
            )
        },
        Plan::Forward,
    )
}
