//! The latch's task: the phases of [`Phase`], one function each (docs/architecture.md section
//! 15).

use std::sync::Arc;

use curator_core::Readiness;
use curator_core::{CuratorError, Result};
use tokio::sync::{mpsc, oneshot};

use super::{CloseMode, Command, LatchEvent, Shared, Status};
use crate::leader::first_step::{ready_once_in_line, refuse_first};
use crate::leader::leadership::Leadership;
use crate::leader::rejoin::Rejoin;
use crate::sequential::{Hold, LockLost, LockNode, NodeKind, Predicate};

/// The phases of a latch's task.
enum Phase {
    /// Join the line and wait to lead: with a new node, or with this node of ours, kept through
    /// a suspension on its session.
    Join(Option<LockNode>),
    /// Lead with this term.
    Lead(Leadership),
    /// The connection was suspended (under `ErrorPolicy::Standard`): wait for it, keeping the
    /// node of this hold.
    Suspended(Arc<Hold>),
    /// A join failed with this error: wait, then join again.
    Retry(CuratorError),
    /// Done; answer the close, if one asked.
    Done(Option<oneshot::Sender<()>>),
}

/// The latch's task: runs the phases until the latch or its framework closes. It reports the
/// first outcome of the start to `readiness`: ready once our node exists or the first join
/// failed in a way worth trying again; refused (which closes the latch) when the first join
/// was refused for good.
pub(super) async fn run(shared: Arc<Shared>, mut commands: mpsc::UnboundedReceiver<Command>, readiness: Readiness) {
    let mut phase = Phase::Join(None);
    let mut rejoin = Rejoin::new(shared.group.framework());
    // Whether our node was ever made: until then, a refusal for good ends the task.
    let mut joined = false;
    let reply = loop {
        joined |= shared.ours.borrow().is_some();
        phase = match phase {
            Phase::Retry(err) if !joined && err.is_permanent() => {
                // Told to the unhandled-error listeners; closes the latch (unless a first
                // outcome was reported already), and `ready` says why.
                let who = ("leader latch", shared.group.base_path(), &*shared.id);
                refuse_first(shared.group.framework(), &readiness, who, err);
                shared.events.close();
                break None;
            }
            Phase::Retry(err) => {
                // The first join failed in a way worth trying again: `ready` need not wait.
                readiness.ready();
                retry(&shared, &mut commands, &mut rejoin, err).await
            }
            Phase::Join(kept) => join(&shared, &mut commands, kept, &readiness).await,
            Phase::Lead(term) => {
                rejoin.reset();
                lead(&shared, &mut commands, term).await
            }
            Phase::Suspended(hold) => suspended(&shared, &mut commands, hold).await,
            Phase::Done(reply) => break reply,
        };
    };
    // The task ended before a first outcome (the framework closed): nothing to wait for.
    readiness.ready();
    shared.ours.send_replace(None);
    shared.status.send_replace(Status::Ended);
    tracing::debug!(path = %shared.group.base_path(), id = %shared.id, "leader latch ended");
    if let Some(reply) = reply {
        let _ = reply.send(());
    }
}

/// Join: our node (a new one, or the one `kept` through a suspension), then the wait until it
/// is first. A close while waiting drops the acquire, whose cleanup deletes our node; a step
/// down while waiting changes nothing.
async fn join(
    shared: &Shared,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    kept: Option<LockNode>,
    readiness: &Readiness,
) -> Phase {
    shared.status.send_replace(Status::Joining);
    let granted = {
        let data = shared.id.as_bytes();
        let predicate = Predicate::Leader;
        // Boxed, not pinned on the stack, so that dropping it (on a close) runs its cleanup now.
        let acquire: std::pin::Pin<Box<dyn std::future::Future<Output = Result<_>> + Send + '_>> = match kept {
            Some(node) => Box::pin(shared.group.resume(node, data, predicate, shared.ours.clone())),
            None => {
                Box::pin(shared.group.acquire_reporting(data, NodeKind::Sequential, predicate, shared.ours.clone()))
            }
        };
        // Ready once our node exists (the first time): latches made ready one after another are
        // in line in that order.
        let mut acquire = Box::pin(ready_once_in_line(acquire, &shared.ours, readiness));
        loop {
            tokio::select! {
                granted = &mut acquire => break granted,
                command = commands.recv() => match command {
                    Some(Command::StepDown(reply)) => {
                        let _ = reply.send(());
                    }
                    Some(Command::Close(_, reply)) => {
                        drop(acquire);
                        forget_node(shared).await;
                        return Phase::Done(Some(reply));
                    }
                    None => {
                        drop(acquire);
                        forget_node(shared).await;
                        return Phase::Done(None);
                    }
                },
            }
        }
    };
    let fw = shared.group.framework();
    match granted {
        Ok(granted) => {
            let hold = Hold::new(fw, granted);
            match hold.lost_reason() {
                None => {}
                // Granted, but the connection is suspended by now: never announced; wait for it.
                Some(LockLost::Suspended) => return Phase::Suspended(hold),
                Some(reason) => {
                    // Granted on a session that is gone by now (CURATOR-696): never announced.
                    tracing::debug!(path = %hold.node().path, %reason, "leadership granted on a lost session: joining again");
                    release(shared, &hold).await;
                    return Phase::Join(None);
                }
            }
            let term = Leadership::new(hold, shared.id.clone());
            tracing::debug!(path = %term.path(), token = term.fencing_token(), id = %shared.id, "leader latch: is leader");
            shared.status.send_replace(Status::Leading(term.clone()));
            shared.events.publish(LatchEvent::IsLeader(term.clone()));
            Phase::Lead(term)
        }
        Err(CuratorError::Closed) => Phase::Done(None),
        Err(err) => Phase::Retry(err),
    }
}

/// Lead: until the term may be lost, or the latch steps down or closes. In every case the
/// leadership is taken back (status, then `NotLeader`) before anything else; our node is then
/// deleted, except after a suspension, when it is kept while waiting for the connection.
async fn lead(shared: &Shared, commands: &mut mpsc::UnboundedReceiver<Command>, term: Leadership) -> Phase {
    let (reason, next) = tokio::select! {
        reason = term.lost() => {
            if reason == LockLost::Suspended {
                give_up(shared, &term, Some(reason));
                return Phase::Suspended(term.hold().clone());
            }
            (Some(reason), Phase::Join(None))
        }
        command = commands.recv() => match command {
            Some(Command::StepDown(reply)) => {
                end_term(shared, &term, Some(LockLost::Released)).await;
                let _ = reply.send(());
                return Phase::Join(None);
            }
            Some(Command::Close(mode, reply)) => {
                let notify = (mode == CloseMode::NotifyLeader).then_some(LockLost::Released);
                (notify, Phase::Done(Some(reply)))
            }
            None => (None, Phase::Done(None)),
        },
    };
    end_term(shared, &term, reason).await;
    next
}

/// Ends a term: [`give_up`], then our node deleted.
async fn end_term(shared: &Shared, term: &Leadership, reason: Option<LockLost>) {
    give_up(shared, term, reason);
    release(shared, term.hold()).await;
}

/// Takes leadership back: no longer leading, then `NotLeader(reason)` published if given.
fn give_up(shared: &Shared, term: &Leadership, reason: Option<LockLost>) {
    shared.status.send_replace(Status::Joining);
    if let Some(reason) = reason {
        tracing::debug!(path = %term.path(), %reason, id = %shared.id, "leader latch: not leader");
        shared.events.publish(LatchEvent::NotLeader(reason));
    }
}

/// Suspended (under `ErrorPolicy::Standard`, after `NotLeader(Suspended)`): our node is kept
/// while we wait for the connection. Back on the node's session, join again with that node
/// (the core lists again: still first, we lead again with it; nobody else can have led
/// meanwhile). The session lost or replaced: delete the node (guaranteed) and join with a new
/// one. A step down meanwhile changes nothing (we do not lead); a close deletes the node.
async fn suspended(shared: &Shared, commands: &mut mpsc::UnboundedReceiver<Command>, hold: Arc<Hold>) -> Phase {
    let fw = shared.group.framework();
    let mut liveness = fw.liveness(hold.node().generation);
    tracing::debug!(path = %hold.node().path, "leader latch suspended: keeping our node, waiting for the connection");
    // Err: the session is over (lost, replaced, or the framework closed or gone).
    let back = async { liveness.connected().await.is_ok() };
    tokio::pin!(back);
    loop {
        tokio::select! {
            same_session = &mut back => {
                if same_session {
                    tracing::debug!(path = %hold.node().path, "reconnected on the same session: joining again with our node");
                    return Phase::Join(Some(hold.node().clone()));
                }
                tracing::debug!(path = %hold.node().path, "the session was lost: deleting our node, joining with a new one");
                release(shared, &hold).await;
                return Phase::Join(None);
            }
            command = commands.recv() => match command {
                Some(Command::StepDown(reply)) => {
                    let _ = reply.send(());
                }
                Some(Command::Close(_, reply)) => {
                    release(shared, &hold).await;
                    return Phase::Done(Some(reply));
                }
                None => {
                    release(shared, &hold).await;
                    return Phase::Done(None);
                }
            },
        }
    }
}

/// Deletes the node of `hold` (guaranteed) and forgets its path.
async fn release(shared: &Shared, hold: &Hold) {
    hold.release_or_report().await;
    shared.ours.send_if_modified(|ours| {
        let mine = ours.as_deref() == Some(hold.node().path.as_str());
        if mine {
            *ours = None;
        }
        mine
    });
}

/// After a join was abandoned (closed while waiting in line): the dropped acquire's cleanup
/// deletes our node (tracked background work) and then clears `ours`; the close waits for that
/// when the path is known, instead of deleting the node a second time.
async fn forget_node(shared: &Shared) {
    let mut ours = shared.ours.subscribe();
    if let Some(path) = ours.borrow_and_update().clone() {
        tracing::debug!(path = %path, "leader latch closed while in line: waiting for its node's delete");
    }
    // An error: the sender is gone, and the latch with it.
    let _ = ours.wait_for(Option::is_none).await;
}

/// After a failed join: wait as both recipes do (`rejoin.rs`: until connected again, or, when
/// connected, a backoff pause), then join again. Commands are answered meanwhile.
async fn retry(
    shared: &Shared,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    rejoin: &mut Rejoin,
    err: CuratorError,
) -> Phase {
    let fw = shared.group.framework();
    shared.ours.send_replace(None);
    shared.status.send_replace(Status::Retrying);
    let wait = rejoin.wait(fw, shared.group.base_path(), &err);
    tokio::pin!(wait);
    loop {
        tokio::select! {
            () = &mut wait => return Phase::Join(None),
            command = commands.recv() => match command {
                Some(Command::StepDown(reply)) => {
                    let _ = reply.send(());
                }
                Some(Command::Close(_, reply)) => return Phase::Done(Some(reply)),
                None => return Phase::Done(None),
            },
        }
    }
}
