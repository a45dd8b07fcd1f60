//! The fenced end of a lock-safe take: ONE multi through the core's transaction, sent only on
//! the session that holds the lock, carrying the queue handle's write tag.
//!
//! ```text
//! Delete  : [check(L/n)] + delete(P/n) + delete(L/n) + [the tag's op]
//! Requeue : [check(L/n)] + delete(P/n) + create(P/<same prefix>, data, persistent sequential)
//!           + delete(L/n) + [the tag's op]
//! Release : [check(L/n)] + delete(L/n) + [the tag's op]     (the item stays for the next consumer)
//!
//! [check(L/n)] is the lock as the transaction's guard (core TransactionGuard): the multi is
//! sent only on the session that made L/n, and applies only while L/n exists. [the tag's op] is
//! the queue handle's WriteTag under L (made by its first multi, then bumped): commit_once
//! decides a lost reply by it, exactly, whatever became of the session.
//!
//! commit_once:  applied                                  -> Finished
//!               refused before sending: not the lock's session any more -> LockLost (L/n went with it)
//!               the guard's check refused (L/n gone)     -> LockLost (Release: done)
//!               delete(P/n) NoNode (deleted by someone)  -> Release instead
//!               the tag out of step (reaped, L made again): nothing written -> send again at once
//!               its reply lost: decided by the tag, on whatever session comes:
//!                   applied -> Finished;  not applied -> a retryable error (below)
//!                   the tag changed by someone else     -> Unknown (reported OutcomeUnknown)
//!               a retryable error (nothing applied)      -> again after the cleanup backoff
//!               other error                              -> Release instead, then Failed (reported);
//!                                                           a Release failing so: Failed
//! ```
//! What the guard compares. Its `check(L/n)` is existence: the lock node is never written, so
//! any lock node at that path, ours or a later one of another take, passes. It stands for ours
//! by the session: while the session that made our lock lives, that node goes only by a request
//! of ours (every take deletes only the lock holding its own id), so no other take can make
//! `L/n` again before our multi has deleted ours; and the core sends the multi on that session
//! only. The one moment another take's lock could stand at `L/n` while we send would be after
//! our multi was applied with its reply lost; and then nothing is sent again: the tag says it
//! was applied. The item node `P/n` is a sequential name, never made again while `P` stands.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use curator_core::{path, CreateMode, CuratorError, CuratorFramework, Result, TransactionGuard, WRITE_TAG_PREFIX};

use super::lock::LockNode;
use super::shared::Shared;

/// How a lock-safe take is to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// The item node is done with: delete it.
    Delete,
    /// Put the item node's data back at the end of the queue, delete the old node.
    Requeue,
    /// Leave the item node: only delete our lock.
    Release,
}

/// What came of the end.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The multi applied (or, for `Release`, the lock is gone).
    Finished,
    /// Our lock went before the multi applied: the item is someone else's now.
    LockLost,
    /// The item node was gone: only the lock was deleted.
    ItemGone,
    /// The end failed for good (its error): the item was left, and our lock released if that
    /// could be done (else it goes with our session). Not sent again.
    Failed(CuratorError),
    /// The multi's reply was lost and the core could not decide it (the write tag was changed
    /// by someone else, or gone past its reap age): the item may have been finished. Its error,
    /// on the item's path.
    Unknown(CuratorError),
    /// The framework closed first (the lock goes with its session).
    Closed,
}

/// The lock node as the guard of the final multi.
struct LockGuard {
    fw: CuratorFramework,
    path: String,
    generation: u64,
    /// Why the guard refused, if it did: [`NOT_REFUSED`], [`NODE_GONE`] or [`SESSION_CHANGED`].
    refused: AtomicU8,
}

const NOT_REFUSED: u8 = 0;
const NODE_GONE: u8 = 1;
const SESSION_CHANGED: u8 = 2;

impl TransactionGuard for LockGuard {
    fn guard_framework(&self) -> &CuratorFramework {
        &self.fw
    }

    fn guard_path(&self) -> &str {
        &self.path
    }

    fn guard_generation(&self) -> u64 {
        self.generation
    }

    /// The take judges the connection itself (its consumer is stopped when the lock may be
    /// lost) and then still releases on the lock's session: the session and the check decide.
    fn guard_held(&self) -> Result<()> {
        Ok(())
    }

    fn guard_refused(&self, session_changed: bool) -> CuratorError {
        let why = if session_changed { SESSION_CHANGED } else { NODE_GONE };
        self.refused.store(why, Ordering::Release);
        let reason = if session_changed {
            "the session that made the lock node has ended: nothing was sent"
        } else {
            "the lock node is gone: the final multi was refused and nothing was written"
        };
        CuratorError::OwnNodeLost { path: self.path.clone(), reason: reason.into() }
    }
}

/// Ends the take of `name` locked by `lock` on the session `generation`.
pub(crate) async fn finish<T: Send + Sync + 'static>(
    q: &Shared<T>,
    name: &str,
    lock: &LockNode,
    generation: u64,
    mut how: Finish,
    data: &[u8],
) -> Outcome {
    let item = path::make_path(&q.path, name);
    let requeue = path::make_path(&q.path, &q.order.requeue_prefix(name));
    let guard =
        Arc::new(LockGuard { fw: q.fw.clone(), path: lock.path.clone(), generation, refused: AtomicU8::new(0) });
    let tag = q.write_tag();
    let tag_names = q.lock_path.as_deref().map(|l| path::make_path(l, WRITE_TAG_PREFIX));
    let mut backoff = q.fw.cleanup_retry_loop();
    let mut item_gone = false;
    let mut tag_resent = false;
    // A definite error of a Delete or Requeue, which was then turned into a Release.
    let mut failed: Option<CuratorError> = None;
    let done = |item_gone: bool, failed: Option<CuratorError>| match failed {
        Some(error) => Outcome::Failed(error),
        None if item_gone => Outcome::ItemGone,
        None => Outcome::Finished,
    };
    loop {
        guard.refused.store(NOT_REFUSED, Ordering::Release);
        let mut multi = q.fw.transaction().guarded_by(guard.clone());
        if how != Finish::Release {
            multi = multi.delete(&item, None);
        }
        if how == Finish::Requeue {
            // Stored as the item was: compressed under `enable_compression()` (section 3.10).
            multi = multi.create(&requeue, data.to_vec(), CreateMode::PersistentSequential);
        }
        multi = multi.delete(&lock.path, None);
        if let Some(tag) = &tag {
            multi = multi.with_write_tag(tag);
        }
        tracing::debug!(path = %item, lock = %lock.path, ?how, "queue: fenced final multi");
        let err = match multi.commit_once().await {
            Ok(_) => return done(item_gone, failed),
            Err(err) => err,
        };
        match guard.refused.load(Ordering::Acquire) {
            SESSION_CHANGED => {
                tracing::info!(path = %item, "queue: the session of our lock ended: leaving the item");
                curator_core::metrics::queue_fence_failed(true);
                return Outcome::LockLost;
            }
            NODE_GONE if how == Finish::Release => return done(item_gone, failed),
            NODE_GONE => {
                tracing::info!(path = %item, lock = %lock.path, "queue: our lock node is gone: the fence refused the finish");
                curator_core::metrics::queue_fence_failed(false);
                return Outcome::LockLost;
            }
            _ => {}
        }
        let on_tag = tag_names.as_deref().is_some_and(|t| err.path().is_some_and(|p| p.starts_with(t)));
        match err {
            CuratorError::NoNode { path } if path == item => (how, item_gone) = (Finish::Release, true),
            // The tag was reaped while idle, or L made again: nothing was written, and the tag
            // has been read again (made again under a fresh name if gone).
            CuratorError::NoNode { .. } | CuratorError::BadVersion { .. } if on_tag && !tag_resent => {
                tracing::info!(path = %item, "queue: the write tag was out of step: sending the final multi again");
                tag_resent = true;
            }
            CuratorError::Closed => return Outcome::Closed,
            CuratorError::OutcomeUnknown { reason, .. } => {
                tracing::warn!(path = %item, %reason, "queue: the final multi's reply was lost and it could not be decided");
                return Outcome::Unknown(CuratorError::OutcomeUnknown {
                    path: item,
                    reason: format!("the fenced final multi: {reason}"),
                });
            }
            // Nothing was applied (commit_once says so of every retryable error).
            err if err.is_retryable() => {
                if backoff.on_error(err).await.is_err() {
                    return Outcome::Closed;
                }
            }
            err if how == Finish::Release => {
                tracing::warn!(path = %item, error = %err, "queue: releasing the item failed: our lock goes with our session");
                return Outcome::Failed(failed.unwrap_or(err));
            }
            err => {
                tracing::warn!(path = %item, error = %err, "queue: final multi failed: releasing the item");
                failed = Some(err);
                how = Finish::Release;
            }
        }
    }
}
