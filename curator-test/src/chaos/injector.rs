//! [`Injector`]: faults at random (from a seed), one at a time, until a deadline.

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::apply::Applier;
use super::fault::FaultKind;
use super::plan::{Planned, Planner};
use super::record::{ChaosRecord, FaultEvent};
use super::rng::ChaosRng;
use super::target::{Ensemble, Target};
use crate::{TestingError, Timing};

/// Options for an [`Injector`]; see [`Injector::builder`].
#[derive(Debug)]
pub struct InjectorBuilder {
    seed: u64,
    targets: Vec<Target>,
    ensemble: Option<Ensemble>,
    session_timeout: Option<Duration>,
    mean_gap: Option<Duration>,
    kinds: Option<Vec<FaultKind>>,
    long_chance: f64,
}

impl InjectorBuilder {
    /// Adds a client under test; targets are numbered from 0 in the order they are added.
    pub fn target(mut self, target: Target) -> Self {
        self.targets.push(target);
        self
    }

    /// Adds several clients under test, in order.
    pub fn targets(mut self, targets: impl IntoIterator<Item = Target>) -> Self {
        self.targets.extend(targets);
        self
    }

    /// The servers, for [`FaultKind::ServerPause`], [`FaultKind::ServerRestart`] and (with a
    /// cluster of at least three) [`FaultKind::LeaderKill`]. Expiries also go to them (without
    /// an ensemble, to the target proxy's upstream).
    pub fn ensemble(mut self, ensemble: Ensemble) -> Self {
        self.ensemble = Some(ensemble);
        self
    }

    /// The session timeout the clients use (default [`Timing::session_timeout`]). Fault
    /// durations are drawn relative to it: short partitions last up to 3/4 of it, long ones
    /// 5/4 to 2 times it, latency is up to 1/5 of it.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = Some(timeout);
        self
    }

    /// The mean pause between one fault's end and the next one's start (default half the
    /// session timeout). Pauses are exponentially distributed, capped at four times the mean.
    pub fn mean_gap(mut self, gap: Duration) -> Self {
        self.mean_gap = Some(gap);
        self
    }

    /// The kinds of fault to choose from, evenly (default: every kind that the targets and
    /// ensemble given make possible).
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = FaultKind>) -> Self {
        self.kinds = Some(kinds.into_iter().collect());
        self
    }

    /// How often a partition ([`FaultKind::is_partition`]) lasts longer than the session
    /// timeout (default 0.25). Such a partition is aimed at a target that says it is holding
    /// ([`Target::set_holding`]) when there is one, so that the session expires under a hold.
    pub fn long_partition_chance(mut self, chance: f64) -> Self {
        self.long_chance = if chance.is_nan() { 0.0 } else { chance.clamp(0.0, 1.0) };
        self
    }

    /// Checks the options and builds the injector.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] when a kind asked for cannot be done (client faults
    /// without targets, server faults without an ensemble, a leader kill without a cluster of
    /// three or more), when no kind can be, or for a zero session timeout.
    pub async fn build(self) -> Result<Injector, TestingError> {
        let members = match &self.ensemble {
            Some(Ensemble::Cluster(c)) => c.lock().await.len(),
            _ => 0,
        };
        let why_not = |kind: FaultKind| -> Option<&'static str> {
            if kind.needs_target() && self.targets.is_empty() {
                Some("needs at least one target")
            } else if !kind.needs_target() && self.ensemble.is_none() {
                Some("needs an ensemble")
            } else if kind == FaultKind::LeaderKill && members < 3 {
                Some("needs a cluster of at least three members")
            } else {
                None
            }
        };
        let kinds = match self.kinds {
            Some(asked) => {
                let mut kinds = Vec::new();
                for kind in asked {
                    if let Some(why) = why_not(kind) {
                        return Err(TestingError::InvalidArgument(format!("fault kind {kind} {why}")));
                    }
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                }
                kinds
            }
            None => FaultKind::ALL.into_iter().filter(|&k| why_not(k).is_none()).collect(),
        };
        if kinds.is_empty() {
            return Err(TestingError::InvalidArgument("no fault kind to inject (give targets or an ensemble)".into()));
        }
        let session_timeout = self.session_timeout.unwrap_or_else(|| Timing::new().session_timeout());
        if session_timeout.is_zero() {
            return Err(TestingError::InvalidArgument("a zero session timeout".into()));
        }
        let planner = Planner {
            kinds,
            targets: self.targets.len(),
            members,
            session_timeout,
            mean_gap: self.mean_gap.unwrap_or(session_timeout / 2),
            long_chance: self.long_chance,
        };
        Ok(Injector { seed: self.seed, planner, targets: self.targets, ensemble: self.ensemble })
    }
}

/// Injects faults at random, one at a time, into clients behind [`ChaosProxy`](crate::ChaosProxy)s and into their
/// servers, and records what it did.
///
/// Everything random (the pause before each fault, its kind, its duration, its target) comes
/// from one seed: the same seed gives the same sequence of faults (see
/// [`preview`](Self::preview)), except that a long partition is aimed at a target that is
/// holding when there is one. A fault that cannot be done (expiring a session that is already
/// gone, a swallow that no request took) is logged and counted as skipped.
///
/// A run never leaves anything broken: at the end every proxy passes with no latency and no
/// swallow armed, and every server runs and is not paused. (If the run's future is dropped
/// half-way, proxies and paused servers are still put right; a server that was being
/// restarted is not.)
///
/// ```no_run
/// # async fn f(targets: Vec<curator_test::chaos::Target>, server: curator_test::TestingServer)
/// # -> Result<(), curator_test::TestingError> {
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
/// use curator_test::chaos::{ChaosRng, Ensemble, Injector};
///
/// let seed = ChaosRng::seed_from_env("CHAOS_SEED");
/// let server = Arc::new(tokio::sync::Mutex::new(server));
/// let injector = Injector::builder(seed)
///     .targets(targets)
///     .ensemble(Ensemble::Server(server))
///     .session_timeout(Duration::from_secs(4))
///     .build()
///     .await?;
/// let record = injector.run(Instant::now() + Duration::from_secs(30)).await;
/// assert!(record.is_restored());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Injector {
    seed: u64,
    planner: Planner,
    targets: Vec<Target>,
    ensemble: Option<Ensemble>,
}

impl Injector {
    /// Starts configuring an injector whose choices all come from `seed`.
    pub fn builder(seed: u64) -> InjectorBuilder {
        InjectorBuilder {
            seed,
            targets: Vec::new(),
            ensemble: None,
            session_timeout: None,
            mean_gap: None,
            kinds: None,
            long_chance: 0.25,
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The kinds of fault chosen from.
    pub fn kinds(&self) -> &[FaultKind] {
        &self.planner.kinds
    }

    /// The targets, by index.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The first `n` faults a run would inject if no target ever said it was holding, without
    /// doing anything. A run's log follows this plan for as long as it runs.
    pub fn preview(&self, n: usize) -> Vec<Planned> {
        let mut master = ChaosRng::new(self.seed);
        (0..n).map(|_| self.planner.plan(&mut master.fork(), &[])).collect()
    }

    /// Injects faults until `until`: waits the next fault's gap, does it (and undoes it), and
    /// so on, until the next fault would start after `until`. Then puts everything back and
    /// returns the record. The last fault may end after `until` (by up to twice the session
    /// timeout, or the time a server takes to restart).
    pub async fn run(&self, until: Instant) -> ChaosRecord {
        let applier = Applier {
            targets: &self.targets,
            ensemble: self.ensemble.as_ref(),
            session_timeout: self.planner.session_timeout,
        };
        let _undo = UndoOnDrop(applier);
        let mut record = ChaosRecord::new(self.seed, self.targets.len());
        let mut master = ChaosRng::new(self.seed);
        let kinds: Vec<&str> = self.planner.kinds.iter().map(|k| k.name()).collect();
        tracing::info!(seed = self.seed, ?kinds, targets = self.targets.len(), "chaos: run starts");
        loop {
            let mut step = master.fork();
            let gap = self.planner.gap(&mut step);
            let at = Instant::now() + gap;
            if at >= until {
                break;
            }
            tokio::time::sleep_until(at.into()).await;
            let holders: Vec<usize> = (0..self.targets.len()).filter(|&i| self.targets[i].is_holding()).collect();
            let planned = self.planner.after_gap(&mut step, gap, &holders);
            let offset = record.started.elapsed();
            let event = match applier.apply(&planned).await {
                Ok(applied) => {
                    if let (Some(t), Some(expired)) = (planned.target, applied.expired_at) {
                        if let Some(times) = record.expiries.get_mut(t) {
                            times.push(expired);
                        }
                    }
                    let member = applied.member.or(planned.member);
                    FaultEvent { offset, fault: planned.fault, target: planned.target, member, skipped: None }
                }
                Err(why) => FaultEvent {
                    offset,
                    fault: planned.fault,
                    target: planned.target,
                    member: planned.member,
                    skipped: Some(why),
                },
            };
            tracing::info!(seed = self.seed, "chaos: {event}");
            record.push(event);
        }
        record.restore_errors = applier.restore().await;
        for e in &record.restore_errors {
            tracing::warn!(seed = self.seed, "chaos: could not restore {e}");
        }
        record.ended = Instant::now();
        tracing::info!(seed = self.seed, injected = record.injected(), counts = ?record.counts, "chaos: run ends");
        record
    }

    /// [`run`](Self::run) in a task of its own.
    pub fn spawn(self, until: Instant) -> JoinHandle<ChaosRecord> {
        tokio::spawn(async move { self.run(until).await })
    }
}

/// Puts proxies (and paused servers) right if a run is dropped half-way.
struct UndoOnDrop<'a>(Applier<'a>);

impl Drop for UndoOnDrop<'_> {
    fn drop(&mut self) {
        self.0.restore_now();
    }
}
