//! How an app is kept alive: restart backoff, crash-loop detection and health checks.

use std::time::Duration;

use mcpapp_manifest::SupervisionConfig;

/// The resolved supervision settings of one app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SupervisionPolicy {
    /// Restart after a failure.
    pub auto_restart: bool,
    /// Delay before the first restart; doubles with each failure in a row.
    pub restart_delay: Duration,
    /// Longest delay between restarts.
    pub max_restart_delay: Duration,
    /// More failures than this within `crash_loop_window` stop the restarts.
    pub crash_loop_failures: u32,
    /// The window for counting failures.
    pub crash_loop_window: Duration,
    /// Uptime after which the backoff starts over.
    pub stable_after: Duration,
    /// Interval between health pings; `None` turns them off.
    pub health_check_interval: Option<Duration>,
    /// Failed pings in a row that make the app fail.
    pub health_check_failures: u32,
    /// Time between SIGTERM and SIGKILL when stopping.
    pub shutdown_grace: Duration,
}

impl Default for SupervisionPolicy {
    /// 1 s doubling to 60 s, more than 5 failures in 5 minutes is a crash loop, 60 s of uptime
    /// resets the backoff, a ping every 30 s with 3 failures allowed, 5 s to stop.
    fn default() -> Self {
        Self {
            auto_restart: true,
            restart_delay: Duration::from_secs(1),
            max_restart_delay: Duration::from_secs(60),
            crash_loop_failures: 5,
            crash_loop_window: Duration::from_secs(300),
            stable_after: Duration::from_secs(60),
            health_check_interval: Some(Duration::from_secs(30)),
            health_check_failures: 3,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

impl SupervisionPolicy {
    /// Applies configuration over the defaults: an entry's settings win over the global ones.
    pub fn from_config(global: &SupervisionConfig, entry: Option<&SupervisionConfig>) -> Self {
        let d = Self::default();
        let pick =
            |f: fn(&SupervisionConfig) -> Option<u64>| entry.and_then(f).or_else(|| f(global));
        let pick_u32 =
            |f: fn(&SupervisionConfig) -> Option<u32>| entry.and_then(f).or_else(|| f(global));
        let auto_restart = entry
            .and_then(|e| e.auto_restart)
            .or(global.auto_restart)
            .unwrap_or(d.auto_restart);
        Self {
            auto_restart,
            restart_delay: pick(|c| c.restart_delay_ms)
                .map_or(d.restart_delay, Duration::from_millis),
            max_restart_delay: pick(|c| c.max_restart_delay_ms)
                .map_or(d.max_restart_delay, Duration::from_millis),
            crash_loop_failures: pick_u32(|c| c.crash_loop_failures)
                .unwrap_or(d.crash_loop_failures),
            crash_loop_window: pick(|c| c.crash_loop_window_seconds)
                .map_or(d.crash_loop_window, Duration::from_secs),
            stable_after: pick(|c| c.stable_after_seconds)
                .map_or(d.stable_after, Duration::from_secs),
            health_check_interval: match pick(|c| c.health_check_interval_ms) {
                Some(0) => None,
                Some(ms) => Some(Duration::from_millis(ms)),
                None => d.health_check_interval,
            },
            health_check_failures: pick_u32(|c| c.health_check_failures)
                .unwrap_or(d.health_check_failures)
                .max(1),
            shutdown_grace: pick(|c| c.shutdown_grace_ms)
                .map_or(d.shutdown_grace, Duration::from_millis),
        }
    }

    /// The delay before restart number `attempt` (1-based): the base delay doubled per
    /// attempt, capped, with up to ±10% jitter so that apps failing together do not restart in
    /// lockstep. Jitter never reorders consecutive delays below the cap.
    pub fn restart_delay(&self, attempt: u32, jitter_seed: u64) -> Duration {
        let doubling = 2u32.saturating_pow(attempt.saturating_sub(1).min(30));
        let base = self
            .restart_delay
            .saturating_mul(doubling)
            .min(self.max_restart_delay);
        // A cheap, well-spread value in [-0.1, 0.1] from the seed (splitmix64 finaliser).
        let mut z = jitter_seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let unit = (z % 2001) as f64 / 1000.0 - 1.0;
        let factor = 1.0 + unit * 0.1;
        base.mul_f64(factor).min(self.max_restart_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_with_bounded_jitter() {
        let policy = SupervisionPolicy::default();
        for seed in [0, 1, 42, u64::MAX] {
            let delays: Vec<Duration> = (1..=10)
                .map(|a| policy.restart_delay(a, seed.wrapping_add(u64::from(a))))
                .collect();
            // Below the cap (1, 2, 4 ... 32 s) jitter cannot reorder them.
            for pair in delays[..6].windows(2) {
                assert!(pair[1] > pair[0], "{delays:?}");
            }
            for capped in &delays[6..] {
                assert!(*capped >= Duration::from_secs(54), "{delays:?}");
            }
            assert!(
                delays[0] >= Duration::from_millis(900) && delays[0] <= Duration::from_millis(1100)
            );
            assert!(delays[9] <= Duration::from_secs(60));
        }
    }

    #[test]
    fn entries_override_global_settings() {
        let global = SupervisionConfig {
            restart_delay_ms: Some(10),
            health_check_interval_ms: Some(0),
            ..Default::default()
        };
        let entry = SupervisionConfig {
            restart_delay_ms: Some(20),
            auto_restart: Some(false),
            ..Default::default()
        };
        let p = SupervisionPolicy::from_config(&global, Some(&entry));
        assert_eq!(p.restart_delay, Duration::from_millis(20));
        assert!(!p.auto_restart);
        assert_eq!(p.health_check_interval, None);
        assert_eq!(p.crash_loop_failures, 5);
        let p = SupervisionPolicy::from_config(&global, None);
        assert_eq!(p.restart_delay, Duration::from_millis(10));
        assert!(p.auto_restart);
    }
}
