//! [`InterProcessMutex`]: Curator's reentrant distributed mutex, and [`Revoker`].

use std::sync::Arc;
use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, Result};

use super::guard::{LockGuard, Reentrant};
use crate::sequential::{ContenderGroup, NodeKind, Predicate, MUTEX_LOCK_NAME, REVOKE_MESSAGE};

/// A distributed reentrant mutex, wire compatible with Curator's `InterProcessMutex`: nodes
/// `P/_c_<uuid>-lock-<seq>`, ephemeral sequential, with the creator's address as data (empty
/// when revocable).
///
/// Reentrancy is per task, as Curator's is per thread: a task that holds the lock through this
/// handle (or a clone) gets it again at once, and gives it back with the last release. Other
/// tasks sharing the handle wait their turn, each with its own node, as other processes do. An
/// acquire outside any task (the body of `#[tokio::main]`, `block_on`) is owned by its thread.
/// Guards may move between tasks; a task that is handed a guard and then calls `acquire` does
/// not re-enter it (it waits behind it).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use std::time::Duration;
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::InterProcessMutex;
///
/// let mutex = InterProcessMutex::new(&fw, "/jobs/lock")?;
/// let guard = mutex.acquire().await?;
/// assert!(mutex.is_acquired_in_this_process());
/// let again = mutex.acquire().await?; // reentrant: a second count
/// again.release().await?;
/// assert!(guard.fencing_token() > 0);
/// guard.release().await?;
/// assert!(!mutex.is_acquired_in_this_process());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessMutex {
    inner: Arc<Reentrant>,
}

impl InterProcessMutex {
    /// A mutex on `path` (validated here; nothing is sent until an acquire).
    ///
    /// `path` need not exist: the first acquire creates it and its missing parents as
    /// container nodes, as Curator does, and the server deletes an empty container about a
    /// minute after it was last used (`znode.container.checkIntervalMs`, 60 s by default). So
    /// data stored on a lock path the lock created is lost once the lock is freed: create the
    /// node yourself first (an existing node is never turned into a container), or build the
    /// framework with [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents).
    /// See [Lock paths are containers](crate#lock-paths-are-containers).
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        let group = ContenderGroup::new(fw, path, MUTEX_LOCK_NAME, &[MUTEX_LOCK_NAME])?;
        Ok(Self { inner: Reentrant::new(group) })
    }

    /// Waits until the lock is held. Cancel safe: dropping the future leaves no node behind.
    ///
    /// The lock is held for as long as the returned guard is: bind it,
    /// `let guard = mutex.acquire().await?;`, and end with `guard.release().await?` (or let it
    /// drop: the release then goes on in the background). The statement
    /// `mutex.acquire().await?;`, Curator's `acquire()` translated literally, drops the guard
    /// and releases the lock at once (rustc warns: the guard is `#[must_use]`), and so does
    /// `let _ = ...`. Curator's `acquire(); try { .. } finally { release(); }` is written with
    /// [`keep`](LockGuard::keep), which leaves the count to this handle's
    /// [`release`](Self::release).
    ///
    /// A task that holds the lock already gets another count on the same node, unless that
    /// hold may be lost (its node deleted, its session gone or suspended): then
    /// [`CuratorError::OwnNodeLost`] at once; release it first.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// # let mutex = curator_recipes::InterProcessMutex::new(&fw, "/jobs/lock")?;
    /// let guard = mutex.acquire().await?; // held while `guard` lives
    /// // ... the work ...
    /// guard.release().await?;
    ///
    /// mutex.acquire().await?.keep(); // Curator's style: held until the handle's release()
    /// // ... the work ...
    /// mutex.release().await?;
    /// # assert!(!mutex.is_acquired_in_this_process());
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<LockGuard> {
        let data =
            if self.inner.is_revocable() { Vec::new() } else { self.inner.group.framework().default_data().to_vec() };
        self.inner.acquire(data, || Ok((NodeKind::Sequential, Predicate::Leases(1)))).await
    }

    /// As [`acquire`](Self::acquire), giving up after waiting `timeout` (`Ok(None)`; our node
    /// is deleted). The first attempt is always made, as in Curator, so `Duration::ZERO` is a
    /// try-lock: it takes the lock if it is free.
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        super::within(timeout, self.acquire()).await
    }

    /// Curator's `release()`: gives back one count held by this task through this handle (for
    /// guards that were [`keep`](LockGuard::keep)-ed); the node is deleted with the last one.
    /// [`CuratorError::NotHeld`] when this task holds nothing here.
    pub async fn release(&self) -> Result<()> {
        self.inner.release().await
    }

    /// Whether some task holds the lock through this handle (or a clone).
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_held_here()
    }

    /// The path of the node this task holds through this handle, else of any node held
    /// through it (as in a revocation listener, which runs outside the holder's task).
    pub fn lock_path(&self) -> Option<String> {
        self.inner.held_node_or_any().map(|n| n.path)
    }

    /// The contenders' nodes, in lock order (the holder first), as full paths.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.inner.group.participant_nodes(None).await
    }

    /// Makes later acquisitions revocable: their node has empty data and `listener` is called
    /// (on the blocking pool) when a [`Revoker`] asks the holder to give the lock up. The
    /// listener decides; typically it tells the task holding the guard to release it.
    pub fn make_revocable<F>(&self, listener: F)
    where
        F: Fn(&InterProcessMutex) + Send + Sync + 'static,
    {
        let weak = Arc::downgrade(&self.inner);
        self.inner.set_revoke_hook(Arc::new(move || {
            if let Some(inner) = weak.upgrade() {
                listener(&InterProcessMutex { inner });
            }
        }));
    }
}

/// Asks the holder of a revocable lock to release it (Curator's `Revoker`).
#[derive(Debug, Clone, Copy)]
pub struct Revoker;

impl Revoker {
    /// Writes `__REVOKE__` into the lock node at `node_path` (a full path, e.g. from
    /// [`InterProcessMutex::participant_nodes`]). A node already gone is not an error.
    pub async fn attempt_revoke(fw: &CuratorFramework, node_path: &str) -> Result<()> {
        tracing::debug!(path = %node_path, "setData __REVOKE__");
        match fw.set_data().for_path(node_path, REVOKE_MESSAGE.to_vec()).await {
            Ok(_) | Err(CuratorError::NoNode { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
