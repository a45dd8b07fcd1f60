//! Reentrancy on a handle, and the guard a held lock gives its holder.

use std::sync::{Arc, Mutex, MutexGuard as StdGuard};

use curator_core::{CuratorError, Result};
use tokio::sync::watch;

use crate::sequential::{watch_revocation, ContenderGroup, Hold, LockLost, LockNode, NodeKind, Predicate, RevokeHook};

/// What a reentrant handle holds.
#[derive(Debug)]
pub(crate) enum Holding {
    /// Nothing.
    Free,
    /// One node, taken `count` times by this handle.
    Held { hold: Arc<Hold>, count: usize },
}

/// A contender group plus the reentrancy count of one handle. Acquires on the same handle are
/// serialised; a handle that holds the lock gets it again at once.
pub(crate) struct Reentrant {
    pub(crate) group: ContenderGroup,
    gate: tokio::sync::Mutex<()>,
    state: Mutex<Holding>,
    revoke: Mutex<Option<RevokeHook>>,
}

impl std::fmt::Debug for Reentrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reentrant").field("group", &self.group).field("state", &*self.lock_state()).finish()
    }
}

impl Reentrant {
    pub(crate) fn new(group: ContenderGroup) -> Arc<Self> {
        Arc::new(Self {
            group,
            gate: tokio::sync::Mutex::new(()),
            state: Mutex::new(Holding::Free),
            revoke: Mutex::new(None),
        })
    }

    fn lock_state(&self) -> StdGuard<'_, Holding> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_revoke_hook(&self, hook: RevokeHook) {
        *self.revoke.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    pub(crate) fn is_revocable(&self) -> bool {
        self.revoke.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// The node held by this handle, if any.
    pub(crate) fn held_node(&self) -> Option<LockNode> {
        match &*self.lock_state() {
            Holding::Held { hold, .. } => Some(hold.node().clone()),
            Holding::Free => None,
        }
    }

    pub(crate) fn is_held_here(&self) -> bool {
        matches!(&*self.lock_state(), Holding::Held { .. })
    }

    /// Takes one more count if held here (an error if that hold is lost), else runs
    /// `prepare` and acquires a node with what it returns.
    pub(crate) async fn acquire<F>(self: &Arc<Self>, data: Vec<u8>, prepare: F) -> Result<LockGuard>
    where
        F: FnOnce() -> Result<(NodeKind, Predicate)>,
    {
        let _gate = self.gate.lock().await;
        if let Some(guard) = self.reenter()? {
            return Ok(guard);
        }
        let (kind, predicate) = prepare()?;
        let granted = self.group.acquire(&data, kind, predicate).await?;
        let hold = Hold::new(self.group.framework(), granted);
        if let Some(hook) = self.revoke.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            watch_revocation(&hold, hook);
        }
        *self.lock_state() = Holding::Held { hold: hold.clone(), count: 1 };
        Ok(LockGuard { owner: self.clone(), hold, armed: true })
    }

    fn reenter(self: &Arc<Self>) -> Result<Option<LockGuard>> {
        let mut state = self.lock_state();
        match &mut *state {
            Holding::Free => Ok(None),
            Holding::Held { hold, count } => {
                if let Some(reason) = hold.lost_reason() {
                    return Err(CuratorError::IllegalState(format!(
                        "the lock {} held by this handle may be lost ({reason}): release it first",
                        hold.node().path
                    )));
                }
                *count += 1;
                Ok(Some(LockGuard { owner: self.clone(), hold: hold.clone(), armed: true }))
            }
        }
    }

    /// Gives back one count of `which` (or of whatever is held, when `None`). Returns the hold
    /// to delete when that was the last count. `Err` when nothing (or another hold) is held.
    fn take_one(&self, which: Option<&Arc<Hold>>) -> Result<Option<Arc<Hold>>> {
        let mut state = self.lock_state();
        let matches = match (&*state, which) {
            (Holding::Held { hold, .. }, Some(w)) => Arc::ptr_eq(hold, w),
            (Holding::Held { .. }, None) => true,
            (Holding::Free, _) => false,
        };
        if !matches {
            return Err(CuratorError::IllegalState(format!(
                "this handle does not hold the lock {}",
                self.group.base_path()
            )));
        }
        let Holding::Held { hold, count } = &mut *state else { return Ok(None) };
        *count = count.saturating_sub(1);
        if *count > 0 {
            return Ok(None);
        }
        let hold = hold.clone();
        *state = Holding::Free;
        Ok(Some(hold))
    }

    /// Curator's `release()`: one count; the node is deleted with the last one.
    pub(crate) async fn release(&self) -> Result<()> {
        match self.take_one(None)? {
            Some(hold) => hold.release().await,
            None => Ok(()),
        }
    }
}

/// A held lock (one count of a reentrant handle). It may move between tasks.
///
/// Release it with [`release`](Self::release); dropping it releases in the background. Its
/// [`fencing_token`](Self::fencing_token) grows with every acquisition of the lock; pass it to
/// the resources the lock protects so that they can refuse a holder that lost the lock.
#[must_use = "dropping the guard releases the lock"]
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
    pub async fn lost(&self) -> LockLost {
        let mut rx = self.hold.lost_watch();
        loop {
            if let Some(reason) = *rx.borrow_and_update() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return LockLost::Released;
            }
        }
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
