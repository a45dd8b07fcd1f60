//! Revocation (Curator's `Revoker` protocol): someone writes [`REVOKE_MESSAGE`] into a
//! holder's node to ask it to give the hold up; the holder's hook decides.

use std::sync::Arc;
use std::time::Duration;

use curator_core::background::spawn_detached;
use curator_core::zk;

use super::hold::Hold;
use super::names::REVOKE_MESSAGE;

/// What a revocable holder runs when asked to give its hold up.
pub(crate) type RevokeHook = Arc<dyn Fn() + Send + Sync>;

/// How long to wait before reading the node again after a failed read.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Watches a holder's node for [`REVOKE_MESSAGE`] and calls `on_revoke` (on the blocking pool:
/// it is user code) each time it is written, until the hold ends.
pub(crate) fn watch_revocation(hold: &Arc<Hold>, on_revoke: RevokeHook) {
    let weak = Arc::downgrade(hold);
    let mut lost = hold.subscribe();
    let fw = hold.framework().clone();
    let node = hold.node().clone();
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
                    if data == REVOKE_MESSAGE {
                        let f = on_revoke.clone();
                        drop(tokio::task::spawn_blocking(move || f()));
                    }
                    w
                }
                Err(zk::Error::NoNode) => return,
                Err(_) => {
                    tokio::select! {
                        r = lost.changed() => if r.is_err() { return },
                        _ = tokio::time::sleep(RETRY_PAUSE) => {}
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
