//! Shared values: their guide is the crate root's "Shared values" section (lib.rs).

mod shared_count;
mod shared_value;

pub(crate) use shared_count::CountReader;
pub use shared_count::{SharedCount, SharedCountEvent};
pub use shared_value::{SharedValue, SharedValueEvent, VersionedValue};
