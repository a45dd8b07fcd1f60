//! A leave of a [`DistributedDoubleBarrier`](super::DistributedDoubleBarrier): its phases, one
//! function each (the algorithm is in the parent module's docs).

use curator_core::deadline;
use curator_core::zk;
use curator_core::{path, CuratorError, CuratorFramework, Result, Session};

use super::{Step, READY_NODE};
use crate::barriers::Connection;
use crate::sequential::cleanup::Cleanup;

/// What became of our node during a leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Own {
    /// It exists, created on the session of this generation.
    Present(u64),
    /// A delete was sent and its outcome is unknown.
    Deleting,
    /// Deleted.
    Gone,
}

/// The phases of a leave (module docs).
pub(super) enum Leave {
    List,
    Wait(zk::OneshotWatcher),
    Done,
}

/// One leave in progress.
pub(super) struct Leaving<'a> {
    pub(super) fw: &'a CuratorFramework,
    pub(super) path: &'a str,
    pub(super) ready_path: &'a str,
    /// Our node's name, if we had one when the leave began.
    pub(super) name: Option<String>,
    pub(super) own: Own,
    /// Deletes our node unless the leave deleted it (disarmed then).
    pub(super) cleanup: Option<Cleanup>,
}

impl Leaving<'_> {
    /// Our node's path (the barrier's, if we had none: for errors and logs).
    fn node(&self) -> String {
        self.name.as_deref().map_or_else(|| self.path.to_string(), |n| path::make_path(self.path, n))
    }

    /// The generation of the session our node lives on, while it is there.
    fn present(&self) -> Option<u64> {
        match self.own {
            Own::Present(generation) => Some(generation),
            Own::Deleting | Own::Gone => None,
        }
    }

    /// Our node is gone, by our own hand: the cleanup has nothing left to do.
    fn deleted(&mut self) {
        self.own = Own::Gone;
        if let Some(cleanup) = &mut self.cleanup {
            cleanup.disarm();
        }
    }

    /// Runs the phases until every member has left.
    pub(super) async fn run(&mut self) -> Result<()> {
        let mut retry = self.fw.retry_loop();
        let mut connection = Connection::new(self.fw, Some(self.fw.error_policy()), &self.node());
        let mut phase = Leave::List;
        loop {
            connection.check(self.present())?;
            phase = match self.step(phase, &mut connection).await {
                Step::Next(next) => {
                    retry.reset();
                    next
                }
                Step::Finished(()) => {
                    tracing::debug!(path = %self.path, "left the double barrier");
                    return Ok(());
                }
                Step::Retry(err, next) => {
                    retry.on_error(err).await?;
                    next
                }
                Step::Fail(err) => return Err(err),
            };
        }
    }

    /// Runs one phase on the session current at that moment.
    async fn step(&mut self, phase: Leave, connection: &mut Connection) -> Step<Leave, ()> {
        if let Leave::Wait(watch) = phase {
            let present = self.present();
            let woken = deadline::until(self.path, async {
                tokio::select! {
                    event = watch.changed() => {
                        tracing::debug!(path = %event.path, event = ?event.event_type, state = ?event.session_state, "watch fired: list again");
                        Ok(())
                    }
                    changed = connection.recheck_needed(present) => changed,
                }
            });
            return match woken.await {
                Ok(()) => Step::Next(Leave::List),
                Err(err) => Step::Fail(err),
            };
        }
        let session = match self.fw.session().await {
            Ok(session) => session,
            Err(err) => return Step::Retry(err, phase),
        };
        if self.present().is_some_and(|generation| !session.is_generation(generation)) {
            // Our node went with its session: we were out of the barrier from then on.
            tracing::debug!(path = %self.node(), "our node went with its session");
            return Step::Fail(CuratorError::SessionExpired { path: self.node() });
        }
        match phase {
            Leave::List => self.list(&session).await,
            Leave::Done => self.done(&session).await,
            Leave::Wait(_) => unreachable!("handled above"),
        }
    }

    /// List: who is left, and whom to wait for.
    async fn list(&mut self, session: &Session) -> Step<Leave, ()> {
        let client = session.client();
        tracing::debug!(path = %self.path, "getChildren (who is left?)");
        let mut members = match client.list_children(self.path).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Step::zk(self.path, e, Leave::List),
        };
        members.retain(|c| c != READY_NODE);
        members.sort();
        let ours = self.name.as_ref().and_then(|n| members.iter().position(|c| c == n));
        if ours.is_none() {
            match self.own {
                Own::Present(_) => {
                    let reason = "deleted by someone else while we were inside the barrier".to_string();
                    return Step::Fail(CuratorError::OwnNodeLost { path: self.node(), reason });
                }
                // Our delete went through after all.
                Own::Deleting => self.deleted(),
                Own::Gone => {}
            }
        }
        let (Some(lowest), Some(highest)) = (members.first(), members.last()) else {
            return Step::Next(Leave::Done);
        };
        let node = self.node();
        if members.len() == 1 && ours.is_some() {
            tracing::debug!(path = %node, "delete (our node: the last member)");
            let delete = match session.delete(&node, None) {
                Ok(delete) => delete,
                Err(refused) => return Step::Fail(refused),
            };
            self.own = Own::Deleting;
            return match delete.await {
                Ok(()) | Err(zk::Error::NoNode) => {
                    self.deleted();
                    Step::Next(Leave::Done)
                }
                Err(e) => Step::zk(&node, e, Leave::List),
            };
        }
        // The lowest member waits for the highest and deletes its node last; every other member
        // deletes its node and waits for the lowest.
        let watched = path::make_path(self.path, if ours == Some(0) { highest } else { lowest });
        tracing::debug!(path = %watched, "exists+watch (waiting for it to go)");
        let watch = client.check_and_watch_stat(&watched);
        let (answer, deleted) = if ours.is_some_and(|i| i > 0) {
            tracing::debug!(path = %node, "delete (our node: leaving)");
            let delete = match session.delete(&node, None) {
                Ok(delete) => delete,
                Err(refused) => return Step::Fail(refused),
            };
            self.own = Own::Deleting;
            let (answer, deleted) = futures::join!(watch, delete);
            (answer, Some(deleted))
        } else {
            (watch.await, None)
        };
        match deleted {
            Some(Ok(()) | Err(zk::Error::NoNode)) => self.deleted(),
            Some(Err(e)) => return Step::zk(&node, e, Leave::List),
            None => {}
        }
        match answer {
            Ok((Some(_), watch)) => Step::Next(Leave::Wait(watch)),
            Ok((None, _)) => Step::Next(Leave::List),
            Err(e) => Step::zk(&watched, e, Leave::List),
        }
    }

    /// Done: every member has left; delete R.
    async fn done(&mut self, session: &Session) -> Step<Leave, ()> {
        tracing::debug!(path = %self.ready_path, "delete (every member has left)");
        let delete = match session.delete(self.ready_path, None) {
            Ok(delete) => delete,
            Err(refused) => return Step::Fail(refused),
        };
        match delete.await {
            Ok(()) | Err(zk::Error::NoNode) => Step::Finished(()),
            Err(e) => Step::zk(self.ready_path, e, Leave::Done),
        }
    }
}
