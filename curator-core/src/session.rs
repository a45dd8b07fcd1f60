//! The session manager: one task per framework that owns the current ZooKeeper client.
//!
//! ```text
//!   connect ──► Live ──Disconnected──► Suspended ──SyncConnected──► Live (Reconnected, same session)
//!                 ▲                        │
//!                 │                        ├─ Expired / Closed / AuthFailed ──┐
//!                 │                        └─ a whole session timeout passes ─┤
//!                 └──────── new session (Reconnected, new_session) ◄── Lost ◄─┘
//! ```
//!
//! `Lost` is reported no later than the negotiated session timeout after the connection was
//! lost, even if zookeeper-client would only declare expiry later (it waits about 1.4 times as
//! long): by then the ensemble may have expired us, and holders of ephemeral nodes must know.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::error::CuratorError;
use crate::framework::{CuratorFramework, Inner};
use crate::ops::watch::Fused;
use crate::retry::{ExponentialBackoffForever, RetryLoop};
use crate::state::{ConnectionState, ConnectionStateEvent};

/// Pause after the first failed attempt to open a session; it doubles with each failure in a
/// row, up to [`MAX_RECONNECT_PAUSE`].
const RECONNECT_PAUSE: Duration = Duration::from_millis(200);
/// Longest pause between attempts to open a session.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(5);

/// Where the manager is in a session's life.
enum Phase {
    Connected,
    Suspended { since: Instant },
}

/// Why a session ended.
enum End {
    Lost,
    Shutdown,
}

pub(crate) async fn run(inner: Weak<Inner>, mut shutdown: watch::Receiver<bool>) {
    let mut generation = 0u64;
    loop {
        let Some(client) = connect(&inner, &mut shutdown).await else { return };
        let Some(events) = SessionEvents::new(&client).await else { continue };
        generation += 1;
        let Some(strong) = inner.upgrade() else { return };
        CuratorFramework::set_live(&strong, client.clone(), generation);
        let state = if client.state() == zk::SessionState::ConnectedReadOnly {
            ConnectionState::ReadOnly
        } else if generation == 1 {
            ConnectionState::Connected
        } else {
            ConnectionState::Reconnected
        };
        publish(&strong, state, &client, generation, generation > 1);
        drop(strong);
        match follow(&inner, &client, events, generation, &mut shutdown).await {
            End::Shutdown => return,
            End::Lost => {
                let Some(strong) = inner.upgrade() else { return };
                CuratorFramework::set_empty(&strong);
                publish(&strong, ConnectionState::Lost, &client, generation, false);
            }
        }
    }
}

/// Opens a new session, retrying until one is had or the framework shuts down.
async fn connect(inner: &Weak<Inner>, shutdown: &mut watch::Receiver<bool>) -> Option<zk::Client> {
    let mut retry =
        RetryLoop::new(Arc::new(ExponentialBackoffForever::new(RECONNECT_PAUSE, MAX_RECONNECT_PAUSE)), None);
    loop {
        if *shutdown.borrow() {
            return None;
        }
        let (connector, connect_string, timeout) = {
            let strong = inner.upgrade()?;
            let config = &strong.config;
            let mut connector = zk::Client::connector()
                .with_session_timeout(config.session_timeout)
                .with_connection_timeout(config.connection_timeout)
                .with_readonly(config.can_be_read_only);
            for (scheme, auth) in &config.auth {
                connector = connector.with_auth(scheme, auth);
            }
            (connector, config.connect_string.clone(), config.connection_timeout)
        };
        tracing::debug!(connect_string = %connect_string, "opening a session");
        let attempt = tokio::time::timeout(timeout, connector.connect(&connect_string));
        let error = tokio::select! {
            _ = shutdown.changed() => return None,
            result = attempt => match result {
                Ok(Ok(client)) => {
                    if let Some(strong) = inner.upgrade() {
                        CuratorFramework::set_connect_error(&strong, None);
                    }
                    tracing::info!(session = %client.session_id(), timeout = ?client.session_timeout(), "session opened");
                    return Some(client);
                }
                Ok(Err(err)) => err.to_string(),
                Err(_) => format!("no session within {timeout:?}"),
            },
        };
        // One warning per streak of failures; the rest at debug level.
        if retry.retries() == 0 {
            tracing::warn!(connect_string = %connect_string, error = %error, "could not open a session; retrying with backoff");
        } else {
            tracing::debug!(connect_string = %connect_string, error = %error, failures = retry.retries() + 1, "could not open a session");
        }
        let strong = inner.upgrade()?;
        let pause =
            retry.next_pause(&CuratorError::NotConnected { detail: error.clone() }).unwrap_or(MAX_RECONNECT_PAUSE);
        CuratorFramework::set_connect_error(&strong, Some(error));
        drop(strong);
        tokio::select! {
            _ = shutdown.changed() => return None,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// A path nobody creates, under ZooKeeper's reserved `/zookeeper`: a persistent watch on it
/// receives nothing but session events, in order.
pub const SESSION_EVENTS_PATH: &str = "/zookeeper/curator-rs-session-events";

/// The session's events in order. zookeeper-client's `StateWatcher` keeps only the latest state
/// (a cut followed by a reconnection 3 ms later can show as no change at all), whereas every
/// watcher receives each session event in turn; so a persistent watch on a path nobody uses
/// carries them. If the server cannot add one (before 3.6), the state watcher is the fallback.
enum SessionEvents {
    Watch(Fused),
    States(zk::StateWatcher),
}

impl SessionEvents {
    /// Sets up the events of a new session, before anyone is told it is connected. `None` if
    /// the session ended meanwhile.
    async fn new(client: &zk::Client) -> Option<Self> {
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
    async fn next(&mut self) -> zk::SessionState {
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

/// Follows one session's events until it is lost or the framework shuts down.
async fn follow(
    inner: &Weak<Inner>,
    client: &zk::Client,
    mut events: SessionEvents,
    generation: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> End {
    let mut phase = Phase::Connected;
    let negotiated = client.session_timeout();
    loop {
        let lost_at = match phase {
            Phase::Suspended { since } => Some(tokio::time::Instant::from_std(since + negotiated)),
            Phase::Connected => None,
        };
        let presumed_lost = async {
            match lost_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let state = tokio::select! {
            _ = shutdown.changed() => return End::Shutdown,
            _ = presumed_lost => {
                tracing::warn!(session = %client.session_id(), "suspended for a whole session timeout: presuming the session lost");
                return End::Lost;
            }
            state = events.next() => state,
        };
        let Some(strong) = inner.upgrade() else { return End::Shutdown };
        match (state, &phase) {
            (zk::SessionState::Disconnected, Phase::Connected) => {
                phase = Phase::Suspended { since: Instant::now() };
                publish(&strong, ConnectionState::Suspended, client, generation, false);
            }
            (zk::SessionState::SyncConnected, Phase::Suspended { .. }) => {
                phase = Phase::Connected;
                publish(&strong, ConnectionState::Reconnected, client, generation, false);
            }
            (zk::SessionState::ConnectedReadOnly, _) => {
                phase = Phase::Connected;
                publish(&strong, ConnectionState::ReadOnly, client, generation, false);
            }
            (s, _) if s.is_terminated() => {
                tracing::warn!(session = %client.session_id(), state = %s, "session ended");
                return End::Lost;
            }
            _ => {}
        }
    }
}

fn publish(inner: &Arc<Inner>, state: ConnectionState, client: &zk::Client, generation: u64, new_session: bool) {
    inner.hub.publish(ConnectionStateEvent {
        state,
        session_id: client.session_id().0,
        generation,
        new_session,
        at: Instant::now(),
        seq: 0, // numbered by the hub
    });
}
