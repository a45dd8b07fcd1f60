//! The core of every "ephemeral sequential contender" recipe: locks today; leader latch and
//! selector, group membership, queues and barriers are built the same way.
//!
//! # What a contender recipe is
//!
//! Each participant creates one ephemeral sequential node under the recipe's path `P`, named
//! `P/_c_<uuid>-<name><seq>` (module `names`). The participants are ordered by the sequence number
//! after the name (module `order`), and a recipe-specific [`Predicate`] says, from that order,
//! whether a node holds (the first one for a mutex or a leader, the first `n` for a semaphore,
//! "no writer before it" for a reader) or which nodes it must outlast first. The node is the
//! participant's stake: it goes with its session, so a crashed participant leaves the queue by
//! itself.
//!
//! # How it works
//!
//! - [`ContenderGroup`] (module `group`) is where the contenders live and how they are named
//!   and ordered; its `acquire` runs one `acquire::Acquire` state machine: create the node and
//!   list the contenders in one pipelined round trip, decide, watch the nodes the predicate
//!   names, and decide again when they go. The phase diagram is in the `acquire` module docs.
//! - A timed acquire's deadline reaches every layer under it through the framework's
//!   `curator_core::deadline`, which the retry loop and the wait for a connection honour.
//! - `cleanup::Cleanup` makes an acquire cancel safe: dropping it deletes whatever node
//!   it made, even when the create's reply was lost.
//! - [`Hold`] (module `hold`) follows a node once it holds and says when the hold may be lost
//!   ([`LockLost`]): from the connection state, and on demand from a watch on the node.
//! - Module `guarded` lets a [`HeldNode`] guard a transaction: its writes commit only while the
//!   hold's node exists (curator-core's `TransactionGuard`).
//! - Module `revoke` lets someone ask a holder to give its hold up (Curator's `Revoker` protocol).
//!
//! Requests that may be retried go through the framework's one retry loop; work that `close()`
//! must wait for (deleting a node) goes through `CuratorFramework::spawn_background`; monitors
//! that end by themselves are detached.

pub(crate) mod acquire;
pub(crate) mod cleanup;
pub(crate) mod group;
pub(crate) mod guarded;
pub(crate) mod held;
pub(crate) mod hold;
mod line;
pub(crate) mod names;
pub(crate) mod node;
pub(crate) mod order;
pub(crate) mod revoke;

// The items a recipe built on the core starts from; the rest is reached through the modules.
pub(crate) use group::ContenderGroup;
pub use held::HeldNode;
pub(crate) use hold::Hold;
pub use hold::LockLost;
pub use names::{
    LEADER_LATCH_NAME, LEASE_NAME, MUTEX_LOCK_NAME, READ_LOCK_NAME, REVOKE_MESSAGE, SEMAPHORE_LEASE_PARENT,
    SEMAPHORE_LOCK_PARENT, WRITE_LOCK_NAME,
};
pub use node::LockNode;
pub(crate) use node::NodeKind;
pub(crate) use order::Predicate;
pub(crate) use revoke::{watch_revocation, RevokeHook};
