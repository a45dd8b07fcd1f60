//! Choosing the next fault: a pure function of a generator, the configuration and which
//! targets hold, so that a seed alone fixes the sequence.

use std::time::Duration;

use super::fault::{Fault, FaultKind};
use super::rng::ChaosRng;

/// One planned fault: how long to wait before it, what it is and what it is aimed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// The pause before the fault (after the previous one was undone).
    pub gap: Duration,
    /// The fault.
    pub fault: Fault,
    /// The [`Target`](super::Target) index, for faults that act on a client.
    pub target: Option<usize>,
    /// The cluster member, for [`Fault::ServerPause`] and [`Fault::ServerRestart`] on a
    /// cluster. For [`Fault::LeaderKill`] the member is whoever leads when it happens, so it
    /// is known only in the [`ChaosRecord`](super::ChaosRecord).
    pub member: Option<usize>,
}

/// The configuration that fault choices depend on.
#[derive(Clone, Debug)]
pub(crate) struct Planner {
    pub(crate) kinds: Vec<FaultKind>,
    pub(crate) targets: usize,
    /// Cluster members; 0 without a cluster.
    pub(crate) members: usize,
    pub(crate) session_timeout: Duration,
    pub(crate) mean_gap: Duration,
    pub(crate) long_chance: f64,
}

impl Planner {
    /// Plans one fault from `rng` (a generator for this step alone). `holders` are the targets
    /// that hold right now: a long partition goes to one of them when there are any.
    ///
    /// Everything but the target is drawn before the target, and only the target depends on
    /// `holders`, so hints change where faults land but never which faults come or how long
    /// they last.
    pub(crate) fn plan(&self, rng: &mut ChaosRng, holders: &[usize]) -> Planned {
        let gap = self.gap(rng);
        self.after_gap(rng, gap, holders)
    }

    /// The first draw of a step: the pause before its fault (at most four mean gaps).
    pub(crate) fn gap(&self, rng: &mut ChaosRng) -> Duration {
        rng.exponential(self.mean_gap).min(self.mean_gap * 4)
    }

    /// The rest of a step, once the gap has passed (so that `holders` is current).
    pub(crate) fn after_gap(&self, rng: &mut ChaosRng, gap: Duration, holders: &[usize]) -> Planned {
        let t = self.session_timeout;
        let kind = self.kinds.get(rng.index(self.kinds.len())).copied().unwrap_or(FaultKind::Cut);
        let long = kind.is_partition() && rng.chance(self.long_chance);
        let partition = if long { rng.between(t * 5 / 4, t * 2) } else { rng.between(t / 20, t * 3 / 4) };
        let fault = match kind {
            FaultKind::Expire => Fault::Expire,
            FaultKind::Cut => Fault::Cut,
            FaultKind::Pause => Fault::Pause(partition),
            FaultKind::PauseRequests => Fault::PauseRequests(partition),
            FaultKind::PauseReplies => Fault::PauseReplies(partition),
            FaultKind::Reject => Fault::Reject(partition),
            FaultKind::Latency => Fault::Latency(rng.between(t / 40, t / 5), rng.between(t / 4, t)),
            FaultKind::SwallowReply => Fault::SwallowReply,
            FaultKind::ServerPause => Fault::ServerPause(rng.between(t / 10, t * 3 / 2)),
            FaultKind::ServerRestart => Fault::ServerRestart,
            FaultKind::LeaderKill => Fault::LeaderKill,
        };
        let member = match kind {
            FaultKind::ServerPause | FaultKind::ServerRestart if self.members > 0 => Some(rng.index(self.members)),
            _ => None,
        };
        let target = if !kind.needs_target() {
            None
        } else if long && !holders.is_empty() {
            holders.get(rng.index(holders.len())).copied()
        } else {
            Some(rng.index(self.targets))
        };
        Planned { gap, fault, target, member }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planner() -> Planner {
        Planner {
            kinds: FaultKind::ALL.to_vec(),
            targets: 3,
            members: 3,
            session_timeout: Duration::from_secs(4),
            mean_gap: Duration::from_millis(500),
            long_chance: 0.5,
        }
    }

    fn plans(seed: u64, holders: &[usize]) -> Vec<Planned> {
        let p = planner();
        let mut master = ChaosRng::new(seed);
        (0..300).map(|_| p.plan(&mut master.fork(), holders)).collect()
    }

    #[test]
    fn a_seed_fixes_the_plan_and_hints_move_only_long_partitions() {
        assert_eq!(plans(3, &[]), plans(3, &[]));
        assert_ne!(plans(3, &[]), plans(4, &[]));
        let free = plans(3, &[]);
        let held = plans(3, &[2]);
        let t = Duration::from_secs(4);
        let mut moved = 0;
        for (a, b) in free.iter().zip(&held) {
            assert_eq!((a.gap, a.fault, a.member), (b.gap, b.fault, b.member));
            let long = a.fault.fault_kind().is_partition() && a.fault.duration().is_some_and(|d| d > t);
            if long {
                assert_eq!(b.target, Some(2), "a long partition missed the holder: {b:?}");
                moved += usize::from(a.target != b.target);
            } else {
                assert_eq!(a.target, b.target);
            }
        }
        assert!(moved > 0, "no long partition was aimed elsewhere without the hint");
    }

    #[test]
    fn durations_and_indices_stay_in_range() {
        let t = Duration::from_secs(4);
        for p in plans(11, &[]) {
            assert!(p.gap <= Duration::from_secs(2));
            if let Some(d) = p.fault.duration() {
                assert!(d >= t / 40 && d <= t * 2, "{p:?}");
            }
            assert!(p.target.is_some_and(|i| i < 3) == p.fault.fault_kind().needs_target(), "{p:?}");
            assert!(p.member.iter().all(|&m| m < 3), "{p:?}");
        }
    }
}
