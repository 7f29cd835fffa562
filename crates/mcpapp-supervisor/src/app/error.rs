//! What can go wrong when an app starts or lists what it offers, and the warnings a start
//! leaves. The task decides by variant; the texts are what people read (an app's `lastError`
//! and `warnings` in `/apps` and `apps show`, the logs), so they stay word for word what they
//! were when these were strings.

use mcpapp_session::HandshakeError;
use rmcp::ServiceError;
use rmcp::model::ErrorCode;

use crate::link::LinkError;

/// Why a start attempt failed. Its text becomes the app's failure reason, followed by the
/// last lines its run wrote to stderr.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// No launch plan could be made from the spec (a setting refers to a variable that is not
    /// set, say); `launch.rs` says which.
    #[error("{0}")]
    Plan(String),
    /// The child could not be started or the HTTP client built.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The link closed during the handshake, or rmcp refused it.
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    /// `tools/list` failed: the tools are what an app is for, so the start fails (the other
    /// lists only warn).
    #[error(transparent)]
    Tools(#[from] ListError),
    /// Connecting, the handshake and the first listing together took longer than the app's
    /// `startupTimeoutSeconds`.
    #[error(
        "startup timed out after {seconds} s (connect, MCP handshake and listing must finish within startupTimeoutSeconds)"
    )]
    TimedOut {
        /// The startup timeout.
        seconds: u64,
    },
    /// The app's entry's `OAuth` settings cannot be used (or its stored tokens read); the
    /// text names the setting.
    #[error("{0}")]
    OAuth(String),
    /// The app has no spec to start with (a runnable app always has one; failing beats
    /// waiting forever).
    #[error("the app has no runnable configuration")]
    NoSpec,
}

/// Why one listing (`tools/list`, `resources/list`, ...) produced nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    /// The app answered with an error, or the connection failed.
    #[error("{method} failed: {source}")]
    Failed {
        /// The listing method.
        method: &'static str,
        /// What rmcp reported.
        source: ServiceError,
    },
    /// No complete answer within the app's request timeout.
    #[error("{method} timed out after {seconds} s")]
    TimedOut {
        /// The listing method.
        method: &'static str,
        /// The request timeout.
        seconds: u64,
    },
}

impl ListError {
    /// Whether the app does not know the method at all (servers without templates often
    /// answer `resources/templates/list` so, which is no problem).
    pub(crate) fn is_method_not_found(&self) -> bool {
        matches!(
            self,
            Self::Failed { source: ServiceError::McpError(error), .. }
                if error.code == ErrorCode::METHOD_NOT_FOUND
        )
    }
}

/// Something a start found wrong that does not stop the app; shown among its warnings until
/// the next start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartWarning {
    /// A list other than the tools could not be listed; the app runs without it.
    #[error("enumeration: {0}")]
    Listing(ListError),
    /// The server agreed on an older protocol version than its manifest declares.
    #[error(
        "the server negotiated MCP protocol {negotiated}, older than the {declared} its manifest declares"
    )]
    OlderProtocol {
        /// The version the handshake agreed on.
        negotiated: String,
        /// The version the manifest declares.
        declared: String,
    },
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorData;

    use super::*;

    fn remote(code: ErrorCode, message: &'static str) -> ServiceError {
        ServiceError::McpError(ErrorData::new(code, message, None))
    }

    #[test]
    fn the_texts_people_read_stay_as_they_were() {
        let timed_out = ListError::TimedOut {
            method: "tools/list",
            seconds: 30,
        };
        assert_eq!(timed_out.to_string(), "tools/list timed out after 30 s");
        assert_eq!(
            StartError::from(timed_out).to_string(),
            "tools/list timed out after 30 s"
        );
        let failed = ListError::Failed {
            method: "prompts/list",
            source: remote(ErrorCode::INTERNAL_ERROR, "no prompts today"),
        };
        let text = failed.to_string();
        assert!(
            text.starts_with("prompts/list failed: ") && text.ends_with("no prompts today"),
            "{text}"
        );
        assert_eq!(
            StartWarning::Listing(failed).to_string(),
            format!("enumeration: {text}")
        );
        assert_eq!(
            StartWarning::OlderProtocol {
                negotiated: "2025-06-18".to_owned(),
                declared: "2025-11-25".to_owned(),
            }
            .to_string(),
            "the server negotiated MCP protocol 2025-06-18, older than the 2025-11-25 its manifest declares"
        );
        assert_eq!(
            StartError::TimedOut { seconds: 10 }.to_string(),
            "startup timed out after 10 s (connect, MCP handshake and listing must finish within startupTimeoutSeconds)"
        );
        assert_eq!(
            StartError::from(HandshakeError::LinkClosed(
                "the process exited with status 3".to_owned()
            ))
            .to_string(),
            "the process exited with status 3"
        );
        assert_eq!(
            StartError::from(HandshakeError::Protocol(
                "expected initialize result".to_owned()
            ))
            .to_string(),
            "the MCP handshake failed: expected initialize result"
        );
        assert_eq!(
            StartError::Plan(
                "environment variable TOKEN (for header Authorization) is not set".to_owned()
            )
            .to_string(),
            "environment variable TOKEN (for header Authorization) is not set"
        );
    }

    #[test]
    fn only_an_unknown_method_is_method_not_found() {
        let unknown = ListError::Failed {
            method: "resources/templates/list",
            source: remote(ErrorCode::METHOD_NOT_FOUND, "Method not found"),
        };
        assert!(unknown.is_method_not_found());
        let other = ListError::Failed {
            method: "resources/templates/list",
            source: remote(ErrorCode::INTERNAL_ERROR, "Method not found"),
        };
        assert!(!other.is_method_not_found());
        let slow = ListError::TimedOut {
            method: "resources/templates/list",
            seconds: 1,
        };
        assert!(!slow.is_method_not_found());
    }
}
