//! The judgement behind [`Checker::report`](super::Checker::report): overlapping holds, token
//! inversions and hung acquirers, from a copy of the ledger.

use std::time::{Duration, Instant};

use super::checker::{HoldEntry, Ledger};

/// Violations described in a report, at most.
const MAX_DESCRIBED: usize = 10;

#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub(crate) overlaps: u64,
    pub(crate) signalled_overlaps: u64,
    pub(crate) token_inversions: u64,
    pub(crate) hung_acquirers: u64,
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

pub(crate) fn analyse(ledger: &Ledger, now: Instant, hung_after: Duration) -> Findings {
    let mut findings = Findings::default();
    let by_grant = grant_order(&ledger.holds);
    overlaps(ledger, &by_grant, now, &mut findings);
    inversions(ledger, &by_grant, &mut findings);
    for (i, a) in ledger.acquires.iter().enumerate() {
        if a.end.is_none() && a.start + hung_after <= now {
            findings.hung_acquirers += 1;
            findings.describe(|| {
                // What the wait saw: a waiter others kept overtaking (its session lost again and
                // again, or a lost wake-up) against a lock nobody could take (no quorum).
                let overtaken = ledger.holds.iter().filter(|h| h.contender != a.contender && h.start >= a.start).count();
                let expired = ledger.expiries.iter().filter(|(c, at)| *c == a.contender && *at >= a.start).count();
                format!(
                    "acquire {i} of contender {} open since {}; meanwhile {overtaken} holds by others began and its session was expired {expired} times",
                    a.contender,
                    offset(ledger.origin, a.start)
                )
            });
        }
    }
    findings
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
