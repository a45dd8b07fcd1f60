//! [`DistributedDelayQueue`]: Curator's `DistributedDelayQueue` over the one queue.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use curator_core::{CuratorError, Result};

use super::distributed::DistributedQueue;
use super::order::delay_prefix;
use super::wrapper::delegate_to_queue;

/// A queue whose items are each taken no earlier than their time, earliest first: nodes
/// `P/queue-|<%08X epoch ms>|<seq>` (Curator's `DistributedDelayQueue`). The consuming task
/// sleeps until the first item's time, or until the queue changes. Times are the machines'
/// clocks: a consumer whose clock is behind the producer's takes items late. Built by
/// [`QueueBuilder::build_delay_queue`](super::QueueBuilder::build_delay_queue); everything
/// else is [`DistributedQueue`]'s, lock-safe mode included.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::{Duration, SystemTime};
/// use curator_recipes::{DistributedQueue, StringSerializer};
///
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let queue = DistributedQueue::builder(&fw, "/reminders/queue", StringSerializer)
///     .consumer(move |reminder: String| {
///         let tx = tx.clone();
///         async move { tx.send((reminder, SystemTime::now())).map_err(|e| e.to_string()) }
///     })
///     .build_delay_queue()?;
/// queue.start()?;
/// queue.ready().await?;
/// let at = SystemTime::now() + Duration::from_millis(200);
/// queue.put(&"stand up".to_string(), at).await?;
/// let (reminder, seen) = rx.recv().await.unwrap();
/// assert_eq!(reminder, "stand up");
/// assert!(seen >= at);
/// queue.close().await;
/// # Ok(()) }
/// ```
pub struct DistributedDelayQueue<T> {
    queue: DistributedQueue<T>,
}

delegate_to_queue!(DistributedDelayQueue);

impl<T: Send + Sync + 'static> DistributedDelayQueue<T> {
    pub(crate) fn new(queue: DistributedQueue<T>) -> Self {
        Self { queue }
    }

    /// Puts `item`, to be taken no earlier than `delay_until`: a new node
    /// `P/queue-|<%08X epoch ms>|<seq>`. The time is rounded up to the millisecond, so the
    /// item is never taken before `delay_until`; a time already past is taken at once.
    ///
    /// # Errors
    /// [`CuratorError::InvalidArgument`] for a time not after the Unix epoch (Curator refuses
    /// it too) or past what Java's `long` of milliseconds holds; then as
    /// [`DistributedQueue::put`].
    pub async fn put(&self, item: &T, delay_until: SystemTime) -> Result<()> {
        self.put_inner(std::slice::from_ref(item), delay_until, None).await.map(|_| ())
    }

    /// As [`put`](Self::put), waiting at most `max_wait` for room in a bounded queue: `false`
    /// (nothing put) if there was none in time.
    pub async fn put_timeout(&self, item: &T, delay_until: SystemTime, max_wait: Duration) -> Result<bool> {
        self.put_inner(std::slice::from_ref(item), delay_until, Some(max_wait)).await
    }

    /// Puts several items in one node, all to be taken no earlier than `delay_until`, in
    /// order (Curator's `putMulti`).
    pub async fn put_multi(&self, items: &[T], delay_until: SystemTime) -> Result<()> {
        self.put_inner(items, delay_until, None).await.map(|_| ())
    }

    /// As [`put_multi`](Self::put_multi), waiting at most `max_wait` for room: `false` if
    /// there was none in time.
    pub async fn put_multi_timeout(&self, items: &[T], delay_until: SystemTime, max_wait: Duration) -> Result<bool> {
        self.put_inner(items, delay_until, Some(max_wait)).await
    }

    /// As [`put`](Self::put), in the background: returns once the item is serialized, and the
    /// put's outcome reaches the put listeners ([`DistributedQueue::put_in_background`]).
    ///
    /// # Errors
    /// As [`put`](Self::put)'s checks of the time, then as
    /// [`DistributedQueue::put_in_background`].
    pub fn put_in_background(&self, item: T, delay_until: SystemTime) -> Result<()> {
        self.put_multi_in_background(vec![item], delay_until)
    }

    /// As [`put_multi`](Self::put_multi), in the background
    /// ([`put_in_background`](Self::put_in_background)).
    ///
    /// # Errors
    /// As [`put_in_background`](Self::put_in_background).
    pub fn put_multi_in_background(&self, items: Vec<T>, delay_until: SystemTime) -> Result<()> {
        let epoch_ms = self.epoch_ms(delay_until)?;
        self.queue.put_named_in_background(&delay_prefix(epoch_ms), items)
    }

    async fn put_inner(&self, items: &[T], delay_until: SystemTime, max_wait: Option<Duration>) -> Result<bool> {
        let epoch_ms = self.epoch_ms(delay_until)?;
        self.queue.put_named(&delay_prefix(epoch_ms), items, max_wait).await
    }

    /// `at` in milliseconds since the Unix epoch, rounded up.
    fn epoch_ms(&self, at: SystemTime) -> Result<u64> {
        let bad = |reason: &str| CuratorError::InvalidArgument { path: self.path().to_string(), reason: reason.into() };
        let since = at.duration_since(UNIX_EPOCH).map_err(|_| bad("delay_until is before the Unix epoch"))?;
        let ms = since.as_millis() + u128::from(since.subsec_nanos() % 1_000_000 != 0);
        if ms == 0 {
            return Err(bad("delay_until must be after the Unix epoch"));
        }
        // Curator reads the time as a Java long.
        i64::try_from(ms).map(|ms| ms as u64).map_err(|_| bad("delay_until is too far in the future"))
    }
}
