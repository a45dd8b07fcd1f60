//! Ending a session (docs/architecture.md section 3.1, step 6, and sections 3.2 and 3.7):
//! waiting for a dropped client to end, closing the session of a detached client, the manager's
//! ending of a session it abandons or holds when it stops, and learning at once, after a
//! disconnection, whether the session was closed or expired on the server meanwhile (3.2).
//!
//! While the ensemble tracker is on, the framework's clients are detached: dropping one sends no
//! CloseSession, so that a session can move to another client. Whoever lets go of such a
//! session for good closes it with a [`Closer`]: `close()`, the session manager when it abandons
//! a session presumed lost, and the session manager when every handle of the framework was
//! dropped without `close()` (the manager's task outlives the framework's last handle; it holds
//! its own `Closer`, built once when it starts, since the framework's options are gone with it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use super::Manager;
use crate::builder::Config;
use crate::ensemble::Ensemble;
use crate::error::CuratorError;

/// Longest wait of [`Closer::close`], and for a dropped client to end when the framework closes.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Pause before the first attempt of [`Closer::resumable`], and before another while none has
/// answered; it doubles with each, up to a tenth of the session timeout.
const RESUME_PAUSE: Duration = Duration::from_millis(20);

/// Attempts of [`Closer::resumable`] in flight at once.
const RESUME_ATTEMPTS: usize = 4;

/// Each attempt of [`Closer::resumable`] is bounded by this part of the session timeout
/// (TCP connect and handshake), and by at least [`MIN_RESUME_BOUND`].
const RESUME_BOUND: u32 = 20;
/// See [`RESUME_BOUND`].
const MIN_RESUME_BOUND: Duration = Duration::from_millis(100);

/// How long after a reconnection the manager waits for a probe to confirm it before asking
/// whether the session lives after all (architecture.md section 3.2): zookeeper-client says
/// SyncConnected on the server's handshake reply, and a session closed from outside at that
/// moment loses the connection right after, unreported (requests then wait for its next
/// attempt, 100 ms and more later). Twice [`RESUME_PAUSE`], or four of the latest probe's round
/// trips if longer.
pub(crate) fn confirm_bound(rtt: Duration) -> Duration {
    rtt.saturating_mul(4).max(RESUME_PAUSE * 2)
}

/// How long after a disconnection the manager first asks whether the session lives
/// (architecture.md section 3.2). Every attempt re-establishes the session, and a server hands
/// a session to its newest connection and closes the others: asked while the client's own
/// reconnection is under way, the question takes that connection from it (and zookeeper-client
/// reports the loss only when it starts its next attempt, which would ask again: a loop seen to
/// end the session under 10 ms of latency). So it waits [`RESUME_PAUSE`], and at least four
/// round trips of the latest probe (a reconnection is a TCP connect, the handshake and
/// zookeeper-client's first ping), and, if a question answered that the session lives, until
/// `quiet` after that answer.
pub(crate) fn first_question(rtt: Duration, since_alive: Option<Duration>, quiet: Duration) -> Duration {
    let after_rtt = rtt.saturating_mul(4).max(RESUME_PAUSE);
    match since_alive {
        Some(since) => after_rtt.max(quiet.saturating_sub(since)),
        None => after_rtt,
    }
}

/// A boxed answer: whether a session can still be resumed (see [`Closer::resumable`]).
pub(crate) type Resumable = Pin<Box<dyn Future<Output = bool> + Send>>;

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
        Ok(Closer {
            connector: super::connect::connector(config, false)?,
            ensemble: config.ensemble.clone(),
            tls: config.tls.is_some(),
        })
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
            let client = super::connect::open(closer, &servers, self.tls).await?;
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

    /// Whether a server still takes the session of `client`, whose connection dropped: asks
    /// after `first` by re-establishing the session with a detached client of its own on the current
    /// servers, and asks again every 20 ms, doubling to a tenth of the session timeout, while no
    /// attempt has answered (at most [`RESUME_ATTEMPTS`] at once, each bounded by a twentieth of
    /// the session timeout and at least 100 ms: a server busy with the session's close was seen
    /// to leave a TCP connect pending for longer). `false` as soon as a server says the session
    /// expired (closed from outside, or expired), `true` once one takes it; that client is
    /// dropped at once, sending nothing, and the session's own client, reconnecting by itself,
    /// takes the session back. zookeeper-client's own reconnection learns the same, but only
    /// once it gets there: after a failed attempt it pauses 100 ms and more, and a handshake
    /// the server leaves unanswered holds it for 2/5 of the session timeout. The caller stops
    /// asking (drops the future) once its client reconnects. `first`: [`first_question`] after
    /// a disconnection, zero when a reconnection went unconfirmed ([`confirm_bound`]).
    pub(crate) fn resumable(&self, client: &zk::Client, first: Duration) -> Resumable {
        let (session, timeout) = (client.session().clone(), client.session_timeout());
        let bound = (timeout / RESUME_BOUND).max(MIN_RESUME_BOUND);
        let this = self.clone();
        Box::pin(async move {
            let id = session.id();
            let attempt = |servers: String| {
                let probe = this.connector.clone().with_detached().with_session(session.clone());
                tracing::debug!(session = %id, connect_string = %servers, "resuming the session to learn whether it lives");
                let tls = this.tls;
                async move { super::connect::open(probe.with_connection_timeout(bound), &servers, tls).await }
            };
            let mut attempts = futures::stream::FuturesUnordered::new();
            let mut pause = RESUME_PAUSE;
            // Not before the first pause: a reconnection of the client's own within it (the
            // usual case, a few milliseconds) makes asking needless, and an attempt racing it
            // would take the session's connection from it.
            let mut next = tokio::time::Instant::now() + first;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(next), if attempts.len() < RESUME_ATTEMPTS => {
                        attempts.push(attempt(this.ensemble.current()));
                        next = tokio::time::Instant::now() + pause;
                        pause = (pause * 2).min(timeout / 10).max(RESUME_PAUSE);
                    }
                    Some(answer) = futures::StreamExt::next(&mut attempts) => match answer {
                        Ok(probe) => {
                            drop(probe);
                            return true;
                        }
                        Err(zk::Error::SessionExpired) => return false,
                        Err(err) => tracing::debug!(session = %id, error = %err, "could not resume the session"),
                    },
                }
            }
        })
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

impl Manager {
    /// What ends the sessions of the framework's clients, if they are detached.
    fn detached_closer(&self) -> Option<&Closer> {
        self.closer.as_ref().filter(|_| self.detached)
    }

    /// The manager stops while it holds `client`. If `close()` stopped it (the shutdown signal
    /// says so) and `published` (the client was put in the session slot, so `close()` knows
    /// of it), `close()` ends the session. If every handle of the framework was dropped without
    /// `close()` (the shutdown sender went with the framework), or `close()` cannot know of the
    /// client, the manager ends it here, in its own task, so that the ephemeral nodes and locks
    /// of the session go at once: a client that is not detached sends CloseSession when
    /// dropped; a detached one (tracker on) is closed by the manager's `Closer`. Nothing of this
    /// runs in a `Drop`, so dropping the last handle outside a runtime neither panics nor
    /// blocks; if the runtime itself is gone, so is this task, and the session expires on the
    /// server.
    pub(super) async fn abandon(&self, client: zk::Client, published: bool) {
        if published && *self.shutdown.borrow() {
            return;
        }
        tracing::debug!(session = %client.session_id(), "the framework stopped without ending this session: ending it");
        match self.detached_closer() {
            Some(closer) => closer.end(client).await,
            None => end_attached(client).await,
        }
    }

    /// Abandons a session that is lost: a detached client (tracker on) sent no CloseSession
    /// when it was dropped, so the session is closed in the background if a server may still
    /// take it (`alive`), as a client that is not detached does when dropped (section 3.2).
    pub(super) fn close_lost(&self, alive: Option<zk::SessionInfo>) {
        if let (Some(info), Some(closer)) = (alive, self.detached_closer().cloned()) {
            crate::task::spawn_detached(async move { closer.close(info).await });
        }
    }
}
