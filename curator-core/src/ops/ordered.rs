//! Background operations reach the server in the order they were submitted, as Curator's do,
//! and ahead of whatever is issued after them while a session is at hand (ZooKeeper answers one
//! session's requests in the order it received them, and zookeeper-client queues a request when
//! its future is made: docs/architecture.md sections 2.1 and 6.1).
//!
//! ```text
//! Pending::in_background ──submit──► nothing queued before it, and a session at hand?
//!        │                              yes: its first poll, there and then (its first request
//!        │                                   is queued on the session before in_background
//!        │                                   returns); the rest runs in a task of its own
//!        │                              no:  queue (one per framework, FIFO)
//!        │                                       │  one dispatcher task, one job at a time:
//!        │                                       │  1. wait until a session can take a request
//!        │                                       │     (or the job's connection timeout
//!        │                                       │     passed, or close)
//!        │                                       │  2. its first poll, as above
//!        │                                       ▼
//!        │                                    next job
//!        └─ an operation that sends nothing (locally(), bad input): its first poll at once,
//!           never queued
//! ```
//!
//! Every first poll runs outside tokio's cooperative budget: a timer or a channel in the
//! operation's path could otherwise answer "not yet" (a long queue, or a caller's task, spends
//! the budget) and the request would not go out in that poll.
//!
//! Only the *first send* is ordered: nobody waits for an answer, so background operations stay
//! pipelined. A retry after an unknown outcome goes out whenever it is ready, as in Curator.
//! Before the queue each operation raced for the session in a task of its own: `create(/p)` and
//! `create(/p/c)` submitted back to back failed with NoNode in 3-8 of 200 pairs, and creates
//! submitted during an outage went out in any order once it ended. Before the first poll at
//! submission, every operation went through the dispatcher, and a foreground read issued right
//! after a background write went out first (every round on one runtime thread).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::mpsc;

use crate::task::BoxFuture;

/// One submitted background operation: its wait for a session, then its whole run, delivery of
/// its event included.
struct Job {
    path: String,
    ready: BoxFuture<()>,
    run: BoxFuture<()>,
}

/// A framework's queue of background operations, with its dispatcher started on first use.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
}

/// The dispatcher's channel, and how many jobs sent to it have not had their first poll yet.
#[derive(Default)]
struct State {
    tx: Option<mpsc::UnboundedSender<Job>>,
    /// Shared with the dispatcher, which counts each job out after its first poll. A new
    /// dispatcher (the old one's runtime gone, with its jobs) gets a new count.
    queued: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}

impl Queue {
    /// Sends `run` (the background operation on `path`) behind every earlier one: at once if
    /// none is queued and `ready` (its wait for a session) resolves in its first poll, so that
    /// its first request is queued on the session before this returns; else in the queue, whose
    /// dispatcher waits for `ready`. `ready` resolves once a session can take the request, or
    /// once the operation should go on without one (its own wait then reports why).
    ///
    /// `connected`: whether the framework's connection state says connected now. Only then is
    /// `ready` polled here: without a connection there is no session to hand, and a first poll
    /// would only arm `ready`'s timer in the caller's context, where polling a timer panics if
    /// the runtime is shutting down (a cleanup sent to the background from a `Drop`, say); the
    /// dispatcher's task is simply never polled again then.
    pub(crate) fn submit(&self, path: &str, connected: bool, mut ready: BoxFuture<()>, run: BoxFuture<()>) {
        // Outside a runtime the dispatcher (if one runs) takes it: a first poll needs timers.
        let at_hand = connected && tokio::runtime::Handle::try_current().is_ok() && self.nothing_queued();
        if at_hand && poll_once(ready.as_mut()).is_ready() {
            tracing::trace!(path, "background operation sent at submission");
            start(run);
            return;
        }
        self.enqueue(Job { path: path.to_string(), ready, run });
    }

    /// True when every job sent to the dispatcher has had its first poll.
    fn nothing_queued(&self) -> bool {
        self.lock().queued.load(Ordering::Acquire) == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `job` to the dispatcher, starting one on the current runtime if none runs.
    fn enqueue(&self, job: Job) {
        let mut state = self.lock();
        let job = match state.tx.as_ref() {
            None => job,
            Some(sender) => {
                state.queued.fetch_add(1, Ordering::AcqRel);
                match sender.send(job) {
                    Ok(()) => return,
                    // The dispatcher's runtime is gone, and its jobs with it: start another on
                    // the current one.
                    Err(mpsc::error::SendError(job)) => job,
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let (sender, rx) = mpsc::unbounded_channel();
                let queued = Arc::new(AtomicUsize::new(1));
                // Cannot fail: the receiver is alive.
                let _ = sender.send(job);
                drop(handle.spawn(dispatch(rx, queued.clone())));
                *state = State { tx: Some(sender), queued };
            }
            Err(_) => tracing::warn!(path = %job.path, "no tokio runtime: background operation not started"),
        }
    }
}

/// Polls `future` once, outside tokio's cooperative budget, with a waker that does nothing:
/// whoever polls it next (the dispatcher, the task of [`start`]) registers its own.
fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    std::pin::pin!(tokio::task::unconstrained(future)).poll(&mut cx)
}

/// An operation's first poll, here and now (its first request goes to the client in it, when
/// a session is at hand); the rest of it runs in a task of its own. Outside a runtime it is
/// only handed to [`spawn_detached`](crate::task::spawn_detached), which says why it cannot
/// run.
pub(crate) fn start(mut run: BoxFuture<()>) {
    if tokio::runtime::Handle::try_current().is_err() || poll_once(run.as_mut()).is_pending() {
        crate::task::spawn_detached(run);
    }
}

/// Sends each job's first request in turn (see the module docs), counting it out of `queued`
/// once sent. Holds no framework between jobs (only a waiting job's `ready` does), so it ends
/// when the framework's last handle (and with it the queue's sender) is gone.
async fn dispatch(mut rx: mpsc::UnboundedReceiver<Job>, queued: Arc<AtomicUsize>) {
    while let Some(Job { path, ready, run }) = rx.recv().await {
        tracing::trace!(path = %path, "background operation's turn");
        ready.await;
        start(run);
        queued.fetch_sub(1, Ordering::AcqRel);
    }
}
