//! Queues: their guide is the crate root's "Queues" section (lib.rs).

mod background;
mod builder;
mod config;
mod consumer;
mod delay;
mod deliver;
mod distributed;
mod fence;
pub mod framing;
mod id;
mod lock;
mod order;
mod priority;
mod put;
mod remove;
mod serializer;
mod sharder;
mod sharder_policies;
mod shared;
mod simple;
mod take;
mod wrapper;

pub use background::QueuePutEvent;
pub use builder::QueueBuilder;
pub use config::{ConsumerError, ErrorMode};
pub use delay::DistributedDelayQueue;
pub use distributed::DistributedQueue;
pub use id::DistributedIdQueue;
pub use order::{NEGATIVE_PRIORITY, NON_NEGATIVE_PRIORITY, QUEUE_ITEM_NAME, SEPARATOR};
pub use priority::DistributedPriorityQueue;
pub use serializer::{BytesSerializer, QueueSerializer, StringSerializer};
pub use sharder::{QueueSharder, QUEUE_SHARD_PREFIX};
pub use sharder_policies::{QueueSharderPolicies, QueueSharderPoliciesBuilder};
pub use shared::QueueEvent;
pub use simple::{SimpleDistributedQueue, QUEUE_NODE_PREFIX};
