//! MCPB bundles for install tests: ZIP files of given entries ([`zip_of`]), and the bundle of
//! the tiny node server (`crates/mcpapp-install/tests/fixtures/tiny-server.js`) with a
//! manifest built to order ([`TinyBundle`]).

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value, json};

/// One entry of a test ZIP file.
#[derive(Debug, Clone, Copy)]
pub enum ZipEntry<'a> {
    /// A regular file, mode 0644.
    File(&'a str, &'a [u8]),
    /// A regular file, mode 0755.
    Executable(&'a str, &'a [u8]),
    /// A symbolic link and its target.
    Symlink(&'a str, &'a str),
    /// A name and its Unix mode (a FIFO, a device), without contents.
    Special(&'a str, u32),
}

/// A ZIP file of `entries`, in order.
pub fn zip_of(entries: &[ZipEntry<'_>]) -> Vec<u8> {
    use zip::write::SimpleFileOptions;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default();
    for entry in entries {
        match entry {
            ZipEntry::File(name, bytes) => {
                writer
                    .start_file(*name, options.unix_permissions(0o644))
                    .unwrap();
                writer.write_all(bytes).unwrap();
            }
            ZipEntry::Executable(name, bytes) => {
                writer
                    .start_file(*name, options.unix_permissions(0o755))
                    .unwrap();
                writer.write_all(bytes).unwrap();
            }
            ZipEntry::Symlink(name, target) => {
                writer.add_symlink(*name, *target, options).unwrap();
            }
            ZipEntry::Special(name, mode) => {
                writer
                    .start_file(*name, options.external_attributes(mode << 16))
                    .unwrap();
            }
        }
    }
    writer.finish().unwrap().into_inner()
}

/// The tiny node MCP server the install tests bundle (its tools report what it was given).
pub fn tiny_server_script() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mcpapp-install/tests/fixtures/tiny-server.js");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// An MCPB bundle (manifest version 0.3) of a node server started as
/// `node ${__dirname}/server/index.js ARGS...`: the tiny server unless [`script`] says
/// otherwise, version `1.0.0` and author `mcpapp tests` unless told.
///
/// ```no_run
/// use mcpapp_testkit::TinyBundle;
/// use serde_json::json;
///
/// let bytes = TinyBundle::new("notes")
///     .description("Reads your notes")
///     .args(&["${user_config.notes_dir}"])
///     .user_config(json!({"notes_dir": {"type": "directory", "title": "Notes", "required": true}}))
///     .zip();
/// ```
///
/// [`script`]: TinyBundle::script
#[derive(Debug, Clone)]
pub struct TinyBundle {
    name: String,
    display_name: Option<String>,
    version: String,
    description: String,
    author: String,
    args: Vec<String>,
    env: Map<String, Value>,
    user_config: Option<Value>,
    script: Option<String>,
}

impl TinyBundle {
    /// The bundle of app `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            display_name: None,
            version: "1.0.0".to_owned(),
            description: "A tiny server".to_owned(),
            author: "mcpapp tests".to_owned(),
            args: Vec::new(),
            env: Map::new(),
            user_config: None,
            script: None,
        }
    }

    /// Its `display_name`.
    #[must_use]
    pub fn display_name(mut self, display_name: &str) -> Self {
        self.display_name = Some(display_name.to_owned());
        self
    }

    /// Its `version`.
    #[must_use]
    pub fn version(mut self, version: &str) -> Self {
        self.version = version.to_owned();
        self
    }

    /// Its `description`.
    #[must_use]
    pub fn description(mut self, description: &str) -> Self {
        self.description = description.to_owned();
        self
    }

    /// Its author's name.
    #[must_use]
    pub fn author(mut self, author: &str) -> Self {
        self.author = author.to_owned();
        self
    }

    /// Arguments after the script's path (`${user_config.…}` placeholders included).
    #[must_use]
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|&a| a.to_owned()).collect();
        self
    }

    /// One variable of `mcp_config.env`.
    #[must_use]
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.insert(key.to_owned(), value.into());
        self
    }

    /// Its `user_config` object.
    #[must_use]
    pub fn user_config(mut self, user_config: Value) -> Self {
        self.user_config = Some(user_config);
        self
    }

    /// `server/index.js` in place of the tiny server.
    #[must_use]
    pub fn script(mut self, script: &str) -> Self {
        self.script = Some(script.to_owned());
        self
    }

    /// Its `manifest.json`.
    pub fn manifest(&self) -> Value {
        let mut manifest = json!({"manifest_version": "0.3", "name": self.name});
        if let Some(display_name) = &self.display_name {
            manifest["display_name"] = display_name.as_str().into();
        }
        let mut args = vec!["${__dirname}/server/index.js".to_owned()];
        args.extend(self.args.iter().cloned());
        let mut mcp_config = json!({"command": "node", "args": args});
        if !self.env.is_empty() {
            mcp_config["env"] = Value::Object(self.env.clone());
        }
        manifest["version"] = self.version.as_str().into();
        manifest["description"] = self.description.as_str().into();
        manifest["author"] = json!({"name": self.author});
        manifest["server"] = json!({
            "type": "node",
            "entry_point": "server/index.js",
            "mcp_config": mcp_config,
        });
        if let Some(user_config) = &self.user_config {
            manifest["user_config"] = user_config.clone();
        }
        manifest
    }

    /// The bundle's bytes: `manifest.json` and `server/index.js`.
    pub fn zip(&self) -> Vec<u8> {
        let script = self.script.clone().unwrap_or_else(tiny_server_script);
        zip_of(&[
            ZipEntry::File("manifest.json", self.manifest().to_string().as_bytes()),
            ZipEntry::File("server/index.js", script.as_bytes()),
        ])
    }

    /// Writes the bundle to `path`.
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.zip())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
}
