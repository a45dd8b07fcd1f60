//! How a queue names its item nodes and in which order it takes them, one variant per kind of
//! Curator queue. Only [`ItemOrder::Fifo`] is built today; the others' names and orders are
//! Curator's and are here so that `DistributedIdQueue`, `DistributedPriorityQueue` and
//! `DistributedDelayQueue` can be added over the same consumer.
//!
//! | ordering | node name | taken in order of |
//! |---|---|---|
//! | `Fifo` | `queue-<seq>` | the name (so the sequence number) |
//! | `Id` | `queue-\|<id>\|<seq>` | the sequence number |
//! | `Priority` | `queue-` + `1`/`0` (sign) + `%08X` of the priority + `<seq>` | the name |
//! | `Delay` | `queue-\|<%08X epoch ms>\|<seq>` | the time, then the sequence number; not before the time |

use std::time::Duration;

/// The prefix of every item node's name (Curator's `QUEUE_ITEM_NAME`).
pub const QUEUE_ITEM_NAME: &str = "queue-";
/// Separates the fields of an id or delay queue's node name.
pub const SEPARATOR: char = '|';

/// The kind of queue: how item nodes are named and ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ItemOrder {
    /// `queue-<seq>`: first in, first out.
    #[default]
    Fifo,
    /// `queue-|<id>|<seq>`: first in, first out, with an id per item.
    #[allow(dead_code)]
    Id,
    /// `queue-<sign><%08X>`: lowest priority first.
    #[allow(dead_code)]
    Priority,
    /// `queue-|<%08X epoch ms>|<seq>`: earliest time first, none before its time.
    #[allow(dead_code)]
    Delay,
}

impl ItemOrder {
    /// The name prefix (before ZooKeeper's sequence number) of a new item node.
    pub(crate) fn prefix(self) -> String {
        QUEUE_ITEM_NAME.to_string()
    }

    /// The prefix of a node put back after a consumer error: the same kind of name again, so
    /// that names do not grow (Curator CURATOR-56).
    pub(crate) fn requeue_prefix(self, name: &str) -> String {
        match self {
            ItemOrder::Fifo => self.prefix(),
            // Everything up to the sequence number: the id, priority or time stays.
            ItemOrder::Id | ItemOrder::Priority | ItemOrder::Delay => name[..name.len().saturating_sub(10)].to_string(),
        }
    }

    /// Sorts item node names into the order they are taken in.
    pub(crate) fn sort(self, names: &mut [String]) {
        match self {
            ItemOrder::Fifo | ItemOrder::Priority => names.sort(),
            ItemOrder::Id => names.sort_by(|a, b| seq_of(a).cmp(seq_of(b))),
            ItemOrder::Delay => names.sort_by(|a, b| (field(a, 1), seq_of(a)).cmp(&(field(b, 1), seq_of(b)))),
        }
    }

    /// How long before the node `name` may be taken (zero: now), `now_ms` being the epoch time.
    pub(crate) fn delay(self, name: &str, now_ms: u64) -> Duration {
        match self {
            ItemOrder::Delay => field(name, 1)
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .map_or(Duration::ZERO, |at| Duration::from_millis(at.saturating_sub(now_ms))),
            _ => Duration::ZERO,
        }
    }
}

/// The `n`th `|`-separated field of a name (`queue-|<field 1>|<seq>`).
fn field(name: &str, n: usize) -> Option<&str> {
    name.split(SEPARATOR).nth(n)
}

/// The sequence number part of a name: its last 10 characters.
fn seq_of(name: &str) -> &str {
    name.get(name.len().saturating_sub(10)..).unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_curator() {
        let mut ids =
            vec!["queue-|b|0000000002".to_string(), "queue-|a|0000000003".into(), "queue-|c|0000000001".into()];
        ItemOrder::Id.sort(&mut ids);
        assert_eq!(ids[0], "queue-|c|0000000001");
        let mut delays = vec!["queue-|00000002|0000000001".to_string(), "queue-|00000001|0000000002".into()];
        ItemOrder::Delay.sort(&mut delays);
        assert_eq!(delays[0], "queue-|00000001|0000000002");
        assert_eq!(ItemOrder::Delay.delay("queue-|00000010|0000000001", 6), Duration::from_millis(10));
        assert_eq!(ItemOrder::Fifo.requeue_prefix("queue-0000000007"), "queue-");
        assert_eq!(ItemOrder::Id.requeue_prefix("queue-|x|0000000007"), "queue-|x|");
    }
}
