//! How a queue names its item nodes and in which order it takes them, one variant per kind of
//! Curator queue (`DistributedQueue`, `DistributedIdQueue`, `DistributedPriorityQueue`,
//! `DistributedDelayQueue`), all over the one consumer. Names and orders are Curator's.
//!
//! | ordering | node name | taken in order of |
//! |---|---|---|
//! | `Fifo` | `queue-<seq>` | the name (so the sequence number) |
//! | `Id` | `queue-\|<id>\|<seq>` | the sequence number |
//! | `Priority` | `queue-` + `1`/`0` (sign) + `%08X` of the priority + `<seq>` | the name |
//! | `Delay` | `queue-\|<%08X epoch ms>\|<seq>` | the time, then the sequence number; not before the time |
//!
//! `%08X` is Java's: upper-case hex, at least 8 digits (an epoch in ms today has 11), so delay
//! times are compared as numbers, not as text. A priority is written as its 32 bits, after a
//! sign digit, so that the names sort as the priorities do (Curator's `priorityToString`):
//! -1 is `0FFFFFFFF`, 0 is `100000000`.

use std::time::Duration;

/// The prefix of every item node's name (Curator's `QUEUE_ITEM_NAME`).
pub const QUEUE_ITEM_NAME: &str = "queue-";
/// Separates the fields of an id or delay queue's node name.
pub const SEPARATOR: char = '|';
/// The sign digit of a priority queue's name for a priority of 0 or more.
pub const NON_NEGATIVE_PRIORITY: char = '1';
/// The sign digit of a priority queue's name for a negative priority (sorts first).
pub const NEGATIVE_PRIORITY: char = '0';

/// `queue-|<id>|`: the name prefix of an id queue's item (the id is checked by the caller).
pub(crate) fn id_prefix(id: &str) -> String {
    format!("{QUEUE_ITEM_NAME}{SEPARATOR}{id}{SEPARATOR}")
}

/// `queue-<sign><%08X>`: the name prefix of a priority queue's item.
pub(crate) fn priority_prefix(priority: i32) -> String {
    let sign = if priority >= 0 { NON_NEGATIVE_PRIORITY } else { NEGATIVE_PRIORITY };
    // Java's `(long) priority & 0xFFFFFFFFL`: the priority's 32 bits, unsigned.
    format!("{QUEUE_ITEM_NAME}{sign}{:08X}", priority as u32)
}

/// `queue-|<%08X epoch ms>|`: the name prefix of a delay queue's item.
pub(crate) fn delay_prefix(epoch_ms: u64) -> String {
    format!("{QUEUE_ITEM_NAME}{SEPARATOR}{epoch_ms:08X}{SEPARATOR}")
}

/// The id of an id queue's item node: the text between its first two separators (Curator's
/// `parseId`); `None` for a name without two.
pub(crate) fn id_of(name: &str) -> Option<&str> {
    let (_, rest) = name.split_once(SEPARATOR)?;
    rest.split_once(SEPARATOR).map(|(id, _)| id)
}

/// The kind of queue: how item nodes are named and ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ItemOrder {
    /// `queue-<seq>`: first in, first out.
    #[default]
    Fifo,
    /// `queue-|<id>|<seq>`: first in, first out, with an id per item.
    Id,
    /// `queue-<sign><%08X>`: lowest priority first.
    Priority,
    /// `queue-|<%08X epoch ms>|<seq>`: earliest time first, none before its time.
    Delay,
}

impl ItemOrder {
    /// The prefix of a node put back after a consumer error: the same kind of name again, so
    /// that names do not grow (Curator CURATOR-56).
    pub(crate) fn requeue_prefix(self, name: &str) -> String {
        match self {
            ItemOrder::Fifo => QUEUE_ITEM_NAME.to_string(),
            // Everything up to the sequence number: the id, priority or time stays. (Curator
            // keeps the id only; its priority and delay items come back as `queue-<seq>`.)
            ItemOrder::Id | ItemOrder::Priority | ItemOrder::Delay => {
                name.get(..name.len().saturating_sub(SEQUENCE_LEN)).unwrap_or(QUEUE_ITEM_NAME).to_string()
            }
        }
    }

    /// Sorts item node names into the order they are taken in.
    pub(crate) fn sort(self, names: &mut [String]) {
        match self {
            ItemOrder::Fifo | ItemOrder::Priority => names.sort(),
            ItemOrder::Id => names.sort_by(|a, b| seq_of(a).cmp(seq_of(b))),
            ItemOrder::Delay => names.sort_by(|a, b| (epoch_of(a), seq_of(a)).cmp(&(epoch_of(b), seq_of(b)))),
        }
    }

    /// How long before the node `name` may be taken (zero: now), `now_ms` being the epoch time.
    pub(crate) fn delay(self, name: &str, now_ms: u64) -> Duration {
        match self {
            ItemOrder::Delay => Duration::from_millis(epoch_of(name).saturating_sub(now_ms)),
            _ => Duration::ZERO,
        }
    }
}

/// The length of ZooKeeper's sequence number at the end of a sequential node's name.
const SEQUENCE_LEN: usize = 10;

/// The time of a delay queue's item node: the hex between its last two separators (Curator's
/// `getEpoch`); 0 (due now, first in line) when there is none, as in Curator.
fn epoch_of(name: &str) -> u64 {
    name.rsplit_once(SEPARATOR)
        .and_then(|(head, _)| head.rsplit_once(SEPARATOR))
        .and_then(|(_, hex)| u64::from_str_radix(hex, 16).ok())
        .unwrap_or(0)
}

/// The sequence number part of a name: its last 10 characters.
fn seq_of(name: &str) -> &str {
    name.get(name.len().saturating_sub(SEQUENCE_LEN)..).unwrap_or(name)
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
        assert_eq!(ItemOrder::Priority.requeue_prefix("queue-1000000050000000007"), "queue-100000005");
    }

    /// The values of Curator's `priorityToString` and `epochToString`, and names that sort as
    /// the numbers do.
    #[test]
    fn names_as_curator() {
        assert_eq!(priority_prefix(0), "queue-100000000");
        assert_eq!(priority_prefix(10), "queue-10000000A");
        assert_eq!(priority_prefix(-1), "queue-0FFFFFFFF");
        assert_eq!(priority_prefix(i32::MIN), "queue-080000000");
        assert_eq!(priority_prefix(i32::MAX), "queue-17FFFFFFF");
        let priorities = [i32::MIN, -70000, -2, -1, 0, 1, 255, 256, 70000, i32::MAX];
        let mut names: Vec<String> =
            priorities.iter().rev().enumerate().map(|(seq, p)| format!("{}{seq:010}", priority_prefix(*p))).collect();
        ItemOrder::Priority.sort(&mut names);
        let expected: Vec<String> = priorities.iter().map(|p| priority_prefix(*p)).collect();
        assert_eq!(names.iter().map(|n| n[..n.len() - SEQUENCE_LEN].to_string()).collect::<Vec<_>>(), expected);

        assert_eq!(delay_prefix(1), "queue-|00000001|");
        assert_eq!(delay_prefix(1_700_000_000_000), "queue-|18BCFE56800|");
        // 9 hex digits after 8: a number comparison, not a text one.
        let mut delays = vec![
            format!("{}0000000001", delay_prefix(0x1_0000_0000)),
            format!("{}0000000002", delay_prefix(0xFFFF_FFFF)),
        ];
        ItemOrder::Delay.sort(&mut delays);
        assert_eq!(delays[0], "queue-|FFFFFFFF|0000000002");
        assert_eq!(ItemOrder::Delay.delay("queue-0000000003", 5), Duration::ZERO);

        assert_eq!(id_prefix("job 7"), "queue-|job 7|");
        assert_eq!(id_of("queue-|job 7|0000000001"), Some("job 7"));
        assert_eq!(id_of("queue-0000000001"), None);
    }
}
