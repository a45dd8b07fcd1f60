//! Reentrancy per task on a handle, and the guard a held lock gives its holder.

use std::sync::{Arc, Mutex, MutexGuard as StdGuard};

use curator_core::{CuratorError, Result};
use tokio::sync::watch;

use crate::sequential::{watch_revocation, ContenderGroup, Hold, LockLost, LockNode, NodeKind, Predicate, RevokeHook};

/// Who may re-enter a hold: the tokio task that acquired it or, for an acquire that does not
/// run in a task (the future given to `block_on`, `#[tokio::main]`'s body), the thread.
/// Curator's locks are reentrant per thread; a task is the async counterpart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Owner {
    /// The owner an acquire made here would have.
    pub(crate) fn current() -> Self {
        match tokio::task::try_id() {
            Some(id) => Owner::Task(id),
            None => Owner::Thread(std::thread::current().id()),
        }
    }
}

/// One node held through a handle, by one owner, `count` times.
#[derive(Debug)]
struct Held {
    owner: Owner,
    hold: Arc<Hold>,
    count: usize,
}

/// A contender group plus what each owner holds through one handle (and its clones).
///
/// Owners exclude each other as separate processes would: each acquire of an owner that holds
/// nothing here creates its own node and waits its turn in ZooKeeper. An owner that holds gets
/// the lock again at once (one more count) and gives it back with the last release.
pub(crate) struct Reentrant {
    pub(crate) group: ContenderGroup,
    holds: Mutex<Vec<Held>>,
    revoke: Mutex<Option<RevokeHook>>,
}

impl std::fmt::Debug for Reentrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reentrant").field("group", &self.group).field("holds", &*self.holds()).finish()
    }
}

impl Reentrant {
    pub(crate) fn new(group: ContenderGroup) -> Arc<Self> {
        Arc::new(Self { group, holds: Mutex::new(Vec::new()), revoke: Mutex::new(None) })
    }

    fn holds(&self) -> StdGuard<'_, Vec<Held>> {
        self.holds.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_revoke_hook(&self, hook: RevokeHook) {
        *self.revoke.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    pub(crate) fn is_revocable(&self) -> bool {
        self.revoke.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// The node the current owner holds through this handle, if any.
    pub(crate) fn held_node(&self) -> Option<LockNode> {
        let owner = Owner::current();
        self.holds().iter().find(|h| h.owner == owner).map(|h| h.hold.node().clone())
    }

    /// The node the current owner holds through this handle, else any node held through it.
    pub(crate) fn held_node_or_any(&self) -> Option<LockNode> {
        let owner = Owner::current();
        let holds = self.holds();
        holds.iter().find(|h| h.owner == owner).or(holds.first()).map(|h| h.hold.node().clone())
    }

    /// Whether the current owner holds through this handle.
    pub(crate) fn is_held_by_current(&self) -> bool {
        let owner = Owner::current();
        self.holds().iter().any(|h| h.owner == owner)
    }

    /// Whether any owner holds through this handle.
    pub(crate) fn is_held_here(&self) -> bool {
        !self.holds().is_empty()
    }

    /// Takes one more count if the current owner holds (an error if that hold is lost), else
    /// runs `prepare` and acquires a node with what it returns.
    pub(crate) async fn acquire<F>(self: &Arc<Self>, data: Vec<u8>, prepare: F) -> Result<LockGuard>
    where
        F: FnOnce() -> Result<(NodeKind, Predicate)>,
    {
        let owner = Owner::current();
        if let Some(guard) = self.reenter(owner)? {
            return Ok(guard);
        }
        let (kind, predicate) = prepare()?;
        let granted = self.group.acquire(&data, kind, predicate).await?;
        let hold = Hold::new(self.group.framework(), granted);
        if let Some(hook) = self.revoke.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            watch_revocation(&hold, hook);
        }
        self.holds().push(Held { owner, hold: hold.clone(), count: 1 });
        Ok(LockGuard { owner: self.clone(), hold, armed: true })
    }

    fn reenter(self: &Arc<Self>, owner: Owner) -> Result<Option<LockGuard>> {
        let mut holds = self.holds();
        let Some(held) = holds.iter_mut().find(|h| h.owner == owner) else { return Ok(None) };
        if let Some(reason) = held.hold.lost_reason() {
            return Err(CuratorError::IllegalState(format!(
                "the lock {} held by this task may be lost ({reason}): release it first",
                held.hold.node().path
            )));
        }
        held.count += 1;
        Ok(Some(LockGuard { owner: self.clone(), hold: held.hold.clone(), armed: true }))
    }

    /// Gives back one count of `which` (or of the current owner's hold, when `None`). Returns
    /// the hold to delete when that was the last count. `Err` when there is no such hold.
    fn take_one(&self, which: Option<&Arc<Hold>>) -> Result<Option<Arc<Hold>>> {
        let mut holds = self.holds();
        let found = match which {
            Some(w) => holds.iter().position(|h| Arc::ptr_eq(&h.hold, w)),
            None => {
                let owner = Owner::current();
                holds.iter().position(|h| h.owner == owner)
            }
        };
        let Some(i) = found else {
            return Err(CuratorError::IllegalState(format!(
                "this task does not hold the lock {} through this handle",
                self.group.base_path()
            )));
        };
        holds[i].count = holds[i].count.saturating_sub(1);
        if holds[i].count > 0 {
            return Ok(None);
        }
        Ok(Some(holds.swap_remove(i).hold))
    }

    /// Curator's `release()`: one count of the current owner's hold; the node is deleted with
    /// the last one.
    pub(crate) async fn release(&self) -> Result<()> {
        match self.take_one(None)? {
            Some(hold) => hold.release().await,
            None => Ok(()),
        }
    }
}

/// A held lock (one count of a reentrant handle). It may move between tasks.
///
/// Release it with [`release`](Self::release); dropping it releases in the background, so keep
/// it in a named binding for as long as the work needs the lock: `let _ = mutex.acquire().await?`
/// drops it (and releases the lock) at once, as `let _ = std_mutex.lock()` does. Its
/// [`fencing_token`](Self::fencing_token) grows with every acquisition of the lock; pass it to
/// the resources the lock protects so that they can refuse a holder that lost the lock.
///
/// # When the holder is told
/// The server may give the lock to the next in line once a whole session timeout `T` has passed
/// since it last heard from this client. The guard turns lost ([`is_held`](Self::is_held) false,
/// [`lost`](Self::lost) resolves) no later than `19/20 × T` after the send time of the latest
/// request the server answered, under either
/// [`ErrorPolicy`](curator_core::ErrorPolicy), whether or not the connection still looks up; the
/// framework probes the server every `T / 10` to keep that time fresh. So the holder is told
/// before anyone else can hold, on one assumption: the client's clock and the server's advance
/// at the same rate, within 5% (no agreement on wall-clock time is needed). Under
/// [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard) it is also told at the first
/// disconnection; [`ErrorPolicy::Session`](curator_core::ErrorPolicy::Session) spares it the
/// alarm for disconnections shorter than that. A forced expiry (an administrator closing the
/// session) cannot be told first. Design: docs/architecture.md section 3.2.
#[must_use = "dropping the guard releases the lock: bind it with `let guard = ...`, not `let _ = ...`"]
#[derive(Debug)]
pub struct LockGuard {
    owner: Arc<Reentrant>,
    hold: Arc<Hold>,
    armed: bool,
}

impl LockGuard {
    /// The fencing token: the czxid of our lock node. It only grows from one holder to the
    /// next (sequence numbers restart when the container parent is reaped; zxids do not). A
    /// read lock taken while holding the write lock carries the write lock's token.
    pub fn fencing_token(&self) -> i64 {
        self.hold.node().fencing_token
    }

    /// The full path of our lock node.
    pub fn path(&self) -> &str {
        &self.hold.node().path
    }

    /// Our lock node.
    pub fn node(&self) -> &LockNode {
        self.hold.node()
    }

    /// False once the lock may be lost: the connection was suspended (under
    /// [`ErrorPolicy::Standard`](curator_core::ErrorPolicy::Standard)), the session was lost,
    /// our node was deleted (seen once [`lost`](Self::lost) or [`lost_watch`](Self::lost_watch)
    /// was used), or the lock was released.
    pub fn is_held(&self) -> bool {
        self.hold.is_held()
    }

    /// Resolves when the lock may be lost, with the reason. The first call sets one watch on
    /// our node (one request); later calls share it.
    ///
    /// A session closed from outside (an operator's kill, a forced expiry) gives the server no
    /// reason to warn anyone: the next in line may be granted the lock first, and this resolves
    /// only once the framework learns of it, when a server refuses to resume the session after
    /// the connection drops. The framework asks at once (20 ms after the drop, and again until
    /// a server answers) instead of waiting for the client's own reconnection: on one server,
    /// the holder was told within 30 ms of the kill under either
    /// [`ErrorPolicy`](curator_core::ErrorPolicy) (before, up to 2.8 s under
    /// [`ErrorPolicy::Session`](curator_core::ErrorPolicy::Session)). That window cannot be
    /// closed from the client: pass the [`fencing_token`](Self::fencing_token) to what the lock
    /// protects, so that it refuses the old holder (docs/operations.md section 2).
    pub async fn lost(&self) -> LockLost {
        self.hold.lost().await
    }

    /// A `watch` that turns `Some(reason)` when the lock may be lost (see [`lost`](Self::lost)).
    pub fn lost_watch(&self) -> watch::Receiver<Option<LockLost>> {
        self.hold.lost_watch()
    }

    /// Gives back this count; deletes the node when it was the last one.
    ///
    /// The lock counts as released at once ([`is_held`](Self::is_held) turns false). During an
    /// outage the delete waits as long as the framework's retry policy allows (each attempt
    /// waits up to the connection timeout for a connection), so this can take seconds. Giving
    /// up on it (dropping the future, for example with `tokio::time::timeout`) is safe, as is
    /// dropping the guard without calling it: the delete then goes on in the background, on
    /// whatever session is current, until the node is gone (deleted, or taken by the end of
    /// its session) or the framework closes.
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        match self.owner.take_one(Some(&self.hold)) {
            Ok(Some(hold)) => hold.release().await,
            // Already given back through the handle's `release()`.
            Ok(None) | Err(_) => Ok(()),
        }
    }

    /// Leaves this count to the handle: the lock stays held until the handle's `release()`
    /// (Curator's style).
    pub fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(Some(hold)) = self.owner.take_one(Some(&self.hold)) {
            hold.release_in_background();
        }
    }
}
