//! Atomics: their guide is the crate root's "Atomics" section (lib.rs).

mod cached;
mod distributed_value;
mod integer;
mod long;
mod number;
mod optimistic;
mod promotion;
mod result;

pub use cached::{CachedAtomicInteger, CachedAtomicLong, CachedAtomicNumber};
pub use curator_core::{WRITE_TAG_PREFIX, WRITE_TAG_REAP_AGE};
pub use distributed_value::DistributedAtomicValue;
pub use integer::DistributedAtomicInteger;
pub use long::DistributedAtomicLong;
pub use number::{AtomicNumber, DistributedAtomicNumber};
pub use optimistic::PromotedToLock;
pub use result::{AtomicStats, AtomicValue};
