//! [`DistributedBarrier`]: waiters block while the barrier node exists.
//!
//! ```text
//! set     : create P (parents as containers); NodeExists is success.
//! remove  : delete P; NoNode is success.
//! wait    : Check: exists+watch(P)   -> absent: done (true)
//!                                    -> present: Wait
//!           Wait : the watch fires, or the connection is back (or lost) -> Check
//!                  the deadline (timed wait) passes                  -> false
//! ```
//!
//! A wake-up only leads to another check: the wait ends when a check finds the node gone.
//! The single barrier holds nothing, so the error policy does not apply to it: a wait rides
//! out a suspension and checks again when the connection is back or the session is declared
//! lost. That check's request waits for a connection and is retried under the retry policy,
//! and fails as that policy says (Curator's `waitOnBarrier` throws `ConnectionLossException`
//! once its retries are spent: `TestDistributedBarrier.testServerCrash`).

use std::time::Duration;

use curator_core::deadline;
use curator_core::{path, CuratorError, CuratorFramework, Result};

use super::Connection;

/// A barrier that blocks waiters while its node exists (Curator's `DistributedBarrier`): one
/// process sets it, others wait on it, and removing it lets them all through.
///
/// The node is `P` itself, persistent, with the framework's default data, its parents created
/// as containers, as in Curator 5.x.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::DistributedBarrier;
///
/// let barrier = DistributedBarrier::new(&fw, "/jobs/nightly/gate")?;
/// barrier.set_barrier().await?;
///
/// let waiter = DistributedBarrier::new(&fw, "/jobs/nightly/gate")?;
/// let waiting = tokio::spawn(async move { waiter.wait_on_barrier().await });
///
/// // The barrier stands: a timed wait gives up.
/// assert!(!barrier.wait_on_barrier_timeout(Duration::from_millis(50)).await?);
/// barrier.remove_barrier().await?;
/// waiting.await??; // let through
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedBarrier {
    fw: CuratorFramework,
    path: String,
}

impl DistributedBarrier {
    /// A barrier on `path` (nothing is sent yet).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] if `path` is not a valid ZooKeeper path.
    ///
    /// ```
    /// # fn f(fw: &curator_core::CuratorFramework) {
    /// use curator_recipes::DistributedBarrier;
    /// assert!(DistributedBarrier::new(fw, "/app/gate").is_ok());
    /// assert!(DistributedBarrier::new(fw, "app/gate").is_err()); // not absolute
    /// # }
    /// ```
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        path::validate(path)?;
        Ok(Self { fw: fw.clone(), path: path.to_string() })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sets the barrier: creates its node (and missing parents, as containers). Setting a
    /// barrier that is already set succeeds.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let barrier = curator_recipes::DistributedBarrier::new(&fw, "/app/gate")?;
    /// barrier.set_barrier().await?;
    /// barrier.set_barrier().await?; // already set: fine
    /// # Ok(()) }
    /// ```
    pub async fn set_barrier(&self) -> Result<()> {
        tracing::debug!(path = %self.path, "set barrier: create");
        // if_missing: set already is fine, and a create whose reply was lost is sent again.
        let created =
            self.fw.create().creating_parent_containers_if_needed().if_missing().for_path_with_default_data(&self.path);
        created.await.map(drop)
    }

    /// Removes the barrier: deletes its node, which lets every waiter through. Removing a
    /// barrier that is not set succeeds.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let barrier = curator_recipes::DistributedBarrier::new(&fw, "/app/gate")?;
    /// barrier.remove_barrier().await?; // not set: fine
    /// # Ok(()) }
    /// ```
    pub async fn remove_barrier(&self) -> Result<()> {
        tracing::debug!(path = %self.path, "remove barrier: delete");
        match self.fw.delete().for_path(&self.path).await {
            Ok(()) | Err(CuratorError::NoNode { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Waits until the barrier is not set (at once if it is not).
    ///
    /// # Errors
    /// The error of a check the retry policy gave up on (a connection loss that lasted), or
    /// [`CuratorError::Closed`] when the framework closes.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let barrier = curator_recipes::DistributedBarrier::new(&fw, "/app/gate")?;
    /// barrier.wait_on_barrier().await?;
    /// // the gate is open
    /// # Ok(()) }
    /// ```
    pub async fn wait_on_barrier(&self) -> Result<()> {
        let ended = self.wait().await.map(|()| true);
        super::record_wait("wait", &ended);
        ended.map(drop)
    }

    /// Waits at most `max_wait` until the barrier is not set: `true` if it was seen gone,
    /// `false` if the time ran out first (also when no connection could be had meanwhile).
    ///
    /// # Errors
    /// As [`wait_on_barrier`](Self::wait_on_barrier).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use std::time::Duration;
    /// let barrier = curator_recipes::DistributedBarrier::new(&fw, "/app/gate")?;
    /// if !barrier.wait_on_barrier_timeout(Duration::from_secs(5)).await? {
    ///     tracing::warn!("the gate is still closed after 5 s");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_on_barrier_timeout(&self, max_wait: Duration) -> Result<bool> {
        // A wait too long to count (`Duration::MAX`) is a wait without end.
        let at = deadline::deadline_after(tokio::time::Instant::now(), max_wait);
        let ended = match deadline::with_deadline(at, self.wait()).await {
            Ok(()) => Ok(true),
            Err(CuratorError::Timeout { .. }) => Ok(false),
            Err(err) => Err(err),
        };
        super::record_wait("wait", &ended);
        ended
    }

    /// Check, then wait for a wake-up and check again, until the node is gone.
    async fn wait(&self) -> Result<()> {
        let mut connection = Connection::new(&self.fw, None, &self.path);
        loop {
            tracing::debug!(path = %self.path, "exists+watch (is the barrier set?)");
            let (stat, watch) = self.fw.check_exists().for_path_and_watch(&self.path).await?;
            if stat.is_none() {
                tracing::debug!(path = %self.path, "the barrier is not set: through");
                return Ok(());
            }
            let woken = deadline::until(&self.path, async {
                tokio::select! {
                    event = watch.changed() => {
                        tracing::debug!(path = %self.path, event = ?event.event_type, state = ?event.session_state, "barrier watch fired: check again");
                        Ok(())
                    }
                    changed = connection.recheck_needed(None) => changed,
                }
            });
            woken.await?;
        }
    }
}
