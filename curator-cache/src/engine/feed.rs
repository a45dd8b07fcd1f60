//! The persistent watch of one session, polled by a task of its own.
//!
//! Core's [`PersistentWatch::next`] adds the watch again after a reconnection before it hands
//! out the `SyncConnected` event, so dropping that future half-way would lose both the
//! re-registration and the event. The engine waits on many things at once and drops the
//! losers of each wait, so it never polls the watch itself: a small task does, and passes the
//! events on through a channel, whose receiver may be dropped at any point.

use curator_core::zk;
use curator_core::PersistentWatch;
use tokio::sync::mpsc;

/// The engine's end of a watch: its events.
pub(super) struct WatchFeed {
    events: mpsc::UnboundedReceiver<zk::WatchedEvent>,
    ended: bool,
}

impl WatchFeed {
    /// Hands `watch` to a new task on the current runtime. Dropping the feed ends the task,
    /// and with it the watch.
    pub(super) fn spawn(watch: PersistentWatch) -> Self {
        let (events_tx, events) = mpsc::unbounded_channel();
        tokio::spawn(pump(watch, events_tx));
        Self { events, ended: false }
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
}

/// Forwards the watch's events until the session ends or the feed is dropped.
async fn pump(mut watch: PersistentWatch, events: mpsc::UnboundedSender<zk::WatchedEvent>) {
    loop {
        tokio::select! {
            biased;
            _ = events.closed() => break,
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
