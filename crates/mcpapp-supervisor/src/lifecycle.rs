//! The lifecycle of one supervised app as a pure state machine.
//!
//! [`Machine`] is told what happened ([`Event`]) and when, and answers with [`Decision`]s
//! that the app's task (`app/task.rs`) carries out in order: connecting, closing connections,
//! lifecycle transitions, the restart timer, health pings. It owns the restart policy and
//! nothing else: it reads no clock (the current `Instant` is an argument, the jitter seed a
//! constructor argument), holds no channel and starts no process, so every rule below is
//! tested on its own.
//!
//! An app is in one of four phases: *idle* (stopped or failed, waiting for a command),
//! *starting* (a start attempt is in flight), *running*, or *backing off* (a restart timer is
//! armed). Rules:
//! - A *failure* is a start attempt that fails, a connection that closes, or
//!   `health_check_failures` failed pings in a row. A run of at least `stable_after` before it
//!   starts the attempt number over. More than `crash_loop_failures` failures within
//!   `crash_loop_window` leave the app `Failed` in a crash loop with nothing scheduled;
//!   otherwise it is `Failed` and, with `auto_restart`, restarted after
//!   `restart_delay(attempt)` (doubling, capped, jittered).
//! - `Start` starts an idle app and pulls a scheduled restart forward; `Restart` also
//!   reconnects a starting or running app. Both forget the failure history, and from idle they
//!   end a crash loop. `Stop` drops whatever is in flight and leaves the app `Stopped`.
//! - `Reconfigure` adopts the new settings; unless the app is idle it reconnects at once with
//!   a fresh failure history.
//! - `Shutdown` drops whatever is in flight, moves a non-idle app to `Stopped`, acknowledges
//!   and ends; nothing is decided after that.
//! - Restarts are counted when the app leaves a backoff for a new start (whatever made it
//!   leave early) and when a running app is restarted by hand.
//! - Events that no longer apply (a late start result after a stop, a stray timer) are
//!   ignored.
//! - An HTTP app protected by OAuth whose authorization server waits for the user
//!   (`NeedsAuthorization`, during a start or while running, a health ping included) drops
//!   what it has in flight and *waits*: `NeedsAuthorization`, no failure, no restart, no
//!   crash-loop count. Being authorized starts it. An authorization that cannot go on without
//!   the operator (OAuth refused by its entry, no usable metadata) leaves it `Failed` with
//!   the reason and nothing scheduled: restarting would only meet the same answer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mcpapp_manifest::Lifecycle;

use crate::policy::SupervisionPolicy;

/// The reason of a stop by command.
pub(crate) const STOPPED_ON_REQUEST: &str = "stopped on request";
/// The reason of the stop that precedes a restart by command.
pub(crate) const RESTARTING_ON_REQUEST: &str = "restarting on request";
/// The reason of the stop that precedes a restart with a new configuration.
pub(crate) const RECONFIGURED: &str = "restarting with a changed configuration";
/// The reason of the stop at shutdown.
pub(crate) const SHUTTING_DOWN: &str = "the gateway is shutting down";

/// Grace given to a connection that has already failed: its process is gone or unresponsive,
/// so there is nothing to wait for beyond letting a dying process finish writing.
pub(crate) const FAILED_GRACE: Duration = Duration::from_millis(200);

/// Something that happened to an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// Start the app (also how its task begins).
    Start,
    /// Stop it; it stays stopped until started.
    Stop,
    /// Stop it and start it again with a fresh failure history.
    Restart,
    /// The app's configuration changed; these are its new settings.
    Reconfigure(SupervisionPolicy),
    /// The gateway shuts down: stop and end.
    Shutdown,
    /// The start attempt in flight connected (handshake and first listing done).
    Started,
    /// The start attempt in flight failed; the reason is for people.
    StartFailed(String),
    /// The running connection closed; the reason is for people.
    Closed(String),
    /// The health interval elapsed.
    HealthTick,
    /// The health ping in flight was answered.
    PingOk,
    /// The health ping in flight failed; the error is for people.
    PingFailed(String),
    /// The restart timer went off.
    TimerFired,
    /// The app's authorization server waits for the user to connect it (the issuer).
    NeedsAuthorization(String),
    /// The app was authorized (its tokens are ready).
    Authorized,
    /// Authorizing the app cannot go on without the operator; the reason is for people.
    AuthorizationFailed(String),
}

/// What the task must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Begin a start attempt (launch or connect, handshake, first listing) with the current
    /// configuration; its outcome comes back as [`Event::Started`] or [`Event::StartFailed`].
    Connect,
    /// Give up the start attempt in flight; dropping it kills whatever it started.
    AbandonStart,
    /// Make the connection that just started the one every handle uses.
    UseConnection,
    /// Ping the running connection every `every`, reporting [`Event::HealthTick`]s.
    WatchHealth { every: Duration },
    /// Send one health ping; its outcome comes back as [`Event::PingOk`] or
    /// [`Event::PingFailed`].
    Ping,
    /// Stop using the current connection and close it, giving the app `grace` to exit.
    Disconnect { grace: Duration },
    /// Move to `to`; for `Failed` the reason becomes the last error.
    Transition {
        to: Lifecycle,
        reason: Option<String>,
    },
    /// Arm the restart timer for `at` (`delay` from now) and announce restart `attempt`.
    ScheduleRestart {
        at: Instant,
        delay: Duration,
        attempt: u32,
    },
    /// Disarm the restart timer and forget when it was due.
    CancelTimer,
    /// Count one more restart.
    CountRestart,
    /// Set or clear the crash-loop flag.
    CrashLoop(bool),
    /// Apply the configuration that came with the [`Event::Reconfigure`] being handled.
    ApplyConfiguration,
    /// Tell whoever asked for the shutdown that the app has stopped.
    AcknowledgeShutdown,
    /// End the task.
    Exit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Starting,
    Running {
        since: Instant,
        ping_in_flight: bool,
        failed_pings: u32,
    },
    Backoff,
    /// Waiting for the user to authorize the app: nothing in flight, nothing scheduled.
    Waiting,
    Ended,
}

/// The lifecycle and restart bookkeeping of one app.
#[derive(Debug)]
pub(crate) struct Machine {
    policy: SupervisionPolicy,
    phase: Phase,
    /// Failures in a row since the last stable run or manual recovery (1-based once failed).
    attempt: u32,
    /// When recent failures happened, oldest first, pruned to the crash-loop window.
    failures: VecDeque<Instant>,
    crash_loop: bool,
    jitter_seed: u64,
    /// Delays drawn so far, so that each draws a different jitter value.
    draws: u64,
}

impl Machine {
    /// A machine for an idle app; feed it [`Event::Start`] to start the app. `jitter_seed`
    /// spreads the restart delays of apps that fail together.
    pub(crate) fn new(policy: SupervisionPolicy, jitter_seed: u64) -> Self {
        Self {
            policy,
            phase: Phase::Idle,
            attempt: 0,
            failures: VecDeque::new(),
            crash_loop: false,
            jitter_seed,
            draws: 0,
        }
    }

    /// Failed pings in a row on the running connection (0 when not running).
    pub(crate) fn failed_pings(&self) -> u32 {
        match self.phase {
            Phase::Running { failed_pings, .. } => failed_pings,
            _ => 0,
        }
    }

    /// Handles one event that happened at `now`.
    pub(crate) fn handle(&mut self, event: Event, now: Instant) -> Vec<Decision> {
        let mut out = Vec::new();
        match (self.phase, event) {
            (Phase::Ended, _) => {}
            (_, Event::Shutdown) => self.shut_down(&mut out),
            (
                _,
                event @ (Event::NeedsAuthorization(_)
                | Event::Authorized
                | Event::AuthorizationFailed(_)),
            ) => self.authorization(event, &mut out),
            (Phase::Idle | Phase::Waiting, Event::Start | Event::Restart) => {
                self.start_idle(&mut out);
            }
            (Phase::Backoff, Event::Start | Event::Restart) => {
                self.forget_failures();
                self.leave_backoff(&mut out);
            }
            (Phase::Starting, Event::Restart) => {
                out.push(Decision::AbandonStart);
                self.forget_failures();
                self.connect(&mut out);
            }
            (Phase::Running { .. }, Event::Restart) => {
                self.drop_current(&mut out);
                out.push(transition(Lifecycle::Stopped, Some(RESTARTING_ON_REQUEST)));
                self.forget_failures();
                out.push(Decision::CountRestart);
                self.connect(&mut out);
            }
            // Already starting or running.
            (_, Event::Start) => {}
            (Phase::Idle, Event::Stop) => {}
            (_, Event::Stop) => {
                self.drop_current(&mut out);
                out.push(transition(Lifecycle::Stopped, Some(STOPPED_ON_REQUEST)));
                self.phase = Phase::Idle;
            }
            (phase, Event::Reconfigure(policy)) => self.reconfigure(phase, policy, &mut out),
            (Phase::Starting, Event::Started) => self.run(now, &mut out),
            (Phase::Starting, Event::StartFailed(reason)) => {
                // A start that never connected has no uptime to be stable with.
                self.fail(reason, Duration::ZERO, now, &mut out);
            }
            (Phase::Running { since, .. }, Event::Closed(reason)) => {
                out.push(Decision::Disconnect {
                    grace: FAILED_GRACE,
                });
                self.fail(reason, now.saturating_duration_since(since), now, &mut out);
            }
            (
                Phase::Running {
                    since,
                    ping_in_flight: false,
                    failed_pings,
                },
                Event::HealthTick,
            ) if self.policy.health_check_interval.is_some() => {
                self.phase = Phase::Running {
                    since,
                    ping_in_flight: true,
                    failed_pings,
                };
                out.push(Decision::Ping);
            }
            (Phase::Running { since, .. }, Event::PingOk) => {
                self.phase = Phase::Running {
                    since,
                    ping_in_flight: false,
                    failed_pings: 0,
                };
            }
            (
                Phase::Running {
                    since,
                    failed_pings,
                    ..
                },
                Event::PingFailed(error),
            ) => self.ping_failed(since, failed_pings, &error, now, &mut out),
            (Phase::Backoff, Event::TimerFired) => self.leave_backoff(&mut out),
            // Late news about something already dropped, or a tick while a ping is out.
            (
                _,
                Event::Started
                | Event::StartFailed(_)
                | Event::Closed(_)
                | Event::HealthTick
                | Event::PingOk
                | Event::PingFailed(_)
                | Event::TimerFired,
            ) => {}
        }
        out
    }

    /// What the app's authorization says: wait for the user, start now that it may, or fail
    /// for good.
    fn authorization(&mut self, event: Event, out: &mut Vec<Decision>) {
        match (self.phase, event) {
            (
                Phase::Starting | Phase::Running { .. } | Phase::Backoff,
                Event::NeedsAuthorization(issuer),
            ) => {
                self.drop_failed(out);
                out.push(Decision::Transition {
                    to: Lifecycle::NeedsAuthorization,
                    reason: Some(format!("waiting for the user to authorize it at {issuer}")),
                });
                self.phase = Phase::Waiting;
            }
            (Phase::Waiting, Event::Authorized) => {
                self.forget_failures();
                self.connect(out);
            }
            (
                Phase::Starting | Phase::Running { .. } | Phase::Backoff | Phase::Waiting,
                Event::AuthorizationFailed(reason),
            ) => {
                self.drop_failed(out);
                out.push(Decision::Transition {
                    to: Lifecycle::Failed,
                    reason: Some(reason),
                });
                self.phase = Phase::Idle;
            }
            // Stopped, failed for good, or already where the event would take it.
            _ => {}
        }
    }

    /// Drops what is in flight when it cannot go on (as a failure does: a connection gets the
    /// short grace).
    fn drop_failed(&self, out: &mut Vec<Decision>) {
        match self.phase {
            Phase::Starting => out.push(Decision::AbandonStart),
            Phase::Running { .. } => out.push(Decision::Disconnect {
                grace: FAILED_GRACE,
            }),
            Phase::Backoff => out.push(Decision::CancelTimer),
            Phase::Idle | Phase::Waiting | Phase::Ended => {}
        }
    }

    /// Starts an idle app afresh: no failure history, no crash loop.
    fn start_idle(&mut self, out: &mut Vec<Decision>) {
        self.forget_failures();
        if self.crash_loop {
            self.crash_loop = false;
            out.push(Decision::CrashLoop(false));
        }
        self.connect(out);
    }

    /// The start attempt connected at `now`: the app runs, watched by health checks if the
    /// policy has them.
    fn run(&mut self, now: Instant, out: &mut Vec<Decision>) {
        self.phase = Phase::Running {
            since: now,
            ping_in_flight: false,
            failed_pings: 0,
        };
        out.push(Decision::UseConnection);
        out.push(transition(Lifecycle::Running, None));
        // A zero interval would mean pinging without pause; treat it as off.
        if let Some(every) = self.policy.health_check_interval.filter(|d| !d.is_zero()) {
            out.push(Decision::WatchHealth { every });
        }
    }

    /// A health ping of the app running `since` failed, after `failed_pings` failures in a
    /// row: enough of them are a failure.
    fn ping_failed(
        &mut self,
        since: Instant,
        failed_pings: u32,
        error: &str,
        now: Instant,
        out: &mut Vec<Decision>,
    ) {
        let failed_pings = failed_pings.saturating_add(1);
        if failed_pings >= self.policy.health_check_failures {
            out.push(Decision::Disconnect {
                grace: FAILED_GRACE,
            });
            let reason = format!("health check failed {failed_pings} times in a row: {error}");
            self.fail(reason, now.saturating_duration_since(since), now, out);
        } else {
            self.phase = Phase::Running {
                since,
                ping_in_flight: false,
                failed_pings,
            };
        }
    }

    fn connect(&mut self, out: &mut Vec<Decision>) {
        self.phase = Phase::Starting;
        out.push(transition(Lifecycle::Loaded, None));
        out.push(Decision::Connect);
    }

    fn leave_backoff(&mut self, out: &mut Vec<Decision>) {
        out.push(Decision::CancelTimer);
        out.push(Decision::CountRestart);
        self.connect(out);
    }

    /// Drops what the current phase has in flight: the start attempt, the connection (with the
    /// policy's grace) or the timer.
    fn drop_current(&self, out: &mut Vec<Decision>) {
        match self.phase {
            Phase::Starting => out.push(Decision::AbandonStart),
            Phase::Running { .. } => out.push(Decision::Disconnect {
                grace: self.policy.shutdown_grace,
            }),
            Phase::Backoff => out.push(Decision::CancelTimer),
            Phase::Idle | Phase::Waiting | Phase::Ended => {}
        }
    }

    fn forget_failures(&mut self) {
        self.failures.clear();
        self.attempt = 0;
    }

    fn reconfigure(&mut self, phase: Phase, policy: SupervisionPolicy, out: &mut Vec<Decision>) {
        // The connection being closed was made under the old settings, so it gets their grace.
        self.drop_current(out);
        if matches!(phase, Phase::Running { .. }) {
            out.push(transition(Lifecycle::Stopped, Some(RECONFIGURED)));
        }
        out.push(Decision::ApplyConfiguration);
        self.policy = policy;
        match phase {
            Phase::Idle | Phase::Ended => {}
            Phase::Starting | Phase::Running { .. } | Phase::Backoff | Phase::Waiting => {
                self.forget_failures();
                if phase == Phase::Backoff {
                    out.push(Decision::CountRestart);
                }
                self.connect(out);
            }
        }
    }

    fn shut_down(&mut self, out: &mut Vec<Decision>) {
        if self.phase != Phase::Idle {
            self.drop_current(out);
            out.push(transition(Lifecycle::Stopped, Some(SHUTTING_DOWN)));
        }
        out.push(Decision::AcknowledgeShutdown);
        out.push(Decision::Exit);
        self.phase = Phase::Ended;
    }

    /// Records a failure after `uptime` of running and decides what follows it.
    fn fail(&mut self, reason: String, uptime: Duration, now: Instant, out: &mut Vec<Decision>) {
        self.phase = Phase::Idle;
        if uptime >= self.policy.stable_after {
            self.attempt = 0;
        }
        self.attempt = self.attempt.saturating_add(1);
        self.failures.push_back(now);
        let window = self.policy.crash_loop_window;
        while self
            .failures
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > window)
        {
            self.failures.pop_front();
        }
        let count = self.failures.len();
        if count > self.policy.crash_loop_failures as usize {
            self.crash_loop = true;
            out.push(Decision::CrashLoop(true));
            out.push(Decision::Transition {
                to: Lifecycle::Failed,
                reason: Some(format!(
                    "crash loop: {count} failures within {} s, so it is not restarted again until restarted by hand; last failure: {reason}",
                    window.as_secs()
                )),
            });
            return;
        }
        out.push(Decision::Transition {
            to: Lifecycle::Failed,
            reason: Some(reason),
        });
        if !self.policy.auto_restart {
            return;
        }
        let delay = self
            .policy
            .restart_delay(self.attempt, self.jitter_seed.wrapping_add(self.draws));
        self.draws = self.draws.wrapping_add(1);
        // A delay too long for the clock (a huge configured maximum) is as good as never.
        let at = now
            .checked_add(delay)
            .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
            .unwrap_or(now);
        out.push(Decision::ScheduleRestart {
            at,
            delay,
            attempt: self.attempt,
        });
        self.phase = Phase::Backoff;
    }
}

fn transition(to: Lifecycle, reason: Option<&str>) -> Decision {
    Decision::Transition {
        to,
        reason: reason.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine with an injected clock.
    struct Harness {
        machine: Machine,
        now: Instant,
    }

    /// Every setting spelled out, so that the tests do not hang on the defaults.
    fn policy() -> SupervisionPolicy {
        SupervisionPolicy {
            auto_restart: true,
            restart_delay: Duration::from_secs(1),
            max_restart_delay: Duration::from_secs(60),
            crash_loop_failures: 100,
            crash_loop_window: Duration::from_secs(300),
            stable_after: Duration::from_secs(60),
            health_check_interval: Some(Duration::from_secs(30)),
            health_check_failures: 3,
            shutdown_grace: Duration::from_secs(5),
        }
    }

    impl Harness {
        fn new(policy: SupervisionPolicy) -> Self {
            Self::seeded(policy, 7)
        }

        fn seeded(policy: SupervisionPolicy, seed: u64) -> Self {
            Self {
                machine: Machine::new(policy, seed),
                now: Instant::now(),
            }
        }

        fn advance(&mut self, by: Duration) {
            self.now += by;
        }

        fn feed(&mut self, event: Event) -> Vec<Decision> {
            self.machine.handle(event, self.now)
        }

        /// Starts and connects: the app is running.
        fn running(policy: SupervisionPolicy) -> Self {
            let mut h = Self::new(policy);
            h.feed(Event::Start);
            h.feed(Event::Started);
            h
        }

        /// Fails the running or starting app and returns the scheduled restart, if any.
        fn crash(&mut self, reason: &str) -> Vec<Decision> {
            let event = match self.machine.phase {
                Phase::Starting => Event::StartFailed(reason.to_owned()),
                _ => Event::Closed(reason.to_owned()),
            };
            self.feed(event)
        }

        /// Waits out the scheduled restart and connects again.
        fn restart_after(&mut self, decisions: &[Decision]) {
            let Some(Decision::ScheduleRestart { at, .. }) = scheduled(decisions) else {
                panic!("no restart scheduled: {decisions:?}");
            };
            self.now = at;
            let out = self.feed(Event::TimerFired);
            assert!(out.contains(&Decision::Connect), "{out:?}");
            self.feed(Event::Started);
        }
    }

    fn scheduled(decisions: &[Decision]) -> Option<Decision> {
        decisions
            .iter()
            .find(|d| matches!(d, Decision::ScheduleRestart { .. }))
            .cloned()
    }

    fn attempt_and_delay(decisions: &[Decision]) -> (u32, Duration) {
        match scheduled(decisions) {
            Some(Decision::ScheduleRestart { attempt, delay, .. }) => (attempt, delay),
            _ => panic!("no restart scheduled: {decisions:?}"),
        }
    }

    fn failed(reason: &str) -> Decision {
        Decision::Transition {
            to: Lifecycle::Failed,
            reason: Some(reason.to_owned()),
        }
    }

    fn stopped(reason: &str) -> Decision {
        transition(Lifecycle::Stopped, Some(reason))
    }

    fn loaded() -> Decision {
        transition(Lifecycle::Loaded, None)
    }

    #[test]
    fn a_start_connects_and_a_connection_runs_with_health_checks() {
        let mut h = Harness::new(policy());
        assert_eq!(h.feed(Event::Start), [loaded(), Decision::Connect]);
        assert_eq!(
            h.feed(Event::Started),
            [
                Decision::UseConnection,
                transition(Lifecycle::Running, None),
                Decision::WatchHealth {
                    every: Duration::from_secs(30)
                }
            ]
        );
        // Without health checks nothing is watched.
        let mut quiet = policy();
        quiet.health_check_interval = None;
        let mut h = Harness::new(quiet);
        h.feed(Event::Start);
        assert_eq!(
            h.feed(Event::Started),
            [
                Decision::UseConnection,
                transition(Lifecycle::Running, None)
            ]
        );
        assert_eq!(h.feed(Event::HealthTick), []);
    }

    #[test]
    fn delays_double_from_the_base_to_the_cap_within_their_jitter() {
        for seed in [0, 1, 42, u64::MAX] {
            let mut h = Harness::seeded(policy(), seed);
            h.feed(Event::Start);
            h.feed(Event::Started);
            for attempt in 1..=9u32 {
                // Each run is short of `stable_after`, so the failures are in a row.
                h.advance(Duration::from_secs(1));
                let out = h.crash("exited with status 17");
                assert_eq!(
                    out[..2],
                    [
                        Decision::Disconnect {
                            grace: FAILED_GRACE
                        },
                        failed("exited with status 17")
                    ]
                );
                let (got, delay) = attempt_and_delay(&out);
                assert_eq!(got, attempt);
                let base = Duration::from_secs(1 << (attempt - 1)).min(Duration::from_secs(60));
                // A nanosecond of slack for the floating-point factor.
                let low = base.mul_f64(0.9).saturating_sub(Duration::from_nanos(1));
                let high = base.mul_f64(1.1).min(Duration::from_secs(60));
                assert!(
                    delay >= low && delay <= high,
                    "seed {seed}, attempt {attempt}: {delay:?} not in [{low:?}, {high:?}]"
                );
                let Some(Decision::ScheduleRestart { at, .. }) = scheduled(&out) else {
                    unreachable!()
                };
                assert_eq!(at, h.now + delay);
                h.restart_after(&out);
            }
        }
    }

    #[test]
    fn a_stable_run_starts_the_attempts_over() {
        let mut h = Harness::running(policy());
        for _ in 0..3 {
            h.advance(Duration::from_secs(1));
            let out = h.crash("died");
            h.restart_after(&out);
        }
        // Just short of stable: the fourth failure in a row.
        h.advance(Duration::from_secs(59));
        let out = h.crash("died");
        assert_eq!(attempt_and_delay(&out).0, 4);
        h.restart_after(&out);
        // Stable: back to the first attempt and the base delay.
        h.advance(Duration::from_secs(60));
        let out = h.crash("died");
        let (attempt, delay) = attempt_and_delay(&out);
        assert_eq!(attempt, 1);
        assert!(delay <= Duration::from_millis(1100), "{delay:?}");
    }

    #[test]
    fn too_many_failures_in_the_window_are_a_crash_loop() {
        let mut p = policy();
        p.crash_loop_failures = 3;
        p.crash_loop_window = Duration::from_secs(60);
        let mut h = Harness::new(p);
        h.feed(Event::Start);
        // Three failed starts are allowed and restarted.
        for _ in 0..3 {
            h.advance(Duration::from_secs(1));
            let out = h.crash("exited with status 3");
            let Some(Decision::ScheduleRestart { at, .. }) = scheduled(&out) else {
                panic!("{out:?}");
            };
            h.now = at;
            h.feed(Event::TimerFired);
        }
        // The fourth within the window trips the guard: no restart.
        h.advance(Duration::from_secs(1));
        let out = h.crash("exited with status 3");
        assert_eq!(
            out,
            [
                Decision::CrashLoop(true),
                failed(
                    "crash loop: 4 failures within 60 s, so it is not restarted again until restarted by hand; last failure: exited with status 3"
                )
            ]
        );
        assert!(h.machine.crash_loop);
        h.advance(Duration::from_secs(3600));
        assert_eq!(h.feed(Event::TimerFired), []);

        // Restarting by hand ends the crash loop and the failure history: the next failure is
        // the first again.
        assert_eq!(
            h.feed(Event::Restart),
            [Decision::CrashLoop(false), loaded(), Decision::Connect]
        );
        assert!(!h.machine.crash_loop);
        let out = h.crash("exited with status 3");
        assert_eq!(attempt_and_delay(&out).0, 1);
        assert_eq!(h.machine.failures.len(), 1);
        // `Start` recovers too.
        let mut h2 = Harness::new(p);
        h2.machine.crash_loop = true;
        h2.machine.attempt = 9;
        h2.machine.failures.extend([h2.now; 4]);
        assert_eq!(
            h2.feed(Event::Start),
            [Decision::CrashLoop(false), loaded(), Decision::Connect]
        );
        assert_eq!((h2.machine.attempt, h2.machine.failures.len()), (0, 0));
    }

    #[test]
    fn failures_outside_the_window_do_not_count() {
        let mut p = policy();
        p.crash_loop_failures = 3;
        p.crash_loop_window = Duration::from_secs(60);
        let mut h = Harness::new(p);
        h.feed(Event::Start);
        // One failed start every 31 s: never more than two in any 60 s.
        for _ in 0..20 {
            h.advance(Duration::from_secs(31));
            let out = h.crash("exited with status 3");
            assert!(!out.contains(&Decision::CrashLoop(true)), "{out:?}");
            let Some(Decision::ScheduleRestart { at, .. }) = scheduled(&out) else {
                panic!("{out:?}");
            };
            h.now = at;
            h.feed(Event::TimerFired);
        }
        assert!(h.machine.failures.len() <= 2, "{:?}", h.machine.failures);
    }

    #[test]
    fn health_failures_short_of_the_limit_keep_the_app() {
        let mut h = Harness::running(policy());
        for _ in 0..5 {
            for _ in 0..2 {
                h.advance(Duration::from_secs(30));
                assert_eq!(h.feed(Event::HealthTick), [Decision::Ping]);
                // At most one ping at a time.
                assert_eq!(h.feed(Event::HealthTick), []);
                assert_eq!(h.feed(Event::PingFailed("timed out".into())), []);
            }
            assert_eq!(h.machine.failed_pings(), 2);
            h.advance(Duration::from_secs(30));
            assert_eq!(h.feed(Event::HealthTick), [Decision::Ping]);
            assert_eq!(h.feed(Event::PingOk), []);
            assert_eq!(h.machine.failed_pings(), 0);
        }
        assert!(matches!(h.machine.phase, Phase::Running { .. }));
    }

    #[test]
    fn health_failures_in_a_row_kill_the_connection_and_count_as_a_failure() {
        let mut h = Harness::running(policy());
        for _ in 0..2 {
            h.advance(Duration::from_secs(30));
            h.feed(Event::HealthTick);
            assert_eq!(h.feed(Event::PingFailed("timed out".into())), []);
        }
        h.advance(Duration::from_secs(30));
        h.feed(Event::HealthTick);
        let out = h.feed(Event::PingFailed("timed out; stderr: bye".into()));
        assert_eq!(
            out[..2],
            [
                Decision::Disconnect {
                    grace: FAILED_GRACE
                },
                failed("health check failed 3 times in a row: timed out; stderr: bye")
            ]
        );
        // It counts like any failure: the first attempt, recorded in the window.
        assert_eq!(attempt_and_delay(&out).0, 1);
        assert_eq!(h.machine.failures.len(), 1);
        // The pings of the dead connection no longer matter.
        assert_eq!(h.feed(Event::PingFailed("late".into())), []);
        assert_eq!(h.feed(Event::Closed("late".into())), []);
    }

    #[test]
    fn a_stop_during_start_drops_the_attempt_and_nothing_restarts() {
        let mut h = Harness::new(policy());
        h.feed(Event::Start);
        assert_eq!(
            h.feed(Event::Stop),
            [Decision::AbandonStart, stopped(STOPPED_ON_REQUEST)]
        );
        // Whatever the dropped attempt would have reported changes nothing.
        assert_eq!(h.feed(Event::Started), []);
        assert_eq!(h.feed(Event::StartFailed("gone".into())), []);
        h.advance(Duration::from_secs(3600));
        assert_eq!(h.feed(Event::TimerFired), []);
        assert_eq!(h.feed(Event::Stop), []);
        assert_eq!(h.machine.phase, Phase::Idle);
        // A start brings it back.
        assert_eq!(h.feed(Event::Start), [loaded(), Decision::Connect]);
    }

    #[test]
    fn stops_and_starts_in_the_other_phases() {
        let mut h = Harness::running(policy());
        // `Start` while starting or running changes nothing.
        assert_eq!(h.feed(Event::Start), []);
        assert_eq!(
            h.feed(Event::Stop),
            [
                Decision::Disconnect {
                    grace: Duration::from_secs(5)
                },
                stopped(STOPPED_ON_REQUEST)
            ]
        );
        h.feed(Event::Start);
        assert_eq!(h.feed(Event::Start), []);
        h.feed(Event::Started);
        let out = h.crash("died");
        assert!(scheduled(&out).is_some());
        assert_eq!(
            h.feed(Event::Stop),
            [Decision::CancelTimer, stopped(STOPPED_ON_REQUEST)]
        );
        assert_eq!(h.feed(Event::TimerFired), []);
    }

    #[test]
    fn a_restart_while_running_counts_and_reconnects_with_fresh_counters() {
        let mut h = Harness::running(policy());
        h.advance(Duration::from_secs(1));
        let out = h.crash("died");
        h.restart_after(&out);
        assert_eq!(
            h.feed(Event::Restart),
            [
                Decision::Disconnect {
                    grace: Duration::from_secs(5)
                },
                stopped(RESTARTING_ON_REQUEST),
                Decision::CountRestart,
                loaded(),
                Decision::Connect
            ]
        );
        let out = h.crash("died");
        assert_eq!(attempt_and_delay(&out).0, 1);

        // While starting, a restart tries again at once, with fresh counters too.
        let mut starting = Harness::new(policy());
        starting.feed(Event::Start);
        starting.crash("exited with status 3");
        starting.feed(Event::TimerFired);
        assert_eq!(starting.machine.attempt, 1);
        assert_eq!(
            starting.feed(Event::Restart),
            [Decision::AbandonStart, loaded(), Decision::Connect]
        );
        assert_eq!(
            (starting.machine.attempt, starting.machine.failures.len()),
            (0, 0)
        );
    }

    #[test]
    fn a_restart_during_backoff_cancels_the_timer_and_connects_at_once() {
        let mut h = Harness::running(policy());
        let mut out = Vec::new();
        for _ in 0..3 {
            h.advance(Duration::from_secs(1));
            out = h.crash("died");
            if h.machine.attempt < 3 {
                h.restart_after(&out);
            }
        }
        assert_eq!(attempt_and_delay(&out).0, 3);
        // Well before the timer is due.
        assert_eq!(
            h.feed(Event::Restart),
            [
                Decision::CancelTimer,
                Decision::CountRestart,
                loaded(),
                Decision::Connect
            ]
        );
        assert_eq!((h.machine.attempt, h.machine.failures.len()), (0, 0));
        // The cancelled timer is stale now.
        h.advance(Duration::from_secs(60));
        assert_eq!(h.feed(Event::TimerFired), []);
        let out = h.crash("died again");
        assert_eq!(attempt_and_delay(&out).0, 1);
        // `Start` during backoff pulls the restart forward the same way.
        assert_eq!(
            h.feed(Event::Start),
            [
                Decision::CancelTimer,
                Decision::CountRestart,
                loaded(),
                Decision::Connect
            ]
        );
    }

    #[test]
    fn reconfigure_adopts_the_settings_in_every_phase() {
        let mut changed = policy();
        changed.auto_restart = false;
        changed.shutdown_grace = Duration::from_secs(9);

        // Idle: applied, nothing started.
        let mut h = Harness::new(policy());
        h.feed(Event::Start);
        h.feed(Event::Stop);
        assert_eq!(
            h.feed(Event::Reconfigure(changed)),
            [Decision::ApplyConfiguration]
        );
        assert_eq!(h.machine.phase, Phase::Idle);
        assert_eq!(h.machine.policy, changed);

        // Starting: the attempt is replaced by one with the new configuration.
        let mut h = Harness::new(policy());
        h.feed(Event::Start);
        assert_eq!(
            h.feed(Event::Reconfigure(changed)),
            [
                Decision::AbandonStart,
                Decision::ApplyConfiguration,
                loaded(),
                Decision::Connect
            ]
        );

        // Running: closed with the old grace, stopped with a reason, started again.
        let mut h = Harness::running(policy());
        assert_eq!(
            h.feed(Event::Reconfigure(changed)),
            [
                Decision::Disconnect {
                    grace: Duration::from_secs(5)
                },
                stopped(RECONFIGURED),
                Decision::ApplyConfiguration,
                loaded(),
                Decision::Connect
            ]
        );
        // The new settings rule the next failure: no automatic restart any more.
        h.feed(Event::Started);
        assert_eq!(h.crash("died")[1..], [failed("died")]);

        // Backing off: the restart happens now, counted, with a fresh history.
        let mut h = Harness::running(policy());
        h.advance(Duration::from_secs(1));
        let out = h.crash("died");
        h.restart_after(&out);
        h.advance(Duration::from_secs(1));
        h.crash("died");
        assert_eq!(h.machine.attempt, 2);
        assert_eq!(
            h.feed(Event::Reconfigure(changed)),
            [
                Decision::CancelTimer,
                Decision::ApplyConfiguration,
                Decision::CountRestart,
                loaded(),
                Decision::Connect
            ]
        );
        assert_eq!((h.machine.attempt, h.machine.failures.len()), (0, 0));
    }

    #[test]
    fn shutdown_in_every_phase_acknowledges_and_ends() {
        let end = [Decision::AcknowledgeShutdown, Decision::Exit];
        // What a non-idle app does first, then the stop and the end.
        let stopping = |first: Decision| {
            let mut all = vec![first, stopped(SHUTTING_DOWN)];
            all.extend(end.iter().cloned());
            all
        };

        let mut idle = Harness::new(policy());
        assert_eq!(idle.feed(Event::Shutdown), end);

        let mut starting = Harness::new(policy());
        starting.feed(Event::Start);
        assert_eq!(
            starting.feed(Event::Shutdown),
            stopping(Decision::AbandonStart)
        );

        let mut running = Harness::running(policy());
        assert_eq!(
            running.feed(Event::Shutdown),
            stopping(Decision::Disconnect {
                grace: Duration::from_secs(5)
            })
        );

        let mut backoff = Harness::running(policy());
        backoff.crash("died");
        assert_eq!(
            backoff.feed(Event::Shutdown),
            stopping(Decision::CancelTimer)
        );

        // A failed app stays failed: shutting down an idle app transitions nothing.
        let mut p = policy();
        p.auto_restart = false;
        let mut failed_app = Harness::running(p);
        failed_app.crash("died");
        assert_eq!(failed_app.feed(Event::Shutdown), end);

        // Nothing is decided after the end.
        for event in [
            Event::Start,
            Event::Restart,
            Event::Stop,
            Event::Shutdown,
            Event::Reconfigure(policy()),
            Event::TimerFired,
        ] {
            assert_eq!(backoff.feed(event.clone()), [], "{event:?}");
            assert_eq!(idle.feed(event.clone()), [], "{event:?}");
        }
    }

    #[test]
    fn without_auto_restart_a_failure_leaves_the_app_failed() {
        let mut p = policy();
        p.auto_restart = false;
        let mut h = Harness::running(p);
        h.advance(Duration::from_secs(1));
        assert_eq!(
            h.crash("exited with status 4"),
            [
                Decision::Disconnect {
                    grace: FAILED_GRACE
                },
                failed("exited with status 4")
            ]
        );
        assert_eq!(h.machine.phase, Phase::Idle);
        h.advance(Duration::from_secs(3600));
        assert_eq!(h.feed(Event::TimerFired), []);
        // A failed start too.
        h.feed(Event::Start);
        assert_eq!(
            h.feed(Event::StartFailed("cannot start".into())),
            [failed("cannot start")]
        );
        assert_eq!(h.feed(Event::TimerFired), []);
    }

    fn waiting(issuer: &str) -> Decision {
        Decision::Transition {
            to: Lifecycle::NeedsAuthorization,
            reason: Some(format!("waiting for the user to authorize it at {issuer}")),
        }
    }

    #[test]
    fn an_app_that_needs_authorization_waits_without_failing_or_restarting() {
        // During a start: the attempt goes, nothing is counted or scheduled.
        let mut h = Harness::new(policy());
        h.feed(Event::Start);
        assert_eq!(
            h.feed(Event::NeedsAuthorization("https://as".into())),
            [Decision::AbandonStart, waiting("https://as")]
        );
        assert_eq!(h.machine.phase, Phase::Waiting);
        assert_eq!((h.machine.attempt, h.machine.failures.len()), (0, 0));
        // Late news of the abandoned start, a timer, pings: nothing.
        for event in [
            Event::StartFailed("401".into()),
            Event::TimerFired,
            Event::HealthTick,
            Event::PingFailed("401".into()),
            Event::NeedsAuthorization("https://as".into()),
        ] {
            assert_eq!(h.feed(event.clone()), [], "{event:?}");
        }
        // Authorized: it starts at once.
        assert_eq!(h.feed(Event::Authorized), [loaded(), Decision::Connect]);
        assert_eq!(
            h.feed(Event::Started)[..2],
            [
                Decision::UseConnection,
                transition(Lifecycle::Running, None)
            ]
        );
        // Authorized again (a refresh) changes nothing while it runs.
        assert_eq!(h.feed(Event::Authorized), []);

        // While running (a ping's 401 included): the connection goes, no failure counted.
        h.advance(Duration::from_secs(1));
        assert_eq!(
            h.feed(Event::NeedsAuthorization("https://as2".into())),
            [
                Decision::Disconnect {
                    grace: FAILED_GRACE
                },
                waiting("https://as2")
            ]
        );
        assert_eq!(h.machine.failures.len(), 0);

        // During a backoff: the timer goes.
        let mut backoff = Harness::running(policy());
        backoff.crash("died");
        assert_eq!(
            backoff.feed(Event::NeedsAuthorization("https://as".into())),
            [Decision::CancelTimer, waiting("https://as")]
        );
    }

    #[test]
    fn commands_reach_a_waiting_app_and_a_stopped_one_ignores_authorization() {
        let mut h = Harness::new(policy());
        h.feed(Event::Start);
        h.feed(Event::NeedsAuthorization("https://as".into()));
        // Start and restart try again at once (the user may have authorized elsewhere).
        assert_eq!(h.feed(Event::Restart), [loaded(), Decision::Connect]);
        h.feed(Event::NeedsAuthorization("https://as".into()));
        assert_eq!(h.feed(Event::Stop), [stopped(STOPPED_ON_REQUEST)]);
        // Stopped: authorization news does not start it.
        assert_eq!(h.feed(Event::Authorized), []);
        assert_eq!(h.feed(Event::NeedsAuthorization("https://as".into())), []);
        assert_eq!(h.feed(Event::AuthorizationFailed("no".into())), []);

        // A reconfiguration of a waiting app connects with the new settings.
        let mut r = Harness::new(policy());
        r.feed(Event::Start);
        r.feed(Event::NeedsAuthorization("https://as".into()));
        assert_eq!(
            r.feed(Event::Reconfigure(policy())),
            [Decision::ApplyConfiguration, loaded(), Decision::Connect]
        );
        // A shutdown stops it.
        r.feed(Event::NeedsAuthorization("https://as".into()));
        assert_eq!(
            r.feed(Event::Shutdown),
            [
                stopped(SHUTTING_DOWN),
                Decision::AcknowledgeShutdown,
                Decision::Exit
            ]
        );
    }

    #[test]
    fn an_authorization_that_cannot_go_on_fails_once_with_nothing_scheduled() {
        let reason = "app x asks for OAuth authorization, which its entry refuses";
        let mut h = Harness::new(policy());
        h.feed(Event::Start);
        assert_eq!(
            h.feed(Event::AuthorizationFailed(reason.into())),
            [Decision::AbandonStart, failed(reason)]
        );
        assert_eq!(h.machine.phase, Phase::Idle);
        assert!(scheduled(&h.feed(Event::TimerFired)).is_none());
        assert_eq!((h.machine.attempt, h.machine.failures.len()), (0, 0));

        let mut running = Harness::running(policy());
        assert_eq!(
            running.feed(Event::AuthorizationFailed(reason.into())),
            [
                Decision::Disconnect {
                    grace: FAILED_GRACE
                },
                failed(reason)
            ]
        );
        // A start by hand tries again.
        assert_eq!(running.feed(Event::Start), [loaded(), Decision::Connect]);
    }
}
