//! Ordering the contenders and deciding, from that order, whether our node holds
//! ([`Predicate`]) or which nodes it must outlast first ([`Verdict`]).

use super::names::{sequence_in, Contender};

/// A waiter with at most this many nodes to outlast watches all of them and holds once all are
/// gone, instead of watching one and listing again after its deletion (docs/architecture.md
/// section 8).
pub const WATCH_ALL_LIMIT: usize = 8;

/// The contenders among `children`: names with a sequence number after one of `sort_names`,
/// ordered by that number (then by name). Other children are ignored.
pub(crate) fn contenders(children: &[String], sort_names: &[&str]) -> Vec<Contender> {
    let mut out: Vec<Contender> = children
        .iter()
        .filter_map(|name| sequence_in(name, sort_names).map(|sequence| Contender { name: name.clone(), sequence }))
        .collect();
    out.sort_by(|a, b| (a.sequence, &a.name).cmp(&(b.sequence, &b.name)));
    out
}

/// What a waiter does once every watched node is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterWatch {
    /// Hold: the watched nodes were all that stood before us.
    Hold,
    /// List the children again and decide.
    Recheck,
}

/// The predicate's answer for one listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Our node holds.
    Hold,
    /// Wait for these nodes (names) to be deleted.
    Wait { nodes: Vec<String>, then: AfterWatch },
    /// Our node is not among the children.
    Missing,
}

/// Decides, from the ordered contenders, whether a node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Predicate {
    /// The first `n` contenders hold (mutex and write lock: 1).
    Leases(usize),
    /// A reader holds when no write node is before it, or at once when this handle holds the
    /// write lock (`holds_write`).
    Read { holds_write: bool },
}

impl Predicate {
    /// The verdict for our node `ours` among the ordered contenders `sorted`.
    pub(crate) fn decide(self, sorted: &[Contender], ours: &str) -> Verdict {
        let Some(index) = sorted.iter().position(|c| c.name == ours) else { return Verdict::Missing };
        match self {
            Predicate::Leases(n) => {
                let n = n.max(1);
                if index < n {
                    return Verdict::Hold;
                }
                // The first `blocking` contenders must go before we are within the first n.
                let blocking = index + 1 - n;
                if blocking <= WATCH_ALL_LIMIT {
                    // A write node's holder may add, before deleting it, a read node with the
                    // same (lower) sequence (Curator 5.5's downgrade): after a write node goes,
                    // list again. Lock and read nodes are always sequential: they never come back.
                    let watched = &sorted[..blocking];
                    let then =
                        if watched.iter().any(Contender::is_writer) { AfterWatch::Recheck } else { AfterWatch::Hold };
                    Verdict::Wait { nodes: names(watched), then }
                } else {
                    // Far back: watch the blocking node just before the last one, and list again
                    // when it goes. In a line that moves one holder at a time, that is when the
                    // line has moved up to us: we are then second, watch the node ahead (the
                    // holder), and hold when it goes without listing again. Our listing overlaps
                    // the handoff to the node ahead of us, instead of following the handoff to
                    // us, as it would if we watched only the node just ahead (Curator's way).
                    Verdict::Wait { nodes: vec![sorted[index - n - 1].name.clone()], then: AfterWatch::Recheck }
                }
            }
            Predicate::Read { holds_write: true } => Verdict::Hold,
            Predicate::Read { holds_write: false } => {
                // Only writers queued before us matter; writers after us wait for us.
                let writers: Vec<&Contender> = sorted[..index].iter().filter(|c| c.is_writer()).collect();
                match writers.first() {
                    None => Verdict::Hold,
                    Some(_) if writers.len() <= WATCH_ALL_LIMIT => Verdict::Wait {
                        nodes: writers.iter().map(|c| c.name.clone()).collect(),
                        then: AfterWatch::Hold,
                    },
                    Some(first) => Verdict::Wait { nodes: vec![first.name.clone()], then: AfterWatch::Recheck },
                }
            }
        }
    }
}

fn names(cs: &[Contender]) -> Vec<String> {
    cs.iter().map(|c| c.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use curator_core::path;

    use super::*;
    use crate::sequential::names::{MUTEX_LOCK_NAME, READ_LOCK_NAME, WRITE_LOCK_NAME};

    fn kids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// Names of the contenders among `sorted` that are in `set`, in order.
    fn names_in(sorted: &[Contender], set: &HashSet<&str>) -> Vec<String> {
        sorted.iter().filter(|c| set.contains(c.name.as_str())).map(|c| c.name.clone()).collect()
    }

    #[test]
    fn orders_by_sequence_not_name_and_ignores_garbage() {
        let c = contenders(
            &kids(&["_c_b-lock-0000000010", "_c_a-lock-0000000002", "junk", "lock-", "x-lock-12a"]),
            &[MUTEX_LOCK_NAME],
        );
        assert_eq!(names(&c), kids(&["_c_a-lock-0000000002", "_c_b-lock-0000000010"]));
    }

    #[test]
    fn mutex_predicate() {
        let mut all = Vec::new();
        for i in 0..20 {
            all.push(format!("_c_{i}-lock-{}", path::format_sequence(i)));
        }
        let c = contenders(&all, &[MUTEX_LOCK_NAME]);
        assert_eq!(Predicate::Leases(1).decide(&c, &all[0]), Verdict::Hold);
        assert_eq!(
            Predicate::Leases(1).decide(&c, &all[3]),
            Verdict::Wait { nodes: kids(&[&all[0], &all[1], &all[2]]), then: AfterWatch::Hold }
        );
        // Far back: the node before the one just ahead of us.
        assert_eq!(
            Predicate::Leases(1).decide(&c, &all[15]),
            Verdict::Wait { nodes: vec![all[13].clone()], then: AfterWatch::Recheck }
        );
        assert_eq!(
            Predicate::Leases(1).decide(&c, &all[WATCH_ALL_LIMIT + 1]),
            Verdict::Wait { nodes: vec![all[WATCH_ALL_LIMIT - 1].clone()], then: AfterWatch::Recheck }
        );
        assert_eq!(
            Predicate::Leases(2).decide(&c, &all[15]),
            Verdict::Wait { nodes: vec![all[12].clone()], then: AfterWatch::Recheck }
        );
        assert_eq!(Predicate::Leases(1).decide(&c, "nope"), Verdict::Missing);
        assert_eq!(Predicate::Leases(3).decide(&c, &all[2]), Verdict::Hold);
        let set: HashSet<&str> = [all[0].as_str()].into_iter().collect();
        assert_eq!(
            Predicate::Leases(3).decide(&c, &all[3]),
            Verdict::Wait { nodes: names_in(&c, &set), then: AfterWatch::Hold }
        );
    }

    #[test]
    fn read_predicate_waits_only_for_earlier_writers() {
        let all = kids(&[
            "_c_1-__READ__0000000001",
            "_c_2-__WRIT__0000000002",
            "_c_3-__READ__0000000003",
            "_c_4-__WRIT__0000000004",
        ]);
        let c = contenders(&all, &[READ_LOCK_NAME, WRITE_LOCK_NAME]);
        let read = Predicate::Read { holds_write: false };
        assert_eq!(read.decide(&c, &all[0]), Verdict::Hold);
        // The kazoo 2.8 bug: the reader must not wait for the writer queued after it.
        assert_eq!(read.decide(&c, &all[2]), Verdict::Wait { nodes: vec![all[1].clone()], then: AfterWatch::Hold });
        assert_eq!(Predicate::Read { holds_write: true }.decide(&c, &all[2]), Verdict::Hold);
        // A writer must be first among all nodes; after a write node goes it lists again (a
        // downgrade may have added a read node with that node's sequence).
        assert_eq!(
            Predicate::Leases(1).decide(&c, &all[3]),
            Verdict::Wait { nodes: kids(&[&all[0], &all[1], &all[2]]), then: AfterWatch::Recheck }
        );
        let readers_only = kids(&["_c_1-__READ__0000000001", "_c_2-__WRIT__0000000002"]);
        let c = contenders(&readers_only, &[READ_LOCK_NAME, WRITE_LOCK_NAME]);
        assert_eq!(
            Predicate::Leases(1).decide(&c, &readers_only[1]),
            Verdict::Wait { nodes: vec![readers_only[0].clone()], then: AfterWatch::Hold }
        );
    }
}
