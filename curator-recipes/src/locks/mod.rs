//! Locks: their guide is the crate root's "Locks" section (lib.rs).

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
    SEMAPHORE_LOCK_PARENT, WRITE_LOCK_NAME,
};

/// Runs an acquire for at most `timeout`: `Ok(None)` when the time ran out first. Every lock's
/// `acquire_timeout` is this one function (docs/architecture.md section 8.6).
///
/// The timeout bounds the *waiting*, as Curator's `acquire(time, unit)` does: the first attempt
/// (create our node and list the contenders, one round trip) is always made, so `Duration::ZERO`
/// is a try-lock that takes a free lock. The acquire runs under a
/// [`curator_core::deadline`], so waiting for a connection, pausing between retries,
/// waiting behind other contenders and a semaphore's wait for room all end at the deadline,
/// whatever the connection does; only a request already sent is awaited until it is answered or
/// the client sees its connection fail. Giving up leaves no node behind (the acquire is cancel
/// safe). A timeout too long to count (`Duration::MAX`) is a wait without end.
async fn within<T>(
    timeout: std::time::Duration,
    acquire: impl std::future::Future<Output = curator_core::Result<T>>,
) -> curator_core::Result<Option<T>> {
    use curator_core::deadline;
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
