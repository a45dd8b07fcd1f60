//! See the docs of the main type below, where this module's guide lives.

use std::fmt::Debug;
use std::time::Duration;

use crate::error::CuratorError;

pub mod deadline;
pub(crate) mod retry_loop;
pub use retry_loop::RetryLoop;

/// Decides whether to retry an operation and how long to sleep first.
///
/// # Guide
///
/// Retry policies: when an operation whose outcome is unknown may be tried again, and after how
/// long.
///
/// The framework runs one retry loop per user call (nested loops multiply the attempts). It asks
/// the policy only about errors for which [`CuratorError::is_retryable`] holds: connection loss in
/// any form and session expiry. `NoNode`, `NodeExists`, `BadVersion` and the like are never
/// retried.
///
/// ```
/// use std::time::Duration;
/// use curator_core::{ExponentialBackoffRetry, RetryPolicy};
///
/// let policy = ExponentialBackoffRetry::new(Duration::from_millis(100), 3);
/// let first = policy.allow_retry(0, Duration::ZERO);
/// assert!(first.is_some_and(|s| s >= Duration::from_millis(100) && s < Duration::from_millis(200)));
/// assert!(policy.allow_retry(3, Duration::ZERO).is_none());
/// ```
pub trait RetryPolicy: Send + Sync + Debug {
    /// `retry_count` is the number of retries already made (0 before the first retry) and
    /// `elapsed` the time since the operation began. `Some(sleep)` to retry after `sleep`.
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration>;

    /// Whether this error may be retried at all. By default, when its outcome is unknown.
    fn allow_retry_on(&self, err: &CuratorError) -> bool {
        err.is_retryable()
    }
}

/// Curator caps the exponent so that the shift cannot overflow.
const MAX_RETRIES_LIMIT: u32 = 29;

/// Sleeps `base × random[1, 2^(n+1))` before retry `n`, up to `max_retries` retries.
#[derive(Debug, Clone)]
pub struct ExponentialBackoffRetry {
    base_sleep: Duration,
    max_retries: u32,
    max_sleep: Duration,
}

impl ExponentialBackoffRetry {
    /// A policy with at most `max_retries` retries (capped at 29) and no cap on the sleep.
    pub fn new(base_sleep: Duration, max_retries: u32) -> Self {
        Self::with_max_sleep(base_sleep, max_retries, Duration::MAX)
    }

    /// As [`new`](Self::new), with each sleep capped at `max_sleep`.
    pub fn with_max_sleep(base_sleep: Duration, max_retries: u32, max_sleep: Duration) -> Self {
        Self { base_sleep, max_retries: max_retries.min(MAX_RETRIES_LIMIT), max_sleep }
    }

    fn sleep_for(&self, retry_count: u32) -> Duration {
        let exponent = retry_count.min(MAX_RETRIES_LIMIT) + 1;
        let factor = fastrand::u32(1..(1u32 << exponent)).max(1);
        self.base_sleep.saturating_mul(factor).min(self.max_sleep)
    }
}

impl RetryPolicy for ExponentialBackoffRetry {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        (retry_count < self.max_retries).then(|| self.sleep_for(retry_count))
    }
}

/// [`ExponentialBackoffRetry`] with a bound on each sleep.
#[derive(Debug, Clone)]
pub struct BoundedExponentialBackoffRetry(ExponentialBackoffRetry);

impl BoundedExponentialBackoffRetry {
    /// At most `max_retries` retries, each sleep at most `max_sleep`.
    pub fn new(base_sleep: Duration, max_sleep: Duration, max_retries: u32) -> Self {
        Self(ExponentialBackoffRetry::with_max_sleep(base_sleep, max_retries, max_sleep))
    }
}

impl RetryPolicy for BoundedExponentialBackoffRetry {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.0.allow_retry(retry_count, elapsed)
    }
}

/// Retries `n` times with a fixed sleep.
#[derive(Debug, Clone)]
pub struct RetryNTimes {
    n: u32,
    sleep: Duration,
}

impl RetryNTimes {
    /// `n` retries, `sleep` before each.
    pub fn new(n: u32, sleep: Duration) -> Self {
        Self { n, sleep }
    }
}

impl RetryPolicy for RetryNTimes {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        (retry_count < self.n).then_some(self.sleep)
    }
}

/// Retries once.
#[derive(Debug, Clone)]
pub struct RetryOneTime(RetryNTimes);

impl RetryOneTime {
    /// One retry after `sleep`.
    pub fn new(sleep: Duration) -> Self {
        Self(RetryNTimes::new(1, sleep))
    }
}

impl RetryPolicy for RetryOneTime {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.0.allow_retry(retry_count, elapsed)
    }
}

/// Retries with a fixed sleep until `max_elapsed` has passed since the operation began.
#[derive(Debug, Clone)]
pub struct RetryUntilElapsed {
    max_elapsed: Duration,
    sleep: Duration,
}

impl RetryUntilElapsed {
    /// Retry while less than `max_elapsed` has passed, sleeping `sleep` before each retry.
    pub fn new(max_elapsed: Duration, sleep: Duration) -> Self {
        Self { max_elapsed, sleep }
    }
}

impl RetryPolicy for RetryUntilElapsed {
    fn allow_retry(&self, _retry_count: u32, elapsed: Duration) -> Option<Duration> {
        (elapsed < self.max_elapsed).then_some(self.sleep)
    }
}

/// Retries forever with a fixed sleep.
#[derive(Debug, Clone)]
pub struct RetryForever {
    sleep: Duration,
}

impl RetryForever {
    /// Retry forever, sleeping `sleep` before each retry.
    pub fn new(sleep: Duration) -> Self {
        Self { sleep }
    }
}

impl RetryPolicy for RetryForever {
    fn allow_retry(&self, _retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        Some(self.sleep)
    }
}

/// Exponential backoff with no limit on the number of retries: `base × 2^n`, capped at `max`,
/// each pause jittered by up to a quarter. For work that must finish (cleanups), never for user
/// operations.
#[derive(Debug, Clone)]
pub struct ExponentialBackoffForever {
    base: Duration,
    max: Duration,
}

impl ExponentialBackoffForever {
    /// Pauses from `base` doubling up to `max`.
    pub const fn new(base: Duration, max: Duration) -> Self {
        Self { base, max }
    }
}

impl RetryPolicy for ExponentialBackoffForever {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        let pause = self.base.saturating_mul(1u32 << retry_count.min(20)).min(self.max);
        let jitter = pause.mul_f64(fastrand::f64() / 4.0);
        Some(pause.saturating_sub(jitter))
    }
}

/// The policy of [`CuratorFramework::cleanup_retry_loop`](crate::CuratorFramework::cleanup_retry_loop).
pub(crate) const CLEANUP_BACKOFF: ExponentialBackoffForever =
    ExponentialBackoffForever::new(Duration::from_millis(50), Duration::from_secs(2));

/// Wraps another policy and refuses to retry after session expiry: for users who treat a lost
/// session as the end of the operation rather than something to carry over to the next session.
#[derive(Debug)]
pub struct SessionFailedRetryPolicy<P> {
    delegate: P,
}

impl<P: RetryPolicy> SessionFailedRetryPolicy<P> {
    /// Wraps `delegate`.
    pub fn new(delegate: P) -> Self {
        Self { delegate }
    }
}

impl<P: RetryPolicy> RetryPolicy for SessionFailedRetryPolicy<P> {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.delegate.allow_retry(retry_count, elapsed)
    }

    fn allow_retry_on(&self, err: &CuratorError) -> bool {
        !matches!(err, CuratorError::SessionExpired { .. }) && self.delegate.allow_retry_on(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_sleeps_grow_and_stop() {
        let p = ExponentialBackoffRetry::new(Duration::from_millis(10), 5);
        for n in 0..5 {
            let s = p.allow_retry(n, Duration::ZERO).expect("within max_retries");
            assert!(s >= Duration::from_millis(10), "retry {n}: {s:?}");
            assert!(s < Duration::from_millis(10) * (1 << (n + 1)), "retry {n}: {s:?}");
        }
        assert!(p.allow_retry(5, Duration::ZERO).is_none());
        let bounded = BoundedExponentialBackoffRetry::new(Duration::from_millis(10), Duration::from_millis(15), 50);
        assert!((0..29).all(|n| bounded.allow_retry(n, Duration::ZERO).is_some_and(|s| s <= Duration::from_millis(15))));
        assert!(bounded.allow_retry(29, Duration::ZERO).is_none(), "retries are capped at 29");
    }

    #[test]
    fn fixed_policies() {
        let s = Duration::from_millis(3);
        assert_eq!(RetryNTimes::new(2, s).allow_retry(1, Duration::ZERO), Some(s));
        assert_eq!(RetryNTimes::new(2, s).allow_retry(2, Duration::ZERO), None);
        assert_eq!(RetryOneTime::new(s).allow_retry(0, Duration::ZERO), Some(s));
        assert_eq!(RetryOneTime::new(s).allow_retry(1, Duration::ZERO), None);
        let until = RetryUntilElapsed::new(Duration::from_secs(1), s);
        assert_eq!(until.allow_retry(100, Duration::from_millis(999)), Some(s));
        assert_eq!(until.allow_retry(0, Duration::from_secs(1)), None);
        assert_eq!(RetryForever::new(s).allow_retry(u32::MAX, Duration::MAX), Some(s));
    }

    #[test]
    fn forever_backs_off_to_its_cap() {
        let p = ExponentialBackoffForever::new(Duration::from_millis(50), Duration::from_secs(2));
        let first = p.allow_retry(0, Duration::ZERO).expect("always retries");
        assert!(first <= Duration::from_millis(50) && first >= Duration::from_millis(37), "{first:?}");
        let late = p.allow_retry(u32::MAX, Duration::MAX).expect("always retries");
        assert!(late <= Duration::from_secs(2) && late >= Duration::from_millis(1500), "{late:?}");
    }

    #[test]
    fn session_failed_policy_refuses_expiry_only() {
        let p = SessionFailedRetryPolicy::new(RetryForever::new(Duration::ZERO));
        assert!(!p.allow_retry_on(&CuratorError::SessionExpired { path: "/a".into() }));
        assert!(p.allow_retry_on(&CuratorError::ConnectionLoss { path: "/a".into(), detail: "cut".into() }));
        assert!(!p.allow_retry_on(&CuratorError::NoNode { path: "/a".into() }));
    }
}
