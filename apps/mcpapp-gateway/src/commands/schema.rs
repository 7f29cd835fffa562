//! `mcpapp-gateway schema`: prints a JSON Schema.

use std::process::ExitCode;

use mcpapp_manifest::SchemaKind;

use crate::cli::{SchemaArgs, SchemaChoice};

pub(crate) fn run(args: &SchemaArgs) -> ExitCode {
    let kind = match args.which {
        SchemaChoice::Manifest => SchemaKind::Manifest,
        SchemaChoice::Config => SchemaKind::Config,
    };
    print!("{}", kind.to_json());
    ExitCode::SUCCESS
}
