//! The errors of installing, updating and removing apps. Each names what it is about: the
//! file or URL, the field and (for JSON) the line and column, the program, the app.

use std::path::PathBuf;

/// A problem in a document (`server.json`, an MCPB `manifest.json`, a registry answer): where
/// it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}: {message}", field = self.field_shown())]
pub struct FormatError {
    /// The file or URL the document came from.
    pub file: String,
    /// The JSON path of the value (`packages[0].registryType`); empty for the whole document.
    pub field: String,
    /// 1-based line of the value (0 when unknown).
    pub line: usize,
    /// 1-based column of the value (0 when unknown).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl FormatError {
    fn field_shown(&self) -> &str {
        if self.field.is_empty() || self.field == "." {
            "(document)"
        } else {
            &self.field
        }
    }
}

/// Why an install, update or uninstall did not happen. Nothing is left half done: a failed
/// install removes what it wrote.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The SOURCE argument is not one of the forms `install` takes.
    #[error("'{source_text}' is not an install source: {reason}")]
    BadSource {
        /// The argument as given.
        source_text: String,
        /// Why not, and what would be.
        reason: String,
    },
    /// A document is malformed or uses something unsupported.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Values for the inputs are missing or wrong.
    #[error(transparent)]
    Input(#[from] crate::inputs::InputError),
    /// A download or registry request failed.
    #[error("cannot fetch {url}: {reason}")]
    Fetch {
        /// What was asked for.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// The package, version or server does not exist where it was looked for.
    #[error("{what} was not found in {registry}{hint}")]
    NotFound {
        /// The package or server, with the version asked for.
        what: String,
        /// Where it was looked for.
        registry: String,
        /// A suggestion (`; the latest version is 1.2.3`), or empty.
        hint: String,
    },
    /// A bundle was refused (hash mismatch, unsafe entry, too large).
    #[error("bundle {file}: {reason}")]
    Bundle {
        /// The bundle's file or URL.
        file: String,
        /// Why it was refused.
        reason: String,
    },
    /// A program the install needs is not installed.
    #[error("{program} is needed to install {what} but was not found on PATH; {hint}")]
    MissingProgram {
        /// The program (`npm`, `python3`).
        program: String,
        /// What it is needed for.
        what: String,
        /// What to install.
        hint: String,
    },
    /// A package manager failed.
    #[error("`{command}` failed ({status}){output}", output = tail(.output))]
    Command {
        /// The command line, as shown before it ran.
        command: String,
        /// Its exit status, or why it did not finish.
        status: String,
        /// The last lines it wrote.
        output: String,
    },
    /// The chosen id is already used by an app.
    #[error("an app with id '{id}' already exists ({where_}); choose another with --id")]
    IdTaken {
        /// The id.
        id: String,
        /// Its folder or manifest.
        where_: String,
    },
    /// No installed app has this id.
    #[error("no app with id '{0}' was installed by mcpapp-gateway install here")]
    NotInstalled(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The secret store cannot be used.
    #[error("secret store {path}: {reason}")]
    Secrets {
        /// The store's file.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// The app did not start when probed after installing.
    #[error("the installed app '{id}' did not start: {reason}")]
    Probe {
        /// The app.
        id: String,
        /// Its error, with the last lines it wrote to stderr.
        reason: String,
    },
    /// A grant would expose what the app sandbox protects; the gateway would refuse the
    /// configuration, so nothing was written.
    #[error("grant {grant} is refused: {reason}")]
    GrantRefused {
        /// The grant, as `--grant` takes it.
        grant: String,
        /// The gateway's words: the setting, the value and why.
        reason: String,
    },
    /// Grants cannot be recorded in the configuration file.
    #[error("{path}: cannot record grants: {reason}")]
    GrantConfig {
        /// The configuration file.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// The operator declined at the consent prompt.
    #[error("cancelled; nothing was installed")]
    Declined,
    /// Something the installer does not support (yet), named.
    #[error("{0}")]
    Unsupported(String),
}

fn tail(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!(":\n{}", output.trim_end())
    }
}

impl InstallError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}
