//! Lifecycle states and the install state of an app, shared by discovery, the supervisor and
//! the host endpoints.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

use crate::manifest::McpAppManifest;

/// Where an app is in its life. The numeric values are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[repr(u8)]
pub enum Lifecycle {
    /// The manifest was found; not yet validated (invalid apps stay here).
    Discovered = 0,
    /// The manifest is valid and the app is allowed to run.
    Validated = 1,
    /// A connection is being made (the name is the original module's).
    Loaded = 2,
    /// Connected and enumerated; its tools are available.
    Running = 3,
    /// Stopped on request.
    Stopped = 4,
    /// Connecting failed or the connection died; `lastError` says why.
    Failed = 5,
    /// Switched off by configuration (an entry, the deny list or the allow list).
    Disabled = 6,
    /// An HTTP app protected by OAuth waits for the user to connect it at its authorization
    /// server ("Connect" in the page, `mcpapp-gateway apps authorize`); it is not restarted
    /// meanwhile and its tools are absent.
    NeedsAuthorization = 7,
}

impl Lifecycle {
    /// All states, in numeric order.
    pub const ALL: [Lifecycle; 8] = [
        Self::Discovered,
        Self::Validated,
        Self::Loaded,
        Self::Running,
        Self::Stopped,
        Self::Failed,
        Self::Disabled,
        Self::NeedsAuthorization,
    ];

    /// The state's name, as shown in JSON and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Discovered => "Discovered",
            Self::Validated => "Validated",
            Self::Loaded => "Loaded",
            Self::Running => "Running",
            Self::Stopped => "Stopped",
            Self::Failed => "Failed",
            Self::Disabled => "Disabled",
            Self::NeedsAuthorization => "NeedsAuthorization",
        }
    }

    /// Whether the app has come to rest: running, failed, stopped, disabled, waiting for the
    /// user to authorize it, or invalid (still `Discovered` after validation).
    pub fn is_settled(self) -> bool {
        !matches!(self, Self::Validated | Self::Loaded)
    }
}

impl fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point in time, shown as an RFC 3339 UTC timestamp with milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(SystemTime);

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Self(SystemTime::now())
    }

    /// Wraps a system time.
    pub fn from_system_time(time: SystemTime) -> Self {
        Self(time)
    }

    /// The wrapped system time.
    pub fn system_time(self) -> SystemTime {
        self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Times before 1970 do not occur for events of a running gateway; show them as the
        // epoch rather than failing.
        let since_epoch = self.0.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let secs = since_epoch.as_secs();
        let millis = since_epoch.subsec_millis();
        let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
        let rem = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day); Howard
/// Hinnant's well-known `civil_from_days` algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// What is known about one discovered app: its effective manifest, where it was found, whether
/// it is valid, and where it is in its lifecycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallState {
    /// The effective manifest (entry overrides applied).
    pub manifest: McpAppManifest,
    /// The manifest file.
    pub manifest_path: PathBuf,
    /// The folder holding the manifest (the app's folder).
    pub root_path: PathBuf,
    /// Whether the manifest passed validation.
    pub is_valid: bool,
    /// Why the app cannot run: validation errors, or why configuration disabled it.
    pub validation_errors: Vec<String>,
    /// Problems that do not stop the app (unknown fields, an older protocol version, ...).
    pub warnings: Vec<String>,
    /// Where the app is in its life.
    pub lifecycle: Lifecycle,
    /// When the manifest was found.
    pub discovered_at: Timestamp,
    /// When `lifecycle` last changed.
    pub state_changed_at: Timestamp,
    /// Why the app last failed, if it did.
    pub last_error: Option<String>,
    /// Tools found on the last successful enumeration.
    pub tool_count: usize,
    /// Resources found on the last successful enumeration.
    pub resource_count: usize,
    /// Resource templates found on the last successful enumeration.
    pub resource_template_count: usize,
    /// Prompts found on the last successful enumeration.
    pub prompt_count: usize,
}

impl InstallState {
    /// A fresh state: valid, `Discovered`, no errors, zero counts, both timestamps now.
    pub fn new(manifest: McpAppManifest, manifest_path: PathBuf, root_path: PathBuf) -> Self {
        let now = Timestamp::now();
        Self {
            manifest,
            manifest_path,
            root_path,
            is_valid: true,
            validation_errors: Vec::new(),
            warnings: Vec::new(),
            lifecycle: Lifecycle::Discovered,
            discovered_at: now,
            state_changed_at: now,
            last_error: None,
            tool_count: 0,
            resource_count: 0,
            resource_template_count: 0,
            prompt_count: 0,
        }
    }

    /// The app id, or an empty string when the manifest has none.
    pub fn id(&self) -> &str {
        self.manifest.id.as_deref().unwrap_or_default()
    }

    /// Moves to `lifecycle` now.
    pub fn transition(&mut self, lifecycle: Lifecycle) {
        self.transition_at(lifecycle, Timestamp::now());
    }

    /// Moves to `lifecycle` at the given time.
    pub fn transition_at(&mut self, lifecycle: Lifecycle, at: Timestamp) {
        self.lifecycle = lifecycle;
        self.state_changed_at = at;
    }

    /// Marks the app invalid with one more reason; it stays `Discovered`.
    pub fn invalidate(&mut self, reason: impl Into<String>) {
        self.is_valid = false;
        self.validation_errors.push(reason.into());
    }

    /// Disables the app with the reason recorded beside any validation errors.
    pub fn disable(&mut self, reason: impl Into<String>) {
        self.validation_errors.push(reason.into());
        self.transition(Lifecycle::Disabled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_render_as_rfc3339() {
        let t = Timestamp::from_system_time(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        assert_eq!(t.to_string(), "2023-11-14T22:13:20.123Z");
        let leap = Timestamp::from_system_time(UNIX_EPOCH + Duration::from_secs(951_782_400));
        assert_eq!(leap.to_string(), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            Timestamp::from_system_time(UNIX_EPOCH).to_string(),
            "1970-01-01T00:00:00.000Z"
        );
    }
}
