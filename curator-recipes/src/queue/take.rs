//! Taking one item node: plain (at most once) or lock-safe (fenced final delete).
//!
//! ```text
//! plain     : getData(P/n) -> delete(P/n, version read) -> ok: consume the items
//!             NoNode / BadVersion: another consumer has it (or wrote to it), skip
//!             the delete's reply lost (the core ends it OutcomeUnknown, section 4.4):
//!               sync + exists(P/n): the node we read still there -> not applied: skip (the
//!               item stays for the next pass); gone -> reported, an Error whose
//!               outcome_unknown() holds: the item may be lost (at most once)
//! lock-safe : Lock   : the core's create of L/n, ephemeral, holding this take's id as unique
//!                      data (module lock); NodeExists: another has it, skip
//!                      its outcome unknown: L/n read: ours on this session: held; missing:
//!                      create again; else skip. That read failing too: L/n deleted if it
//!                      holds our id and is an ephemeral of the current session (it would keep
//!                      the item from everyone), then the take fails
//!             Read   : getData(P/n)                            NoNode: done already, Release
//!             Consume: the items, in order; the consumer's future is dropped as soon as
//!                      the lock may be lost (the locks' rule for the error policy:
//!                      suspended under Standard, the session ended under either)
//!                      -> LockLost, Release
//!             Finish : on session s only, ONE multi through the core (module fence):
//!                      [check(L/n)] + delete(P/n) [+ create P/<requeue name> with the data]
//!                      + delete(L/n) + [the handle's write tag]
//!                      not session s any more          -> LockLost (our lock went with s)
//!                      check failed                    -> LockLost (someone deleted L/n)
//!                      its reply lost                  -> decided by the write tag before
//!                                                         anything is sent again
//! ```
//! The fence works because an ephemeral node of a live session is deleted only by a request,
//! and each take deletes only the lock node holding its own id: while `s` lives `L/n` is ours,
//! and the multi applies only if it still stands; once `s` is gone we never send it. So an
//! item is finished by at most one consumer, and a consumer that lost its session leaves the
//! item for the next (CURATOR-605). Past that, a consumer is told its item may be lost before
//! anyone else can take it: its future is dropped then, so that it does not run to its end on
//! an item that is someone else's (docs/architecture.md section 17).

use curator_core::{path, zk, ConnectionStateEvent, CuratorError, CuratorFramework, Result};
use tokio::sync::watch;

use crate::sequential::hold::judge;
use crate::sequential::LockLost;

use super::deliver::{self, Consumed};
use super::fence::{self, Finish, Outcome};
use super::lock::{self, LockFailed, LockNode};
use super::shared::{QueueEvent, Shared};

/// How a take of one item node ended, for the consuming loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Done with for now: consumed, requeued, released, or gone already.
    Handled,
    /// Another consumer holds it: its lock node, at this path.
    HeldElsewhere(String),
    /// The take failed (reported).
    Failed,
}

/// Takes the node `name` of the queue.
pub(crate) async fn take<T: Send + Sync + 'static>(
    q: &Shared<T>,
    name: &str,
    stop: &mut watch::Receiver<bool>,
) -> Taken {
    let result = match &q.lock_path {
        None => take_plain(q, name).await.map(|()| Taken::Handled),
        Some(lock_path) => take_locked(q, name, &path::make_path(lock_path, name), stop).await,
    };
    match result {
        Ok(taken) => taken,
        Err(CuratorError::Closed) => Taken::Handled,
        Err(error) => {
            tracing::warn!(path = %q.path, node = name, %error, "queue: taking an item failed");
            q.events.publish(QueueEvent::Error { error });
            Taken::Failed
        }
    }
}

async fn take_plain<T: Send + Sync + 'static>(q: &Shared<T>, name: &str) -> Result<()> {
    let item_path = path::make_path(&q.path, name);
    tracing::debug!(path = %item_path, "queue: getData");
    let (data, stat) = match q.fw.get_data().for_path_with_stat(&item_path).await {
        Ok(read) => read,
        Err(CuratorError::NoNode { .. }) => return Ok(()),
        Err(err) => return Err(err),
    };
    tracing::debug!(path = %item_path, version = stat.version, "queue: delete (plain take)");
    match q.fw.delete().with_version(stat.version).for_path(&item_path).await {
        Ok(()) => {}
        Err(CuratorError::NoNode { .. } | CuratorError::BadVersion { .. }) => return Ok(()),
        Err(err) if err.outcome_unknown() && !matches!(err, CuratorError::Closed) => {
            return uncertain_delete(q, &item_path, stat.czxid, err).await;
        }
        Err(err) => return Err(err),
    }
    // The node is ours and gone: its items are consumed whatever happens (at most once).
    if let Consumed::Done = deliver::consume(q, name, &item_path, &data).await {
        q.events.publish(QueueEvent::Consumed { node: name.to_string() });
    }
    Ok(())
}

/// A plain take's delete whose reply was lost (the core ended it with `err`, one of
/// `CuratorError::outcome_unknown`'s): the node we read (made at `czxid`) still there proves
/// the delete was not applied, and the item stays for the next pass. Gone, it was deleted by
/// this take or by another consumer, and nothing tells which: the take reports an error whose
/// `outcome_unknown()` holds (the item may be lost: delivery is at most once) and does not
/// consume it. So is a look that fails.
async fn uncertain_delete<T: Send + Sync + 'static>(
    q: &Shared<T>,
    item_path: &str,
    czxid: i64,
    err: CuratorError,
) -> Result<()> {
    let look = async {
        let session = q.fw.session().await?;
        let client = session.client();
        tracing::debug!(path = %item_path, "queue: sync + exists (a plain take's delete in doubt)");
        let sync = client.sync(item_path);
        let read = client.check_stat(item_path);
        match sync.await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(e) => return Err(CuratorError::from_zk(item_path, e)),
        }
        read.await.map_err(|e| CuratorError::from_zk(item_path, e))
    };
    match look.await {
        Ok(Some(stat)) if stat.czxid == czxid => {
            tracing::info!(path = %item_path, "queue: a take's delete whose reply was lost was not applied: the item stays");
            Ok(())
        }
        looked => {
            let why = match looked {
                Err(look) => format!("the delete's reply was lost ({err}) and looking at the node failed ({look})"),
                Ok(_) => format!("the delete's reply was lost ({err}) and the node is gone"),
            };
            tracing::warn!(path = %item_path, %why, "queue: a take's delete may have been applied: the item may be lost (at most once)");
            Err(CuratorError::OutcomeUnknown {
                path: item_path.to_string(),
                reason: format!("{why}: deleted by this take or by another consumer; not consumed here"),
            })
        }
    }
}

async fn take_locked<T: Send + Sync + 'static>(
    q: &Shared<T>,
    name: &str,
    lock_path: &str,
    stop: &mut watch::Receiver<bool>,
) -> Result<Taken> {
    let lock = LockNode::new(lock_path.to_string());
    let held = match lock::lock_item(&q.fw, &lock).await {
        Ok(Some(held)) => held,
        Ok(None) => return Ok(Taken::HeldElsewhere(lock.path)),
        Err(LockFailed { error, in_doubt }) => {
            if in_doubt && !q.fw.is_closed() {
                let stopped = async {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                };
                lock::drop_unknown_lock(&q.fw, &lock, stopped).await;
            }
            return Err(error);
        }
    };
    let generation = held.generation;
    let item_path = path::make_path(&q.path, name);
    tracing::debug!(path = %item_path, "queue: getData (locked)");
    let mut lost = None;
    let mut read = false;
    let (how, consumed, data) = match q.fw.get_data().for_path(&item_path).await {
        Ok(data) => {
            read = true;
            let consumed = tokio::select! {
                biased;
                reason = may_be_lost(&q.fw, generation, &held.at_lock) => {
                    tracing::warn!(path = %item_path, %reason, "queue: the item's lock may be lost: its consumer is stopped");
                    lost = Some(reason);
                    None
                }
                consumed = deliver::consume(q, name, &item_path, &data) => Some(consumed),
                _ = stop.wait_for(|stopped| *stopped) => None,
            };
            let how = match consumed {
                Some(Consumed::Done | Consumed::Dropped | Consumed::Bad) => Finish::Delete,
                Some(Consumed::Requeue) => Finish::Requeue,
                None => Finish::Release,
            };
            (how, consumed, data)
        }
        Err(CuratorError::NoNode { .. }) => (Finish::Release, None, Vec::new()),
        Err(err) => {
            fence::finish(q, name, &lock, generation, Finish::Release, &[]).await;
            return Err(err);
        }
    };
    let outcome = fence::finish(q, name, &lock, generation, how, &data).await;
    // The node stays for the next consumer when the fence refused the finish, when the finish
    // failed, or when a take that read it let it go (its lock may be lost, the queue closed).
    let left = match &outcome {
        Outcome::LockLost | Outcome::Failed(_) => true,
        Outcome::ItemGone => false,
        Outcome::Finished | Outcome::Unknown(_) | Outcome::Closed => read && how == Finish::Release,
    };
    if how == Finish::Requeue && matches!(outcome, Outcome::Finished) {
        curator_core::metrics::queue_requeued();
    } else if left {
        curator_core::metrics::queue_released();
    }
    let lock_lost = lost.is_some() || matches!(outcome, Outcome::LockLost);
    match outcome {
        Outcome::Finished if matches!(consumed, Some(Consumed::Done)) => {
            q.events.publish(QueueEvent::Consumed { node: name.to_string() });
        }
        Outcome::Unknown(error) | Outcome::Failed(error) => q.events.publish(QueueEvent::Error { error }),
        Outcome::Finished | Outcome::LockLost | Outcome::ItemGone | Outcome::Closed => {}
    }
    if lock_lost {
        q.events.publish(QueueEvent::LockLost { node: name.to_string() });
    }
    Ok(Taken::Handled)
}

/// Resolves when the lock made on session `generation`, with the connection as `at_lock` was
/// then, may be lost: judged as a held lock is (`sequential::hold::judge`), from the
/// connection's states alone, with no request.
async fn may_be_lost(fw: &CuratorFramework, generation: u64, at_lock: &ConnectionStateEvent) -> LockLost {
    let mut states = fw.connection_state_watch();
    loop {
        if let Some(reason) = judge(fw.error_policy(), generation, at_lock, &states.borrow_and_update()) {
            return reason;
        }
        if states.changed().await.is_err() {
            return LockLost::Closed;
        }
    }
}
