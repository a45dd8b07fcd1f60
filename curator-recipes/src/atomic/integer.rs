//! [`DistributedAtomicInteger`]: an `i32` counter, 4 bytes big-endian (Curator's layout).

use super::number::{AtomicNumber, DistributedAtomicNumber};

impl AtomicNumber for i32 {
    const LEN: usize = 4;
    const ZERO: Self = 0;
    const ONE: Self = 1;

    fn to_bytes(self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }

    fn from_exact(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(i32::from_be_bytes)
    }

    fn plus(self, delta: Self) -> Self {
        self.wrapping_add(delta)
    }

    fn negated(self) -> Self {
        self.wrapping_neg()
    }
}

/// A distributed `i32` counter, wire compatible with Curator's `DistributedAtomicInteger`:
/// 4 bytes big-endian; missing or empty reads as 0; any other length is
/// [`BadData`](curator_core::CuratorError::BadData). Works as
/// [`DistributedAtomicLong`](super::DistributedAtomicLong).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_core::RetryNTimes;
/// use curator_recipes::DistributedAtomicInteger;
///
/// let retry = RetryNTimes::new(10, Duration::from_millis(10));
/// let slots = DistributedAtomicInteger::new(&fw, "/app/slots", retry)?;
/// assert!(slots.initialize(10).await?); // false had the node been there
/// let taken = slots.decrement().await?;
/// assert!(taken.succeeded());
/// assert_eq!((taken.pre_value, taken.post_value), (10, 9));
/// assert!(slots.compare_and_set(9, 20).await?.succeeded());
/// assert!(!slots.compare_and_set(9, 30).await?.succeeded()); // it is 20 now
/// assert_eq!(slots.get().await?.post_value, 20);
/// # Ok(()) }
/// ```
pub type DistributedAtomicInteger = DistributedAtomicNumber<i32>;
