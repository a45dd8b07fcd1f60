//! [`CachedAtomicNumber`]: numbers handed out from blocks reserved on a
//! [`DistributedAtomicNumber`]; [`CachedAtomicLong`] and [`CachedAtomicInteger`] are its two
//! widths (Curator's `CachedAtomicLong` and `CachedAtomicInteger`).

use curator_core::{CuratorError, Result};
use tokio::sync::Mutex;

use super::number::{AtomicNumber, DistributedAtomicNumber};
use super::result::{AtomicStats, AtomicValue};

/// Hands out consecutive numbers from blocks of `cache_factor`, each reserved with one `add`
/// on a [`DistributedAtomicNumber`]: one write per block instead of one per number. Numbers
/// are unique across every process sharing the counter, but not in global order, and the
/// unused rest of a block is lost when the handle goes. Arithmetic wraps, as Java's.
/// Use it as [`CachedAtomicLong`] or [`CachedAtomicInteger`].
#[derive(Debug)]
pub struct CachedAtomicNumber<N: AtomicNumber> {
    number: DistributedAtomicNumber<N>,
    cache_factor: N,
    /// The reserved block: the next number to hand out and how many of the block are left
    /// (at least 1; `None` when the block is used up).
    block: Mutex<Option<(N, N)>>,
}

/// Curator's `CachedAtomicLong`: ids from blocks reserved on a
/// [`DistributedAtomicLong`](super::DistributedAtomicLong) (8 bytes).
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
pub type CachedAtomicLong = CachedAtomicNumber<i64>;

/// Curator's `CachedAtomicInteger`: ids from blocks reserved on a
/// [`DistributedAtomicInteger`](super::DistributedAtomicInteger) (4 bytes, as Curator's
/// integer reads them); past `i32::MAX` the numbers wrap, as Java's `int`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_core::RetryNTimes;
/// use curator_recipes::{CachedAtomicInteger, DistributedAtomicInteger};
///
/// let retry = RetryNTimes::new(10, Duration::from_millis(10));
/// let tickets = CachedAtomicInteger::new(DistributedAtomicInteger::new(&fw, "/app/tickets", retry)?, 10)?;
/// assert_eq!(tickets.next().await?.pre_value, 0);
/// assert_eq!(tickets.next().await?.pre_value, 1);
/// assert_eq!(fw.get_data().for_path("/app/tickets").await?, 10i32.to_be_bytes()); // one block of 10
/// # Ok(()) }
/// ```
pub type CachedAtomicInteger = CachedAtomicNumber<i32>;

impl<N: AtomicNumber> CachedAtomicNumber<N> {
    /// Blocks of `cache_factor` (at least 1) numbers from `number`; a smaller factor is
    /// [`InvalidArgument`](CuratorError::InvalidArgument).
    pub fn new(number: DistributedAtomicNumber<N>, cache_factor: N) -> Result<Self> {
        if cache_factor < N::ONE {
            return Err(CuratorError::InvalidArgument {
                path: number.path().to_string(),
                reason: format!("cache factor must be at least 1, not {cache_factor:?}"),
            });
        }
        Ok(Self { number, cache_factor, block: Mutex::new(None) })
    }

    /// The next number: `pre_value` is the number handed out, `post_value` the one after it.
    /// When a new block is needed and its reservation does not succeed, the result does not
    /// succeed either (with the reservation's stats).
    pub async fn next(&self) -> Result<AtomicValue<N>> {
        let mut block = self.block.lock().await;
        let mut stats = AtomicStats::default();
        let (value, left) = match *block {
            Some(reserved) => reserved,
            None => {
                let reserved = self.number.add(self.cache_factor).await?;
                stats = reserved.stats;
                if !reserved.succeeded() {
                    return Ok(AtomicValue { succeeded: false, pre_value: N::ZERO, post_value: N::ZERO, stats });
                }
                (reserved.pre_value, self.cache_factor)
            }
        };
        let next = value.plus(N::ONE);
        let left = left.plus(N::ONE.negated());
        *block = (left > N::ZERO).then_some((next, left));
        Ok(AtomicValue { succeeded: true, pre_value: value, post_value: next, stats })
    }
}
