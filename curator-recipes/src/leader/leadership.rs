//! [`Leadership`]: what a leader holds while it leads.

use std::sync::Arc;

use tokio::sync::watch;

use crate::sequential::{Hold, LockLost, LockNode};

/// One term of leadership, from a [`LeaderLatch`](super::LeaderLatch) or a
/// [`LeaderSelector`](super::LeaderSelector): the node that made us leader, its fencing token,
/// and when the term may be over.
///
/// Past Curator: a leader learns that it may have been deposed ([`lost`](Self::lost)) before
/// anyone else can be made leader, and stamps what it writes with
/// [`fencing_token`](Self::fencing_token) so that a deposed leader's late writes can be refused.
/// The token is the czxid of our election node: it grows with every new leader, across sessions
/// and even when the election's parent node was reaped and sequence numbers restarted.
///
/// A `Leadership` is a view: cloning or dropping it changes nothing. The term ends when its
/// latch or selector gives it up (close, step down, the selector's function returning) or when
/// it may be lost (the connection was suspended under
/// [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard), the session was lost, our node
/// was deleted, the framework was closed); [`lost`](Self::lost) then says which, with
/// [`LockLost::Released`] for a term given up by us.
#[derive(Debug, Clone)]
pub struct Leadership {
    hold: Arc<Hold>,
    id: Arc<str>,
}

impl Leadership {
    /// The leadership of participant `id` that `hold` granted.
    pub(crate) fn new(hold: Arc<Hold>, id: Arc<str>) -> Self {
        curator_core::metrics::leader_changed(hold.recipe());
        Self { hold, id }
    }

    /// The hold behind this term (for the recipe that owns it: it releases through it).
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// The fencing token of this term: the czxid of our election node. It grows from one
    /// leader to the next.
    pub fn fencing_token(&self) -> i64 {
        self.hold.node().fencing_token
    }

    /// The participant id the leader announced (the data of its node).
    pub fn participant_id(&self) -> &str {
        &self.id
    }

    /// The full path of our election node.
    pub fn path(&self) -> &str {
        &self.hold.node().path
    }

    /// Our election node.
    pub fn node(&self) -> &LockNode {
        self.hold.node()
    }

    /// False once the term is over or may be: see [`lost`](Self::lost). Costs no request.
    pub fn is_held(&self) -> bool {
        self.hold.is_held()
    }

    /// Resolves when the term is over or may be, with the reason. The first call (for a term)
    /// sets one watch on our node, unless the election already armed one; later calls share it.
    /// A session closed from outside may see the next leader elected before this resolves: see
    /// [`LockGuard::lost`](crate::locks::LockGuard::lost) for the window, and fence.
    pub async fn lost(&self) -> LockLost {
        self.hold.lost().await
    }

    /// A `watch` that turns `Some(reason)` when the term is over or may be (see
    /// [`lost`](Self::lost)).
    pub fn lost_watch(&self) -> watch::Receiver<Option<LockLost>> {
        self.hold.lost_watch()
    }
}
