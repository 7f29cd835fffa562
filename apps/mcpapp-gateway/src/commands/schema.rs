//! `mcpapp-gateway schema`: prints a JSON Schema.

use std::process::ExitCode;

use mcpapp_manifest::SchemaKind;

use crate::cli::{SchemaArgs, SchemaChoice};

pub(crate) fn run(args: &SchemaArgs) -> ExitCode {
    let kind = match args.which {
        SchemaChoice::Manifest => SchemaKind::Manifest,
        SchemaChoice::Config => SchemaKind::Config,
    };
    // A reader that stops early (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), kind.to_json().as_bytes());
    ExitCode::SUCCESS
}
