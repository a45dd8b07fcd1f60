//! See the docs of the main type below, where this module's guide lives.

use tokio::sync::watch;

use crate::state::{ConnectionState, ConnectionStateEvent};

/// How a session came to its end, as the framework saw it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionEnd {
    /// The session expired, or was presumed gone after a whole session timeout without a
    /// connection ([`ConnectionState::Lost`]).
    Lost,
    /// The framework is on a later session: this one ended, whether or not its Lost was seen.
    Replaced,
    /// The framework was closed, and its session with it.
    Closed,
}

impl std::fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SessionEnd::Lost => "the session was lost",
            SessionEnd::Replaced => "the framework is on a new session",
            SessionEnd::Closed => "the framework was closed",
        })
    }
}

impl ConnectionStateEvent {
    /// Whether this event concerns a later session than the one of `generation` (and so that
    /// session is over). Generations only grow; generation 0, before any session, is never
    /// later.
    pub fn is_later_session(&self, generation: u64) -> bool {
        is_later(self.generation, generation)
    }

    /// Whether this event concerns the session of `generation` itself.
    pub fn is_generation(&self, generation: u64) -> bool {
        self.generation == generation
    }

    /// How the session of `generation` has ended as of this event, or `None` while it lives
    /// (the table in the [`SessionLiveness`](crate::SessionLiveness) docs).
    pub fn session_end(&self, generation: u64) -> Option<SessionEnd> {
        if self.is_later_session(generation) {
            return Some(SessionEnd::Replaced);
        }
        match self.state {
            ConnectionState::Lost => Some(SessionEnd::Lost),
            ConnectionState::Closed => Some(SessionEnd::Closed),
            _ => None,
        }
    }

    /// Whether operations can run on the session of `generation` as of this event: connected,
    /// and on that very session.
    pub fn is_connected_on(&self, generation: u64) -> bool {
        self.state.is_connected() && self.is_generation(generation)
    }
}

/// Whether the session of `generation` came after the one of `earlier` (generations only
/// grow): a holder that keeps two generations (the one it lost, the one it follows now) asks
/// this rather than comparing them.
pub fn is_later(generation: u64, earlier: u64) -> bool {
    generation > earlier
}

/// One session of a framework, watched for its end: the framework's answer to "is the session of
/// this generation over?", as a predicate ([`end`](Self::end)) and as a future
/// ([`ended`](Self::ended)). Made by [`CuratorFramework::liveness`](crate::CuratorFramework::liveness).
///
/// # Guide
///
/// Session liveness, read in one place: "is the session my node was made on over?"
///
/// The session manager (`session.rs`) is the only place that *declares*
/// a state: Suspended, Lost, a new session. Everything that holds something on a session (a lock
/// node, a leader's node, a barrier's node, a watch) must then *read* those declarations the same
/// way, as etcd's `Session.Done()` lets every recipe of its `concurrency` package read one
/// session's end. This module is that reading; recipes, caches and watchers ask it instead of
/// comparing generations themselves (docs/architecture.md section 3.8).
///
/// A session is named by its *generation*, the framework's count of sessions
/// ([`Session::generation`](crate::Session::generation)): a node made on generation `g` lives as
/// long as the session of generation `g` does. That session is over, as of a connection-state
/// event `e`, when:
///
/// | `e` says | the session of `g` is |
/// |---|---|
/// | a later generation than `g` (a new session was opened) | over: [`SessionEnd::Replaced`] |
/// | [`Lost`](ConnectionState::Lost) | over: [`SessionEnd::Lost`] |
/// | [`Closed`](ConnectionState::Closed) | over: [`SessionEnd::Closed`] |
/// | anything else, or generation 0 (no session yet) | not over |
///
/// Suspended is *not* an end: whether a suspension means "what I hold may be gone" is a matter
/// of the [`ErrorPolicy`](crate::ErrorPolicy), which each holder applies on top of this.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use curator_core::{CuratorFramework, SessionEnd};
/// use curator_test::TestingServer;
///
/// let server = TestingServer::start().await?;
/// let client = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// client.start()?;
/// client.block_until_connected(Duration::from_secs(10)).await?;
///
/// let session = client.session().await?;
/// let mut life = client.liveness(session.generation());
/// assert_eq!(life.end(), None);
/// client.close().await;
/// assert_eq!(life.ended().await, SessionEnd::Closed);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SessionLiveness {
    generation: u64,
    states: watch::Receiver<ConnectionStateEvent>,
}

impl SessionLiveness {
    pub(crate) fn new(generation: u64, states: watch::Receiver<ConnectionStateEvent>) -> Self {
        Self { generation, states }
    }

    /// The generation of the session watched.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How the session has ended, or `None` while it lives.
    pub fn end(&self) -> Option<SessionEnd> {
        self.states.borrow().session_end(self.generation)
    }

    /// Resolves when the session is over (at once if it is already), with how it ended. A
    /// framework that is dropped ends its session: that resolves as [`SessionEnd::Closed`].
    /// Cancel safe.
    pub async fn ended(&mut self) -> SessionEnd {
        let generation = self.generation;
        match self.states.wait_for(|s| s.session_end(generation).is_some()).await {
            Ok(now) => now.session_end(generation).unwrap_or(SessionEnd::Closed),
            Err(_) => SessionEnd::Closed,
        }
    }

    /// Resolves when the session is connected again, with `Ok(())`, or when it is over first,
    /// with how it ended (at once if either is true already). Cancel safe.
    pub async fn connected(&mut self) -> Result<(), SessionEnd> {
        let generation = self.generation;
        let seen = self
            .states
            .wait_for(|s| s.session_end(generation).is_some() || s.is_connected_on(generation))
            .await
            .map(|now| now.session_end(generation));
        match seen {
            Ok(None) => Ok(()),
            Ok(Some(end)) => Err(end),
            Err(_) => Err(SessionEnd::Closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn event(state: ConnectionState, generation: u64) -> ConnectionStateEvent {
        ConnectionStateEvent { state, session_id: 1, generation, new_session: false, at: Instant::now(), seq: 1 }
    }

    #[test]
    fn the_table_of_ends() {
        use ConnectionState::*;
        assert_eq!(event(Connected, 1).session_end(1), None);
        assert_eq!(event(Suspended, 1).session_end(1), None, "a suspension is a policy's matter");
        assert_eq!(event(Latent, 0).session_end(1), None, "generation 0 is no session");
        assert_eq!(event(Lost, 1).session_end(1), Some(SessionEnd::Lost));
        assert_eq!(event(Closed, 1).session_end(1), Some(SessionEnd::Closed));
        assert_eq!(event(Reconnected, 2).session_end(1), Some(SessionEnd::Replaced));
        assert_eq!(event(Closed, 2).session_end(1), Some(SessionEnd::Replaced));
        assert_eq!(event(Reconnected, 1).session_end(2), None, "an older session's event says nothing of a later one");
        assert!(event(Reconnected, 1).is_connected_on(1));
        assert!(!event(Reconnected, 2).is_connected_on(1));
        assert!(!event(Suspended, 1).is_connected_on(1));
    }

    #[tokio::test]
    async fn the_future_follows_the_watch() {
        let (tx, rx) = watch::channel(event(ConnectionState::Connected, 1));
        let mut life = SessionLiveness::new(1, rx);
        assert_eq!(life.end(), None);
        assert_eq!(life.connected().await, Ok(()));
        tx.send_replace(event(ConnectionState::Suspended, 1));
        let waiting = tokio::spawn({
            let mut life = life.clone();
            async move { life.ended().await }
        });
        tx.send_replace(event(ConnectionState::Reconnected, 2));
        assert_eq!(waiting.await.ok(), Some(SessionEnd::Replaced));
        assert_eq!(life.connected().await, Err(SessionEnd::Replaced));
        drop(tx);
        let mut gone = SessionLiveness::new(3, watch::channel(event(ConnectionState::Connected, 3)).1);
        assert_eq!(gone.ended().await, SessionEnd::Closed, "a dropped framework ends its session");
    }
}
