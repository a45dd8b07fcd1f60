//! [`InterProcessReadWriteLock`]: many readers or one writer, writers not starved.

use std::sync::Arc;
use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, Result};

use super::guard::{LockGuard, Reentrant};
use crate::sequential::{ContenderGroup, NodeKind, Predicate, READ_LOCK_NAME, WRITE_LOCK_NAME};

const SORT_NAMES: &[&str] = &[READ_LOCK_NAME, WRITE_LOCK_NAME];

/// A distributed read/write lock, wire compatible with Curator's `InterProcessReadWriteLock`:
/// nodes `P/_c_<uuid>-__WRIT__<seq>` and `P/_c_<uuid>-__READ__<seq>`, ephemeral sequential,
/// ordered together by sequence number.
///
/// - A writer holds when its node is first of all nodes.
/// - A reader holds when no write node is before its own (writers queued later wait for it, so
///   later readers cannot starve a writer), or at once when this handle holds the write lock.
/// - Both are reentrant on this handle. Taking the read lock while holding the write lock
///   (downgrade) creates, as Curator 5.5 does, an ephemeral `..-__READ__<the write node's
///   sequence>`; release the write lock after and the read lock stays. Taking the write lock
///   while holding only the read lock (upgrade) fails at once with
///   [`CuratorError::AlreadyHeld`] instead of deadlocking.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::InterProcessReadWriteLock;
///
/// let rw = InterProcessReadWriteLock::new(&fw, "/config/lock")?;
/// let read = rw.read_lock().acquire().await?;
/// assert!(rw.write_lock().acquire().await.is_err()); // no upgrade
/// read.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl InterProcessReadWriteLock {
    /// A read/write lock on `path` (validated here; nothing is sent until an acquire).
    ///
    /// `path` need not exist: the first acquire creates it and its missing parents as
    /// container nodes, as Curator does, and the server deletes an empty container about a
    /// minute after it was last used (`znode.container.checkIntervalMs`, 60 s by default). So
    /// data stored on a lock path the lock created is lost once the lock is freed: create the
    /// node yourself first (an existing node is never turned into a container), or build the
    /// framework with [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents).
    /// See [Lock paths are containers](crate#lock-paths-are-containers).
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        let read = Reentrant::new(ContenderGroup::new(fw, path, READ_LOCK_NAME, SORT_NAMES)?);
        let write = Reentrant::new(ContenderGroup::new(fw, path, WRITE_LOCK_NAME, SORT_NAMES)?);
        Ok(Self { read: ReadLock { read: read.clone(), write: write.clone() }, write: WriteLock { read, write } })
    }

    /// The read half.
    pub fn read_lock(&self) -> &ReadLock {
        &self.read
    }

    /// The write half.
    pub fn write_lock(&self) -> &WriteLock {
        &self.write
    }
}

/// A new node's data: the framework's default data, or nothing when the half is revocable (as
/// [`InterProcessMutex`](super::InterProcessMutex)'s, so that only a [`Revoker`](super::Revoker)'s
/// message is ever mistaken for one).
fn node_data(r: &Reentrant) -> Vec<u8> {
    if r.is_revocable() {
        Vec::new()
    } else {
        r.group.framework().default_data().to_vec()
    }
}

/// The read half of an [`InterProcessReadWriteLock`].
#[derive(Debug, Clone)]
pub struct ReadLock {
    read: Arc<Reentrant>,
    write: Arc<Reentrant>,
}

impl ReadLock {
    /// Waits until the read lock is held. Cancel safe. Under the write lock of this handle, the
    /// read node continues the write node's hold: [`CuratorError::OwnNodeLost`] if that node's
    /// session is gone (release the write lock first). Bind the guard, as for
    /// [`InterProcessMutex::acquire`](super::InterProcessMutex::acquire): a bare
    /// `read.acquire().await?;` releases the lock at once.
    pub async fn acquire(&self) -> Result<LockGuard> {
        let write = self.write.clone();
        self.read
            .acquire(node_data(&self.read), move || match write.held_node() {
                // Downgrade: Curator 5.5's ephemeral read node with the write node's sequence.
                Some(w) => Ok((
                    NodeKind::Fixed { sequence: w.sequence, generation: w.generation, token: w.fencing_token },
                    Predicate::Read { holds_write: true },
                )),
                None => Ok((NodeKind::Sequential, Predicate::Read { holds_write: false })),
            })
            .await
    }

    /// As [`acquire`](Self::acquire), giving up after `timeout` (`Ok(None)`).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        super::within(timeout, self.acquire()).await
    }

    /// Gives back one count of the read lock held by this handle (Curator's style).
    pub async fn release(&self) -> Result<()> {
        self.read.release().await
    }

    /// Whether some task holds the read lock through this handle.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.read.is_held_here()
    }

    /// The read nodes, in lock order, as full paths.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.read.group.participant_nodes(Some(READ_LOCK_NAME)).await
    }

    /// The path of the read node this task holds through this handle, else of any read node
    /// held through it (as in a revocation listener, which runs outside the holder's task).
    pub fn lock_path(&self) -> Option<String> {
        self.read.held_node_or_any().map(|n| n.path)
    }

    /// Makes later acquisitions of the read lock revocable, as
    /// [`InterProcessMutex::make_revocable`](super::InterProcessMutex::make_revocable) (Curator's
    /// `readLock().makeRevocable`): their node has empty data, and `listener` is called (on the
    /// blocking pool) each time a [`Revoker`](super::Revoker) writes `__REVOKE__` into a held
    /// read node. The listener decides; typically it tells the task holding the guard to
    /// release it. The write half is revocable on its own ([`WriteLock::make_revocable`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_recipes::{InterProcessReadWriteLock, ReadLock, Revoker};
    ///
    /// let rw = InterProcessReadWriteLock::new(&fw, "/config/lock")?;
    /// let (asked, mut revoked) = tokio::sync::mpsc::unbounded_channel();
    /// rw.read_lock().make_revocable(move |read: &ReadLock| {
    ///     let _ = asked.send(read.lock_path());
    /// });
    /// let guard = rw.read_lock().acquire().await?;
    /// // Another process asks the reader to give the lock up...
    /// Revoker::attempt_revoke(&fw, guard.path()).await?;
    /// // ...and the holder, told, releases.
    /// assert_eq!(revoked.recv().await.flatten().as_deref(), Some(guard.path()));
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn make_revocable<F>(&self, listener: F)
    where
        F: Fn(&ReadLock) + Send + Sync + 'static,
    {
        let (read, write) = (Arc::downgrade(&self.read), Arc::downgrade(&self.write));
        self.read.set_revoke_hook(Arc::new(move || {
            if let (Some(read), Some(write)) = (read.upgrade(), write.upgrade()) {
                listener(&ReadLock { read, write });
            }
        }));
    }
}

/// The write half of an [`InterProcessReadWriteLock`].
#[derive(Debug, Clone)]
pub struct WriteLock {
    read: Arc<Reentrant>,
    write: Arc<Reentrant>,
}

impl WriteLock {
    /// Waits until the write lock is held. Cancel safe. [`CuratorError::AlreadyHeld`] at
    /// once if this task holds only the read lock through this handle (an upgrade would
    /// deadlock). Bind the guard, as for
    /// [`InterProcessMutex::acquire`](super::InterProcessMutex::acquire): a bare
    /// `write.acquire().await?;` releases the lock at once.
    pub async fn acquire(&self) -> Result<LockGuard> {
        let read = self.read.clone();
        self.write
            .acquire(node_data(&self.write), move || {
                if read.is_held_by_current() {
                    return Err(CuratorError::AlreadyHeld {
                        path: read.group.base_path().to_string(),
                        reason: "the read lock: it cannot be upgraded to the write lock; release it first",
                    });
                }
                Ok((NodeKind::Sequential, Predicate::Leases(1)))
            })
            .await
    }

    /// As [`acquire`](Self::acquire), giving up after `timeout` (`Ok(None)`).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        super::within(timeout, self.acquire()).await
    }

    /// Gives back one count of the write lock held by this handle (Curator's style).
    pub async fn release(&self) -> Result<()> {
        self.write.release().await
    }

    /// Whether this handle holds the write lock.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.write.is_held_here()
    }

    /// The write nodes, in lock order, as full paths.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.write.group.participant_nodes(Some(WRITE_LOCK_NAME)).await
    }

    /// The path of the write node held through this handle.
    pub fn lock_path(&self) -> Option<String> {
        self.write.held_node_or_any().map(|n| n.path)
    }

    /// Makes later acquisitions of the write lock revocable, as
    /// [`InterProcessMutex::make_revocable`](super::InterProcessMutex::make_revocable) (Curator's
    /// `writeLock().makeRevocable`): their node has empty data, and `listener` is called (on the
    /// blocking pool) each time a [`Revoker`](super::Revoker) writes `__REVOKE__` into the held
    /// write node. The read half is revocable on its own ([`ReadLock::make_revocable`]); a read
    /// node taken under the write lock (a downgrade) follows the read half's setting.
    pub fn make_revocable<F>(&self, listener: F)
    where
        F: Fn(&WriteLock) + Send + Sync + 'static,
    {
        let (read, write) = (Arc::downgrade(&self.read), Arc::downgrade(&self.write));
        self.write.set_revoke_hook(Arc::new(move || {
            if let (Some(read), Some(write)) = (read.upgrade(), write.upgrade()) {
                listener(&WriteLock { read, write });
            }
        }));
    }
}
