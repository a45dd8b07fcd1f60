//! The one wrapper over zookeeper-client's raw persistent watcher, which panics if polled after
//! it delivered a terminal session event (docs/architecture.md section 6.3): the session
//! manager's event watch and [`PersistentWatch`](crate::PersistentWatch) are built on it; the
//! other workarounds of persistent watches are module [`ops::watch`](crate::ops::watch)'s.

use zookeeper_client as zk;

/// A raw persistent watcher that is never polled after its session ended.
#[derive(Debug)]
pub(crate) struct Fused(Option<zk::PersistentWatcher>);

impl Fused {
    pub(crate) fn new(watcher: zk::PersistentWatcher) -> Self {
        Self(Some(watcher))
    }

    /// One that has ended: it delivers nothing.
    pub(crate) fn ended() -> Self {
        Self(None)
    }

    /// The next event, or `None` once a terminal session event was delivered (and ever after).
    pub(crate) async fn next(&mut self) -> Option<zk::WatchedEvent> {
        let watcher = self.0.as_mut()?;
        let event = watcher.changed().await;
        if event.event_type == zk::EventType::Session && event.session_state.is_terminated() {
            self.0 = None;
        }
        Some(event)
    }

    /// The raw watcher, for a removal that waits for the server's answer; it has ended after.
    pub(crate) fn take(&mut self) -> Option<zk::PersistentWatcher> {
        self.0.take()
    }

    pub(crate) fn is_terminated(&self) -> bool {
        self.0.is_none()
    }
}
