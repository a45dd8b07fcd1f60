//! Nodes that stay: their guide is the crate root's "Nodes that stay" section (lib.rs).

mod group_member;
mod keeper;
mod persistent_node;
mod shared;
mod ttl_node;

pub use group_member::{GroupMember, GroupMemberBuilder, MemberEvent};
pub use persistent_node::{PersistentNode, PersistentNodeBuilder};
pub use ttl_node::{PersistentTtlNode, PersistentTtlNodeBuilder, TOUCH_NODE_NAME};
