//! [`QueueBuilder`]: a queue's options (Curator's `QueueBuilder`), checked when it is built, and
//! [`DistributedQueue::builder`], which makes one. The builder makes the queue's shared state
//! (`shared.rs`) and hands it to the queue.

use std::future::Future;
use std::sync::{Arc, Mutex};

use curator_core::Listeners;
use curator_core::{path, CuratorError, CuratorFramework, Result};
use futures::FutureExt;

use super::background::Puts;
use super::config::{ConsumerError, ConsumerFn, ErrorMode};
use super::delay::DistributedDelayQueue;
use super::distributed::DistributedQueue;
use super::id::DistributedIdQueue;
use super::order::{ItemOrder, SEPARATOR};
use super::priority::DistributedPriorityQueue;
use super::serializer::QueueSerializer;
use super::shared::Shared;

/// The options of a [`DistributedQueue`], in the style of `reqwest`'s builders:
/// `DistributedQueue::builder(&fw, "/jobs", BytesSerializer).consumer(f).lock_path("/jobs-locks").build()?`.
///
/// `build()` makes a [`DistributedQueue`]; as Curator's `buildIdQueue`, `buildPriorityQueue`
/// and `buildDelayQueue`, [`build_id_queue`](Self::build_id_queue),
/// [`build_priority_queue`](Self::build_priority_queue) and
/// [`build_delay_queue`](Self::build_delay_queue) make the other kinds, all with these options.
///
/// Left out of Curator's `QueueBuilder`: `executor`/`threadFactory` (the consumer is an async
/// function run by one tokio task), `putInBackground` (a method, not an option:
/// [`DistributedQueue::put_in_background`] beside `put`, which returns once the node is
/// created), `finalFlushTime` (`close` waits for the puts made in the background).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{BytesSerializer, DistributedQueue, ErrorMode};
///
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let queue = DistributedQueue::builder(&fw, "/jobs/urgent", BytesSerializer)
///     .consumer(move |job: Vec<u8>| {
///         let tx = tx.clone();
///         async move { tx.send(job).map_err(|e| e.to_string()) }
///     })
///     .lock_path("/jobs/urgent-locks") // lock-safe: removed once consumed
///     .error_mode(ErrorMode::Delete) // a consumer error drops the item (default: Requeue)
///     .max_items(1000) // put waits while 1000 nodes are queued
///     .build_priority_queue(10)?; // Curator's buildPriorityQueue(minItemsBeforeRefresh)
/// queue.start()?;
/// queue.ready().await?;
/// queue.put(&b"rebuild index".to_vec(), 5).await?; // priority 5: lower is sooner
/// assert_eq!(rx.recv().await.as_deref(), Some(&b"rebuild index"[..]));
/// queue.close().await;
/// # Ok(()) }
/// ```
pub struct QueueBuilder<T> {
    fw: CuratorFramework,
    path: String,
    serializer: Arc<dyn QueueSerializer<T>>,
    consumer: Option<ConsumerFn<T>>,
    lock_path: Option<String>,
    error_mode: ErrorMode,
    max_items: Option<usize>,
    order: ItemOrder,
    refresh_after: Option<usize>,
}

impl<T> std::fmt::Debug for QueueBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueBuilder")
            .field("path", &self.path)
            .field("consumer", &self.consumer.is_some())
            .field("lock_path", &self.lock_path)
            .field("error_mode", &self.error_mode)
            .field("max_items", &self.max_items)
            .finish_non_exhaustive()
    }
}

// Here rather than in `distributed.rs`, so that the queue's file needs nothing of the builder's.
impl<T: Send + Sync + 'static> DistributedQueue<T> {
    /// A builder of a queue on `path` whose items `serializer` turns into bytes and back.
    pub fn builder(fw: &CuratorFramework, path: &str, serializer: impl QueueSerializer<T>) -> QueueBuilder<T> {
        QueueBuilder::new(fw, path, serializer)
    }
}

impl<T: Send + Sync + 'static> QueueBuilder<T> {
    fn new(fw: &CuratorFramework, path: &str, serializer: impl QueueSerializer<T>) -> Self {
        Self {
            fw: fw.clone(),
            path: path.to_string(),
            serializer: Arc::new(serializer),
            consumer: None,
            lock_path: None,
            error_mode: ErrorMode::default(),
            max_items: None,
            order: ItemOrder::default(),
            refresh_after: None,
        }
    }

    /// The function each item is handed to, in queue order, one at a time. Without one the queue
    /// only puts (Curator's producer-only queue).
    pub fn consumer<F, Fut, E>(mut self, consumer: F) -> Self
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<ConsumerError>,
    {
        self.consumer = Some(Arc::new(move |item| consumer(item).map(|r| r.map_err(Into::into)).boxed()));
        self
    }

    /// Lock-safe mode: an item node is locked under `lock_path` while its items are consumed,
    /// and removed only when they were (module docs). Curator's `lockPath`. Past Curator, the
    /// consumer's future is dropped as soon as the lock may be lost (by the framework's error
    /// policy, as a held lock's `lost()`), before another consumer can take the item, and the
    /// item is left for the next: a consumer never runs to its end on an item that is no
    /// longer its own. Also past Curator, the handle keeps one persistent node of its own under
    /// `lock_path`, its write tag `curator-rs-write-tag-<uuid>` (made by its first take, deleted
    /// at `close`), which decides a final multi whose reply was lost; Curator never lists the
    /// lock path's children (docs/architecture.md section 17.2).
    pub fn lock_path(mut self, lock_path: &str) -> Self {
        self.lock_path = Some(lock_path.to_string());
        self
    }

    /// What a consumer error does to the item node (lock-safe mode). Default:
    /// [`ErrorMode::Requeue`].
    pub fn error_mode(mut self, mode: ErrorMode) -> Self {
        self.error_mode = mode;
        self
    }

    /// Bounded mode: `put` waits while the queue holds `max_items` nodes or more (a node holds
    /// all the items of one `put_multi`). Curator's `maxItems`.
    pub fn max_items(mut self, max_items: usize) -> Self {
        self.max_items = Some(max_items);
        self
    }

    /// The queue, not started.
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for a queue or lock path that is not a valid ZooKeeper
    /// path; [`CuratorError::InvalidArgument`] for `max_items(0)` (no put could ever go in)
    /// or a lock path equal to the queue path.
    pub fn build(self) -> Result<DistributedQueue<T>> {
        self.checked(ItemOrder::Fifo).map(Self::queue)
    }

    /// A [`DistributedIdQueue`], not started: items with ids, `P/queue-|<id>|<seq>`, taken
    /// first in, first out (Curator's `buildIdQueue`).
    ///
    /// # Errors
    /// As [`build`](Self::build); also [`CuratorError::InvalidArgument`] for a queue path
    /// holding `|` (Curator refuses it too).
    pub fn build_id_queue(self) -> Result<DistributedIdQueue<T>> {
        if self.path.contains(SEPARATOR) {
            let reason = format!("an id queue's path cannot hold '{SEPARATOR}'");
            return Err(CuratorError::InvalidArgument { path: self.path, reason });
        }
        self.checked(ItemOrder::Id).map(|b| DistributedIdQueue::new(b.queue()))
    }

    /// A [`DistributedPriorityQueue`], not started: items taken lowest priority first
    /// (Curator's `buildPriorityQueue`). After `min_items_before_refresh` items of one listing
    /// the consumer lists the queue again before each item if it changed meanwhile, so that
    /// an item put with a lower priority meanwhile comes next (0: before every item).
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_priority_queue(mut self, min_items_before_refresh: usize) -> Result<DistributedPriorityQueue<T>> {
        self.refresh_after = Some(min_items_before_refresh);
        self.checked(ItemOrder::Priority).map(|b| DistributedPriorityQueue::new(b.queue()))
    }

    /// A [`DistributedDelayQueue`], not started: items taken no earlier than their time,
    /// earliest first (Curator's `buildDelayQueue`).
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_delay_queue(self) -> Result<DistributedDelayQueue<T>> {
        self.checked(ItemOrder::Delay).map(|b| DistributedDelayQueue::new(b.queue()))
    }

    /// The queue these options make, not started.
    fn queue(self) -> DistributedQueue<T> {
        DistributedQueue::from_shared(Shared {
            fw: self.fw,
            path: self.path,
            lock_path: self.lock_path,
            serializer: self.serializer,
            consumer: self.consumer,
            error_mode: Mutex::new(self.error_mode),
            max_items: self.max_items,
            order: self.order,
            refresh_after: self.refresh_after,
            events: Listeners::new(),
            puts: Puts::new(),
            tag: Mutex::new(None),
        })
    }

    /// The builder, its options checked, for a queue ordered by `order`.
    fn checked(mut self, order: ItemOrder) -> Result<Self> {
        path::validate(&self.path)?;
        if let Some(lock_path) = &self.lock_path {
            path::validate(lock_path)?;
            if *lock_path == self.path {
                let reason = "the lock path must differ from the queue path".to_string();
                return Err(CuratorError::InvalidArgument { path: lock_path.clone(), reason });
            }
        }
        if self.max_items == Some(0) {
            let reason = "max_items must be at least 1".to_string();
            return Err(CuratorError::InvalidArgument { path: self.path, reason });
        }
        self.order = order;
        Ok(self)
    }
}
