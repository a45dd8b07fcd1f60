//! An enter of a [`DistributedDoubleBarrier`](super::DistributedDoubleBarrier): its phases, one
//! function each (the algorithm is in the parent module's docs).

use curator_core::deadline;
use curator_core::make_parents;
use curator_core::zk;
use curator_core::{path, CuratorError, CuratorFramework, Result, Session};

use super::{Step, MAX_PARENT_ATTEMPTS, READY_NODE};
use crate::barriers::Connection;
use crate::sequential::cleanup::Cleanup;

/// The phases of an enter (module docs).
pub(super) enum Enter {
    Create,
    Find,
    /// Check the barrier again (our node was made on the session of this generation).
    Check(u64),
    /// The barrier is full: create R.
    Open(u64),
    /// Wait for R's watch (or the connection).
    Wait(u64, zk::OneshotWatcher),
}

/// One enter in progress: what every phase needs.
pub(super) struct Entering<'a> {
    pub(super) fw: &'a CuratorFramework,
    pub(super) path: &'a str,
    pub(super) ready_path: &'a str,
    pub(super) member_qty: usize,
    /// Our node `P/<uuid>`.
    pub(super) node: &'a str,
    /// Deletes our node unless the enter succeeds (it is taken then).
    pub(super) cleanup: Option<Cleanup>,
    pub(super) parent_attempts: u32,
}

impl Entering<'_> {
    /// Runs the phases until we are in; returns the session generation our node was made on.
    pub(super) async fn run(&mut self) -> Result<u64> {
        let mut retry = self.fw.retry_loop();
        let mut connection = Connection::new(self.fw, Some(self.fw.error_policy()), self.node);
        let mut phase = Enter::Create;
        loop {
            let ours = match &phase {
                Enter::Check(g) | Enter::Open(g) | Enter::Wait(g, _) => Some(*g),
                Enter::Create | Enter::Find => None,
            };
            connection.check(ours)?;
            phase = match self.step(phase, &mut connection).await {
                Step::Next(next) => {
                    retry.reset();
                    next
                }
                Step::Finished(generation) => return Ok(generation),
                Step::Retry(err, next) => {
                    retry.on_error(err).await?;
                    next
                }
                Step::Fail(err) => return Err(err),
            };
        }
    }

    /// Runs one phase on the session current at that moment.
    async fn step(&mut self, phase: Enter, connection: &mut Connection) -> Step<Enter, u64> {
        if let Enter::Wait(generation, watch) = phase {
            return match self.wait(generation, watch, connection).await {
                Ok(()) => Step::Next(Enter::Check(generation)),
                Err(err) => Step::Fail(err),
            };
        }
        let session = match self.fw.session().await {
            Ok(session) => session,
            Err(err) => return Step::Retry(err, phase),
        };
        match phase {
            Enter::Create => self.create(&session).await,
            Enter::Find => self.find(&session).await,
            Enter::Check(generation) if !session.is_generation(generation) => Step::Fail(self.gone_with_session()),
            Enter::Open(generation) if !session.is_generation(generation) => Step::Fail(self.gone_with_session()),
            Enter::Check(generation) => self.check(&session, generation).await,
            Enter::Open(generation) => self.open(&session, generation).await,
            Enter::Wait(..) => unreachable!("handled above"),
        }
    }

    /// Create: our node, and behind it on the same session the first check.
    async fn create(&mut self, session: &Session) -> Step<Enter, u64> {
        // Curator creates the node with the default data through the client: compressed under
        // `enable_compression()` (section 3.10).
        let data = match self.fw.encode_data(self.node, self.fw.default_data()) {
            Ok(data) => data,
            Err(err) => return Step::Fail(err),
        };
        let client = session.client();
        let acl = self.fw.acl_for_path(self.node);
        tracing::debug!(path = %self.node, "create (ephemeral), pipelined with exists+watch {} and getChildren {}", self.ready_path, self.path);
        // All three requests are sent here, in this order, before any is awaited (none if the
        // framework's schema set refuses the create).
        let create = match session.create(self.node, &data, zk::CreateMode::Ephemeral, &acl) {
            Ok(create) => create,
            Err(refused) => return Step::Fail(refused),
        };
        let ready = client.check_and_watch_stat(self.ready_path);
        let list = client.list_children(self.path);
        let (created, ready, listed) = futures::join!(create, ready, list);
        match created {
            Ok(_) => self.decide(session, session.generation(), ready, listed),
            Err(zk::Error::NoNode) if self.parent_attempts < MAX_PARENT_ATTEMPTS => {
                self.parent_attempts += 1;
                match make_parents(self.fw, client, self.node, self.fw.use_container_parents()).await {
                    Ok(()) => Step::Next(Enter::Create),
                    Err(err) => Step::Retry(err, Enter::Create),
                }
            }
            // Only a create of ours whose reply was lost can have made this path.
            Err(zk::Error::NodeExists) => Step::Next(Enter::Find),
            Err(e) => {
                let err = CuratorError::from_zk(self.node, e);
                // Outcome unknown: our node may exist; look before creating again.
                let next = if err.is_retryable() { Enter::Find } else { Enter::Create };
                Step::Retry(err, next)
            }
        }
    }

    /// Find: after an unknown outcome, is our node there, and on which session?
    async fn find(&mut self, session: &Session) -> Step<Enter, u64> {
        let client = session.client();
        tracing::debug!(path = %self.node, "exists (our node from an earlier attempt?)");
        match client.check_stat(self.node).await {
            Ok(Some(stat)) if stat.ephemeral_owner == session.id() => Step::Next(Enter::Check(session.generation())),
            Ok(Some(_)) => {
                // Made on an older session of ours: it is going; it must not be counted.
                tracing::debug!(path = %self.node, "delete (our node from an older session)");
                let delete = match session.delete(self.node, None) {
                    Ok(delete) => delete,
                    Err(refused) => return Step::Fail(refused),
                };
                match delete.await {
                    Ok(()) | Err(zk::Error::NoNode) => Step::Next(Enter::Create),
                    Err(e) => Step::zk(self.node, e, Enter::Find),
                }
            }
            Ok(None) => Step::Next(Enter::Create),
            Err(e) => Step::zk(self.node, e, Enter::Find),
        }
    }

    /// Check: is the barrier open (R exists), and how many members are there?
    async fn check(&mut self, session: &Session, generation: u64) -> Step<Enter, u64> {
        let client = session.client();
        tracing::debug!(path = %self.ready_path, "exists+watch, pipelined with getChildren {}", self.path);
        let (ready, listed) =
            futures::join!(client.check_and_watch_stat(self.ready_path), client.list_children(self.path));
        self.decide(session, generation, ready, listed)
    }

    /// Decide from one answer about R and one listing of P: in, full (open it), or wait.
    fn decide(
        &self,
        session: &Session,
        generation: u64,
        ready: std::result::Result<(Option<zk::Stat>, zk::OneshotWatcher), zk::Error>,
        listed: std::result::Result<Vec<String>, zk::Error>,
    ) -> Step<Enter, u64> {
        let (stat, watch) = match ready {
            Ok(answer) => answer,
            Err(e) => return Step::zk(self.ready_path, e, Enter::Check(generation)),
        };
        if stat.is_some() {
            tracing::debug!(path = %self.ready_path, "the barrier is open");
            return Step::Finished(generation);
        }
        let children = match listed {
            Ok(children) => children,
            // P is gone (a container reaped after our node went with its session).
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Step::zk(self.path, e, Enter::Check(generation)),
        };
        let ours = path::node_name(self.node);
        let members = children.iter().filter(|c| *c != READY_NODE).count();
        if !children.iter().any(|c| c == ours) {
            return Step::Fail(self.missing(session, generation));
        }
        tracing::debug!(path = %self.path, members, needed = self.member_qty, "members counted");
        if members >= self.member_qty {
            Step::Next(Enter::Open(generation))
        } else {
            Step::Next(Enter::Wait(generation, watch))
        }
    }

    /// Open: the barrier is full by our count: create R, which lets everyone in.
    async fn open(&mut self, session: &Session, generation: u64) -> Step<Enter, u64> {
        let acl = self.fw.acl_for_path(self.ready_path);
        let data = match self.fw.encode_data(self.ready_path, self.fw.default_data()) {
            Ok(data) => data,
            Err(err) => return Step::Fail(err),
        };
        tracing::debug!(path = %self.ready_path, "create (the barrier is full)");
        let create = match session.create(self.ready_path, &data, zk::CreateMode::Persistent, &acl) {
            Ok(create) => create,
            Err(refused) => return Step::Fail(refused),
        };
        match create.await {
            Ok(_) | Err(zk::Error::NodeExists) => Step::Finished(generation),
            // Outcome unknown: check again (R exists if the create went through).
            Err(e) => Step::zk(self.ready_path, e, Enter::Check(generation)),
        }
    }

    /// The error for our node missing from a listing on session `session`.
    fn missing(&self, session: &Session, generation: u64) -> CuratorError {
        if !session.is_generation(generation) {
            self.gone_with_session()
        } else {
            CuratorError::OwnNodeLost {
                path: self.node.to_string(),
                reason: "deleted by someone else while we were entering the barrier".into(),
            }
        }
    }

    /// The error for our node having gone with the session that made it.
    fn gone_with_session(&self) -> CuratorError {
        tracing::debug!(path = %self.node, "our node went with its session");
        CuratorError::SessionExpired { path: self.node.to_string() }
    }

    /// Wait: for R's watch or the connection; the deadline, if any, ends it with Timeout.
    async fn wait(&self, generation: u64, watch: zk::OneshotWatcher, connection: &mut Connection) -> Result<()> {
        tracing::debug!(path = %self.ready_path, "waiting for the barrier to fill");
        deadline::until(self.ready_path, async {
            tokio::select! {
                event = watch.changed() => {
                    tracing::debug!(path = %self.ready_path, event = ?event.event_type, state = ?event.session_state, "watch fired: check again");
                    Ok(())
                }
                changed = connection.recheck_needed(Some(generation)) => changed,
            }
        })
        .await
    }
}
