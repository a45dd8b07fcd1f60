//! Queues, wire compatible with Apache Curator 5.x: Rust and Java clients on one queue path
//! hand items to each other.
//!
//! - [`SimpleDistributedQueue`]: Curator's (and ZooKeeper's own recipe's) simple queue, one item
//!   of raw bytes per node `P/qn-<seq>`, taken at most once.

pub mod simple;

pub use simple::{SimpleDistributedQueue, QUEUE_NODE_PREFIX};
