//! The session manager: one task per framework that owns the current ZooKeeper client
//! (docs/architecture.md section 3.1).
//!
//! ```text
//!   connect ──► Live ──Disconnected──► Suspended ──SyncConnected──► Live (Reconnected, same session)
//!                 ▲        │               │
//!                 │        │               ├─ Expired / Closed / AuthFailed ───────────┐
//!                 │        └───────────────┴─ no reply for LOST_AFTER of the timeout ──┤
//!                 └──────────────── new session (Reconnected, new_session) ◄── Lost ◄──┘
//! ```
//!
//! This file holds the loop; each step is a file of its own:
//!
//! 1. `connect`: open a session, backing off between failed attempts, and record why an
//!    attempt failed (section 3.1);
//! 2. `events`: set up the session's event stream before anyone is told it is connected, and
//!    the probes that show the server still hears us (sections 3.2 and 3.3);
//! 3. publish the session: fill the framework's session slot and publish `Connected`,
//!    `Reconnected` (a new session) or `ReadOnly`;
//! 4. `follow`: turn the session's events into connection states until it is lost, presumed
//!    lost (section 3.2), or must move;
//! 5. `moves`: move a live session to a client on the new servers of the ensemble, and go back
//!    to 4 (section 3.7);
//! 6. on loss, `close`: close the abandoned session if a server may still take it; then empty
//!    the slot, publish `Lost` and go back to 1. `close` also ends the session the manager holds
//!    when the framework stops, and is what the framework's `close()` ends its session with
//!    (sections 3.2 and 3.7).
//!
//! The manager writes what it shares with the framework (the session slot, the states, the
//! failures) through module `shared`, and never holds the framework itself: it finds the shared
//! state gone once every handle of the framework is dropped.

use std::sync::Weak;
use std::time::Instant;

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::ensemble::Tracker;
use crate::shared::Shared;
use crate::state::{ConnectionState, ErrorPolicy};

mod close;
mod connect;
mod events;
mod follow;
mod moves;

pub(crate) use close::{end_attached, Closer};
use connect::connect;
use events::SessionEvents;
use follow::End;
use moves::Moved;

/// A path nobody creates, under ZooKeeper's reserved `/zookeeper`: a persistent watch on it
/// receives nothing but session events, in order.
pub const SESSION_EVENTS_PATH: &str = "/zookeeper/curator-rs-session-events";

/// The session manager's own state, which its steps share.
struct Manager {
    /// What it shares with the framework; gone once every handle of the framework is dropped.
    shared: Weak<Shared>,
    /// True once `close()` is about to end the session; the sender goes with the framework.
    shutdown: watch::Receiver<bool>,
    /// Whether the framework's clients are detached (the ensemble tracker is on): their
    /// sessions are then ended with `closer`.
    detached: bool,
    /// What closes sessions on the server, built once with the framework's options: for the
    /// sessions of detached clients, and under `ErrorPolicy::Session` to ask, after a
    /// disconnection, whether the session still lives (module `close`). The framework's options
    /// may be gone before this task ends.
    closer: Option<Closer>,
}

/// A client with its session, as the manager follows it.
struct Opened {
    client: zk::Client,
    /// The connect string it was opened with.
    servers: String,
    /// When its first request was sent: the answer proves the server heard us after then.
    asked: Instant,
    events: SessionEvents,
    /// The ensemble tracker of the session's current follow (`Manager::follow`), kept here so
    /// that it outlives a shutdown (see [`Leftover`]).
    tracker: Option<Tracker>,
}

/// What the manager held on the session when the framework's `close()` stopped it: watches
/// whose drop would send RemoveWatches while the client lives. `close()` drops it after the
/// session ended, when nothing is sent (the server drops a closed session's watches itself):
/// otherwise every close sent one RemoveWatches per watch just ahead of its CloseSession.
#[derive(Default)]
pub(crate) struct Leftover {
    _events: Option<SessionEvents>,
    _tracker: Option<Tracker>,
}

/// The session manager's task: runs until the framework shuts down, or until every handle of
/// the framework is dropped.
pub(crate) async fn run(shared: Weak<Shared>, shutdown: watch::Receiver<bool>) -> Leftover {
    let Some(strong) = shared.upgrade() else { return Leftover::default() };
    let config = &strong.config;
    let detached = config.ensemble.enabled();
    let closer = (detached || config.error_policy == ErrorPolicy::Session)
        .then(|| {
            Closer::new(config)
                .inspect_err(|err| tracing::warn!(error = %err, "no closer: detached sessions expire on the server, and a disconnection is not checked at once"))
                .ok()
        })
        .flatten();
    drop(strong);
    Manager { shared, shutdown, detached, closer }.run().await
}

impl Manager {
    async fn run(mut self) -> Leftover {
        let mut generation = 0u64;
        loop {
            let Some((client, servers)) = connect(&self.shared, &mut self.shutdown, None).await else {
                return Leftover::default();
            };
            // The answer to the first request of the session proves the server heard us after now.
            let asked = Instant::now();
            let Some(events) = SessionEvents::new(&client).await else { continue };
            let mut opened = Opened { client, servers, asked, events, tracker: None };
            generation += 1;
            let Some(strong) = self.shared.upgrade() else {
                self.abandon(opened.client, true).await;
                return Leftover::default();
            };
            strong.set_live(opened.client.clone(), generation);
            let state = if opened.client.state() == zk::SessionState::ConnectedReadOnly {
                ConnectionState::ReadOnly
            } else if generation == 1 {
                ConnectionState::Connected
            } else {
                ConnectionState::Reconnected
            };
            strong.publish(state, opened.client.session_id().0, generation, generation > 1);
            drop(strong);
            // The session that is over, and (if a server may still take it) what closes it.
            let (session, alive) = loop {
                let (heard, suspended) = match self.follow(&mut opened, generation).await {
                    End::Shutdown => {
                        let Opened { client, events, tracker, .. } = opened;
                        self.abandon(client, true).await;
                        return Leftover { _events: Some(events), _tracker: tracker };
                    }
                    End::Lost => {
                        let client = &opened.client;
                        let alive = (!client.state().is_terminated()).then(|| client.session().clone());
                        break (client.session_id().0, alive);
                    }
                    End::Move { heard, suspended } => (heard, suspended),
                };
                match self.move_session(opened, heard, suspended, generation).await {
                    Moved::To(next) => opened = next,
                    Moved::Lost(session, alive) => break (session, alive),
                    // Never published, so close() does not know of it: end it here either way.
                    Moved::Shutdown(Some(client)) => {
                        self.abandon(client, false).await;
                        return Leftover::default();
                    }
                    Moved::Shutdown(None) => return Leftover::default(),
                }
            };
            self.close_lost(alive);
            let Some(strong) = self.shared.upgrade() else { return Leftover::default() };
            strong.set_empty();
            strong.publish(ConnectionState::Lost, session, generation, false);
        }
    }
}
