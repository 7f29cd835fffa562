//! The subcommands. Each returns the process exit code.

use std::process::ExitCode;

use crate::cli::Command;

mod discover;
mod schema;
mod serve;
mod validate;

/// Exit code for a configuration that cannot be used at all.
const EXIT_BAD_CONFIG: u8 = 2;

pub(crate) fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Discover(args) => discover::run(&args),
        Command::Validate(args) => Ok(validate::run(&args)),
        Command::Schema(args) => Ok(schema::run(&args)),
        Command::Serve(args) => serve::run(&args),
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
