//! The links to processes and endpoints: a child process's stdio, or a Streamable HTTP
//! session. Both implement `mcpapp_session::Link`: they carry whole JSON-RPC messages and tag
//! what they receive with where it arrived, so the session's one router serves both.

mod connector;
mod headers;
pub(crate) mod http;
mod json_stream;
pub(crate) mod stdio;
mod tool_headers;

use std::sync::Arc;

use mcpapp_session::{Link, LinkEvent, LinkEvents, LinkOpener};
use tokio::sync::mpsc;

use crate::launch::LaunchPlan;

pub(crate) use self::http::HttpSpec;

/// Why a link could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// The child process could not be started.
    #[error("cannot start '{program}': {source}")]
    Spawn {
        /// The program, as launched.
        program: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The HTTP client could not be built for the app's URL.
    #[error("cannot create an HTTP client: {0}")]
    Http(#[source] http::ConnectError),
}

/// Opens the link `plan` names, reporting on `events`: starts the child of a stdio app (and
/// returns its process id) or builds the client of an HTTP app (nothing is sent yet).
///
/// # Errors
/// Why the child could not be started or the client built, for the app's failure reason.
pub(crate) fn open(
    plan: LaunchPlan,
    events: LinkEvents,
) -> Result<(Arc<dyn Link>, Option<u32>), LinkError> {
    match plan {
        LaunchPlan::Stdio(spawn) => {
            let link = stdio::spawn(&spawn, events).map_err(|source| LinkError::Spawn {
                program: spawn.program.display().to_string(),
                source,
            })?;
            let pid = link.pid();
            Ok((Arc::new(link), Some(pid)))
        }
        LaunchPlan::Http(spec) => {
            let link = http::connect(spec, events).map_err(LinkError::Http)?;
            Ok((Arc::new(link), None))
        }
    }
}

/// Opens further links to an HTTP app's endpoint, for the legacy session of a dual-era app
/// (`mcpapp_session::LinkOpener`): the same URL and headers as the app's own link.
#[derive(Debug)]
pub(crate) struct HttpOpener {
    pub(crate) spec: HttpSpec,
}

impl LinkOpener for HttpOpener {
    fn open(&self) -> Result<(Arc<dyn Link>, mpsc::UnboundedReceiver<LinkEvent>), String> {
        let (events, events_rx) = mpsc::unbounded_channel();
        let link = http::connect(self.spec.clone(), events).map_err(|e| e.to_string())?;
        Ok((Arc::new(link), events_rx))
    }
}
