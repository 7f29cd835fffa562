//! The HTTP face of mcpapp, and the composition root of a whole gateway: [`Gateway::builder`]
//! assembles the supervisor and its apps, the tool registry, the agent and the host's routes,
//! serves them on two listeners, and takes it all down again in order.
//!
//! | Route | What it does |
//! |---|---|
//! | `GET /` and `/assets/{file}` | the browser host page (apps, chat, app views in a sandbox) |
//! | `GET /apps/health` | `{"ok","name","mcp","sandbox"}`: the app a browser host should show (`?appId=` picks one) |
//! | `GET /apps` | every discovered app: lifecycle, errors, counts, restarts, UI, its `mcp` URL |
//! | `GET /apps/{id}` | one app with its tools, resources, templates, prompts, the stderr tails of its current and previous run, and its open browser sessions |
//! | `POST /apps/{id}/start`, `/stop`, `/restart`, `POST /apps/reload` | control (reload reads the configuration file again and applies the difference) |
//! | `GET /apps/events` | lifecycle, list, added/removed and reload events as server-sent events (see docs/operations.md) |
//! | `POST /apps/chat` | a chat turn as server-sent events (with the elicitations of its calls) |
//! | `POST /apps/chat/elicitation/{id}` | the page's answer to an elicitation of the agent's call |
//! | `/apps/mcp/{appId}` | Streamable HTTP MCP for app views, sharing the app's upstream session |
//! | `/mcp` | one MCP server with every app's tools, resources, templates, prompts and completions, for external clients and MCP Apps hosts |
//! | `POST /apps/{id}/authorize`, `POST /apps/{id}/disconnect` | "Connect" (an authorization URL for an HTTP app behind OAuth) and "Disconnect" (revoke and delete its tokens) |
//! | `GET /oauth/callback`, `GET /oauth/client-metadata.json` | the authorization server's redirect back (no token: a live, single-use `state` guards it) and the gateway's client ID metadata document |
//! | `GET /healthz`, `GET /readyz` | probes without the token: the process serves; every app has settled (else 503 naming the unsettled ones) |
//! | `GET /metrics` | the gateway's series in the Prometheus text format (`Gateway.Metrics`, on by default; see docs/operations.md) |
//!
//! The sandbox listener (a second port, and so another origin) serves only
//! `/sandbox.html?view=TOKEN`: the outer frame of an app view, with the view's CSP as a
//! header. The page (`assets/`, hand-written ES modules embedded in the binary) speaks the
//! MCP Apps view protocol to views; `docs/host-page.md` describes it.
//!
//! Every response names the replica that gave it (`Mcpapp-Replica`, `Gateway.ReplicaName`);
//! the chat session id, sent as `Mcpapp-Affinity`, is the key balancers route replicas by
//! (see `replica.rs` and docs/operations.md).
//!
//! Every route checks `Host` and `Origin` against DNS rebinding, answers CORS for the allowed
//! origins, requires the bearer token when one is configured, and refuses bodies over the
//! limit (413). Both listeners are served by [`serve()`], with a header read timeout, a deadline
//! for whole request bodies and a cap on connections ([`ConnectionLimits`]). This is the only
//! crate that knows HTTP servers.
//!
//! Inside, `gateway.rs` assembles a gateway and `host.rs` composes the routes; each route's
//! module (`apps.rs`, `chat.rs`, `views.rs`, `proxy/`, `aggregate/`, …) owns the state its
//! handlers take, and `streamable_http/` is the Streamable HTTP server machinery both MCP
//! endpoints share.
//!
//! # Example
//!
//! ```no_run
//! use mcpapp_discovery::Discovery;
//! use mcpapp_host::Gateway;
//! use mcpapp_manifest::McpAppsConfig;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let apps = McpAppsConfig { enabled: true, ..McpAppsConfig::default() };
//! let discovery = Discovery::builder(apps).build()?;
//! let gateway = Gateway::builder(discovery)
//!     .bind("127.0.0.1:0".parse()?)
//!     .token(Some("a long random secret".to_owned()))
//!     .start()
//!     .await?;
//! println!("open http://{}/", gateway.local_addr());
//! gateway.wait_settled(std::time::Duration::from_secs(30)).await;
//! gateway.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod aggregate;
mod app_events;
mod apps;
mod chat;
mod config;
mod csp;
mod elicitation;
mod error;
mod extensions;
mod gateway;
mod health;
mod host;
mod intake;
mod metrics;
mod oauth;
mod proxy;
mod reload;
mod replica;
mod security;
mod serve;
mod streamable_http;
mod views;

pub use config::{ConnectionLimits, GatewaySettings, HostConfig};
pub use gateway::{Gateway, GatewayBuilder, StartError, check_start};
pub use host::Host;
pub use reload::{ConfigSource, LoadedConfig};
pub use security::ExposureError;
pub use serve::serve;
