//! Guarded transactions: a transaction that the server applies only while a hold (a lock, a
//! lease, a leadership) still holds (docs/architecture.md section 8.7).
//!
//! A hold is an ephemeral node whose name is unique to it. A [`TransactionGuard`] names that
//! node; [`TransactionBuilder::guarded_by`](crate::TransactionBuilder::guarded_by) puts a
//! `check(node, -1)` before the transaction's own operations, in the same multi, so the writes
//! commit only if the node exists when the server applies them: no extra round trip.

use std::sync::Arc;

use crate::error::{CuratorError, Result};
use crate::framework::{CuratorFramework, Session};

/// Something held through an ephemeral node unique to it, which can guard a transaction: the
/// transaction commits only while that node exists, on the session that made it.
///
/// Implemented by curator-recipes' `HeldNode` (every lock guard, semaphore lease and
/// leadership dereferences to one); use its `transaction()`, `set_data()`, `create()` and
/// `delete()`. Implement it for a hold of your own only if its node is ephemeral and its name
/// is never used again by another hold.
pub trait TransactionGuard: Send + Sync + 'static {
    /// The framework the node was created with: the transaction must use the same session and
    /// namespace.
    fn guard_framework(&self) -> &CuratorFramework;

    /// The node's path, relative to [`guard_framework`](Self::guard_framework)'s namespace.
    fn guard_path(&self) -> &str;

    /// The session generation (see [`Session::generation`]) the node was created on: the
    /// transaction is sent on that session only.
    fn guard_generation(&self) -> u64;

    /// `Ok` while the hold may still hold, as far as the client knows; otherwise the error to
    /// fail with, before anything is sent. Costs no request.
    fn guard_held(&self) -> Result<()>;

    /// The hold is gone: the server refused the check (the node no longer exists), or the
    /// session is no longer the node's (`session_changed`). Marks the hold lost and returns the
    /// error the transaction fails with.
    fn guard_refused(&self, session_changed: bool) -> CuratorError;
}

/// A transaction's guard, shared by clones of its builder.
#[derive(Clone)]
pub(crate) struct Guard(pub(crate) Arc<dyn TransactionGuard>);

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("path", &self.0.guard_path())
            .field("generation", &self.0.guard_generation())
            .finish()
    }
}

impl Guard {
    /// The guard's node.
    pub(crate) fn path(&self) -> &str {
        self.0.guard_path()
    }

    /// Refuses a guard whose node the builder's framework `fw` cannot check: another
    /// framework's (another session), or one under another namespace.
    pub(crate) fn check_framework(&self, fw: &CuratorFramework) -> Result<()> {
        let own = self.0.guard_framework();
        if own.same_connection(fw) && own.namespace() == fw.namespace() {
            return Ok(());
        }
        Err(CuratorError::InvalidArgument {
            path: self.path().to_string(),
            reason: "the guard's hold belongs to another framework or namespace: build the transaction from the \
                     hold's own framework (for a recipe's hold, its transaction())"
                .into(),
        })
    }

    /// Whether the hold still holds as far as it knows, without a session: a hold already known
    /// lost refuses before the transaction waits for a connection (nothing is sent).
    pub(crate) fn held(&self) -> Result<()> {
        self.0.guard_held()
    }

    /// Before an attempt on `session`: the hold must still hold, and the session must be the
    /// one its node lives on (a node of an earlier session is gone with it).
    pub(crate) fn before_attempt(&self, session: &Session) -> Result<()> {
        self.0.guard_held()?;
        if !session.is_generation(self.0.guard_generation()) {
            return Err(self.0.guard_refused(true));
        }
        Ok(())
    }

    /// The server refused the check.
    pub(crate) fn refused(&self) -> CuratorError {
        self.0.guard_refused(false)
    }
}
