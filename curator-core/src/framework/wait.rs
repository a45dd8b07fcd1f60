//! How an operation waits for a connected session (docs/architecture.md section 3.4).

use super::{CuratorFramework, Session, SessionSlot};
use crate::error::{CuratorError, Result};

impl CuratorFramework {
    /// Waits for a live, connected session: up to the connection timeout, or the task's
    /// [deadline](crate::retry::deadline) if earlier; past the connection timeout, while a
    /// session is being opened and no attempt has failed yet, until that session is up, at
    /// most the session timeout from now (as Curator's ZooKeeper handle holds a request).
    pub(super) async fn live_session(&self, op_path: &str) -> Result<Session> {
        let mut rx = self.inner.session.subscribe();
        let connected = self.inner.hub.watch();
        let mut fatal = self.inner.fatal.subscribe();
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
        // Under a deadline (module `retry::deadline`) the wait ends at the earlier of the two.
        // A connection timeout too large to add to now (`Duration::MAX`) waits without end.
        let config = &self.inner.config;
        let now = tokio::time::Instant::now();
        let task_deadline = crate::retry::deadline::current();
        let limit = now.checked_add(config.connection_timeout);
        let deadline = task_deadline.filter(|d| limit.is_none_or(|l| *d < l));
        let Some(until) = deadline.or(limit) else { return wait.await };
        tokio::pin!(wait);
        match tokio::time::timeout_at(until, &mut wait).await {
            Ok(r) => return r,
            Err(_) if deadline.is_some() => return Err(crate::retry::deadline::timeout(op_path)),
            Err(_) => {}
        }
        // Past the connection timeout, a request made while a session is being opened (the
        // first, or the next after a loss) and no attempt has failed yet is held, as Curator's
        // ZooKeeper handle holds it, until that session is up, at most the session timeout from
        // when it was made: the bound of the attempt itself (section 3.4).
        let opening = matches!(*self.inner.session.borrow(), SessionSlot::Empty)
            && self.inner.last_connect_error.lock().unwrap_or_else(|e| e.into_inner()).is_none();
        let held = now.checked_add(config.session_timeout).filter(|held| opening && *held > until);
        if let Some(held) = held {
            let deadline = task_deadline.filter(|d| *d < held);
            match tokio::time::timeout_at(deadline.unwrap_or(held), &mut wait).await {
                Ok(r) => return r,
                Err(_) if deadline.is_some() => return Err(crate::retry::deadline::timeout(op_path)),
                Err(_) => {}
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
