//! The run loop of a started [`LeaderSelector`](super::LeaderSelector): its turns in line and
//! its terms (the state machine of the parent module's docs).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use curator_core::Readiness;
use curator_core::RetryLoop;
use curator_core::{ConnectionState, CuratorError, CuratorFramework};
use futures::FutureExt;
use tokio::sync::watch;

use super::{SelectorEvent, Shared, State, TermEnd};
use crate::leader::first_step::{ready_once_in_line, refuse_first};
use crate::leader::leadership::Leadership;
use crate::leader::rejoin::Rejoin;
use crate::sequential::{Hold, NodeKind, Predicate};

/// How a turn in line ended.
enum Turn {
    /// Granted: a term begins with this leadership.
    Lead(Leadership),
    /// The acquire failed and the selector is idle now.
    GaveUp,
    /// Closing, or the framework closed.
    Stop,
}

impl Shared {
    /// Queued: acquire until granted, closing, or an error that ends the turn. The first outcome
    /// of the start goes to `readiness` (see [`LeaderSelector::ready`](super::LeaderSelector::ready)).
    async fn take_turn(&self, state: &mut watch::Receiver<State>, readiness: &Readiness) -> Turn {
        let fw = self.framework();
        let mut rejoin = Rejoin::new(fw);
        loop {
            let acquire = self.group.acquire_reporting(
                self.id.as_bytes(),
                NodeKind::Sequential,
                Predicate::Leader,
                self.ours.clone(),
            );
            let acquire = ready_once_in_line(acquire, &self.ours, readiness);
            let outcome = tokio::select! {
                // Dropping the acquire deletes whatever node it made (in the background).
                _ = stop_asked(state, false) => return Turn::Stop,
                outcome = acquire => outcome,
            };
            let err = match outcome {
                Ok(granted) => {
                    readiness.ready();
                    let leadership = Leadership::new(Hold::new(fw, granted), self.id.clone());
                    return Turn::Lead(leadership);
                }
                Err(_) if fw.is_closed() => return Turn::Stop,
                Err(err) => err,
            };
            if err.is_permanent() && !readiness.is_reported() {
                // Told to the unhandled-error listeners; closes the selector, and `ready` says why.
                refuse_first(fw, readiness, ("leader selector", self.group.base_path(), &*self.id), err);
                return Turn::Stop;
            }
            // Failed in a way worth trying again, or left to the error listeners: `ready` need
            // not wait.
            readiness.ready();
            if !err.is_retryable() && !self.auto_requeue() {
                fw.report_unhandled(
                    &format!("leader selector {}: could not get in line", self.group.base_path()),
                    &err,
                );
                let mut idle = false;
                self.state.send_if_modified(|s| {
                    idle = matches!(s, State::Queued);
                    if idle {
                        *s = State::Idle;
                    }
                    idle
                });
                return if idle { Turn::GaveUp } else { Turn::Stop };
            }
            tokio::select! {
                _ = stop_asked(state, false) => return Turn::Stop,
                () = rejoin.wait(fw, self.group.base_path(), &err) => {}
            }
        }
    }

    /// Leading: runs the function until the term ends, and says why; `true` with it when the
    /// term failed (the function panicked: logged and counted in
    /// [`LEADER_TERM_FAILURES`](curator_core::metrics::LEADER_TERM_FAILURES)).
    async fn lead(&self, leadership: &Leadership, state: &mut watch::Receiver<State>) -> (TermEnd, bool) {
        let failed = || {
            tracing::error!(path = %leadership.path(), "the leadership function panicked");
            curator_core::metrics::leader_term_failed(self.group.recipe());
            (TermEnd::Returned, true)
        };
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| (self.leader)(leadership.clone())));
        let Ok(work) = started else {
            return failed();
        };
        tokio::select! {
            // In this order: a term that may be lost ends as lost even if the function is done.
            biased;
            reason = leadership.lost() => (TermEnd::Lost(reason), false),
            _ = stop_asked(state, true) => (TermEnd::Interrupted, false),
            done = AssertUnwindSafe(work).catch_unwind() => match done {
                Ok(()) => (TermEnd::Returned, false),
                Err(_) => failed(),
            },
        }
    }

    /// After a term: the state moves on, the listeners are told, then our node goes. True when
    /// auto-requeue put the selector back in line.
    async fn end_term(&self, leadership: Leadership, end: TermEnd) -> bool {
        let requeue = self.auto_requeue();
        let mut requeued = false;
        self.state.send_if_modified(|s| {
            let leading = matches!(s, State::Leading { .. });
            if leading {
                *s = if requeue { State::Queued } else { State::Idle };
                requeued = requeue;
            }
            leading
        });
        let token = leadership.fencing_token();
        match end {
            TermEnd::Lost(_) => tracing::warn!(path = %leadership.path(), token, %end, "leadership ended"),
            _ => tracing::debug!(path = %leadership.path(), token, %end, "leadership ended"),
        }
        self.events.publish(SelectorEvent::Ended { token, end });
        self.release(leadership, matches!(end, TermEnd::Lost(_))).await;
        requeued
    }

    /// After a failed term that auto-requeue put back in line: waits the framework retry
    /// policy's next pause (`failures` holds the streak of failed terms), or, when the policy
    /// gives up, reports it and leaves the selector idle with a fresh streak, so that a
    /// `requeue()` gets the whole policy again. False when closing or the framework closed.
    async fn back_off(&self, failures: &mut RetryLoop, state: &mut watch::Receiver<State>) -> bool {
        let fw = self.framework();
        let path = self.group.base_path();
        if failures.retries() == 0 {
            // The streak's time (the policy's `elapsed`) counts from its first failure.
            failures.reset();
        }
        let Some(pause) = failures.next_pause_after_failure() else {
            if fw.is_closed() {
                return false;
            }
            failures.reset();
            let gave_up = CuratorError::GaveUp {
                path: path.to_string(),
                reason: "the leadership function failed in every term, and the retry policy gave up on it: \
                         not back in line until requeue()",
            };
            fw.report_unhandled(&format!("leader selector {path}: not requeued"), &gave_up);
            self.state.send_if_modified(|s| {
                let queued = matches!(s, State::Queued);
                if queued {
                    *s = State::Idle;
                }
                queued
            });
            return true;
        };
        tracing::warn!(path = %path, ?pause, failed_terms = failures.retries(), "the leadership function failed; back in line after a pause");
        tokio::select! {
            _ = stop_asked(state, false) => false,
            _ = framework_closed(fw) => false,
            () = tokio::time::sleep(pause) => true,
        }
    }

    /// Deletes our node (a guaranteed delete): awaited, or in the background when the term was
    /// lost (the connection may be down; the next turn waits for it anyway).
    async fn release(&self, leadership: Leadership, background: bool) {
        let hold = leadership.hold().clone();
        if background {
            hold.release_in_background();
        } else {
            hold.release_or_report().await;
        }
    }
}

/// Resolves once the selector is asked to stop: closing, or (when `interrupt`) the running term
/// was interrupted.
async fn stop_asked(state: &mut watch::Receiver<State>, interrupt: bool) {
    let _ = state
        .wait_for(|s| match s {
            State::Closing | State::Ended => true,
            State::Leading { interrupted, .. } => interrupt && *interrupted,
            _ => false,
        })
        .await;
}

/// Resolves once the framework is closed.
async fn framework_closed(fw: &CuratorFramework) {
    let mut connection = fw.connection_state_watch();
    let _ = connection.wait_for(|event| event.state == ConnectionState::Closed).await;
}

/// The run loop of one started selector (see the module docs).
pub(super) async fn run(shared: Arc<Shared>, readiness: Readiness) {
    let mut state = shared.state.subscribe();
    let path = shared.group.base_path().to_string();
    // The streak of failed terms, paced by the framework's retry policy.
    let mut failures = shared.framework().retry_loop();
    loop {
        // Idle until queued (start, requeue, auto-requeue) or closing.
        let queued = tokio::select! {
            wanted = state.wait_for(|s| matches!(s, State::Queued | State::Closing | State::Ended)) => {
                matches!(wanted.as_deref(), Ok(State::Queued))
            }
            _ = framework_closed(shared.framework()) => false,
        };
        if !queued {
            break;
        }
        let leadership = match shared.take_turn(&mut state, &readiness).await {
            Turn::Lead(leadership) => leadership,
            Turn::GaveUp => continue,
            Turn::Stop => break,
        };
        if let Some(reason) = leadership.hold().lost_reason() {
            tracing::info!(path = %leadership.path(), %reason, "granted, but already lost: staying in line");
            shared.release(leadership, true).await;
            continue;
        }
        let mut leading = false;
        shared.state.send_if_modified(|s| {
            leading = matches!(s, State::Queued);
            if leading {
                *s = State::Leading { leadership: leadership.clone(), interrupted: false };
            }
            leading
        });
        if !leading {
            // Closing since the grant: no term.
            shared.release(leadership, false).await;
            break;
        }
        tracing::debug!(path = %leadership.path(), token = leadership.fencing_token(), "leadership taken");
        shared.events.publish(SelectorEvent::Took(leadership.clone()));
        let (end, failed) = shared.lead(&leadership, &mut state).await;
        let requeued = shared.end_term(leadership, end).await;
        if !failed {
            // A term that ended normally: in line again at once (when requeued).
            failures.reset();
        } else if requeued && !shared.back_off(&mut failures, &mut state).await {
            break;
        }
    }
    shared.state.send_replace(State::Ended);
    // The run loop ended before a first outcome (the framework closed): nothing to wait for.
    readiness.ready();
    shared.events.close();
    tracing::debug!(path = %path, "leader selector closed");
}
