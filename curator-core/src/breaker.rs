//! The state machine of circuit-breaking connection-state listeners (docs/architecture.md
//! section 3.9): [`CircuitBreaker`], open or closed with its retries counted against a
//! [`RetryPolicy`], and [`Circuit`], which decides which transitions a listener behind it is
//! given and when. Both are plain data, driven by the caller with the time; the timers and the
//! listener are [`CircuitBreakingConnectionStateListener`]'s.
//!
//! [`CircuitBreakingConnectionStateListener`]: crate::CircuitBreakingConnectionStateListener

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::retry::deadline::never_ends;
use crate::retry::RetryPolicy;
use crate::state::{ConnectionState, ConnectionStateEvent};

/// Curator's `CircuitBreaker`: open or closed; while open, the checks made so far are counted
/// as retries of `policy`, whose sleeps are the waits between checks.
#[derive(Debug)]
pub(crate) struct CircuitBreaker {
    policy: Arc<dyn RetryPolicy>,
    open: bool,
    retry_count: u32,
    opened_at: Option<Instant>,
}

impl CircuitBreaker {
    /// A closed breaker timed by `policy`.
    pub(crate) fn new(policy: Arc<dyn RetryPolicy>) -> Self {
        Self { policy, open: false, retry_count: 0, opened_at: None }
    }

    /// Whether the circuit is open.
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// The retries allowed since the circuit opened.
    pub(crate) fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// Opens a closed circuit: the wait before its first check. `None` when it was open
    /// already, or when the policy allows no retry at all (the circuit then stays closed).
    pub(crate) fn try_to_open(&mut self, now: Instant) -> Option<Duration> {
        if self.open {
            return None;
        }
        self.open = true;
        self.retry_count = 0;
        self.opened_at = Some(now);
        let first = self.try_to_retry(now);
        if first.is_none() {
            self.close();
        }
        first
    }

    /// One more wait while open, if the policy allows it (counted as a retry). `None` when
    /// closed or when the policy says no more. A sleep that never ends (`Duration::MAX`,
    /// `u64::MAX` ms: [`never_ends`]) counts as a refusal: a circuit waiting for it would hold
    /// the listener's view for good, whatever the connection does.
    pub(crate) fn try_to_retry(&mut self, now: Instant) -> Option<Duration> {
        if !self.open {
            return None;
        }
        let elapsed = self.opened_at.map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        let wait = self.policy.allow_retry(self.retry_count, elapsed)?;
        if never_ends(wait) {
            tracing::debug!(?wait, "connection-state circuit: a sleep that never ends is taken as a refusal");
            return None;
        }
        self.retry_count += 1;
        Some(wait)
    }

    /// Closes the circuit and forgets its retries; whether it was open.
    pub(crate) fn close(&mut self) -> bool {
        let was_open = self.open;
        self.open = false;
        self.retry_count = 0;
        self.opened_at = None;
        was_open
    }
}

/// What the circuit does after a transition or a check: the event to give the listener now, if
/// any, and when to check next, if a check is due (with the opening it belongs to).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Step {
    /// The event for the listener, now.
    pub(crate) forward: Option<ConnectionStateEvent>,
    /// Check again after this long, with [`Circuit::check`] and this opening.
    pub(crate) check: Option<(u64, Duration)>,
}

/// Curator's `CircuitBreakingConnectionStateListener`, without its listener and its timer.
///
/// Closed, every transition is passed on; a transition to a state that is not connected is
/// passed on and opens the circuit. Open, transitions are held (only the latest is kept),
/// except the first `Lost`, which is passed on at once. At each check (after the policy's
/// sleep): connected (or nothing held), the circuit closes; else the policy is asked for
/// another wait; when it refuses, the circuit closes. Closing passes the held transition on
/// unless its state is the one passed on last. `Closed` always passes, and resets the circuit.
#[derive(Debug)]
pub(crate) struct Circuit {
    breaker: CircuitBreaker,
    lost_sent: bool,
    /// The state passed on last while open (the one that opened it, or `Lost`).
    initial: Option<ConnectionState>,
    /// The latest transition seen while open.
    last: Option<ConnectionStateEvent>,
    /// The generation of the last event passed on.
    passed_generation: u64,
    /// Counts the openings: a check due for an earlier opening does nothing.
    opening: u64,
}

impl Circuit {
    /// A closed circuit timed by `policy`.
    pub(crate) fn new(policy: Arc<dyn RetryPolicy>) -> Self {
        Self {
            breaker: CircuitBreaker::new(policy),
            lost_sent: false,
            initial: None,
            last: None,
            passed_generation: 0,
            opening: 0,
        }
    }

    /// Whether the circuit is open.
    pub(crate) fn is_open(&self) -> bool {
        self.breaker.is_open()
    }

    /// A transition, at `now`.
    pub(crate) fn on_event(&mut self, event: ConnectionStateEvent, now: Instant) -> Step {
        if event.state == ConnectionState::Closed {
            // The end: nothing is held back any longer.
            self.reset();
            return Step { forward: Some(self.pass(event)), check: None };
        }
        if self.breaker.is_open() {
            return self.on_open(event);
        }
        let mut check = None;
        if !event.state.is_connected() {
            match self.breaker.try_to_open(now) {
                Some(wait) => {
                    self.opening += 1;
                    tracing::info!(state = ?event.state, ?wait, "connection-state circuit opens");
                    self.initial = Some(event.state);
                    self.lost_sent = event.state == ConnectionState::Lost;
                    self.last = Some(event.clone());
                    check = Some((self.opening, wait));
                }
                None => {
                    tracing::debug!(state = ?event.state, "connection-state circuit cannot open: the policy allows no wait")
                }
            }
        }
        Step { forward: Some(self.pass(event)), check }
    }

    fn on_open(&mut self, event: ConnectionStateEvent) -> Step {
        if self.lost_sent || event.state != ConnectionState::Lost {
            tracing::debug!(state = ?event.state, "connection-state circuit open: transition held");
            self.last = Some(event);
            return Step::default();
        }
        tracing::debug!("connection-state circuit open: the first Lost is passed on");
        self.lost_sent = true;
        self.initial = Some(ConnectionState::Lost);
        self.last = Some(event.clone());
        Step { forward: Some(self.pass(event)), check: None }
    }

    /// The check due for `opening`, at `now`.
    pub(crate) fn check(&mut self, opening: u64, now: Instant) -> Step {
        if opening != self.opening || !self.breaker.is_open() {
            return Step::default();
        }
        if self.last.as_ref().is_none_or(|e| e.state.is_connected()) {
            tracing::info!(initial = ?self.initial, last = ?self.last.as_ref().map(|e| e.state), "connection-state circuit closes: connected");
            return self.close_circuit();
        }
        if let Some(wait) = self.breaker.try_to_retry(now) {
            tracing::debug!(retries = self.breaker.retry_count(), ?wait, "connection-state circuit stays open");
            return Step { forward: None, check: Some((opening, wait)) };
        }
        tracing::info!(initial = ?self.initial, last = ?self.last.as_ref().map(|e| e.state), "connection-state circuit closes: the policy allows no more waits");
        self.close_circuit()
    }

    fn close_circuit(&mut self) -> Step {
        let last = self.last.take();
        let initial = self.initial.take();
        self.reset();
        let forward = last.filter(|e| Some(e.state) != initial).map(|mut held| {
            // `new_session` is relative to what the listener was given last: a held
            // reconnection on a session after the one it knows is new to it.
            if held.state.is_connected() && held.generation != self.passed_generation {
                held.new_session = true;
            }
            self.pass(held)
        });
        Step { forward, check: None }
    }

    /// Closes the circuit, forgetting what it held.
    pub(crate) fn reset(&mut self) {
        self.last = None;
        self.initial = None;
        self.lost_sent = false;
        self.breaker.close();
    }

    fn pass(&mut self, event: ConnectionStateEvent) -> ConnectionStateEvent {
        self.passed_generation = event.generation;
        event
    }
}

#[cfg(test)]
#[path = "breaker_tests.rs"]
mod tests;
