//! See the docs of the main type below, where this module's guide lives.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

/// Most events handed to one blocking call of a callback listener.
const MAX_BATCH: usize = 1024;

/// Identifies a listener, for `remove_listener`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

/// A callback listener's function.
pub type Callback<E> = Arc<dyn Fn(&E) + Send + Sync>;

/// An ordered stream of events, from when it was asked for. It ends when its [`Listeners`] is
/// closed (after the events already queued).
#[derive(Debug)]
pub struct EventStream<E> {
    rx: mpsc::UnboundedReceiver<E>,
}

impl<E> EventStream<E> {
    /// The next event, or `None` once the listeners are closed and every queued event was read.
    pub async fn next(&mut self) -> Option<E> {
        self.rx.recv().await
    }

    /// The next event if one is queued now, without waiting.
    pub fn try_next(&mut self) -> Option<E> {
        self.rx.try_recv().ok()
    }

    /// Hands every event, in order, to `each`, in a task of its own on `runtime`, until the
    /// stream ends: the one relay from one source's events into another's (a recipe turning a
    /// cache's events into its own, say). `each` runs on the runtime's worker, not the blocking
    /// pool, so it must not block.
    pub fn relay(mut self, runtime: &Handle, mut each: impl FnMut(E) + Send + 'static)
    where
        E: Send + 'static,
    {
        runtime.spawn(async move {
            while let Some(event) = self.rx.recv().await {
                each(event);
            }
        });
    }
}

impl<E> Stream for EventStream<E> {
    type Item = E;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        self.rx.poll_recv(cx)
    }
}

/// A callback whose drain task waits for a runtime (it was added before `start`).
struct Parked<E> {
    rx: mpsc::UnboundedReceiver<E>,
    callback: Callback<E>,
}

struct Inner<E> {
    next_id: u64,
    subscribers: Vec<(u64, mpsc::UnboundedSender<E>)>,
    runtime: Option<Handle>,
    parked: Vec<Parked<E>>,
    closed: bool,
    /// Given first to callbacks added later (a cache's "initialized", once it was published).
    greeting: Option<E>,
}

/// The listeners of one source of events (a cache, a recipe, the connection state).
///
/// # Guide
///
/// The framework's one listener mechanism: callbacks and streams, each with its own unbounded
/// queue, so that a slow listener delays only itself, events reach each listener in the order
/// they were published, and none is dropped. Connection-state listeners, [`CuratorListener`]s,
/// persistent-watch callbacks, the caches and the recipes all publish through a [`Listeners`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use curator_core::Listeners;
///
/// let listeners = Listeners::new();
/// listeners.start(tokio::runtime::Handle::current());
/// let mut events = listeners.stream();
/// let id = listeners.add_callback(std::sync::Arc::new(|n: &u32| tracing::info!(n, "event")));
/// listeners.publish(1);
/// listeners.publish(2);
/// assert_eq!(events.next().await, Some(1));
/// assert_eq!(events.next().await, Some(2));
/// assert!(listeners.remove(id));
/// listeners.close();
/// assert_eq!(events.next().await, None);
/// # }
/// ```
///
/// Each callback has a queue drained by a task of its own; the task hands the events that are
/// waiting to one `spawn_blocking` call at a time, so callbacks run in order, may block, and
/// cannot stall ZooKeeper I/O. A callback that panics is logged and the next event is delivered
/// as usual.
///
/// [`CuratorListener`]: crate::CuratorListener
pub struct Listeners<E> {
    inner: Mutex<Inner<E>>,
}

impl<E> std::fmt::Debug for Listeners<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("Listeners")
            .field("listeners", &inner.subscribers.len())
            .field("closed", &inner.closed)
            .finish_non_exhaustive()
    }
}

impl<E: Clone + Send + 'static> Default for Listeners<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Clone + Send + 'static> Listeners<E> {
    /// No listeners yet, not started.
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Inner {
                next_id: 0,
                subscribers: Vec::new(),
                runtime: None,
                parked: Vec::new(),
                closed: false,
                greeting: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<E>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a callback listener. Its task starts now if [`start`](Self::start) was called, else
    /// then.
    pub fn add_callback(&self, callback: Callback<E>) -> ListenerId {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        if inner.closed {
            return ListenerId(id);
        }
        if let Some(greeting) = inner.greeting.clone() {
            let _ = tx.send(greeting);
        }
        inner.subscribers.push((id, tx));
        match inner.runtime.clone() {
            Some(handle) => {
                handle.spawn(drain(rx, callback));
            }
            None => inner.parked.push(Parked { rx, callback }),
        }
        ListenerId(id)
    }

    /// A new stream of events from now on.
    pub fn stream(&self) -> EventStream<E> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        if !inner.closed {
            inner.subscribers.push((id, tx));
        }
        EventStream { rx }
    }

    /// Removes a listener; its queued events are still delivered. False if it was not there.
    pub fn remove(&self, id: ListenerId) -> bool {
        let mut inner = self.lock();
        let before = inner.subscribers.len();
        inner.subscribers.retain(|(i, _)| *i != id.0);
        inner.subscribers.len() != before
    }

    /// Starts the drain tasks of callbacks added so far on `handle`, and of later ones too.
    pub fn start(&self, handle: Handle) {
        let mut inner = self.lock();
        for parked in inner.parked.drain(..) {
            handle.spawn(drain(parked.rx, parked.callback));
        }
        inner.runtime = Some(handle);
    }

    /// Starts the drain tasks on the current runtime, if there is one (see
    /// [`start`](Self::start)); false outside a runtime, where they wait for a later `start`.
    pub fn start_here(&self) -> bool {
        match Handle::try_current() {
            Ok(handle) => {
                self.start(handle);
                true
            }
            Err(_) => false,
        }
    }

    /// Queues `event` for every listener. Never blocks.
    pub fn publish(&self, event: E) {
        let mut inner = self.lock();
        if let [(_, only)] = inner.subscribers.as_slice() {
            // One listener (the usual case): no clone.
            if only.send(event).is_err() {
                inner.subscribers.clear();
            }
        } else {
            inner.subscribers.retain(|(_, tx)| tx.send(event.clone()).is_ok());
        }
    }

    /// Queues `event` for every listener, and for every callback added from now on as its
    /// first event (a cache's "initialized").
    pub fn publish_and_greet(&self, event: E) {
        self.lock().greeting = Some(event.clone());
        self.publish(event);
    }

    /// Whether no listener is registered (a publisher may then handle the event itself).
    pub fn is_empty(&self) -> bool {
        self.lock().subscribers.is_empty()
    }

    /// Ends every listener after the events already queued; later additions get nothing.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.subscribers.clear();
        inner.parked.clear();
    }
}

/// Runs `f`, user code that is no listener's (a background operation's callback, a watch's
/// callback), the way the framework runs every callback: on the blocking pool, so that it may
/// block, with a panic logged rather than lost; inline where no runtime is left (a drop-time
/// report). Listeners' callbacks run the same way, in order, through their queues.
pub(crate) fn call_user(f: impl FnOnce() + Send + 'static) {
    let guarded = move || {
        if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
            tracing::error!("a callback panicked");
        }
    };
    match Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(guarded)),
        Err(_) => guarded(),
    }
}

/// Drains one callback listener's queue: waits for events, then runs the callback on the
/// blocking pool for all that are waiting, in order.
async fn drain<E: Send + 'static>(mut rx: mpsc::UnboundedReceiver<E>, callback: Callback<E>) {
    while let Some(first) = rx.recv().await {
        let mut batch = Vec::with_capacity(8);
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(event) => batch.push(event),
                Err(_) => break,
            }
        }
        let callback = callback.clone();
        let run = tokio::task::spawn_blocking(move || {
            for event in &batch {
                if std::panic::catch_unwind(AssertUnwindSafe(|| callback(event))).is_err() {
                    tracing::error!("a listener panicked; it keeps receiving events");
                }
            }
        });
        if run.await.is_err() {
            // The runtime is shutting down.
            return;
        }
    }
}
