//! The error and retry policies every injected fault is tried with: both error policies, the
//! patient retry policy of [`lock_retry`] and a short one.

use std::time::Duration;

use curator_core::RetryNTimes;
use curator_core::{CuratorFramework, CuratorFrameworkBuilder, ErrorPolicy};

use crate::fixture::{builder, connected};
use crate::locks::lock_retry;

/// A retry policy to try a fault with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The patient policy of [`lock_retry`].
    Default,
    /// `RetryNTimes(1, 100ms)`.
    Short,
}

/// Every combination of error policy and retry policy.
pub const COMBINATIONS: [(ErrorPolicy, Retry); 4] = [
    (ErrorPolicy::Standard, Retry::Default),
    (ErrorPolicy::Standard, Retry::Short),
    (ErrorPolicy::Session, Retry::Default),
    (ErrorPolicy::Session, Retry::Short),
];

/// `b` with the error policy `policy` and the retry policy `retry`.
pub fn with_policies(b: CuratorFrameworkBuilder, policy: ErrorPolicy, retry: Retry) -> CuratorFrameworkBuilder {
    let b = b.connection_state_error_policy(policy);
    match retry {
        Retry::Default => lock_retry(b),
        Retry::Short => b.retry_policy(RetryNTimes::new(1, Duration::from_millis(100))),
    }
}

/// A started, connected framework on `connect_string` with [`builder`]'s options and the
/// given policies.
pub async fn framework(connect_string: &str, policy: ErrorPolicy, retry: Retry) -> CuratorFramework {
    connected(with_policies(builder(connect_string), policy, retry)).await
}

/// As [`framework`], with the session timeout `session`.
pub async fn framework_with(
    connect_string: &str,
    policy: ErrorPolicy,
    retry: Retry,
    session: Duration,
) -> CuratorFramework {
    connected(with_policies(builder(connect_string).session_timeout(session), policy, retry)).await
}
