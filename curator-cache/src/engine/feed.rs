//! The persistent watch of one session, polled by a task of its own.
//!
//! Core's [`PersistentWatch::next`] adds the watch again after a reconnection before it hands
//! out the `SyncConnected` event, so dropping that future half-way would lose both the
//! re-registration and the event. The engine waits on many things at once and drops the
//! losers of each wait, so it never polls the watch itself: a small task does, and passes the
//! events on through a channel, whose receiver may be dropped at any point. The same task
//! carries out the engine's [`WatchFeed::register_again`] requests between two events.

use curator_core::zk;
use curator_core::{CuratorError, PersistentWatch, Result};
use tokio::sync::{mpsc, oneshot};

/// The engine's end of a watch: its events, and a way to register it again.
pub(super) struct WatchFeed {
    events: mpsc::UnboundedReceiver<zk::WatchedEvent>,
    requests: mpsc::UnboundedSender<oneshot::Sender<Result<()>>>,
    path: String,
    ended: bool,
}

impl WatchFeed {
    /// Hands `watch` to a new task on the current runtime. Dropping the feed ends the task,
    /// and with it the watch.
    pub(super) fn spawn(watch: PersistentWatch, path: &str) -> Self {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (requests, requests_rx) = mpsc::unbounded_channel();
        tokio::spawn(pump(watch, events_tx, requests_rx));
        Self { events, requests, path: path.to_string(), ended: false }
    }

    /// Whether the session of the watch may still deliver events.
    pub(super) fn is_alive(&self) -> bool {
        !self.ended
    }

    /// The next event; `None` once the session has ended (after its terminal event).
    pub(super) async fn next(&mut self) -> Option<zk::WatchedEvent> {
        if self.ended {
            return None;
        }
        let event = self.events.recv().await;
        match &event {
            Some(e) if e.event_type == zk::EventType::Session && e.session_state.is_terminated() => {
                self.ended = true;
            }
            Some(_) => {}
            None => self.ended = true,
        }
        event
    }

    /// Registers the watch again on its session (ZOOKEEPER-4466, see
    /// [`PersistentWatch::register_again`]).
    pub(super) async fn register_again(&self) -> Result<()> {
        let gone = || CuratorError::SessionExpired { path: self.path.clone() };
        let (reply, answer) = oneshot::channel();
        self.requests.send(reply).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// Forwards the watch's events until the session ends or the feed is dropped; serves
/// re-registration requests in between.
async fn pump(
    mut watch: PersistentWatch,
    events: mpsc::UnboundedSender<zk::WatchedEvent>,
    mut requests: mpsc::UnboundedReceiver<oneshot::Sender<Result<()>>>,
) {
    loop {
        tokio::select! {
            biased;
            request = requests.recv() => match request {
                // A request drops a wait for the next event; should that wait be re-adding
                // the watch after a reconnection, this registration does the same, and the
                // engine loads right after it.
                Some(reply) => {
                    let _ = reply.send(watch.register_again().await);
                }
                None => break,
            },
            event = watch.next() => match event {
                Some(event) => {
                    if events.send(event).is_err() {
                        break;
                    }
                }
                None => break,
            },
        }
    }
}
