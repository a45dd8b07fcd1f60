//! [`RetryLoop`]: the framework's one retry loop. Every operation, recipe and background
//! cleanup that retries goes through it, so that a retry policy means one thing everywhere.
//!
//! # The algorithm
//!
//! ```text
//! attempt ──ok──────────────────────────────► done (the loop is dropped)
//!    │
//!    └─err─► on_error(err):
//!              the framework is closed (when the loop has one), and err is      ─► Err(Closed)
//!                retryable or allowed by allow_retry_on (the close cut it short)
//!              not allowed by allow_retry_on (a definite answer such as NoNode) ─► Err(err)
//!              the framework is closed                                          ─► Err(err)
//!              allow_retry(retries, elapsed) == None                              ─► Err(err)
//!              Some(pause) ending past the task's deadline (module `deadline`)     ─► Err(Timeout)
//!              Some(pause) ─► sleep(pause), retries += 1                         ─► Ok(()): attempt again
//! ```
//!
//! `elapsed` counts from the start of the current *failure streak*: a recipe that makes progress
//! between failures (a lock that moved up the queue, a watch that fired) calls
//! [`RetryLoop::reset`], so that waiting is never counted as failing.

use std::sync::Arc;
use std::time::Instant;

use crate::error::{CuratorError, Result};
use crate::retry::{deadline, RetryPolicy};
#[cfg(doc)]
use crate::CuratorFramework;

/// Whether the framework a loop stops with is closed (made by [`RetryLoop::new`], in module
/// `framework`, from the framework given). This module names no framework: the session
/// manager, below the framework, runs its backoff through a loop too.
pub(crate) type IsClosed = Arc<dyn Fn() -> bool + Send + Sync>;

/// One run of a retry policy over one logical operation.
///
/// ```
/// # async fn f(client: curator_core::CuratorFramework) -> curator_core::Result<()> {
/// let mut retry = client.retry_loop();
/// let children = loop {
///     let attempt = async { Ok::<_, curator_core::CuratorError>(client.get_children().for_path("/").await?) };
///     match attempt.await {
///         Ok(children) => break children,
///         Err(err) => retry.on_error(err).await?, // sleeps, or gives up with `err`
///     }
/// };
/// # drop(children); Ok(()) }
/// ```
pub struct RetryLoop {
    policy: Arc<dyn RetryPolicy>,
    closed: Option<IsClosed>,
    started: Instant,
    retries: u32,
}

impl std::fmt::Debug for RetryLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryLoop")
            .field("policy", &self.policy)
            .field("stops_with_framework", &self.closed.is_some())
            .field("started", &self.started)
            .field("retries", &self.retries)
            .finish()
    }
}

impl RetryLoop {
    /// A loop under `policy` that stops retrying once `closed` (if any) says its framework is
    /// closed. [`RetryLoop::new`] is the public way to make one.
    pub(crate) fn stopping_when(policy: Arc<dyn RetryPolicy>, closed: Option<IsClosed>) -> Self {
        Self { policy, closed, started: Instant::now(), retries: 0 }
    }

    /// Whether the loop's framework, if it has one, is closed.
    fn framework_closed(&self) -> bool {
        self.closed.as_ref().is_some_and(|closed| closed())
    }

    /// After a failed attempt: sleeps and returns `Ok(())` when the policy allows another
    /// attempt, else returns `Err(err)`.
    pub async fn on_error(&mut self, err: CuratorError) -> Result<()> {
        // An error the loop would have retried but for the close is the close's doing: report it
        // as such (its code is SESSIONEXPIRED, as Curator reports operations its close cut
        // short). That is an unknown outcome, or any error the policy retries (one that retries
        // `NodeExists` too). A definite answer the policy does not retry stays the answer.
        let retried = err.is_retryable() || self.policy.allow_retry_on(&err);
        if retried && self.framework_closed() {
            tracing::debug!(error = %err, retries = self.retries, "giving up: the framework is closed");
            return Err(CuratorError::Closed);
        }
        match self.next_pause(&err) {
            // Under a deadline (module `deadline`), a retry that could only start after it is
            // not made.
            // A pause too long to add to now (`Duration::MAX`) ends past any deadline.
            Some(pause)
                if deadline::current()
                    .is_some_and(|at| deadline::deadline_after(tokio::time::Instant::now(), pause) >= at) =>
            {
                tracing::debug!(error = %err, retries = self.retries, ?pause, "giving up: the next attempt is past the deadline");
                Err(deadline::timeout(err.path().unwrap_or_default()))
            }
            Some(pause) => {
                tracing::debug!(error = %err, retries = self.retries, ?pause, "retrying");
                tokio::time::sleep(pause).await;
                Ok(())
            }
            None => {
                tracing::debug!(error = %err, retries = self.retries, "giving up");
                Err(err)
            }
        }
    }

    /// The pause before the next attempt after `err`, or `None` to give up. Does not sleep and
    /// does not count the retry: for loops that wait on something else meanwhile.
    pub fn pause_for(&self, err: &CuratorError) -> Option<std::time::Duration> {
        if !self.policy.allow_retry_on(err) || self.framework_closed() {
            return None;
        }
        self.policy.allow_retry(self.retries, self.started.elapsed())
    }

    /// As [`pause_for`](Self::pause_for), and counts the retry when there is one: for loops that
    /// sleep in their own way (in a `select!` with other wake-ups).
    pub fn next_pause(&mut self, err: &CuratorError) -> Option<std::time::Duration> {
        let pause = self.pause_for(err)?;
        self.retries += 1;
        Some(pause)
    }

    /// Progress was made: the next failure starts a new streak with the whole policy.
    pub fn reset(&mut self) {
        self.retries = 0;
        self.started = Instant::now();
    }

    /// Retries made in the current streak.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// The pause before the next attempt after a failure that is no operation's error (a
    /// recipe's own work failed: a leadership function that panicked), or `None` to give up;
    /// counts the retry when there is one. Only the policy's
    /// [`allow_retry`](RetryPolicy::allow_retry) decides (its `allow_retry_on` is about
    /// operations' errors), and nothing is retried once the framework is closed. Does not sleep.
    pub fn next_pause_after_failure(&mut self) -> Option<std::time::Duration> {
        if self.framework_closed() {
            return None;
        }
        let pause = self.policy.allow_retry(self.retries, self.started.elapsed())?;
        self.retries += 1;
        Some(pause)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::retry::RetryNTimes;

    fn lost() -> CuratorError {
        CuratorError::ConnectionLoss { path: "/a".into(), detail: "cut".into() }
    }

    #[tokio::test]
    async fn gives_up_when_the_policy_does_and_a_reset_starts_a_new_streak() {
        let mut retry = RetryLoop::new(Arc::new(RetryNTimes::new(2, Duration::from_millis(10))), None);
        assert!(retry.on_error(lost()).await.is_ok());
        assert!(retry.on_error(lost()).await.is_ok());
        assert_eq!(retry.retries(), 2);
        assert!(matches!(retry.on_error(lost()).await, Err(CuratorError::ConnectionLoss { .. })));
        retry.reset();
        assert_eq!(retry.retries(), 0);
        assert!(retry.on_error(lost()).await.is_ok(), "a new streak gets the whole policy again");
    }

    #[tokio::test]
    async fn never_retries_a_definite_answer() {
        let mut retry = RetryLoop::new(Arc::new(RetryNTimes::new(5, Duration::ZERO)), None);
        let err = retry.on_error(CuratorError::NoNode { path: "/a".into() }).await;
        assert!(matches!(err, Err(CuratorError::NoNode { .. })));
        assert_eq!(retry.retries(), 0);
    }

    #[test]
    fn next_pause_counts_and_pause_for_does_not() {
        let mut retry = RetryLoop::new(Arc::new(RetryNTimes::new(1, Duration::from_millis(7))), None);
        assert_eq!(retry.pause_for(&lost()), Some(Duration::from_millis(7)));
        assert_eq!(retry.retries(), 0);
        assert_eq!(retry.next_pause(&lost()), Some(Duration::from_millis(7)));
        assert_eq!(retry.next_pause(&lost()), None);
    }

    #[test]
    fn a_failure_that_is_no_error_is_paced_by_the_policy_alone() {
        let mut retry = RetryLoop::new(Arc::new(RetryNTimes::new(2, Duration::from_millis(7))), None);
        assert_eq!(retry.next_pause_after_failure(), Some(Duration::from_millis(7)));
        assert_eq!(retry.next_pause_after_failure(), Some(Duration::from_millis(7)));
        assert_eq!(retry.next_pause_after_failure(), None, "the policy gives up");
        retry.reset();
        assert_eq!(retry.next_pause_after_failure(), Some(Duration::from_millis(7)));
    }
}
