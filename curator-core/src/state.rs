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

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;

use crate::breaking_listener::CircuitBreakingConnectionStateListener;
pub use crate::connection_state::{ConnectionState, ConnectionStateEvent, ConnectionStateStream, ErrorPolicy};
use crate::listeners::Listeners;
use crate::retry::RetryPolicy;

/// Fans each transition out to the `watch`, the streams and the listeners.
#[derive(Debug)]
pub(crate) struct StateHub {
    latest: watch::Sender<ConnectionStateEvent>,
    listeners: Arc<Listeners<ConnectionStateEvent>>,
    /// With a circuit breaker (docs/architecture.md section 3.9): the streams and listeners are
    /// given what it passes on; the `watch` is still given every transition.
    breaker: Option<CircuitBreakingConnectionStateListener>,
    /// Numbers and publishes one transition at a time, so that concurrent publishers cannot
    /// reorder them.
    order: Mutex<()>,
    /// The `framework` label of the connection-state gauge.
    metrics_name: Arc<str>,
}

impl StateHub {
    /// A hub at `Latent`, whose transitions the gauge shows under `metrics_name`; its streams
    /// and listeners behind a circuit timed by `breaker`, if given.
    pub(crate) fn new(metrics_name: Arc<str>, breaker: Option<Arc<dyn RetryPolicy>>) -> Self {
        let initial = ConnectionStateEvent {
            state: ConnectionState::Latent,
            session_id: 0,
            generation: 0,
            new_session: false,
            at: Instant::now(),
            seq: 0,
        };
        let listeners = Arc::new(Listeners::new());
        let breaker = breaker.map(|policy| {
            let out = listeners.clone();
            CircuitBreakingConnectionStateListener::unstarted(
                policy,
                Arc::new(move |event: &ConnectionStateEvent| out.publish(event.clone())),
            )
        });
        Self { latest: watch::channel(initial).0, listeners, breaker, order: Mutex::new(()), metrics_name }
    }

    /// Starts the listeners' drain tasks, and the circuit's checks, on `handle`.
    pub(crate) fn start(&self, handle: tokio::runtime::Handle) {
        if let Some(breaker) = &self.breaker {
            breaker.start(handle.clone());
        }
        self.listeners.start(handle);
    }

    pub(crate) fn publish(&self, mut event: ConnectionStateEvent) {
        tracing::info!(state = ?event.state, session = format_args!("{:#x}", event.session_id), generation = event.generation, new_session = event.new_session, "connection state");
        let _order = self.order.lock().unwrap_or_else(|e| e.into_inner());
        let previous_generation = self.latest.borrow().generation;
        event.seq = self.latest.borrow().seq + 1;
        crate::metrics::state_published(&self.metrics_name, &event, previous_generation);
        match &self.breaker {
            Some(breaker) => breaker.state_changed(&event),
            None => self.listeners.publish(event.clone()),
        }
        // The session's truth, never held back: locks, leaders and liveness read it.
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
