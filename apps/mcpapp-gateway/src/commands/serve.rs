//! `mcpapp-gateway serve`: discover, run and supervise apps, and serve the host endpoints
//! until SIGINT or SIGTERM, then stop every app.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use mcpapp_host::Gateway;
use mcpapp_supervisor::Keeper;
use tracing::warn;

use crate::cli::ServeArgs;

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
    let bind: Option<SocketAddr> = match &args.bind {
        Some(bind) => Some(
            bind.parse()
                .with_context(|| format!("'{bind}' is not an address such as 127.0.0.1:8787"))?,
        ),
        None => None,
    };
    let token = std::env::var("MCPAPP_TOKEN").ok();
    // What the start would refuse (a remote address without a token, say) is refused before
    // the stores below create anything in the state directory.
    mcpapp_host::check_start(&loaded.gateway, bind, token.as_deref())?;
    let oauth = crate::config::token_store(&loaded, &args.config);
    // Apps' `secret:` references resolve from the store `install` writes.
    let store = crate::config::secret_store(&loaded, &args.config);
    // The page's "Add apps" view installs into the first discovery path, like `install`.
    let installer = super::install::for_serve(&loaded, &args.config, store.clone());
    let mut builder = Gateway::builder(loaded.discovery)
        .secrets(std::sync::Arc::new(store))
        .settings(loaded.gateway)
        .config_source(loaded.source)
        // Hot reload; `Gateway.Watch: false` turns it off.
        .watch(true)
        .token(token)
        .model(mcpapp_agent::model_from_env()?)
        .drain(DRAIN);
    match installer {
        Ok(installer) => builder = builder.installer(installer),
        Err(err) => warn!("the page cannot install apps: {err}"),
    }
    // HTTP apps behind OAuth keep their tokens here; without a store they cannot be
    // connected, but everything else runs.
    match oauth {
        Ok(tokens) => builder = builder.token_store(tokens),
        Err(err) => warn!("apps behind OAuth cannot be connected: {err}"),
    }
    if let Some(addr) = bind {
        builder = builder.bind(addr);
    }
    // Apps run as this user: keep this process's environment (the token, the model key) and
    // memory out of their reach through /proc.
    if let Err(err) = mcpapp_supervisor::shield_process() {
        warn!(
            "cannot hide the gateway's process from its apps ({err}); apps of the same user could read its environment through /proc"
        );
    }
    // Each stdio app confines itself as it starts; this executable, run once as the probe,
    // tells what the kernel offers.
    let sandbox = mcpapp_sandbox::Sandbox::current_exe().unwrap_or_else(|err| {
        warn!("cannot find this executable to probe the kernel's sandbox support ({err}); sandboxed apps will fail to start");
        mcpapp_sandbox::Sandbox::new("/proc/self/exe")
    });
    builder = builder.sandbox(sandbox);
    match Keeper::start() {
        Ok(keeper) => builder = builder.keeper(keeper),
        Err(err) => warn!(
            "cannot start the keeper process ({err}); if the gateway is killed, apps that ignore the end of their input may outlive it"
        ),
    }
    let gateway = builder.start().await?;
    for diagnostic in &gateway.report().diagnostics {
        if diagnostic.severity > mcpapp_manifest::Severity::Info {
            warn!("{diagnostic}");
        }
    }
    // Whoever reads these lines may stop reading (and close the pipe) afterwards; that must
    // not take the gateway down, so write errors are ignored rather than panicking.
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "listening on http://{}", gateway.local_addr());
        let _ = writeln!(stdout, "sandbox on http://{}", gateway.sandbox_addr());
        let _ = stdout.flush();
    }
    // The apps settle in the background; the report of it gives way to a signal.
    // A terminal that can draw: stderr is one, and TERM is set and not `dumb`.
    let terminal = !indicatif::ProgressDrawTarget::stderr().is_hidden();
    let signal = shutdown_signal();
    tokio::pin!(signal);
    tokio::select! {
        () = super::settle::report(gateway.supervisor(), terminal) => signal.await,
        () = &mut signal => crate::progress::deactivate(),
    }
    gateway.shutdown().await;
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
