//! The steps before the user's browser and after a restart, on rmcp's `AuthorizationManager`:
//! discovery from a challenge ([`discover`]: protected resource metadata with its fallbacks
//! and `resource` check, authorization-server metadata in the specified order with issuer
//! equality — rmcp — then PKCE S256 required — ours, as rmcp only warns), the authorization
//! request ([`prepare`]: scopes, the client in priority order, the URL, checked), and a manager
//! ready to refresh stored tokens ([`resume`]; rmcp's `initialize_from_store` would set the MCP
//! URL as redirect URI and lose a registered client's secret).

use mcpapp_manifest::AppId;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, OAuthClientConfig,
};
use url::Url;

use crate::bound::BoundStore;
use crate::checks::{application_type, check_authorization_url, union_scopes};
use crate::error::{AuthorizeError, relay};
use crate::settings::AppSettings;
use crate::store::{ClientKind, ClientRecord, TokenStore};

/// What discovery found: a manager with the authorization server's metadata set.
pub(crate) struct Discovered {
    pub(crate) manager: AuthorizationManager,
    pub(crate) metadata: AuthorizationMetadata,
    pub(crate) issuer: String,
}

/// What a flow needs from the app and the gateway.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FlowContext<'a> {
    pub(crate) app: &'a AppId,
    pub(crate) server_url: &'a Url,
    pub(crate) settings: &'a AppSettings,
    pub(crate) store: &'a TokenStore,
    pub(crate) redirect_uri: &'a Url,
    /// The gateway's client ID metadata document URL, when it may be used for this app.
    pub(crate) client_metadata_url: Option<&'a Url>,
    pub(crate) client_name: &'a str,
}

/// An authorization request ready for the user's browser.
pub(crate) struct Prepared {
    pub(crate) manager: AuthorizationManager,
    pub(crate) url: Url,
    pub(crate) state: String,
    pub(crate) issuer: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) iss_advertised: bool,
    pub(crate) revocation_endpoint: Option<String>,
    pub(crate) auth_methods: Vec<String>,
}

/// A rmcp error with its causes, cut short.
pub(crate) fn describe(err: &AuthError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    relay(text)
}

/// Finds the authorization server of `server_url`, seeded by a 401's challenge when there is
/// one, and requires PKCE S256.
pub(crate) async fn discover(
    app: &AppId,
    server_url: &Url,
    challenge: Option<&str>,
) -> Result<Discovered, AuthorizeError> {
    let discovery = |err: AuthError| AuthorizeError::Discovery {
        app: app.clone(),
        message: describe(&err),
    };
    let mut manager = AuthorizationManager::new(server_url.as_str())
        .await
        .map_err(discovery)?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(discovery)?;
    // rmcp's last resort (endpoints made up from the base URL, a 2025-03-26 fallback) is
    // not metadata: later revisions require discovery.
    if !resolution.source.is_discovered() {
        return Err(AuthorizeError::NoMetadata { app: app.clone() });
    }
    let metadata = resolution.metadata;
    let issuer = metadata
        .issuer
        .clone()
        .ok_or_else(|| AuthorizeError::Discovery {
            app: app.clone(),
            message: "the authorization server metadata has no `issuer`".into(),
        })?;
    let s256 = metadata
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|methods| methods.iter().any(|m| m == "S256"));
    if !s256 {
        return Err(AuthorizeError::PkceUnsupported {
            app: app.clone(),
            issuer,
        });
    }
    manager.set_metadata(metadata.clone());
    Ok(Discovered {
        manager,
        metadata,
        issuer,
    })
}

fn flag(metadata: &AuthorizationMetadata, name: &str) -> bool {
    metadata
        .additional_fields
        .get(name)
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

fn strings(metadata: &AuthorizationMetadata, name: &str) -> Vec<String> {
    metadata
        .additional_fields
        .get(name)
        .and_then(serde_json::Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// SEP-2207: ask for `offline_access` (a refresh token) when the authorization server lists
/// it, and only then.
fn with_offline_access(metadata: &AuthorizationMetadata, scopes: Vec<String>) -> Vec<String> {
    let listed = metadata
        .scopes_supported
        .as_ref()
        .is_some_and(|supported| supported.iter().any(|s| s == "offline_access"));
    if listed && !scopes.is_empty() {
        union_scopes(&scopes, ["offline_access".to_owned()])
    } else {
        scopes
    }
}

/// Chooses the scopes and the client, and builds the authorization URL (PKCE S256, `state`,
/// `resource`, recorded issuer: rmcp). `step_up` is the union of held and challenged scopes
/// when more access is asked for.
pub(crate) async fn prepare(
    ctx: FlowContext<'_>,
    discovered: Discovered,
    step_up: Option<Vec<String>>,
) -> Result<Prepared, AuthorizeError> {
    let Discovered {
        mut manager,
        metadata,
        issuer,
    } = discovered;
    let app = ctx.app;
    if ctx.settings.client_id.is_some()
        && let Some(configured) = &ctx.settings.client_issuer
        && configured != &issuer
    {
        return Err(AuthorizeError::ClientIssuerMismatch {
            app: app.clone(),
            configured: configured.clone(),
            issuer,
        });
    }
    manager.set_credential_store(BoundStore {
        store: ctx.store.clone(),
        app: app.clone(),
        issuer: issuer.clone(),
    });
    let scopes = match step_up {
        Some(scopes) => with_offline_access(&metadata, scopes),
        None if !ctx.settings.scopes.is_empty() => {
            with_offline_access(&metadata, ctx.settings.scopes.clone())
        }
        // The challenge's scope, else the protected resource's `scopes_supported`, else
        // none (plus `offline_access` when listed): rmcp's initial selection.
        None => manager.select_initial_scopes(&[]).await,
    };
    let config = identify(ctx, &mut manager, &metadata, &issuer, &scopes).await?;
    manager
        .configure_client(config)
        .map_err(|err| AuthorizeError::Other {
            app: app.clone(),
            message: describe(&err),
        })?;
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let text = manager
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|err| AuthorizeError::Other {
            app: app.clone(),
            message: describe(&err),
        })?;
    let url = check_authorization_url(&text).map_err(|reason| {
        AuthorizeError::UnsafeAuthorizationUrl {
            app: app.clone(),
            issuer: issuer.clone(),
            reason: reason.to_string(),
        }
    })?;
    let state = url
        .query_pairs()
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value.into_owned())
        .ok_or_else(|| AuthorizeError::Other {
            app: app.clone(),
            message: "the authorization URL has no `state`".into(),
        })?;
    Ok(Prepared {
        manager,
        url,
        state,
        iss_advertised: flag(&metadata, "authorization_response_iss_parameter_supported"),
        revocation_endpoint: metadata
            .additional_fields
            .get("revocation_endpoint")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
        auth_methods: strings(&metadata, "token_endpoint_auth_methods_supported"),
        issuer,
        scopes,
    })
}

/// The client, in the specification's order: the entry's pre-registered client; else a
/// client this app registered earlier with this issuer for this redirect URI; else the
/// gateway's client ID metadata document when the server supports them; else dynamic
/// registration (kept in the store under this issuer, never shown to another).
async fn identify(
    ctx: FlowContext<'_>,
    manager: &mut AuthorizationManager,
    metadata: &AuthorizationMetadata,
    issuer: &str,
    scopes: &[String],
) -> Result<OAuthClientConfig, AuthorizeError> {
    let app = ctx.app;
    let redirect = ctx.redirect_uri.as_str();
    if let Some(client_id) = &ctx.settings.client_id {
        let mut config = OAuthClientConfig::new(client_id.clone(), redirect);
        if let Some(secret) = &ctx.settings.client_secret {
            config = config.with_client_secret(secret.expose());
        }
        return Ok(config);
    }
    let stored = ctx.store.record(app)?;
    if let Some(client) = stored
        .issuers
        .get(issuer)
        .and_then(|entry| entry.client.as_ref())
        .filter(|c| c.kind == ClientKind::Registered && c.redirect_uri == redirect)
    {
        let mut config = OAuthClientConfig::new(client.client_id.clone(), redirect);
        if let Some(secret) = &client.client_secret {
            config = config.with_client_secret(secret.expose());
        }
        return Ok(config);
    }
    if let Some(document) = ctx.client_metadata_url
        && flag(metadata, "client_id_metadata_document_supported")
    {
        return Ok(OAuthClientConfig::new(document.as_str(), redirect));
    }
    if metadata.registration_endpoint.is_none() {
        return Err(AuthorizeError::NoClientIdentity {
            app: app.clone(),
            issuer: issuer.to_owned(),
        });
    }
    // rmcp's registration sends the manager's `application_type`, which only
    // `configure_client` sets; SEP-837 wants `web` for a gateway on a public origin.
    let kind = application_type(ctx.redirect_uri);
    let _ = manager.configure_client(
        OAuthClientConfig::new("unregistered", redirect).with_application_type(kind),
    );
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let config = manager
        .register_client(ctx.client_name, redirect, &scope_refs)
        .await
        .map_err(|err| AuthorizeError::Registration {
            app: app.clone(),
            issuer: issuer.to_owned(),
            message: describe(&err),
        })?;
    let record = ClientRecord {
        kind: ClientKind::Registered,
        client_id: config.client_id.clone(),
        client_secret: config.client_secret.clone().map(crate::Secret::new),
        redirect_uri: redirect.to_owned(),
    };
    let issuer_key = issuer.to_owned();
    ctx.store
        .update(app, move |stored| {
            stored.issuers.entry(issuer_key).or_default().client = Some(record);
        })
        .await?;
    tracing::info!(app = %app, issuer, "registered the gateway as an OAuth client (dynamic registration)");
    Ok(config)
}

/// Why stored tokens cannot be refreshed.
pub(crate) enum ResumeError {
    /// The server names another authorization server now.
    IssuerChanged(String),
    /// The client the tokens were issued to is no longer the one configured.
    ClientChanged,
    /// Discovery or configuration failed.
    Failed(AuthorizeError),
}

/// A manager able to refresh the tokens `client_id` holds at `issuer`, after a restart or
/// once the previous manager is gone: discovery again (the issuer must be the same, SEP-2352),
/// then the same client with its secret and the gateway's redirect URI.
pub(crate) async fn resume(
    ctx: FlowContext<'_>,
    issuer: &str,
    client_id: &str,
    challenge: Option<&str>,
) -> Result<AuthorizationManager, ResumeError> {
    let Discovered {
        mut manager,
        issuer: found,
        ..
    } = discover(ctx.app, ctx.server_url, challenge)
        .await
        .map_err(ResumeError::Failed)?;
    if found != issuer {
        return Err(ResumeError::IssuerChanged(found));
    }
    let stored = ctx
        .store
        .record(ctx.app)
        .map_err(|err| ResumeError::Failed(err.into()))?;
    let registered = stored
        .issuers
        .get(issuer)
        .and_then(|entry| entry.client.as_ref())
        .filter(|client| client.client_id == client_id);
    let secret = if ctx.settings.client_id.as_deref() == Some(client_id) {
        ctx.settings.client_secret.clone()
    } else if let Some(client) = registered {
        client.client_secret.clone()
    } else if ctx.client_metadata_url.map(Url::as_str) == Some(client_id) {
        None
    } else {
        return Err(ResumeError::ClientChanged);
    };
    let mut config = OAuthClientConfig::new(client_id, ctx.redirect_uri.as_str());
    if let Some(secret) = secret {
        config = config.with_client_secret(secret.expose());
    }
    manager.set_credential_store(BoundStore {
        store: ctx.store.clone(),
        app: ctx.app.clone(),
        issuer: issuer.to_owned(),
    });
    manager.configure_client(config).map_err(|err| {
        ResumeError::Failed(AuthorizeError::Other {
            app: ctx.app.clone(),
            message: describe(&err),
        })
    })?;
    Ok(manager)
}
