//! [`DistributedDoubleBarrier`]: members enter together and leave together.
//!
//! Curator 5.x's layout and algorithm, as state machines (one per call):
//!
//! ```text
//! enter (member node M = P/<uuid>, a new uuid per enter; R = P/ready):
//!   Create : create(M, ephemeral), exists+watch(R) and getChildren(P), pipelined on one
//!            session (ZooKeeper answers in order: one round trip)          -> Decide
//!            NoNode -> create P's missing ancestors as containers, Create again
//!            outcome unknown -> Find
//!   Find   : exists(M): ours (this session)  -> Check
//!                       an older session's   -> delete it, Create
//!                       absent               -> Create
//!   Check  : exists+watch(R), getChildren(P), pipelined                     -> Decide
//!   Decide : R exists                        -> entered
//!            members (children but R) >= n   -> create R (NodeExists is fine) -> entered
//!            M is not among them             -> error (its session ended: SessionExpired)
//!            else                            -> Wait
//!   Wait   : R's watch fires, or the connection comes back                  -> Check
//!
//! leave (our node M, if still ours; members sorted by name):
//!   List   : getChildren(P), without R       -> none left: Done
//!            M missing while ours            -> error (SessionExpired, or IllegalState if
//!                                               someone else deleted it on a live session)
//!            only M left                     -> delete M, Done
//!            M is the lowest                 -> exists+watch(highest) -> gone: List, else Wait
//!            otherwise                       -> exists+watch(lowest) and delete M (pipelined)
//!                                               -> gone: List, else Wait
//!   Wait   : the watch fires, or the connection comes back                  -> List
//!   Done   : delete R (NoNode is fine)
//! ```
//!
//! Differences from Curator, each on purpose:
//! - Every wake-up leads to a new check of the condition (GH-1290): enter checks that `R`
//!   exists before it counts, so a member woken late, after others already left and deleted their
//!   nodes, still enters (Curator's count would now be short, and it would wait for ever).
//! - A member that leaves waits until every member node is gone (Curator's non-lowest members
//!   stop when one node is left); so `R` is deleted only when no member is left.
//! - An enter or leave that fails, times out or is dropped deletes our node in the background
//!   (Curator leaves it until `leave()` or the session's end, so that the others wait for it).
//!   Dropping the barrier while inside does the same.

use std::time::Duration;

use curator_core::ops::create::make_parents;
use curator_core::retry::deadline;
use curator_core::zk;
use curator_core::{path, CuratorError, CuratorFramework, Result, Session};

use super::Connection;
use crate::sequential::cleanup::Cleanup;

/// The name of the node that says the barrier is full (Curator's `READY_NODE`).
const READY_NODE: &str = "ready";

/// How many times in a row creating the container parents may still leave the create without a
/// parent (the server reaps empty containers) before giving up.
const MAX_PARENT_ATTEMPTS: u32 = 5;

/// A double barrier (Curator's `DistributedDoubleBarrier`): [`enter`](Self::enter) blocks until
/// `member_qty` members have entered, [`leave`](Self::leave) blocks until every member has left.
///
/// Each member is an ephemeral node `P/<uuid>`; the first member to count `member_qty` creates
/// `P/ready`, which lets everyone in. `member_qty` is a threshold, not a limit: more may enter.
/// A member whose session ends is out of the barrier (its node goes with the session): the
/// others do not wait for it when they leave, and its own call fails with
/// [`CuratorError::SessionExpired`]. Under [`ErrorPolicy::Standard`](curator_core::ErrorPolicy)
/// a suspension during a call fails it with [`CuratorError::ConnectionLoss`]; under `Session`
/// the call rides it out.
///
/// One handle is one member: calls take `&mut self`. A handle can enter again after it left.
///
/// ```
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::barriers::DistributedDoubleBarrier;
///
/// let workers: Vec<_> = (0..3)
///     .map(|i| {
///         let fw = fw.clone();
///         tokio::spawn(async move {
///             let mut barrier = DistributedDoubleBarrier::new(&fw, "/jobs/batch-7", 3)?;
///             barrier.enter().await?; // until all 3 are in
///             tracing::info!(worker = i, "working");
///             barrier.leave().await // until all 3 are out
///         })
///     })
///     .collect();
/// for worker in workers {
///     worker.await??;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DistributedDoubleBarrier {
    fw: CuratorFramework,
    path: String,
    ready_path: String,
    member_qty: usize,
    member: Member,
}

/// Where this member stands.
#[derive(Debug)]
enum Member {
    /// No node of ours: never entered, left, or the last enter failed.
    Out,
    /// Entered: our node exists (it was created on session `generation`); the cleanup deletes
    /// it if the handle is dropped.
    Inside { node: String, generation: u64, cleanup: Cleanup },
    /// A leave began and did not finish: our node is deleted (or being deleted), and another
    /// `leave` waits for the others to go.
    Leaving,
}

/// What became of our node during a leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    /// It exists, created on the session of this generation.
    Present(u64),
    /// A delete was sent and its outcome is unknown.
    Deleting,
    /// Deleted.
    Gone,
}

/// The phases of an enter (module docs).
enum Enter {
    Create,
    Find,
    /// Check the barrier again (our node was made on the session of this generation).
    Check(u64),
    /// The barrier is full: create R.
    Open(u64),
    /// Wait for R's watch (or the connection).
    Wait(u64, zk::OneshotWatcher),
}

/// The phases of a leave (module docs).
enum Leave {
    List,
    Wait(zk::OneshotWatcher),
    Done,
}

/// What one phase led to.
enum Step<P, T> {
    /// On to the next phase (progress: the retry loop starts a new streak).
    Next(P),
    /// The call succeeded.
    Finished(T),
    /// A request failed: the retry loop decides whether to go on with the phase given.
    Retry(CuratorError, P),
    /// The call fails, whatever the retry policy says (the session that held our node ended,
    /// a suspension under the Standard policy, the deadline, the close).
    Fail(CuratorError),
}

impl<P, T> Step<P, T> {
    /// Retry `phase` after `err` from ZooKeeper on `path`.
    fn zk(path: &str, err: zk::Error, phase: P) -> Self {
        Self::Retry(CuratorError::from_zk(path, err), phase)
    }
}

impl DistributedDoubleBarrier {
    /// A double barrier on `path` for `member_qty` members (nothing is sent yet).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] if `path` is not a valid ZooKeeper path or is `/` (the
    /// members are the path's children); [`CuratorError::InvalidArgument`] if `member_qty` is 0.
    ///
    /// ```
    /// # fn f(fw: &curator_core::CuratorFramework) {
    /// use curator_recipes::barriers::DistributedDoubleBarrier;
    /// assert!(DistributedDoubleBarrier::new(fw, "/jobs/batch-7", 3).is_ok());
    /// assert!(DistributedDoubleBarrier::new(fw, "/jobs/batch-7", 0).is_err());
    /// # }
    /// ```
    pub fn new(fw: &CuratorFramework, path: &str, member_qty: usize) -> Result<Self> {
        path::validate(path)?;
        if path == "/" {
            return Err(CuratorError::InvalidPath {
                path: path.to_string(),
                reason: "a double barrier's members are its children: it cannot be the root",
            });
        }
        if member_qty == 0 {
            return Err(CuratorError::InvalidArgument {
                path: path.to_string(),
                reason: "a double barrier needs at least one member".into(),
            });
        }
        Ok(Self {
            fw: fw.clone(),
            path: path.to_string(),
            ready_path: path::make_path(path, READY_NODE),
            member_qty,
            member: Member::Out,
        })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The number of members the barrier waits for.
    pub fn member_qty(&self) -> usize {
        self.member_qty
    }

    /// Our member node `P/<uuid>` while inside the barrier (between a successful enter and the
    /// start of a leave).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let mut barrier = curator_recipes::barriers::DistributedDoubleBarrier::new(&fw, "/b", 1)?;
    /// assert_eq!(barrier.member_path(), None);
    /// barrier.enter().await?;
    /// assert!(barrier.member_path().is_some_and(|p| p.starts_with("/b/")));
    /// # Ok(()) }
    /// ```
    pub fn member_path(&self) -> Option<&str> {
        match &self.member {
            Member::Inside { node, .. } => Some(node),
            _ => None,
        }
    }

    /// Enters the barrier and waits until `member_qty` members have entered.
    ///
    /// # Errors
    /// [`CuratorError::IllegalState`] if this member is inside already; the error of a request
    /// the retry policy gave up on; [`CuratorError::SessionExpired`] if the session ended
    /// meanwhile (our node went with it); [`CuratorError::ConnectionLoss`] on a suspension
    /// under the `Standard` error policy; [`CuratorError::Closed`]. After an error our node is
    /// deleted in the background: the member is out, and may enter again.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let mut barrier = curator_recipes::barriers::DistributedDoubleBarrier::new(&fw, "/b", 4)?;
    /// barrier.enter().await?; // the fourth member to come lets everyone in
    /// # Ok(()) }
    /// ```
    pub async fn enter(&mut self) -> Result<()> {
        self.enter_within(None).await.map(|_| ())
    }

    /// As [`enter`](Self::enter), waiting at most `max_wait`: `true` if entered, `false` if the
    /// time ran out first (our node is then deleted: we are out).
    ///
    /// # Errors
    /// As [`enter`](Self::enter).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use std::time::Duration;
    /// let mut barrier = curator_recipes::barriers::DistributedDoubleBarrier::new(&fw, "/b", 4)?;
    /// if !barrier.enter_timeout(Duration::from_secs(30)).await? {
    ///     tracing::warn!("fewer than 4 members came within 30 s");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn enter_timeout(&mut self, max_wait: Duration) -> Result<bool> {
        self.enter_within(Some(max_wait)).await
    }

    /// Leaves the barrier and waits until every member has left.
    ///
    /// # Errors
    /// [`CuratorError::IllegalState`] without an enter (or if our node was deleted by someone
    /// else); [`CuratorError::SessionExpired`] if our session ended while we were inside (we
    /// were out of the barrier from then on); [`CuratorError::ConnectionLoss`] on a suspension
    /// under the `Standard` error policy; the error of a request the retry policy gave up on;
    /// [`CuratorError::Closed`]. After an error our node is deleted, and `leave` may be called
    /// again to wait for the others.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let mut barrier = curator_recipes::barriers::DistributedDoubleBarrier::new(&fw, "/b", 2)?;
    /// barrier.enter().await?;
    /// // ... work ...
    /// barrier.leave().await?; // the other member is out too
    /// # Ok(()) }
    /// ```
    pub async fn leave(&mut self) -> Result<()> {
        self.leave_within(None).await.map(|_| ())
    }

    /// As [`leave`](Self::leave), waiting at most `max_wait`: `true` if every member left,
    /// `false` if the time ran out first (our node is deleted by then, so the others do not
    /// wait for us).
    ///
    /// # Errors
    /// As [`leave`](Self::leave).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use std::time::Duration;
    /// let mut barrier = curator_recipes::barriers::DistributedDoubleBarrier::new(&fw, "/b", 2)?;
    /// barrier.enter().await?;
    /// let all_out = barrier.leave_timeout(Duration::from_secs(10)).await?;
    /// # drop(all_out); Ok(()) }
    /// ```
    pub async fn leave_timeout(&mut self, max_wait: Duration) -> Result<bool> {
        self.leave_within(Some(max_wait)).await
    }

    /// Runs `call` under a deadline `max_wait` from now (none if absent or too long to add):
    /// `Ok(false)` when the deadline ends it.
    async fn within<F: std::future::Future<Output = Result<()>>>(max_wait: Option<Duration>, call: F) -> Result<bool> {
        let at = max_wait.and_then(|d| tokio::time::Instant::now().checked_add(d));
        let result = match at {
            Some(at) => deadline::with_deadline(at, call).await,
            None => call.await,
        };
        match result {
            Ok(()) => Ok(true),
            Err(CuratorError::Timeout { .. }) if at.is_some() => Ok(false),
            Err(err) => Err(err),
        }
    }

    async fn enter_within(&mut self, max_wait: Option<Duration>) -> Result<bool> {
        if let Member::Inside { node, .. } = &self.member {
            return Err(CuratorError::IllegalState(format!(
                "already inside the double barrier {} (as {node}): leave first",
                self.path
            )));
        }
        let node = path::make_path(&self.path, &uuid::Uuid::new_v4().to_string());
        let mut entering = Entering {
            fw: &self.fw,
            path: &self.path,
            ready_path: &self.ready_path,
            member_qty: self.member_qty,
            node: &node,
            cleanup: Some(Cleanup::of_node(&self.fw, &node)),
            parent_attempts: 0,
        };
        let mut generation = 0;
        let entered = Self::within(max_wait, async {
            generation = entering.run().await?;
            Ok(())
        })
        .await?;
        if entered {
            if let Some(cleanup) = entering.cleanup.take() {
                tracing::debug!(path = %node, generation, "entered the double barrier");
                self.member = Member::Inside { node, generation, cleanup };
            }
        } else {
            tracing::debug!(path = %node, "enter timed out: our node is deleted");
        }
        // Otherwise the cleanup, dropped with `entering`, deletes our node.
        Ok(entered)
    }

    async fn leave_within(&mut self, max_wait: Option<Duration>) -> Result<bool> {
        // From here on, whatever happens to this call, our node is on its way out.
        let own = match std::mem::replace(&mut self.member, Member::Leaving) {
            Member::Inside { node, generation, cleanup } => Some((node, generation, cleanup)),
            Member::Leaving => None,
            Member::Out => {
                self.member = Member::Out;
                return Err(CuratorError::IllegalState(format!(
                    "leave without enter on the double barrier {}",
                    self.path
                )));
            }
        };
        let mut leaving = Leaving {
            fw: &self.fw,
            path: &self.path,
            ready_path: &self.ready_path,
            name: own.as_ref().map(|(node, _, _)| path::node_name(node).to_string()),
            own: own.as_ref().map_or(Own::Gone, |(_, generation, _)| Own::Present(*generation)),
            cleanup: own.map(|(_, _, cleanup)| cleanup),
        };
        let left = Self::within(max_wait, leaving.run()).await?;
        if left {
            self.member = Member::Out;
        }
        Ok(left)
    }
}

/// One enter in progress: what every phase needs.
struct Entering<'a> {
    fw: &'a CuratorFramework,
    path: &'a str,
    ready_path: &'a str,
    member_qty: usize,
    /// Our node `P/<uuid>`.
    node: &'a str,
    /// Deletes our node unless the enter succeeds (it is taken then).
    cleanup: Option<Cleanup>,
    parent_attempts: u32,
}

impl Entering<'_> {
    /// Runs the phases until we are in; returns the session generation our node was made on.
    async fn run(&mut self) -> Result<u64> {
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
            Enter::Check(generation) if session.generation() != generation => Step::Fail(self.gone_with_session()),
            Enter::Open(generation) if session.generation() != generation => Step::Fail(self.gone_with_session()),
            Enter::Check(generation) => self.check(&session, generation).await,
            Enter::Open(generation) => self.open(&session, generation).await,
            Enter::Wait(..) => unreachable!("handled above"),
        }
    }

    /// Create: our node, and behind it on the same session the first check.
    async fn create(&mut self, session: &Session) -> Step<Enter, u64> {
        let client = session.client();
        let acl = self.fw.acl_for_path(self.node);
        let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&acl));
        tracing::debug!(path = %self.node, "create (ephemeral), pipelined with exists+watch {} and getChildren {}", self.ready_path, self.path);
        // All three requests are sent here, in this order, before any is awaited.
        let create = client.create(self.node, self.fw.default_data(), &options);
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
                match client.delete(self.node, None).await {
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
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acl));
        tracing::debug!(path = %self.ready_path, "create (the barrier is full)");
        match session.client().create(self.ready_path, self.fw.default_data(), &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => Step::Finished(generation),
            // Outcome unknown: check again (R exists if the create went through).
            Err(e) => Step::zk(self.ready_path, e, Enter::Check(generation)),
        }
    }

    /// The error for our node missing from a listing on session `session`.
    fn missing(&self, session: &Session, generation: u64) -> CuratorError {
        if session.generation() != generation {
            self.gone_with_session()
        } else {
            CuratorError::IllegalState(format!("our member node {} was deleted by someone else", self.node))
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

/// One leave in progress.
struct Leaving<'a> {
    fw: &'a CuratorFramework,
    path: &'a str,
    ready_path: &'a str,
    /// Our node's name, if we had one when the leave began.
    name: Option<String>,
    own: Own,
    /// Deletes our node unless the leave deleted it (disarmed then).
    cleanup: Option<Cleanup>,
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
    async fn run(&mut self) -> Result<()> {
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
        if self.present().is_some_and(|generation| generation != session.generation()) {
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
                    let msg = format!("our member node {} was deleted by someone else", self.node());
                    return Step::Fail(CuratorError::IllegalState(msg));
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
            self.own = Own::Deleting;
            return match client.delete(&node, None).await {
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
            self.own = Own::Deleting;
            let (answer, deleted) = futures::join!(watch, client.delete(&node, None));
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
        match session.client().delete(self.ready_path, None).await {
            Ok(()) | Err(zk::Error::NoNode) => Step::Finished(()),
            Err(e) => Step::zk(self.ready_path, e, Leave::Done),
        }
    }
}
