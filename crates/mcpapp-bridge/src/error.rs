//! Errors the registry returns for input it cannot accept.

use crate::registry::ToolSource;

/// Why the registry refused a request. A refused request leaves the registry unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The registration id is empty or whitespace.
    #[error("the registration id is blank")]
    BlankRegistrationId,
    /// A tool in the set has an empty or whitespace name.
    #[error("tool #{index} of registration '{registration_id}' has a blank name")]
    BlankToolName {
        /// The registration the set was meant for.
        registration_id: String,
        /// The tool's position in the set, from 0.
        index: usize,
    },
    /// A source preference does not list every source exactly once.
    #[error("source preference {order:?} must list built-in, native and plugin exactly once")]
    InvalidPreference {
        /// The order as given.
        order: [ToolSource; 3],
    },
}
