//! The judgement behind [`Checker::report`](super::Checker::report): overlapping holds, token
//! inversions and hung acquirers, from a copy of the ledger.

use std::time::{Duration, Instant};

use super::ledger::{HoldEntry, Ledger};

/// Violations described in a report, at most.
const MAX_DESCRIBED: usize = 10;

#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub(crate) overlaps: u64,
    pub(crate) signalled_overlaps: u64,
    pub(crate) token_inversions: u64,
    pub(crate) hung_acquirers: u64,
    pub(crate) slow_acquires: u64,
    pub(crate) excused_lost_increments: u64,
    pub(crate) longest_wait: Duration,
    pub(crate) longest_wait_described: Option<String>,
    /// The first few violations, in words.
    pub(crate) violations: Vec<String>,
}

impl Findings {
    fn describe(&mut self, what: impl FnOnce() -> String) {
        if self.violations.len() < MAX_DESCRIBED {
            self.violations.push(what());
        }
    }
}

pub(crate) fn analyse(ledger: &Ledger, now: Instant, hung_after: Duration, calm_since: Option<Instant>) -> Findings {
    let mut findings = Findings::default();
    let by_grant = grant_order(&ledger.holds);
    overlaps(ledger, &by_grant, now, &mut findings);
    inversions(ledger, &by_grant, &mut findings);
    waits(ledger, now, hung_after, calm_since, &mut findings);
    lost_increments(ledger, now, &mut findings);
    findings
}

/// Holds that read the same counter value each lost an increment to the one before (in grant
/// order). Excused when the earlier holder's session was expired by force before the later
/// grant and it had not been told by then; described either way.
fn lost_increments(ledger: &Ledger, now: Instant, findings: &mut Findings) {
    let mut by_value: std::collections::BTreeMap<u64, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, h) in ledger.holds.iter().enumerate() {
        if let Some((read, _)) = h.increment {
            by_value.entry(read).or_default().push(i);
        }
    }
    for (value, mut holds) in by_value.into_iter().filter(|(_, holds)| holds.len() > 1) {
        holds.sort_by_key(|&i| (ledger.holds[i].start, i));
        for pair in holds.windows(2) {
            let (earlier, later) = (&ledger.holds[pair[0]], &ledger.holds[pair[1]]);
            let end = earlier.end.unwrap_or(now);
            let forced = ledger
                .expiries
                .iter()
                .any(|&(c, at)| c == earlier.contender && at >= earlier.start && at <= end && at <= later.start);
            let told = earlier.lost.is_some_and(|at| at <= later.start);
            let excused = forced && !told;
            if excused {
                findings.excused_lost_increments += 1;
            }
            findings.describe(|| {
                format!(
                    "{}: {} and {} both read {value}{}",
                    if excused { "excused lost increment" } else { "lost increment" },
                    describe_hold(ledger, pair[0]),
                    describe_hold(ledger, pair[1]),
                    if forced { "; the earlier one's session was expired by force before the later grant" } else { "" },
                )
            });
        }
    }
}

/// Hung acquirers (open `hung_after` past the calm), slow ones (a wait longer than
/// `hung_after` while the faults went on) and the longest wait.
fn waits(ledger: &Ledger, now: Instant, hung_after: Duration, calm_since: Option<Instant>, findings: &mut Findings) {
    let mut longest: Option<(Duration, usize)> = None;
    for (i, a) in ledger.acquires.iter().enumerate() {
        let waited = a.end.unwrap_or(now).saturating_duration_since(a.start);
        if longest.is_none_or(|(w, _)| waited > w) {
            longest = Some((waited, i));
        }
        let judged_from = calm_since.map_or(a.start, |calm| calm.max(a.start));
        if a.end.is_none() && judged_from + hung_after <= now {
            findings.hung_acquirers += 1;
            findings.describe(|| format!("hung: {}", describe_wait(ledger, i, now)));
        } else if waited > hung_after {
            findings.slow_acquires += 1;
        }
    }
    if let Some((waited, i)) = longest {
        findings.longest_wait = waited;
        findings.longest_wait_described = Some(describe_wait(ledger, i, now));
    }
}

/// What a wait saw: a waiter others kept overtaking (its session lost again and again, or a
/// lost wake-up), or a lock nobody could take (no quorum).
fn describe_wait(ledger: &Ledger, i: usize, now: Instant) -> String {
    let a = &ledger.acquires[i];
    let end = a.end.unwrap_or(now);
    let during = |at: Instant| at >= a.start && at <= end;
    let overtaken = ledger.holds.iter().filter(|h| h.contender != a.contender && during(h.start)).count();
    let expired = ledger.expiries.iter().filter(|(c, at)| *c == a.contender && during(*at)).count();
    let how = match a.end {
        Some(end) => format!("returned at {}", offset(ledger.origin, end)),
        None => "still open".to_string(),
    };
    format!(
        "acquire {i} of contender {} began at {}, waited {:.1}s ({how}); meanwhile {overtaken} holds by others began and its session was expired {expired} times",
        a.contender,
        offset(ledger.origin, a.start),
        end.saturating_duration_since(a.start).as_secs_f64()
    )
}

/// Hold indices sorted by grant time (then by the order they were reported).
fn grant_order(holds: &[HoldEntry]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..holds.len()).collect();
    order.sort_by_key(|&i| (holds[i].start, i));
    order
}

fn offset(origin: Instant, at: Instant) -> String {
    format!("+{:.3}s", at.saturating_duration_since(origin).as_secs_f64())
}

fn describe_hold(ledger: &Ledger, i: usize) -> String {
    let h = &ledger.holds[i];
    let o = |t: Option<Instant>| t.map_or_else(|| "never".to_string(), |t| offset(ledger.origin, t));
    format!(
        "hold {i} (contender {}, token {}, {}, granted {}, lost {}, ended {})",
        h.contender,
        h.token,
        if h.exclusive { "exclusive" } else { "shared" },
        offset(ledger.origin, h.start),
        o(h.lost),
        o(h.end)
    )
}

/// When the holder of `h` was told, or its session was revoked on purpose during the hold,
/// whichever came first.
fn signalled(ledger: &Ledger, h: &HoldEntry, now: Instant) -> Option<Instant> {
    let end = h.end.unwrap_or(now);
    let expiry = ledger
        .expiries
        .iter()
        .filter(|&&(c, at)| c == h.contender && at >= h.start && at <= end)
        .map(|&(_, at)| at)
        .min();
    h.lost.into_iter().chain(expiry).min()
}

fn overlaps(ledger: &Ledger, by_grant: &[usize], now: Instant, findings: &mut Findings) {
    for (n, &i) in by_grant.iter().enumerate() {
        let earlier = &ledger.holds[i];
        let end = earlier.end.unwrap_or(now);
        let signal = signalled(ledger, earlier, now);
        for &j in &by_grant[n + 1..] {
            let later = &ledger.holds[j];
            if later.start >= end {
                break;
            }
            if later.contender == earlier.contender || !(earlier.exclusive || later.exclusive) {
                continue;
            }
            if signal.is_some_and(|s| s <= later.start) {
                findings.signalled_overlaps += 1;
            } else {
                findings.overlaps += 1;
                findings.describe(|| {
                    format!(
                        "overlap: {} granted while {} held unsignalled",
                        describe_hold(ledger, j),
                        describe_hold(ledger, i)
                    )
                });
            }
        }
    }
}

fn inversions(ledger: &Ledger, by_grant: &[usize], findings: &mut Findings) {
    let mut highest: Option<(i64, usize)> = None;
    for &i in by_grant.iter().filter(|&&i| ledger.holds[i].exclusive) {
        let token = ledger.holds[i].token;
        match highest {
            Some((top, by)) if token <= top => {
                findings.token_inversions += 1;
                findings.describe(|| {
                    format!("token inversion: {} after hold {by} had token {top}", describe_hold(ledger, i))
                });
            }
            _ => highest = Some((token, i)),
        }
    }
}
