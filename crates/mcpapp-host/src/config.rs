//! Settings of the HTTP host: the `Gateway` configuration section and what the gateway knows
//! about where it listens.

use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default largest request body, 4 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The `Gateway` section of the configuration file (keys match case-insensitively).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
pub struct GatewaySettings {
    /// Address to listen on; default `127.0.0.1:8787`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// Address of the second listener that serves the sandbox proxy for app views (a
    /// different origin); default: the same host, port 0 (any free port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_bind: Option<String>,
    /// Bearer token every route but static assets requires; `MCPAPP_TOKEN` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_token: Option<String>,
    /// Allow listening on a non-loopback address without a token (not recommended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_remote_without_token: Option<bool>,
    /// Browser origins allowed to call the gateway (CORS); default: the gateway's own.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Extra host names accepted in the `Host` header (DNS-rebinding protection); loopback
    /// names are always accepted.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Largest request body in bytes; default 4 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<usize>,
    /// Refuse a view's `tools/call` of a tool whose visibility lacks `"app"` (the MCP Apps
    /// spec's MUST); default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforce_app_visibility: Option<bool>,
}

/// How the host behaves; built by the gateway from [`GatewaySettings`] and the addresses it
/// bound.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// The address the main listener is bound to.
    pub local_addr: SocketAddr,
    /// The sandbox proxy's origin (`http://HOST:PORT`), shown in `/apps/health`.
    pub sandbox_origin: Option<String>,
    /// Bearer token required on every route but static assets.
    pub auth_token: Option<String>,
    /// Origins allowed to call the gateway; the gateway's own are always included.
    pub allowed_origins: Vec<String>,
    /// Host names accepted in `Host` besides loopback names.
    pub allowed_hosts: Vec<String>,
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// Whether views may only call tools whose visibility includes `"app"`.
    pub enforce_app_visibility: bool,
}

impl HostConfig {
    /// Defaults for a gateway listening on `local_addr`: no token, its own origins, 4 MiB
    /// bodies, app visibility enforced.
    pub fn new(local_addr: SocketAddr) -> Self {
        Self {
            local_addr,
            sandbox_origin: None,
            auth_token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            enforce_app_visibility: true,
        }
    }

    /// Applies a configuration section over the defaults.
    #[must_use]
    pub fn with_settings(mut self, settings: &GatewaySettings) -> Self {
        if let Some(token) = settings
            .auth_token
            .as_deref()
            .filter(|t| !t.trim().is_empty())
        {
            self.auth_token = Some(token.to_owned());
        }
        self.allowed_origins
            .extend(settings.allowed_origins.iter().cloned());
        self.allowed_hosts
            .extend(settings.allowed_hosts.iter().cloned());
        if let Some(bytes) = settings.max_body_bytes {
            self.max_body_bytes = bytes;
        }
        if let Some(enforce) = settings.enforce_app_visibility {
            self.enforce_app_visibility = enforce;
        }
        self
    }

    /// The origins the gateway itself is reached under.
    pub fn own_origins(&self) -> Vec<String> {
        let port = self.local_addr.port();
        let ip = self.local_addr.ip();
        let mut origins = vec![
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ];
        if !ip.is_loopback() && !ip.is_unspecified() {
            origins.push(format!("http://{}", self.local_addr));
        }
        origins
    }
}
