//! `/mcp`: every model-visible app tool under its registered name, for external clients.

use std::sync::{Arc, Mutex};

use mcpapp_testkit::{AppsDir, bin};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;
use tokio::sync::Notify;

use crate::{Gateway, PATIENCE};

#[tokio::test]
async fn mcp_lists_prefixed_model_tools_and_calls_them() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "grocery",
        &bin("grocery-inventory"),
        &["stdio"],
        r#"{"toolNamePrefix": "grocery."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let client = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/mcp",
            gateway.url
        )))
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"grocery.get_stores") && names.contains(&"grocery.reset_inventory"),
        "{names:?}"
    );
    // App-only tools are for views, not for models.
    assert!(
        !names.iter().any(|n| n.ends_with("refresh_dashboard")),
        "{names:?}"
    );
    let result = client
        .call_tool(
            CallToolRequestParams::new("grocery.get_stores")
                .with_arguments(json!({"id": 1}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    assert!(
        result.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("Downtown Market")
    );
    let unknown = client
        .call_tool(CallToolRequestParams::new("grocery.nope"))
        .await;
    assert!(unknown.is_err());
    client.cancel().await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test]
async fn mcp_and_the_app_proxy_keep_separate_surfaces() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "inventory-app",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "inventory."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let aggregate = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/mcp",
            gateway.url
        )))
        .await
        .unwrap();
    let proxy = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/apps/mcp/inventory-app",
            gateway.url
        )))
        .await
        .unwrap();
    let aggregate_names: Vec<String> = aggregate
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let proxy_names: Vec<String> = proxy
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(aggregate_names.contains(&"inventory.echo_session".to_owned()));
    assert!(!aggregate_names.contains(&"echo_session".to_owned()));
    assert!(!aggregate_names.iter().any(|n| n.contains("app_only_tool")));
    assert!(
        proxy_names.contains(&"echo_session".to_owned())
            && proxy_names.contains(&"app_only_tool".to_owned())
    );
    assert!(!proxy_names.iter().any(|n| n.starts_with("inventory.")));
    aggregate.cancel().await.unwrap();
    proxy.cancel().await.unwrap();
    gateway.shutdown().await;
}

/// Counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct ListWatcher {
    changes: Arc<Mutex<u32>>,
    notify: Arc<Notify>,
}

impl rmcp::ClientHandler for ListWatcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        *self.changes.lock().unwrap() += 1;
        self.notify.notify_waiters();
    }
}

#[tokio::test]
async fn mcp_clients_hear_when_the_tool_set_changes() {
    let apps = AppsDir::new();
    apps.stdio_app(
        "fx",
        &bin("fixture-app"),
        &["stdio"],
        r#"{"toolNamePrefix": "fx."}"#,
    );
    let gateway = Gateway::start(apps, |_| {}).await;
    let watcher = ListWatcher::default();
    let client = watcher
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/mcp",
            gateway.url
        )))
        .await
        .unwrap();
    let before = client.list_all_tools().await.unwrap().len();
    let changed = watcher.notify.notified();
    tokio::pin!(changed);
    changed.as_mut().enable();
    client
        .call_tool(CallToolRequestParams::new("fx.notify_tools_changed"))
        .await
        .unwrap();
    tokio::time::timeout(PATIENCE, changed).await.unwrap();
    let after = client.list_all_tools().await.unwrap();
    assert!(
        after.iter().any(|t| t.name == "fx.added_tool_1"),
        "{after:?}"
    );
    assert_eq!(after.len(), before + 1);
    client.cancel().await.unwrap();
    gateway.shutdown().await;
}
