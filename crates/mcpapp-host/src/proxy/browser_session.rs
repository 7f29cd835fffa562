//! A browser session of `/apps/mcp/{appId}`: a port on the app's one upstream session, its
//! reopenable event stream, and what keeps it from expiring while it is in use. The store of
//! them (capped per app, idle ones closed) is `streamable_http/session_store.rs`'s.

use std::sync::Arc;

use mcpapp_session::Port;

use crate::streamable_http::replay::EventLog;
use crate::streamable_http::session_store::{Activity, Session, Sessions};

/// The browser sessions of every app, capped per app.
pub(crate) type ProxySessions = Sessions<ProxySession>;

/// One browser session of `/apps/mcp/{appId}`: a port on the app's upstream session.
pub(crate) struct ProxySession {
    app_id: String,
    pub(super) port: Port,
    /// The session's standalone event stream: held by the GET that serves it, so one GET
    /// at a time; what it sent is kept for a reconnecting client.
    pub(super) events: Arc<tokio::sync::Mutex<EventLog>>,
    activity: Arc<Activity>,
}

impl ProxySession {
    pub(super) fn new(app_id: String, port: Port) -> Self {
        let events = EventLog::new(port.take_notifications());
        Self {
            app_id,
            port,
            events: Arc::new(tokio::sync::Mutex::new(events)),
            activity: Activity::new(),
        }
    }
}

impl Session for ProxySession {
    fn group(&self) -> &str {
        &self.app_id
    }

    fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    fn describe(&self) -> String {
        format!("app {} port {}", self.app_id, self.port.id())
    }
}
