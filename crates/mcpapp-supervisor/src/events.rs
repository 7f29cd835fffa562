//! What the supervisor publishes: lifecycle transitions and changes of what apps offer.

use std::time::Duration;

use mcpapp_manifest::{Lifecycle, Timestamp};
use mcpapp_oauth::AuthState;

/// One event of the supervisor, for every app. Subscribe with
/// [`Supervisor::subscribe`](crate::Supervisor::subscribe).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SupervisorEvent {
    /// An app moved from one lifecycle state to another.
    Lifecycle {
        /// The app.
        app_id: String,
        /// The state it left.
        from: Lifecycle,
        /// The state it entered.
        to: Lifecycle,
        /// Why, for failures and stops.
        reason: Option<String>,
        /// When.
        at: Timestamp,
    },
    /// A failed app will be started again after `delay`.
    RestartScheduled {
        /// The app.
        app_id: String,
        /// Failures in a row so far (1 for the first restart).
        attempt: u32,
        /// How long until the restart.
        delay: Duration,
    },
    /// An app's tool list changed (re-enumerated after `tools/list_changed`).
    ToolsChanged {
        /// The app.
        app_id: String,
    },
    /// An app's resource or template list changed.
    ResourcesChanged {
        /// The app.
        app_id: String,
    },
    /// An app's prompt list changed.
    PromptsChanged {
        /// The app.
        app_id: String,
    },
    /// Where an app stands with its OAuth authorization server changed (it needs the user,
    /// is being authorized, was granted, wants more scope, ...). The lifecycle follows with
    /// its own events where it changes (`NeedsAuthorization`, `Running`); this one also tells
    /// what does not change it, such as a request for more scope. Never carries a token.
    Authorization {
        /// The app.
        app_id: String,
        /// Its authorization state now.
        state: AuthState,
    },
    /// A reload added an app.
    Added {
        /// The app.
        app_id: String,
    },
    /// A reload removed an app.
    Removed {
        /// The app.
        app_id: String,
    },
}

impl SupervisorEvent {
    /// The app the event is about.
    pub fn app_id(&self) -> &str {
        match self {
            Self::Lifecycle { app_id, .. }
            | Self::RestartScheduled { app_id, .. }
            | Self::ToolsChanged { app_id }
            | Self::ResourcesChanged { app_id }
            | Self::PromptsChanged { app_id }
            | Self::Authorization { app_id, .. }
            | Self::Added { app_id }
            | Self::Removed { app_id } => app_id,
        }
    }
}
