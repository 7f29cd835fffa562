//! Enumeration: listing an app's tools, resources, templates and prompts into
//! [`Descriptors`], at start and again when the app says a list changed (which a modern app
//! says only on a `subscriptions/listen` stream, so the gateway's client listens for it).
//!
//! The listings are I/O; what their answers mean is [`apply`], a pure function: a failing
//! `tools/list` fails, the other lists become warnings, and a server without templates that
//! does not know `resources/templates/list` is no problem.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mcpapp_session::{Connection, Notice};
use rmcp::ServiceError;
use rmcp::model::{
    Prompt, Resource, ResourceTemplate, ServerCapabilities, ServerNotification, SubscriptionFilter,
    Tool,
};
use tokio::sync::mpsc;
use tracing::{Instrument, warn};

use super::AppShared;
use super::error::{ListError, StartWarning};
use crate::descriptors::{
    Descriptors, PromptDescriptor, ResourceDescriptor, ResourceTemplateDescriptor, ToolDescriptor,
};
use crate::events::SupervisorEvent;

/// Which lists to (re-)enumerate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lists {
    tools: bool,
    resources: bool,
    prompts: bool,
}

impl Lists {
    /// Every list, as at start.
    const ALL: Self = Self {
        tools: true,
        resources: true,
        prompts: true,
    };
}

impl From<Notice> for Lists {
    /// The list a change notice is about (resources include their templates).
    fn from(notice: Notice) -> Self {
        Self {
            tools: notice == Notice::Tools,
            resources: notice == Notice::Resources,
            prompts: notice == Notice::Prompts,
        }
    }
}

/// The answers of one round of listings; `None` for a list not asked for (or one the
/// server's capabilities do not offer).
#[derive(Debug, Default)]
struct Listings {
    tools: Option<Result<Vec<Tool>, ListError>>,
    resources: Option<Result<Vec<Resource>, ListError>>,
    templates: Option<Result<Vec<ResourceTemplate>, ListError>>,
    prompts: Option<Result<Vec<Prompt>, ListError>>,
}

/// Lists tools, resources, templates and prompts, as the server's capabilities allow.
///
/// # Errors
/// A failing `tools/list`; the other lists become warnings.
pub(super) async fn enumerate(
    connection: &Connection,
    timeout: Duration,
) -> Result<(Descriptors, Vec<StartWarning>), ListError> {
    let mut descriptors = Descriptors::default();
    let listings = list(connection, timeout, Lists::ALL).await;
    let warnings = apply(Lists::ALL, listings, &mut descriptors)?;
    Ok((descriptors, warnings))
}

/// Re-enumerates after a list-changed notice and publishes the change; when the listing
/// fails, the old lists stay.
pub(super) async fn refresh(
    shared: &Arc<AppShared>,
    connection: &Connection,
    timeout: Duration,
    lists: Lists,
) {
    let mut descriptors = (*shared.descriptors()).clone();
    let listings = list(connection, timeout, lists).await;
    match apply(lists, listings, &mut descriptors) {
        Ok(warnings) => {
            for warning in warnings {
                warn!(app = %shared.id, "{warning}");
            }
            shared.publish(descriptors, |_| {});
            let _ = shared.events.send(changed(lists, shared.id.clone()));
        }
        Err(err) => {
            warn!(app = %shared.id, "re-listing after a change failed, keeping the old list: {err}")
        }
    }
}

/// Asks for `lists`, as far as the server's capabilities offer them.
async fn list(connection: &Connection, timeout: Duration, lists: Lists) -> Listings {
    let peer = connection.client.peer();
    let capabilities = connection
        .client
        .peer_info()
        .map(|info| info.capabilities.clone())
        .unwrap_or_default();
    let resources = lists.resources && capabilities.resources.is_some();
    let prompts = lists.prompts && capabilities.prompts.is_some();
    // The lists are asked for at once rather than one after another: each is a round trip
    // through the hub and the app, and at start-up four of them in a row were most of an
    // app's time to Running. What the results mean (and the order of the warnings) stays
    // as if they had been asked in turn.
    let (tools, resources, templates, prompts) = tokio::join!(
        listing(
            lists.tools && capabilities.tools.is_some(),
            "tools/list",
            timeout,
            || peer.list_all_tools()
        ),
        listing(resources, "resources/list", timeout, || peer
            .list_all_resources()),
        listing(resources, "resources/templates/list", timeout, || peer
            .list_all_resource_templates()),
        listing(prompts, "prompts/list", timeout, || peer.list_all_prompts()),
    );
    Listings {
        tools,
        resources,
        templates,
        prompts,
    }
}

/// Runs the listing `list` makes if `wanted` (else nothing), bounded by `timeout`.
async fn listing<T, F>(
    wanted: bool,
    method: &'static str,
    timeout: Duration,
    list: impl FnOnce() -> F,
) -> Option<Result<Vec<T>, ListError>>
where
    F: Future<Output = Result<Vec<T>, ServiceError>>,
{
    if !wanted {
        return None;
    }
    Some(match tokio::time::timeout(timeout, list()).await {
        Ok(Ok(items)) => Ok(items),
        Ok(Err(source)) => Err(ListError::Failed { method, source }),
        Err(_) => Err(ListError::TimedOut {
            method,
            seconds: timeout.as_secs(),
        }),
    })
}

/// Puts what `listings` found for `lists` into `descriptors`; a list that failed keeps what
/// `descriptors` had and becomes a warning (in the order tools, resources, templates,
/// prompts).
///
/// # Errors
/// A failing `tools/list`, before anything changed.
fn apply(
    lists: Lists,
    listings: Listings,
    descriptors: &mut Descriptors,
) -> Result<Vec<StartWarning>, ListError> {
    if lists.tools {
        // A server that offers no tools any more has none.
        descriptors.tools = match listings.tools {
            Some(tools) => tools?
                .iter()
                .filter(|t| !t.name.trim().is_empty())
                .map(ToolDescriptor::from_tool)
                .collect(),
            None => Vec::new(),
        };
    }
    let mut warnings = Vec::new();
    let mut warn = |error: ListError| warnings.push(StartWarning::Listing(error));
    match listings.resources {
        Some(Ok(resources)) => {
            descriptors.resources = resources
                .iter()
                .map(ResourceDescriptor::from_resource)
                .collect();
        }
        Some(Err(error)) => warn(error),
        None => {}
    }
    match listings.templates {
        Some(Ok(templates)) => {
            descriptors.templates = templates
                .iter()
                .map(ResourceTemplateDescriptor::from_template)
                .collect();
        }
        // Servers without templates often answer "method not found"; that is no problem.
        Some(Err(error)) if error.is_method_not_found() => {}
        Some(Err(error)) => warn(error),
        None => {}
    }
    match listings.prompts {
        Some(Ok(prompts)) => {
            descriptors.prompts = prompts.iter().map(PromptDescriptor::from_prompt).collect();
        }
        Some(Err(error)) => warn(error),
        None => {}
    }
    Ok(warnings)
}

/// The event that announces a change of `lists` (one list at a time).
fn changed(lists: Lists, app_id: String) -> SupervisorEvent {
    if lists.tools {
        SupervisorEvent::ToolsChanged { app_id }
    } else if lists.resources {
        SupervisorEvent::ResourcesChanged { app_id }
    } else {
        SupervisorEvent::PromptsChanged { app_id }
    }
}

/// A modern app announces list changes only on a `subscriptions/listen` stream: the gateway's
/// client listens for the lists the app says can change, for as long as the connection lives.
pub(super) fn listen_for_changes(connection: &Connection, notices: mpsc::UnboundedSender<Notice>) {
    let capabilities = connection
        .client
        .peer_info()
        .map(|info| info.capabilities.clone())
        .unwrap_or_default();
    let Some(filter) = change_filter(&capabilities) else {
        return;
    };
    let peer = connection.client.peer().clone();
    tokio::spawn(
        async move {
            let mut subscription = match peer.listen(filter).await {
                Ok(subscription) => subscription,
                Err(err) => {
                    warn!("cannot listen for the app's list changes: {err}");
                    return;
                }
            };
            while let Ok(Some(notification)) = subscription.next().await {
                let Some(notice) = notice_of(&notification) else {
                    continue;
                };
                if notices.send(notice).is_err() {
                    break;
                }
            }
        }
        .in_current_span(),
    );
}

/// What to listen for: the lists the server says can change; `None` when none can.
fn change_filter(capabilities: &ServerCapabilities) -> Option<SubscriptionFilter> {
    let mut filter = SubscriptionFilter::builder();
    let mut any = false;
    if capabilities.tools.as_ref().and_then(|t| t.list_changed) == Some(true) {
        filter = filter.tools_list_changed();
        any = true;
    }
    if capabilities.prompts.as_ref().and_then(|p| p.list_changed) == Some(true) {
        filter = filter.prompts_list_changed();
        any = true;
    }
    if capabilities.resources.as_ref().and_then(|r| r.list_changed) == Some(true) {
        filter = filter.resources_list_changed();
        any = true;
    }
    any.then(|| filter.build())
}

/// The list a notification says changed, if it says so.
fn notice_of(notification: &ServerNotification) -> Option<Notice> {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => Some(Notice::Tools),
        ServerNotification::PromptListChangedNotification(_) => Some(Notice::Prompts),
        ServerNotification::ResourceListChangedNotification(_) => Some(Notice::Resources),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ErrorCode, ErrorData};
    use serde_json::json;

    use super::*;

    fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid test JSON")
    }

    fn tool(name: &str) -> Tool {
        from_json(json!({ "name": name, "inputSchema": { "type": "object" } }))
    }

    fn failed(method: &'static str, code: ErrorCode) -> ListError {
        ListError::Failed {
            method,
            source: ServiceError::McpError(ErrorData::new(code, "nope", None)),
        }
    }

    fn texts(warnings: &[StartWarning]) -> Vec<String> {
        warnings
            .iter()
            .map(|w| w.to_string().split(": Mcp").next().unwrap_or("").to_owned())
            .collect()
    }

    #[test]
    fn a_full_listing_fills_every_list_and_skips_nameless_tools() {
        let listings = Listings {
            tools: Some(Ok(vec![tool("forecast"), tool("  ")])),
            resources: Some(Ok(vec![from_json(
                json!({ "uri": "ui://weather/app.html", "name": "app" }),
            )])),
            templates: Some(Ok(vec![from_json(
                json!({ "uriTemplate": "weather://{city}", "name": "city" }),
            )])),
            prompts: Some(Ok(vec![from_json(json!({ "name": "brief" }))])),
        };
        let mut descriptors = Descriptors::default();
        let warnings = apply(Lists::ALL, listings, &mut descriptors).expect("tools listed");
        assert!(warnings.is_empty());
        let names: Vec<&str> = descriptors.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["forecast"]);
        assert_eq!(descriptors.resources[0].uri, "ui://weather/app.html");
        assert_eq!(descriptors.templates[0].uri_template, "weather://{city}");
        assert_eq!(descriptors.prompts[0].name, "brief");
    }

    #[test]
    fn failing_tools_fail_and_the_other_lists_only_warn_in_order() {
        let mut descriptors = Descriptors::default();
        let listings = Listings {
            tools: Some(Err(failed("tools/list", ErrorCode::INTERNAL_ERROR))),
            ..Listings::default()
        };
        let error = apply(Lists::ALL, listings, &mut descriptors).expect_err("tools failed");
        assert!(
            error.to_string().starts_with("tools/list failed: "),
            "{error}"
        );

        let listings = Listings {
            tools: Some(Ok(vec![tool("forecast")])),
            resources: Some(Err(ListError::TimedOut {
                method: "resources/list",
                seconds: 5,
            })),
            templates: Some(Err(failed(
                "resources/templates/list",
                ErrorCode::INTERNAL_ERROR,
            ))),
            prompts: Some(Err(failed("prompts/list", ErrorCode::INVALID_REQUEST))),
        };
        let warnings = apply(Lists::ALL, listings, &mut descriptors).expect("tools listed");
        assert_eq!(
            texts(&warnings),
            [
                "enumeration: resources/list timed out after 5 s",
                "enumeration: resources/templates/list failed",
                "enumeration: prompts/list failed",
            ]
        );
        assert_eq!(descriptors.tools.len(), 1);
    }

    #[test]
    fn a_server_without_templates_is_no_problem() {
        let listings = Listings {
            tools: Some(Ok(Vec::new())),
            templates: Some(Err(failed(
                "resources/templates/list",
                ErrorCode::METHOD_NOT_FOUND,
            ))),
            ..Listings::default()
        };
        let mut descriptors = Descriptors::default();
        let warnings = apply(Lists::ALL, listings, &mut descriptors).expect("tools listed");
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn a_refresh_changes_only_its_list_and_keeps_a_list_that_failed() {
        let mut descriptors = Descriptors::default();
        let full = Listings {
            tools: Some(Ok(vec![tool("forecast")])),
            prompts: Some(Ok(vec![from_json(json!({ "name": "brief" }))])),
            ..Listings::default()
        };
        apply(Lists::ALL, full, &mut descriptors).expect("tools listed");

        // Prompts changed, and listing them failed: the old prompts stay, the tools too.
        let prompts = Lists::from(Notice::Prompts);
        let listings = Listings {
            prompts: Some(Err(failed("prompts/list", ErrorCode::INTERNAL_ERROR))),
            ..Listings::default()
        };
        let warnings = apply(prompts, listings, &mut descriptors).expect("no tools asked");
        assert_eq!(texts(&warnings), ["enumeration: prompts/list failed"]);
        assert_eq!((descriptors.tools.len(), descriptors.prompts.len()), (1, 1));

        // Tools changed and the server no longer offers any: none are left.
        let warnings = apply(
            Lists::from(Notice::Tools),
            Listings::default(),
            &mut descriptors,
        )
        .expect("no tools to fail");
        assert!(warnings.is_empty());
        assert!(descriptors.tools.is_empty());
        assert_eq!(descriptors.prompts.len(), 1);
    }

    #[test]
    fn each_change_is_announced_as_its_own_list() {
        let app = || "weather".to_owned();
        assert_eq!(
            changed(Lists::from(Notice::Tools), app()),
            SupervisorEvent::ToolsChanged { app_id: app() }
        );
        assert_eq!(
            changed(Lists::from(Notice::Resources), app()),
            SupervisorEvent::ResourcesChanged { app_id: app() }
        );
        assert_eq!(
            changed(Lists::from(Notice::Prompts), app()),
            SupervisorEvent::PromptsChanged { app_id: app() }
        );
    }

    #[tokio::test]
    async fn a_listing_is_bounded_and_names_its_method() {
        let slow = listing(true, "tools/list", Duration::ZERO, || {
            std::future::pending::<Result<Vec<Tool>, ServiceError>>()
        })
        .await;
        assert_eq!(
            slow.map(|r| r.map_err(|e| e.to_string()).map(|t| t.len())),
            Some(Err("tools/list timed out after 0 s".to_owned()))
        );
        let unwanted = listing(false, "tools/list", Duration::ZERO, || async {
            Ok(vec![tool("forecast")])
        })
        .await;
        assert!(unwanted.is_none());
        let refused = listing(true, "prompts/list", Duration::from_secs(1), || async {
            Err::<Vec<Prompt>, _>(ServiceError::TransportClosed)
        })
        .await;
        assert!(matches!(
            refused,
            Some(Err(ListError::Failed {
                method: "prompts/list",
                source: ServiceError::TransportClosed
            }))
        ));
    }

    #[test]
    fn the_client_listens_only_for_lists_that_can_change() {
        let capabilities: ServerCapabilities = from_json(json!({
            "tools": { "listChanged": true },
            "prompts": {},
            "resources": { "listChanged": true },
        }));
        let filter = change_filter(&capabilities).expect("two lists can change");
        assert_eq!(
            (
                filter.tools_list_changed,
                filter.prompts_list_changed,
                filter.resources_list_changed
            ),
            (Some(true), None, Some(true))
        );
        let still: ServerCapabilities = from_json(json!({ "tools": {} }));
        assert_eq!(change_filter(&still), None);
    }

    #[test]
    fn only_list_changes_become_notices() {
        let notice = |method: &str| notice_of(&from_json(json!({ "method": method })));
        assert_eq!(
            notice("notifications/tools/list_changed"),
            Some(Notice::Tools)
        );
        assert_eq!(
            notice("notifications/prompts/list_changed"),
            Some(Notice::Prompts)
        );
        assert_eq!(
            notice("notifications/resources/list_changed"),
            Some(Notice::Resources)
        );
        assert_eq!(
            notice_of(&from_json(json!({
                "method": "notifications/resources/updated",
                "params": { "uri": "weather://paris" }
            }))),
            None
        );
    }
}
