//! The framework's retry loops (docs/architecture.md section 4.3): [`RetryLoop::new`], which
//! stops a loop once its framework is closed, and the framework's own loops. Written here, above
//! both, so that module `retry` names no framework.

use std::sync::Arc;

use super::CuratorFramework;
use crate::retry::retry_loop::IsClosed;
use crate::retry::RetryLoop;

impl RetryLoop {
    /// A loop under `policy` that stops retrying once `framework` (if any) is closed.
    pub fn new(policy: Arc<dyn crate::retry::RetryPolicy>, framework: Option<&CuratorFramework>) -> Self {
        let closed = framework.cloned().map(|fw| Arc::new(move || fw.is_closed()) as IsClosed);
        RetryLoop::stopping_when(policy, closed)
    }
}

impl CuratorFramework {
    /// A [`RetryLoop`] under this framework's retry policy.
    pub fn retry_loop(&self) -> RetryLoop {
        RetryLoop::new(self.retry_policy().clone(), Some(self))
    }

    /// A [`RetryLoop`] for cleanups that must not give up with the user's policy (deleting an
    /// abandoned node, a guaranteed delete): it retries every retryable error, backing off from
    /// 50 ms to 2 s, until the framework closes.
    pub fn cleanup_retry_loop(&self) -> RetryLoop {
        RetryLoop::new(Arc::new(crate::retry::CLEANUP_BACKOFF), Some(self))
    }
}
