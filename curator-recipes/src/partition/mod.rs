//! Partitioning of a set over a group (kazoo's `SetPartitioner`): [`SetPartitioner`].
//!
//! One concept a file: `state.rs` (what the user is told), `split.rs` (who takes what),
//! `builder.rs` (the settings, checked), `partitioner.rs` (the handle and its lifecycle),
//! `task.rs` (the state machine). Design: docs/architecture.md section 21.

mod builder;
mod partitioner;
mod split;
mod state;
mod task;

pub use builder::SetPartitionerBuilder;
pub use partitioner::SetPartitioner;
pub use split::{round_robin, SplitFn};
pub use state::{HeldPartition, PartitionState, ReleaseCause, PARTITION_LOCKS_NODE, PARTITION_PARTY_NODE};
