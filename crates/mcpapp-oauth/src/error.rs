//! The crate's errors. None of them carries a token, a code, a verifier or a client secret:
//! they name the app, the issuer, the file and what went wrong, and messages relayed from
//! rmcp or an authorization server are cut to [`MAX_RELAYED_CHARS`].

use std::path::PathBuf;

use mcpapp_manifest::AppId;

/// The longest message relayed from rmcp or an authorization server, in characters.
pub(crate) const MAX_RELAYED_CHARS: usize = 300;

/// Cuts a relayed message to [`MAX_RELAYED_CHARS`].
pub(crate) fn relay(message: impl std::fmt::Display) -> String {
    let text = message.to_string();
    match text.char_indices().nth(MAX_RELAYED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The token store could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing a file failed.
    #[error("OAuth token store: {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The key is not 32 bytes of base64, or could not be made.
    #[error("the OAuth token store key{} is unusable: {reason}", path.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default())]
    Key {
        /// The key file, when the key came from one.
        path: Option<PathBuf>,
        /// What is wrong with it.
        reason: String,
    },
    /// Encrypting a record failed.
    #[error("OAuth token store: encrypting a record failed")]
    Seal,
    /// A record could not be encoded.
    #[error("OAuth token store: encoding the record of app {app} failed: {message}")]
    Encode {
        /// The app.
        app: AppId,
        /// The encoder's message.
        message: String,
    },
}

/// Authorizing an app cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// The app's entry refuses OAuth (`OAuth.Enabled: false`).
    #[error(
        "app {app} asks for OAuth authorization, which its entry refuses (`OAuth.Enabled` is false)"
    )]
    Refused {
        /// The app.
        app: AppId,
    },
    /// Discovering the authorization server failed (network, invalid or mismatched metadata,
    /// a protected-resource `resource` that is not this server, an issuer mismatch).
    #[error("app {app}: finding its authorization server failed: {message}")]
    Discovery {
        /// The app.
        app: AppId,
        /// What failed.
        message: String,
    },
    /// The server answered 401 but publishes no OAuth metadata.
    #[error(
        "app {app} answered 401 but publishes no OAuth metadata (no protected resource or authorization server metadata), so the gateway cannot authorize to it"
    )]
    NoMetadata {
        /// The app.
        app: AppId,
    },
    /// The authorization server does not advertise PKCE with S256.
    #[error(
        "app {app}: authorization server {issuer} does not advertise PKCE S256 (`code_challenge_methods_supported`), which the MCP authorization specification requires"
    )]
    PkceUnsupported {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
    },
    /// No pre-registered client, no client ID metadata document, no dynamic registration.
    #[error(
        "app {app}: the gateway cannot identify itself to {issuer}: it offers neither client ID metadata documents (for a gateway on an https origin) nor dynamic registration; register a client there and set `OAuth.ClientId`"
    )]
    NoClientIdentity {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
    },
    /// The configured client belongs to another authorization server.
    #[error(
        "app {app} now names authorization server {issuer}, but `OAuth.ClientId` was registered with {configured}; register a client with {issuer} and update the entry"
    )]
    ClientIssuerMismatch {
        /// The app.
        app: AppId,
        /// `OAuth.Issuer`.
        configured: String,
        /// The discovered issuer.
        issuer: String,
    },
    /// Dynamic client registration failed.
    #[error("app {app}: registering with {issuer} failed: {message}")]
    Registration {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
        /// What failed.
        message: String,
    },
    /// The authorization URL is not one a user may be sent to.
    #[error("app {app}: the authorization URL from {issuer} is refused: {reason}")]
    UnsafeAuthorizationUrl {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
        /// Why.
        reason: String,
    },
    /// The user must connect the app (again).
    #[error("app {app} needs authorization at {issuer}")]
    NeedsAuthorization {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
    },
    /// Renewing the access token failed for a reason that may pass.
    #[error("app {app}: refreshing the access token at {issuer} failed: {message}")]
    RefreshFailed {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
        /// What failed.
        message: String,
    },
    /// The app keeps asking for scopes after three authorizations in a row.
    #[error(
        "app {app} still answers `insufficient_scope` after {attempts} authorizations in a row (it asks for: {scopes}); not asking again until a request succeeds"
    )]
    StepUpExhausted {
        /// The app.
        app: AppId,
        /// Authorizations made.
        attempts: u8,
        /// The scopes it asks for, space-separated.
        scopes: String,
    },
    /// The token endpoint returned a token a header cannot carry.
    #[error("app {app}: {issuer} issued an access token that is not visible ASCII")]
    UnusableToken {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
    },
    /// Anything else rmcp reports.
    #[error("app {app}: OAuth: {message}")]
    Other {
        /// The app.
        app: AppId,
        /// What failed.
        message: String,
    },
    /// The token store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A redirect to `/oauth/callback` is refused. Messages never include the code.
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// No `state` parameter.
    #[error("the authorization response has no `state`")]
    MissingState,
    /// The `state` is not one the gateway handed out, or was already used.
    #[error(
        "the authorization response's `state` is unknown or was already used; start again with Connect"
    )]
    UnknownState,
    /// The `state` was handed out too long ago.
    #[error(
        "app {app}: the authorization took too long (the link expires after {ttl_secs} s); start again with Connect"
    )]
    Expired {
        /// The app.
        app: AppId,
        /// The lifetime of a `state`.
        ttl_secs: u64,
    },
    /// The response's `iss` does not match the authorization server (RFC 9207). Any `error`
    /// in such a response is not shown.
    #[error("app {app}: the authorization response does not come from {issuer}: {problem}")]
    Issuer {
        /// The app.
        app: AppId,
        /// The expected issuer.
        issuer: String,
        /// What is wrong.
        problem: String,
    },
    /// The authorization server answered with an error (the user declined, say).
    #[error("app {app}: {issuer} answered `{error}`{}", description.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    Denied {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
        /// The `error` code.
        error: String,
        /// `error_description`, cut short.
        description: Option<String>,
    },
    /// Neither `code` nor `error`.
    #[error("app {app}: the authorization response has no `code`")]
    MissingCode {
        /// The app.
        app: AppId,
    },
    /// The code could not be exchanged for tokens.
    #[error("app {app}: exchanging the authorization code at {issuer} failed: {message}")]
    Exchange {
        /// The app.
        app: AppId,
        /// The authorization server.
        issuer: String,
        /// What failed.
        message: String,
    },
    /// The app is no longer configured.
    #[error("app {app} is no longer configured")]
    AppGone {
        /// The app.
        app: AppId,
    },
    /// The tokens were obtained but cannot be used or stored.
    #[error(transparent)]
    Authorize(#[from] AuthorizeError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relayed_messages_are_cut() {
        assert_eq!(relay("short"), "short");
        let long = "é".repeat(MAX_RELAYED_CHARS + 5);
        let cut = relay(&long);
        assert_eq!(cut.chars().count(), MAX_RELAYED_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
