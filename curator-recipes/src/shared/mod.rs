//! Values every client sees, Curator 5.x compatible (Curator's `recipes.shared`):
//! [`SharedValue`] (bytes) and [`SharedCount`] (an `i32`, 4 bytes big-endian), with
//! compare-and-set by version and listeners. The local copy is ordered by the node's `mzxid`
//! and read again after every reconnection (docs/architecture.md section 16.1).

mod shared_count;
mod shared_value;

pub(crate) use shared_count::CountReader;
pub use shared_count::{from_bytes, to_bytes, SharedCount, SharedCountEvent};
pub use shared_value::{SharedValue, SharedValueEvent, VersionedValue};
