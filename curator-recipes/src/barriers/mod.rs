//! Barriers: their guide is the crate root's "Barriers" section (lib.rs).

mod barrier;
mod double_barrier;

pub use barrier::DistributedBarrier;
pub use double_barrier::DistributedDoubleBarrier;

use curator_core::{ConnectionState, ConnectionStateEvent, CuratorError, CuratorFramework, ErrorPolicy, Result};
use tokio::sync::watch;

/// Records how the barrier call `call` (`wait`, `enter`, `leave`) ended:
/// `Ok(true)` passed, `Ok(false)` timed out, `Err` failed
/// ([`BARRIER_WAITS`](curator_core::metrics::BARRIER_WAITS)).
fn record_wait(call: &'static str, ended: &Result<bool>) {
    use curator_core::metrics::{barrier_waited, BarrierOutcome};
    let outcome = match ended {
        Ok(true) => BarrierOutcome::Passed,
        Ok(false) => BarrierOutcome::TimedOut,
        Err(_) => BarrierOutcome::Failed,
    };
    barrier_waited(call, outcome);
}

/// What a connection-state transition means to a barrier call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transition {
    /// Nothing that matters (or nothing at all): go on.
    None,
    /// Connected again, or on a new session that holds nothing of ours: check the barrier again.
    Recheck,
    /// Disconnected, and the call rides it out: wait for the next transition.
    Suspended,
}

/// The framework's connection as one barrier call sees it: which transitions end the call and
/// which only call for a new check. It reads the framework's `connection_state_watch` and
/// notices a transition it did not see (a suspension between two reads) by the sequence number.
///
/// The rules (docs/architecture.md, 16.3 "Barriers"):
/// - `Closed` ends the call with [`CuratorError::Closed`].
/// - Under [`ErrorPolicy::Standard`] a suspension or loss of the session ends the call with
///   [`CuratorError::ConnectionLoss`] (or `SessionExpired`), as Curator's double barrier throws
///   `ConnectionLossException` once its watcher has seen the connection go.
/// - Under [`ErrorPolicy::Session`] a suspension is ridden out; the end of the session that holds
///   our node (`Lost`, or a newer session) ends the call with `SessionExpired`. Without a node
///   of ours, a new session only calls for a new check.
/// - With `policy` `None` (the single barrier, which holds nothing), every transition only calls
///   for a new check.
struct Connection {
    states: watch::Receiver<ConnectionStateEvent>,
    policy: Option<ErrorPolicy>,
    seen_seq: u64,
    path: String,
}

impl Connection {
    /// Starts following `fw`'s connection for a call on `path`; transitions made before now are
    /// not the call's concern.
    fn new(fw: &CuratorFramework, policy: Option<ErrorPolicy>, path: &str) -> Self {
        let mut states = fw.connection_state_watch();
        let seen_seq = states.borrow_and_update().seq;
        Self { states, policy, seen_seq, path: path.to_string() }
    }

    /// Takes in a transition made since the last look, without waiting. `node` is the session
    /// generation our node was created on, if we hold one now.
    fn check(&mut self, node: Option<u64>) -> Result<Transition> {
        match self.states.has_changed() {
            Ok(true) => self.take(node),
            Ok(false) => Ok(Transition::None),
            Err(_) => Err(CuratorError::Closed),
        }
    }

    /// Waits for the next transition that calls for a new check of the barrier (or ends the
    /// call); a suspension the policy rides out is waited through.
    async fn recheck_needed(&mut self, node: Option<u64>) -> Result<()> {
        loop {
            if self.states.changed().await.is_err() {
                return Err(CuratorError::Closed);
            }
            if self.take(node)? == Transition::Recheck {
                return Ok(());
            }
        }
    }

    fn take(&mut self, node: Option<u64>) -> Result<Transition> {
        let now = self.states.borrow_and_update().clone();
        // A jump of more than one transition hides at least one: between two connected states
        // there is always a suspension (or a loss).
        let missed = now.seq > self.seen_seq + 1;
        self.seen_seq = now.seq;
        let other_session = |g: u64| now.is_later_session(g);
        tracing::debug!(path = %self.path, state = ?now.state, generation = now.generation, missed, "connection state changed during a barrier call");
        if now.state == ConnectionState::Closed {
            return Err(CuratorError::Closed);
        }
        let expired = || CuratorError::SessionExpired { path: self.path.clone() };
        let cut = |what: &str| CuratorError::ConnectionLoss {
            path: self.path.clone(),
            detail: format!("{what} during a barrier call (error policy Standard)"),
        };
        match self.policy {
            None => Ok(if now.state.is_connected() || now.state == ConnectionState::Lost {
                Transition::Recheck
            } else {
                Transition::Suspended
            }),
            Some(ErrorPolicy::Session) => match now.state {
                ConnectionState::Lost if node.is_some() => Err(expired()),
                _ if node.is_some_and(other_session) => Err(expired()),
                state if state.is_connected() => Ok(Transition::Recheck),
                _ => Ok(Transition::Suspended),
            },
            // Standard, and a policy added to curator-core later: the strictest reading until it
            // is handled here.
            Some(_) => match now.state {
                ConnectionState::Lost => Err(expired()),
                _ if node.is_some_and(other_session) => Err(expired()),
                ConnectionState::Suspended => Err(cut("the connection was suspended")),
                _ if missed => Err(cut("the connection was suspended")),
                _ => Ok(Transition::Recheck),
            },
        }
    }
}
