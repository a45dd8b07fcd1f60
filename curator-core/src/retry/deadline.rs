//! A deadline for everything the framework does in one task: [`with_deadline`].
//!
//! Under a deadline, the waits the framework adds around requests end at the deadline with
//! [`CuratorError::Timeout`]: waiting for a connection (otherwise bounded by the connection
//! timeout) and pausing between retries (a pause that would end past the deadline is not
//! taken: the loop gives up at once). A request already sent is not abandoned: its answer, or the
//! client noticing that the connection failed, ends it. Code that waits on something else (a
//! watch) bounds that wait with [`until`]. A deadline made from a duration a user gave is made
//! with [`deadline_after`], which saturates.
//!
//! Recipes run a timed acquire (`acquire_timeout`) under one, so that every layer under it (a
//! semaphore's inner lock, its lease create, its listings) honours the same deadline without
//! passing it through each signature. The deadline is task-local: work spawned from the task
//! (a background cleanup, a guaranteed delete) is not bound by it. See docs/architecture.md
//! section 8.6.
//!
//! ```
//! # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
//! use std::time::Duration;
//! use curator_core::deadline;
//! use curator_core::CuratorError;
//!
//! let at = tokio::time::Instant::now() + Duration::from_millis(500);
//! match deadline::with_deadline(at, async { fw.get_data().for_path("/config").await }).await {
//!     Ok(data) => println!("{} bytes", data.len()),
//!     // No connection (or retries left) within 500 ms.
//!     Err(CuratorError::Timeout { path }) => println!("{path}: gave up at the deadline"),
//!     Err(other) => return Err(other),
//! }
//! # Ok(()) }
//! ```

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{CuratorError, Result};

tokio::task_local! {
    static DEADLINE: Instant;
}

/// How far ahead [`deadline_after`] puts a deadline too far to represent: about 30 years, as
/// tokio's own "far future".
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `now + timeout`, saturating: a timeout too long to add to `now` (`Duration::MAX`,
/// `Duration::from_millis(u64::MAX)`) gives an instant about 30 years ahead, a wait without
/// end for all purposes, never a panic. Every deadline made from a duration a user gave (a
/// timed acquire, a retry pause, a connection timeout) is made here.
///
/// ```
/// use std::time::Duration;
/// use curator_core::deadline::deadline_after;
///
/// let now = tokio::time::Instant::now();
/// assert_eq!(deadline_after(now, Duration::from_secs(1)), now + Duration::from_secs(1));
/// assert!(deadline_after(now, Duration::MAX) > now + Duration::from_secs(86_400 * 365));
/// ```
pub fn deadline_after(now: Instant, timeout: Duration) -> Instant {
    // 30 years past any instant a clock reads is representable: the last fallback is never taken.
    now.checked_add(timeout).or_else(|| now.checked_add(FAR_FUTURE)).unwrap_or(now)
}

/// Whether a wait of `wait` never ends for any timer here: [`deadline_after`] (and tokio's own
/// timers) put it at the far future (about 30 years), so nothing waiting for its end ever sees it.
pub(crate) fn never_ends(wait: Duration) -> bool {
    wait >= FAR_FUTURE
}

/// Runs `fut` with `deadline` as the deadline of every framework wait inside it (see the
/// module docs). A deadline inside another one is the earlier of the two.
pub async fn with_deadline<F: Future>(deadline: Instant, fut: F) -> F::Output {
    let deadline = current().map_or(deadline, |outer| outer.min(deadline));
    DEADLINE.scope(deadline, fut).await
}

/// The deadline this task runs under, if any.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// Whether this task runs under a deadline that has passed.
pub fn passed() -> bool {
    current().is_some_and(|d| Instant::now() >= d)
}

/// Awaits `fut`, or fails with [`CuratorError::Timeout`] (on `path`) at the deadline, if this
/// task runs under one. A future that is ready at once completes even when the deadline has
/// passed.
pub async fn until<T>(path: &str, fut: impl Future<Output = Result<T>>) -> Result<T> {
    match current() {
        None => fut.await,
        Some(deadline) => match tokio::time::timeout_at(deadline, fut).await {
            Ok(result) => result,
            Err(_) => Err(timeout(path)),
        },
    }
}

/// The error a wait cut by the deadline ends with.
pub(crate) fn timeout(path: &str) -> CuratorError {
    tracing::debug!(path, "deadline reached");
    CuratorError::Timeout { path: path.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn until_ends_at_the_deadline_and_inner_deadlines_are_the_earlier() {
        let at = Instant::now() + Duration::from_millis(20);
        let cut = with_deadline(at, until("/a", std::future::pending::<Result<()>>())).await;
        assert!(matches!(cut, Err(CuratorError::Timeout { path }) if path == "/a"));
        assert!(Instant::now() >= at);

        let later = at + Duration::from_secs(60);
        let inner = with_deadline(at, with_deadline(later, async { current() })).await;
        assert_eq!(inner, Some(at));
        assert_eq!(current(), None);
        let ready = with_deadline(Instant::now(), until("/b", async { Ok(1) })).await;
        assert!(matches!(ready, Ok(1)));
    }
}
