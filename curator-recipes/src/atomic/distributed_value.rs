//! [`DistributedAtomicValue`]: a node's bytes, changed atomically.

use std::sync::Arc;
use std::time::Duration;

use curator_core::RetryPolicy;
use curator_core::{CuratorFramework, Result};

use super::optimistic::{Engine, PromotedToLock};
use super::result::AtomicValue;

/// A value of raw bytes in one node, set atomically (Curator's `DistributedAtomicValue`):
/// first optimistically (read, then write at the version read) under the recipe's own retry
/// policy, then, if configured, under a mutex ([`PromotedToLock`]).
///
/// A missing node reads as empty. Every write also bumps this handle's write tag, a child of
/// the node, so that a write whose reply was lost is decided, not guessed
/// (docs/architecture.md section 16.2). The tag is made by the handle's first write and
/// deleted when the handle is dropped; tags left behind by processes that ended without
/// dropping theirs are deleted by the next handle to make its tag, once older than the reap
/// age ([`write_tag_reap_age`](Self::write_tag_reap_age)). Operations on one handle run one at
/// a time.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_core::RetryNTimes;
/// use curator_recipes::DistributedAtomicValue;
///
/// let retry = RetryNTimes::new(3, Duration::from_millis(10));
/// let config = DistributedAtomicValue::new(&fw, "/app/config", retry)?;
/// assert!(config.get().await?.post_value.is_empty()); // a missing node reads as empty
/// assert!(config.initialize(b"v1").await?);
/// assert!(config.compare_and_set(b"v1", b"v2").await?.succeeded());
/// assert!(!config.compare_and_set(b"v1", b"v3").await?.succeeded()); // not v1 any more
/// assert_eq!(config.get().await?.post_value, b"v2");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DistributedAtomicValue {
    engine: Engine,
}

impl DistributedAtomicValue {
    /// Optimistic mode only: conflicts are retried under `retry_policy`, then the operation
    /// does not succeed.
    pub fn new(fw: &CuratorFramework, path: &str, retry_policy: impl RetryPolicy + 'static) -> Result<Self> {
        Ok(Self { engine: Engine::new(fw, path, Arc::new(retry_policy), None)? })
    }

    /// With promotion: after the optimistic tries, the mutex of `promoted` is taken and the
    /// operation tried again under its policy.
    pub fn with_promotion(
        fw: &CuratorFramework,
        path: &str,
        retry_policy: impl RetryPolicy + 'static,
        promoted: PromotedToLock,
    ) -> Result<Self> {
        Ok(Self { engine: Engine::new(fw, path, Arc::new(retry_policy), Some(promoted))? })
    }

    /// Other handles' write tags left unwritten for longer than `age` are deleted when this
    /// handle makes its own (default [`WRITE_TAG_REAP_AGE`](super::WRITE_TAG_REAP_AGE), one
    /// hour). `age` must exceed the longest time any handle on the node may take to decide a
    /// write whose reply was lost; shorter only makes idle handles make their tags again.
    pub fn write_tag_reap_age(mut self, age: Duration) -> Self {
        self.engine.set_reap_age(age);
        self
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.engine.path()
    }

    /// The current value (empty when the node is missing); always `succeeded`.
    pub async fn get(&self) -> Result<AtomicValue<Vec<u8>>> {
        let value = self.engine.get().await?.unwrap_or_default();
        Ok(AtomicValue { succeeded: true, pre_value: value.clone(), post_value: value, stats: Default::default() })
    }

    /// Sets the value whatever it is, without any atomicity.
    pub async fn force_set(&self, value: &[u8]) -> Result<()> {
        self.engine.force_set(value).await
    }

    /// One attempt: sets `new` if the node exists and holds `expected`.
    pub async fn compare_and_set(&self, expected: &[u8], new: &[u8]) -> Result<AtomicValue<Vec<u8>>> {
        self.engine.compare_and_set(|current| Ok(current == expected), new).await
    }

    /// Sets `new` atomically, whatever the value was (the loop, and promotion if configured).
    pub async fn try_set(&self, new: &[u8]) -> Result<AtomicValue<Vec<u8>>> {
        self.engine.apply(|_| Ok(new.to_vec())).await
    }

    /// Creates the node with `value` if it does not exist: true if this call created it.
    pub async fn initialize(&self, value: &[u8]) -> Result<bool> {
        self.engine.initialize(value).await
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}
