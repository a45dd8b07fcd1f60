//! Sending a validated transaction, and deciding one whose reply was lost by its evidence
//! (docs/architecture.md section 4.4).
//!
//! ```text
//! commit():      write_with_retry: attempt ─► lost reply ─► decide (on the next session) ─► ..
//! commit_once(): one attempt ─► lost reply ─► decide under the cleanup loop (until known or
//!                closed): applied ─► Ok; not ─► the attempt's connection error; else Unknown
//! attempt: the guard's session first; the multi [guard check?, ops.., tag op?]
//!          the tag's op refused: nothing written; the tag is read again (commit() sends at once,
//!          once more; commit_once() returns the tag's error)
//! decide, by the transaction's evidence:
//!   a write tag   ─► the tag's version (write_tag.rs)
//!   unique data   ─► the node holds the data: applied; still the node found, at its version: not
//!   a node deleted, by its czxid ─► still there: not applied; gone: unknown
//!   none          ─► unknown
//!   applied ─► the results read back by the transaction's zxid (rebuild.rs)
//! ```

use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;
use zookeeper_client as zk;

use super::{rebuild, Op, TransactionResult};
use crate::error::{CuratorError, Result};
use crate::framework::{CuratorFramework, Session};
use crate::ops::guarded::Guard;
use crate::ops::outcome::{decide_delete, decide_unique_data, no_evidence, InFlight, Verdict};
use crate::write_tag::TagLock;

/// How a commit runs: under the framework's retry loop, or one attempt.
#[derive(Debug, Clone, Copy)]
pub(super) enum Runs {
    WithRetry,
    Once,
}

/// What decides a transaction whose reply was lost, as it runs.
pub(super) enum Proof {
    None,
    /// Its write tag, held for the whole write.
    Tag(TagLock),
    /// Data only it writes at `path` (as stored); `found`: the node's czxid and version when
    /// the transaction was made, if it writes that node at that version.
    Data {
        path: String,
        data: Vec<u8>,
        found: Option<(i64, i32)>,
    },
    /// The node made at `czxid` that it deletes at `path`.
    Delete {
        path: String,
        czxid: i64,
    },
}

impl Proof {
    fn tag(&self) -> Option<&TagLock> {
        match self {
            Proof::Tag(lock) => Some(lock),
            _ => None,
        }
    }
}

/// A validated transaction, ready to send.
pub(super) struct Work {
    pub(super) fw: CuratorFramework,
    pub(super) first: String,
    pub(super) ops: Vec<Op>,
    pub(super) acls: Vec<Vec<zk::Acl>>,
    pub(super) guard: Option<Guard>,
    pub(super) proof: Proof,
}

/// How an attempt failed: on the write tag's operation (nothing written: the tag is out of
/// step), or otherwise.
enum Failed {
    Tag(CuratorError),
    Other(CuratorError),
}

impl Work {
    fn op_name(&self) -> &'static str {
        if self.guard.is_some() {
            "guarded_transaction"
        } else {
            "transaction"
        }
    }

    pub(super) async fn run(&self, runs: Runs) -> Result<Vec<TransactionResult>> {
        match runs {
            Runs::WithRetry => self.with_retry().await,
            Runs::Once => self.once().await,
        }
    }

    /// Under the retry loop, which owns lost replies (module `outcome`).
    async fn with_retry(&self) -> Result<Vec<TransactionResult>> {
        self.fw
            .write_with_retry(
                self.op_name(),
                &self.first,
                |session, flight| async move {
                    let mut resent = false;
                    loop {
                        match self.attempt(&session, &flight).await {
                            // The tag was reaped while idle (or its parent made again): nothing
                            // was written; the tag was read again, so send once more at once.
                            Err(Failed::Tag(_)) if !resent => resent = true,
                            Err(Failed::Tag(err) | Failed::Other(err)) => return Err(err),
                            Ok(results) => return Ok(results),
                        }
                    }
                },
                |session, doubt| async move { self.decide(&session, doubt.sent).await },
            )
            .await
    }

    /// One attempt; after a lost reply, decided under the cleanup loop.
    async fn once(&self) -> Result<Vec<TransactionResult>> {
        let span = tracing::debug_span!("zk", op = self.op_name(), path = %self.first);
        async {
            let session = self.fw.session_for(&self.first).await?;
            let flight = Arc::new(InFlight::default());
            let sent = Instant::now();
            let err = match self.attempt(&session, &flight).await {
                Ok(results) => return Ok(results),
                Err(Failed::Tag(err) | Failed::Other(err)) => err,
            };
            drop(session);
            if !flight.lost() {
                return Err(err);
            }
            if matches!(self.proof, Proof::None) {
                return Err(CuratorError::OutcomeUnknown {
                    path: self.first.clone(),
                    reason: format!("its reply was lost ({err}), and the transaction carries no evidence to tell"),
                });
            }
            let mut retry = self.fw.cleanup_retry_loop();
            loop {
                let decided = async {
                    let session = self.fw.session_for(&self.first).await?;
                    self.decide(&session, sent).await
                };
                match decided.await {
                    Ok(Verdict::Applied(results)) => return Ok(results),
                    Ok(Verdict::NotApplied) => return Err(err),
                    Ok(Verdict::Unknown(reason)) => {
                        return Err(CuratorError::OutcomeUnknown { path: self.first.clone(), reason })
                    }
                    Err(e) => retry.on_error(e).await?,
                }
            }
        }
        .instrument(span)
        .await
    }

    /// One attempt on `session`: the guard's session first, then the multi.
    async fn attempt(
        &self,
        session: &Session,
        flight: &InFlight,
    ) -> std::result::Result<Vec<TransactionResult>, Failed> {
        if let Some(guard) = &self.guard {
            guard.before_attempt(session).map_err(Failed::Other)?;
        }
        let tag = self.proof.tag();
        let result = commit_once(session.client(), self.guard.as_ref(), &self.ops, &self.acls, tag, flight).await;
        match (&result, tag) {
            (Ok(_), Some(lock)) => lock.written(),
            (Err(Failed::Tag(_)), Some(lock)) => lock.learn(session).await.map_err(Failed::Other)?,
            _ => {}
        }
        result
    }

    /// Whether the attempt whose reply was lost (sent at `sent`) was applied, by the
    /// transaction's evidence (module docs).
    async fn decide(&self, session: &Session, sent: Instant) -> Result<Verdict<Vec<TransactionResult>>> {
        let verdict = match &self.proof {
            Proof::None => return Ok(no_evidence("a transaction without a write tag or unique data")),
            Proof::Tag(lock) => {
                let (verdict, seen) = lock.decide(session, sent).await?;
                // The results are read back before the tag's state is recorded: if that fails,
                // the next try decides again from the same state.
                let verdict = match verdict {
                    Verdict::Applied(zxid) => rebuild::results(session, &self.ops, zxid).await?,
                    Verdict::NotApplied => Verdict::NotApplied,
                    Verdict::Unknown(reason) => Verdict::Unknown(reason),
                };
                lock.settle(seen);
                return Ok(verdict);
            }
            Proof::Data { path, data, found } => {
                match decide_unique_data(session, path, data, found.map(|(czxid, v)| (v, Some(czxid)))).await? {
                    // The node holds the transaction's data: its mzxid is the transaction's.
                    Verdict::Applied(stat) => Verdict::Applied(stat.mzxid),
                    Verdict::NotApplied => Verdict::NotApplied,
                    Verdict::Unknown(reason) => Verdict::Unknown(reason),
                }
            }
            Proof::Delete { path, czxid } => match decide_delete(session, path, Some(*czxid), false).await? {
                Verdict::Applied(()) | Verdict::NotApplied => Verdict::NotApplied,
                Verdict::Unknown(reason) => Verdict::Unknown(reason),
            },
        };
        match verdict {
            Verdict::Applied(zxid) => rebuild::results(session, &self.ops, zxid).await,
            Verdict::NotApplied => Ok(Verdict::NotApplied),
            Verdict::Unknown(reason) => Ok(Verdict::Unknown(reason)),
        }
    }
}

/// One attempt: the multi of `ops`, after `guard`'s check if there is one and before the write
/// tag's operation if there is one (the last), with its request's answer noted in `flight`.
async fn commit_once(
    client: &zk::Client,
    guard: Option<&Guard>,
    ops: &[Op],
    acls: &[Vec<zk::Acl>],
    tag: Option<&TagLock>,
    flight: &InFlight,
) -> std::result::Result<Vec<TransactionResult>, Failed> {
    let paths: Vec<&str> = ops.iter().map(Op::path).collect();
    tracing::debug!(guard = guard.map(Guard::path), tag = tag.map(|t| t.tag().path()), ?paths, "multi");
    let mut writer = client.new_multi_writer();
    if let Some(guard) = guard {
        writer
            .add_check_version(guard.path(), -1)
            .map_err(|e| Failed::Other(CuratorError::from_zk(guard.path(), e)))?;
    }
    for (op, acl) in ops.iter().zip(acls) {
        let added = match op {
            Op::Create { path, data, options } => {
                let mut create = options.mode.to_zk().with_acls(zk::Acls::new(acl));
                if let Some(ttl) = options.ttl {
                    create = create.with_ttl(ttl);
                }
                writer.add_create(path, data, &create)
            }
            Op::Delete { path, version } => writer.add_delete(path, *version),
            Op::SetData { path, data, options } => writer.add_set_data(path, data, options.version),
            Op::Check { path, version } => writer.add_check_version(path, *version),
        };
        added.map_err(|e| Failed::Other(CuratorError::from_zk(op.path(), e)))?;
    }
    if let Some(tag) = tag {
        tag.add_op(&mut writer).map_err(Failed::Other)?;
    }
    // The guard's check, if any, is operation 0; the tag's, if any, the last.
    let skip = usize::from(guard.is_some());
    let results = match flight.seen_multi(writer.commit().await) {
        Ok(results) => results,
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            if let (Some(guard), true) = (guard, index < skip) {
                return Err(Failed::Other(match source {
                    zk::Error::NoNode | zk::Error::BadVersion => guard.refused(),
                    other => CuratorError::from_zk(guard.path(), other),
                }));
            }
            return Err(match (ops.get(index - skip), tag) {
                (Some(op), _) => Failed::Other(CuratorError::from_zk(op.path(), source)),
                (None, Some(tag)) => {
                    tracing::debug!(tag = %tag.tag().path(), error = %source, "write tag out of step: nothing written");
                    Failed::Tag(CuratorError::from_zk(&tag.tag().path(), source))
                }
                (None, None) => Failed::Other(CuratorError::from_zk("/", source)),
            });
        }
        Err(zk::MultiWriteError::RequestFailed { source }) => {
            return Err(Failed::Other(CuratorError::from_zk(ops[0].path(), source)))
        }
    };
    Ok(ops
        .iter()
        .zip(results.into_iter().skip(skip))
        .map(|(op, result)| match result {
            zk::MultiWriteResult::Create { path, .. } => TransactionResult::Create { path },
            zk::MultiWriteResult::SetData { stat } => TransactionResult::SetData { path: op.path().to_string(), stat },
            zk::MultiWriteResult::Delete => TransactionResult::Delete { path: op.path().to_string() },
            _ => TransactionResult::Check { path: op.path().to_string() },
        })
        .collect())
}
