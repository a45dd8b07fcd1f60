//! [`DistributedQueue`]: the handle, its life cycle (start, close) and its events. Its state and
//! events are in `shared.rs`; its `builder()` is in `builder.rs`, with the builder.

use std::sync::Arc;
use std::time::Duration;

use curator_core::Result;
use curator_core::{EventStream, ListenerId};
use curator_core::{LifeState, Lifecycle};
use tokio::sync::{oneshot, watch};

use super::config::ErrorMode;
use super::order::{ItemOrder, QUEUE_ITEM_NAME};
use super::shared::{create_path, QueueEvent, Shared};
use super::{consumer, put};

/// What a started queue keeps for its close: its task's stop and its end.
type Run = (watch::Sender<bool>, oneshot::Receiver<()>);

/// A queue of items in ZooKeeper, Curator's `DistributedQueue`.
///
/// ```text
///  put ─► bounded: getChildren(P)+watch, wait while it holds max_items nodes or more
///      ─► create P/queue-<seq> (persistent sequential; the item, or put_multi's items, framed)
///  start ─► the queue's task: create P (and the lock path L) as persistent nodes, container
///           parents (refused: the queue closes, and `ready` says why); then, with a consumer:
///        ─► getChildren(P)+watch, keep queue-*, sort, then for each node n:
///     plain:     getData(P/n) ─► delete(P/n, at that version) ─► deleted: consume its items
///     lock-safe: create L/n (ephemeral; exists: another consumer has it, skip)
///                ─► getData(P/n) ─► consume
///                ─► one multi, only on L/n's session: check(L/n) + delete(P/n) [+ create
///                   P/queue-<seq> to requeue] + delete(L/n) + this handle's write tag
///                   L/curator-rs-write-tag-<uuid> (made by the first multi, then bumped: it
///                   decides a lost reply); session gone: LockLost, left
///        ─► after the listing's nodes, list again (none listed: wait for the watch first)
/// ```
///
/// Nodes `P/queue-<seq>` hold one item (`put`) or several (`put_multi`) in Curator's framing,
/// taken in order by the consumers of every process that started the queue with a consumer,
/// Java or Rust. Plain mode consumes an item at most once; lock-safe mode
/// ([`lock_path`](super::QueueBuilder::lock_path)) removes it only once consumed. See
/// `docs/architecture.md`, section 17.2.
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
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let queue = DistributedQueue::builder(&fw, "/jobs/queue", StringSerializer)
///     .lock_path("/jobs/locks") // lock-safe: an item is removed only once consumed
///     .consumer(move |job: String| {
///         let tx = tx.clone();
///         async move { tx.send(job).map_err(|e| e.to_string()) }
///     })
///     .build()?;
/// queue.start()?;
/// queue.ready().await?; // the paths are made
/// queue.put(&"resize photo 7".to_string()).await?;
/// queue.put_multi(&["a".to_string(), "b".to_string()]).await?; // one node, two items
/// assert_eq!(rx.recv().await.as_deref(), Some("resize photo 7"));
/// assert_eq!(rx.recv().await.as_deref(), Some("a"));
/// assert_eq!(rx.recv().await.as_deref(), Some("b"));
/// queue.close().await;
/// # Ok(()) }
/// ```
pub struct DistributedQueue<T> {
    pub(super) shared: Arc<Shared<T>>,
    pub(super) lifecycle: Lifecycle<Run>,
}

impl<T> std::fmt::Debug for DistributedQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedQueue").field("path", &self.shared.path).finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> DistributedQueue<T> {
    /// The handle of a queue not started, over `shared` (made by the builder).
    pub(crate) fn from_shared(shared: Shared<T>) -> Self {
        // The lifecycle errors name the type the caller holds.
        let what = match shared.order {
            ItemOrder::Fifo => "DistributedQueue",
            ItemOrder::Id => "DistributedIdQueue",
            ItemOrder::Priority => "DistributedPriorityQueue",
            ItemOrder::Delay => "DistributedDelayQueue",
        };
        Self { shared: Arc::new(shared), lifecycle: Lifecycle::new(what) }
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// Starts the queue (Curator's `start`): its task creates the queue's path (and the lock
    /// path) if missing (see [`ready`](Self::ready)) and then, if the queue has a consumer,
    /// takes the items. The task is tracked by the framework, whose close waits for the item
    /// in hand. Returns at once.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] or [`CuratorError::Closed`] (a closed framework), as for
    /// every started thing ([`Lifecycle`](curator_core::Lifecycle)); nothing is sent
    /// then.
    ///
    /// [`CuratorError::AlreadyStarted`]: curator_core::CuratorError::AlreadyStarted
    /// [`CuratorError::AlreadyClosed`]: curator_core::CuratorError::AlreadyClosed
    /// [`CuratorError::NoRuntime`]: curator_core::CuratorError::NoRuntime
    /// [`CuratorError::Closed`]: curator_core::CuratorError::Closed
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.shared.fw, |started| {
            self.shared.events.start(started.handle().clone());
            self.shared.puts.start(started.handle().clone());
            let readiness = started.readiness();
            let (stop_tx, mut stop_rx) = watch::channel(false);
            let (done_tx, done_rx) = oneshot::channel();
            let shared = self.shared.clone();
            // Tracked background work, not the lifecycle's own task: the framework's close
            // waits for the consumer to finish the item in hand.
            self.shared.fw.spawn_background(async move {
                let paths = async {
                    create_path(&shared.fw, &shared.path).await?;
                    if let Some(lock_path) = &shared.lock_path {
                        create_path(&shared.fw, lock_path).await?;
                    }
                    Ok(())
                };
                let made: Option<Result<()>> = tokio::select! {
                    made = paths => Some(made),
                    // Closed (or dropped) before the paths were made: nothing to report.
                    _ = stop_rx.wait_for(|stop| *stop) => None,
                };
                match made {
                    None => {}
                    Some(Err(err)) => {
                        tracing::debug!(path = %shared.path, error = %err, "queue: making the paths failed; closing");
                        readiness.refused(err);
                        shared.events.close();
                    }
                    Some(Ok(())) => {
                        readiness.ready();
                        if shared.consumer.is_some() {
                            consumer::run(shared, stop_rx).await;
                        }
                    }
                }
                let _ = done_tx.send(());
            });
            Ok((stop_tx, done_rx))
        })
    }

    /// Waits for the outcome of the start's first step: `Ok` once the queue's path (and the
    /// lock path) exist.
    ///
    /// # Errors
    /// The error of creating the paths once the retry policy gives up, at once for a refusal
    /// retrying cannot mend ([`CuratorError::NoAuth`], ...): the queue is closed then
    /// (Curator's `start` throws it); [`CuratorError::NotStarted`] before
    /// [`start`](Self::start); [`CuratorError::AlreadyClosed`] when closed before a first
    /// outcome.
    ///
    /// [`CuratorError::NoAuth`]: curator_core::CuratorError::NoAuth
    /// [`CuratorError::NotStarted`]: curator_core::CuratorError::NotStarted
    /// [`CuratorError::AlreadyClosed`]: curator_core::CuratorError::AlreadyClosed
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// Where the queue is in its life: [`LifeState::Closed`] after [`close`](Self::close) or
    /// a refused first step.
    pub fn state(&self) -> LifeState {
        self.lifecycle.state()
    }

    /// Stops taking items and waits for the queue's task to end: in plain mode it finishes
    /// the node in hand (its node is already deleted: its items are consumed or lost); in
    /// lock-safe mode the item in hand is abandoned and its lock node deleted, so another
    /// consumer takes it. Then ends the listeners. Puts made in the background and in flight
    /// are waited for, their outcomes published, before the put listeners end; one still
    /// waiting for room gives up, nothing sent (section 17.3 of docs/architecture.md). Last,
    /// the handle's write tag under the lock path, if a take made it, is deleted (in the
    /// background, tracked: the framework's close waits for it). Idempotent.
    pub async fn close(&self) {
        if let Some((stop, done)) = self.lifecycle.close() {
            let _ = stop.send(true);
            let _ = done.await;
        }
        self.shared.events.close();
        self.shared.puts.close().await;
        self.shared.drop_write_tag();
    }

    /// Puts one item: a new node `P/queue-<seq>` holding it. In bounded mode, first waits while
    /// the queue holds `max_items` nodes or more.
    ///
    /// A put is made at most once: a create whose reply was lost is never sent again (a
    /// sequential create leaves nothing only it could have left, docs/architecture.md section
    /// 4.4), so the put fails with [`CuratorError::OutcomeUnknown`] (or, if the retry policy
    /// gives up first, the connection error): the item may be in the queue once, never twice.
    /// Curator's put sends it again and may leave the item twice.
    ///
    /// # Errors
    /// The serializer's error; [`CuratorError::DataTooLarge`] past the framework's data limit;
    /// the create's error: one whose
    /// [`outcome_unknown`](curator_core::CuratorError::outcome_unknown) holds
    /// when the item may be in the queue all the same.
    ///
    /// [`CuratorError::DataTooLarge`]: curator_core::CuratorError::DataTooLarge
    /// [`CuratorError::OutcomeUnknown`]: curator_core::CuratorError::OutcomeUnknown
    pub async fn put(&self, item: &T) -> Result<()> {
        put::put(&self.shared, QUEUE_ITEM_NAME, std::slice::from_ref(item), None).await.map(|_| ())
    }

    /// As [`put`](Self::put), waiting at most `max_wait` for room in a bounded queue: `false`
    /// (nothing put) if there was none in time (Curator's `put(item, maxWait, unit)`).
    pub async fn put_timeout(&self, item: &T, max_wait: Duration) -> Result<bool> {
        put::put(&self.shared, QUEUE_ITEM_NAME, std::slice::from_ref(item), Some(max_wait)).await
    }

    /// Puts several items in one node, consumed in order (Curator's `putMulti`).
    pub async fn put_multi(&self, items: &[T]) -> Result<()> {
        put::put(&self.shared, QUEUE_ITEM_NAME, items, None).await.map(|_| ())
    }

    /// As [`put_multi`](Self::put_multi), waiting at most `max_wait` for room: `false` if
    /// there was none in time.
    pub async fn put_multi_timeout(&self, items: &[T], max_wait: Duration) -> Result<bool> {
        put::put(&self.shared, QUEUE_ITEM_NAME, items, Some(max_wait)).await
    }

    /// Puts `items` in one node named `prefix` + sequence number: the id, priority and delay
    /// queues' puts.
    pub(crate) async fn put_named(&self, prefix: &str, items: &[T], max_wait: Option<Duration>) -> Result<bool> {
        put::put(&self.shared, prefix, items, max_wait).await
    }

    /// Sets the error mode from now on (Curator's `setErrorMode`).
    pub fn set_error_mode(&self, mode: ErrorMode) {
        *self.shared.error_mode.lock().unwrap_or_else(|e| e.into_inner()) = mode;
    }

    /// A stream of the queue's events from now on; it ends after [`close`](Self::close).
    pub fn events(&self) -> EventStream<QueueEvent> {
        self.shared.events.stream()
    }

    /// Adds a callback for the queue's events (run in order, off the I/O tasks).
    pub fn add_listener(&self, listener: impl Fn(&QueueEvent) + Send + Sync + 'static) -> ListenerId {
        self.shared.events.add_callback(Arc::new(listener))
    }

    /// Removes a listener added with [`add_listener`](Self::add_listener).
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.shared.events.remove(id)
    }
}
