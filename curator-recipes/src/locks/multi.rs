//! [`InterProcessMultiLock`]: several mutexes taken as one, all or none.

use std::time::Duration;

use curator_core::{CuratorError, CuratorFramework, Result};

use super::guard::LockGuard;
use super::mutex::InterProcessMutex;

/// Several [`InterProcessMutex`]es acquired in order as one lock: all or none, released in
/// reverse order (Curator's `InterProcessMultiLock`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::InterProcessMultiLock;
///
/// let both = InterProcessMultiLock::new(&fw, &["/accounts/a", "/accounts/b"])?;
/// let guard = both.acquire().await?;
/// assert_eq!(guard.fencing_tokens().len(), 2);
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessMultiLock {
    locks: Vec<InterProcessMutex>,
}

impl InterProcessMultiLock {
    /// One mutex per path, taken in the order given.
    ///
    /// `path` need not exist: the first acquire creates it (each path) and its missing parents as
    /// container nodes, as Curator does, and the server deletes an empty container about a
    /// minute after it was last used (`znode.container.checkIntervalMs`, 60 s by default). So
    /// data stored on a lock path the lock created is lost once the lock is freed: create the
    /// node yourself first (an existing node is never turned into a container), or build the
    /// framework with [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents).
    /// See [Lock paths are containers](crate#lock-paths-are-containers).
    pub fn new(fw: &CuratorFramework, paths: &[&str]) -> Result<Self> {
        let locks = paths.iter().map(|p| InterProcessMutex::new(fw, p)).collect::<Result<Vec<_>>>()?;
        Ok(Self { locks })
    }

    /// The given mutexes, taken in order.
    pub fn from_mutexes(locks: Vec<InterProcessMutex>) -> Self {
        Self { locks }
    }

    /// Acquires every mutex in order. On failure (or when the future is dropped) the ones
    /// already held are released, in reverse order. Bind the guard
    /// (`let guard = multi.acquire().await?;`): the locks are held until its
    /// [`release`](MultiLockGuard::release) or its drop, or, after
    /// [`keep`](MultiLockGuard::keep), until this handle's [`release`](Self::release) (Curator's
    /// style). A bare `multi.acquire().await?;` releases them at once.
    pub async fn acquire(&self) -> Result<MultiLockGuard> {
        let mut held = MultiLockGuard { guards: Vec::with_capacity(self.locks.len()) };
        for lock in &self.locks {
            match lock.acquire().await {
                Ok(guard) => held.guards.push(guard),
                Err(err) => {
                    // Best effort: the first error is the one to report.
                    let _ = held.release().await;
                    return Err(err);
                }
            }
        }
        Ok(held)
    }

    /// As [`acquire`](Self::acquire), giving up after `timeout` (`Ok(None)`).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<MultiLockGuard>> {
        super::within(timeout, self.acquire()).await
    }

    /// Curator's `release()`: one count of every mutex, in reverse order (for guards that were
    /// [`keep`](MultiLockGuard::keep)-ed). Returns the first error after trying all.
    pub async fn release(&self) -> Result<()> {
        let mut first: Option<CuratorError> = None;
        for lock in self.locks.iter().rev() {
            if let Err(e) = lock.release().await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// True only when every mutex is held by this handle.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.locks.iter().all(InterProcessMutex::is_acquired_in_this_process)
    }
}

/// The held mutexes of an [`InterProcessMultiLock`]. Dropping it releases them in reverse
/// order in the background.
#[must_use = "bind the guard: `let guard = multi.acquire().await?;` holds the locks until `guard.release()` or its drop \
              (`guard.keep()` leaves them to the handle's `release()`); a bare `multi.acquire().await?;` or \
              `let _ = ...` drops it and releases the locks at once"]
#[derive(Debug)]
pub struct MultiLockGuard {
    guards: Vec<LockGuard>,
}

impl MultiLockGuard {
    /// The fencing token of each mutex, in acquisition order.
    pub fn fencing_tokens(&self) -> Vec<i64> {
        self.guards.iter().map(|g| g.fencing_token()).collect()
    }

    /// The guards, in acquisition order.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// True while every mutex is held (see [`LockGuard::is_held`](crate::sequential::HeldNode::is_held)).
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(|g| g.is_held())
    }

    /// Releases every mutex in reverse order; returns the first error after trying all.
    pub async fn release(mut self) -> Result<()> {
        let mut first: Option<CuratorError> = None;
        while let Some(guard) = self.guards.pop() {
            if let Err(e) = guard.release().await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Leaves the counts to the handle's [`release`](InterProcessMultiLock::release).
    pub fn keep(mut self) {
        for guard in self.guards.drain(..) {
            guard.keep();
        }
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        while let Some(guard) = self.guards.pop() {
            drop(guard);
        }
    }
}
