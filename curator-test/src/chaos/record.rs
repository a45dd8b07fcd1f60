//! [`ChaosRecord`]: what an [`Injector`](super::Injector) did.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use super::fault::Fault;

/// One fault in a [`ChaosRecord`]'s log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultEvent {
    /// When the fault began, from the start of the run.
    pub offset: Duration,
    /// The fault.
    pub fault: Fault,
    /// The [`Target`](super::Target) index, for faults that act on a client.
    pub target: Option<usize>,
    /// The cluster member acted on, for server faults on a cluster.
    pub member: Option<usize>,
    /// Why the fault could not be injected (for example: expiring a session that is already
    /// gone), or `None` when it was.
    pub skipped: Option<String>,
}

impl fmt::Display for FaultEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{:.3}s {}", self.offset.as_secs_f64(), self.fault)?;
        if let Some(t) = self.target {
            write!(f, " on target {t}")?;
        }
        if let Some(m) = self.member {
            write!(f, " on member {m}")?;
        }
        if let Some(why) = &self.skipped {
            write!(f, " (skipped: {why})")?;
        }
        Ok(())
    }
}

/// What an [`Injector`](super::Injector) run did: every fault in order, counts by kind, and
/// the instants of forced session expiries, which a [`Checker`](super::Checker) needs.
#[derive(Clone, Debug)]
pub struct ChaosRecord {
    /// The seed of the run.
    pub seed: u64,
    /// When the run started.
    pub started: Instant,
    /// When the run ended (everything undone).
    pub ended: Instant,
    /// Every fault, in order, skipped ones included.
    pub log: Vec<FaultEvent>,
    /// Faults injected, by [`Fault::kind`].
    pub counts: BTreeMap<&'static str, u64>,
    /// Faults that could not be injected, by [`Fault::kind`].
    pub skipped: BTreeMap<&'static str, u64>,
    /// For each target (by index), the instants at which its session was expired on purpose.
    /// Each is taken just before [`expire_session`](crate::expire_session) was called: the
    /// earliest moment the session may have been revoked. The client cannot have been told
    /// beforehand, so holds it had then ended without a warning that anyone could give.
    pub expiries: Vec<Vec<Instant>>,
    /// What could not be put right at the end (a server that would not start again, say).
    /// Empty when everything was left as it was found.
    pub restore_errors: Vec<String>,
}

impl ChaosRecord {
    pub(crate) fn new(seed: u64, targets: usize) -> ChaosRecord {
        let now = Instant::now();
        ChaosRecord {
            seed,
            started: now,
            ended: now,
            log: Vec::new(),
            counts: BTreeMap::new(),
            skipped: BTreeMap::new(),
            expiries: vec![Vec::new(); targets],
            restore_errors: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, event: FaultEvent) {
        let counts = if event.skipped.is_some() { &mut self.skipped } else { &mut self.counts };
        *counts.entry(event.fault.kind()).or_default() += 1;
        self.log.push(event);
    }

    /// The kinds and targets of the log, in order: what a seed determines (times and, for
    /// faults aimed at holders, targets depend on the run).
    pub fn sequence(&self) -> Vec<(&'static str, Option<usize>)> {
        self.log.iter().map(|e| (e.fault.kind(), e.target)).collect()
    }

    /// The forced expiries of target `target` (empty for an unknown index).
    pub fn expiries_of(&self, target: usize) -> &[Instant] {
        self.expiries.get(target).map(Vec::as_slice).unwrap_or_default()
    }

    /// The number of faults injected (not skipped).
    pub fn injected(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Whether everything was left as found: proxies passing, servers running.
    pub fn is_restored(&self) -> bool {
        self.restore_errors.is_empty()
    }
}
