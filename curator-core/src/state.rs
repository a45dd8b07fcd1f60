//! Connection states in Curator's vocabulary, and their delivery: a `watch` of the latest, and
//! ordered streams and listeners that receive every transition (none is dropped).
//!
//! | zookeeper-client saw | the framework reports |
//! |---|---|
//! | first connection of the framework | [`ConnectionState::Connected`] |
//! | Disconnected | [`ConnectionState::Suspended`] |
//! | connected again, same session | [`ConnectionState::Reconnected`] |
//! | Expired, or suspended for a whole session timeout | [`ConnectionState::Lost`], then a new session's [`ConnectionState::Reconnected`] with `new_session` set |
//! | connected to a read-only server (when allowed) | [`ConnectionState::ReadOnly`] |

use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::watch;

use crate::listeners::{EventStream, Listeners};

/// The state of the framework's connection to the ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Not yet connected for the first time.
    Latent,
    /// The first successful connection.
    Connected,
    /// The connection is gone; the session may still be alive.
    Suspended,
    /// Connected again after `Suspended` or `Lost`.
    Reconnected,
    /// The session is gone (expired, or presumed so after a whole session timeout without a
    /// connection): its ephemeral nodes are gone and its watches will not fire.
    Lost,
    /// Connected to a read-only server.
    ReadOnly,
    /// The framework was closed.
    Closed,
}

impl ConnectionState {
    /// True for the states in which operations can be sent.
    pub fn is_connected(self) -> bool {
        matches!(self, Self::Connected | Self::Reconnected | Self::ReadOnly)
    }
}

/// Which states mean "what I hold may be gone" to locks and leaders (Curator's
/// `ConnectionStateErrorPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ErrorPolicy {
    /// Suspended and Lost are both errors: give up at the first sign of trouble.
    #[default]
    Standard,
    /// Only Lost is an error: hold on through a suspension, trusting the session to survive.
    Session,
}

impl ErrorPolicy {
    /// Whether `state` counts as an error under this policy.
    pub fn is_error_state(self, state: ConnectionState) -> bool {
        match self {
            Self::Standard => {
                matches!(state, ConnectionState::Suspended | ConnectionState::Lost | ConnectionState::Closed)
            }
            Self::Session => matches!(state, ConnectionState::Lost | ConnectionState::Closed),
        }
    }
}

/// One transition of the connection state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionStateEvent {
    /// The new state.
    pub state: ConnectionState,
    /// The id of the session this state concerns (0 before the first session).
    pub session_id: i64,
    /// The framework's session generation: 1 for the first session, growing with each new one.
    pub generation: u64,
    /// For `Reconnected` (and `Connected`): true when this is a session other than the one before.
    pub new_session: bool,
    /// When the framework saw the transition.
    pub at: Instant,
    /// Position of this transition in the framework's sequence of transitions (1 for the
    /// first): a holder can tell whether anything happened since a given transition.
    pub seq: u64,
}

/// An ordered stream of every connection-state transition after it was made. It ends when the
/// framework is closed (after the transitions already queued).
pub type ConnectionStateStream = EventStream<ConnectionStateEvent>;

/// Fans each transition out to the `watch`, the streams and the listeners.
#[derive(Debug)]
pub(crate) struct StateHub {
    latest: watch::Sender<ConnectionStateEvent>,
    listeners: Listeners<ConnectionStateEvent>,
    /// Numbers and publishes one transition at a time, so that concurrent publishers cannot
    /// reorder them.
    order: Mutex<()>,
}

impl StateHub {
    pub(crate) fn new() -> Self {
        let initial = ConnectionStateEvent {
            state: ConnectionState::Latent,
            session_id: 0,
            generation: 0,
            new_session: false,
            at: Instant::now(),
            seq: 0,
        };
        Self { latest: watch::channel(initial).0, listeners: Listeners::new(), order: Mutex::new(()) }
    }

    pub(crate) fn publish(&self, mut event: ConnectionStateEvent) {
        tracing::info!(state = ?event.state, session = format_args!("{:#x}", event.session_id), generation = event.generation, new_session = event.new_session, "connection state");
        let _order = self.order.lock().unwrap_or_else(|e| e.into_inner());
        let previous_generation = self.latest.borrow().generation;
        event.seq = self.latest.borrow().seq + 1;
        crate::metrics::state_published(&event, previous_generation);
        self.listeners.publish(event.clone());
        self.latest.send_replace(event);
    }

    pub(crate) fn current(&self) -> ConnectionStateEvent {
        self.latest.borrow().clone()
    }

    pub(crate) fn watch(&self) -> watch::Receiver<ConnectionStateEvent> {
        self.latest.subscribe()
    }

    /// The streams and callbacks that receive every transition.
    pub(crate) fn listeners(&self) -> &Listeners<ConnectionStateEvent> {
        &self.listeners
    }

    /// Ends every stream and callback (after the events already queued).
    pub(crate) fn close_streams(&self) {
        self.listeners.close();
    }
}
