//! The scenario families the driver knows. A family names the client scenarios it drives,
//! may add fields to the hosted app's manifest and the gateway's settings (the auth family
//! names the credentials the gateway uses), and runs a scenario's steps on a [`Session`]. Adding a family is a module
//! beside `protocol.rs` and one arm in each match below: `cargo xtask conformance --sets` asks
//! this program for its scenarios (`--list`) and drives those of each set a family claims.

mod auth;
mod protocol;

use serde_json::{Value, json};

use crate::client::Session;
use crate::gateway::Gateway;

/// A family of client scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// Every scored client scenario of the 2025-11-25 and 2026-07-28 sets but `auth/*`.
    Protocol,
    /// The `auth/*` scenarios: the gateway as the OAuth client, the driver as the user.
    Auth,
}

/// Every family, in the order they are tried.
const FAMILIES: &[Family] = &[Family::Protocol, Family::Auth];

impl Family {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Protocol => "protocol",
            Self::Auth => "auth",
        }
    }

    fn scenarios(self) -> &'static [&'static str] {
        match self {
            Self::Protocol => protocol::SCENARIOS,
            Self::Auth => auth::SCENARIOS,
        }
    }

    /// Fields merged into the app's manifest for `scenario` (the context is the suite's
    /// `MCP_CONFORMANCE_CONTEXT`).
    pub(crate) fn manifest_extras(self, scenario: &str, context: &Value) -> Value {
        match self {
            Self::Protocol => protocol::manifest_extras(scenario, context),
            Self::Auth => json!({}),
        }
    }

    /// Settings merged into the gateway's `appsettings.json` for `scenario`.
    pub(crate) fn settings_extras(self, scenario: &str, context: &Value) -> Value {
        match self {
            Self::Protocol => json!({}),
            Self::Auth => auth::settings_extras(scenario, context),
        }
    }

    /// Variables set in the gateway's environment for `scenario`.
    pub(crate) fn gateway_env(self, context: &Value) -> Vec<(String, String)> {
        match self {
            Self::Protocol => Vec::new(),
            Self::Auth => auth::gateway_env(context),
        }
    }

    /// What the user does before the end client connects (connect the app); its steps.
    pub(crate) async fn prepare(self, gateway: &Gateway) -> anyhow::Result<Vec<Value>> {
        match self {
            Self::Protocol => Ok(Vec::new()),
            Self::Auth => auth::prepare(gateway).await,
        }
    }

    /// Runs `scenario`'s steps.
    pub(crate) async fn run(self, scenario: &str, session: &mut Session<'_>) -> anyhow::Result<()> {
        match self {
            Self::Protocol => protocol::run(scenario, session).await,
            Self::Auth => auth::run(session).await,
        }
    }
}

/// The family that drives `scenario`.
pub(crate) fn family_of(scenario: &str) -> Option<Family> {
    FAMILIES
        .iter()
        .copied()
        .find(|family| family.scenarios().contains(&scenario))
}

/// Every scenario some family drives.
pub(crate) fn all() -> Vec<&'static str> {
    FAMILIES
        .iter()
        .flat_map(|f| f.scenarios())
        .copied()
        .collect()
}

/// Every scenario with its family's name.
pub(crate) fn all_with_family() -> Vec<(&'static str, &'static str)> {
    FAMILIES
        .iter()
        .flat_map(|f| f.scenarios().iter().map(move |s| (f.name(), *s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scenario_has_one_family() {
        let all = all();
        for scenario in &all {
            assert_eq!(
                all.iter().filter(|s| *s == scenario).count(),
                1,
                "{scenario}"
            );
            assert!(family_of(scenario).is_some());
        }
        assert_eq!(family_of("tools_call"), Some(Family::Protocol));
        assert_eq!(family_of("auth/metadata-default"), Some(Family::Auth));
        assert_eq!(family_of("auth/dpop"), None);
    }
}
