//! [`DistributedAtomicNumber`]: the operations shared by [`DistributedAtomicLong`] and
//! [`DistributedAtomicInteger`] over their encodings ([`AtomicNumber`]).
//!
//! [`DistributedAtomicLong`]: super::DistributedAtomicLong
//! [`DistributedAtomicInteger`]: super::DistributedAtomicInteger

use std::time::Duration;

use curator_core::RetryPolicy;
use curator_core::{CuratorError, CuratorFramework, Result};

use super::distributed_value::DistributedAtomicValue;
use super::optimistic::PromotedToLock;
use super::result::AtomicValue;

mod sealed {
    pub trait Sealed {}
    impl Sealed for i64 {}
    impl Sealed for i32 {}
}

/// A number kept in a node as Curator keeps it: big-endian, fixed length; a missing or empty
/// node is 0, any other length is corrupted data. Arithmetic wraps, as Java's.
pub trait AtomicNumber: sealed::Sealed + Copy + Ord + std::fmt::Debug + Send + Sync + 'static {
    /// Bytes in the node.
    const LEN: usize;
    /// Big-endian bytes.
    fn to_bytes(self) -> Vec<u8>;
    /// From exactly [`LEN`](Self::LEN) big-endian bytes.
    fn from_exact(bytes: &[u8]) -> Option<Self>;
    /// `self + delta`, wrapping.
    fn plus(self, delta: Self) -> Self;
    /// `-self`, wrapping.
    fn negated(self) -> Self;
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
}

/// Decodes `bytes` of the node `path`: empty is 0, the wrong length is
/// [`BadData`](CuratorError::BadData) with the bytes found.
pub(crate) fn decode<N: AtomicNumber>(path: &str, bytes: &[u8]) -> Result<N> {
    if bytes.is_empty() {
        return Ok(N::ZERO);
    }
    N::from_exact(bytes).ok_or_else(|| {
        let shown: Vec<String> = bytes.iter().take(32).map(|b| format!("{b:#04x}")).collect();
        let more = if bytes.len() > 32 { ", ..." } else { "" };
        CuratorError::BadData {
            path: path.to_string(),
            reason: format!(
                "corrupted counter: {} bytes expected, found {}: [{}{more}]",
                N::LEN,
                bytes.len(),
                shown.join(", ")
            ),
        }
    })
}

/// A number in one node, changed atomically (Curator's `DistributedAtomicNumber`); see
/// [`DistributedAtomicLong`](super::DistributedAtomicLong) for an example and
/// [`DistributedAtomicValue`] for how it is changed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_core::RetryNTimes;
/// use curator_recipes::DistributedAtomicNumber;
///
/// let retry = RetryNTimes::new(10, Duration::from_millis(10));
/// let bytes: DistributedAtomicNumber<i64> = DistributedAtomicNumber::new(&fw, "/app/bytes", retry)?;
/// bytes.force_set(100).await?; // whatever was there
/// assert_eq!(bytes.subtract(30).await?.post_value, 70);
/// let set = bytes.try_set(5).await?; // one optimistic attempt at most
/// assert!(set.succeeded(), "no other writer came between the read and the write");
/// assert_eq!(bytes.get().await?.post_value, 5);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DistributedAtomicNumber<N: AtomicNumber> {
    value: DistributedAtomicValue,
    _number: std::marker::PhantomData<fn() -> N>,
}

impl<N: AtomicNumber> DistributedAtomicNumber<N> {
    /// Optimistic mode only: conflicts are retried under `retry_policy`, then the operation
    /// does not succeed.
    pub fn new(fw: &CuratorFramework, path: &str, retry_policy: impl RetryPolicy + 'static) -> Result<Self> {
        Ok(Self { value: DistributedAtomicValue::new(fw, path, retry_policy)?, _number: Default::default() })
    }

    /// With promotion to a mutex after the optimistic tries (Curator's `PromotedToLock`).
    pub fn with_promotion(
        fw: &CuratorFramework,
        path: &str,
        retry_policy: impl RetryPolicy + 'static,
        promoted: PromotedToLock,
    ) -> Result<Self> {
        Ok(Self {
            value: DistributedAtomicValue::with_promotion(fw, path, retry_policy, promoted)?,
            _number: Default::default(),
        })
    }

    /// Other handles' write tags left unwritten for longer than `age` are deleted when this
    /// handle makes its own; see [`DistributedAtomicValue::write_tag_reap_age`].
    pub fn write_tag_reap_age(mut self, age: Duration) -> Self {
        self.value = self.value.write_tag_reap_age(age);
        self
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.value.path()
    }

    fn decode(&self, bytes: &[u8]) -> Result<N> {
        decode(self.path(), bytes)
    }

    fn decoded(&self, value: AtomicValue<Vec<u8>>) -> Result<AtomicValue<N>> {
        let pre = self.decode(&value.pre_value)?;
        let post = self.decode(&value.post_value)?;
        Ok(value.map_to(pre, post))
    }

    /// The current value (0 when the node is missing or empty); always `succeeded`. A node of
    /// another length is [`BadData`](CuratorError::BadData).
    pub async fn get(&self) -> Result<AtomicValue<N>> {
        self.decoded(self.value.get().await?)
    }

    /// Sets the value whatever it is, without any atomicity.
    pub async fn force_set(&self, value: N) -> Result<()> {
        self.value.force_set(&value.to_bytes()).await
    }

    /// One attempt: sets `new` if the node exists and holds `expected`.
    pub async fn compare_and_set(&self, expected: N, new: N) -> Result<AtomicValue<N>> {
        let path = self.path().to_string();
        let value = self
            .value
            .engine()
            .compare_and_set(|current| Ok(decode::<N>(&path, current)? == expected), &new.to_bytes())
            .await?;
        self.decoded(value)
    }

    /// Sets `new` atomically, whatever the value was.
    pub async fn try_set(&self, new: N) -> Result<AtomicValue<N>> {
        let path = self.path().to_string();
        self.apply(move |current| {
            if let Some(bytes) = current {
                decode::<N>(&path, bytes)?;
            }
            Ok(new)
        })
        .await
    }

    /// Creates the node with `value` if it does not exist: true if this call created it.
    pub async fn initialize(&self, value: N) -> Result<bool> {
        self.value.initialize(&value.to_bytes()).await
    }

    /// Adds 1.
    pub async fn increment(&self) -> Result<AtomicValue<N>> {
        self.add(N::ONE).await
    }

    /// Subtracts 1.
    pub async fn decrement(&self) -> Result<AtomicValue<N>> {
        self.add(N::ONE.negated()).await
    }

    /// Adds `delta` (wrapping).
    pub async fn add(&self, delta: N) -> Result<AtomicValue<N>> {
        let path = self.path().to_string();
        self.apply(move |current| Ok(decode::<N>(&path, current.unwrap_or_default())?.plus(delta))).await
    }

    /// Subtracts `delta` (wrapping).
    pub async fn subtract(&self, delta: N) -> Result<AtomicValue<N>> {
        self.add(delta.negated()).await
    }

    async fn apply(&self, make: impl Fn(Option<&[u8]>) -> Result<N>) -> Result<AtomicValue<N>> {
        let value = self.value.engine().apply(|current| make(current).map(N::to_bytes)).await?;
        self.decoded(value)
    }
}
