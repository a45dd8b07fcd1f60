//! The fenced end of a lock-safe take: ONE multi, sent only on the session that holds the lock.
//!
//! ```text
//! Delete  : check(L/n, version 0) + delete(P/n) + delete(L/n)
//! Requeue : check(L/n, version 0) + create(P/<same prefix>, data, persistent sequential)
//!           + delete(P/n) + delete(L/n)
//! Release : delete(L/n)                              (the item stays for the next consumer)
//!
//! each attempt: the current session is not the lock's  -> LockLost (L/n went with it), or,
//!                 after a lost reply of Delete/Requeue:   sync + exists(P/n) on the new
//!                                                         session: there -> LockLost (not
//!                                                         applied); gone -> Unknown
//!               after a lost reply, before sending:    sync + getData(L/n):
//!                                                         our id there -> not applied: send again
//!                                                         else         -> Finished (applied)
//!               applied                                -> Finished
//!               L/n missing                            -> LockLost (deleted by someone)
//!               P/n missing (deleted by someone)       -> Release instead
//!               a lost reply (retryable error)         -> in doubt; again after the cleanup backoff
//!               other error                            -> reported; Release instead
//! ```
//! What the fence compares. `check(L/n, 0)` alone is existence: the lock node is never
//! written, so any lock node at that path, ours or a later one of another take, is at version
//! 0. It stands for ours because of the session: while the session that made our lock lives,
//! that node goes only by a request of ours (every take deletes only the lock holding its own
//! id), so no other take can make `L/n` again before our multi has deleted ours; and the multi
//! is never sent on another session. The one moment a lock of another take could stand at
//! `L/n` while we send is after a lost reply of ours (our multi applied, deleted our lock, and
//! another take made its own): so after a lost reply nothing is sent before the lock's id has
//! decided, on the same session: our id still there proves the multi was not applied (it
//! deletes `L/n` in the same transaction); anything else proves it was. Release's bare delete
//! is covered by the same decision. The item node `P/n` is another witness for Delete and
//! Requeue: a sequential name, never made again while `P` stands, and deleted only by a holder
//! of `L/n`.

use curator_core::{path, zk, CuratorError, Result, Session};

use super::lock::{Found, LockNode};
use super::shared::{QueueEvent, Shared};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The multi applied (or, for `Release`, the lock is gone).
    Finished,
    /// Our lock went before the multi applied: the item is someone else's now.
    LockLost,
    /// The item node was gone: only the lock was deleted.
    ItemGone,
    /// A Delete or Requeue whose reply was lost, and whose session ended before its lock's id
    /// could tell, with the item node gone since: applied by us, or taken by the next holder
    /// after our lock went with the session. Nothing tells which.
    Unknown,
    /// The framework closed first (the lock goes with its session).
    Closed,
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
    // The requeued item is stored as the item was, compressed under `enable_compression()`
    // (section 3.10). A provider's error leaves the item where it is.
    let data = match q.fw.encode_data(&requeue, data) {
        Ok(data) => data,
        Err(err) if how == Finish::Requeue => {
            tracing::warn!(path = %item, error = %err, "queue: the requeued data cannot be encoded: releasing the item");
            q.events.publish(QueueEvent::Error { error: err });
            how = Finish::Release;
            std::borrow::Cow::Borrowed(data)
        }
        Err(_) => std::borrow::Cow::Borrowed(data),
    };
    let mut backoff = q.fw.cleanup_retry_loop();
    // A multi of ours whose reply was lost, not decided since.
    let mut in_doubt = false;
    let mut item_gone = false;
    let done = |item_gone: bool| if item_gone { Outcome::ItemGone } else { Outcome::Finished };
    loop {
        let session = match q.fw.session().await {
            Ok(session) => session,
            Err(CuratorError::Closed) => return Outcome::Closed,
            Err(err) => match backoff.on_error(err).await {
                Ok(()) => continue,
                Err(_) => return Outcome::Closed,
            },
        };
        if !session.is_generation(generation) {
            if in_doubt && how != Finish::Release {
                match item_after_session(&session, &item).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(path = %item, "queue: the final multi's reply was lost and its session ended: the item is gone, by it or by the next holder");
                        return Outcome::Unknown;
                    }
                    Err(err) => match backoff.on_error(err).await {
                        Ok(()) => continue,
                        Err(_) => return Outcome::Closed,
                    },
                }
            }
            tracing::info!(path = %item, "queue: the session of our lock ended: leaving the item");
            curator_core::metrics::queue_fence_failed(true);
            return Outcome::LockLost;
        }
        if in_doubt {
            match lock.find(&session).await {
                Ok(Found::Ours(_)) => {
                    tracing::info!(path = %item, lock = %lock.path, "queue: the final multi whose reply was lost was not applied: sending it again");
                    in_doubt = false;
                }
                Ok(_) => {
                    tracing::info!(path = %item, lock = %lock.path, "queue: the final multi whose reply was lost was applied");
                    return done(item_gone);
                }
                Err(err) => {
                    if backoff.on_error(err).await.is_err() {
                        return Outcome::Closed;
                    }
                    continue;
                }
            }
        }
        tracing::debug!(path = %item, lock = %lock.path, ?how, "queue: fenced final multi");
        match commit(q, &session, how, &item, &lock.path, &requeue, &data).await {
            Ok(()) => return done(item_gone),
            Err(Failed::Lock) if how == Finish::Release => return done(item_gone),
            Err(Failed::Lock) => {
                tracing::info!(path = %item, lock = %lock.path, "queue: our lock node is gone: the fence refused the finish");
                curator_core::metrics::queue_fence_failed(false);
                return Outcome::LockLost;
            }
            Err(Failed::Item) => (how, item_gone) = (Finish::Release, true),
            Err(Failed::Other(err)) if err.is_retryable() => {
                // Every reply-lost shape is retryable (section 2.3): the multi is in doubt.
                in_doubt = true;
                if backoff.on_error(err).await.is_err() {
                    return Outcome::Closed;
                }
            }
            Err(Failed::Other(err)) => {
                tracing::warn!(path = %item, error = %err, "queue: final multi failed: releasing the item");
                q.events.publish(QueueEvent::Error { error: err });
                how = Finish::Release;
            }
        }
    }
}

/// Whether the item node is still there, read on the new `session` after a sync: a multi of
/// ours left in doubt on the old session would have deleted it.
async fn item_after_session(session: &Session, item: &str) -> Result<bool> {
    let client = session.client();
    tracing::debug!(path = %item, "queue: sync + exists (the item of a final multi in doubt)");
    let sync = client.sync(item);
    let read = client.check_stat(item);
    match sync.await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(CuratorError::from_zk(item, err)),
    }
    read.await.map(|stat| stat.is_some()).map_err(|e| CuratorError::from_zk(item, e))
}

/// Why a multi did not apply.
enum Failed {
    /// Our lock node is not there (or not at version 0).
    Lock,
    /// The item node is not there.
    Item,
    Other(CuratorError),
}

async fn commit<T: Send + Sync + 'static>(
    q: &Shared<T>,
    session: &Session,
    how: Finish,
    item: &str,
    lock: &str,
    requeue: &str,
    data: &[u8],
) -> Result<(), Failed> {
    let acl = q.fw.acl_for_path(requeue);
    let mut multi = session.multi();
    let mut kinds = Vec::new();
    let added = (|| {
        if how != Finish::Release {
            multi.add_check_version(lock, 0)?;
            kinds.push(Target::Lock);
        }
        if how == Finish::Requeue {
            multi.add_create(requeue, data, zk::CreateMode::PersistentSequential, &acl)?;
            kinds.push(Target::Other);
        }
        if how != Finish::Release {
            multi.add_delete(item, None)?;
            kinds.push(Target::Item);
        }
        multi.add_delete(lock, None)?;
        kinds.push(Target::Lock);
        Ok::<_, CuratorError>(())
    })();
    added.map_err(Failed::Other)?;
    match multi.commit().await {
        Ok(_) => Ok(()),
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            let target = kinds.get(index).copied().unwrap_or(Target::Other);
            match (target, source) {
                (Target::Lock, zk::Error::NoNode | zk::Error::BadVersion) => Err(Failed::Lock),
                (Target::Item, zk::Error::NoNode) => Err(Failed::Item),
                (_, source) => Err(Failed::Other(CuratorError::from_zk(item, source))),
            }
        }
        Err(zk::MultiWriteError::RequestFailed { source }) => Err(Failed::Other(CuratorError::from_zk(item, source))),
    }
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Lock,
    Item,
    Other,
}
