//! [`CachedAtomicLong`]: ids handed out from blocks reserved on a [`DistributedAtomicLong`].

use curator_core::{CuratorError, Result};
use tokio::sync::Mutex;

use super::long::DistributedAtomicLong;
use super::result::{AtomicStats, AtomicValue};

/// Hands out consecutive numbers from blocks of `cache_factor`, each reserved with one `add`
/// on a [`DistributedAtomicLong`] (Curator's `CachedAtomicLong`): one write per block instead
/// of one per number. Numbers are unique across every process sharing the counter, but not
/// in global order, and the unused rest of a block is lost when the handle goes.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_core::RetryNTimes;
/// use curator_recipes::{CachedAtomicLong, DistributedAtomicLong};
///
/// let counter = DistributedAtomicLong::new(&fw, "/app/ids", RetryNTimes::new(10, Duration::from_millis(10)))?;
/// let ids = CachedAtomicLong::new(counter, 100)?; // one write reserves 100 ids
/// let first = ids.next().await?;
/// let second = ids.next().await?;
/// assert!(first.succeeded() && second.succeeded());
/// assert_eq!((first.pre_value, second.pre_value), (0, 1)); // pre_value is the id handed out
/// let reader = DistributedAtomicLong::new(&fw, "/app/ids", RetryNTimes::new(1, Duration::ZERO))?;
/// assert_eq!(reader.get().await?.post_value, 100); // the block is reserved
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CachedAtomicLong {
    number: DistributedAtomicLong,
    cache_factor: i64,
    /// The reserved block: its first number and how many of it were handed out.
    block: Mutex<Option<(i64, i64)>>,
}

impl CachedAtomicLong {
    /// Blocks of `cache_factor` (at least 1) numbers from `number`.
    pub fn new(number: DistributedAtomicLong, cache_factor: i64) -> Result<Self> {
        if cache_factor < 1 {
            return Err(CuratorError::InvalidArgument {
                path: number.path().to_string(),
                reason: format!("cache factor must be at least 1, not {cache_factor}"),
            });
        }
        Ok(Self { number, cache_factor, block: Mutex::new(None) })
    }

    /// The next number: `pre_value` is the number handed out, `post_value` the one after it.
    /// When a new block is needed and its reservation does not succeed, the result does not
    /// succeed either (with the reservation's stats).
    pub async fn next(&self) -> Result<AtomicValue<i64>> {
        let mut block = self.block.lock().await;
        let mut stats = AtomicStats::default();
        let (start, used) = match *block {
            Some(reserved) => reserved,
            None => {
                let reserved = self.number.add(self.cache_factor).await?;
                stats = reserved.stats;
                if !reserved.succeeded() {
                    return Ok(AtomicValue { succeeded: false, pre_value: 0, post_value: 0, stats });
                }
                (reserved.pre_value, 0)
            }
        };
        let value = start.wrapping_add(used);
        *block = (used + 1 < self.cache_factor).then_some((start, used + 1));
        Ok(AtomicValue { succeeded: true, pre_value: value, post_value: value.wrapping_add(1), stats })
    }
}
