//! The subcommands. Each returns the process exit code.
//!
//! `apps`, `call` and `reload` talk to a running gateway (see `remote.rs` for their exit
//! codes); the others work on files and configuration.

use std::process::ExitCode;
use std::time::Duration;

use crate::cli::{Command, RemoteArgs};
use crate::remote::{EXIT_USAGE, Remote, RemoteError};

mod apps;
mod authorize;
mod call;
mod discover;
mod grant;
mod install;
mod output;
mod schema;
mod serve;
mod settle;
mod validate;

/// Exit code for a configuration that cannot be used at all.
const EXIT_BAD_CONFIG: u8 = EXIT_USAGE;

pub(crate) fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Discover(args) => discover::run(&args),
        Command::Validate(args) => Ok(validate::run(&args)),
        Command::Schema(args) => Ok(schema::run(&args)),
        Command::Serve(args) => serve::run(&args),
        Command::Apps(args) => return remote(async move { apps::run(&args).await }),
        Command::Call(args) => return remote(async move { call::run(&args).await }),
        Command::Reload(args) => return remote(async move { apps::reload(&args).await }),
        Command::Install(args) => return install::run(install::install(&args)),
        Command::Installed(args) => return install::run(install::installed(&args)),
        Command::Update(args) => return install::run(install::update(&args)),
        Command::Uninstall(args) => return install::run(install::uninstall(&args)),
        Command::Grant(args) => return install::run(grant::grant(&args)),
    };
    result.unwrap_or_else(|err| {
        // Output cut short by its reader (`| head`) is the reader's choice, not a failure.
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return ExitCode::SUCCESS;
        }
        eprintln!("error: {err:#}");
        ExitCode::from(EXIT_BAD_CONFIG)
    })
}

/// Runs a command against a running gateway on a runtime of its own and turns its error
/// into a message on stderr and its exit code.
fn remote(command: impl Future<Output = Result<u8, RemoteError>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(crate::remote::EXIT_FAILED);
        }
    };
    match runtime.block_on(command) {
        Ok(code) => ExitCode::from(code),
        Err(RemoteError::Output(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

/// The gateway `args` point at.
fn remote_of(args: &RemoteArgs) -> Result<Remote, RemoteError> {
    Remote::new(
        args.url.as_deref(),
        Duration::from_secs(args.timeout.max(1)),
    )
}
