//! How an operation waits for a connected session (docs/architecture.md section 3.4).

use std::future::Future;
use std::pin::Pin;

use tokio::time::Instant;

use super::{CuratorFramework, Session};
use crate::error::{CuratorError, Result};
use crate::shared::SessionSlot;

impl CuratorFramework {
    /// Waits for a live, connected session: up to the connection timeout, or the task's
    /// [deadline](crate::retry::deadline) if earlier; past the connection timeout, while a
    /// session is being opened and no attempt has failed yet, until that session is up, at
    /// most the session timeout from now (as Curator's ZooKeeper handle holds a request).
    pub(super) async fn live_session(&self, op_path: &str) -> Result<Session> {
        let shared = &self.inner.shared;
        let mut rx = shared.session();
        let connected = shared.hub.watch();
        let mut fatal = shared.fatal();
        let wait = async {
            loop {
                match &*rx.borrow_and_update() {
                    SessionSlot::Closed => return Err(CuratorError::Closed),
                    SessionSlot::Live(s) if connected.borrow().state.is_connected() => return Ok(s.clone()),
                    _ => {}
                }
                if let Some(err) = fatal.borrow_and_update().clone() {
                    return Err(err);
                }
                let mut connected = connected.clone();
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return Err(CuratorError::Closed) },
                    r = connected.changed() => if r.is_err() { return Err(CuratorError::Closed) },
                    r = fatal.changed() => if r.is_err() { return Err(CuratorError::Closed) },
                }
            }
        };
        // While closing, background work (guaranteed deletes) may still finish: the slot says
        // Closed once the session is gone.
        self.check_started()?;
        // First bound: the connection timeout. A connection timeout too large to add to now
        // (`Duration::MAX`) waits without end.
        let config = &shared.config;
        let now = tokio::time::Instant::now();
        let task_deadline = crate::retry::deadline::current();
        let limit = now.checked_add(config.connection_timeout);
        tokio::pin!(wait);
        if let Some(r) = within(wait.as_mut(), limit, task_deadline, op_path).await {
            return r;
        }
        // Second bound: past the connection timeout, a request made while a session is being
        // opened (the first, or the next after a loss) and no attempt has failed yet is held, as
        // Curator's ZooKeeper handle holds it, until that session is up, at most the session
        // timeout from when it was made: the bound of the attempt itself (section 3.4).
        let opening = shared.is_opening();
        let held = now.checked_add(config.session_timeout).filter(|held| opening && limit.is_some_and(|l| *held > l));
        if let Some(held) = held {
            if let Some(r) = within(wait.as_mut(), Some(held), task_deadline, op_path).await {
                return r;
            }
        }
        let opened = if held.is_some() {
            format!(", nor a session opened within the session timeout ({:?})", config.session_timeout)
        } else {
            String::new()
        };
        Err(CuratorError::NotConnected {
            detail: format!(
                "no connection to {} within the connection timeout ({:?}){opened} for {op_path:?}",
                config.ensemble.current(),
                config.connection_timeout
            ),
        })
    }
}

/// Runs `wait` until `bound` (none: without end) or, if earlier, the task's deadline (module
/// `retry::deadline`): its result, the deadline's [`Timeout`](CuratorError::Timeout) if that came
/// first, or `None` once `bound` passed. The one place the wait checks the deadline.
async fn within<T>(
    wait: Pin<&mut impl Future<Output = Result<T>>>,
    bound: Option<Instant>,
    task_deadline: Option<Instant>,
    op_path: &str,
) -> Option<Result<T>> {
    let deadline = task_deadline.filter(|d| bound.is_none_or(|b| *d < b));
    let Some(until) = deadline.or(bound) else { return Some(wait.await) };
    match tokio::time::timeout_at(until, wait).await {
        Ok(r) => Some(r),
        Err(_) if deadline.is_some() => Some(Err(crate::retry::deadline::timeout(op_path))),
        Err(_) => None,
    }
}
