//! Removing an item node unconsumed: the id queue's `remove` (Curator's `tryRemove`).
//!
//! ```text
//! plain     : delete(P/n)                                   NoNode: not removed (taken already)
//!             its reply lost: OutcomeUnknown (the core never sends it again, section 4.4)
//! lock-safe : the core's create of L/n, ephemeral, with this remove's id (module lock)
//!             NodeExists: not removed (a consumer has it); its outcome unknown: decided as a
//!             take does
//!             fenced multi through the core: [check(L/n)] + delete(P/n) + delete(L/n) + [the
//!             handle's write tag] (module fence); its reply lost: decided by the tag (applied:
//!             removed); OutcomeUnknown only if the tag cannot tell
//! ```
//! In lock-safe mode an item in a consumer's hands is not removed, as in Curator; the fence
//! makes the delete apply only while our lock stands. `Ok(false)` is said only of an item that
//! this call did not delete; one it may have deleted is an error whose `outcome_unknown()`
//! holds.

use curator_core::{path, CuratorError, Result};

use super::fence::{self, Finish, Outcome};
use super::lock::{self, LockFailed, LockNode};
use super::shared::Shared;

/// The names of the queue's item nodes now (none if the queue's path is missing).
pub(crate) async fn children<T: Send + Sync + 'static>(q: &Shared<T>) -> Result<Vec<String>> {
    tracing::debug!(path = %q.path, "queue: getChildren");
    match q.fw.get_children().for_path(&q.path).await {
        Ok(names) => Ok(names),
        Err(CuratorError::NoNode { .. }) => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// Deletes the item node `name` unless a consumer has it: whether we deleted it.
pub(crate) async fn try_remove<T: Send + Sync + 'static>(q: &Shared<T>, name: &str) -> Result<bool> {
    let item = path::make_path(&q.path, name);
    let Some(lock_path) = &q.lock_path else {
        tracing::debug!(path = %item, "queue: delete (remove)");
        return match q.fw.delete().for_path(&item).await {
            Ok(()) => Ok(true),
            Err(CuratorError::NoNode { .. }) => Ok(false),
            Err(err) => Err(err),
        };
    };
    let lock = LockNode::new(path::make_path(lock_path, name));
    let held = match lock::lock_item(&q.fw, &lock).await {
        Ok(Some(held)) => held,
        Ok(None) => return Ok(false),
        Err(LockFailed { error, in_doubt }) => {
            // As a take does; the caller hears of it within a connection timeout.
            if in_doubt && !q.fw.is_closed() {
                lock::drop_unknown_lock(&q.fw, &lock, tokio::time::sleep(q.fw.connection_timeout())).await;
            }
            return Err(error);
        }
    };
    match fence::finish(q, name, &lock, held.generation, Finish::Delete, &[]).await {
        Outcome::Finished => Ok(true),
        Outcome::ItemGone | Outcome::LockLost => Ok(false),
        Outcome::Unknown(error) | Outcome::Failed(error) => Err(error),
        Outcome::Closed => Err(CuratorError::Closed),
    }
}
