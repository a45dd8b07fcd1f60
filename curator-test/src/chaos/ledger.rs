//! What a [`Checker`](super::Checker) keeps while a chaos run goes on: the holds, acquire
//! attempts, expiries and counter the contenders report, for [`analysis`](super::analysis) to
//! judge at the end. Plain data, below both.

use std::time::Instant;

#[derive(Clone, Debug)]
pub(crate) struct HoldEntry {
    pub(crate) contender: usize,
    pub(crate) token: i64,
    pub(crate) exclusive: bool,
    pub(crate) start: Instant,
    pub(crate) lost: Option<Instant>,
    pub(crate) end: Option<Instant>,
    /// The counter value this hold read for its increment, and when it wrote it plus one.
    pub(crate) increment: Option<(u64, Instant)>,
}

#[derive(Clone, Debug)]
pub(crate) struct AcquireEntry {
    pub(crate) contender: usize,
    pub(crate) start: Instant,
    pub(crate) end: Option<Instant>,
}

#[derive(Clone, Debug)]
pub(crate) struct Ledger {
    /// Offsets in reports are from here (the checker's creation).
    pub(crate) origin: Instant,
    pub(crate) holds: Vec<HoldEntry>,
    pub(crate) acquires: Vec<AcquireEntry>,
    /// (contender, instant) of every forced session expiry.
    pub(crate) expiries: Vec<(usize, Instant)>,
    pub(crate) counter: u64,
    pub(crate) increments: u64,
}
