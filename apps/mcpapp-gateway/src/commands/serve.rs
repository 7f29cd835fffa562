//! `mcpapp-gateway serve`: discover, run and supervise apps, and serve the host endpoints
//! until SIGINT or SIGTERM, then stop every app.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mcpapp_agent::{Agent, AgentConfig};
use mcpapp_bridge::{AppToolSync, ToolRegistry};
use mcpapp_host::{Host, HostConfig, HostParts, check_exposure};
use mcpapp_supervisor::{Keeper, Supervisor};
use tracing::{info, warn};

use crate::cli::ServeArgs;

/// Address used when neither `--bind` nor `Gateway.Bind` says otherwise.
const DEFAULT_BIND: &str = "127.0.0.1:8787";
/// How long open connections (event streams) may delay shutdown after a signal.
const DRAIN: Duration = Duration::from_secs(5);

pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let loaded = crate::config::load(&args.config)?;
    for diagnostic in &loaded.diagnostics {
        warn!("{diagnostic}");
    }
    let settings = loaded.gateway;
    let bind = args
        .bind
        .clone()
        .or_else(|| settings.bind.clone())
        .unwrap_or_else(|| DEFAULT_BIND.to_owned());
    let addr: SocketAddr = bind
        .parse()
        .with_context(|| format!("'{bind}' is not an address such as 127.0.0.1:8787"))?;
    let token = std::env::var("MCPAPP_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| settings.auth_token.clone().filter(|t| !t.trim().is_empty()));
    check_exposure(
        addr,
        token.as_deref(),
        settings.allow_remote_without_token.unwrap_or(false),
    )?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    // The sandbox for app views needs its own origin: a second listener on the same host.
    let sandbox_bind = match &settings.sandbox_bind {
        Some(bind) => bind
            .parse::<SocketAddr>()
            .with_context(|| format!("Gateway.SandboxBind '{bind}' is not an address"))?,
        None => SocketAddr::new(local.ip(), 0),
    };
    let sandbox_listener = tokio::net::TcpListener::bind(sandbox_bind)
        .await
        .with_context(|| format!("cannot listen on {sandbox_bind} for the sandbox"))?;
    let sandbox_local = sandbox_listener.local_addr()?;

    let discovery = loaded.discovery.clone();
    let report = tokio::task::spawn_blocking(move || discovery.scan()).await?;
    for diagnostic in &report.diagnostics {
        if diagnostic.severity > mcpapp_manifest::Severity::Info {
            warn!("{diagnostic}");
        }
    }
    // Apps run as this user: keep this process's environment (the token, the model key) and
    // memory out of their reach through /proc.
    if let Err(err) = mcpapp_supervisor::shield_process() {
        warn!(
            "cannot hide the gateway's process from its apps ({err}); apps of the same user could read its environment through /proc"
        );
    }
    let mut supervisor = Supervisor::builder().config(loaded.discovery.config());
    match Keeper::start() {
        Ok(keeper) => supervisor = supervisor.keeper(keeper),
        Err(err) => warn!(
            "cannot start the keeper process ({err}); if the gateway is killed, apps that ignore the end of their input may outlive it"
        ),
    }
    let supervisor = supervisor.build();
    let registry = ToolRegistry::new();
    let model = mcpapp_agent::model_from_env()?;
    info!(model = model.label(), "chat model");
    let agent = Agent::new(registry.clone(), model, AgentConfig::default());
    let mut config = HostConfig::new(local).with_settings(&settings);
    config.auth_token = token;
    config.sandbox_origin = Some(format!("http://{sandbox_local}"));
    // App tools follow the supervisor into the agent's registry (and /mcp).
    let sync = Arc::new(AppToolSync::start(&supervisor, &registry));
    let diagnostics = {
        let sync = sync.clone();
        Arc::new(move || {
            sync.diagnostics()
                .iter()
                .filter_map(|d| serde_json::to_value(d).ok())
                .collect()
        })
    };
    let parts = HostParts::new(supervisor.clone(), registry, agent)
        .with_discovery(loaded.discovery)
        .with_diagnostics(diagnostics);
    let limits = config.connections;
    let host = Host::new(parts, config);
    let app = host.router();
    let sandbox = host.sandbox_router();

    // Apps start in the background; the endpoints answer at once.
    supervisor.load(&report);
    // Whoever reads these lines may stop reading (and close the pipe) afterwards; that must
    // not take the gateway down, so write errors are ignored rather than panicking.
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "listening on http://{local}");
        let _ = writeln!(stdout, "sandbox on http://{sandbox_local}");
        let _ = stdout.flush();
    }
    info!(
        "mcpapp gateway listening on http://{local} (open http://{local}/ in a browser); app views are sandboxed on http://{sandbox_local}"
    );
    let sandbox_server = tokio::spawn(mcpapp_host::serve(
        sandbox_listener,
        sandbox,
        limits,
        std::future::pending(),
        DRAIN,
    ));

    mcpapp_host::serve(
        listener,
        app,
        limits,
        {
            let host = host.clone();
            async move {
                shutdown_signal().await;
                info!("shutting down");
                host.begin_shutdown();
            }
        },
        DRAIN,
    )
    .await;
    sandbox_server.abort();
    supervisor.shutdown().await;
    drop(sync);
    info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
