//! Errors and findings produced while reading manifests and configuration text.

use std::fmt;

use serde::Serialize;

use crate::document::Position;
use crate::quote::quoted;

/// Why a manifest or configuration text could not be read at all.
///
/// A parse error means the document is unusable; problems that leave it usable are
/// [`Finding`]s instead (unknown fields) or [`ValidationError`](crate::ValidationError)s
/// (missing command, bad id, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The text is not well-formed JSON (comments and trailing commas are allowed).
    #[error("line {}, column {}: {message}", position.line, position.column)]
    Syntax {
        /// Where the parser stopped.
        position: Position,
        /// What the parser expected or found.
        message: String,
    },
    /// The text holds no JSON value at all (it is empty or only comments).
    #[error("the document is empty")]
    Empty,
    /// The top-level value is not a JSON object.
    #[error("line {}, column {}: expected a JSON object at the top level", position.line, position.column)]
    NotAnObject {
        /// Where the top-level value starts.
        position: Position,
    },
    /// A field has the wrong JSON type, such as the string `"10"` where a number belongs.
    #[error("{}field {}: {message}", position.map(|p| format!("line {}, column {}: ", p.line, p.column)).unwrap_or_default(), quoted(.field, '`'))]
    Type {
        /// Dotted path of the field, e.g. `startupTimeoutSeconds` or `Entries.app.Enabled`.
        field: String,
        /// Where the offending value is written, when known.
        position: Option<Position>,
        /// What serde expected, shortened when it quotes a long value.
        message: String,
    },
}

impl ParseError {
    /// Where in the text the problem is, when known.
    pub fn position(&self) -> Option<Position> {
        match self {
            Self::Syntax { position, .. } | Self::NotAnObject { position } => Some(*position),
            Self::Type { position, .. } => *position,
            Self::Empty => None,
        }
    }

    /// The message without its position, for output formats that print the position apart
    /// (`path:line:col: error: message`).
    pub fn detail(&self) -> String {
        match self {
            Self::Syntax { message, .. } => message.clone(),
            Self::Empty => "the document is empty".to_owned(),
            Self::NotAnObject { .. } => "expected a JSON object at the top level".to_owned(),
            Self::Type { field, message, .. } => {
                format!("field {}: {message}", quoted(field, '`'))
            }
        }
    }
}

/// How serious a [`Finding`] or diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing only when looking for trouble (a discovery path that does not exist).
    Debug,
    /// Informational (an app switched off by configuration).
    Info,
    /// Something is probably wrong but the document is still used (an unknown field).
    Warning,
    /// The document, or the app it describes, cannot be used.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        })
    }
}

/// A problem found in a document that did not stop it from being read, such as an unknown
/// field, with its place in the text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// Where it is, when known.
    pub position: Option<Position>,
    /// What it is, in one sentence without a trailing period.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(p) => write!(f, "line {}, column {}: {}", p.line, p.column, self.message),
            None => f.write_str(&self.message),
        }
    }
}
