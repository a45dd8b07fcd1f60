//! What a [`SetPartitioner`](super::SetPartitioner) tells its user: its states and the
//! partitions it holds.

use curator_core::CuratorError;

use crate::sequential::{HeldNode, LockLost};

/// The node under the partitioner's path `P` whose children are the members, `P/party/<id>`
/// (kazoo's `SetPartitioner` layout).
pub const PARTITION_PARTY_NODE: &str = "party";

/// The node under the partitioner's path `P` whose children are the partitions' locks,
/// `P/locks/<partition>` (kazoo's layout; each is an [`InterProcessMutex`](crate::InterProcessMutex) path).
pub const PARTITION_LOCKS_NODE: &str = "locks";

/// One partition held by this member: its name and the lock grant behind it.
///
/// It dereferences to [`HeldNode`]: the grant's [`fencing_token`](HeldNode::fencing_token) (pass
/// it to what the partition protects), [`is_held`](HeldNode::is_held),
/// [`lost`](HeldNode::lost) and guarded writes ([`HeldNode::transaction`]). The partitioner
/// itself turns a possible loss into [`PartitionState::Release`] or
/// [`PartitionState::Failure`].
#[derive(Debug, Clone)]
pub struct HeldPartition {
    name: String,
    held: HeldNode,
    granted_at: std::time::Instant,
}

impl HeldPartition {
    pub(crate) fn new(name: String, held: HeldNode, granted_at: std::time::Instant) -> Self {
        Self { name, held, granted_at }
    }

    /// The partition's name, as given in the set.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// When its lock was granted (before [`PartitionState::Acquired`] was told: the member's
    /// other partitions may have been taken after it).
    pub fn granted_at(&self) -> std::time::Instant {
        self.granted_at
    }
}

impl std::ops::Deref for HeldPartition {
    type Target = HeldNode;

    fn deref(&self) -> &HeldNode {
        &self.held
    }
}

/// Why a member must give its partitions back ([`PartitionState::Release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseCause {
    /// A member joined or left: the set is split again once everyone released.
    MembershipChanged,
    /// A partition this member holds may be lost (its lock's lost notice: the connection was
    /// suspended, or its node deleted), told before anyone else can be granted it.
    MayBeLost {
        /// Why (never [`LockLost::SessionLost`] or [`LockLost::Closed`]: those are a
        /// [`PartitionState::Failure`]).
        reason: LockLost,
    },
}

/// Where a [`SetPartitioner`](super::SetPartitioner) is (kazoo's `PartitionState`), as
/// [`states`](super::SetPartitioner::states) streams it.
///
/// `Allocating -> Acquired -> Release -> (release_set) -> Allocating ...`; `Failure` from any
/// of them is final.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PartitionState {
    /// Waiting for the group to settle, then taking this member's share of the set.
    Allocating,
    /// This member holds its share (possibly none), each partition a lock grant.
    Acquired(Vec<HeldPartition>),
    /// Stop using the partitions and call [`release_set`](super::SetPartitioner::release_set):
    /// no one else can be granted them before this member gives them back (or its session
    /// ends).
    Release(ReleaseCause),
    /// The partitioner cannot go on (its session was lost, the framework closed, the server
    /// refused it for good): its partitions are given back and it left the group. Make a new
    /// one to take part again.
    Failure(CuratorError),
}

impl PartitionState {
    /// The partitions held, in [`Acquired`](Self::Acquired); else none.
    pub fn partitions(&self) -> &[HeldPartition] {
        match self {
            PartitionState::Acquired(held) => held,
            _ => &[],
        }
    }

    /// Whether this is [`Acquired`](Self::Acquired).
    pub fn is_acquired(&self) -> bool {
        matches!(self, PartitionState::Acquired(_))
    }

    /// Whether this is [`Failure`](Self::Failure).
    pub fn is_failure(&self) -> bool {
        matches!(self, PartitionState::Failure(_))
    }
}
