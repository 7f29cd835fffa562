//! The local MCP Registry of the "Add apps" check: `test-apps/mcp-registry` serving two
//! servers, `io.github.acme/hello` (an MCPB bundle of a tiny Node.js server, built here, that
//! asks for a secret `api_key`) and `io.github.modelcontextprotocol/ext-apps-basic-vanillajs`
//! (the ext-apps example from npm, run over stdio).

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::stack::{Program, Running, start_listening};

/// The bundle's server name in the registry.
pub(super) const HELLO: &str = "io.github.acme/hello";
/// The ext-apps example's server name in the registry.
pub(super) const VANILLA: &str = "io.github.modelcontextprotocol/ext-apps-basic-vanillajs";

/// A running registry.
pub(super) struct Registry {
    _running: Running,
    /// Its base URL.
    pub(super) url: String,
}

/// Starts the registry with its documents and files under `dir`.
pub(super) fn start(root: &Path, bin: &Path, dir: &Path, logs: &Path) -> anyhow::Result<Registry> {
    let docs = dir.join("docs");
    let files = dir.join("files");
    std::fs::create_dir_all(&docs).with_context(|| format!("creating {}", docs.display()))?;
    std::fs::create_dir_all(&files).with_context(|| format!("creating {}", files.display()))?;
    let docs_arg = docs.display().to_string();
    let files_arg = files.display().to_string();
    let (running, url) = start_listening(&Program {
        name: "mcp-registry",
        path: &bin.join("mcp-registry"),
        args: &["--dir", &docs_arg, "--files", &files_arg],
        envs: &[],
        log: &logs.join("mcp-registry.log"),
    })?;
    let script = root.join("crates/mcpapp-install/tests/fixtures/tiny-server.js");
    let script = std::fs::read(&script).with_context(|| format!("reading {}", script.display()))?;
    let bundle = hello_bundle(&script)?;
    std::fs::write(files.join("hello-1.0.0.mcpb"), &bundle)?;
    let sha: String = Sha256::digest(&bundle)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    crate::stack::write_json(
        &docs.join("hello.json"),
        &json!({
            "name": HELLO,
            "title": "Hello",
            "description": "A tiny server that needs an API key",
            "version": "1.0.0",
            "packages": [{
                "registryType": "mcpb",
                "identifier": format!("{url}/files/hello-1.0.0.mcpb"),
                "fileSha256": sha,
                "transport": {"type": "stdio"}
            }]
        }),
    )?;
    crate::stack::write_json(
        &docs.join("vanillajs.json"),
        &json!({
            "name": VANILLA,
            "title": "Basic MCP App (vanilla JS)",
            "description": "The ext-apps example: a get-time tool with a view",
            "version": "2.0.3",
            "packages": [{
                "registryType": "npm",
                "identifier": "@modelcontextprotocol/server-basic-vanillajs",
                "version": "2.0.3",
                "transport": {"type": "stdio"},
                "packageArguments": [{"type": "named", "name": "--stdio"}]
            }]
        }),
    )?;
    Ok(Registry {
        _running: running,
        url,
    })
}

/// The MCPB bundle of the tiny server, asking for a sensitive `api_key`.
fn hello_bundle(script: &[u8]) -> anyhow::Result<Vec<u8>> {
    let manifest = json!({
        "manifest_version": "0.3",
        "name": "hello",
        "version": "1.0.0",
        "description": "A tiny server that needs an API key",
        "author": {"name": "mcpapp e2e"},
        "server": {
            "type": "node",
            "entry_point": "server/index.js",
            "mcp_config": {
                "command": "node",
                "args": ["${__dirname}/server/index.js"],
                "env": {"API_KEY": "${user_config.api_key}"}
            }
        },
        "user_config": {
            "api_key": {"type": "string", "title": "API key", "description": "Any text will do", "sensitive": true, "required": true}
        }
    });
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().unix_permissions(0o644);
    writer.start_file("manifest.json", options)?;
    writer.write_all(manifest.to_string().as_bytes())?;
    writer.start_file("server/index.js", options)?;
    writer.write_all(script)?;
    Ok(writer.finish()?.into_inner())
}
