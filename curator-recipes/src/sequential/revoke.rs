//! Revocation (Curator's `Revoker` protocol): someone writes [`REVOKE_MESSAGE`] into a
//! holder's node to ask it to give the hold up; the holder's hook decides.

use std::sync::Arc;

use curator_core::spawn_detached;
use curator_core::zk;
use curator_core::Listeners;
use curator_core::RetryLoop;

use super::hold::{Hold, REARM_BACKOFF};
use super::names::REVOKE_MESSAGE;

/// What a revocable holder runs when asked to give its hold up.
pub(crate) type RevokeHook = Arc<dyn Fn() + Send + Sync>;

/// Watches a holder's node for [`REVOKE_MESSAGE`] and calls `on_revoke` each time it is
/// written, until the hold ends. The hook is user code: it runs through the framework's one
/// listener queue (on the blocking pool, in order, a panic logged). A failed read is tried again
/// under the one retry loop, with the lock monitor's backoff.
pub(crate) fn watch_revocation(hold: &Arc<Hold>, on_revoke: RevokeHook) {
    let weak = Arc::downgrade(hold);
    let mut lost = hold.subscribe();
    let fw = hold.framework().clone();
    let node = hold.node().clone();
    let hooks: Listeners<()> = Listeners::new();
    hooks.add_callback(Arc::new(move |_: &()| on_revoke()));
    hooks.start_here();
    let mut retry = RetryLoop::new(Arc::new(REARM_BACKOFF), Some(&fw));
    // Untracked: it ends with the hold, its node or its session.
    spawn_detached(async move {
        loop {
            if lost.borrow_and_update().is_some() || weak.upgrade().is_none() {
                return;
            }
            let session = match fw.session().await {
                Ok(s) if s.is_generation(node.generation) => s,
                _ => return,
            };
            tracing::debug!(path = %node.path, "getData+watch (revocation)");
            let watcher = match session.client().get_and_watch_data(&node.path).await {
                Ok((data, _, w)) => {
                    retry.reset();
                    // The Revoker writes through the fluent set_data: compared decoded (section 3.10).
                    if fw.decode_data(&node.path, data).is_ok_and(|data| data == REVOKE_MESSAGE) {
                        hooks.publish(());
                    }
                    w
                }
                Err(zk::Error::NoNode) => return,
                Err(_) => {
                    let Some(pause) = retry.next_pause_after_failure() else { return };
                    tokio::select! {
                        r = lost.changed() => if r.is_err() { return },
                        _ = tokio::time::sleep(pause) => {}
                    }
                    continue;
                }
            };
            tokio::select! {
                r = lost.changed() => if r.is_err() { return },
                ev = watcher.changed() => if ev.event_type == zk::EventType::NodeDeleted { return },
            }
        }
    });
}
