//! Node layout: the names contender recipes give their nodes, written once here so that every
//! recipe (and every reader of the tree) agrees with Curator 5.x, and how a name is read back
//! (its protected prefix, its sequence number).
//!
//! A contender node is `P/_c_<uuid>-<name><seq>`: the protected prefix `_c_<uuid>-` lets an
//! acquire find its own node again when the create's reply was lost, `<name>` says which
//! recipe (and which side of it) made the node, and `<seq>` orders the contenders.

use curator_core::path;

/// The lock name of [`InterProcessMutex`](crate::locks::InterProcessMutex) nodes:
/// `P/_c_<uuid>-lock-<seq>`.
pub const MUTEX_LOCK_NAME: &str = "lock-";
/// The lock name of read-lock nodes: `P/_c_<uuid>-__READ__<seq>`.
pub const READ_LOCK_NAME: &str = "__READ__";
/// The lock name of write-lock nodes: `P/_c_<uuid>-__WRIT__<seq>`.
pub const WRITE_LOCK_NAME: &str = "__WRIT__";
/// The name of [`LeaderLatch`](crate::leader::LeaderLatch) nodes: `P/_c_<uuid>-latch-<seq>`.
/// (A [`LeaderSelector`](crate::leader::LeaderSelector) is a mutex: its nodes are named with
/// [`MUTEX_LOCK_NAME`].)
pub const LEADER_LATCH_NAME: &str = "latch-";
/// The data a [`Revoker`](crate::locks::Revoker) writes into a holder's node.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";
/// Child of a semaphore's path holding the mutex that serialises lease takers.
pub const SEMAPHORE_LOCK_PARENT: &str = "locks";
/// Child of a semaphore's path holding the leases.
pub const SEMAPHORE_LEASE_PARENT: &str = "leases";
/// The lock name of lease nodes: `P/leases/_c_<uuid>-lease-<seq>`.
pub const LEASE_NAME: &str = "lease-";

/// A fresh protected prefix `_c_<uuid>-`, unique to one acquire.
pub(crate) fn protected_prefix() -> String {
    path::protected_name(&uuid::Uuid::new_v4(), "")
}

/// The protected prefix `_c_<uuid>-` of `name`, if it has one.
pub(crate) fn prefix_of(name: &str) -> Option<&str> {
    path::protected_id(name).map(|_| &name[..path::PROTECTED_PREFIX_LEN])
}

/// The sequence number of `name`: the digits after the first of `names` it contains (`None`
/// when it has none, so that foreign children are never taken for contenders).
pub(crate) fn sequence_in(name: &str, names: &[&str]) -> Option<i64> {
    names.iter().find_map(|n| path::sequence_after(name, n))
}

/// One node under a recipe's path with a sequence number, as the contenders are ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender {
    /// The node's name (not its path).
    pub(crate) name: String,
    /// Its sequence number.
    pub(crate) sequence: i64,
}

impl Contender {
    /// Whether this is a write-lock node (read nodes queued after it wait for it).
    pub(crate) fn is_writer(&self) -> bool {
        self.name.contains(WRITE_LOCK_NAME)
    }
}
