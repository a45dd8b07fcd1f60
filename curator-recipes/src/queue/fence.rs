//! The fenced end of a lock-safe take: ONE multi, sent only on the session that holds the lock.
//!
//! ```text
//! Delete  : check(L/n, version 0) + delete(P/n) + delete(L/n)
//! Requeue : check(L/n, version 0) + create(P/<same prefix>, data, persistent sequential)
//!           + delete(P/n) + delete(L/n)
//! Release : delete(L/n)                              (the item stays for the next consumer)
//!
//! each attempt: the current session is not the lock's  -> LockLost (L/n went with it)
//!               applied                                -> Finished
//!               L/n missing, first attempt             -> LockLost (deleted by someone)
//!               L/n missing, after an unknown outcome  -> Finished (our attempt applied)
//!               P/n missing, after an unknown outcome  -> Finished (our attempt applied; the
//!                                                         L/n checked is another consumer's)
//!               P/n missing (deleted by someone)       -> Release instead
//!               retryable error                        -> again after the cleanup backoff
//!               other error                            -> reported; Release instead
//! ```
//! The lock node is never written, so its version is 0 for as long as it is ours.

use curator_core::{path, zk, CuratorError, Result, Session};

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
    /// The framework closed first (the lock goes with its session).
    Closed,
}

/// Ends the take of `name` locked by `lock` on the session `generation`.
pub(crate) async fn finish<T: Send + Sync + 'static>(
    q: &Shared<T>,
    name: &str,
    lock: &str,
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
    let mut unknown = false;
    let mut item_gone = false;
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
            tracing::info!(path = %item, "queue: the session of our lock ended: leaving the item");
            curator_core::metrics::queue_fence_failed(true);
            return Outcome::LockLost;
        }
        tracing::debug!(path = %item, lock, ?how, "queue: fenced final multi");
        match commit(q, &session, how, &item, lock, &requeue, &data).await {
            Ok(()) if item_gone => return Outcome::ItemGone,
            Ok(()) => return Outcome::Finished,
            Err(Failed::Lock) if how == Finish::Release || unknown => {
                return if item_gone { Outcome::ItemGone } else { Outcome::Finished }
            }
            Err(Failed::Lock) => {
                tracing::info!(path = %item, lock, "queue: our lock node is gone: the fence refused the finish");
                curator_core::metrics::queue_fence_failed(false);
                return Outcome::LockLost;
            }
            // After an unknown outcome the item is gone because our earlier attempt applied:
            // while our lock stood nobody else could delete it. Our lock went with that attempt,
            // so the lock node the check just passed on is another consumer's: not ours to delete.
            Err(Failed::Item) if unknown => return Outcome::Finished,
            Err(Failed::Item) => (how, item_gone) = (Finish::Release, true),
            Err(Failed::Other(err)) if err.is_retryable() => {
                unknown = true;
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
