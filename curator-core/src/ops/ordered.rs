//! Background operations reach the server in the order they were submitted, as Curator's do
//! (ZooKeeper answers one session's requests in the order it received them, so this is all an
//! ordering guarantee needs).
//!
//! ```text
//! Pending::in_background ──submit──► queue (one per framework, FIFO)
//!                                       │  one dispatcher task, one job at a time:
//!                                       │  1. wait until a session can take a request
//!                                       │     (or the job's connection timeout passed, or close)
//!                                       │  2. poll the job once, outside tokio's cooperative
//!                                       │     budget: with a session ready, its first request
//!                                       │     is handed to the client in this poll
//!                                       │  3. the rest of the job runs in a task of its own
//!                                       ▼
//!                                    next job
//! ```
//!
//! Only the *first send* is ordered: the dispatcher never waits for an answer, so background
//! operations stay pipelined. A retry after an unknown outcome goes out whenever it is ready, as
//! in Curator. Before this queue each operation raced for the session in a task of its own:
//! `create(/p)` and `create(/p/c)` submitted back to back failed with NoNode in 3-8 of 200
//! pairs, and creates submitted during an outage went out in any order once it ended.

use std::sync::Mutex;

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
    tx: Mutex<Option<mpsc::UnboundedSender<Job>>>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}

impl Queue {
    /// Queues `run` (the background operation on `path`) behind every earlier one; `ready`
    /// resolves once a session can take its request, or once the operation should go on
    /// without one (its own wait then reports why).
    pub(crate) fn submit(&self, path: &str, ready: BoxFuture<()>, run: BoxFuture<()>) {
        let job = Job { path: path.to_string(), ready, run };
        let mut tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let job = match tx.as_ref() {
            None => job,
            Some(sender) => match sender.send(job) {
                Ok(()) => return,
                // The dispatcher's runtime is gone: start another on the current one.
                Err(mpsc::error::SendError(job)) => job,
            },
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let (sender, rx) = mpsc::unbounded_channel();
                // Cannot fail: the receiver is alive.
                let _ = sender.send(job);
                drop(handle.spawn(dispatch(rx)));
                *tx = Some(sender);
            }
            Err(_) => tracing::warn!(path = %job.path, "no tokio runtime: background operation not started"),
        }
    }
}

/// Sends each job's first request in turn (see the module docs). Holds no framework between
/// jobs (only a waiting job's `ready` does), so it ends when the framework's last handle (and
/// with it the queue's sender) is gone.
async fn dispatch(mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(Job { path, ready, mut run }) = rx.recv().await {
        tracing::trace!(path = %path, "background operation's turn");
        ready.await;
        // Out of tokio's cooperative budget (a long queue spends it), a timer or a channel in
        // the operation's path could answer "not yet" and the request would not go out in this
        // poll: the first poll runs unconstrained.
        if futures::poll!(tokio::task::unconstrained(run.as_mut())).is_pending() {
            crate::task::spawn_detached(run);
        }
    }
}
