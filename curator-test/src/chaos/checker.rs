//! [`Checker`]: what contenders report while a chaos run goes on, judged at the end.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::analysis;
use super::ledger::{AcquireEntry, HoldEntry, Ledger};
use super::record::ChaosRecord;
use super::report::{Report, ReportInputs};
use crate::eventually;

/// One hold, as [`Checker::begin_hold`] returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HoldId(usize);

/// One acquire attempt, as [`Checker::begin_acquire`] returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AcquireId(usize);

/// Collects what the contenders of a lock scenario report (grants, loss signals, releases,
/// acquire attempts, a shared counter) and finds, at the end, what went wrong: see
/// [`report`](Self::report). Cheap to clone (clones share one ledger) and thread-safe.
///
/// Contenders are numbered by the scenario (usually the index of their
/// [`Target`](super::Target)). A contender should:
/// - call [`begin_acquire`](Self::begin_acquire) before asking for the lock and
///   [`end_acquire`](Self::end_acquire) when the attempt returns, granted or not;
/// - call [`begin_hold`](Self::begin_hold) as soon as it is granted, with a token that grows
///   with every grant (the lock node's czxid, say: sequence numbers restart when a container
///   parent is deleted), [`lost`](Self::lost) when it is told the hold may be lost, and
///   [`end_hold`](Self::end_hold) when it releases;
/// - while holding exclusively, [`read_counter`](Self::read_counter), await something,
///   [`write_counter`](Self::write_counter) the value plus one, then
///   [`increment_done`](Self::increment_done). Shared (read) holders only read.
#[derive(Clone, Debug)]
pub struct Checker {
    ledger: Arc<Mutex<Ledger>>,
}

impl Default for Checker {
    fn default() -> Self {
        Checker::new()
    }
}

impl Checker {
    /// An empty checker.
    pub fn new() -> Checker {
        let ledger = Ledger {
            origin: Instant::now(),
            holds: Vec::new(),
            acquires: Vec::new(),
            expiries: Vec::new(),
            counter: 0,
            increments: 0,
        };
        Checker { ledger: Arc::new(Mutex::new(ledger)) }
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the checker was created: times in reports are offsets from it.
    pub fn origin(&self) -> Instant {
        self.ledger().origin
    }

    /// A hold granted to `contender` now, with fencing `token`; `exclusive` for a write lock
    /// or mutex, false for a shared (read) lock.
    pub fn begin_hold(&self, contender: usize, token: i64, exclusive: bool) -> HoldId {
        self.begin_hold_at(contender, token, exclusive, Instant::now())
    }

    /// [`begin_hold`](Self::begin_hold) granted at `at`.
    pub fn begin_hold_at(&self, contender: usize, token: i64, exclusive: bool, at: Instant) -> HoldId {
        let mut ledger = self.ledger();
        ledger.holds.push(HoldEntry { contender, token, exclusive, start: at, lost: None, end: None, increment: None });
        HoldId(ledger.holds.len() - 1)
    }

    /// The holder of `hold` was told at `at` that it may have lost it. Only the first signal
    /// counts; later ones are ignored.
    pub fn lost(&self, hold: HoldId, at: Instant) {
        match self.ledger().holds.get_mut(hold.0) {
            Some(h) => {
                h.lost.get_or_insert(at);
            }
            None => tracing::warn!(?hold, "Checker::lost of an unknown hold"),
        }
    }

    /// `hold` was released now.
    pub fn end_hold(&self, hold: HoldId) {
        self.end_hold_at(hold, Instant::now());
    }

    /// `hold` was released at `at` (a second end is ignored).
    pub fn end_hold_at(&self, hold: HoldId, at: Instant) {
        match self.ledger().holds.get_mut(hold.0) {
            Some(h) => {
                h.end.get_or_insert(at);
            }
            None => tracing::warn!(?hold, "Checker::end_hold of an unknown hold"),
        }
    }

    /// The shared counter's value (0 at first).
    pub fn read_counter(&self) -> u64 {
        self.ledger().counter
    }

    /// Sets the shared counter. Not atomic with the read on purpose: holders do
    /// read, await, write, so two holders at once lose an increment.
    pub fn write_counter(&self, value: u64) {
        self.ledger().counter = value;
    }

    /// One read-modify-write of the counter is complete (call it after the write).
    pub fn increment_done(&self) {
        self.ledger().increments += 1;
    }

    /// The write of a read-modify-write by `hold`, which read `read`: sets the counter to
    /// `read + 1` and counts the increment, as [`write_counter`](Self::write_counter) and
    /// [`increment_done`](Self::increment_done) do, and notes both in the hold, so that the
    /// report can say which holds lost an increment and whether a forced expiry excuses it.
    pub fn increment(&self, hold: HoldId, read: u64) {
        let mut ledger = self.ledger();
        ledger.counter = read + 1;
        ledger.increments += 1;
        match ledger.holds.get_mut(hold.0) {
            Some(h) => h.increment = Some((read, Instant::now())),
            None => tracing::warn!(?hold, "Checker::increment of an unknown hold"),
        }
    }

    /// `contender` starts asking for the lock now.
    pub fn begin_acquire(&self, contender: usize) -> AcquireId {
        self.begin_acquire_at(contender, Instant::now())
    }

    /// [`begin_acquire`](Self::begin_acquire) at `at`.
    pub fn begin_acquire_at(&self, contender: usize, at: Instant) -> AcquireId {
        let mut ledger = self.ledger();
        ledger.acquires.push(AcquireEntry { contender, start: at, end: None });
        AcquireId(ledger.acquires.len() - 1)
    }

    /// The attempt returned now (granted, failed or timed out).
    pub fn end_acquire(&self, id: AcquireId) {
        self.end_acquire_at(id, Instant::now());
    }

    /// The attempt returned at `at`.
    pub fn end_acquire_at(&self, id: AcquireId, at: Instant) {
        match self.ledger().acquires.get_mut(id.0) {
            Some(a) => {
                a.end.get_or_insert(at);
            }
            None => tracing::warn!(?id, "Checker::end_acquire of an unknown acquire"),
        }
    }

    /// `contender`'s session was expired on purpose at `at`. Holds it had then count as
    /// signalled at `at`: the server revoked them at once and no client can be warned of that
    /// beforehand.
    pub fn forced_expiry(&self, contender: usize, at: Instant) {
        self.ledger().expiries.push((contender, at));
    }

    /// [`forced_expiry`](Self::forced_expiry) for every expiry in `record`, taking target `i`
    /// to be contender `i`.
    pub fn note_expiries(&self, record: &ChaosRecord) {
        let mut ledger = self.ledger();
        for (target, times) in record.expiries.iter().enumerate() {
            ledger.expiries.extend(times.iter().map(|&at| (target, at)));
        }
    }

    /// The number of acquire attempts that have not returned.
    pub fn open_acquires(&self) -> usize {
        self.ledger().acquires.iter().filter(|a| a.end.is_none()).count()
    }

    /// Waits up to `deadline` for every acquire attempt to return; true if they all did.
    pub async fn settle(&self, deadline: Duration) -> bool {
        eventually(deadline, || async { self.open_acquires() == 0 }).await
    }

    /// Judges everything reported so far (holds still open count as ending now):
    ///
    /// - **overlaps**: two holds of different contenders, at least one exclusive, where the
    ///   later one began before the earlier one ended, and the earlier one had not been
    ///   signalled by then, neither by [`lost`](Self::lost) nor by a forced expiry of its
    ///   contender during the hold. Overlaps whose earlier hold was signalled in time are
    ///   counted apart (`signalled_overlaps`): the holder was told, and should have stopped.
    /// - **lost increments**: increments done minus the counter's final value, less those
    ///   excused: two holds that read the same value (both noted with
    ///   [`increment`](Self::increment)) where the earlier one's session was expired by force
    ///   before the later grant and its holder had not been told (no client can be warned of
    ///   that: the server revokes at once). Each lost increment is described.
    /// - **token inversions**: exclusive grants, in grant order, whose token is not greater
    ///   than every earlier exclusive grant's.
    /// - **hung acquirers**: attempts still open `inputs.hung_after` after the faults stopped
    ///   (`inputs.calm_since`), or after they began if later. Attempts that waited longer than
    ///   that while faults went on are counted as slow (starvation), with the longest wait.
    /// - orphans and wedged locks as the scenario measured them, and the faults of
    ///   `inputs.record`. Forced expiries are not taken from the record: call
    ///   [`note_expiries`](Self::note_expiries) or [`forced_expiry`](Self::forced_expiry).
    pub fn report(&self, inputs: ReportInputs<'_>) -> Report {
        let ledger = self.ledger().clone();
        let now = Instant::now();
        let findings = analysis::analyse(&ledger, now, inputs.hung_after, inputs.calm_since);
        let count = |n: usize| n as u64;
        Report {
            seed: inputs.record.map(|r| r.seed),
            holds: count(ledger.holds.len()),
            exclusive_holds: count(ledger.holds.iter().filter(|h| h.exclusive).count()),
            overlaps: findings.overlaps,
            signalled_overlaps: findings.signalled_overlaps,
            increments: ledger.increments,
            counter: ledger.counter,
            lost_increments: ledger
                .increments
                .saturating_sub(ledger.counter)
                .saturating_sub(findings.excused_lost_increments),
            excused_lost_increments: findings.excused_lost_increments,
            token_inversions: findings.token_inversions,
            acquires: count(ledger.acquires.len()),
            hung_acquirers: findings.hung_acquirers,
            slow_acquires: findings.slow_acquires,
            longest_wait_ms: u64::try_from(findings.longest_wait.as_millis()).unwrap_or(u64::MAX),
            longest_wait: findings.longest_wait_described,
            orphans: inputs.orphans,
            wedged_locks: inputs.wedged_locks,
            forced_expiries: count(ledger.expiries.len()),
            faults: inputs.record.map(|r| r.counts.clone()).unwrap_or_default(),
            skipped_faults: inputs.record.map(|r| r.skipped.clone()).unwrap_or_default(),
            restore_errors: inputs.record.map_or(0, |r| count(r.restore_errors.len())),
            violations: findings.violations,
        }
    }
}
