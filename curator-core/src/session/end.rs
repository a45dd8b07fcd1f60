//! Ending a session: waiting for a dropped client to end, and closing the session of a detached
//! client (docs/architecture.md sections 3.2 and 3.7).
//!
//! While the ensemble tracker is on, the framework's clients are detached: dropping one sends no
//! CloseSession, so that a session can move to another client. Whoever lets go of such a
//! session for good closes it with a [`Closer`]: `close()`, the session manager when it abandons
//! a session presumed lost, and the session manager when every handle of the framework was
//! dropped without `close()` (the manager's task outlives the framework's last handle; it holds
//! its own `Closer`, since the framework's options are gone with it).

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::builder::Config;
use crate::ensemble::Ensemble;
use crate::error::CuratorError;

/// Longest wait of [`Closer::close`], and for a dropped client to end when the framework closes.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Waits (at most `limit`) until the client of `states` ends: once every clone is dropped, a
/// detached client flushes what it has to send and ends.
pub(crate) async fn client_ended(mut states: zk::StateWatcher, limit: Duration) -> bool {
    tokio::time::timeout(limit, ended(&mut states)).await.is_ok()
}

/// Until the client of `states` ends.
async fn ended(states: &mut zk::StateWatcher) {
    while !states.state().is_terminated() {
        states.changed().await;
    }
}

/// Ends the session of `client`, a client that is not detached: drops it (dropping the last
/// clone sends CloseSession) and waits, at most [`CLOSE_WAIT`], for it to end.
pub(crate) async fn end_attached(client: zk::Client) {
    let states = client.state_watcher();
    drop(client);
    if !client_ended(states, CLOSE_WAIT).await {
        tracing::warn!("the session's client is still held elsewhere: the session ends when it is dropped");
    }
}

/// What closes a session on the server for a framework whose clients are detached: the
/// framework's options for a client that is not detached (authentication, SASL, TLS) and its
/// current ensemble. It keeps no framework alive.
#[derive(Clone)]
pub(crate) struct Closer {
    connector: zk::Connector,
    ensemble: Arc<Ensemble>,
    tls: bool,
}

impl Closer {
    /// A closer with the framework's options.
    pub(crate) fn new(config: &Config) -> Result<Self, CuratorError> {
        Ok(Closer { connector: super::connector(config, false)?, ensemble: config.ensemble.clone(), tls: config.tls.is_some() })
    }

    /// Closes `session` on the server: a client that re-establishes it on the current servers,
    /// dropped at once, sends CloseSession (the server then drops any other connection of the
    /// session). At most [`CLOSE_WAIT`]; if no server takes it, the session expires on the
    /// server by itself.
    pub(crate) async fn close(&self, session: zk::SessionInfo) {
        let id = session.id();
        let servers = self.ensemble.current();
        let closer = self.connector.clone().with_session(session);
        tracing::debug!(session = %id, connect_string = %servers, "closing the session");
        let closed = tokio::time::timeout(CLOSE_WAIT, async {
            let client = super::open(closer, &servers, self.tls).await?;
            let mut states = client.state_watcher();
            drop(client);
            ended(&mut states).await;
            Ok::<_, zk::Error>(())
        })
        .await;
        match closed {
            Ok(Ok(())) => tracing::debug!(session = %id, "session closed"),
            Ok(Err(err)) => {
                tracing::debug!(session = %id, error = %err, "could not close the session (it expires on the server)")
            }
            Err(_) => tracing::debug!(session = %id, "no server closed the session in time (it expires on the server)"),
        }
    }

    /// Ends the session of `client`, a detached client, for good: drops it, lets it end first if
    /// it is connected (else it would reconnect when the closer's connection makes the server
    /// drop its own, and take the session back), then closes the session if it was still alive,
    /// whoever still holds a clone of the client. At most twice [`CLOSE_WAIT`].
    pub(crate) async fn end(&self, client: zk::Client) {
        let alive = !client.state().is_terminated();
        let info = client.session().clone();
        let connected = matches!(client.state(), zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly);
        let states = client.state_watcher();
        drop(client);
        if connected && !client_ended(states, CLOSE_WAIT).await {
            tracing::warn!(session = %info.id(), "the session's client is still held elsewhere: closing the session anyway");
        }
        if alive {
            self.close(info).await;
        }
    }
}
