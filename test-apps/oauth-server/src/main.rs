//! `oauth-server`: an OAuth 2.1 authorization server and an MCP app it protects, in one
//! process on two loopback listeners, for mcpapp-oauth's tests (a test peer, talked to over
//! real HTTP). Misbehaviour is chosen by flags.
//!
//! # Running
//!
//! ```text
//! oauth-server http [--bind ADDR] [FLAGS]
//! ```
//!
//! The protected MCP app listens on `--bind` (default `127.0.0.1:0`) and the authorization
//! server on `--as-bind` (default `127.0.0.1:0`); once both accept connections it prints
//! exactly one stdout line, `listening on http://HOST:PORT/mcp`. Logs go to stderr
//! (`RUST_LOG`, default `warn`).
//!
//! # The authorization server
//!
//! Issuer `http://HOST:AS_PORT[/TENANT]` (the `issuer` of `/admin/state`). Endpoints under the issuer: `/authorize` (answers at
//! once with a 302 to the registered `redirect_uri` carrying `code`, `state` and, per `--iss`,
//! `iss`; it requires `response_type=code`, a known client, an exactly registered redirect
//! URI, an S256 `code_challenge` and `resource` equal to the app's URL, else a 302 with
//! `error`), `/token` (`authorization_code` with the PKCE verifier checked and the same
//! `resource`; `refresh_token` with rotation: the old refresh token stops working; client
//! authentication `client_secret_basic`, `client_secret_post` or `none`, as the client was
//! registered; errors as RFC 6749 JSON, `invalid_grant` for a revoked or rotated refresh
//! token), `/register` (RFC 7591; a secret unless `token_endpoint_auth_method` is `none`) and
//! `/revoke` (RFC 7009). Access tokens are bound to the app's URL, last `--expires-in` seconds
//! and carry the scopes asked for (less `--withhold-scope`).
//!
//! # The protected app
//!
//! Streamable HTTP MCP at `/mcp` (rmcp, stateless, JSON answers) with tools `whoami` (any
//! valid token), `write_note {text}` (needs `mcp:write`), `admin_reset` (needs
//! `mcp:admin`) and `show_contacts` (any valid token; `_meta.ui.resourceUri =
//! "ui://crm/contacts.html"`, returning two contacts as structuredContent), and one resource,
//! that MCP App view (mime `text/html;profile=mcp-app`: a tiny page that does the
//! `ui/initialize` handshake and lists the contacts of the tool result it is sent). Without a valid token it answers 401 with `WWW-Authenticate: Bearer
//! resource_metadata="…", scope="…"` (`error="invalid_token"` when a token was sent); a call
//! of a tool whose scope the token lacks gets 403 `Bearer error="insufficient_scope",
//! scope="<needed>", resource_metadata="…"`. Its protected resource metadata names the issuer,
//! `resource` (the `/mcp` URL) and `scopes_supported`.
//!
//! # Flags
//!
//! - `--as-bind ADDR`: the authorization server's address.
//! - `--tenant NAME`: put the issuer under a path (`…/NAME`).
//! - `--metadata-at oauth|oidc|oidc-appended`: where the authorization server metadata is
//!   served: `/.well-known/oauth-authorization-server[/TENANT]` (default),
//!   `/.well-known/openid-configuration[/TENANT]`, or `[/TENANT]/.well-known/openid-configuration`.
//! - `--prm path|root|custom|none`: where the protected resource metadata is:
//!   `/.well-known/oauth-protected-resource/mcp` (default), `/.well-known/oauth-protected-resource`,
//!   `/meta/resource.json` (found only through the challenge), or nowhere.
//! - `--no-prm-in-header`: leave `resource_metadata` out of the challenge.
//! - `--no-challenge`: answer 401 and 403 without `WWW-Authenticate`.
//! - `--second-as`: run a second authorization server (same flags, its own issuer, clients and
//!   tokens) that `POST /admin/migrate` switches the app to.
//! - `--challenge-scope SCOPE`: the challenge's `scope` (default `mcp:read`; empty leaves it out).
//! - `--scopes-supported LIST`: the metadata's `scopes_supported`, comma-separated (default
//!   `mcp:read,mcp:write,mcp:admin`; empty leaves it out of both documents).
//! - `--offline-access`: the authorization server also lists `offline_access`.
//! - `--no-dcr`: no `registration_endpoint`.
//! - `--cimd`: advertise `client_id_metadata_document_supported`; any https client ID with a
//!   path is then accepted as a public client (the document is not fetched).
//! - `--client ID[:SECRET]`: a pre-registered client (repeatable), public without a secret;
//!   any `http://127.0.0.1` or `http://localhost` redirect URI is accepted for it.
//! - `--auth-methods LIST`: `token_endpoint_auth_methods_supported`, comma-separated
//!   (default `client_secret_basic,client_secret_post,none`); another method is refused.
//! - `--expires-in SECS`: the access tokens' lifetime (default 3600).
//! - `--no-refresh-tokens`: issue no refresh tokens.
//! - `--iss correct|omit|wrong|normalized`: `iss` in the redirect: the issuer (default), none,
//!   `https://evil.example.com`, or the issuer with a trailing slash.
//! - `--iss-supported yes|no|absent`: `authorization_response_iss_parameter_supported`.
//! - `--metadata-issuer URL`: the `issuer` the metadata claims (misbehaviour).
//! - `--no-pkce-methods`: leave out `code_challenge_methods_supported`.
//! - `--prm-resource URL`: the `resource` the protected resource metadata claims.
//! - `--withhold-scope SCOPE`: never grant this scope (repeatable).
//! - `--no-revocation`: no `revocation_endpoint`.
//! - `--deny`: `/authorize` answers `error=access_denied`.
//!
//! # Test controls (on the app's listener, no authentication: a test peer on loopback)
//!
//! - `GET /admin/state`: JSON with the issuer, counters, every authorization, token and
//!   registration request as seen, and `secrets`: every token, code and client secret issued,
//!   so a test can look for them where they must not be.
//! - `POST /admin/expire-access-tokens`: every access token issued so far stops working.
//! - `POST /admin/revoke-refresh-tokens`: every refresh token issued so far stops working.
//! - `POST /admin/migrate`: the protected resource metadata names the second authorization
//!   server from now on, and tokens of the first are refused (`--second-as`).

mod authz;
mod resource;
mod shared;

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};

use crate::shared::{Options, Shared};

#[derive(Debug, Parser)]
#[command(
    name = "oauth-server",
    about = "An OAuth authorization server and a protected MCP app, for tests"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Serve both over HTTP.
    Http(Args),
}

/// Where the authorization server metadata is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MetadataAt {
    Oauth,
    Oidc,
    OidcAppended,
}

/// Where the protected resource metadata is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PrmAt {
    Path,
    Root,
    Custom,
    None,
}

/// What `iss` the redirect carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Iss {
    Correct,
    Omit,
    Wrong,
    Normalized,
}

/// `authorization_response_iss_parameter_supported`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum IssSupported {
    Yes,
    No,
    Absent,
}

#[derive(Debug, clap::Args)]
#[allow(clippy::struct_excessive_bools)]
pub(crate) struct Args {
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: String,
    #[arg(long, default_value = "127.0.0.1:0")]
    as_bind: String,
    #[arg(long)]
    tenant: Option<String>,
    #[arg(long, value_enum, default_value = "oauth")]
    metadata_at: MetadataAt,
    #[arg(long, value_enum, default_value = "path")]
    prm: PrmAt,
    #[arg(long)]
    no_prm_in_header: bool,
    #[arg(long)]
    no_challenge: bool,
    #[arg(long)]
    second_as: bool,
    #[arg(long, default_value = "mcp:read")]
    challenge_scope: String,
    #[arg(long, default_value = "mcp:read,mcp:write,mcp:admin")]
    scopes_supported: String,
    #[arg(long)]
    offline_access: bool,
    #[arg(long)]
    no_dcr: bool,
    #[arg(long)]
    cimd: bool,
    #[arg(long = "client")]
    clients: Vec<String>,
    #[arg(long, default_value = "client_secret_basic,client_secret_post,none")]
    auth_methods: String,
    #[arg(long, default_value_t = 3600)]
    expires_in: u64,
    #[arg(long)]
    no_refresh_tokens: bool,
    #[arg(long, value_enum, default_value = "correct")]
    iss: Iss,
    #[arg(long, value_enum, default_value = "yes")]
    iss_supported: IssSupported,
    #[arg(long)]
    metadata_issuer: Option<String>,
    #[arg(long)]
    no_pkce_methods: bool,
    #[arg(long)]
    prm_resource: Option<String>,
    #[arg(long = "withhold-scope")]
    withheld: Vec<String>,
    #[arg(long)]
    no_revocation: bool,
    #[arg(long)]
    deny: bool,
}

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let Mode::Http(args) = Cli::parse().mode;
    let app_listener = tokio::net::TcpListener::bind(&args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))?;
    let mut as_listeners = vec![
        tokio::net::TcpListener::bind(&args.as_bind)
            .await
            .with_context(|| format!("binding {}", args.as_bind))?,
    ];
    if args.second_as {
        as_listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await?);
    }
    let app_origin = format!("http://{}", app_listener.local_addr()?);
    let mut issuers = Vec::new();
    for listener in &as_listeners {
        let origin = format!("http://{}", listener.local_addr()?);
        issuers.push(match &args.tenant {
            Some(tenant) => format!("{origin}/{}", tenant.trim_matches('/')),
            None => origin,
        });
    }
    let mut clients = Vec::new();
    for spec in &args.clients {
        let (id, secret) = match spec.split_once(':') {
            Some((id, secret)) => (id.to_owned(), Some(secret.to_owned())),
            None => (spec.clone(), None),
        };
        clients.push((id, secret));
    }
    let options = Options {
        resource: args
            .prm_resource
            .clone()
            .unwrap_or_else(|| format!("{app_origin}/mcp")),
        mcp_url: format!("{app_origin}/mcp"),
        app_origin: app_origin.clone(),
        issuers,
        metadata_issuer: args.metadata_issuer.clone(),
        tenant: args
            .tenant
            .as_deref()
            .map(|t| t.trim_matches('/').to_owned()),
        metadata_at: args.metadata_at,
        prm_at: args.prm,
        prm_in_header: !args.no_prm_in_header,
        challenge: !args.no_challenge,
        challenge_scope: args.challenge_scope.clone(),
        scopes_supported: list(&args.scopes_supported),
        offline_access: args.offline_access,
        dcr: !args.no_dcr,
        cimd: args.cimd,
        auth_methods: list(&args.auth_methods),
        expires_in: args.expires_in,
        refresh_tokens: !args.no_refresh_tokens,
        iss: args.iss,
        iss_supported: args.iss_supported,
        pkce_methods: !args.no_pkce_methods,
        withheld: args.withheld.clone(),
        revocation: !args.no_revocation,
        deny: args.deny,
    };
    let shared = Arc::new(Shared::new(options, &clients));
    for (index, listener) in as_listeners.into_iter().enumerate() {
        let router = authz::router(shared.clone(), index);
        tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, router).await {
                tracing::error!(error = %err, "an authorization server stopped");
            }
        });
    }
    let app_router = resource::router(shared.clone());
    println!("listening on {app_origin}/mcp");
    std::io::stdout().flush()?;
    axum::serve(app_listener, app_router)
        .await
        .context("serving the app")?;
    Ok(())
}
