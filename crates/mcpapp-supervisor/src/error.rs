//! Errors of calls made through an app handle.

use mcpapp_manifest::Lifecycle;

/// Why a call to an app did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The app is not running.
    #[error("app '{app_id}' is not running (it is {state})")]
    NotRunning {
        /// The app.
        app_id: String,
        /// Its state.
        state: Lifecycle,
    },
    /// The app did not answer within its request timeout; the request was cancelled upstream.
    #[error("app '{app_id}' did not answer {method} within {seconds} s; the request was cancelled")]
    Timeout {
        /// The app.
        app_id: String,
        /// The method called.
        method: String,
        /// The timeout.
        seconds: u64,
    },
    /// The app answered with a JSON-RPC error.
    #[error("app '{app_id}' returned error {code} for {method}: {message}")]
    Remote {
        /// The app.
        app_id: String,
        /// The method called.
        method: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The error message.
        message: String,
    },
    /// The app is an HTTP app behind OAuth that waits for the user to connect it (the
    /// request was not sent, or its connection closed because the grant ended).
    #[error(
        "app '{app_id}' needs authorization at {issuer}: connect it in the gateway's page or with `mcpapp-gateway apps authorize {app_id}`"
    )]
    NeedsAuthorization {
        /// The app.
        app_id: String,
        /// Its authorization server.
        issuer: String,
    },
    /// The connection broke or the answer made no sense.
    #[error("calling {method} on app '{app_id}' failed: {message}")]
    Transport {
        /// The app.
        app_id: String,
        /// The method called.
        method: String,
        /// What went wrong.
        message: String,
    },
}

/// Why a control command (start, stop, restart) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The app cannot run: it is invalid or disabled by configuration.
    #[error("app '{app_id}' cannot be started: {reason}")]
    NotRunnable {
        /// The app.
        app_id: String,
        /// Why.
        reason: String,
    },
    /// The supervisor has shut down.
    #[error("the supervisor has shut down")]
    ShutDown,
}
