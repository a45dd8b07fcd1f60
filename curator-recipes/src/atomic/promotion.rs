//! [`PromotedToLock`]: when an atomic value falls back to a mutex after its optimistic tries,
//! and the policy that retries conflicts (docs/architecture.md section 16.2).

use std::sync::Arc;
use std::time::Duration;

use curator_core::{path, CuratorError, Result};
use curator_core::{RetryNTimes, RetryPolicy};

#[cfg(doc)]
use crate::locks::InterProcessMutex;

/// When and how an atomic value falls back to a mutex after its optimistic tries ran out
/// (Curator's `PromotedToLock`).
#[derive(Debug, Clone)]
pub struct PromotedToLock {
    pub(super) lock_path: String,
    pub(super) max_lock_time: Option<Duration>,
    pub(super) retry_policy: Arc<dyn RetryPolicy>,
}

impl PromotedToLock {
    /// Promotion to an [`InterProcessMutex`] on `lock_path`, waited for without limit, with one
    /// try under the lock (no retry).
    pub fn new(lock_path: &str) -> Result<Self> {
        path::validate(lock_path)?;
        Ok(Self {
            lock_path: lock_path.to_string(),
            max_lock_time: None,
            retry_policy: Arc::new(RetryNTimes::new(0, Duration::ZERO)),
        })
    }

    /// Wait at most `max` for the mutex; when it is not had in time the operation does not
    /// succeed.
    pub fn max_lock_time(mut self, max: Duration) -> Self {
        self.max_lock_time = Some(max);
        self
    }

    /// The retry policy of the tries made under the mutex.
    pub fn retry_policy(mut self, policy: impl RetryPolicy + 'static) -> Self {
        self.retry_policy = Arc::new(policy);
        self
    }

    /// The mutex's path.
    pub fn lock_path(&self) -> &str {
        &self.lock_path
    }
}

/// A policy that also retries conflicts (a versioned write that lost a race), which no
/// framework policy retries: the optimistic loop's reason to exist.
#[derive(Debug)]
pub(super) struct ConflictsToo(pub(super) Arc<dyn RetryPolicy>);

impl RetryPolicy for ConflictsToo {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.0.allow_retry(retry_count, elapsed)
    }

    fn allow_retry_on(&self, err: &CuratorError) -> bool {
        is_conflict(err) || self.0.allow_retry_on(err)
    }
}

/// A write that lost a race: another client changed, created or deleted the node first.
pub(super) fn is_conflict(err: &CuratorError) -> bool {
    matches!(err, CuratorError::BadVersion { .. } | CuratorError::NodeExists { .. } | CuratorError::NoNode { .. })
}
