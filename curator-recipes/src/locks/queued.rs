//! [`QueuedMutex`]: a mutex for very many waiters in one process, with one ZooKeeper node per
//! process at a time.

use std::sync::Arc;
use std::time::Duration;

use curator_core::{CuratorFramework, Result};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::guard::LockGuard;
use super::mutex::InterProcessMutex;
use crate::sequential::HeldNode;

/// An [`InterProcessMutex`] for many waiters in one process (tens of thousands of tasks):
/// local waiters queue in memory, in FIFO order, and only the head of the queue has a node in
/// ZooKeeper. Other processes (Curator's too) see one contender per process.
///
/// Each waiter that reaches the head acquires and releases the ZooKeeper lock itself, so other
/// processes get their turn between two local holders. Not reentrant: a task that already
/// holds it and acquires again waits for itself.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::QueuedMutex;
///
/// let mutex = QueuedMutex::new(&fw, "/jobs/lock")?;
/// let tasks: Vec<_> = (0..100)
///     .map(|_| {
///         let mutex = mutex.clone();
///         tokio::spawn(async move { mutex.acquire().await?.release().await })
///     })
///     .collect();
/// for t in tasks {
///     t.await??;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct QueuedMutex {
    fw: CuratorFramework,
    path: String,
    local: Arc<Mutex<()>>,
}

impl QueuedMutex {
    /// A queued mutex on `path` (validated here; nothing is sent until an acquire).
    ///
    /// `path` need not exist: the first acquire creates it and its missing parents as
    /// container nodes, as Curator does, and the server deletes an empty container about a
    /// minute after it was last used (`znode.container.checkIntervalMs`, 60 s by default). So
    /// data stored on a lock path the lock created is lost once the lock is freed: create the
    /// node yourself first (an existing node is never turned into a container), or build the
    /// framework with [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents).
    /// See [Lock paths are containers](crate#lock-paths-are-containers).
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        // Validates the path.
        InterProcessMutex::new(fw, path)?;
        Ok(Self { fw: fw.clone(), path: path.to_string(), local: Arc::new(Mutex::new(())) })
    }

    /// Waits for this process's turn (FIFO), then for the ZooKeeper lock. Cancel safe. Bind the
    /// guard (`let guard = queued.acquire().await?;`): the lock is held until its
    /// [`release`](QueuedGuard::release) or its drop.
    pub async fn acquire(&self) -> Result<QueuedGuard> {
        let turn = self.local.clone().lock_owned().await;
        let guard = InterProcessMutex::new(&self.fw, &self.path)?.acquire().await?;
        Ok(QueuedGuard { guard, _turn: turn })
    }

    /// As [`acquire`](Self::acquire), giving up after `timeout` (`Ok(None)`).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<QueuedGuard>> {
        super::within(timeout, self.acquire()).await
    }
}

/// A held [`QueuedMutex`]: the ZooKeeper lock and this process's turn. Dropping it releases
/// both (the node in the background). It dereferences to [`HeldNode`], as a
/// [`LockGuard`] does.
#[must_use = "bind the guard: `let guard = queued.acquire().await?;` holds the lock until `guard.release()` or its \
              drop; a bare `queued.acquire().await?;` or `let _ = ...` drops it and releases the lock at once"]
#[derive(Debug)]
pub struct QueuedGuard {
    guard: LockGuard,
    _turn: OwnedMutexGuard<()>,
}

impl std::ops::Deref for QueuedGuard {
    type Target = HeldNode;

    fn deref(&self) -> &HeldNode {
        &self.guard
    }
}

impl QueuedGuard {
    /// Releases the ZooKeeper lock, then lets the next local waiter go.
    pub async fn release(self) -> Result<()> {
        let QueuedGuard { guard, _turn } = self;
        guard.release().await
    }
}
