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
//! The algorithm that keeps a node in place is in one private module (`keeper.rs`); its design
//! is described in docs/architecture.md, "Nodes that stay".

mod group_member;
mod keeper;
mod persistent_node;
mod shared;
mod ttl_node;

pub use group_member::{GroupMember, GroupMemberBuilder, MemberEvent};
pub use persistent_node::{PersistentNode, PersistentNodeBuilder};
pub use ttl_node::{PersistentTtlNode, PersistentTtlNodeBuilder, TOUCH_NODE_NAME};
