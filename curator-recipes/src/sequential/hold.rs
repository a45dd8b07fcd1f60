//! Hold liveness: once a node holds, [`Hold`] tells when that hold may be lost ([`LockLost`]),
//! judging the connection state ([`judge`]) and, on demand, watching the node ([`monitor`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use curator_core::let_fire;
use curator_core::spawn_detached;
use curator_core::zk;
use curator_core::{
    ConnectionState, ConnectionStateEvent, CuratorError, CuratorFramework, ErrorPolicy, Result, SessionEnd,
};
use curator_core::{ExponentialBackoffForever, RetryLoop};
use tokio::sync::watch;

use super::acquire::{Granted, NodeWatch};
use super::node::LockNode;

/// The monitor's pauses before trying again to watch the node when it could not: 50 ms,
/// doubling up to 200 ms, for as long as the hold lasts (a connection change cuts a pause short).
pub(crate) const REARM_BACKOFF: ExponentialBackoffForever =
    ExponentialBackoffForever::new(Duration::from_millis(50), Duration::from_millis(200));

/// Why a held lock may no longer be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockLost {
    /// The connection was suspended (an error under [`ErrorPolicy::Standard`]): another client
    /// may hold the lock once our session expires.
    Suspended,
    /// The session that owns our node is gone, and the node with it.
    SessionLost,
    /// Our node was deleted by someone else.
    NodeDeleted,
    /// The framework was closed.
    Closed,
    /// We released the lock.
    Released,
}

impl LockLost {
    /// The `reason` label value of `curator_lock_lost_total` (`None` for a release).
    fn metric_label(self) -> Option<&'static str> {
        match self {
            LockLost::Suspended => Some("suspended"),
            LockLost::SessionLost => Some("session_lost"),
            LockLost::NodeDeleted => Some("node_deleted"),
            LockLost::Closed => Some("closed"),
            LockLost::Released => None,
        }
    }
}

impl std::fmt::Display for LockLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            LockLost::Suspended => "the connection was suspended",
            LockLost::SessionLost => "the session was lost",
            LockLost::NodeDeleted => "the lock node was deleted",
            LockLost::Closed => "the framework was closed",
            LockLost::Released => "the lock was released",
        };
        f.write_str(text)
    }
}

/// Whether the connection event `now`, seen after `at_hold`, means the lock may be lost.
pub(crate) fn judge(
    policy: ErrorPolicy,
    generation: u64,
    at_hold: &ConnectionStateEvent,
    now: &ConnectionStateEvent,
) -> Option<LockLost> {
    // The session's end, read as every holder reads it (curator_core::liveness).
    match now.session_end(generation) {
        Some(SessionEnd::Closed) => return Some(LockLost::Closed),
        Some(_) => return Some(LockLost::SessionLost),
        None => {}
    }
    match now.state {
        ConnectionState::Suspended if policy == ErrorPolicy::Standard => Some(LockLost::Suspended),
        // Every transition after a connected hold passed through a suspension.
        _ if policy == ErrorPolicy::Standard && now.seq != at_hold.seq => Some(LockLost::Suspended),
        _ if now.new_session && now.seq != at_hold.seq => Some(LockLost::SessionLost),
        _ => None,
    }
}

/// One hold of one node, shared by the guards of a reentrant handle.
pub(crate) struct Hold {
    fw: CuratorFramework,
    node: LockNode,
    at_hold: ConnectionStateEvent,
    lost: watch::Sender<Option<LockLost>>,
    monitoring: AtomicBool,
    /// The watch on our node armed by the acquire, if any: the monitor starts with it.
    armed: std::sync::Mutex<Option<NodeWatch>>,
    /// The `recipe` label of the hold's metrics, and when it was granted.
    recipe: &'static str,
    granted_at: Instant,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold").field("node", &self.node).field("lost", &*self.lost.borrow()).finish_non_exhaustive()
    }
}

impl Hold {
    /// The hold of a granted node, which holds as of now.
    pub(crate) fn new(fw: &CuratorFramework, granted: Granted) -> Arc<Self> {
        let at_hold = fw.connection_state_watch().borrow().clone();
        let hold = Arc::new(Self {
            fw: fw.clone(),
            node: granted.node,
            at_hold,
            lost: watch::channel(None).0,
            monitoring: AtomicBool::new(false),
            armed: std::sync::Mutex::new(granted.watch),
            recipe: granted.recipe,
            granted_at: Instant::now(),
        });
        hold.check_connection();
        hold
    }

    /// The held node.
    pub(crate) fn node(&self) -> &LockNode {
        &self.node
    }

    /// The framework the node was created with.
    pub(crate) fn framework(&self) -> &CuratorFramework {
        &self.fw
    }

    /// The `recipe` label of the hold's metrics.
    pub(crate) fn recipe(&self) -> &'static str {
        self.recipe
    }

    /// A receiver of the lost reason, without starting the monitor.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<LockLost>> {
        self.lost.subscribe()
    }

    fn mark(&self, reason: LockLost) {
        self.lost.send_if_modified(|slot| {
            if slot.is_none() {
                if reason == LockLost::Released {
                    tracing::debug!(path = %self.node.path, "hold ended: released");
                } else {
                    tracing::warn!(path = %self.node.path, %reason, "lock may be lost");
                }
                *slot = Some(reason);
                curator_core::metrics::hold_ended(self.recipe, self.granted_at, reason.metric_label());
                true
            } else {
                false
            }
        });
    }

    fn check_connection(&self) {
        let now = self.fw.connection_state_watch().borrow().clone();
        if let Some(reason) = judge(self.fw.error_policy(), self.node.generation, &self.at_hold, &now) {
            self.mark(reason);
        }
    }

    /// Why the hold may be lost, or `None` while it holds (judging the connection now).
    pub(crate) fn lost_reason(&self) -> Option<LockLost> {
        self.check_connection();
        *self.lost.borrow()
    }

    /// A guarded write found the hold gone: the server refused its check (our node no longer
    /// exists), or the session is no longer the node's (`session_changed`). Marks the hold lost
    /// as the monitor would, and returns why it ended (the first reason marked wins).
    pub(crate) fn refused(&self, session_changed: bool) -> LockLost {
        self.check_connection();
        let reason = if self.fw.is_closed() {
            LockLost::Closed
        } else if session_changed {
            LockLost::SessionLost
        } else {
            LockLost::NodeDeleted
        };
        self.mark(reason);
        (*self.lost.borrow()).unwrap_or(reason)
    }

    /// Whether the hold still holds.
    pub(crate) fn is_held(&self) -> bool {
        self.lost_reason().is_none()
    }

    /// A receiver that turns `Some` when the lock may be lost; starts the monitor (one watch on
    /// our node, and the connection state) on first use.
    pub(crate) fn lost_watch(self: &Arc<Self>) -> watch::Receiver<Option<LockLost>> {
        if !self.monitoring.swap(true, Ordering::AcqRel) {
            let weak = Arc::downgrade(self);
            let rx = self.lost.subscribe();
            let armed = self.armed.lock().unwrap_or_else(|e| e.into_inner()).take();
            // Untracked: the monitor ends by itself once the hold ends or the framework closes.
            spawn_detached(monitor(weak, rx, self.fw.clone(), self.node.clone(), self.at_hold.clone(), armed));
        }
        self.lost.subscribe()
    }

    /// Resolves when the hold may be lost, with the reason; starts the monitor as
    /// [`lost_watch`](Self::lost_watch) does. Guards and leases answer `lost()` with this.
    pub(crate) async fn lost(self: &Arc<Self>) -> LockLost {
        let mut rx = self.lost_watch();
        loop {
            if let Some(reason) = *rx.borrow_and_update() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return LockLost::Released;
            }
        }
    }

    /// Deletes our node (guaranteed: continues in the background after a connection loss).
    pub(crate) async fn release(&self) -> Result<()> {
        // A loss nobody asked about yet ends the hold as a loss, not as a release.
        self.check_connection();
        self.mark(LockLost::Released);
        // The acquire's watch on our node, if the monitor never took it over.
        let armed = self.armed.lock().unwrap_or_else(|e| e.into_inner()).take();
        tracing::debug!(path = %self.node.path, "delete (release)");
        match self.fw.delete().guaranteed().quietly().for_path(&self.node.path).await {
            Ok(()) => {
                if let Some(watch) = armed {
                    // Fired already: the server sends the event before the delete's reply.
                    // Dropped unfired, it would cost a RemoveWatches request per release.
                    let_fire(watch).await;
                }
                // The delete's reply and its notification to a waiter of this session came
                // together, and tokio runs the task woken last (ours) first: a caller that
                // acquires again at once would send its create before that waiter's listing,
                // which the server then answers only after the create is written. Yielding
                // once lets the waiter go first (docs/architecture.md section 8.3, "A release
                // yields once").
                tokio::task::yield_now().await;
                Ok(())
            }
            Err(CuratorError::Closed) => Ok(()),
            Err(e) if e.outcome_unknown() => {
                // The guaranteed delete continues in the background; a lost session took the
                // node anyway.
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// As [`release`](Self::release), for a caller with no one to give the error to: it goes to
    /// the framework's unhandled-error listeners.
    pub(crate) async fn release_or_report(&self) {
        if let Err(err) = self.release().await {
            self.fw.report_unhandled(&format!("could not delete recipe node {}", self.node.path), &err);
        }
    }

    /// Releases in the background (a guard dropped without `release`).
    pub(crate) fn release_in_background(self: Arc<Self>) {
        self.check_connection();
        self.mark(LockLost::Released);
        let fw = self.fw.clone();
        fw.spawn_background(async move { self.release_or_report().await });
    }
}

/// Watches the connection and our node until the lock is lost or released.
async fn monitor(
    hold: Weak<Hold>,
    mut lost: watch::Receiver<Option<LockLost>>,
    fw: CuratorFramework,
    node: LockNode,
    at_hold: ConnectionStateEvent,
    mut armed: Option<NodeWatch>,
) {
    let mut conn = fw.connection_state_watch();
    let policy = fw.error_policy();
    let mut rearm = RetryLoop::new(Arc::new(REARM_BACKOFF), Some(&fw));
    let mark = |reason| {
        if let Some(h) = hold.upgrade() {
            h.mark(reason)
        }
    };
    // Our own close() ends the session, which deletes our node: that is the close's doing.
    let node_gone = || if fw.is_closed() { LockLost::Closed } else { LockLost::NodeDeleted };
    loop {
        if lost.borrow_and_update().is_some() {
            return;
        }
        let now = conn.borrow_and_update().clone();
        if let Some(reason) = judge(policy, node.generation, &at_hold, &now) {
            mark(reason);
            return;
        }
        // Arm a watch on our node, on its own session (unless the acquire armed one).
        let watcher: Option<NodeWatch> = if let Some(w) = armed.take() {
            Some(w)
        } else if now.state.is_connected() {
            // Raced against the connection state and the hold's end: a request sent on a
            // connection that has just gone silent is answered only when the client gives up on
            // it (7/5 of the session timeout), after the framework may have declared the session
            // lost; the monitor must see that declaration when it comes.
            let arm = async {
                match fw.session().await {
                    Ok(s) if !s.is_generation(node.generation) => Err(LockLost::SessionLost),
                    Ok(s) => {
                        tracing::debug!(path = %node.path, "exists+watch (lock monitor)");
                        match s.client().check_and_watch_stat(&node.path).await {
                            Ok((None, _)) => Err(node_gone()),
                            Ok((Some(_), w)) => {
                                let w: NodeWatch = Box::pin(w.changed());
                                Ok(Some(w))
                            }
                            Err(_) => Ok(None),
                        }
                    }
                    Err(CuratorError::Closed) => Err(LockLost::Closed),
                    Err(_) => Ok(None),
                }
            };
            tokio::select! {
                armed = arm => match armed {
                    Ok(w) => {
                        if w.is_some() {
                            rearm.reset();
                        }
                        w
                    }
                    Err(reason) => {
                        mark(reason);
                        return;
                    }
                },
                r = conn.changed() => {
                    if r.is_err() {
                        mark(LockLost::Closed);
                        return;
                    }
                    continue;
                }
                r = lost.changed() => {
                    if r.is_err() {
                        return;
                    }
                    continue;
                }
            }
        } else {
            None
        };
        match watcher {
            Some(mut w) => {
                tokio::select! {
                    r = lost.changed() => {
                        let released = r.is_ok() && *lost.borrow() == Some(LockLost::Released);
                        if released {
                            // Our delete is on its way: let it fire the watch.
                            let_fire(w).await;
                            return;
                        }
                        if r.is_err() {
                            return;
                        }
                    }
                    r = conn.changed() => if r.is_err() { mark(LockLost::Closed); return },
                    ev = &mut w => {
                        if ev.event_type == zk::EventType::NodeDeleted {
                            mark(node_gone());
                            return;
                        }
                    }
                }
            }
            None => {
                // The one retry loop paces the next try (it gives up only once the framework is
                // closed, which the next turn sees).
                let pause = rearm.next_pause_after_failure().unwrap_or(Duration::ZERO);
                tokio::select! {
                    r = lost.changed() => if r.is_err() { return },
                    r = conn.changed() => if r.is_err() { mark(LockLost::Closed); return },
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}
