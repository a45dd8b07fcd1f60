//! [`HeldNode`]: what every grant of the sequential-node core shows its holder, written once
//! for the lock guard, the semaphore's lease and a leader's term.

use std::sync::Arc;

use curator_core::path;
use tokio::sync::watch;

use super::hold::{Hold, LockLost};
use super::node::LockNode;

/// A node that was granted: its path, its fencing token, and whether it may be lost.
///
/// [`LockGuard`](crate::locks::LockGuard), [`Lease`](crate::locks::Lease),
/// [`QueuedGuard`](crate::locks::QueuedGuard) and [`Leadership`](crate::leader::Leadership)
/// dereference to it, so each has these methods; what each adds is how it is given back
/// (release, drop, the end of a term).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::InterProcessMutex;
///
/// let mutex = InterProcessMutex::new(&fw, "/jobs/lock")?;
/// let guard = mutex.acquire().await?;
/// assert!(guard.is_held());
/// assert!(guard.path().starts_with("/jobs/lock/"));
/// let token = guard.fencing_token(); // hand it to what the lock protects
/// # assert!(token > 0);
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// # When the holder is told
/// The server may give the node's grant to the next in line once a whole session timeout `T`
/// has passed since it last heard from this client. A held node turns lost
/// ([`is_held`](Self::is_held) false, [`lost`](Self::lost) resolves) no later than `19/20 × T`
/// after the send time of the latest request the server answered, under either
/// [`ErrorPolicy`](curator_core::ErrorPolicy), whether or not the connection still looks up;
/// the framework probes the server every `T / 10` to keep that time fresh. So the holder is told
/// before anyone else can be granted the node's place, on one assumption: the client's clock and
/// the server's advance at the same rate, within 5% (no agreement on wall-clock time is needed).
/// Under [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard) it is also told at the
/// first disconnection; [`ErrorPolicy::Session`](curator_core::ErrorPolicy::Session) spares it
/// the alarm for disconnections shorter than that. A forced expiry (an administrator closing the
/// session) cannot be told first. Design: docs/architecture.md sections 3.2 and 8.5.
///
/// # Guarded writes
/// A hold guards writes to ZooKeeper: [`transaction`](Self::transaction),
/// [`set_data`](Self::set_data), [`create`](Self::create) and [`delete`](Self::delete) commit
/// only while the hold's node exists (a server-side check in the same multi, no extra round
/// trip), so a holder whose session was closed from outside cannot write even before it is
/// told. A refused write is [`OwnNodeLost`](curator_core::CuratorError::OwnNodeLost), and the
/// hold then reports lost. A guarded write whose reply was lost is
/// [`OutcomeUnknown`](curator_core::CuratorError::OutcomeUnknown), never sent twice; with a
/// [`WriteTag`](curator_core::WriteTag) in its transaction it is decided exactly. Design:
/// docs/architecture.md sections 8.7 and 4.4.
#[derive(Debug, Clone)]
pub struct HeldNode {
    hold: Arc<Hold>,
}

impl HeldNode {
    pub(crate) fn new(hold: Arc<Hold>) -> Self {
        Self { hold }
    }

    /// The hold behind the node, for the recipe that gives it back.
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// The fencing token: the czxid of the node. It only grows from one grant to the next
    /// (sequence numbers restart when a container parent is reaped; zxids do not). Pass it to
    /// the resources the grant protects so that they can refuse a holder that lost it. A read
    /// lock taken while holding the write lock carries the write lock's token.
    pub fn fencing_token(&self) -> i64 {
        self.hold.node().fencing_token
    }

    /// The full path of the node.
    pub fn path(&self) -> &str {
        &self.hold.node().path
    }

    /// The node's name (the last segment of [`path`](Self::path)).
    pub fn node_name(&self) -> &str {
        path::node_name(self.path())
    }

    /// The node.
    pub fn node(&self) -> &LockNode {
        self.hold.node()
    }

    /// False once the grant may be lost: the connection was suspended (under
    /// [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard)), the session was lost,
    /// the node was deleted (seen once [`lost`](Self::lost) or [`lost_watch`](Self::lost_watch)
    /// was used), the framework was closed, or the grant was given back. Costs no request.
    pub fn is_held(&self) -> bool {
        self.hold.is_held()
    }

    /// Resolves when the grant may be lost, with the reason ([`LockLost::Released`] once it was
    /// given back). The first call sets one watch on the node (one request) unless the acquire
    /// already armed one; later calls share it.
    ///
    /// A session closed from outside (an operator's kill, a forced expiry) gives the server no
    /// reason to warn anyone: the next in line may be granted first, and this resolves only once
    /// the framework learns of it, when a server refuses to resume the session after the
    /// connection drops. The framework asks at once (20 ms after the drop, and again until a
    /// server answers) instead of waiting for the client's own reconnection: on one server, the
    /// holder was told within 30 ms of the kill under either
    /// [`ErrorPolicy`](curator_core::ErrorPolicy) (before, up to 2.8 s under
    /// [`ErrorPolicy::Session`](curator_core::ErrorPolicy::Session)). That window cannot be
    /// closed from the client: pass the [`fencing_token`](Self::fencing_token) to what the grant
    /// protects, so that it refuses the old holder, and write ZooKeeper data under the hold
    /// ([`transaction`](Self::transaction), [`set_data`](Self::set_data)), which the server
    /// refuses once the hold's node is gone (docs/operations.md section 2).
    pub async fn lost(&self) -> LockLost {
        self.hold.lost().await
    }

    /// A `watch` that turns `Some(reason)` when the grant may be lost (see [`lost`](Self::lost)).
    pub fn lost_watch(&self) -> watch::Receiver<Option<LockLost>> {
        self.hold.lost_watch()
    }
}
