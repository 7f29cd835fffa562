//! `--era`: which MCP protocol revisions the fixture speaks, and how a handler tells which era
//! the request in hand is served in.
//!
//! rmcp decides the era per request (a request whose `_meta` names 2026-07-28 is served that
//! way even on an initialized connection), so handlers ask [`served_modern`] every time rather
//! than remembering what the connection started as.

use std::borrow::Cow;

use clap::ValueEnum;
use rmcp::model::ProtocolVersion;
use rmcp::service::{RequestContext, RoleServer};

/// The protocol revisions the fixture accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Era {
    /// Every known version up to 2025-11-25: the `initialize` handshake, sessions and
    /// server-to-client requests.
    #[default]
    Legacy,
    /// Only 2026-07-28: no handshake, no sessions, input-required results.
    Modern,
    /// Every known version, each request served in its own era.
    Both,
}

impl Era {
    /// What `supported_protocol_versions` answers: it bounds `initialize` negotiation, is
    /// listed by `server/discover` and in `-32022` errors, and per-request versions are
    /// checked against it.
    pub(crate) fn supported_versions(self) -> Cow<'static, [ProtocolVersion]> {
        match self {
            Self::Legacy => {
                Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
            }
            Self::Modern => Cow::Borrowed(&[ProtocolVersion::V_2026_07_28]),
            Self::Both => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    /// The version put in `ServerConfig`. rmcp offers it back to an `initialize` whose
    /// requested version it cannot echo, unless it has no handshake: so the 2026-only server
    /// names 2026-07-28 there, which makes every `initialize` fail with `-32022` instead of
    /// agreeing to a version it does not support.
    pub(crate) fn config_version(self) -> ProtocolVersion {
        match self {
            Self::Legacy | Self::Both => ProtocolVersion::V_2025_11_25,
            Self::Modern => ProtocolVersion::V_2026_07_28,
        }
    }

    /// True if only 2026-07-28 is spoken.
    pub(crate) fn is_modern_only(self) -> bool {
        self == Self::Modern
    }
}

/// True if the request is served at 2026-07-28 or later: the version its `_meta` names, else
/// the one its connection negotiated (the rule rmcp itself applies).
pub(crate) fn served_modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}
