//! The gateway as the OAuth client of protected remote MCP apps, per the MCP authorization
//! specification (2025-11-25 and 2026-07-28): from a 401's `WWW-Authenticate` challenge to
//! tokens on every request, with the user's browser as the only step it cannot do alone.
//!
//! It does no MCP traffic itself. An HTTP link asks an [`AppAuthorizer`] for a token per
//! request ([`AppAuthorizer::bearer`]) and hands it every 401 and 403
//! ([`AppAuthorizer::on_rejected`] → [`Next`]); the host's routes ask for an authorization
//! URL ([`AppAuthorizer::authorization_url`]), complete the redirect
//! ([`OAuthClient::complete`] at [`CALLBACK_PATH`]) and disconnect
//! ([`AppAuthorizer::disconnect`]); the app's [`AuthState`] (a pure state machine) says when
//! it waits for the user ([`AuthState::waiting_for`], the lifecycle's `NeedsAuthorization`).
//!
//! ```no_run
//! use mcpapp_manifest::AppId;
//! use mcpapp_oauth::{
//!     AppSettings, CallbackParams, KeySource, Next, OAuthClient, TokenStore, callback_url,
//! };
//! use url::Url;
//!
//! # async fn run(response_status: http::StatusCode, response_headers: http::HeaderMap)
//! # -> anyhow::Result<()> {
//! let store = TokenStore::open("state/oauth", &KeySource::File("state/oauth/oauth.key".into()))?;
//! let origin = Url::parse("http://127.0.0.1:8787")?;
//! let oauth = OAuthClient::builder(store, callback_url(&origin)).build()?;
//! let crm = oauth.app(
//!     AppId::new("crm")?,
//!     Url::parse("https://mcp.crm.example.com/mcp")?,
//!     AppSettings::new(),
//! )?;
//!
//! // The HTTP link: a token per request, and every 401/403 handed back.
//! let token = crm.bearer().await?; // None: send bare
//! // ... send the request with `token.map(|t| t.header_value())` as `Authorization` ...
//! match crm.on_rejected(token.as_ref(), response_status, &response_headers).await {
//!     Next::Retry => { /* send it once more with crm.bearer() */ }
//!     Next::NeedsAuthorization { issuer } => println!("connect crm at {issuer}"),
//!     Next::NeedsMoreScope { scopes, .. } => println!("grant crm {}", scopes.join(" ")),
//!     Next::NotOAuth => { /* an ordinary error answer */ }
//!     Next::Fail(err) => eprintln!("{err}"),
//! }
//!
//! // "Connect": the user opens the URL; the server redirects to /oauth/callback.
//! let url = crm.authorization_url().await?;
//! println!("open {}", url.url);
//! # let redirect = Url::parse("http://127.0.0.1:8787/oauth/callback?code=c&state=s")?;
//! let done = oauth.complete(&CallbackParams::from_url(&redirect)).await?;
//! assert_eq!(done.app.as_str(), "crm");
//! # Ok(())
//! # }
//! ```
//!
//! # rmcp's part and ours
//!
//! rmcp 3.11's `auth` module (`AuthorizationManager`) does discovery (protected resource
//! metadata from the challenge, the path-suffixed and root well-known URLs, its `resource`
//! checked against the server; authorization-server metadata in the RFC 8414 / OIDC order with
//! the issuer equality of SEP-2468; an SSRF filter), scope selection, dynamic registration,
//! the authorization URL (PKCE S256, `state`, `resource`), the code exchange with its `iss`
//! check, and refresh (`invalid_grant` told apart from transient failures).
//!
//! This crate adds what rmcp leaves to its host or gets wrong for a gateway: PKCE refused when
//! `code_challenge_methods_supported` is absent (rmcp only warns); the client chosen in the
//! specification's order with registrations kept per (app, issuer) and never shown to another
//! issuer; `application_type` `web` for a public gateway; the authorization URL checked before
//! it is shown; a gateway-wide table of flows with single-use `state`, a lifetime and a cap;
//! `iss` checked before an `error` is believed; one refresh for concurrent requests and at
//! most one per rejected token; the step-up bound; revocation (RFC 7009); the encrypted
//! [`TokenStore`]; resuming stored tokens without rmcp's `initialize_from_store` (which puts
//! the MCP URL in place of the redirect URI and drops a registered client's secret).
//!
//! rmcp logs the authorization code at `debug` (in its exchange) and a token response's extra
//! fields; a gateway keeps `rmcp::transport::auth` at `info` or above. Tokens and client
//! secrets never appear in this crate's `Debug` output, errors or events.
#![warn(missing_docs)]

mod authorizer;
mod bound;
mod checks;
mod client;
mod error;
mod flow;
mod revoke;
mod seal;
mod secret;
mod settings;
mod shared;
mod state;
mod store;

pub use authorizer::{AppAuthorizer, Next};
pub use client::{BuildError, CallbackParams, OAuthClient, OAuthClientBuilder};
pub use error::{AuthorizeError, CallbackError, StoreError};
pub use seal::KeySource;
pub use secret::{Bearer, Secret};
pub use settings::{AppSettings, CALLBACK_PATH, CLIENT_METADATA_PATH, callback_url};
pub use shared::{AuthorizationUrl, Clock, Completed};
pub use state::{AuthState, NeedsReason};
pub use store::{KEY_ENV, KEY_FILE_NAME, TokenStore};
