//! Puts in the background and their listeners (Curator's `putInBackground` and
//! `QueuePutListener`): [`DistributedQueue::put_in_background`] returns once the items are
//! serialized, and the put's outcome, success or failure, reaches the put listeners
//! ([`QueuePutEvent`]). docs/architecture.md section 17.3.
//!
//! ```text
//! put_in_background(items) : prepare (serialize, frame, size check)   errors: returned at once
//!                            started? (under the lifecycle's lock) -> pending += 1
//!                            bounded: a tracked task (spawn_background) waits for room
//!                            create P/queue-<seq> in the framework's ordered background
//!                            queue (one producer's puts keep their order)
//!                            its callback: publish Completed { items, node } or
//!                              Failed { items, error } (dropped unheard: Failed, Closed),
//!                              in the order the puts were made (a later outcome waits)
//!                            pending -= 1
//! close                    : Closed (no put admitted after) -> closing: a put still waiting
//!                            for room gives up (Failed, AlreadyClosed, nothing sent) -> wait
//!                            for pending == 0 -> end the put listeners
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use curator_core::{CuratorError, EventStream, ListenerId, Listeners, Result};
use tokio::sync::watch;

use super::distributed::DistributedQueue;
use super::order::QUEUE_ITEM_NAME;
use super::put;
use super::shared::Shared;

/// The outcome of a put made in the background ([`DistributedQueue::put_in_background`]), as
/// the put listeners receive it: Curator's `QueuePutListener` calls, and past Curator its
/// failures (Curator only logs a failed background put, and its `flushPuts` then waits for
/// it for ever).
///
/// The items are shared between the listeners (`Arc<[T]>`): one item for
/// [`put_in_background`](DistributedQueue::put_in_background), several for
/// [`put_multi_in_background`](DistributedQueue::put_multi_in_background).
#[derive(Debug)]
#[non_exhaustive]
pub enum QueuePutEvent<T> {
    /// The items are in the queue, in the node `node` (Curator's `putCompleted` and
    /// `putMultiCompleted`).
    Completed {
        /// The items put.
        items: Arc<[T]>,
        /// The item node's path.
        node: String,
    },
    /// The put failed: the retry policy gave up on the create, the framework closed, or the
    /// queue closed while the put waited for room in a bounded queue
    /// ([`CuratorError::AlreadyClosed`], nothing sent). After an error whose outcome is
    /// unknown ([`CuratorError::outcome_unknown`]: a create whose reply was lost ends with
    /// [`CuratorError::OutcomeUnknown`], never sent again) the node may exist all the same,
    /// once: a put never leaves its items twice.
    Failed {
        /// The items of the put.
        items: Arc<[T]>,
        /// Why.
        error: CuratorError,
    },
}

impl<T> Clone for QueuePutEvent<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Completed { items, node } => Self::Completed { items: items.clone(), node: node.clone() },
            Self::Failed { items, error } => Self::Failed { items: items.clone(), error: error.clone() },
        }
    }
}

impl<T> QueuePutEvent<T> {
    /// The items of the put, whatever its outcome.
    pub fn items(&self) -> &[T] {
        match self {
            Self::Completed { items, .. } | Self::Failed { items, .. } => items,
        }
    }
}

/// What a queue keeps of its background puts: their listeners, how many are in flight, and
/// whether the queue closes.
pub(crate) struct Puts<T> {
    listeners: Listeners<QueuePutEvent<T>>,
    /// The outcomes in the order the puts were made.
    order: Mutex<InOrder<T>>,
    pending: Arc<watch::Sender<usize>>,
    closing: watch::Sender<bool>,
}

/// Outcomes known but not published yet: those of puts made after one whose outcome is not
/// known. The create callbacks run on the blocking pool, each on its own, so they may finish
/// out of order; listeners hear the puts in the order they were made, as Curator's callbacks
/// (on its one event thread) tell them.
struct InOrder<T> {
    /// The number the next put gets.
    next_put: u64,
    /// The number of the put whose outcome is published next.
    next_published: u64,
    waiting: BTreeMap<u64, QueuePutEvent<T>>,
}

impl<T: Send + Sync + 'static> Puts<T> {
    pub(crate) fn new() -> Self {
        let order = InOrder { next_put: 0, next_published: 0, waiting: BTreeMap::new() };
        Self {
            listeners: Listeners::new(),
            order: Mutex::new(order),
            pending: Arc::new(watch::channel(0).0),
            closing: watch::channel(false).0,
        }
    }

    /// Publishes the outcome of put `number`, and those after it that waited for it.
    fn publish(&self, number: u64, event: QueuePutEvent<T>) {
        let mut order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        order.waiting.insert(number, event);
        loop {
            let next = order.next_published;
            let Some(event) = order.waiting.remove(&next) else { break };
            self.listeners.publish(event);
            order.next_published += 1;
        }
    }

    /// Starts the listeners on the queue's runtime.
    pub(crate) fn start(&self, handle: tokio::runtime::Handle) {
        self.listeners.start(handle);
    }

    /// Counts one more put in flight until the ticket is dropped; the put's number.
    fn admit(&self) -> (Ticket, u64) {
        let mut order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        let number = order.next_put;
        order.next_put += 1;
        self.pending.send_modify(|n| *n += 1);
        (Ticket(self.pending.clone()), number)
    }

    /// Waits until no put is in flight, at most `timeout` (`None`: without end); whether none is.
    async fn flush(&self, timeout: Option<Duration>) -> bool {
        let mut pending = self.pending.subscribe();
        let drained = pending.wait_for(|n| *n == 0);
        match timeout {
            None => drained.await.is_ok(),
            Some(timeout) => matches!(tokio::time::timeout(timeout, drained).await, Ok(Ok(_))),
        }
    }

    /// The queue closes: puts waiting for room give up; then waits for the others and ends the
    /// listeners.
    pub(crate) async fn close(&self) {
        self.closing.send_replace(true);
        self.flush(None).await;
        self.listeners.close();
    }
}

/// One put in flight, counted until dropped (the task's end, or its drop at a runtime's end).
struct Ticket(Arc<watch::Sender<usize>>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl<T: Send + Sync + 'static> DistributedQueue<T> {
    /// Puts one item in the background (Curator's `put` with `putInBackground`): returns once
    /// the item is serialized; the node `P/queue-<seq>` is created by the framework's ordered
    /// background queue (so one producer's puts keep their order, as Curator's do), and the
    /// put's outcome reaches the put listeners ([`put_events`](Self::put_events),
    /// [`add_put_listener`](Self::add_put_listener)) as a [`QueuePutEvent`], a failure
    /// included, in the order the puts were made. In bounded mode a task tracked by the
    /// framework first waits for room; the
    /// order of puts that had to wait is not kept (Curator warns against background puts in
    /// a bounded queue too).
    ///
    /// [`close`](Self::close) waits for the puts in flight (one still waiting for room gives
    /// up, nothing sent) and for their events; a queue dropped without `close` leaves its
    /// puts to run to their end. [`flush_puts`](Self::flush_puts) waits for them (Curator's
    /// `flushPuts`). See docs/architecture.md section 17.3.
    ///
    /// A foreground [`put`](Self::put) returns its outcome to its caller and is not published
    /// (Curator tells the listeners of every put).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_recipes::{DistributedQueue, QueuePutEvent, StringSerializer};
    ///
    /// let queue = DistributedQueue::builder(&fw, "/mail/outbox", StringSerializer).build()?;
    /// let mut puts = queue.put_events();
    /// queue.start()?;
    /// queue.put_in_background("hello".to_string())?; // returns at once
    /// match puts.next().await {
    ///     Some(QueuePutEvent::Completed { items, node }) => {
    ///         assert_eq!(&*items, ["hello".to_string()]);
    ///         assert!(node.starts_with("/mail/outbox/queue-"));
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(queue.flush_puts(std::time::Duration::from_secs(5)).await);
    /// queue.close().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// At once, nothing sent: the serializer's error; [`CuratorError::DataTooLarge`] past the
    /// framework's data limit; [`CuratorError::NotStarted`] before [`start`](Self::start) and
    /// [`CuratorError::AlreadyClosed`] after [`close`](Self::close) (no listener would hear
    /// the outcome); [`CuratorError::NoRuntime`] outside a tokio runtime.
    pub fn put_in_background(&self, item: T) -> Result<()> {
        self.put_named_in_background(QUEUE_ITEM_NAME, vec![item])
    }

    /// As [`put_in_background`](Self::put_in_background), for several items in one node
    /// (Curator's `putMulti` in the background, `putMultiCompleted`).
    ///
    /// # Errors
    /// As [`put_in_background`](Self::put_in_background).
    pub fn put_multi_in_background(&self, items: Vec<T>) -> Result<()> {
        self.put_named_in_background(QUEUE_ITEM_NAME, items)
    }

    /// Waits until no put made in the background is in flight, at most `timeout`: `true` if
    /// none is (Curator's `flushPuts`). A failed put counts as done (its event says so).
    pub async fn flush_puts(&self, timeout: Duration) -> bool {
        self.shared.puts.flush(Some(timeout)).await
    }

    /// A stream of the outcomes of the puts made in the background from now on; it ends
    /// after [`close`](Self::close), once those puts are done.
    pub fn put_events(&self) -> EventStream<QueuePutEvent<T>> {
        self.shared.puts.listeners.stream()
    }

    /// Adds a callback for the outcomes of the puts made in the background (Curator's
    /// `getPutListenerContainer().addListener`): run in order, off the I/O tasks.
    pub fn add_put_listener(&self, listener: impl Fn(&QueuePutEvent<T>) + Send + Sync + 'static) -> ListenerId {
        self.shared.puts.listeners.add_callback(Arc::new(listener))
    }

    /// Removes a listener added with [`add_put_listener`](Self::add_put_listener).
    pub fn remove_put_listener(&self, id: ListenerId) -> bool {
        self.shared.puts.listeners.remove(id)
    }

    /// Puts `items` in the background in one node named `prefix` + sequence number: the id,
    /// priority and delay queues' background puts too.
    pub(crate) fn put_named_in_background(&self, prefix: &str, items: Vec<T>) -> Result<()> {
        let prepared = put::prepare(&self.shared, prefix, &items)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(CuratorError::NoRuntime { what: self.lifecycle.what() });
        }
        // Counted under the lifecycle's lock: a close after this waits for the put.
        let (ticket, number) = self.lifecycle.with_started(|_| self.shared.puts.admit())?;
        let items: Arc<[T]> = items.into();
        spawn(self.shared.clone(), prepared, items, (ticket, number));
        Ok(())
    }
}

/// Sends one put in the background. Without a bound its create joins the framework's ordered
/// background queue at once (section 6.1: background operations reach the server in the order
/// they were submitted, so one producer's puts keep their order, as Curator's do); in bounded
/// mode a tracked task first waits for room, then submits it.
fn spawn<T: Send + Sync + 'static>(
    q: Arc<Shared<T>>,
    prepared: put::Prepared,
    items: Arc<[T]>,
    (ticket, number): (Ticket, u64),
) {
    let outcome = Outcome { q: q.clone(), items, ticket: Some(ticket), number, count: prepared.count };
    if q.max_items.is_none() {
        submit(&q, prepared, outcome);
        return;
    }
    let closing = q.puts.closing.subscribe();
    q.fw.clone().spawn_background(async move {
        match put::wait_room(&q, None, Some(closing)).await {
            Ok(_) => submit(&q, prepared, outcome),
            Err(error) => outcome.publish(Err(error)),
        }
    });
}

/// Hands the create to the framework's background queue; its callback publishes the outcome.
fn submit<T: Send + Sync + 'static>(q: &Shared<T>, prepared: put::Prepared, outcome: Outcome<T>) {
    // The callback is an `Fn`: the outcome is taken by its one call.
    let outcome = std::sync::Mutex::new(Some(outcome));
    put::create(q, prepared).in_background(move |_, event| {
        let taken = outcome.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(outcome) = taken {
            match event.error {
                Some(error) => outcome.publish(Err(error)),
                None => outcome.publish(Ok(event.name.unwrap_or(event.path))),
            }
        }
    });
}

/// The outcome of one put in the background, published once: by the create's callback, or,
/// if the put is dropped unheard (its task or callback dropped when the runtime or the
/// framework ended), as `Failed` with [`CuratorError::Closed`]. Then the put is no longer
/// counted.
struct Outcome<T: Send + Sync + 'static> {
    q: Arc<Shared<T>>,
    items: Arc<[T]>,
    ticket: Option<Ticket>,
    /// The put's number, for the order of the outcomes.
    number: u64,
    count: usize,
}

impl<T: Send + Sync + 'static> Outcome<T> {
    fn publish(mut self, outcome: Result<String>) {
        self.publish_once(outcome);
    }

    fn publish_once(&mut self, outcome: Result<String>) {
        let Some(ticket) = self.ticket.take() else { return };
        let items = self.items.clone();
        let event = match outcome {
            Ok(node) => {
                curator_core::metrics::queue_put(self.q.metrics_kind(), self.count);
                QueuePutEvent::Completed { items, node }
            }
            Err(error) => {
                tracing::debug!(path = %self.q.path, %error, "queue put in the background failed");
                QueuePutEvent::Failed { items, error }
            }
        };
        self.q.puts.publish(self.number, event);
        drop(ticket);
    }
}

impl<T: Send + Sync + 'static> Drop for Outcome<T> {
    fn drop(&mut self) {
        self.publish_once(Err(CuratorError::Closed));
    }
}
