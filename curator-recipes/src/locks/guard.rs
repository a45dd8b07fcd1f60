//! Reentrancy per task on a handle, and the guard a held lock gives its holder.

use std::sync::{Arc, Mutex, MutexGuard as StdGuard};

use curator_core::{CuratorError, Result};

use crate::sequential::{watch_revocation, ContenderGroup, HeldNode, Hold, LockNode, NodeKind, Predicate, RevokeHook};

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
        Ok(LockGuard { owner: self.clone(), held: HeldNode::new(hold), armed: true })
    }

    fn reenter(self: &Arc<Self>, owner: Owner) -> Result<Option<LockGuard>> {
        let mut holds = self.holds();
        let Some(held) = holds.iter_mut().find(|h| h.owner == owner) else { return Ok(None) };
        if let Some(reason) = held.hold.lost_reason() {
            return Err(CuratorError::OwnNodeLost {
                path: held.hold.node().path.clone(),
                reason: format!("the lock held by this task may be lost ({reason}): release it first"),
            });
        }
        held.count += 1;
        Ok(Some(LockGuard { owner: self.clone(), held: HeldNode::new(held.hold.clone()), armed: true }))
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
            return Err(CuratorError::NotHeld { path: self.group.base_path().to_string(), what: "the lock" });
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
/// Bind it (`let guard = mutex.acquire().await?;`) and release it with
/// [`release`](Self::release); dropping it releases in the background, so keep it in a named
/// binding for as long as the work needs the lock. The statement `mutex.acquire().await?;` (a
/// literal translation of Curator's `acquire()`) and `let _ = mutex.acquire().await?` drop it,
/// and release the lock, at once, as `let _ = std_mutex.lock()` does; for Curator's
/// `acquire(); try { .. } finally { release(); }`, write `mutex.acquire().await?.keep()` and
/// the handle's [`release`](super::InterProcessMutex::release).
///
/// It dereferences to [`HeldNode`]: its [`fencing_token`](HeldNode::fencing_token) grows with
/// every acquisition of the lock (pass it to the resources the lock protects so that they can
/// refuse a holder that lost the lock), and [`is_held`](HeldNode::is_held) and
/// [`lost`](HeldNode::lost) say when it may have been lost, before anyone else can hold it
/// ([`HeldNode`]'s "When the holder is told").
#[must_use = "bind the guard: `let guard = mutex.acquire().await?;` holds the lock until `guard.release()` or its drop \
              (`guard.keep()` leaves it to the handle's `release()`, Curator's style); a bare \
              `mutex.acquire().await?;` or `let _ = ...` drops it and releases the lock at once"]
#[derive(Debug)]
pub struct LockGuard {
    owner: Arc<Reentrant>,
    held: HeldNode,
    armed: bool,
}

impl std::ops::Deref for LockGuard {
    type Target = HeldNode;

    fn deref(&self) -> &HeldNode {
        &self.held
    }
}

impl LockGuard {
    /// Gives back this count; deletes the node when it was the last one.
    ///
    /// The lock counts as released at once ([`is_held`](HeldNode::is_held) turns false). During an
    /// outage the delete waits as long as the framework's retry policy allows (each attempt
    /// waits up to the connection timeout for a connection), so this can take seconds. Giving
    /// up on it (dropping the future, for example with `tokio::time::timeout`) is safe, as is
    /// dropping the guard without calling it: the delete then goes on in the background, on
    /// whatever session is current, until the node is gone (deleted, or taken by the end of
    /// its session) or the framework closes.
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        match self.owner.take_one(Some(self.held.hold())) {
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
        if let Ok(Some(hold)) = self.owner.take_one(Some(self.held.hold())) {
            hold.release_in_background();
        }
    }
}

#[cfg(test)]
mod tests {
    /// The `#[must_use]` note rustc shows for `mutex.acquire().await?;` (a statement that drops
    /// the guard at once) must lead with the fix, since rustc's own help under it suggests
    /// `let _ = ...`, which drops it just the same (issue 26 item 10). Every guard type's note
    /// starts with "bind the guard"/"bind the lease" and names the binding to write.
    #[test]
    fn every_guard_type_says_to_bind_it() {
        let sources = [
            ("LockGuard", include_str!("guard.rs"), "bind the guard: `let guard = "),
            ("QueuedGuard", include_str!("queued.rs"), "bind the guard: `let guard = "),
            ("MultiLockGuard", include_str!("multi.rs"), "bind the guard: `let guard = "),
            ("Lease", include_str!("semaphore.rs"), "bind the lease: `let lease = "),
        ];
        for (name, source, wanted) in sources {
            let declared = format!("\npub struct {name} ");
            let at = source.find(&declared).unwrap_or_else(|| panic!("{name} is declared"));
            let attributes = &source[source[..at].rfind("\n///").unwrap_or(0)..at];
            let note = attributes
                .split_once("#[must_use = \"")
                .and_then(|(_, rest)| rest.split_once("\"]"))
                .map(|(note, _)| note.split("\\\n").map(str::trim_start).collect::<String>())
                .unwrap_or_else(|| panic!("{name} has a #[must_use] note: {attributes}"));
            assert!(note.starts_with(wanted), "{name}'s note {note:?} does not start with {wanted:?}");
            assert!(note.contains("`let _ = ...`"), "{name}'s note answers rustc's `let _` help: {note:?}");
        }
    }
}
