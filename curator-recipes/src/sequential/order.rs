//! Ordering the contenders and deciding, from that order, whether our node holds
//! ([`Predicate`]) or which nodes it must outlast first ([`Verdict`]).

use super::names::{sequence_in, Contender};

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

/// Decides, from the ordered contenders, whether a node holds, and what a waiter watches
/// (docs/architecture.md section 8.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Predicate {
    /// The first `n` contenders hold (mutex and write lock: 1). A waiter next in line watches the
    /// node it waits for and holds when it goes; one further back watches its predecessor (as
    /// Curator does) and lists again when it goes.
    Leases(usize),
    /// Leader election (the latch, the selector): the first contender holds. Waiters wait long
    /// and a handoff is rare, so a waiter further back watches the node *before* its predecessor:
    /// when that goes, the line has moved up to it, and it lists and watches the new leader
    /// before its own turn comes, so the handoff to it needs no listing.
    Leader,
    /// A reader holds when no write node is before it, or at once when this handle holds the
    /// write lock (`holds_write`).
    Read { holds_write: bool },
}

impl Predicate {
    /// The verdict for our node `ours` among the ordered contenders `sorted`.
    pub(crate) fn decide(self, sorted: &[Contender], ours: &str) -> Verdict {
        let Some(index) = sorted.iter().position(|c| c.name == ours) else { return Verdict::Missing };
        match self {
            Predicate::Leases(n) => leases(sorted, index, n.max(1), index.saturating_sub(n.max(1))),
            // Far back, the node before the predecessor: index >= 2 there.
            Predicate::Leader => leases(sorted, index, 1, index.saturating_sub(2)),
            Predicate::Read { holds_write: true } => Verdict::Hold,
            Predicate::Read { holds_write: false } => {
                // Only writers queued before us matter; writers after us wait for us.
                let writers: Vec<&Contender> = sorted[..index].iter().filter(|c| c.is_writer()).collect();
                match writers.as_slice() {
                    [] => Verdict::Hold,
                    // A read node that a downgrade adds does not block us: hold when it goes.
                    [only] => Verdict::Wait { nodes: vec![only.name.clone()], then: AfterWatch::Hold },
                    // The nearest writer ahead: writers hold one at a time and in order, so when
                    // it goes the others have gone (unless one left out of turn, which the
                    // listing then shows). Curator watches the first and lists once per writer.
                    [.., nearest] => Verdict::Wait { nodes: vec![nearest.name.clone()], then: AfterWatch::Recheck },
                }
            }
        }
    }
}

/// The first `n` hold; a waiter with one node to outlast watches it (and holds when it goes,
/// unless it is a write node), one further back watches `sorted[far]` and lists again.
fn leases(sorted: &[Contender], index: usize, n: usize, far: usize) -> Verdict {
    if index < n {
        return Verdict::Hold;
    }
    // The first `blocking` contenders must go before we are within the first n.
    let blocking = index + 1 - n;
    if blocking == 1 {
        // A write node's holder may add, before deleting it, a read node with the same (lower)
        // sequence (Curator 5.5's downgrade): after a write node goes, list again. Lock and read
        // nodes are always sequential: they never come back.
        let then = if sorted[0].is_writer() { AfterWatch::Recheck } else { AfterWatch::Hold };
        return Verdict::Wait { nodes: vec![sorted[0].name.clone()], then };
    }
    Verdict::Wait { nodes: vec![sorted[far].name.clone()], then: AfterWatch::Recheck }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use curator_core::path;

    use super::*;
    use crate::sequential::names::{MUTEX_LOCK_NAME, READ_LOCK_NAME, WRITE_LOCK_NAME};

    fn names(cs: &[Contender]) -> Vec<String> {
        cs.iter().map(|c| c.name.clone()).collect()
    }

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
        let mutex = Predicate::Leases(1);
        assert_eq!(mutex.decide(&c, &all[0]), Verdict::Hold);
        // Next in line: watch the holder, hold when it goes.
        assert_eq!(mutex.decide(&c, &all[1]), Verdict::Wait { nodes: vec![all[0].clone()], then: AfterWatch::Hold });
        // Further back, however near: the predecessor (Curator's), then list again.
        assert_eq!(mutex.decide(&c, &all[2]), Verdict::Wait { nodes: vec![all[1].clone()], then: AfterWatch::Recheck });
        assert_eq!(
            mutex.decide(&c, &all[15]),
            Verdict::Wait { nodes: vec![all[14].clone()], then: AfterWatch::Recheck }
        );
        // n leases: the node n ahead of us.
        assert_eq!(
            Predicate::Leases(2).decide(&c, &all[15]),
            Verdict::Wait { nodes: vec![all[13].clone()], then: AfterWatch::Recheck }
        );
        assert_eq!(mutex.decide(&c, "nope"), Verdict::Missing);
        assert_eq!(Predicate::Leases(3).decide(&c, &all[2]), Verdict::Hold);
        let set: HashSet<&str> = [all[0].as_str()].into_iter().collect();
        assert_eq!(
            Predicate::Leases(3).decide(&c, &all[3]),
            Verdict::Wait { nodes: names_in(&c, &set), then: AfterWatch::Hold }
        );
    }

    #[test]
    fn leader_predicate_looks_one_node_further_ahead() {
        let mut all = Vec::new();
        for i in 0..20 {
            all.push(format!("_c_{i}-latch-{}", path::format_sequence(i)));
        }
        let c = contenders(&all, &["latch-"]);
        let leader = Predicate::Leader;
        assert_eq!(leader.decide(&c, &all[0]), Verdict::Hold);
        assert_eq!(leader.decide(&c, &all[1]), Verdict::Wait { nodes: vec![all[0].clone()], then: AfterWatch::Hold });
        // The node before the predecessor: when it goes, we are next in line.
        assert_eq!(
            leader.decide(&c, &all[2]),
            Verdict::Wait { nodes: vec![all[0].clone()], then: AfterWatch::Recheck }
        );
        assert_eq!(
            leader.decide(&c, &all[15]),
            Verdict::Wait { nodes: vec![all[13].clone()], then: AfterWatch::Recheck }
        );
        assert_eq!(leader.decide(&c, "nope"), Verdict::Missing);
    }

    #[test]
    fn read_predicate_waits_only_for_earlier_writers() {
        let all = kids(&[
            "_c_1-__READ__0000000001",
            "_c_2-__WRIT__0000000002",
            "_c_3-__READ__0000000003",
            "_c_4-__WRIT__0000000004",
            "_c_5-__WRIT__0000000005",
            "_c_6-__READ__0000000006",
        ]);
        let c = contenders(&all, &[READ_LOCK_NAME, WRITE_LOCK_NAME]);
        let read = Predicate::Read { holds_write: false };
        assert_eq!(read.decide(&c, &all[0]), Verdict::Hold);
        // The kazoo 2.8 bug: the reader must not wait for the writer queued after it.
        assert_eq!(read.decide(&c, &all[2]), Verdict::Wait { nodes: vec![all[1].clone()], then: AfterWatch::Hold });
        assert_eq!(Predicate::Read { holds_write: true }.decide(&c, &all[2]), Verdict::Hold);
        // Several writers ahead: the nearest, then list again.
        assert_eq!(read.decide(&c, &all[5]), Verdict::Wait { nodes: vec![all[4].clone()], then: AfterWatch::Recheck });
        // A writer must be first among all nodes: it watches its predecessor and lists again.
        let write = Predicate::Leases(1);
        assert_eq!(write.decide(&c, &all[3]), Verdict::Wait { nodes: vec![all[2].clone()], then: AfterWatch::Recheck });
        // Next in line behind a write node, it lists again after it goes (a downgrade may have
        // added a read node with that node's sequence); behind a read node, it holds.
        assert_eq!(write.decide(&c, &all[1]), Verdict::Wait { nodes: vec![all[0].clone()], then: AfterWatch::Hold });
        let writer_first = kids(&["_c_2-__WRIT__0000000002", "_c_4-__WRIT__0000000004"]);
        let c = contenders(&writer_first, &[READ_LOCK_NAME, WRITE_LOCK_NAME]);
        assert_eq!(
            write.decide(&c, &writer_first[1]),
            Verdict::Wait { nodes: vec![writer_first[0].clone()], then: AfterWatch::Recheck }
        );
    }
}
