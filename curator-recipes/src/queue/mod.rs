//! Queues, wire compatible with Apache Curator 5.x: Rust and Java clients on one queue path
//! hand items to each other.
//!
//! - [`SimpleDistributedQueue`]: Curator's (and ZooKeeper's own recipe's) simple queue, one item
//!   of raw bytes per node `P/qn-<seq>`, taken at most once (module [`simple`]).
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

mod builder;
mod config;
mod consumer;
mod delay;
mod deliver;
mod distributed;
mod fence;
pub mod framing;
mod id;
mod order;
mod priority;
mod put;
mod remove;
mod serializer;
mod shared;
pub mod simple;
mod take;
mod wrapper;

pub use builder::QueueBuilder;
pub use config::{ConsumerError, ErrorMode};
pub use delay::DistributedDelayQueue;
pub use distributed::DistributedQueue;
pub use id::DistributedIdQueue;
pub use order::{NEGATIVE_PRIORITY, NON_NEGATIVE_PRIORITY, QUEUE_ITEM_NAME, SEPARATOR};
pub use priority::DistributedPriorityQueue;
pub use serializer::{BytesSerializer, QueueSerializer, StringSerializer};
pub use shared::QueueEvent;
pub use simple::{SimpleDistributedQueue, QUEUE_NODE_PREFIX};
