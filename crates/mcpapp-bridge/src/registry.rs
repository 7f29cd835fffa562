//! The [`ToolRegistry`]: tool sets registered by registration id, a deterministic winner per
//! tool name, collision reports, safe model names and a change counter.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use serde::Serialize;
use tokio::sync::watch;

use crate::error::RegistryError;
use crate::names::ModelNames;
use crate::tool::Tool;

/// Where a tool comes from. The registry prefers one source over another when two tools share
/// a name (see [`SourcePreference`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolSource {
    /// Tools that ship with the host.
    BuiltIn,
    /// Tools registered natively by the host, such as MCP app tools (`mcpapp:{appId}`).
    Native,
    /// Tools contributed by plugins.
    Plugin,
}

impl ToolSource {
    /// Every source, in the default preference order.
    pub const ALL: [ToolSource; 3] = [ToolSource::BuiltIn, ToolSource::Native, ToolSource::Plugin];
}

impl fmt::Display for ToolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolSource::BuiltIn => "built-in",
            ToolSource::Native => "native",
            ToolSource::Plugin => "plugin",
        })
    }
}

/// The order in which sources win a name, most preferred first. The default is built-in over
/// native over plugin; a host whose configuration prefers plugins (the original module's
/// `Plugins.Prefer`) can say so.
///
/// Extension point: given to [`ToolRegistryBuilder::preference`]; the gateway keeps the
/// default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcePreference([ToolSource; 3]);

impl SourcePreference {
    /// An order, most preferred first. Every source must appear exactly once.
    pub fn new(order: [ToolSource; 3]) -> Result<Self, RegistryError> {
        let all_present = ToolSource::ALL.iter().all(|s| order.contains(s));
        if all_present {
            Ok(Self(order))
        } else {
            Err(RegistryError::InvalidPreference { order })
        }
    }

    /// The order, most preferred first.
    pub fn order(&self) -> [ToolSource; 3] {
        self.0
    }

    /// The rank of a source: 0 is the most preferred.
    fn rank(&self, source: ToolSource) -> usize {
        self.0
            .iter()
            .position(|s| *s == source)
            .unwrap_or(self.0.len())
    }
}

impl Default for SourcePreference {
    fn default() -> Self {
        Self(ToolSource::ALL)
    }
}

/// A tool that won its name: what [`ToolRegistry::list`] and [`ToolRegistry::resolve`] return.
#[derive(Clone)]
#[non_exhaustive]
pub struct ToolEntry {
    /// The registered name (the tool's own name).
    pub name: String,
    /// The registration the tool belongs to, for example `mcpapp:grocery`.
    pub registration_id: String,
    /// Where the registration comes from.
    pub source: ToolSource,
    /// The tool.
    pub tool: Arc<dyn Tool>,
}

impl fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.name)
            .field("registration_id", &self.registration_id)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Why a collision went the way it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CollisionReason {
    /// The winner's source is preferred over the loser's.
    SourcePreference,
    /// Both have the same source; the winner's registration was registered first.
    RegistrationOrder,
    /// Both are in the same registration; the winner comes first in its tool list.
    SameRegistration,
}

impl fmt::Display for CollisionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CollisionReason::SourcePreference => "its source is preferred",
            CollisionReason::RegistrationOrder => "it was registered first",
            CollisionReason::SameRegistration => "it comes first in the same registration",
        })
    }
}

/// Two tools with the same name: one won, the other is not exposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CollisionReport {
    /// The contested name.
    pub name: String,
    /// The registration whose tool holds the name.
    pub winner: String,
    /// The winner's source.
    pub winner_source: ToolSource,
    /// The registration whose tool was left out.
    pub loser: String,
    /// The loser's source.
    pub loser_source: ToolSource,
    /// Why the winner won.
    pub reason: CollisionReason,
}

impl fmt::Display for CollisionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tool name '{}' is registered by '{}' ({}) and '{}' ({}); '{}' keeps it because {}",
            self.name,
            self.winner,
            self.winner_source,
            self.loser,
            self.loser_source,
            self.winner,
            self.reason
        )
    }
}

/// A consistent view of the registry at one version: the winning tools, their safe model
/// names and the collisions.
#[derive(Debug, Clone)]
pub struct RegistrySnapshot {
    version: u64,
    entries: Arc<[ToolEntry]>,
    model_names: Arc<ModelNames>,
    collisions: Arc<[CollisionReport]>,
}

impl RegistrySnapshot {
    /// The change counter this snapshot was taken at.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The winning tools, sorted by registered name.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }

    /// The tool holding `name`.
    pub fn resolve(&self, name: &str) -> Option<&ToolEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .and_then(|i| self.entries.get(i))
    }

    /// The tool behind a safe model name.
    pub fn resolve_model_name(&self, model_name: &str) -> Option<&ToolEntry> {
        self.model_names
            .from_model(model_name)
            .and_then(|name| self.resolve(name))
    }

    /// The safe model names of the winning tools.
    pub fn model_names(&self) -> &ModelNames {
        &self.model_names
    }

    /// The current collisions, sorted by name, then winner, then loser.
    pub fn collisions(&self) -> &[CollisionReport] {
        &self.collisions
    }
}

/// Builds a [`ToolRegistry`] with a [`SourcePreference`] other than the default
/// ([`ToolRegistry::new`]).
///
/// Extension point: for hosts that order tool sources otherwise.
#[derive(Debug, Default)]
pub struct ToolRegistryBuilder {
    preference: SourcePreference,
}

impl ToolRegistryBuilder {
    /// Sets the source preference (default: built-in over native over plugin).
    #[must_use]
    pub fn preference(mut self, preference: SourcePreference) -> Self {
        self.preference = preference;
        self
    }

    /// Builds the registry.
    pub fn build(self) -> ToolRegistry {
        let (changes, _) = watch::channel(0);
        ToolRegistry {
            inner: Arc::new(Inner {
                preference: self.preference,
                state: RwLock::new(State {
                    next_sequence: 0,
                    registrations: HashMap::new(),
                    warned: HashSet::new(),
                    snapshot: RegistrySnapshot {
                        version: 0,
                        entries: Arc::from(Vec::new()),
                        model_names: Arc::new(ModelNames::default()),
                        collisions: Arc::from(Vec::new()),
                    },
                }),
                changes,
            }),
        }
    }
}

/// The agent's tool registry (the original module's native plugin registry).
///
/// Tools are registered in sets under a registration id (`mcpapp:{appId}` for an MCP app).
/// Every tool of every registration is kept as a candidate for its name; for each name exactly
/// one candidate wins and is exposed:
///
/// 1. the candidate whose [`ToolSource`] is preferred ([`SourcePreference`]) wins;
/// 2. on equal sources, the candidate whose registration id was registered first wins (a
///    registration id keeps its first sequence number when it is registered again; after
///    [`unregister`](Self::unregister) it counts as new);
/// 3. within one registration, the tool listed first wins.
///
/// Losers are never silent: each is reported by [`collisions`](Self::collisions) and logged
/// when the collision appears: with `tracing::warn!` the first time this registry sees that
/// collision (that name, winner registration and loser registration), with `tracing::debug!`
/// when it appears again, as it does each time a restarting app's tools are withdrawn and
/// registered again. A registration forgets its collisions when it is unregistered, and those
/// of names it no longer offers when it registers a non-empty set; registering an empty set (a
/// stopped app) forgets nothing. When a winner goes away, the best remaining candidate takes
/// the name.
///
/// Every change that alters what consumers see (the winning tools' names, owners, sources,
/// descriptions and schemas, or the collisions) bumps a change counter that
/// [`subscribe`](Self::subscribe) publishes.
///
/// Cheap to clone; all clones share the same registry. Safe to use from any thread; no lock is
/// held across an `await`.
#[derive(Clone)]
pub struct ToolRegistry {
    inner: Arc<Inner>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("ToolRegistry")
            .field("preference", &self.inner.preference)
            .field("version", &snapshot.version)
            .field("tools", &snapshot.entries.len())
            .finish_non_exhaustive()
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

struct Inner {
    preference: SourcePreference,
    state: RwLock<State>,
    changes: watch::Sender<u64>,
}

struct State {
    next_sequence: u64,
    registrations: HashMap<String, Registration>,
    /// Every collision logged at WARN, so that one appearing again is logged at DEBUG. It only
    /// holds names offered by both registrations' last non-empty sets, so it is bounded by
    /// what the registrations can produce.
    warned: HashSet<CollisionKey>,
    /// The derived view, rebuilt on every change and handed out by cloning `Arc`s.
    snapshot: RegistrySnapshot,
}

/// What makes two collision reports the same collision: the name, the winner's registration
/// and the loser's registration.
type CollisionKey = (String, String, String);

fn collision_key(report: &CollisionReport) -> CollisionKey {
    (
        report.name.clone(),
        report.winner.clone(),
        report.loser.clone(),
    )
}

struct Registration {
    sequence: u64,
    source: ToolSource,
    tools: Vec<Arc<dyn Tool>>,
}

/// One registration's tools for [`ToolRegistry::register_all`]: its id, source and tools.
pub type ToolSet = (String, ToolSource, Vec<Arc<dyn Tool>>);

/// A candidate for a name, with the keys that order candidates.
struct Candidate<'a> {
    rank: usize,
    sequence: u64,
    position: usize,
    registration_id: &'a str,
    source: ToolSource,
    tool: &'a Arc<dyn Tool>,
}

impl ToolRegistry {
    /// An empty registry with the default source preference.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder, to choose the source preference.
    pub fn builder() -> ToolRegistryBuilder {
        ToolRegistryBuilder::default()
    }

    /// The source preference.
    pub fn preference(&self) -> SourcePreference {
        self.inner.preference
    }

    /// Registers a set of tools under `registration_id`, replacing, in one step, whatever that
    /// id had registered before.
    ///
    /// # Errors
    ///
    /// [`RegistryError::BlankRegistrationId`] if the id is blank and
    /// [`RegistryError::BlankToolName`] if a tool's name is blank; the registry is unchanged.
    pub fn register(
        &self,
        registration_id: impl Into<String>,
        source: ToolSource,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Result<(), RegistryError> {
        self.register_all(vec![(registration_id.into(), source, tools)])
    }

    /// Registers several sets at once, as [`register`](Self::register) would one after the
    /// other, but with one change for consumers (the counter moves at most once) and one
    /// rebuild of the view: with many registrations arriving together (apps starting), each
    /// rebuild covers every tool, so one per set made the whole quadratic.
    ///
    /// # Errors
    ///
    /// As [`register`](Self::register), for the first set that is refused; the registry is
    /// then unchanged.
    pub fn register_all(&self, registrations: Vec<ToolSet>) -> Result<(), RegistryError> {
        for (registration_id, _, tools) in &registrations {
            if registration_id.trim().is_empty() {
                return Err(RegistryError::BlankRegistrationId);
            }
            if let Some(index) = tools.iter().position(|t| t.name().trim().is_empty()) {
                return Err(RegistryError::BlankToolName {
                    registration_id: registration_id.clone(),
                    index,
                });
            }
        }
        self.update(|state| {
            for (registration_id, source, tools) in registrations {
                let sequence = match state.registrations.get(&registration_id) {
                    Some(existing) => existing.sequence,
                    None => {
                        let sequence = state.next_sequence;
                        state.next_sequence += 1;
                        sequence
                    }
                };
                tracing::debug!(
                    registration_id = %registration_id,
                    %source,
                    tools = tools.len(),
                    "registering tools"
                );
                if !tools.is_empty() {
                    // Names this registration no longer offers cannot collide through it any
                    // more.
                    state.warned.retain(|(name, winner, loser)| {
                        (*winner != registration_id && *loser != registration_id)
                            || tools.iter().any(|tool| tool.name() == name)
                    });
                }
                state.registrations.insert(
                    registration_id,
                    Registration {
                        sequence,
                        source,
                        tools,
                    },
                );
            }
        });
        Ok(())
    }

    /// Removes everything `registration_id` registered. Returns whether it was registered.
    pub fn unregister(&self, registration_id: &str) -> bool {
        let mut removed = false;
        self.update(|state| {
            removed = state.registrations.remove(registration_id).is_some();
            if removed {
                state.warned.retain(|(_, winner, loser)| {
                    winner != registration_id && loser != registration_id
                });
            }
        });
        if removed {
            tracing::debug!(registration_id, "unregistered tools");
        }
        removed
    }

    /// The registration ids, sorted.
    pub fn registration_ids(&self) -> Vec<String> {
        let state = self.read();
        let mut ids: Vec<String> = state.registrations.keys().cloned().collect();
        ids.sort_unstable();
        ids
    }

    /// The winning tools, sorted by registered name.
    pub fn list(&self) -> Vec<ToolEntry> {
        self.snapshot().entries.to_vec()
    }

    /// The tool holding `name`.
    pub fn resolve(&self, name: &str) -> Option<ToolEntry> {
        self.snapshot().resolve(name).cloned()
    }

    /// The current collisions, sorted by name, then winner, then loser.
    pub fn collisions(&self) -> Vec<CollisionReport> {
        self.snapshot().collisions.to_vec()
    }

    /// The safe model names of the winning tools.
    pub fn model_names(&self) -> Arc<ModelNames> {
        Arc::clone(&self.snapshot().model_names)
    }

    /// A consistent view of the current tools, names and collisions.
    pub fn snapshot(&self) -> RegistrySnapshot {
        self.read().snapshot.clone()
    }

    /// The change counter: 0 for a new registry, bumped by every effective change.
    pub fn version(&self) -> u64 {
        *self.inner.changes.borrow()
    }

    /// A receiver of the change counter, notified on every effective change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // A panic while holding the lock cannot leave `State` half-updated: the snapshot is
        // replaced in one assignment, so a poisoned lock is still consistent.
        self.inner
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change` and rebuilds the snapshot; bumps the counter if what consumers see
    /// changed.
    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut guard = self
            .inner
            .state
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Borrow the fields apart: the old snapshot is read while `warned` is updated.
        let state = &mut *guard;
        change(state);
        let (entries, collisions) = resolve_winners(&state.registrations, self.inner.preference);

        let old = &state.snapshot;
        let visible_change =
            !same_catalogue(&old.entries, &entries) || *old.collisions != *collisions;
        for report in &collisions {
            if old.collisions.contains(report) {
                continue;
            }
            if state.warned.insert(collision_key(report)) {
                tracing::warn!(
                    name = %report.name,
                    winner = %report.winner,
                    loser = %report.loser,
                    reason = ?report.reason,
                    "tool name collision: {report}"
                );
            } else {
                tracing::debug!(
                    name = %report.name,
                    winner = %report.winner,
                    loser = %report.loser,
                    reason = ?report.reason,
                    "tool name collision again: {report}"
                );
            }
        }

        let version = if visible_change {
            old.version + 1
        } else {
            old.version
        };
        let model_names = if visible_change {
            Arc::new(ModelNames::new(entries.iter().map(|e| e.name.as_str())))
        } else {
            Arc::clone(&old.model_names)
        };
        // The tools themselves are replaced even when nothing visible changed, so that calls
        // reach the newest implementation.
        state.snapshot = RegistrySnapshot {
            version,
            entries: Arc::from(entries),
            model_names,
            collisions: Arc::from(collisions),
        };
        drop(guard);
        if visible_change {
            self.inner.changes.send_replace(version);
        }
    }
}

/// Picks the winner of every name and reports the losers.
fn resolve_winners(
    registrations: &HashMap<String, Registration>,
    preference: SourcePreference,
) -> (Vec<ToolEntry>, Vec<CollisionReport>) {
    // One list of every candidate, sorted by name and then by what decides between them:
    // each name's candidates are then a run, winner first (one sort instead of a map of
    // lists; the registry does this for every tool on every change).
    let mut candidates: Vec<(&str, Candidate<'_>)> = Vec::new();
    for (registration_id, registration) in registrations {
        for (position, tool) in registration.tools.iter().enumerate() {
            candidates.push((
                tool.name(),
                Candidate {
                    rank: preference.rank(registration.source),
                    sequence: registration.sequence,
                    position,
                    registration_id,
                    source: registration.source,
                    tool,
                },
            ));
        }
    }
    candidates.sort_unstable_by(|(a, x), (b, y)| {
        a.cmp(b)
            .then_with(|| (x.rank, x.sequence, x.position).cmp(&(y.rank, y.sequence, y.position)))
    });

    let mut entries = Vec::new();
    let mut collisions = Vec::new();
    let mut rest = candidates.as_slice();
    while let Some(((name, winner), _)) = rest.split_first() {
        let run = rest.iter().take_while(|(n, _)| n == name).count();
        let (same, after) = rest.split_at(run);
        rest = after;
        for (_, loser) in &same[1..] {
            let reason = if loser.rank != winner.rank {
                CollisionReason::SourcePreference
            } else if loser.sequence != winner.sequence {
                CollisionReason::RegistrationOrder
            } else {
                CollisionReason::SameRegistration
            };
            collisions.push(CollisionReport {
                name: (*name).to_owned(),
                winner: winner.registration_id.to_owned(),
                winner_source: winner.source,
                loser: loser.registration_id.to_owned(),
                loser_source: loser.source,
                reason,
            });
        }
        entries.push(ToolEntry {
            name: (*name).to_owned(),
            registration_id: winner.registration_id.to_owned(),
            source: winner.source,
            tool: Arc::clone(winner.tool),
        });
    }
    collisions.sort_by(|a, b| (&a.name, &a.winner, &a.loser).cmp(&(&b.name, &b.winner, &b.loser)));
    (entries, collisions)
}

/// Whether two sorted entry lists look the same to consumers.
fn same_catalogue(old: &[ToolEntry], new: &[ToolEntry]) -> bool {
    old.len() == new.len()
        && old.iter().zip(new).all(|(a, b)| {
            a.name == b.name
                && a.registration_id == b.registration_id
                && a.source == b.source
                && a.tool.description() == b.tool.description()
                && a.tool.input_schema() == b.tool.input_schema()
                && a.tool.meta() == b.tool.meta()
        })
}
