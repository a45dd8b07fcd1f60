//! Removing an item node unconsumed: the id queue's `remove` (Curator's `tryRemove`).
//!
//! ```text
//! plain     : delete(P/n)                                   NoNode: not removed (taken already)
//! lock-safe : create L/n ephemeral     NodeExists: not removed (a consumer has it)
//!             outcome unknown after the retries: L/n deleted if ours, as a take does
//!             fenced multi: check(L/n) + delete(P/n) + delete(L/n)   (module fence)
//! ```
//! In lock-safe mode an item in a consumer's hands is not removed, as in Curator; the fence
//! makes the delete apply only while our lock stands.

use curator_core::{path, CuratorError, Result};

use super::fence::{self, Finish, Outcome};
use super::shared::Shared;
use super::take;

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
    let lock = path::make_path(lock_path, name);
    let locked = match take::lock_item(q, &lock).await {
        Ok(locked) => locked,
        Err(err) => {
            // As a take does; the caller hears of it within a connection timeout.
            if err.outcome_unknown() && !q.fw.is_closed() {
                take::drop_unknown_lock(&q.fw, &lock, tokio::time::sleep(q.fw.connection_timeout())).await;
            }
            return Err(err);
        }
    };
    let Some((generation, _)) = locked else { return Ok(false) };
    match fence::finish(q, name, &lock, generation, Finish::Delete, &[]).await {
        Outcome::Finished => Ok(true),
        Outcome::ItemGone | Outcome::LockLost => Ok(false),
        Outcome::Closed => Err(CuratorError::Closed),
    }
}
