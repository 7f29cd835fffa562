//! Settings of the HTTP host: the `Gateway` configuration section and what the gateway knows
//! about where it listens.

use std::net::SocketAddr;
use std::num::{NonZeroU64, NonZeroUsize};
use std::time::Duration;

use axum::http::{HeaderMap, header};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default largest request body, 4 MiB.
const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default time a client has to send a request head, 10 s.
const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a client has to send a whole request body, 30 s.
const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of connections a listener serves at once.
const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default number of browser sessions of `/apps/mcp/{appId}` per app.
const DEFAULT_MAX_PROXY_SESSIONS_PER_APP: usize = 256;
/// Default time after which an idle browser session is closed, 30 min.
const DEFAULT_PROXY_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// Interval of keep-alive comments on an idle event stream (chat, `/apps/events` and the
/// MCP endpoints' streams).
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(15);

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
    /// Time a client has to send a request head, from the connection's start or the end of
    /// the previous response (so also how long an idle keep-alive connection stays open);
    /// default 10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_read_timeout_ms: Option<NonZeroU64>,
    /// Time a client has to send a whole request body, from the end of its head; default
    /// 30000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_read_timeout_ms: Option<NonZeroU64>,
    /// Connections served at once by each listener; more are answered 503 and closed;
    /// default 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<NonZeroUsize>,
    /// Browser sessions of `/apps/mcp/{appId}` per app; a new one evicts the least recently
    /// used idle session, or is refused with 503 when none is idle; default 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_proxy_sessions_per_app: Option<NonZeroUsize>,
    /// Seconds after which an idle browser session is closed; default 1800.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_session_idle_seconds: Option<NonZeroU64>,
    /// Serve `GET /metrics` (Prometheus text format, behind the token like every API route);
    /// default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<bool>,
    /// This replica's name, sent on every response as `Mcpapp-Replica` (visible ASCII, at
    /// most 64 characters); default: the host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_name: Option<String>,
    /// The origin browsers reach the gateway under when it runs behind a balancer or a TLS
    /// proxy (`https://mcpapp.example.com`): it is allowed as an origin and a host, and the
    /// URLs the gateway hands out (`mcp`, the view's host origin) use it; default: the origin
    /// of each request's `Host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_origin: Option<String>,
    /// The origin browsers reach the sandbox listener under behind a balancer
    /// (`https://sandbox.mcpapp.example.com`); it must differ from the page's origin. Default:
    /// `http://` and the sandbox listener's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_origin: Option<String>,
    /// The URL of the gateway's OAuth client ID metadata document, the client ID it presents
    /// to authorization servers that accept them (https, with a path). Default:
    /// `/oauth/client-metadata.json` on an https `PublicOrigin`, else none (the gateway then
    /// registers dynamically). Set it to publish the document elsewhere (a static https
    /// site serving what the gateway serves at `/oauth/client-metadata.json`).
    #[serde(
        default,
        rename = "OAuthClientMetadataUrl",
        skip_serializing_if = "Option::is_none"
    )]
    pub oauth_client_metadata_url: Option<String>,
    /// Watch the discovery paths and the configuration file and apply changes as they happen
    /// (hot reload); default true for `mcpapp-gateway serve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<bool>,
}

impl GatewaySettings {
    /// The keys (as written in the file, `PascalCase`) whose values differ between `self`
    /// and `other`, in the section's order. Only names: values may be secrets.
    pub(crate) fn changed_keys(&self, other: &Self) -> Vec<&'static str> {
        // Every field, destructured so that a new one cannot be forgotten here.
        let Self {
            bind,
            sandbox_bind,
            auth_token,
            allow_remote_without_token,
            allowed_origins,
            allowed_hosts,
            max_body_bytes,
            enforce_app_visibility,
            header_read_timeout_ms,
            body_read_timeout_ms,
            max_connections,
            max_proxy_sessions_per_app,
            proxy_session_idle_seconds,
            metrics,
            replica_name,
            public_origin,
            sandbox_origin,
            oauth_client_metadata_url,
            watch,
        } = self;
        let differs = [
            ("Bind", *bind != other.bind),
            ("SandboxBind", *sandbox_bind != other.sandbox_bind),
            ("AuthToken", *auth_token != other.auth_token),
            (
                "AllowRemoteWithoutToken",
                *allow_remote_without_token != other.allow_remote_without_token,
            ),
            ("AllowedOrigins", *allowed_origins != other.allowed_origins),
            ("AllowedHosts", *allowed_hosts != other.allowed_hosts),
            ("MaxBodyBytes", *max_body_bytes != other.max_body_bytes),
            (
                "EnforceAppVisibility",
                *enforce_app_visibility != other.enforce_app_visibility,
            ),
            (
                "HeaderReadTimeoutMs",
                *header_read_timeout_ms != other.header_read_timeout_ms,
            ),
            (
                "BodyReadTimeoutMs",
                *body_read_timeout_ms != other.body_read_timeout_ms,
            ),
            ("MaxConnections", *max_connections != other.max_connections),
            (
                "MaxProxySessionsPerApp",
                *max_proxy_sessions_per_app != other.max_proxy_sessions_per_app,
            ),
            (
                "ProxySessionIdleSeconds",
                *proxy_session_idle_seconds != other.proxy_session_idle_seconds,
            ),
            ("Metrics", *metrics != other.metrics),
            ("ReplicaName", *replica_name != other.replica_name),
            ("PublicOrigin", *public_origin != other.public_origin),
            ("SandboxOrigin", *sandbox_origin != other.sandbox_origin),
            (
                "OAuthClientMetadataUrl",
                *oauth_client_metadata_url != other.oauth_client_metadata_url,
            ),
            ("Watch", *watch != other.watch),
        ];
        differs
            .into_iter()
            .filter_map(|(key, differs)| differs.then_some(key))
            .collect()
    }
}

/// How a listener treats its connections (see [`serve()`](crate::serve())).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// Time a client has to send a request head: from the connection's start, and on a
    /// keep-alive connection from the end of the previous response, so it is also the idle
    /// timeout between requests. A late client's connection is closed without an answer.
    pub header_read_timeout: Duration,
    /// Time a client has to send a whole request body, counted from the end of its head
    /// (not per read, so a trickle cannot stretch it). A client that is late gets 408 and
    /// the connection closes.
    pub body_read_timeout: Duration,
    /// Connections served at once; the next ones are answered 503 and closed.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    /// 10 s for a request head, 30 s for a body, 1024 connections.
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// How the host behaves; built by the gateway from [`GatewaySettings`] and the addresses it
/// bound.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// The address the main listener is bound to.
    pub local_addr: SocketAddr,
    /// The sandbox proxy's origin as browsers reach it (`http://HOST:PORT`, or
    /// `Gateway.SandboxOrigin`), shown in `/apps/health`; its host is accepted in `Host`.
    pub sandbox_origin: Option<String>,
    /// The origin browsers reach the gateway under behind a balancer (`Gateway.PublicOrigin`):
    /// allowed as an origin and a host, and the base of the URLs the gateway hands out.
    pub public_origin: Option<String>,
    /// This replica's name, sent on every response as `Mcpapp-Replica`.
    pub replica_name: String,
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
    /// Timeouts and the connection cap for the listeners that serve this host's routers.
    pub connections: ConnectionLimits,
    /// Browser sessions of `/apps/mcp/{appId}` kept per app.
    pub max_proxy_sessions_per_app: usize,
    /// How long a browser session may stay idle (no request in flight, no event stream
    /// open) before it is closed.
    pub proxy_session_idle: Duration,
    /// Whether `GET /metrics` is served.
    pub serve_metrics: bool,
    /// The longest an elicitation of the agent's call waits for the chat page's answer
    /// before it is declined; it never waits longer than the app's request timeout. `None`
    /// (the default): the app's request timeout.
    pub elicitation_timeout: Option<Duration>,
}

impl HostConfig {
    /// Defaults for a gateway listening on `local_addr`: the host name as the replica's name,
    /// no public origins, no token, its own origins, 4 MiB
    /// bodies, app visibility enforced, the default [`ConnectionLimits`], 256 browser
    /// sessions per app closed after 30 idle minutes, `GET /metrics` served, elicitations
    /// waiting as long as the app's request timeout.
    pub(crate) fn new(local_addr: SocketAddr) -> Self {
        Self {
            local_addr,
            sandbox_origin: None,
            public_origin: None,
            replica_name: crate::replica::default_replica_name(),
            auth_token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            enforce_app_visibility: true,
            connections: ConnectionLimits::default(),
            max_proxy_sessions_per_app: DEFAULT_MAX_PROXY_SESSIONS_PER_APP,
            proxy_session_idle: DEFAULT_PROXY_SESSION_IDLE,
            serve_metrics: true,
            elicitation_timeout: None,
        }
    }

    /// Applies a configuration section over the defaults.
    #[must_use]
    pub(crate) fn with_settings(mut self, settings: &GatewaySettings) -> Self {
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
        if let Some(ms) = settings.header_read_timeout_ms {
            self.connections.header_read_timeout = Duration::from_millis(ms.get());
        }
        if let Some(ms) = settings.body_read_timeout_ms {
            self.connections.body_read_timeout = Duration::from_millis(ms.get());
        }
        if let Some(max) = settings.max_connections {
            self.connections.max_connections = max.get();
        }
        if let Some(max) = settings.max_proxy_sessions_per_app {
            self.max_proxy_sessions_per_app = max.get();
        }
        if let Some(seconds) = settings.proxy_session_idle_seconds {
            self.proxy_session_idle = Duration::from_secs(seconds.get());
        }
        if let Some(serve) = settings.metrics {
            self.serve_metrics = serve;
        }
        if let Some(name) = &settings.replica_name {
            self.replica_name.clone_from(name);
        }
        if let Some(origin) = &settings.public_origin {
            self.public_origin = Some(origin.trim().trim_end_matches('/').to_owned());
        }
        self
    }

    /// The base URL a request reached the gateway under: `Gateway.PublicOrigin` when the
    /// gateway runs behind a balancer, else `http://` and the request's `Host`.
    pub(crate) fn base_url(&self, headers: &HeaderMap) -> String {
        if let Some(origin) = &self.public_origin {
            return origin.clone();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map_or_else(|| self.local_addr.to_string(), str::to_owned);
        format!("http://{host}")
    }

    /// The origins the gateway itself is reached under.
    pub(crate) fn own_origins(&self) -> Vec<String> {
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
        origins.extend(self.public_origin.iter().cloned());
        origins
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_override_the_defaults() {
        let settings: GatewaySettings = serde_json::from_str(
            r#"{"HeaderReadTimeoutMs": 1500, "BodyReadTimeoutMs": 2500, "MaxConnections": 7,
                "MaxProxySessionsPerApp": 3, "ProxySessionIdleSeconds": 60}"#,
        )
        .unwrap();
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let defaults = HostConfig::new(addr);
        assert_eq!(defaults.connections, ConnectionLimits::default());
        assert_eq!(defaults.max_proxy_sessions_per_app, 256);
        assert_eq!(defaults.proxy_session_idle, Duration::from_secs(1800));
        let config = defaults.with_settings(&settings);
        assert_eq!(
            config.connections.header_read_timeout,
            Duration::from_millis(1500)
        );
        assert_eq!(
            config.connections.body_read_timeout,
            Duration::from_millis(2500)
        );
        assert_eq!(config.connections.max_connections, 7);
        assert_eq!(config.max_proxy_sessions_per_app, 3);
        assert_eq!(config.proxy_session_idle, Duration::from_secs(60));
    }

    #[test]
    fn zero_limits_are_refused() {
        for key in [
            "HeaderReadTimeoutMs",
            "BodyReadTimeoutMs",
            "MaxConnections",
            "MaxProxySessionsPerApp",
            "ProxySessionIdleSeconds",
        ] {
            let text = format!(r#"{{"{key}": 0}}"#);
            let err = serde_json::from_str::<GatewaySettings>(&text).unwrap_err();
            assert!(err.to_string().contains("nonzero"), "{key}: {err}");
        }
    }

    #[test]
    fn changed_keys_name_every_key_as_the_file_spells_it() {
        let everything: GatewaySettings = serde_json::from_str(
            r#"{"Bind": "127.0.0.1:1", "SandboxBind": "127.0.0.1:2", "AuthToken": "t",
                "AllowRemoteWithoutToken": true, "AllowedOrigins": ["http://a"],
                "AllowedHosts": ["a"], "MaxBodyBytes": 1, "EnforceAppVisibility": false,
                "HeaderReadTimeoutMs": 1, "BodyReadTimeoutMs": 1, "MaxConnections": 1,
                "MaxProxySessionsPerApp": 1, "ProxySessionIdleSeconds": 1, "Metrics": false,
                "ReplicaName": "r", "PublicOrigin": "https://a",
                "SandboxOrigin": "https://b", "Watch": false,
                "OAuthClientMetadataUrl": "https://a/client.json"}"#,
        )
        .unwrap();
        let changed = GatewaySettings::default().changed_keys(&everything);
        let schema = schemars::schema_for!(GatewaySettings);
        let mut properties: Vec<&str> = schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = changed.clone();
        sorted.sort_unstable();
        properties.sort_unstable();
        assert_eq!(sorted, properties);
        assert!(everything.changed_keys(&everything).is_empty());

        let token_only = GatewaySettings {
            auth_token: Some("new".into()),
            ..GatewaySettings::default()
        };
        assert_eq!(
            GatewaySettings::default().changed_keys(&token_only),
            ["AuthToken"]
        );
    }
}
