//! Per-port state on the shared upstream session: who each port is (its era and declared
//! capabilities), its requests in flight, and its log level.
//!
//! Log levels: `logging/setLevel` is kept per port; upstream the level is the most verbose any
//! port asked for, and each port receives session-wide log messages at its own level or above
//! (a port that never set one receives what the server sends).

use std::collections::HashMap;

use mcpapp_manifest::Era;
use serde_json::value::RawValue;

use super::ids::{Key, PortId};
use super::{Router, empty_result, string_at};
use crate::raw::RawMessage;

/// Capabilities a port declared: in its `initialize` (legacy) or in its request (modern).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PortCapabilities {
    /// The port can answer `elicitation/create`.
    pub(crate) elicitation: bool,
    /// The port can answer `sampling/createMessage`.
    pub(crate) sampling: bool,
    /// The port can answer `roots/list`.
    pub(crate) roots: bool,
}

impl PortCapabilities {
    /// Reads a `ClientCapabilities` object.
    pub(crate) fn from_json(capabilities: Option<&RawValue>) -> Self {
        let value: serde_json::Value = capabilities
            .and_then(|c| serde_json::from_str(c.get()).ok())
            .unwrap_or_default();
        let declared = |name: &str| value.get(name).is_some_and(|v| !v.is_null());
        Self {
            elicitation: declared("elicitation"),
            sampling: declared("sampling"),
            roots: declared("roots"),
        }
    }

    /// Whether the port may be sent a server request of `method`.
    pub(crate) fn allows(self, method: &str) -> bool {
        match method {
            "elicitation/create" => self.elicitation,
            "sampling/createMessage" => self.sampling,
            "roots/list" => self.roots,
            _ => false,
        }
    }
}

/// Who a port is: its era, and for a legacy port what its `initialize` declared (sent on its
/// behalf to a modern upstream).
#[derive(Debug, Clone, Default)]
pub(crate) struct PortSpec {
    pub(crate) era: Era,
    pub(crate) capabilities: PortCapabilities,
    pub(crate) client_capabilities: Option<Box<RawValue>>,
    pub(crate) client_info: Option<Box<RawValue>>,
}

/// MCP log levels, least severe first (RFC 5424 severities).
pub(crate) const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A level's rank in [`LEVELS`] (0 is the most verbose).
pub(crate) fn level_rank(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level)
}

/// Whether a message at `rank` reaches a listener that asked for `wanted` (one that asked for
/// nothing hears everything, and so does a message of an unknown level).
pub(crate) fn heard_at(wanted: Option<usize>, rank: Option<usize>) -> bool {
    match (wanted, rank) {
        (Some(wanted), Some(rank)) => rank >= wanted,
        _ => true,
    }
}

/// One open port.
#[derive(Debug, Default)]
pub(crate) struct PortEntry {
    pub(crate) spec: PortSpec,
    /// Upstream keys of requests in flight, oldest first.
    pub(crate) in_flight: Vec<Key>,
    /// The log level this port asked for (`logging/setLevel`), as a rank in [`LEVELS`].
    pub(crate) level: Option<usize>,
}

/// The open ports, and the log level last asked of a legacy server on their behalf.
#[derive(Debug, Default)]
pub(crate) struct Ports {
    entries: HashMap<PortId, PortEntry>,
    /// The level last asked of the server, as a rank in [`LEVELS`].
    upstream_level: Option<usize>,
}

impl Ports {
    pub(crate) fn open(&mut self, port: PortId, spec: PortSpec) {
        self.entries.insert(
            port,
            PortEntry {
                spec,
                in_flight: Vec::new(),
                level: None,
            },
        );
    }

    pub(crate) fn remove(&mut self, port: PortId) -> Option<PortEntry> {
        self.entries.remove(&port)
    }

    pub(crate) fn get(&self, port: PortId) -> Option<&PortEntry> {
        self.entries.get(&port)
    }

    /// A port's era (legacy for a port that is not open).
    pub(crate) fn era(&self, port: PortId) -> Era {
        self.entries.get(&port).map_or(Era::Legacy, |e| e.spec.era)
    }

    /// Whether `port` declared the capability to answer `method`.
    pub(crate) fn allows(&self, port: PortId, method: &str) -> bool {
        self.entries
            .get(&port)
            .is_some_and(|entry| entry.spec.capabilities.allows(method))
    }

    /// A port's requests in flight, oldest first (none for a port that is not open).
    pub(crate) fn in_flight(&self, port: PortId) -> &[Key] {
        self.entries
            .get(&port)
            .map_or(&[], |entry| entry.in_flight.as_slice())
    }

    pub(crate) fn add_in_flight(&mut self, port: PortId, key: Key) {
        if let Some(entry) = self.entries.get_mut(&port) {
            entry.in_flight.push(key);
        }
    }

    pub(crate) fn remove_in_flight(&mut self, port: PortId, key: &Key) {
        if let Some(entry) = self.entries.get_mut(&port) {
            entry.in_flight.retain(|k| k != key);
        }
    }

    /// A request of `port` now goes upstream as `new` (keeping its place).
    pub(crate) fn replace_in_flight(&mut self, port: PortId, old: &Key, new: &Key) {
        if let Some(entry) = self.entries.get_mut(&port) {
            for k in &mut entry.in_flight {
                if k == old {
                    k.clone_from(new);
                }
            }
        }
    }

    /// Records the level `port` asked for.
    pub(crate) fn set_level(&mut self, port: PortId, rank: usize) {
        if let Some(entry) = self.entries.get_mut(&port) {
            entry.level = Some(rank);
        }
    }

    /// The level `port` asked for, by name.
    pub(crate) fn level_name(&self, port: PortId) -> Option<&'static str> {
        self.entries
            .get(&port)
            .and_then(|e| e.level)
            .map(|rank| LEVELS[rank])
    }

    /// The most verbose level any port asked for.
    fn wanted_level(&self) -> Option<usize> {
        self.entries.values().filter_map(|entry| entry.level).min()
    }

    /// After `port` asked a legacy server for `rank`: whether the request goes upstream (it
    /// makes the server more verbose than it is) or is answered here (the server already
    /// sends enough, or another port wants more).
    pub(crate) fn level_goes_upstream(&mut self, rank: usize) -> bool {
        let wanted = self.wanted_level();
        if wanted == self.upstream_level {
            return false;
        }
        self.upstream_level = wanted;
        wanted == Some(rank)
    }

    /// After a port left: the level to ask a legacy server for now, when it differs from the
    /// last one asked (a less verbose level may do).
    pub(crate) fn settle_level(&mut self) -> Option<&'static str> {
        let rank = self.wanted_level()?;
        if Some(rank) == self.upstream_level {
            return None;
        }
        self.upstream_level = Some(rank);
        Some(LEVELS[rank])
    }

    /// Rule 2 for server requests: where the wire does not say what caused one, the one port
    /// with requests in flight that declared the capability (its newest request); none or
    /// several cannot be told apart.
    pub(crate) fn sole_capable(&self, method: &str) -> Result<(PortId, Key), String> {
        let mut candidates = self.entries.iter().filter(|(_, entry)| {
            !entry.in_flight.is_empty() && entry.spec.capabilities.allows(method)
        });
        let Some((port, entry)) = candidates.next() else {
            return Err(
                "no client session that declared the capability for it has a request in flight"
                    .to_owned(),
            );
        };
        if candidates.next().is_some() {
            return Err(
                "several client sessions that declared the capability have requests in flight, and the server did not say which one it is for"
                    .to_owned(),
            );
        }
        entry
            .in_flight
            .last()
            .map(|key| (*port, key.clone()))
            .ok_or_else(|| "the session's request has ended".to_owned())
    }

    /// The legacy ports that `wants` a session notification, in port order (modern ports have
    /// no session stream; they hear what they listen for).
    pub(crate) fn legacy_listeners(&self, wants: impl Fn(&PortEntry) -> bool) -> Vec<PortId> {
        let mut ports: Vec<PortId> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.spec.era == Era::Legacy && wants(entry))
            .map(|(port, _)| *port)
            .collect();
        ports.sort_unstable();
        ports
    }

    /// How many ports are open, and how many requests they have in flight in all.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        let in_flight = self.entries.values().map(|e| e.in_flight.len()).sum();
        (self.entries.len(), in_flight)
    }
}

impl Router {
    /// A port's `logging/setLevel`: kept for the port; upstream (`Ok(None)`) only when it
    /// makes a legacy server more verbose than it is, else answered here. (A modern server
    /// has no session level: the port's level goes with each of its requests.)
    pub(super) fn set_level(
        &mut self,
        port: PortId,
        message: &RawMessage,
        id: &RawValue,
    ) -> Result<Option<String>, RawMessage> {
        let Some(rank) = string_at(message, &["params", "level"])
            .as_deref()
            .and_then(level_rank)
        else {
            // Unknown levels go upstream, which answers them as it sees fit.
            return Ok(None);
        };
        self.ports.set_level(port, rank);
        if self.upstream_era == Era::Modern || !self.ports.level_goes_upstream(rank) {
            return Err(empty_result(id));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::raw::raw_json;
    use crate::router::{Accepted, Origin};

    fn caps(elicitation: bool) -> PortSpec {
        PortSpec {
            capabilities: PortCapabilities {
                elicitation,
                ..PortCapabilities::default()
            },
            ..PortSpec::default()
        }
    }

    #[test]
    fn capabilities_are_declared_by_any_non_null_member() {
        let read = |text: &str| PortCapabilities::from_json(Some(&raw_json(text.to_owned())));
        let c = read(r#"{"elicitation":{},"sampling":null,"roots":{"listChanged":true}}"#);
        assert!(c.allows("elicitation/create"));
        assert!(!c.allows("sampling/createMessage"));
        assert!(c.allows("roots/list"));
        assert!(!c.allows("ping"));
        assert_eq!(
            PortCapabilities::from_json(None),
            PortCapabilities::default()
        );
        assert_eq!(read("[1]"), PortCapabilities::default());
    }

    #[test]
    fn in_flight_requests_are_kept_in_order_and_replaced_in_place() {
        let mut ports = Ports::default();
        ports.open(1, PortSpec::default());
        for k in ["a", "b", "c"] {
            ports.add_in_flight(1, k.to_owned());
        }
        ports.replace_in_flight(1, &"b".to_owned(), &"b2".to_owned());
        ports.remove_in_flight(1, &"a".to_owned());
        assert_eq!(ports.in_flight(1), ["b2", "c"]);
        assert_eq!(ports.sizes(), (1, 2));
        // A port that is not open has nothing, and takes nothing.
        ports.add_in_flight(9, "x".to_owned());
        assert!(ports.in_flight(9).is_empty());
        assert_eq!(ports.era(9), Era::Legacy);
        assert!(ports.remove(1).is_some());
        assert_eq!(ports.sizes(), (0, 0));
    }

    #[test]
    fn the_upstream_level_is_the_most_verbose_asked_for() {
        let mut ports = Ports::default();
        for port in 1..=2 {
            ports.open(port, PortSpec::default());
        }
        let error = level_rank("error").unwrap();
        let debug = level_rank("debug").unwrap();
        ports.set_level(1, error);
        assert!(ports.level_goes_upstream(error));
        ports.set_level(2, debug);
        assert!(ports.level_goes_upstream(debug));
        // Port 1 asks for less than debug: the server already sends it.
        ports.set_level(1, level_rank("warning").unwrap());
        assert!(!ports.level_goes_upstream(level_rank("warning").unwrap()));
        assert_eq!(ports.level_name(1), Some("warning"));
        // The verbose port leaves: warnings will do.
        ports.remove(2);
        assert_eq!(ports.settle_level(), Some("warning"));
        assert_eq!(ports.settle_level(), None);
        // Nobody left with a level: the server keeps the last one.
        ports.remove(1);
        assert_eq!(ports.settle_level(), None);
    }

    #[test]
    fn log_messages_are_heard_at_the_level_asked_for_or_above() {
        let warning = level_rank("warning");
        assert!(heard_at(warning, level_rank("error")));
        assert!(heard_at(warning, warning));
        assert!(!heard_at(warning, level_rank("info")));
        assert!(heard_at(None, level_rank("debug")));
        assert!(heard_at(warning, None));
    }

    #[test]
    fn the_sole_capable_busy_port_is_found_and_several_are_not_told_apart() {
        let mut ports = Ports::default();
        ports.open(1, caps(true));
        ports.open(2, caps(false));
        let err = ports.sole_capable("elicitation/create").unwrap_err();
        assert!(err.contains("has a request in flight"), "{err}");
        ports.add_in_flight(1, "k1".to_owned());
        ports.add_in_flight(1, "k2".to_owned());
        ports.add_in_flight(2, "k3".to_owned());
        assert_eq!(
            ports.sole_capable("elicitation/create"),
            Ok((1, "k2".to_owned()))
        );
        assert!(ports.sole_capable("sampling/createMessage").is_err());
        ports.open(3, caps(true));
        ports.add_in_flight(3, "k4".to_owned());
        let err = ports.sole_capable("elicitation/create").unwrap_err();
        assert!(err.contains("several client sessions"), "{err}");
    }

    #[test]
    fn session_notifications_go_to_legacy_ports_in_order() {
        let mut ports = Ports::default();
        for port in [3, 1, 2] {
            ports.open(port, PortSpec::default());
        }
        ports.open(
            4,
            PortSpec {
                era: Era::Modern,
                ..PortSpec::default()
            },
        );
        assert_eq!(ports.legacy_listeners(|_| true), [1, 2, 3]);
        ports.set_level(2, 4);
        assert_eq!(ports.legacy_listeners(|e| e.level.is_none()), [1, 3]);
    }

    #[test]
    fn log_levels_are_kept_per_port() {
        let mut r = Router::default();
        r.open_port(1, legacy(PortCapabilities::default()));
        r.open_port(2, legacy(PortCapabilities::default()));
        r.open_port(3, legacy(PortCapabilities::default()));
        let set = |level: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{{"level":"{level}"}}}}"#
            ))
        };
        // Port 1 wants errors: upstream is asked for errors.
        let (_, d) = r
            .port_request(1, set("error"))
            .map(Accepted::into_parts)
            .unwrap();
        assert!(upstream_text(&d)[0].contains(r#""level":"error""#));
        // Port 2 wants debug: more verbose, upstream again.
        let (_, d) = r
            .port_request(2, set("debug"))
            .map(Accepted::into_parts)
            .unwrap();
        assert!(upstream_text(&d)[0].contains(r#""level":"debug""#));
        // Port 1 again, warnings: upstream already sends more, answered here.
        assert!(r.port_request(1, set("warning")).is_err());
        let log = |level: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"{level}","data":"x"}}}}"#
            ))
        };
        assert_eq!(ports_of(&r.upstream(log("info"), &Origin::Get)), [2, 3]);
        assert_eq!(ports_of(&r.upstream(log("error"), &Origin::Get)), [1, 2, 3]);
        // The verbose port leaves: upstream goes back to what the rest want.
        let d = r.close_port(2, "gone");
        assert!(
            upstream_text(&d)
                .iter()
                .any(|t| t.contains("logging/setLevel") && t.contains("warning")),
            "{d:?}"
        );
    }
}
