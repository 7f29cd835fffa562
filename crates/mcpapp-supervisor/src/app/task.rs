//! The supervision task of one app: the I/O around its lifecycle [`Machine`]. It waits for
//! the next command, start result, closed connection, health tick or ping result, list change
//! or restart timer, tells the machine (`lifecycle.rs`, where every rule of the restart
//! policy lives) and carries out its decisions in order.

use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use mcpapp_manifest::{AppSpec, InstallState, Timestamp};
use mcpapp_oauth::{AppAuthorizer, AuthState};
use mcpapp_session::{Connection, Notice, closed_reason};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{Instrument, info, info_span, warn};

use super::enumerate::{Lists, refresh};
use super::error::StartError;
use super::start::{Started, start, with_stderr};
use super::{AppShared, Command, Settings, TaskContext};
use crate::authorization::authorizer_for;
use crate::error::CallError;
use crate::events::SupervisorEvent;
use crate::lifecycle::{Decision, Event, Machine};
use crate::link::stdio::StderrTail;

/// Starts the supervision task of a runnable app.
pub(crate) fn spawn_task(
    shared: Arc<AppShared>,
    commands: mpsc::UnboundedReceiver<Command>,
    context: TaskContext,
) -> tokio::task::JoinHandle<()> {
    let span = info_span!("app", id = %shared.id);
    tokio::spawn(supervise(shared, commands, context).instrument(span))
}

/// What a reload hands an app: its new spec, install state and settings.
type Configuration = (AppSpec, InstallState, Settings);

/// A start attempt in flight; dropping it kills whatever it started.
type StartAttempt = Pin<Box<dyn Future<Output = Result<Started, StartError>> + Send>>;

/// The app's task: the I/O around its lifecycle [`Machine`]. It waits for the next thing that
/// happens, tells the machine, and carries out what the machine decides.
struct Task {
    shared: Arc<AppShared>,
    context: TaskContext,
    machine: Machine,
    attempt: Option<StartAttempt>,
    /// List-change notices of the attempt's connection, until the connection is used.
    notices: Option<mpsc::UnboundedReceiver<Notice>>,
    /// A connection that has just started, until the machine decides to use it.
    started: Option<Started>,
    live: Option<Live>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The stderr of the current run, quoted in its failure reasons.
    run: StderrTail,
    /// The payload of the `Reconfigure` being handled.
    configuration: Option<Box<Configuration>>,
    /// Whom to tell that a requested shutdown is done.
    acknowledge: Option<oneshot::Sender<()>>,
    /// The authorization state of the app's OAuth authorizer, when it has one.
    auth: Option<watch::Receiver<AuthState>>,
}

/// The connection in use and what is watched on it.
struct Live {
    connection: Arc<Connection>,
    closed: watch::Receiver<Option<String>>,
    notices: mpsc::UnboundedReceiver<Notice>,
    health: Option<tokio::time::Interval>,
    ping_results: mpsc::UnboundedSender<Result<(), CallError>>,
    pings: mpsc::UnboundedReceiver<Result<(), CallError>>,
}

/// What woke the task.
enum Wake {
    Command(Option<Command>),
    /// Boxed: a connection is large, and every other wake is small.
    Started(Result<Box<Started>, StartError>),
    Closed(String),
    HealthTick,
    Ping(Result<(), CallError>),
    Notice(Notice),
    Timer,
    /// The app's OAuth authorization state changed.
    Auth(AuthState),
}

async fn supervise(
    shared: Arc<AppShared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    context: TaskContext,
) {
    let Some(mut task) = Task::new(shared, context) else {
        return;
    };
    let mut event = Event::Start;
    loop {
        let decisions = task.machine.handle(event, Instant::now());
        if !task.carry_out(decisions).await {
            return;
        }
        // A connection the machine did not take (it was stopped meanwhile) closes on drop.
        task.started = None;
        event = task.next_event(&mut commands).await;
    }
}

/// The next authorization state, or `None` once the authorizer is gone.
async fn next_auth_state(auth: &mut watch::Receiver<AuthState>) -> Option<AuthState> {
    auth.changed().await.ok()?;
    Some(auth.borrow_and_update().clone())
}

/// What an authorization state means for the lifecycle, if anything.
fn auth_event(state: &AuthState) -> Option<Event> {
    match state {
        AuthState::NeedsAuthorization { issuer, .. } | AuthState::Authorizing { issuer } => {
            Some(Event::NeedsAuthorization(issuer.clone()))
        }
        AuthState::Authorized { .. } => Some(Event::Authorized),
        AuthState::Failed { reason } => Some(Event::AuthorizationFailed(reason.clone())),
        AuthState::Anonymous | AuthState::Refreshing { .. } => None,
    }
}

/// Awaits `future` if there is one; without one it never resolves (a disabled branch).
async fn optional<F: Future>(future: Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

impl Task {
    /// The task of a runnable app, with nothing in flight; `None` for an app that cannot run.
    fn new(shared: Arc<AppShared>, context: TaskContext) -> Option<Self> {
        let policy = shared.policy()?;
        // Apps that fail together must not restart in lockstep: each gets its own seed.
        let seed = std::collections::hash_map::RandomState::new().hash_one(&shared.id);
        Some(Self {
            machine: Machine::new(policy, seed),
            run: shared.stderr.clone(),
            shared,
            context,
            attempt: None,
            notices: None,
            started: None,
            live: None,
            timer: None,
            configuration: None,
            acknowledge: None,
            auth: None,
        })
    }

    /// Waits for the next event for the machine, handling list changes on the way.
    async fn next_event(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Event {
        loop {
            match self.wait(commands).await {
                Wake::Command(command) => return self.command_event(command),
                Wake::Started(result) => {
                    self.attempt = None;
                    return match result {
                        Ok(started) => {
                            self.started = Some(*started);
                            Event::Started
                        }
                        // A start the app's authorization stopped (a state the authorizer was
                        // already in, so no change announced it) waits or fails for good.
                        Err(error) => self
                            .shared
                            .authorizer()
                            .map(|authorizer| authorizer.state())
                            .filter(|state| {
                                state.waiting_for().is_some()
                                    || matches!(state, AuthState::Failed { .. })
                            })
                            .and_then(|state| auth_event(&state))
                            .unwrap_or_else(|| Event::StartFailed(with_stderr(&self.run, error))),
                    };
                }
                Wake::Auth(state) => {
                    self.show_authorization(state.clone());
                    if let Some(event) = auth_event(&state) {
                        return event;
                    }
                }
                Wake::Closed(reason) => return Event::Closed(with_stderr(&self.run, reason)),
                Wake::HealthTick => return Event::HealthTick,
                Wake::Ping(Ok(())) => return Event::PingOk,
                Wake::Ping(Err(error)) => {
                    warn!(
                        app = %self.shared.id,
                        "health check {}/{} failed: {error}",
                        self.machine.failed_pings() + 1,
                        self.shared.policy().map_or(0, |p| p.health_check_failures)
                    );
                    return Event::PingFailed(with_stderr(&self.run, error));
                }
                Wake::Timer => {
                    self.timer = None;
                    return Event::TimerFired;
                }
                Wake::Notice(notice) => {
                    if let Some(live) = &self.live {
                        let timeout = live.connection.request_timeout;
                        // Boxed: the listings run side by side, so their futures are all held
                        // at once, and inline they would make every app's task future (alive
                        // for the app's whole life) three times larger for a rare event.
                        Box::pin(refresh(
                            &self.shared,
                            &live.connection,
                            timeout,
                            Lists::from(notice),
                        ))
                        .await;
                    }
                }
            }
        }
    }

    /// Waits for a command, the start attempt, the connection closing, a health tick or
    /// ping result, a list change, or the restart timer, whichever comes first.
    async fn wait(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Wake {
        let auth = self.auth.as_mut().map(next_auth_state);
        let attempt = self.attempt.as_mut();
        let timer = self.timer.as_mut();
        let (closed, tick, ping, notice) = match self.live.as_mut() {
            Some(Live {
                closed,
                notices,
                health,
                pings,
                ..
            }) => (
                Some(closed_reason(closed)),
                health.as_mut().map(tokio::time::Interval::tick),
                Some(pings.recv()),
                Some(notices.recv()),
            ),
            None => (None, None, None, None),
        };
        // Authorization first: a start that fails because the app needs the user is told
        // apart from other failures by the change that came with it.
        tokio::select! {
            biased;
            Some(state) = optional(auth) => Wake::Auth(state),
            command = commands.recv() => Wake::Command(command),
            result = optional(attempt) => Wake::Started(result.map(Box::new)),
            reason = optional(closed) => Wake::Closed(reason),
            _ = optional(tick) => Wake::HealthTick,
            Some(result) = optional(ping) => Wake::Ping(result),
            Some(notice) = optional(notice) => Wake::Notice(notice),
            () = optional(timer) => Wake::Timer,
        }
    }

    /// Turns a command into an event, keeping what it carries for the decisions.
    fn command_event(&mut self, command: Option<Command>) -> Event {
        match command {
            Some(Command::Start) => Event::Start,
            Some(Command::Stop) => Event::Stop,
            Some(Command::Restart) => Event::Restart,
            Some(Command::Reconfigure(configuration)) => {
                let policy = configuration.2.policy;
                self.configuration = Some(configuration);
                Event::Reconfigure(policy)
            }
            Some(Command::Shutdown(done)) => {
                self.acknowledge = Some(done);
                Event::Shutdown
            }
            // The sender lives in the shared state, so this means nobody can reach the app
            // any more: stop it.
            None => Event::Shutdown,
        }
    }

    /// Carries out decisions in order; `false` once the task must end.
    async fn carry_out(&mut self, decisions: Vec<Decision>) -> bool {
        for decision in decisions {
            match decision {
                Decision::Connect => self.connect(),
                Decision::AbandonStart => {
                    self.attempt = None;
                    self.notices = None;
                }
                Decision::UseConnection => self.use_connection(),
                Decision::WatchHealth { every } => {
                    if let Some(live) = &mut self.live {
                        let first = tokio::time::Instant::now().checked_add(every);
                        live.health = first.map(|first| {
                            let mut health = tokio::time::interval_at(first, every);
                            health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                            health
                        });
                    }
                }
                Decision::Ping => self.ping(),
                Decision::Disconnect { grace } => {
                    if let Some(live) = self.live.take() {
                        self.shared.set_connection(None);
                        live.connection.shutdown(grace).await;
                    }
                }
                Decision::Transition { to, reason } => self.shared.transition(to, reason),
                Decision::ScheduleRestart { at, delay, attempt } => {
                    self.schedule_restart(at, delay, attempt);
                }
                Decision::CancelTimer => {
                    self.timer = None;
                    self.shared.update(|s| s.next_restart = None);
                }
                Decision::CountRestart => self
                    .shared
                    .update(|s| s.restart_count = s.restart_count.saturating_add(1)),
                Decision::CrashLoop(on) => self.shared.update(|s| s.crash_loop = on),
                Decision::ApplyConfiguration => {
                    if let Some(configuration) = self.configuration.take() {
                        let (spec, state, settings) = *configuration;
                        self.shared.reconfigure(spec, state, settings);
                    }
                }
                Decision::AcknowledgeShutdown => {
                    if let Some(done) = self.acknowledge.take() {
                        let _ = done.send(());
                    }
                }
                Decision::Exit => return false,
            }
        }
        true
    }

    /// Arms the restart timer for `at`, shows when it is due and announces restart `attempt`.
    fn schedule_restart(&mut self, at: Instant, delay: std::time::Duration, attempt: u32) {
        self.timer = Some(Box::pin(tokio::time::sleep_until(at.into())));
        let due = SystemTime::now()
            .checked_add(delay)
            .map(Timestamp::from_system_time);
        self.shared.update(|s| s.next_restart = due);
        let _ = self.shared.events.send(SupervisorEvent::RestartScheduled {
            app_id: self.shared.id.clone(),
            attempt,
            delay,
        });
        info!(
            "McpApp '{}' restarts in {} ms",
            self.shared.id,
            delay.as_millis()
        );
    }

    /// Begins a start attempt with the current spec, as a new stderr run.
    fn connect(&mut self) {
        let (notices, notice_rx) = mpsc::unbounded_channel();
        self.notices = Some(notice_rx);
        self.run = self.shared.stderr.begin_run();
        let attempt: StartAttempt = match self.shared.runnable() {
            Some((spec, settings)) => {
                let authorizer = authorizer_for(
                    self.context.oauth.as_ref(),
                    &spec,
                    &settings.oauth,
                    &self.context.env.lookup,
                );
                let authorizer = match authorizer {
                    Ok(authorizer) => authorizer,
                    Err(reason) => {
                        self.attempt = Some(Box::pin(async { Err(StartError::OAuth(reason)) }));
                        return;
                    }
                };
                self.follow_authorization(authorizer);
                info!(
                    "Connecting to McpApp '{}' via {}",
                    self.shared.id,
                    spec.launch.transport()
                );
                let shared = self.shared.clone();
                let context = self.context.clone();
                let run = self.run.clone();
                Box::pin(async move {
                    start(
                        &shared,
                        &spec,
                        &settings.inheritance,
                        &context,
                        notices,
                        &run,
                    )
                    .await
                })
            }
            // Runnable apps always have a spec; failing beats waiting forever.
            None => Box::pin(async { Err(StartError::NoSpec) }),
        };
        self.attempt = Some(attempt);
    }

    /// Follows the authorization state of the app's authorizer for this start (the same one
    /// as before while its URL and settings are the same), showing it at once.
    fn follow_authorization(&mut self, authorizer: Option<AppAuthorizer>) {
        self.auth = authorizer.as_ref().map(AppAuthorizer::subscribe);
        self.shared.set_authorizer(authorizer);
        match self.auth.as_mut() {
            Some(auth) => {
                let state = auth.borrow_and_update().clone();
                self.show_authorization(state);
            }
            None => self.shared.update(|s| s.authorization = None),
        }
    }

    /// Puts the authorization state in the snapshot and announces it when it changed.
    fn show_authorization(&self, state: AuthState) {
        let mut changed = false;
        self.shared.update(|s| {
            changed = s.authorization.as_ref() != Some(&state);
            s.authorization = Some(state.clone());
        });
        if changed {
            let _ = self.shared.events.send(SupervisorEvent::Authorization {
                app_id: self.shared.id.clone(),
                state,
            });
        }
    }

    /// Makes the connection that just started the current one.
    fn use_connection(&mut self) {
        let Some((connection, pid)) = self.started.take() else {
            return;
        };
        let connection = Arc::new(connection);
        self.shared.set_connection(Some(connection.clone()));
        self.shared.update(|s| s.pid = pid);
        let (ping_results, pings) = mpsc::unbounded_channel();
        self.live = Some(Live {
            closed: connection.closed(),
            connection,
            // Without its own receiver (never the case) the app's notices are not followed.
            notices: self
                .notices
                .take()
                .unwrap_or_else(|| mpsc::unbounded_channel().1),
            health: None,
            ping_results,
            pings,
        });
    }

    /// Sends one health ping in the background; the result comes back on the live channel.
    fn ping(&self) {
        let Some(live) = &self.live else {
            return;
        };
        let shared = self.shared.clone();
        let results = live.ping_results.clone();
        tokio::spawn(
            async move {
                let _ = results.send(shared.health_check().await);
            }
            .in_current_span(),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcpapp_manifest::Lifecycle;

    use super::*;
    use crate::app::tests::{runnable, shared, state};
    use crate::launch::Environment;
    use crate::link::stdio::ProcessTable;

    fn task(shared: Arc<AppShared>) -> Task {
        // No variable is set, whatever the test process's environment holds.
        let mut env = Environment::default();
        env.lookup = Arc::new(|_| None);
        let context = TaskContext {
            env: Arc::new(env),
            elicitor: None,
            processes: ProcessTable::with_keeper(None),
            oauth: None,
        };
        Task::new(shared, context).expect("a runnable app has a task")
    }

    #[tokio::test]
    async fn bookkeeping_decisions_show_in_the_snapshot_and_the_events() {
        let (shared, _commands, mut events) = shared("weather");
        let mut task = task(shared.clone());
        let delay = Duration::from_secs(2);
        let going_on = task
            .carry_out(vec![
                Decision::Transition {
                    to: Lifecycle::Failed,
                    reason: Some("died".to_owned()),
                },
                Decision::CrashLoop(true),
                Decision::CountRestart,
                Decision::CountRestart,
                Decision::ScheduleRestart {
                    at: Instant::now() + delay,
                    delay,
                    attempt: 2,
                },
            ])
            .await;
        assert!(going_on);
        let snapshot = shared.snapshot();
        assert_eq!(
            (
                snapshot.state.lifecycle,
                snapshot.crash_loop,
                snapshot.restart_count
            ),
            (Lifecycle::Failed, true, 2)
        );
        assert!(snapshot.next_restart.is_some());
        assert!(task.timer.is_some());
        assert!(matches!(
            events.try_recv(),
            Ok(SupervisorEvent::Lifecycle {
                to: Lifecycle::Failed,
                ..
            })
        ));
        assert_eq!(
            events.try_recv().ok(),
            Some(SupervisorEvent::RestartScheduled {
                app_id: "weather".to_owned(),
                attempt: 2,
                delay
            })
        );

        assert!(task.carry_out(vec![Decision::CancelTimer]).await);
        assert!(task.timer.is_none());
        assert_eq!(shared.snapshot().next_restart, None);
        assert!(!task.carry_out(vec![Decision::Exit]).await);
    }

    #[tokio::test]
    async fn a_reconfigure_command_carries_its_settings_to_the_decision() {
        let (shared, _commands, _events) = shared("weather");
        let mut task = task(shared.clone());
        let next = state("weather");
        let (spec, mut settings) = runnable(&next);
        settings.policy.auto_restart = false;
        let event = task.command_event(Some(Command::Reconfigure(Box::new((
            spec,
            next,
            settings.clone(),
        )))));
        assert_eq!(event, Event::Reconfigure(settings.policy));
        assert!(task.carry_out(vec![Decision::ApplyConfiguration]).await);
        assert_eq!(shared.settings(), Some(settings));

        // A shutdown is acknowledged once the machine says so; a closed channel is one too.
        let (done, acknowledged) = oneshot::channel();
        assert_eq!(
            task.command_event(Some(Command::Shutdown(done))),
            Event::Shutdown
        );
        assert!(
            !task
                .carry_out(vec![Decision::AcknowledgeShutdown, Decision::Exit])
                .await
        );
        assert_eq!(acknowledged.await, Ok(()));
        assert_eq!(task.command_event(None), Event::Shutdown);
    }

    #[tokio::test]
    async fn a_start_that_cannot_launch_fails_with_the_reason() {
        let (shared, mut commands, _events) = shared("weather");
        let mut task = task(shared.clone());
        // Only a missing `env:` value stops the plan before anything is started.
        let state = state("weather");
        let (mut spec, settings) = runnable(&state);
        if let mcpapp_manifest::Launch::Stdio { environment, .. } = &mut spec.launch {
            environment.insert("TOKEN".to_owned(), "env:TOKEN".to_owned());
        }
        shared.reconfigure(spec, state, settings);
        assert!(task.carry_out(vec![Decision::Connect]).await);
        let Event::StartFailed(reason) = task.next_event(&mut commands).await else {
            panic!("the start should fail");
        };
        assert!(
            reason == "environment variable TOKEN (for environment TOKEN) is not set",
            "{reason}"
        );
        assert!(task.attempt.is_none());
    }
}
