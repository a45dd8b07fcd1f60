//! What an atomic operation reports: [`AtomicValue`] and its [`AtomicStats`] (Curator's
//! `AtomicValue`, `MutableAtomicValue` and `AtomicStats`).

use std::time::Duration;

/// How an atomic operation went: the tries it took and the time spent, optimistically and
/// under the promoted mutex.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtomicStats {
    /// Optimistic attempts (a read and a versioned write each).
    pub optimistic_tries: u32,
    /// Attempts made while holding the promoted mutex (0 when not promoted).
    pub promoted_lock_tries: u32,
    /// Time spent in the optimistic phase.
    pub optimistic_time: Duration,
    /// Time spent in the promoted phase, the wait for the mutex included.
    pub promoted_time: Duration,
}

/// The outcome of an atomic operation. Always check [`succeeded`](Self::succeeded): an
/// operation that ran out of tries under contention returns normally with `succeeded ==
/// false` (errors, such as a connection its retry policy gave up on, are `Err`s instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtomicValue<T> {
    /// Whether the value was changed (for `get`, whether it was read).
    pub succeeded: bool,
    /// The value before the operation: the value the successful write replaced, or the last
    /// value read when it did not succeed.
    pub pre_value: T,
    /// The value after the operation: the value written when it succeeded, otherwise
    /// meaningless (the value the last try would have written).
    pub post_value: T,
    /// Tries and time spent.
    pub stats: AtomicStats,
}

impl<T> AtomicValue<T> {
    /// Whether the operation succeeded (the field, as Curator's method).
    pub fn succeeded(&self) -> bool {
        self.succeeded
    }

    /// The same outcome with other values.
    pub(crate) fn map_to<U>(self, pre_value: U, post_value: U) -> AtomicValue<U> {
        AtomicValue { succeeded: self.succeeded, pre_value, post_value, stats: self.stats }
    }
}
