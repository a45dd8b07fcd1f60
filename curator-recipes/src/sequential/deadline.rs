//! The deadline of a timed acquire (`acquire_timeout`), carried as a task-local value so that
//! every layer under it (a semaphore's inner mutex, a multi-lock's mutexes) honours it without
//! passing it through each signature.
//!
//! The deadline bounds the *waiting*, as Curator's `acquire(time, unit)` does: a timed acquire
//! always makes its first attempt (create our node and list the contenders: one round trip),
//! so `Duration::ZERO` is a try-lock that takes a free lock. Waiting for a connection, waiting
//! behind other contenders and pausing between retries all end at the deadline, with
//! [`CuratorError::Timeout`]; the acquire's cleanup then deletes its node.

use std::future::Future;

use curator_core::{CuratorError, Result};
use tokio::time::Instant;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `fut` with `deadline` as the deadline of every acquire inside it.
pub(crate) async fn with_deadline<F: Future>(deadline: Instant, fut: F) -> F::Output {
    DEADLINE.scope(deadline, fut).await
}

/// The deadline of the acquire running in this task, if it is timed.
pub(crate) fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// Whether the current acquire's deadline has passed.
pub(crate) fn passed() -> bool {
    current().is_some_and(|d| Instant::now() >= d)
}

/// Awaits `fut`, or fails with [`CuratorError::Timeout`] (on `path`) at the deadline. A
/// future that is ready at once completes even when the deadline has passed.
pub(crate) async fn until<T>(path: &str, fut: impl Future<Output = Result<T>>) -> Result<T> {
    match current() {
        None => fut.await,
        Some(deadline) => match tokio::time::timeout_at(deadline, fut).await {
            Ok(result) => result,
            Err(_) => Err(CuratorError::Timeout { path: path.to_string() }),
        },
    }
}
