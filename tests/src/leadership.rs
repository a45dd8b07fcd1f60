//! The leadership checker every election test uses (issue 15), and participants that record
//! into it.
//!
//! Participants record each term of leadership: who, its fencing token, the moment the
//! participant was told it leads, and the moment it was told the term is over or may be
//! (`NotLeader`, `Ended`, [`Leadership::lost`](curator_recipes::HeldNode::lost)), with the reason. A term ends at the *first*
//! such signal: from then on its holder knows, and must stop acting as leader.
//!
//! [`LeadershipChecker::report`] then counts:
//! - **overlaps**: a term that began while an earlier one had not been told it was over;
//! - **excused** overlaps, counted apart: the earlier holder's session was expired by force
//!   ([`curator_test::expire_session`], noted with [`LeadershipChecker::forced_expiry`]) during
//!   its term and before the later term began, and it had not been told by then. Nobody can warn
//!   a client of that in advance: the server revokes at once (as `excused_lost_increments` in
//!   [`crate::chaos`]'s report for locks);
//! - **token inversions**: a term (in order of start) whose fencing token is not greater than
//!   every earlier term's, unless it is the same participant's node leading again (a latch that
//!   kept its node through a suspension: nobody led in between);
//! - **terms**, and **leaders after calm**: what [`LeadershipChecker::await_one_leader`] saw
//!   once the faults stopped (exactly one leader, who stayed so, is what every test wants).
//!
//! [`latch`] and [`selector`] build a `LeaderLatch` or a `LeaderSelector` that records into a
//! checker; [`LeadershipChecker::record_latch`] records a latch a test built itself, and
//! [`LeadershipChecker::recording`] wraps a selector's own leadership function;
//! [`LeadershipChecker::stopping`] records the end of a term that the participant itself ends
//! without being told (a silent close). Terms another process reports (a Java peer) go in with
//! [`LeadershipChecker::began_at`] / [`LeadershipChecker::ended_at`] and
//! [`instant_of_epoch_us`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use curator_core::CuratorFramework;
use curator_core::{EventStream, ListenerId};
use curator_recipes::{LatchEvent, LeaderLatch, LeaderSelector, Leadership, LockLost, SelectorEvent};
use tokio::sync::watch;

/// One term of leadership, as recorded.
#[derive(Debug, Clone)]
pub struct Term {
    /// The participant's id.
    pub participant: String,
    /// The term's fencing token.
    pub token: i64,
    /// When the participant was told it leads.
    pub start: Instant,
    /// When it was first told the term is over or may be, and why; `None` while it leads.
    pub end: Option<(Instant, String)>,
}

/// A term, as [`LeadershipChecker::began`] returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermId(usize);

#[derive(Debug, Default)]
struct Ledger {
    terms: Vec<Term>,
    /// Forced session expiries: participant, when.
    expiries: Vec<(String, Instant)>,
    /// What the last [`LeadershipChecker::await_one_leader`] saw: open terms at its end.
    leaders_after_calm: Option<usize>,
    /// The `lost()` signals of terms being [watched](LeadershipChecker::watch): a term's watch
    /// task records the end when it runs, which on a loaded machine can be after the next term
    /// began; [`began_at`](LeadershipChecker::began_at) reads them first.
    lost: Vec<(TermId, watch::Receiver<Option<LockLost>>)>,
}

impl Ledger {
    /// `term` ended at `at` because of `reason`, unless it is already recorded as ended earlier
    /// (the earliest moment its holder was told counts).
    fn end_term(&mut self, term: TermId, reason: String, at: Instant) {
        if let Some(t) = self.terms.get_mut(term.0) {
            if t.end.as_ref().is_none_or(|(earlier, _)| *earlier > at) {
                t.end = Some((at, reason));
            }
        }
    }
}

/// What [`LeadershipChecker::report`] found.
#[derive(Debug, Clone, Default)]
pub struct LeadershipReport {
    /// Terms recorded.
    pub terms: usize,
    /// Terms that began while an earlier term's holder had not been told it was over (excused
    /// ones not included).
    pub overlaps: usize,
    /// Overlaps whose earlier holder's session had been expired by force, untold.
    pub excused: usize,
    /// Terms whose token is not greater than every earlier term's.
    pub token_inversions: usize,
    /// Leaders (open terms) when [`LeadershipChecker::await_one_leader`] last returned; `None`
    /// if it was not called.
    pub leaders_after_calm: Option<usize>,
    /// Forced expiries noted.
    pub forced_expiries: usize,
    /// Every finding, in words (excused overlaps too).
    pub findings: Vec<String>,
}

impl LeadershipReport {
    /// No unexcused overlap, no token inversion, and exactly one leader after the calm if that
    /// was asked.
    pub fn is_clean(&self) -> bool {
        self.overlaps == 0 && self.token_inversions == 0 && self.leaders_after_calm.is_none_or(|n| n == 1)
    }
}

impl fmt::Display for LeadershipReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "terms={} overlaps={} excused={} token_inversions={} leaders_after_calm={} forced_expiries={}",
            self.terms,
            self.overlaps,
            self.excused,
            self.token_inversions,
            self.leaders_after_calm.map_or_else(|| "-".to_string(), |n| n.to_string()),
            self.forced_expiries,
        )?;
        if f.alternate() {
            for finding in &self.findings {
                write!(f, "\n  {finding}")?;
            }
        }
        Ok(())
    }
}

/// Records terms of leadership and checks them; see the module docs. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct LeadershipChecker {
    ledger: Arc<Mutex<Ledger>>,
}

impl LeadershipChecker {
    /// An empty checker.
    pub fn new() -> Self {
        Self::default()
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `participant` was told now that it leads, with fencing token `token`.
    pub fn began(&self, participant: &str, token: i64) -> TermId {
        self.began_at(participant, token, Instant::now())
    }

    /// As [`began`](Self::began), at `at`.
    pub fn began_at(&self, participant: &str, token: i64, at: Instant) -> TermId {
        let mut ledger = self.ledger();
        // A term whose holder was already told (its `lost()` is set) ended no later than now,
        // whenever its watch task gets to run.
        let told: Vec<(TermId, String)> = ledger
            .lost
            .iter()
            .filter_map(|(term, lost)| lost.borrow().as_ref().map(|reason| (*term, format!("lost(): {reason}"))))
            .collect();
        ledger.lost.retain(|(_, lost)| lost.borrow().is_none());
        for (term, reason) in told {
            ledger.end_term(term, reason, at);
        }
        ledger.terms.push(Term { participant: participant.to_string(), token, start: at, end: None });
        TermId(ledger.terms.len() - 1)
    }

    /// The holder of `term` was told now that it is over or may be, because of `reason`. Only
    /// the first signal of a term counts (the holder knew from then on).
    pub fn ended(&self, term: TermId, reason: impl fmt::Display) {
        self.ended_at(term, reason, Instant::now());
    }

    /// As [`ended`](Self::ended), at `at`.
    pub fn ended_at(&self, term: TermId, reason: impl fmt::Display, at: Instant) {
        self.ledger().end_term(term, reason.to_string(), at);
    }

    /// `participant`'s open term (its latest, if still open) is over: it was told now, because
    /// of `reason`. For signals that do not name the term (a latch's `NotLeader`). Nothing if
    /// it does not lead.
    pub fn ended_current(&self, participant: &str, reason: impl fmt::Display) {
        let at = Instant::now();
        if let Some(term) = self.open_term_of(participant) {
            self.ended_at(term, reason, at);
        }
    }

    /// `participant` is about to end its own term (a silent close, a step down, a process
    /// killed): recorded as told now.
    pub fn stopping(&self, participant: &str, reason: impl fmt::Display) {
        self.ended_current(participant, reason);
    }

    fn open_term_of(&self, participant: &str) -> Option<TermId> {
        let ledger = self.ledger();
        ledger.terms.iter().rposition(|t| t.participant == participant && t.end.is_none()).map(TermId)
    }

    /// Records the end of `term` when `leadership` says it is over or may be
    /// ([`Leadership::lost_watch`](curator_recipes::HeldNode::lost_watch)), from a task of its own.
    pub fn watch(&self, term: TermId, leadership: &Leadership) {
        let mut lost = leadership.lost_watch();
        self.ledger().lost.push((term, lost.clone()));
        let checker = self.clone();
        tokio::spawn(async move {
            if let Ok(reason) = lost.wait_for(|l| l.is_some()).await {
                let reason = *reason;
                if let Some(reason) = reason {
                    checker.ended(term, format!("lost(): {reason}"));
                }
            }
        });
    }

    /// Records `latch`'s terms as participant `who` (usually its id; a name of the test's own
    /// where latches share an id): `IsLeader` begins a term (and [`watch`](Self::watch)es its
    /// `lost()`), `NotLeader` ends it. Call it before the latch starts. A listener runs a little
    /// after the event: a test that ends a term as soon as it leads waits for the term to show
    /// in [`leaders`](Self::leaders) first.
    pub fn record_latch(&self, latch: &LeaderLatch, who: &str) -> ListenerId {
        let (checker, who) = (self.clone(), who.to_string());
        latch.add_listener(move |event| match event {
            LatchEvent::IsLeader(leadership) => {
                let term = checker.began(&who, leadership.fencing_token());
                checker.watch(term, leadership);
            }
            LatchEvent::NotLeader(reason) => checker.ended_current(&who, format!("NotLeader({reason})")),
            // A kind added later: terms begin with `IsLeader` and end with `NotLeader` only.
            _ => {}
        })
    }

    /// Wraps a selector's leadership function `leader` so that each call records a term of
    /// participant `who`: it begins as the function is called, [`watch`](Self::watch)es its
    /// `lost()`, and ends when the function returns or its future is dropped (the selector
    /// drops it when the term ends, before it tells anyone or deletes its node).
    pub fn recording<F, Fut>(
        &self,
        who: &str,
        leader: F,
    ) -> impl Fn(Leadership) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync + 'static
    where
        F: Fn(Leadership) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (checker, who) = (self.clone(), who.to_string());
        move |leadership: Leadership| {
            let term = checker.began(&who, leadership.fencing_token());
            checker.watch(term, &leadership);
            let end = EndOnDrop { checker: checker.clone(), term };
            let work = leader(leadership);
            Box::pin(async move {
                let _end = end;
                work.await;
            })
        }
    }

    /// Waits (up to `deadline`) until `who` has an open term; false if it never had. For a test
    /// about to end a term it learned of some other way (`has_leadership()`, an event stream)
    /// before the recording listener ran.
    pub async fn recorded(&self, who: &str, deadline: Duration) -> bool {
        curator_test::eventually(deadline, || async { self.open_term_of(who).is_some() }).await
    }

    /// `participant`'s session is being expired by force (call it just before
    /// [`curator_test::expire_session`]).
    pub fn forced_expiry(&self, participant: &str) {
        self.ledger().expiries.push((participant.to_string(), Instant::now()));
    }

    /// Every term so far, in the order recorded.
    pub fn terms(&self) -> Vec<Term> {
        self.ledger().terms.clone()
    }

    /// The participants whose term is open now.
    pub fn leaders(&self) -> Vec<String> {
        self.ledger().terms.iter().filter(|t| t.end.is_none()).map(|t| t.participant.clone()).collect()
    }

    /// Once the faults have stopped: waits (up to `deadline`) until exactly one participant
    /// leads and stays the same leader, in the same term, for `stable`. Returns its id, or
    /// `None` if that never happened; either way the number of leaders it last saw goes into the
    /// report as "leaders after calm".
    pub async fn await_one_leader(&self, deadline: Duration, stable: Duration) -> Option<String> {
        let end = Instant::now() + deadline;
        let mut since: Option<(TermId, Instant)> = None;
        let mut pause = Duration::from_millis(5);
        loop {
            let (open, count) = {
                let ledger = self.ledger();
                let open: Vec<usize> = (0..ledger.terms.len()).filter(|&i| ledger.terms[i].end.is_none()).collect();
                (open.first().copied().map(TermId), open.len())
            };
            let now = Instant::now();
            match (count, open) {
                (1, Some(term)) => match since {
                    Some((t, from)) if t == term => {
                        if now.duration_since(from) >= stable {
                            self.ledger().leaders_after_calm = Some(1);
                            return Some(self.ledger().terms[term.0].participant.clone());
                        }
                    }
                    _ => since = Some((term, now)),
                },
                _ => since = None,
            }
            if now >= end {
                self.ledger().leaders_after_calm = Some(count);
                return None;
            }
            tokio::time::sleep(pause.min(end - now)).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Counts what is described in the module docs.
    pub fn report(&self) -> LeadershipReport {
        let ledger = self.ledger();
        let mut order: Vec<usize> = (0..ledger.terms.len()).collect();
        order.sort_by_key(|&i| ledger.terms[i].start);
        let mut report = LeadershipReport {
            terms: ledger.terms.len(),
            leaders_after_calm: ledger.leaders_after_calm,
            forced_expiries: ledger.expiries.len(),
            ..LeadershipReport::default()
        };
        let describe = |t: &Term, origin: Instant| {
            let ms = |at: Instant| at.saturating_duration_since(origin).as_secs_f64() * 1000.0;
            match &t.end {
                Some((end, why)) => {
                    format!("{} (token {}) {:.1}..{:.1} ms ({why})", t.participant, t.token, ms(t.start), ms(*end))
                }
                None => format!("{} (token {}) {:.1} ms.. (open)", t.participant, t.token, ms(t.start)),
            }
        };
        let origin = order.first().map_or_else(Instant::now, |&i| ledger.terms[i].start);
        for (k, &i) in order.iter().enumerate() {
            let a = &ledger.terms[i];
            for &j in &order[k + 1..] {
                let b = &ledger.terms[j];
                let told_before = a.end.as_ref().is_some_and(|(end, _)| *end <= b.start);
                if told_before {
                    continue;
                }
                let forced =
                    ledger.expiries.iter().any(|(who, at)| *who == a.participant && *at >= a.start && *at <= b.start);
                if forced {
                    report.excused += 1;
                } else {
                    report.overlaps += 1;
                }
                report.findings.push(format!(
                    "{}: {} and {}",
                    if forced { "excused overlap (forced expiry, not told)" } else { "overlap" },
                    describe(a, origin),
                    describe(b, origin)
                ));
            }
        }
        let mut highest: Option<(i64, usize)> = None;
        for &i in &order {
            let t = &ledger.terms[i];
            if let Some((top, at)) = highest {
                // The same node leading again: a latch back on its session after a suspension
                // under the Standard policy keeps its node, first in line all along, so nobody
                // led in between.
                let same_node = t.token == top && ledger.terms[at].participant == t.participant;
                if t.token <= top && !same_node {
                    report.token_inversions += 1;
                    report.findings.push(format!(
                        "token inversion: {} after {}",
                        describe(t, origin),
                        describe(&ledger.terms[at], origin)
                    ));
                }
            }
            if highest.is_none_or(|(top, _)| t.token > top) {
                highest = Some((t.token, i));
            }
        }
        report
    }

    /// The report; panics with it unless it [is clean](LeadershipReport::is_clean).
    pub fn verify(&self) -> LeadershipReport {
        let report = self.report();
        assert!(report.is_clean(), "leadership checker: {report:#}");
        report
    }
}

/// A `LeaderLatch` on `path` for participant `id`, recording into `checker` (see
/// [`LeadershipChecker::record_latch`]). A silent close publishes nothing: call
/// [`LeadershipChecker::stopping`] before it.
pub fn latch(checker: &LeadershipChecker, fw: &CuratorFramework, path: &str, id: &str) -> LeaderLatch {
    let latch = LeaderLatch::builder(fw, path).id(id).build().expect("a valid latch");
    checker.record_latch(&latch, id);
    latch
}

/// Closes `latch` (recorded as `who`): if it leads, waits until its term is recorded, then
/// records the end (a silent close tells no listener) and closes.
pub async fn close_latch(checker: &LeadershipChecker, who: &str, latch: &LeaderLatch) {
    if latch.has_leadership() {
        checker.recorded(who, curator_test::Timing::new().deadline()).await;
    }
    checker.stopping(who, "close()");
    latch.close().await;
}

/// Ends its term when dropped (the selector drops the leadership function's future when the
/// term ends).
struct EndOnDrop {
    checker: LeadershipChecker,
    term: TermId,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.checker.ended(self.term, "leadership future dropped");
    }
}

/// An auto-requeueing `LeaderSelector` on `path` for participant `id`, recording into
/// `checker`: its leadership function ([`LeadershipChecker::recording`]) leads until the
/// selector drops it; `Ended` ends the term too, with the selector's reason.
pub fn selector(checker: &LeadershipChecker, fw: &CuratorFramework, path: &str, id: &str) -> LeaderSelector {
    let (ended, who) = (checker.clone(), id.to_string());
    LeaderSelector::builder(fw, path, checker.recording(id, |_leadership| std::future::pending::<()>()))
        .id(id)
        .auto_requeue(true)
        .listener(move |event| {
            if let SelectorEvent::Ended { end, .. } = event {
                ended.ended_current(&who, format!("Ended({end:?})"));
            }
        })
        .build()
        .expect("a valid selector")
}

/// The `Instant` of `at_us`, microseconds since the Unix epoch (as [`crate::locks::now_us`] and
/// a Java peer on this machine read the clock): for terms another process reported.
pub fn instant_of_epoch_us(at_us: u64) -> Instant {
    let (now, now_us) = (Instant::now(), crate::locks::now_us());
    if at_us <= now_us {
        now.checked_sub(Duration::from_micros(now_us - at_us)).unwrap_or(now)
    } else {
        now + Duration::from_micros(at_us - now_us)
    }
}

/// How long the one leader must stay so for the election tests' [`one_leader`].
pub const STABLE: Duration = Duration::from_millis(200);

/// Waits (up to the test deadline) for exactly one leader in `checker`'s view, who stays so for
/// [`STABLE`]; returns it, or panics with the checker's report.
pub async fn one_leader(checker: &LeadershipChecker) -> String {
    let leader = checker.await_one_leader(curator_test::Timing::new().deadline(), STABLE).await;
    leader.unwrap_or_else(|| panic!("not one stable leader: {:#}", checker.report()))
}

/// The next event of a latch's or a selector's stream, within the test deadline; panics when
/// none comes or the stream ended.
pub async fn next_event<E>(events: &mut EventStream<E>) -> E {
    tokio::time::timeout(curator_test::Timing::new().deadline(), events.next())
        .await
        .expect("no election event within the deadline")
        .expect("the election's event stream ended")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn handover_after_being_told_is_clean() {
        let (c, t) = (LeadershipChecker::new(), Instant::now());
        let a = c.began_at("a", 10, t);
        c.ended_at(a, "NotLeader", t + ms(5));
        c.ended_at(a, "later signal", t + ms(9));
        c.began_at("b", 20, t + ms(6));
        let r = c.report();
        assert!(r.is_clean() && r.terms == 2 && r.overlaps == 0, "{r:#}");
        assert_eq!(c.terms()[0].end.as_ref().map(|e| e.1.as_str()), Some("NotLeader"), "the first signal counts");
    }

    #[test]
    fn a_term_begun_before_the_last_was_told_is_an_overlap() {
        let (c, t) = (LeadershipChecker::new(), Instant::now());
        let a = c.began_at("a", 10, t);
        c.began_at("b", 20, t + ms(5));
        c.ended_at(a, "NotLeader", t + ms(6));
        let r = c.report();
        assert_eq!((r.overlaps, r.excused), (1, 0), "{r:#}");
        assert!(!r.is_clean());
    }

    #[test]
    fn an_untold_forced_expiry_excuses_the_overlap() {
        let (c, t) = (LeadershipChecker::new(), Instant::now());
        let a = c.began_at("a", 10, t);
        c.ledger().expiries.push(("a".into(), t + ms(2)));
        c.began_at("b", 20, t + ms(5));
        c.ended_at(a, "lost(): SessionLost", t + ms(8));
        let r = c.report();
        assert_eq!((r.overlaps, r.excused), (0, 1), "{r:#}");
        assert!(r.is_clean());
        // An expiry after the next term began excuses nothing.
        let (c, t) = (LeadershipChecker::new(), Instant::now());
        c.began_at("a", 10, t);
        c.began_at("b", 20, t + ms(5));
        c.ledger().expiries.push(("a".into(), t + ms(6)));
        assert_eq!(c.report().overlaps, 1);
    }

    #[test]
    fn tokens_must_grow_with_every_new_leader() {
        let (c, t) = (LeadershipChecker::new(), Instant::now());
        let a = c.began_at("a", 20, t);
        c.ended_at(a, "x", t + ms(1));
        let b = c.began_at("b", 10, t + ms(2));
        c.ended_at(b, "x", t + ms(3));
        c.began_at("a", 30, t + ms(4));
        let r = c.report();
        assert_eq!(r.token_inversions, 1, "{r:#}");
        assert!(!r.is_clean());
    }

    #[test]
    fn the_same_node_may_lead_again_but_not_after_another_leader() {
        let (c, t) = (LeadershipChecker::new(), Instant::now());
        let a = c.began_at("a", 20, t);
        c.ended_at(a, "suspended", t + ms(1));
        let a2 = c.began_at("a", 20, t + ms(2));
        c.ended_at(a2, "closed", t + ms(3));
        assert!(c.report().is_clean(), "{:#}", c.report());
        c.began_at("b", 20, t + ms(4));
        assert_eq!(c.report().token_inversions, 1, "another participant with the same token");
    }

    #[tokio::test]
    async fn await_one_leader_wants_one_stable_leader() {
        let c = LeadershipChecker::new();
        assert_eq!(c.await_one_leader(ms(50), ms(10)).await, None);
        assert_eq!(c.report().leaders_after_calm, Some(0));
        c.began("a", 1);
        c.began("b", 2);
        assert_eq!(c.await_one_leader(ms(50), ms(10)).await, None);
        assert_eq!(c.report().leaders_after_calm, Some(2));
        c.ended_current("a", "x");
        assert_eq!(c.await_one_leader(ms(500), ms(10)).await.as_deref(), Some("b"));
        assert_eq!(c.report().leaders_after_calm, Some(1));
    }
}
