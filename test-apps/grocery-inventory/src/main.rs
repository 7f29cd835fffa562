//! `grocery-inventory`: a multi-store grocery inventory MCP App with an interactive dashboard,
//! the rich test app behind `cargo xtask demo` and the end-to-end tests.
//!
//! # Running
//!
//! ```text
//! grocery-inventory [--csp-connect-domain ORIGIN]... stdio
//! grocery-inventory [--csp-connect-domain ORIGIN]... http [--bind ADDR]
//! ```
//!
//! - `stdio` speaks MCP over stdin/stdout; logs go to stderr only.
//! - `http` serves Streamable HTTP MCP at `/mcp` and the REST API at `/api/` on `ADDR`
//!   (default `127.0.0.1:0`, a free port). Once it accepts connections it prints exactly one
//!   line to stdout, `listening on http://HOST:PORT/mcp`; logs go to stderr. Connections
//!   are served with `TCP_NODELAY`.
//! - `--csp-connect-domain ORIGIN` (repeatable, either mode) adds an origin to the dashboard's
//!   `_meta.ui.csp.connectDomains`, which is empty by default.
//! - `RUST_LOG` sets the log filter (default `info`).
//!
//! The server caps its protocol versions at 2025-11-25 (so the elicitation tools can send
//! `elicitation/create`).
//!
//! Two manifests ship with the crate: `openclaw.mcpapp.json` (id `grocery-inventory`, http,
//! `http://127.0.0.1:5001/mcp`: start the app with `grocery-inventory http --bind
//! 127.0.0.1:5001` first) and `stdio/openclaw.mcpapp.json` (id `grocery-inventory-stdio`,
//! command `grocery-inventory` found on `PATH`, arguments `["stdio"]`). Both use the tool prefix
//! `grocery.`.
//!
//! # Contracts other crates rely on
//!
//! **Data.** Integer ids starting at 1. Stores: 1 "Downtown Market" (Portland, OR),
//! 2 "Uptown Grocery" (Seattle, WA), 3 "Harbor Foods" (San Francisco, CA). 5 categories,
//! 5 suppliers, 24 products including 1 "Organic Milk" `MILK-001` 4.99 and 2 "Whole Wheat Bread"
//! `BREAD-002` 3.49, one inventory row per store and product (72), nine of them at or below
//! their reorder threshold at start (for example store 1 / product 1: 8 on hand, threshold 20).
//!
//! **Tools** (14). Read-only: `get_categories {id?}`, `get_products {id?, categoryId?,
//! supplierId?}`, `get_suppliers {id?}`, `get_stores {id?}`, `get_inventory {storeId?,
//! productId?}`, `get_low_stock {storeId?}`. Changes: `set_inventory {storeId, productId,
//! quantityOnHand, reorderThreshold}`, `adjust_stock {storeId, productId, delta}` (signed,
//! non-zero; result `{storeId, productId, previousQuantity, quantityOnHand, delta,
//! reorderThreshold, lowStock, lastRestocked}`). UI: `show_store_inventory_dashboard {storeId?}`
//! with `_meta.ui = {"resourceUri": "ui://grocery/store-dashboard.html"}` and the legacy flat
//! key `_meta["ui/resourceUri"]`, returning a short text summary plus structuredContent
//! `{generatedAt, stores: [{id, name, city, state, totalSkus, lowStockCount, inventoryValue,
//! valueAtRisk, items: [{productId, sku, name, category, unitPrice, unitOfMeasure,
//! quantityOnHand, reorderThreshold, lastRestocked, lowStock, value, suggestedOrder}]}]}`;
//! `refresh_dashboard {storeId?}` (same payload) with `_meta.ui = {"resourceUri":
//! "ui://grocery/store-dashboard.html", "visibility": ["app"]}`; `reset_inventory {}` with
//! `_meta.ui.visibility = ["model"]`. Elicitation wizards: `restock_wizard {storeId, productId,
//! quantity?}`, `adjust_stock_with_confirmation {storeId, productId, delta}` (asks when
//! |delta| >= 50) and `new_product_wizard {sku?, name?, unitPrice?, unitOfMeasure?, categoryId?,
//! supplierId?}`. A declined or cancelled form gives a normal result with `status` `declined` /
//! `cancelled` and changes nothing; a client without elicitation gets a tool error saying how to
//! call the tool without a question. Bad ids, filters and arguments give tool errors
//! (`isError: true`) naming the problem.
//!
//! **Notifications.** Every stock change made by a tool (`adjust_stock`, `set_inventory`, the
//! wizards, `reset_inventory`) sends `notifications/resources/updated` for
//! `inventory://stores/{storeId}/summary` and `inventory://products/{productId}/details`
//! unconditionally to the calling connection (through the request's peer), and to other
//! connections that subscribed with `resources/subscribe`. REST changes reach subscribers.
//!
//! **Resources.** `resources/list` holds the dashboard `ui://grocery/store-dashboard.html` (mime
//! exactly `text/html;profile=mcp-app`) and one `inventory://stores/{id}/summary` per store.
//! The dashboard's `_meta.ui` is `{"prefersBorder": true, "csp": {"connectDomains": [...],
//! "resourceDomains": []}}` on both the list entry and the read content item. Templates:
//! `inventory://stores/{storeId}/summary` and `inventory://products/{productId}/details`
//! (`application/json`).
//!
//! **Prompts.** `analyze_store_performance {storeId}`, `draft_supplier_order {supplierId,
//! urgency?: routine|urgent|emergency}`, `explain_inventory_term {term}`, built from live data.
//! **Completions** for those arguments and for the template variables `storeId` / `productId`
//! (ids as strings, matched by id prefix or by name).
//!
//! **REST** (http mode): `GET /api/categories[/{id}]`, `/api/products[/{id}]` (query
//! `categoryId`, `supplierId`), `/api/suppliers[/{id}]`, `/api/stores[/{id}]`,
//! `/api/stores/{id}/summary`, `/api/inventory` (query `storeId`, `productId`),
//! `/api/inventory/low-stock` (query `storeId`), `/api/inventory/{storeId}/{productId}`;
//! `POST /api/inventory {storeId, productId, quantityOnHand, reorderThreshold}` and
//! `PUT /api/inventory/{storeId}/{productId} {quantityOnHand, reorderThreshold}` (201 when
//! created, 200 when replaced); `POST /api/inventory/{storeId}/{productId}/adjust {delta}`.
//! Errors are `{"status", "error", "message"}`: 404 for unknown ids and routes, 400 for
//! malformed input with the reason.
//!
//! **Dashboard DOM** (for browser tests): `#status` reads `ready` after `ui/initialize`
//! succeeded and `ui/notifications/initialized` was sent, then `rendered` once a tool result is
//! shown; one `<section data-store-id="N">` per store; quantity cells
//! `[data-qty="STORE:PRODUCT"]` holding the integer quantity; buttons
//! `[data-adjust="STORE:PRODUCT:+1"]` / `[data-adjust="STORE:PRODUCT:-1"]` calling
//! `adjust_stock` through `tools/call` and updating the cell from the result; `#refresh` calls
//! `refresh_dashboard`; `#reset` calls the model-only `reset_inventory` (a host must refuse it)
//! and shows the outcome; `#message` shows the last status or error text; `#ask-agent` sends
//! `ui/message`. The view posts JSON-RPC objects to `window.parent`, ignores messages from other
//! windows, sends nothing before its `ui/initialize` response, follows `hostContext.theme` and
//! `ui/notifications/host-context-changed`, reports its size with
//! `ui/notifications/size-changed`, answers `ui/resource-teardown` with `{}` and answers `ping`.

mod completions;
mod dashboard;
mod model;
mod notify;
mod prompts;
mod rest;
mod seed;
mod server;
mod service;
mod time;
mod tools;
mod views;

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::notify::Notifier;
use crate::server::{AppState, GroceryServer, UiConfig};
use crate::service::InMemoryInventoryService;

/// Command line of `grocery-inventory`.
#[derive(Debug, Parser)]
#[command(
    name = "grocery-inventory",
    version,
    about = "GroceryInventory MCP App"
)]
struct Cli {
    /// Add an origin to the dashboard's CSP connectDomains (repeatable).
    #[arg(long = "csp-connect-domain", value_name = "ORIGIN", global = true)]
    csp_connect_domains: Vec<String>,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Serve MCP over stdin/stdout.
    Stdio,
    /// Serve MCP at /mcp and the REST API at /api over HTTP.
    Http {
        /// Address to listen on.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        bind: String,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    for origin in &cli.csp_connect_domains {
        url::Url::parse(origin).with_context(|| {
            format!(
                "--csp-connect-domain {origin:?} is not an origin such as http://127.0.0.1:8080"
            )
        })?;
    }
    let state = Arc::new(AppState {
        service: Arc::new(InMemoryInventoryService::seeded()),
        notifier: Notifier::default(),
        ui: UiConfig {
            connect_domains: cli.csp_connect_domains,
        },
    });
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        match cli.mode {
            Mode::Stdio => serve_stdio(state).await,
            Mode::Http { bind } => serve_http(state, &bind).await,
        }
    })?;
    // Do not wait for the blocking stdin reader thread, which cannot be interrupted.
    runtime.shutdown_background();
    Ok(())
}

async fn serve_stdio(state: Arc<AppState>) -> anyhow::Result<()> {
    tracing::info!("serving MCP over stdio");
    let running = GroceryServer::new(state)
        .serve(rmcp::transport::stdio())
        .await
        .context("MCP handshake over stdio failed")?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "stdio session ended");
    Ok(())
}

async fn serve_http(state: Arc<AppState>, bind: &str) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let mcp_state = state.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(GroceryServer::new(mcp_state.clone())),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let app = rest::router(state)
        .route("/", axum::routing::get(index))
        .nest_service("/mcp", mcp);
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}/mcp").context("writing to stdout")?;
    stdout.flush().context("flushing stdout")?;
    drop(stdout);
    tracing::info!(%addr, "serving MCP at /mcp and REST at /api");
    // TCP_NODELAY on every connection: an event-stream answer is written in pieces (its
    // head, then each event), and with Nagle's algorithm a later piece waits for the client
    // to acknowledge the first, which a client that delays ACKs does for ~40 ms.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on a connection: {err}");
        }
    });
    tokio::select! {
        served = axum::serve(listener, app) => served.context("HTTP server failed")?,
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; shutting down"),
    }
    Ok(())
}

async fn index() -> &'static str {
    "grocery-inventory: MCP at /mcp, REST API at /api/ (categories, products, suppliers, stores, inventory)\n"
}
