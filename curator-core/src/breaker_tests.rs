//! The circuit's state machine, driven by hand: Curator's TestCircuitBreaker and
//! TestCircuitBreakingConnectionStateListener, with the checks run when due instead of on a
//! scheduler (the tests of the timed listener are in `tests/tests/framework_circuit_breaker.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Circuit, CircuitBreaker, Step};
use crate::retry::{RetryForever, RetryNTimes, RetryOneTime, RetryPolicy, RetryUntilElapsed};
use crate::state::{ConnectionState, ConnectionStateEvent};
use ConnectionState::{Closed, Lost, ReadOnly, Reconnected, Suspended};

const SLEEP: Duration = Duration::from_millis(250);

fn event(state: ConnectionState, generation: u64) -> ConnectionStateEvent {
    ConnectionStateEvent { state, session_id: 1, generation, new_session: false, at: std::time::Instant::now(), seq: 0 }
}

/// A circuit, the time, the check due and what the listener was given.
struct Driver {
    circuit: Circuit,
    now: Instant,
    due: Option<(u64, Duration)>,
    given: Vec<ConnectionStateEvent>,
}

impl Driver {
    fn new(policy: impl RetryPolicy + 'static) -> Self {
        Self { circuit: Circuit::new(Arc::new(policy)), now: Instant::now(), due: None, given: Vec::new() }
    }

    fn take(&mut self, step: Step) {
        self.given.extend(step.forward);
        if step.check.is_some() {
            self.due = step.check;
        }
    }

    fn feed(&mut self, state: ConnectionState) {
        self.feed_event(event(state, 1));
    }

    fn feed_event(&mut self, e: ConnectionStateEvent) {
        let step = self.circuit.on_event(e, self.now);
        self.take(step);
    }

    /// Runs the check due, after its wait; false if none was due.
    fn fire(&mut self) -> bool {
        let Some((opening, wait)) = self.due.take() else { return false };
        self.now += wait;
        let step = self.circuit.check(opening, self.now);
        self.take(step);
        true
    }

    /// The states given since the last call.
    fn given(&mut self) -> Vec<ConnectionState> {
        self.given.drain(..).map(|e| e.state).collect()
    }
}

/// Curator's TestRetryPolicy: forever, until told to stop.
#[derive(Debug)]
struct Switchable(Arc<AtomicBool>);

impl RetryPolicy for Switchable {
    fn allow_retry(&self, _retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        self.0.load(Ordering::SeqCst).then_some(SLEEP)
    }
}

/// Curator's TestCircuitBreaker.testBasic.
#[test]
fn breaker_opens_once_and_counts_its_retries() {
    let now = Instant::now();
    let mut breaker = CircuitBreaker::new(Arc::new(RetryNTimes::new(1, Duration::from_secs(10))));
    assert_eq!(breaker.try_to_open(now), Some(Duration::from_secs(10)), "the first wait is the policy's first sleep");
    assert_eq!(breaker.try_to_open(now), None, "already open");
    assert_eq!(breaker.retry_count(), 1);
    assert_eq!(breaker.try_to_retry(now), None, "one retry only");
    assert_eq!(breaker.retry_count(), 1);
    assert!(breaker.close());
    assert_eq!(breaker.retry_count(), 0);
    assert!(!breaker.close(), "closed already");
}

/// Curator's TestCircuitBreaker.testVariousOpenRetryFails.
#[test]
fn breaker_retries_only_while_open() {
    let now = Instant::now();
    let mut breaker = CircuitBreaker::new(Arc::new(RetryForever::new(Duration::from_millis(1))));
    assert_eq!(breaker.try_to_retry(now), None, "closed: no retry");
    assert!(breaker.try_to_open(now).is_some());
    assert!(breaker.try_to_open(now).is_none());
    assert!(breaker.close());
    assert!(!breaker.close());
}

/// Curator's TestCircuitBreaker.testWithRetryUntilElapsed, and the time since opening given to
/// the policy.
#[test]
fn breaker_gives_the_policy_the_time_since_it_opened() {
    let now = Instant::now();
    let ten = Duration::from_secs(10);
    let mut breaker = CircuitBreaker::new(Arc::new(RetryUntilElapsed::new(ten, ten)));
    assert_eq!(breaker.try_to_open(now), Some(ten));
    assert_eq!(breaker.try_to_retry(now + Duration::from_secs(5)), Some(ten));
    assert_eq!(breaker.try_to_retry(now + Duration::from_secs(11)), None, "past the policy's time");
}

/// A policy that allows no wait never opens the circuit.
#[test]
fn breaker_that_may_not_wait_stays_closed() {
    let mut breaker = CircuitBreaker::new(Arc::new(RetryNTimes::new(0, SLEEP)));
    assert_eq!(breaker.try_to_open(Instant::now()), None);
    assert!(!breaker.is_open());
}

/// Curator's TestCircuitBreakingConnectionStateListener.testBasic.
#[test]
fn circuit_holds_everything_after_the_first_lost_until_the_policy_gives_up() {
    let retrying = Arc::new(AtomicBool::new(true));
    let mut d = Driver::new(Switchable(retrying.clone()));
    d.feed(Reconnected);
    assert_eq!(d.given(), [Reconnected], "closed: passed on");
    d.feed(Suspended);
    assert_eq!(d.given(), [Suspended], "opens the circuit, and is passed on");
    d.feed(Suspended);
    assert_eq!(d.given(), [], "a second Suspended is held");
    d.feed(Lost);
    assert_eq!(d.given(), [Lost], "the first Lost is passed on");
    for state in [ReadOnly, Reconnected, Suspended, Lost, Suspended] {
        d.feed(state);
    }
    assert_eq!(d.given(), [], "all held");
    assert!(d.fire() && d.fire());
    assert_eq!(d.given(), [], "still not connected: the policy is asked again");
    retrying.store(false, Ordering::SeqCst);
    assert!(d.fire());
    assert_eq!(d.given(), [Suspended], "the policy gave up: the latest is passed on");
    assert!(!d.circuit.is_open());
    assert!(!d.fire(), "no check due once closed");
}

/// Curator's TestCircuitBreakingConnectionStateListener.testResetsAfterReconnect.
#[test]
fn circuit_closes_with_the_reconnection_at_its_check() {
    let mut d = Driver::new(Switchable(Arc::new(AtomicBool::new(true))));
    d.feed(Lost);
    d.feed(Lost);
    assert_eq!(d.given(), [Lost], "the second Lost is held");
    d.feed(Reconnected);
    assert_eq!(d.given(), [], "held until the check");
    assert!(d.fire());
    assert_eq!(d.given(), [Reconnected]);
    assert!(!d.circuit.is_open());
}

/// Curator's TestCircuitBreakingConnectionStateListener.testRetryNever.
#[test]
fn circuit_whose_policy_never_waits_passes_everything() {
    let mut d = Driver::new(RetryNTimes::new(0, SLEEP));
    d.feed(Lost);
    assert!(!d.circuit.is_open());
    d.feed(Lost);
    assert!(!d.circuit.is_open());
    assert_eq!(d.given(), [Lost, Lost]);
}

/// Curator's TestCircuitBreakingConnectionStateListener.testRetryOnce.
#[test]
fn circuit_of_one_wait_passes_the_latest_after_it() {
    let mut d = Driver::new(RetryOneTime::new(SLEEP));
    d.feed(Lost);
    d.feed(Suspended);
    assert!(d.circuit.is_open());
    assert_eq!(d.given(), [Lost]);
    assert!(d.fire());
    assert_eq!(d.given(), [Suspended]);
    assert!(!d.circuit.is_open());
}

/// Curator's TestCircuitBreakingConnectionStateListener.testSuspendedToLostRatcheting.
#[test]
fn circuit_passes_one_lost_however_the_connection_flaps() {
    let mut d = Driver::new(RetryForever::new(Duration::from_secs(3600)));
    d.feed(Reconnected);
    assert!(!d.circuit.is_open());
    assert_eq!(d.given(), [Reconnected]);
    d.feed(Suspended);
    assert!(d.circuit.is_open());
    assert_eq!(d.given(), [Suspended]);
    let flap = [Reconnected, ReadOnly, Suspended, Suspended, Suspended, Suspended, Reconnected, ReadOnly, Suspended];
    for state in flap {
        d.feed(state);
    }
    assert_eq!(d.given(), []);
    assert!(d.circuit.is_open());
    d.feed(Lost);
    assert_eq!(d.given(), [Lost]);
    assert!(d.circuit.is_open());
    for state in flap {
        d.feed(state);
    }
    for state in [Suspended, Lost, Lost, Lost, Reconnected, ReadOnly, Lost, Suspended, Lost] {
        d.feed(state);
    }
    assert_eq!(d.given(), [], "no second Lost");
    assert!(d.circuit.is_open());
}

/// Ours: `Closed` is never held, and ends the circuit; a check due before it does nothing.
#[test]
fn circuit_passes_closed_at_once() {
    let mut d = Driver::new(RetryForever::new(SLEEP));
    d.feed(Suspended);
    d.feed(Reconnected);
    d.feed(Closed);
    assert_eq!(d.given(), [Suspended, Closed]);
    assert!(!d.circuit.is_open());
    assert!(d.fire(), "the check of the opening was due");
    assert_eq!(d.given(), [], "and finds the circuit closed");
}

/// Ours: a held reconnection on a later session than the listener knows is a new session to it,
/// even if the session manager saw the flap as a same-session reconnection after another one.
#[test]
fn circuit_marks_a_held_reconnection_on_a_later_session_as_new() {
    let mut d = Driver::new(RetryForever::new(SLEEP));
    d.feed_event(event(Suspended, 1));
    d.feed_event(event(Lost, 1));
    d.feed_event(ConnectionStateEvent { new_session: true, ..event(Reconnected, 2) });
    d.feed_event(event(Suspended, 2));
    d.feed_event(event(Reconnected, 2)); // same session as the one before it: not new
    assert!(d.fire());
    let given: Vec<_> = d.given.drain(..).map(|e| (e.state, e.generation, e.new_session)).collect();
    assert_eq!(given, [(Suspended, 1, false), (Lost, 1, false), (Reconnected, 2, true)]);

    // Back on the session the listener knows: not new.
    d.feed_event(event(Suspended, 2));
    d.feed_event(event(Reconnected, 2));
    assert!(d.fire());
    let given: Vec<_> = d.given.drain(..).map(|e| (e.state, e.new_session)).collect();
    assert_eq!(given, [(Suspended, false), (Reconnected, false)]);
}

/// A check of an earlier opening does nothing to a later one.
#[test]
fn circuit_ignores_a_check_of_an_earlier_opening() {
    let mut d = Driver::new(RetryForever::new(SLEEP));
    d.feed(Suspended);
    let (stale, _) = d.due.expect("a check is due");
    d.feed(Closed);
    d.feed(Suspended);
    d.feed(Reconnected);
    assert_eq!(d.circuit.check(stale, d.now + SLEEP), Step::default(), "not this opening's check");
    assert!(d.circuit.is_open());
    assert!(d.fire());
    assert_eq!(d.given(), [Suspended, Closed, Suspended, Reconnected]);
}

/// A policy whose sleeps are `first`, then `later`.
#[derive(Debug)]
struct Sleeps {
    first: Duration,
    later: Duration,
}

impl RetryPolicy for Sleeps {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        Some(if retry_count == 0 { self.first } else { self.later })
    }
}

/// Issue 40 item 11: a sleep too long for any timer to end (`Duration::MAX`, `u64::MAX` ms)
/// is no wait the circuit can finish, so it is taken as the policy's refusal: the circuit does
/// not open for it, and the recovery reaches the listener at once. Before, the circuit opened
/// for it and held the reconnection for good.
#[test]
fn circuit_takes_a_sleep_too_long_to_end_as_a_refusal() {
    for endless in [Duration::MAX, Duration::from_millis(u64::MAX)] {
        let mut d = Driver::new(RetryNTimes::new(3, endless));
        d.feed(Suspended);
        assert!(!d.circuit.is_open(), "{endless:?}: not opened for a wait that never ends");
        assert!(d.due.is_none(), "{endless:?}: no check due");
        d.feed(Reconnected);
        assert_eq!(d.given(), [Suspended, Reconnected], "{endless:?}");
    }
    // The longest wait that still ends (a year) opens it, as before.
    let mut d = Driver::new(RetryNTimes::new(3, Duration::from_secs(86_400 * 365)));
    d.feed(Suspended);
    assert!(d.circuit.is_open());
    d.feed(Reconnected);
    assert_eq!(d.given(), [Suspended]);
}

/// As above for a later sleep: the circuit closes at the check that would have waited for
/// it, passing the latest transition on.
#[test]
fn circuit_closes_rather_than_wait_for_a_later_sleep_too_long_to_end() {
    let mut d = Driver::new(Sleeps { first: SLEEP, later: Duration::MAX });
    d.feed(Suspended);
    d.feed(Lost);
    d.feed(Reconnected);
    assert!(d.circuit.is_open());
    assert_eq!(d.given(), [Suspended, Lost]);
    d.feed(Suspended);
    assert!(d.fire(), "the first check");
    assert!(!d.circuit.is_open(), "closed rather than wait for ever");
    assert_eq!(d.given(), [Suspended], "the latest, held, passed on at the close");
    assert!(d.due.is_none());
}
