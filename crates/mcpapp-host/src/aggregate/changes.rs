//! Which of `/mcp`'s lists changed, told from the supervisor's events (every app's tools,
//! resources and prompts, and apps coming and going) and the agent's registry rather than
//! relayed from each app, so that one change is one notification, for legacy sessions and
//! `subscriptions/listen` alike.

use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::SupervisorEvent;
use tokio::sync::broadcast;

/// Which lists changed, to tell the client once each.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Changes {
    pub(crate) tools: bool,
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

impl Changes {
    const ALL: Self = Self {
        tools: true,
        resources: true,
        prompts: true,
    };

    /// What a supervisor event changes for `/mcp`'s lists.
    pub(crate) fn of(event: &SupervisorEvent) -> Self {
        match event {
            SupervisorEvent::Lifecycle { from, to, .. }
                if *from == Lifecycle::Running || *to == Lifecycle::Running =>
            {
                Self::ALL
            }
            SupervisorEvent::ToolsChanged { .. } => Self {
                tools: true,
                ..Self::default()
            },
            SupervisorEvent::ResourcesChanged { .. } => Self {
                resources: true,
                ..Self::default()
            },
            SupervisorEvent::PromptsChanged { .. } => Self {
                prompts: true,
                ..Self::default()
            },
            SupervisorEvent::Added { .. } | SupervisorEvent::Removed { .. } => Self::ALL,
            _ => Self::default(),
        }
    }

    pub(crate) fn merge(&mut self, other: Self) {
        self.tools |= other.tools;
        self.resources |= other.resources;
        self.prompts |= other.prompts;
    }

    pub(crate) fn any(self) -> bool {
        self.tools || self.resources || self.prompts
    }

    /// The notification methods to send.
    pub(crate) fn methods(self) -> impl Iterator<Item = &'static str> {
        [
            (self.tools, "notifications/tools/list_changed"),
            (self.resources, "notifications/resources/list_changed"),
            (self.prompts, "notifications/prompts/list_changed"),
        ]
        .into_iter()
        .filter_map(|(changed, method)| changed.then_some(method))
    }
}

/// Waits for the next change of the apps' lists, then gathers whatever else is already
/// queued, so a burst (an app starting changes all three lists, and its tools reach the
/// registry too) becomes one notification per list. Also reports apps that entered Running.
/// `None` once the supervisor is gone.
pub(crate) async fn next_changes(
    events: &mut broadcast::Receiver<SupervisorEvent>,
    registry: &mut tokio::sync::watch::Receiver<u64>,
) -> Option<(Changes, Vec<String>)> {
    let mut changes = Changes::default();
    let mut started = Vec::new();
    let mut note = |event: Result<SupervisorEvent, broadcast::error::RecvError>,
                    changes: &mut Changes|
     -> bool {
        match event {
            Ok(event) => {
                if let SupervisorEvent::Lifecycle {
                    app_id,
                    to: Lifecycle::Running,
                    ..
                } = &event
                {
                    started.push(app_id.clone());
                }
                changes.merge(Changes::of(&event));
                true
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                changes.merge(Changes::ALL);
                true
            }
            Err(broadcast::error::RecvError::Closed) => false,
        }
    };
    tokio::select! {
        event = events.recv() => if !note(event, &mut changes) { return None },
        changed = registry.changed() => match changed {
            Ok(()) => changes.tools = true,
            Err(_) => return None,
        },
    }
    loop {
        match events.try_recv() {
            Ok(event) => {
                note(Ok(event), &mut changes);
            }
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                note(Err(broadcast::error::RecvError::Lagged(n)), &mut changes);
            }
            Err(_) => break,
        }
    }
    if registry.has_changed().unwrap_or(false) {
        registry.borrow_and_update();
        changes.tools = true;
    }
    Some((changes, started))
}
