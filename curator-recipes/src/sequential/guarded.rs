//! Guarded writes: a [`HeldNode`] guards a transaction (curator-core's [`TransactionGuard`]),
//! so that its writes commit only while the hold's node exists (docs/architecture.md
//! section 8.7).

use std::sync::Arc;

use curator_core::{
    zk, CreateMode, CuratorError, CuratorFramework, Result, TransactionBuilder, TransactionGuard, TransactionResult,
};

use super::held::HeldNode;
use super::hold::LockLost;

impl HeldNode {
    /// The error for a hold that ended for `reason`; `what` says what became of the write.
    fn ended(&self, reason: LockLost, what: &str) -> CuratorError {
        match reason {
            LockLost::Released => CuratorError::NotHeld { path: self.path().to_string(), what: "the hold" },
            reason => CuratorError::OwnNodeLost { path: self.path().to_string(), reason: format!("{reason}: {what}") },
        }
    }

    /// A transaction on the hold's framework, guarded by this hold: it commits only while the
    /// hold's node exists, on the session that made it. The server checks that in the same
    /// multi (`check(node, -1)` first: one round trip, as an unguarded transaction), so a
    /// holder whose session was closed from outside, or whose node was deleted, cannot write,
    /// even before it learns that it lost the hold.
    ///
    /// Fails with [`CuratorError::OwnNodeLost`] (the hold's node path) when the hold may be
    /// lost: known before sending (nothing sent: [`is_held`](Self::is_held) is false), or
    /// refused by the server (nothing written; the hold then reports lost, as
    /// [`lost`](Self::lost) says). After a release it fails with [`CuratorError::NotHeld`]
    /// (nothing sent). A write whose reply was lost is never sent again on a guess: it fails
    /// with [`CuratorError::OutcomeUnknown`] (it may have been applied while the hold held),
    /// under either error policy, unless the transaction carries a
    /// [`WriteTag`](curator_core::WriteTag)
    /// ([`with_write_tag`](curator_core::TransactionBuilder::with_write_tag)), which then
    /// decides exactly (docs/architecture.md section 4.4). The results are those of the
    /// operations added, without the guard's check. See [`TransactionBuilder::guarded_by`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::{CreateMode, CuratorError};
    /// use curator_recipes::{HeldNode, InterProcessMutex};
    ///
    /// fw.create().for_path("/config", b"v1".to_vec()).await?;
    /// let guard = InterProcessMutex::new(&fw, "/config-lock")?.acquire().await?;
    /// // One write: applied only while the lock is held.
    /// guard.set_data("/config", b"v2".to_vec()).await?;
    /// // Several, all or none, and only while the lock is held.
    /// guard
    ///     .transaction()
    ///     .set_data("/config", b"v3".to_vec(), None)
    ///     .create("/config-history", b"v2".to_vec(), CreateMode::Persistent)
    ///     .commit()
    ///     .await?;
    /// let held = HeldNode::clone(&guard);
    /// guard.release().await?;
    /// // Once given back, the hold guards nothing: nothing is sent.
    /// let refused = held.set_data("/config", b"v4".to_vec()).await;
    /// assert!(matches!(refused, Err(CuratorError::NotHeld { .. })));
    /// assert_eq!(fw.get_data().for_path("/config").await?, b"v3");
    /// # Ok(()) }
    /// ```
    pub fn transaction(&self) -> TransactionBuilder {
        self.hold().framework().transaction().guarded_by(Arc::new(self.clone()))
    }

    /// Writes `data` to `path` (any version) only while the hold holds: a guarded
    /// [`transaction`](Self::transaction) of one `set_data`. Resolves to the node's new stat.
    pub async fn set_data(&self, path: &str, data: impl Into<Vec<u8>>) -> Result<zk::Stat> {
        match self.only_result(self.transaction().set_data(path, data, None)).await? {
            TransactionResult::SetData { stat, .. } => Ok(stat),
            other => Err(unexpected(path, other)),
        }
    }

    /// Creates `path` with `data` in `mode` only while the hold holds: a guarded
    /// [`transaction`](Self::transaction) of one create (no TTL modes, no missing parents made).
    /// Resolves to the path created (with its sequence number, for a sequential mode).
    pub async fn create(&self, path: &str, data: impl Into<Vec<u8>>, mode: CreateMode) -> Result<String> {
        match self.only_result(self.transaction().create(path, data, mode)).await? {
            TransactionResult::Create { path } => Ok(path),
            other => Err(unexpected(path, other)),
        }
    }

    /// Deletes `path` (any version) only while the hold holds: a guarded
    /// [`transaction`](Self::transaction) of one delete.
    pub async fn delete(&self, path: &str) -> Result<()> {
        match self.only_result(self.transaction().delete(path, None)).await? {
            TransactionResult::Delete { .. } => Ok(()),
            other => Err(unexpected(path, other)),
        }
    }

    /// Commits a guarded transaction of one operation and returns its one result.
    async fn only_result(&self, transaction: TransactionBuilder) -> Result<TransactionResult> {
        let mut results = transaction.commit().await?;
        match (results.pop(), results.is_empty()) {
            (Some(result), true) => Ok(result),
            _ => {
                Err(CuratorError::IllegalState(format!("a guarded write by {} had other than one result", self.path())))
            }
        }
    }
}

/// A result of another kind than the operation sent.
fn unexpected(path: &str, result: TransactionResult) -> CuratorError {
    CuratorError::IllegalState(format!("a guarded write of {path:?} had the result {result:?}"))
}

impl TransactionGuard for HeldNode {
    fn guard_framework(&self) -> &CuratorFramework {
        self.hold().framework()
    }

    fn guard_path(&self) -> &str {
        self.path()
    }

    fn guard_generation(&self) -> u64 {
        self.node().generation
    }

    fn guard_held(&self) -> Result<()> {
        match self.hold().lost_reason() {
            None => Ok(()),
            Some(reason) => Err(self.ended(reason, "the guarded write was not sent")),
        }
    }

    fn guard_refused(&self, session_changed: bool) -> CuratorError {
        let reason = self.hold().refused(session_changed);
        self.ended(reason, "the hold's node is gone, so the guarded write was refused and nothing was written")
    }
}
