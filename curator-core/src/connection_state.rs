//! The connection-state types (re-exported by module [`state`](crate::state), which documents
//! them): on their own so that the metrics, which name the states, and the state hub, which
//! records its transitions in the metrics, do not import each other.

use std::time::Instant;

use crate::listeners::EventStream;

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
