//! # curator-recipes
//!
//! ZooKeeper recipes with the ideas of Apache Curator, over [`curator_core`], wire compatible
//! with Curator 5.x (same node names, modes and data).
//!
//! - [`barriers`]: `DistributedBarrier` and `DistributedDoubleBarrier`.
//! - [`locks`]: `InterProcessMutex`, `InterProcessReadWriteLock`, `InterProcessSemaphoreV2`,
//!   `InterProcessSemaphoreMutex`, `InterProcessMultiLock`.
//! - [`leader`]: `LeaderLatch` and `LeaderSelector`, with fenced leaderships and an observer
//!   stream for processes that do not take part.
//! - [`nodes`]: `PersistentNode`, `PersistentTtlNode`, `GroupMember`.
//! - [`shared`]: `SharedValue` and `SharedCount`, a value every client sees; [`atomic`]:
//!   `DistributedAtomicLong`, `DistributedAtomicInteger`, `DistributedAtomicValue`,
//!   `CachedAtomicLong`.
//! - [`queue`]: `DistributedQueue`, Curator's queue with its node names and framing, bounded
//!   and lock-safe modes (the lock-safe final delete is fenced by the lock node), with the
//!   `DistributedIdQueue`, `DistributedPriorityQueue` and `DistributedDelayQueue` over it; and
//!   `SimpleDistributedQueue`, Curator's queue of raw byte items.
//! - [`watch`]: `PersistentWatcher`, a persistent (optionally recursive) watch that survives
//!   reconnections and new sessions, with reset notifications.
#![warn(missing_docs)]

pub mod atomic;
pub mod barriers;
pub mod leader;
pub mod locks;
pub mod nodes;
pub mod queue;
mod sequential;
pub mod shared;
pub mod watch;
