//! [`DistributedPriorityQueue`]: Curator's `DistributedPriorityQueue` over the one queue.

use std::time::Duration;

use curator_core::Result;

use super::distributed::DistributedQueue;
use super::order::priority_prefix;
use super::wrapper::delegate_to_queue;

/// A queue whose items are taken lowest priority first (then first in, first out): nodes
/// `P/queue-<sign><%08X priority><seq>` (Curator's `DistributedPriorityQueue`; the sign digit
/// is `0` for a negative priority, `1` otherwise, so that names sort as priorities do). Built
/// by [`QueueBuilder::build_priority_queue`](super::QueueBuilder::build_priority_queue), whose
/// `min_items_before_refresh` says how soon an item put meanwhile with a lower priority jumps
/// the line; everything else is [`DistributedQueue`]'s, lock-safe mode included.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{DistributedQueue, StringSerializer};
///
/// let path = "/alerts/queue";
/// let producer = DistributedQueue::builder(&fw, path, StringSerializer).build_priority_queue(0)?;
/// producer.start()?;
/// producer.ready().await?;
/// producer.put(&"disk 80% full".to_string(), 5).await?;
/// producer.put(&"datacenter on fire".to_string(), -100).await?;
///
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let consumer = DistributedQueue::builder(&fw, path, StringSerializer)
///     .consumer(move |alert: String| {
///         let tx = tx.clone();
///         async move { tx.send(alert).map_err(|e| e.to_string()) }
///     })
///     .build_priority_queue(0)?;
/// consumer.start()?;
/// consumer.ready().await?;
/// assert_eq!(rx.recv().await.as_deref(), Some("datacenter on fire"));
/// assert_eq!(rx.recv().await.as_deref(), Some("disk 80% full"));
/// consumer.close().await;
/// producer.close().await;
/// # Ok(()) }
/// ```
pub struct DistributedPriorityQueue<T> {
    queue: DistributedQueue<T>,
}

delegate_to_queue!(DistributedPriorityQueue);

impl<T: Send + Sync + 'static> DistributedPriorityQueue<T> {
    pub(crate) fn new(queue: DistributedQueue<T>) -> Self {
        Self { queue }
    }

    /// Puts `item` with `priority` (lower is taken sooner): a new node
    /// `P/queue-<sign><%08X priority><seq>`.
    ///
    /// # Errors
    /// As [`DistributedQueue::put`].
    pub async fn put(&self, item: &T, priority: i32) -> Result<()> {
        self.put_multi_timeout_inner(std::slice::from_ref(item), priority, None).await.map(|_| ())
    }

    /// As [`put`](Self::put), waiting at most `max_wait` for room in a bounded queue: `false`
    /// (nothing put) if there was none in time.
    pub async fn put_timeout(&self, item: &T, priority: i32, max_wait: Duration) -> Result<bool> {
        self.put_multi_timeout_inner(std::slice::from_ref(item), priority, Some(max_wait)).await
    }

    /// Puts several items in one node with `priority`, consumed in order (Curator's
    /// `putMulti`).
    pub async fn put_multi(&self, items: &[T], priority: i32) -> Result<()> {
        self.put_multi_timeout_inner(items, priority, None).await.map(|_| ())
    }

    /// As [`put_multi`](Self::put_multi), waiting at most `max_wait` for room: `false` if
    /// there was none in time.
    pub async fn put_multi_timeout(&self, items: &[T], priority: i32, max_wait: Duration) -> Result<bool> {
        self.put_multi_timeout_inner(items, priority, Some(max_wait)).await
    }

    /// As [`put`](Self::put), in the background: returns once the item is serialized, and the
    /// put's outcome reaches the put listeners ([`DistributedQueue::put_in_background`]).
    ///
    /// # Errors
    /// As [`DistributedQueue::put_in_background`].
    pub fn put_in_background(&self, item: T, priority: i32) -> Result<()> {
        self.queue.put_named_in_background(&priority_prefix(priority), vec![item])
    }

    /// As [`put_multi`](Self::put_multi), in the background
    /// ([`put_in_background`](Self::put_in_background)).
    ///
    /// # Errors
    /// As [`DistributedQueue::put_in_background`].
    pub fn put_multi_in_background(&self, items: Vec<T>, priority: i32) -> Result<()> {
        self.queue.put_named_in_background(&priority_prefix(priority), items)
    }

    async fn put_multi_timeout_inner(&self, items: &[T], priority: i32, max_wait: Option<Duration>) -> Result<bool> {
        self.queue.put_named(&priority_prefix(priority), items, max_wait).await
    }
}
