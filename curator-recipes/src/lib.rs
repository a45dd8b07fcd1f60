//! # curator-recipes
//!
//! ZooKeeper recipes with the ideas of Apache Curator, over [`curator_core`], wire compatible
//! with Curator 5.x (same node names, modes and data).
//!
//! Coming from Java Curator? `docs/from-curator.md` in the repository maps each idiom, Java
//! then Rust.
//!
//! Every recipe is at the crate's root; each family has its section below:
//! [Locks](#locks) (`InterProcessMutex`, `InterProcessReadWriteLock`, `InterProcessSemaphoreV2`,
//! `InterProcessSemaphoreMutex`, `InterProcessMultiLock`, `QueuedMutex`),
//! [Leader election](#leader-election) (`LeaderLatch`, `LeaderSelector`, `LeaderObserver`),
//! [Nodes that stay](#nodes-that-stay) (`PersistentNode`, `PersistentTtlNode`, `GroupMember`),
//! [Shared values](#shared-values) (`SharedValue`, `SharedCount`), [Atomics](#atomics)
//! (`DistributedAtomicLong`, `DistributedAtomicInteger`, `DistributedAtomicValue`,
//! `CachedAtomicLong`, `CachedAtomicInteger`), [Barriers](#barriers) (`DistributedBarrier`, `DistributedDoubleBarrier`),
//! [Queues](#queues) (`DistributedQueue` and the id, priority and delay queues over it,
//! `SimpleDistributedQueue`), [Persistent watches](#persistent-watches) (`PersistentWatcher`)
//! [Migrations](#migrations) (`MigrationManager`), [Timed leases](#timed-leases)
//! (`TimedLease`, `MultiTimedLease`) and [Partitioning](#partitioning) (`SetPartitioner`).
//!
//! # Locks
//!
//! Distributed locks, wire compatible with Apache Curator 5.x: a Rust service and a Java
//! service using Curator exclude each other on the same path.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use curator_core::CuratorFramework;
//! use curator_recipes::{InterProcessMutex, InterProcessReadWriteLock};
//!
//! let server = curator_test::TestingServer::start().await?;
//! let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
//! fw.start()?;
//!
//! let mutex = InterProcessMutex::new(&fw, "/app/lock")?;
//! let guard = mutex.acquire().await?;
//! // Pass the token to what the lock protects; it grows with every acquisition.
//! let token = guard.fencing_token();
//! tokio::select! {
//!     _ = tokio::time::sleep(Duration::from_millis(10)) => { /* the work */ }
//!     reason = guard.lost() => panic!("lock lost: {reason}"),
//! }
//! guard.release().await?;
//!
//! let rw = InterProcessReadWriteLock::new(&fw, "/app/rw")?;
//! let write = rw.write_lock().acquire().await?;
//! let read = rw.read_lock().acquire().await?; // downgrade: taken while writing
//! write.release().await?;
//! assert!(read.fencing_token() > token);
//! read.release().await?;
//! fw.close().await;
//! # Ok(()) }
//! ```
//!
//! | recipe | nodes under the path `P` |
//! |---|---|
//! | [`InterProcessMutex`] | `P/_c_<uuid>-lock-<seq>` |
//! | [`InterProcessReadWriteLock`] | `P/_c_<uuid>-__WRIT__<seq>`, `P/_c_<uuid>-__READ__<seq>` |
//! | [`InterProcessSemaphoreV2`], [`InterProcessSemaphoreMutex`] | `P/locks/_c_<uuid>-lock-<seq>` (a mutex), `P/leases/_c_<uuid>-lease-<seq>` |
//! | [`InterProcessMultiLock`] | one mutex per path |
//! | [`QueuedMutex`] (ours: many local waiters, one node per process) | as [`InterProcessMutex`] |
//!
//! Past Curator: every hold has a fencing token and tells when it may be lost
//! ([`LockGuard::lost`](crate::sequential::HeldNode::lost)); acquires are cancel safe (dropping the future deletes the node, also
//! when the create's reply was lost); waiters are tasks; the create and the first listing are
//! pipelined (2 round trips and 3 requests per uncontended acquire and release).
//!
//! ## Lock paths are containers
//!
//! A lock's path need not exist: the first acquire creates it, and its missing parents, as
//! container nodes (`CreateMode::Container`), as Curator does, so that lock paths do not pile
//! up. The server deletes a container that has had children once it is empty, at its next
//! container check (`znode.container.checkIntervalMs`, every 60 s by default): about a minute
//! after the lock was last freed, a lock path the lock created is gone, **with any data stored
//! on it**. To keep data on a lock path, create the node yourself before the first acquire (a
//! node that exists is never turned into a container), or build the framework with
//! [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents)
//! (parents are then persistent and stay).
//!
//! ## How an acquire works
//!
//! 1. Send `create(P/_c_<uuid>-<name>, ephemeral sequential)` and, right behind it on the same
//!    session, `getChildren(P)`; ZooKeeper answers in order, so the listing shows our node.
//!    Missing parents are created as containers. If the create's outcome is unknown, list `P`
//!    and look for our protected prefix before creating again.
//! 2. Order the contenders by the sequence number after the lock name (never by the whole
//!    name; other children are ignored) and ask the lock's predicate: hold, or wait for
//!    some nodes to go. The waiter next in line watches the node it waits for and its own
//!    node, and holds once that node is deleted, without listing again (lower sequence
//!    numbers never come back; the watch on its own node proves it still exists); a waiter
//!    further back watches its predecessor, as Curator's does, and lists again after its
//!    deletion: 5 requests per contended cycle, Curator's count. Leader election looks one
//!    node further ahead, so that the next leader is already watching when its turn comes.
//!    Any other watch event (a disconnection, a data change) means "list again".
//! 3. Our node belongs to the session it was made on: after a new session, start over.
//!
//! The locks are thin on top of the crate's sequential-node core (`sequential/`), which every
//! "ephemeral sequential contender" recipe shares; the code of this algorithm is the `Acquire`
//! state machine in `sequential/acquire.rs`, one method per phase.
//!
//! # Leader election
//!
//! Leader election, wire compatible with Apache Curator 5.x: Rust and Java participants of one
//! election agree on one leader.
//!
//! | recipe | nodes under the path `P` | leadership lasts |
//! |---|---|---|
//! | `LeaderLatch` | `P/_c_<uuid>-latch-<seq>`, data = participant id | until close, step down or loss |
//! | `LeaderSelector` | `P/_c_<uuid>-lock-<seq>` (a mutex), data = participant id | while the leadership function runs |
//!
//! Both are built on the crate's sequential-node core, as the locks are: a participant's node is
//! ephemeral sequential, the first in line leads, and each waiter watches the node(s) just
//! ahead of it (no herd when the leader goes).
//!
//! Past Curator: a term of leadership is a [`Leadership`] with a fencing token (the czxid of the
//! leader's node) and a `lost()` future that resolves before anyone else can be made leader;
//! [`Participant`]s are read from node data in one round trip.
//!
//! A leader proclaims a value for its term ([`Leadership::proclaim`], etcd's `Proclaim`: a
//! write guarded by the term to the value node `P/proclaimed`), and a [`LeaderObserver`]'s
//! [`observe`](LeaderObserver::observe) stream yields every new leader and value (etcd's
//! `Observe`) as [`Proclamation`]s.
//!
//! # Nodes that stay
//!
//! Nodes that stay: [`PersistentNode`] (a node kept in place through connection loss, new
//! sessions and deletion by others), [`PersistentTtlNode`] (a TTL node kept alive by touching
//! a child) and [`GroupMember`] (membership of a group: one such node per member, plus a cache
//! of the others).
//!
//! The layouts are Curator 5.x's (Java clients see the same nodes):
//!
//! | recipe | node | mode | data |
//! |---|---|---|---|
//! | `PersistentNode` | the path given (protected: `_c_<uuid>-<name>`) | as given | as given |
//! | `PersistentTtlNode` | `P` and `P/touch` | `PersistentWithTtl` both | `P`: as given; `touch`: empty |
//! | `GroupMember` | `P/<member id>` | `Ephemeral` | the member's payload |
//!
//! The algorithm that keeps a node in place is in one private module (`nodes/keeper/`: the
//! state machine, the node in its way, its first create in doubt, its close); its design is
//! described in docs/architecture.md, "Nodes that stay".
//!
//! # Shared values
//!
//! Values every client sees, Curator 5.x compatible (Curator's `recipes.shared`):
//! [`SharedValue`] (bytes) and [`SharedCount`] (an `i32`, 4 bytes big-endian), with
//! compare-and-set by version and listeners. The local copy is ordered by the node's `mzxid`
//! and read again after every reconnection (docs/architecture.md section 16.1).
//!
//! # Atomics
//!
//! Atomic values in one node, Curator 5.x compatible (Curator's `recipes.atomic`):
//! [`DistributedAtomicLong`] (8 bytes big-endian), [`DistributedAtomicInteger`] (4 bytes),
//! [`DistributedAtomicValue`] (bytes), and [`CachedAtomicLong`] / [`CachedAtomicInteger`] for ids from reserved blocks.
//!
//! Every change runs an optimistic loop under the recipe's own retry policy, then, when
//! configured, promotes to an [`InterProcessMutex`]
//! ([`PromotedToLock`]). Results ([`AtomicValue`]) say whether they succeeded, with the values
//! before and after and the tries and time spent ([`AtomicStats`]). A write whose reply was
//! lost is decided by the handle's write tag, never repeated blindly (docs/architecture.md
//! section 16.2); one that cannot be decided (the tag changed by someone else meanwhile, or
//! gone past its reap age) fails with [`CuratorError::OutcomeUnknown`](curator_core::CuratorError::OutcomeUnknown).
//!
//! # Barriers
//!
//! Barriers: [`DistributedBarrier`] (waiters block while a node exists) and
//! [`DistributedDoubleBarrier`] (members enter together once enough have come, and leave
//! together once all have gone).
//!
//! The layouts are Curator 5.x's, so Java clients using Curator's recipes of the same names on
//! the same paths take part in the same barriers:
//!
//! | recipe | node | mode | data |
//! |---|---|---|---|
//! | `DistributedBarrier` | the barrier path `P` (parents: containers) | `Persistent` | the framework's default data |
//! | `DistributedDoubleBarrier` | `P/<uuid>`, one per member (parents: containers) | `Ephemeral` | the framework's default data |
//! | `DistributedDoubleBarrier` | `P/ready`, once `P` has enough members | `Persistent` | the framework's default data |
//!
//! ## How they wait
//!
//! Waiters are tasks, not threads: a wait is a future that watches a node with a one-shot watch
//! (which zookeeper-client sets again by itself after a reconnection) and the framework's
//! connection state, and checks the barrier's condition again after every wake-up of either
//! kind. A wake-up never counts as the condition holding (Curator GH-1290: a spurious wake-up
//! let a member through a double barrier that was not full). Every request runs under the
//! framework's one retry loop and is traced with its path; timed calls run under a
//! [deadline](curator_core::deadline), which every request and wait inside honours.
//!
//! Dropping a call leaves no node behind: an enter or leave that is dropped, fails or times out
//! deletes its member node in the background (tracked, so that `close()` waits for it), as an
//! abandoned lock acquire does. The algorithms are in the modules' docs and in
//! docs/architecture.md, section 16.3 "Barriers".
//!
//! # Queues
//!
//! Queues, wire compatible with Apache Curator 5.x: Rust and Java clients on one queue path
//! hand items to each other.
//!
//! - [`SimpleDistributedQueue`]: Curator's (and ZooKeeper's own recipe's) simple queue, one item
//!   of raw bytes per node `P/qn-<seq>`, taken at most once ([`SimpleDistributedQueue`]).
//! - [`DistributedQueue`]: Curator's `DistributedQueue`, with its node names and data; and
//!   Curator's [`DistributedIdQueue`], [`DistributedPriorityQueue`] and
//!   [`DistributedDelayQueue`], each a thin typed wrapper over a `DistributedQueue` that names
//!   its item nodes differently and takes them in another order
//!   ([`QueueBuilder::build_id_queue`] and the like):
//!
//! | what | node | mode | data |
//! |---|---|---|---|
//! | an item node (one or more items) | `P/queue-<seq>` (`P` persistent as in Curator, its parents containers) | `PersistentSequential` | Curator's `ItemSerializer` framing ([`framing`]) |
//! | an id queue's item node | `P/queue-\|<id>\|<seq>` | `PersistentSequential` | the same |
//! | a priority queue's item node | `P/queue-<0 if negative, else 1><%08X priority><seq>` | `PersistentSequential` | the same |
//! | a delay queue's item node | `P/queue-\|<%08X epoch ms>\|<seq>` | `PersistentSequential` | the same |
//! | the lock on an item node, lock-safe mode only | `L/<item node name>` (`L` persistent, its parents containers) | `Ephemeral` | the framework's default data |
//!
//! One task per started queue takes the items: it lists `P` with a watch, sorts the names
//! (module `order`) and takes each node in turn:
//! - **plain** (no lock path), as Curator: read the node, delete it at the version read, and
//!   only if that delete succeeded hand its items to the consumer: each item at most once.
//! - **lock-safe** (a lock path `L`): create the ephemeral `L/<name>` (already there: another
//!   consumer has it, skip), read the node, run the consumer, then finish with ONE multi, sent
//!   only on the session that created the lock: check `L/<name>` is still there, delete the item
//!   node, delete `L/<name>` (and, to requeue after a consumer error, create the item again).
//!   A consumer whose session ended meanwhile cannot finish the item: its lock node went with
//!   its session, and the item is another consumer's (CURATOR-605). docs/architecture.md,
//!   section 17.
//!
//! An item node whose data is not Curator's framing, or whose items the serializer cannot read,
//! is reported ([`QueueEvent::BadItem`], with its data) and deleted, as Curator deletes it (with
//! a log line): the queue goes on.
//!
//! [`DistributedQueue::put_in_background`] is Curator's background put: it returns at once, and
//! the put's outcome, a failure included, reaches the put listeners as a [`QueuePutEvent`]
//! (docs/architecture.md, section 17.3). [`QueueSharder`] is Curator's `QueueSharder`: one queue
//! spread over `DistributedQueue` shards `Q/queue-<uuid>` ([`QUEUE_SHARD_PREFIX`]), a leader
//! adding a shard when one holds more item nodes than [`QueueSharderPolicies`] allow (section
//! 17.4).
//!
//! # Persistent watches
//!
//! [`PersistentWatcher`]: a persistent watch that outlives reconnections and sessions, as
//! Curator's `org.apache.curator.framework.recipes.watch.PersistentWatcher`.
//!
//! # Migrations
//!
//! [`MigrationManager`] applies a [`MigrationSet`] (an ordered list of [`Migration`]s, each a
//! list of [`MigrationOp`]s) once across every process, as Curator's x-async
//! `MigrationManager`: under the set's [`InterProcessSemaphoreMutex`], the pending migrations go
//! in one transaction guarded by its lease, each with a `meta-<seq>` node holding its hash. A set
//! that grew is resumed; an applied migration that changed is refused. See the type's example.
//!
//! # Timed leases
//!
//! [`TimedLease`] (kazoo's `NonBlockingLease`) is held for a duration with no session tie,
//! renewed by its holder ([`LeaseGrant::renew`]) and taken by another once it ran out;
//! [`MultiTimedLease`] allows `count` holders. No clock agreement is needed: the holder's end
//! comes before any takeover as long as clock rates agree within 1% (docs/architecture.md
//! section 20). A [`LeaseGrant`] has a fencing token and a [`lost`](LeaseGrant::lost) notice
//! at its end.
//!
//! # Partitioning
//!
//! [`SetPartitioner`] (kazoo's `SetPartitioner`): the members of a group split a set of
//! partitions once the group settles, and each partition a member takes is an
//! [`InterProcessMutex`] it holds, with its fencing token ([`HeldPartition`]). Its states
//! ([`PartitionState`]) are a stream: `Allocating`, `Acquired`, `Release` (the group changed, or
//! a partition may be lost: told before anyone else can be granted it; answer with
//! [`release_set`](SetPartitioner::release_set)) and `Failure`. Nodes `P/party/<id>` and
//! `P/locks/<partition>/...`; docs/architecture.md section 21.
#![warn(missing_docs)]

mod atomic;
mod barriers;
mod leader;
mod lease;
mod locks;
mod migrations;
mod nodes;
mod partition;
mod queue;
mod sequential;
mod shared;
mod watch;

// The public surface, flat (docs/architecture.md section 1.1): every recipe is reached from the
// crate's root; `framing` stays a namespace (Curator's queue item framing). api/curator-recipes.txt
// lists it all, and scripts/check fails when it changes unrecorded.
pub use atomic::{
    AtomicNumber, AtomicStats, AtomicValue, CachedAtomicInteger, CachedAtomicLong, CachedAtomicNumber,
    DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber, DistributedAtomicValue, PromotedToLock,
    WRITE_TAG_PREFIX, WRITE_TAG_REAP_AGE,
};
pub use barriers::{DistributedBarrier, DistributedDoubleBarrier};
pub use leader::{
    CloseMode, LatchEvent, LatchState, Leader, LeaderLatch, LeaderLatchBuilder, LeaderObserver, LeaderSelector,
    LeaderSelectorBuilder, Leadership, Participant, Proclamation, SelectorEvent, TermEnd, LEADER_LATCH_NAME,
    PROCLAIMED_NODE_NAME,
};
pub use lease::{LeaseGrant, LeaseLost, MultiTimedLease, TimedLease};
pub use locks::{
    HeldNode, InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, Lease, LockGuard, LockLost, LockNode, MultiLockGuard, QueuedGuard, QueuedMutex, ReadLock,
    Revoker, WriteLock, LEASE_NAME, MUTEX_LOCK_NAME, READ_LOCK_NAME, REVOKE_MESSAGE, SEMAPHORE_LEASE_PARENT,
    SEMAPHORE_LOCK_PARENT, WRITE_LOCK_NAME,
};
pub use migrations::{
    AppliedMigrations, Migration, MigrationManager, MigrationOp, MigrationReport, MigrationSet, MIGRATION_META_NAME,
};
pub use nodes::{
    GroupMember, GroupMemberBuilder, MemberEvent, PersistentNode, PersistentNodeBuilder, PersistentTtlNode,
    PersistentTtlNodeBuilder, TOUCH_NODE_NAME,
};
pub use partition::{
    round_robin, HeldPartition, PartitionState, ReleaseCause, SetPartitioner, SetPartitionerBuilder, SplitFn,
    PARTITION_LOCKS_NODE, PARTITION_PARTY_NODE,
};
pub use queue::framing;
pub use queue::{
    BytesSerializer, ConsumerError, DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue,
    DistributedQueue, ErrorMode, QueueBuilder, QueueEvent, QueuePutEvent, QueueSerializer, QueueSharder,
    QueueSharderPolicies, QueueSharderPoliciesBuilder, SimpleDistributedQueue, StringSerializer, NEGATIVE_PRIORITY,
    NON_NEGATIVE_PRIORITY, QUEUE_ITEM_NAME, QUEUE_NODE_PREFIX, QUEUE_SHARD_PREFIX, SEPARATOR,
};
pub use shared::{SharedCount, SharedCountEvent, SharedValue, SharedValueEvent, VersionedValue};
pub use watch::{PersistentWatcher, Reset, ResetCause};
