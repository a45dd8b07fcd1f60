//! Atomic values in one node, Curator 5.x compatible (Curator's `recipes.atomic`):
//! [`DistributedAtomicLong`] (8 bytes big-endian), [`DistributedAtomicInteger`] (4 bytes),
//! [`DistributedAtomicValue`] (bytes), and [`CachedAtomicLong`] for ids from reserved blocks.
//!
//! Every change runs an optimistic loop under the recipe's own retry policy, then, when
//! configured, promotes to an [`InterProcessMutex`](crate::locks::InterProcessMutex)
//! ([`PromotedToLock`]). Results ([`AtomicValue`]) say whether they succeeded, with the values
//! before and after and the tries and time spent ([`AtomicStats`]). A write whose reply was
//! lost is decided by the handle's write tag, never repeated blindly (docs/architecture.md
//! section 16.2); one that cannot be decided (the tag changed by someone else meanwhile, or
//! gone past its reap age) fails with [`CuratorError::OutcomeUnknown`](curator_core::CuratorError::OutcomeUnknown).

mod cached;
mod distributed_value;
mod integer;
mod long;
mod number;
mod optimistic;
mod promotion;
mod reap;
mod result;
mod tag;

pub use cached::CachedAtomicLong;
pub use distributed_value::DistributedAtomicValue;
pub use integer::DistributedAtomicInteger;
pub use long::DistributedAtomicLong;
pub use number::{AtomicNumber, DistributedAtomicNumber};
pub use optimistic::PromotedToLock;
pub use result::{AtomicStats, AtomicValue};
pub use tag::{WRITE_TAG_PREFIX, WRITE_TAG_REAP_AGE};
