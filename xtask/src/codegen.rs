//! `cargo xtask codegen`: writes the generated artefacts that are committed to the repository.

use std::path::Path;

use anyhow::{Context, bail};
use mcpapp_manifest::SchemaKind;

/// Regenerates `docs/schema/*.json`, or with `--check` reports which ones are stale.
pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        other => bail!("`codegen` takes only `--check`, got {other:?}"),
    };
    let dir = root.join("docs/schema");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut stale = Vec::new();
    for kind in SchemaKind::ALL {
        let path = dir.join(kind.file_name());
        let wanted = kind.to_json();
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == wanted {
            continue;
        }
        if check {
            stale.push(path.display().to_string());
        } else {
            std::fs::write(&path, wanted).with_context(|| format!("writing {}", path.display()))?;
            println!("updated {}", path.display());
        }
    }
    if !stale.is_empty() {
        bail!(
            "stale generated files (run `cargo xtask codegen`): {}",
            stale.join(", ")
        );
    }
    Ok(())
}
