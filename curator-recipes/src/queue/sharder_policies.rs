//! [`QueueSharderPolicies`]: when a [`QueueSharder`](super::QueueSharder) adds a shard, how
//! often it looks, and how many shards it may make (Curator's `QueueSharderPolicies`), checked
//! when built.

use std::time::Duration;

use curator_core::{CuratorError, Result};

/// The options of a [`QueueSharder`](super::QueueSharder) (Curator's `QueueSharderPolicies`):
/// `QueueSharderPolicies::builder().new_queue_threshold(100).threshold_check(d).build()?`.
/// Its `Default` is Curator's: a threshold of 10,000 nodes, a check every 30 s, at most 10
/// shards.
///
/// ```
/// use std::time::Duration;
/// use curator_core::CuratorError;
/// use curator_recipes::QueueSharderPolicies;
///
/// let policies = QueueSharderPolicies::builder()
///     .new_queue_threshold(500)
///     .threshold_check(Duration::from_secs(5))
///     .max_queues(4)
///     .build()?;
/// assert_eq!(policies.new_queue_threshold(), 500);
/// let zero = QueueSharderPolicies::builder().threshold_check(Duration::ZERO).build();
/// assert!(matches!(zero, Err(CuratorError::InvalidArgument { .. })));
/// # Ok::<(), CuratorError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSharderPolicies {
    new_queue_threshold: usize,
    threshold_check: Duration,
    max_queues: usize,
}

impl Default for QueueSharderPolicies {
    fn default() -> Self {
        Self {
            new_queue_threshold: Self::DEFAULT_NEW_QUEUE_THRESHOLD,
            threshold_check: Self::DEFAULT_THRESHOLD_CHECK,
            max_queues: Self::DEFAULT_MAX_QUEUES,
        }
    }
}

impl QueueSharderPolicies {
    /// Curator's default threshold: a shard holding this many item nodes or more makes the
    /// leader add a shard.
    pub const DEFAULT_NEW_QUEUE_THRESHOLD: usize = 10_000;
    /// Curator's default pause between two checks of the shards' sizes (`thresholdCheckMs`).
    pub const DEFAULT_THRESHOLD_CHECK: Duration = Duration::from_secs(30);
    /// Curator's default most shards the leader makes.
    pub const DEFAULT_MAX_QUEUES: usize = 10;
    /// The longest pause between two checks: Curator's `thresholdCheckMs` is an `int` of
    /// milliseconds, about 24.8 days.
    pub const MAX_THRESHOLD_CHECK: Duration = Duration::from_millis(i32::MAX as u64);

    /// A builder, from Curator's defaults.
    pub fn builder() -> QueueSharderPoliciesBuilder {
        QueueSharderPoliciesBuilder { policies: Self::default() }
    }

    /// The item nodes a shard holds (or more) for the leader to add a shard.
    pub fn new_queue_threshold(&self) -> usize {
        self.new_queue_threshold
    }

    /// The pause between two checks of the shards' sizes.
    pub fn threshold_check(&self) -> Duration {
        self.threshold_check
    }

    /// The most shards the leader makes.
    pub fn max_queues(&self) -> usize {
        self.max_queues
    }
}

/// The builder of [`QueueSharderPolicies`]; its values are checked by
/// [`build`](Self::build).
#[derive(Debug, Clone)]
pub struct QueueSharderPoliciesBuilder {
    policies: QueueSharderPolicies,
}

impl QueueSharderPoliciesBuilder {
    /// A shard holding `threshold` item nodes or more makes the leader add a shard
    /// (Curator's `newQueueThreshold`; at least 1). A shard at half of it or less is
    /// preferred by [`QueueSharder::queue`](super::QueueSharder::queue) again.
    pub fn new_queue_threshold(mut self, threshold: usize) -> Self {
        self.policies.new_queue_threshold = threshold;
        self
    }

    /// The pause between two checks of the shards' sizes (Curator's `thresholdCheckMs`): more
    /// than zero, at most [`QueueSharderPolicies::MAX_THRESHOLD_CHECK`].
    pub fn threshold_check(mut self, every: Duration) -> Self {
        self.policies.threshold_check = every;
        self
    }

    /// The most shards the leader makes (Curator's `maxQueues`; at least 1).
    pub fn max_queues(mut self, max_queues: usize) -> Self {
        self.policies.max_queues = max_queues;
        self
    }

    /// The policies.
    ///
    /// # Errors
    /// [`CuratorError::InvalidArgument`] for a threshold or a most shards of 0, or a pause
    /// of zero or longer than [`QueueSharderPolicies::MAX_THRESHOLD_CHECK`].
    pub fn build(self) -> Result<QueueSharderPolicies> {
        let p = self.policies;
        let refuse = |reason: String| Err(CuratorError::InvalidArgument { path: String::new(), reason });
        if p.new_queue_threshold == 0 {
            return refuse("QueueSharderPolicies: new_queue_threshold must be at least 1".to_string());
        }
        if p.max_queues == 0 {
            return refuse("QueueSharderPolicies: max_queues must be at least 1".to_string());
        }
        if p.threshold_check.is_zero() || p.threshold_check > QueueSharderPolicies::MAX_THRESHOLD_CHECK {
            return refuse(format!(
                "QueueSharderPolicies: threshold_check must be more than zero and at most {:?}, not {:?}",
                QueueSharderPolicies::MAX_THRESHOLD_CHECK,
                p.threshold_check
            ));
        }
        Ok(p)
    }
}
