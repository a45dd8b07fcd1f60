//! The session's events in order, and the probes that keep the session manager's `heard` fresh
//! (docs/architecture.md sections 3.2 and 3.3).

use std::time::Instant;

use zookeeper_client as zk;

use super::SESSION_EVENTS_PATH;
use crate::watcher::Fused;

/// The session's events in order. zookeeper-client's `StateWatcher` keeps only the latest state
/// (a cut followed by a reconnection 3 ms later can show as no change at all), whereas every
/// watcher receives each session event in turn; so a persistent watch on a path nobody uses
/// carries them. If the server cannot add one (before 3.6), the state watcher is the fallback.
pub(super) enum SessionEvents {
    Watch(Fused),
    States(zk::StateWatcher),
}

impl SessionEvents {
    /// Sets up the events of a new session, before anyone is told it is connected. `None` if
    /// the session ended meanwhile.
    pub(super) async fn new(client: &zk::Client) -> Option<Self> {
        loop {
            match client.watch(SESSION_EVENTS_PATH, zk::AddWatchMode::Persistent).await {
                Ok(watcher) => return Some(SessionEvents::Watch(Fused::new(watcher))),
                Err(_) if client.state().is_terminated() => return None,
                // A disconnection under the request: it is sent again after the reconnection.
                Err(zk::Error::ConnectionLoss | zk::Error::Custom(_)) => continue,
                Err(err) => {
                    tracing::debug!(error = %err, "no persistent watch for session events: using the state watcher");
                    return Some(SessionEvents::States(client.state_watcher()));
                }
            }
        }
    }

    /// The next session state. Never polls the watcher again after a terminal state (that
    /// would panic, see [`Fused`]); pends forever instead.
    pub(super) async fn next(&mut self) -> zk::SessionState {
        match self {
            SessionEvents::States(states) => states.changed().await,
            SessionEvents::Watch(watch) => loop {
                let Some(event) = watch.next().await else { return std::future::pending().await };
                if event.event_type == zk::EventType::Session {
                    return event.session_state;
                }
            },
        }
    }
}

/// A probe in flight: when it was sent, and its answer (`true` if the server answered).
pub(super) struct Probe {
    pub(super) sent: Instant,
    pub(super) answer: std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>,
}

impl Probe {
    /// Sends `exists` on [`SESSION_EVENTS_PATH`]; any answer from the server counts, an error
    /// of the connection does not.
    pub(super) fn send(client: &zk::Client) -> Self {
        let client = client.clone();
        let sent = Instant::now();
        tracing::trace!(path = SESSION_EVENTS_PATH, "exists (session probe)");
        let answer = Box::pin(async move { client.check_stat(SESSION_EVENTS_PATH).await.is_ok() });
        Self { sent, answer }
    }
}
