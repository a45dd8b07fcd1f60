//! Distributed locks, wire compatible with Apache Curator 5.x: a Rust service and a Java
//! service using Curator exclude each other on the same path.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use curator_core::CuratorFramework;
//! use curator_recipes::locks::{InterProcessMutex, InterProcessReadWriteLock};
//!
//! let server = curator_test::TestingServer::start().await?;
//! let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
//! fw.start()?;
//!
//! let mutex = InterProcessMutex::new(&fw, "/app/lock")?;
//! let guard = mutex.acquire().await?;
//! // Pass the token to what the lock protects; it grows with every acquisition.
//! let token = guard.fencing_token();
//! tokio::select! {
//!     _ = tokio::time::sleep(Duration::from_millis(10)) => { /* the work */ }
//!     reason = guard.lost() => panic!("lock lost: {reason}"),
//! }
//! guard.release().await?;
//!
//! let rw = InterProcessReadWriteLock::new(&fw, "/app/rw")?;
//! let write = rw.write_lock().acquire().await?;
//! let read = rw.read_lock().acquire().await?; // downgrade: taken while writing
//! write.release().await?;
//! assert!(read.fencing_token() > token);
//! read.release().await?;
//! fw.close().await;
//! # Ok(()) }
//! ```
//!
//! | recipe | nodes under the path `P` |
//! |---|---|
//! | [`InterProcessMutex`] | `P/_c_<uuid>-lock-<seq>` |
//! | [`InterProcessReadWriteLock`] | `P/_c_<uuid>-__WRIT__<seq>`, `P/_c_<uuid>-__READ__<seq>` |
//! | [`InterProcessSemaphoreV2`], [`InterProcessSemaphoreMutex`] | `P/locks/_c_<uuid>-lock-<seq>` (a mutex), `P/leases/_c_<uuid>-lease-<seq>` |
//! | [`InterProcessMultiLock`] | one mutex per path |
//! | [`QueuedMutex`] (ours: many local waiters, one node per process) | as [`InterProcessMutex`] |
//!
//! Past Curator: every hold has a fencing token and tells when it may be lost
//! ([`LockGuard::lost`](crate::sequential::HeldNode::lost)); acquires are cancel safe (dropping the future deletes the node, also
//! when the create's reply was lost); waiters are tasks; the create and the first listing are
//! pipelined (2 round trips and 3 requests per uncontended acquire and release).
//!
//! # Lock paths are containers
//!
//! A lock's path need not exist: the first acquire creates it, and its missing parents, as
//! container nodes (`CreateMode::Container`), as Curator does, so that lock paths do not pile
//! up. The server deletes a container that has had children once it is empty, at its next
//! container check (`znode.container.checkIntervalMs`, every 60 s by default): about a minute
//! after the lock was last freed, a lock path the lock created is gone, **with any data stored
//! on it**. To keep data on a lock path, create the node yourself before the first acquire (a
//! node that exists is never turned into a container), or build the framework with
//! [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents)
//! (parents are then persistent and stay).
//!
//! # How an acquire works
//!
//! 1. Send `create(P/_c_<uuid>-<name>, ephemeral sequential)` and, right behind it on the same
//!    session, `getChildren(P)`; ZooKeeper answers in order, so the listing shows our node.
//!    Missing parents are created as containers. If the create's outcome is unknown, list `P`
//!    and look for our protected prefix before creating again.
//! 2. Order the contenders by the sequence number after the lock name (never by the whole
//!    name; other children are ignored) and ask the lock's predicate: hold, or wait for
//!    some nodes to go. A waiter with few nodes before it (at most [`WATCH_ALL_LIMIT`])
//!    watches all of them and holds once all are deleted, without listing again (lower
//!    sequence numbers never come back); otherwise it watches its predecessor and lists again
//!    after its deletion. Any other watch event (a disconnection, a data change) means
//!    "list again".
//! 3. Our node belongs to the session it was made on: after a new session, start over.
//!
//! The locks are thin on top of the crate's sequential-node core (`sequential/`), which every
//! "ephemeral sequential contender" recipe shares; the code of this algorithm is the `Acquire`
//! state machine in `sequential/acquire.rs`, one method per phase.

mod guard;
mod multi;
mod mutex;
mod queued;
mod rwlock;
mod semaphore;

pub use guard::LockGuard;
pub use multi::{InterProcessMultiLock, MultiLockGuard};
pub use mutex::{InterProcessMutex, Revoker};
pub use queued::{QueuedGuard, QueuedMutex};
pub use rwlock::{InterProcessReadWriteLock, ReadLock, WriteLock};
pub use semaphore::{InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease};
// Defined by the sequential-node core; public here, where users have always found them.
pub use crate::sequential::{
    HeldNode, LockLost, LockNode, LEASE_NAME, MUTEX_LOCK_NAME, READ_LOCK_NAME, REVOKE_MESSAGE, SEMAPHORE_LEASE_PARENT,
    SEMAPHORE_LOCK_PARENT, WATCH_ALL_LIMIT, WRITE_LOCK_NAME,
};

/// Runs an acquire for at most `timeout`: `Ok(None)` when the time ran out first. Every lock's
/// `acquire_timeout` is this one function (docs/architecture.md section 8.6).
///
/// The timeout bounds the *waiting*, as Curator's `acquire(time, unit)` does: the first attempt
/// (create our node and list the contenders, one round trip) is always made, so `Duration::ZERO`
/// is a try-lock that takes a free lock. The acquire runs under a
/// [`curator_core::retry::deadline`], so waiting for a connection, pausing between retries,
/// waiting behind other contenders and a semaphore's wait for room all end at the deadline,
/// whatever the connection does; only a request already sent is awaited until it is answered or
/// the client sees its connection fail. Giving up leaves no node behind (the acquire is cancel
/// safe). A timeout too long to count (`Duration::MAX`) is a wait without end.
async fn within<T>(
    timeout: std::time::Duration,
    acquire: impl std::future::Future<Output = curator_core::Result<T>>,
) -> curator_core::Result<Option<T>> {
    use curator_core::retry::deadline;
    // A timeout too long to add to now (`Duration::MAX`) waits without end.
    let at = deadline::deadline_after(tokio::time::Instant::now(), timeout);
    match deadline::with_deadline(at, acquire).await {
        Ok(held) => Ok(Some(held)),
        // Only a deadline makes this error: the time ran out, or the next retry would have been
        // past it.
        Err(curator_core::CuratorError::Timeout { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn guards_may_move_between_tasks() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<super::LockGuard>();
        send_sync::<super::MultiLockGuard>();
        send_sync::<super::Lease>();
        send_sync::<super::InterProcessMutex>();
        send_sync::<super::InterProcessReadWriteLock>();
        send_sync::<super::InterProcessSemaphoreV2>();
        send_sync::<super::InterProcessSemaphoreMutex>();
    }
}
