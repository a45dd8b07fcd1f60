//! [`Leadership`]: what a leader holds while it leads.

use std::sync::Arc;

use crate::sequential::{HeldNode, Hold};

/// One term of leadership, from a [`LeaderLatch`](super::LeaderLatch) or a
/// [`LeaderSelector`](super::LeaderSelector): the node that made us leader, its fencing token,
/// and when the term may be over.
///
/// Past Curator: a leader learns that it may have been deposed ([`lost`](HeldNode::lost)) before
/// anyone else can be made leader, and stamps what it writes with
/// [`fencing_token`](HeldNode::fencing_token) so that a deposed leader's late writes can be refused.
/// The token is the czxid of our election node: it grows with every new leader, across sessions
/// and even when the election's parent node was reaped and sequence numbers restarted.
///
/// A `Leadership` is a view: cloning or dropping it changes nothing. The term ends when its
/// latch or selector gives it up (close, step down, the selector's function returning) or when
/// it may be lost (the connection was suspended under
/// [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard), the session was lost, our node
/// was deleted, the framework was closed); [`lost`](HeldNode::lost) then says which, with
/// [`LockLost::Released`](crate::sequential::LockLost::Released) for a term given up by us.
///
/// It dereferences to [`HeldNode`] for the node, its fencing token, [`is_held`](HeldNode::is_held)
/// and [`lost`](HeldNode::lost).
#[derive(Debug, Clone)]
pub struct Leadership {
    held: HeldNode,
    id: Arc<str>,
}

impl std::ops::Deref for Leadership {
    type Target = HeldNode;

    fn deref(&self) -> &HeldNode {
        &self.held
    }
}

impl Leadership {
    /// The leadership of participant `id` that `hold` granted.
    pub(crate) fn new(hold: Arc<Hold>, id: Arc<str>) -> Self {
        curator_core::metrics::leader_changed(hold.recipe());
        Self { held: HeldNode::new(hold), id }
    }

    /// The participant id the leader announced (the data of its node).
    pub fn participant_id(&self) -> &str {
        &self.id
    }
}
