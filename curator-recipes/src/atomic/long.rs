//! [`DistributedAtomicLong`]: an `i64` counter, 8 bytes big-endian (Curator's layout).

use super::number::{AtomicNumber, DistributedAtomicNumber};

impl AtomicNumber for i64 {
    const LEN: usize = 8;
    const ZERO: Self = 0;
    const ONE: Self = 1;

    fn to_bytes(self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }

    fn from_exact(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(i64::from_be_bytes)
    }

    fn plus(self, delta: Self) -> Self {
        self.wrapping_add(delta)
    }

    fn negated(self) -> Self {
        self.wrapping_neg()
    }
}

/// A distributed `i64` counter, wire compatible with Curator's `DistributedAtomicLong`: the
/// node holds 8 bytes big-endian; missing or empty reads as 0; any other length is
/// [`BadData`](curator_core::CuratorError::BadData).
///
/// Each change reads the node and writes it at the version read, retrying conflicts under the
/// retry policy given here (not the framework's), then, if configured, under a mutex
/// ([`PromotedToLock`](super::PromotedToLock)). Check [`succeeded`](super::AtomicValue::succeeded):
/// running out of tries is not an error. An increment whose reply was lost is decided by a
/// write tag, never repeated blindly: a reported success was applied exactly once
/// (docs/architecture.md section 16.2).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use curator_core::RetryNTimes;
/// use curator_core::CuratorFramework;
/// use curator_recipes::{DistributedAtomicLong, PromotedToLock};
///
/// # let server = curator_test::TestingServer::start().await?;
/// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// fw.start()?;
/// let counter = DistributedAtomicLong::with_promotion(
///     &fw,
///     "/app/counter",
///     RetryNTimes::new(10, Duration::from_millis(10)),
///     PromotedToLock::new("/app/counter-lock")?.max_lock_time(Duration::from_secs(5)),
/// )?;
/// let value = counter.increment().await?;
/// assert!(value.succeeded());
/// assert_eq!((value.pre_value, value.post_value), (0, 1));
/// assert_eq!(counter.add(10).await?.post_value, 11);
/// assert_eq!(counter.get().await?.post_value, 11);
/// # drop(counter);
/// fw.close().await;
/// # Ok(()) }
/// ```
pub type DistributedAtomicLong = DistributedAtomicNumber<i64>;
