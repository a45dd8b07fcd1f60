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
//!            M is not among them             -> error (SessionExpired if its session ended,
//!                                               else OwnNodeLost: someone else deleted it)
//!            else                            -> Wait
//!   Wait   : R's watch fires, or the connection comes back                  -> Check
//!
//! leave (our node M, if still ours; members sorted by name):
//!   List   : getChildren(P), without R       -> none left: Done
//!            M missing while ours            -> error (SessionExpired, or OwnNodeLost if
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

use curator_core::deadline;
use curator_core::zk;
use curator_core::{path, CuratorError, CuratorFramework, Result};

use crate::sequential::cleanup::Cleanup;

mod enter;
mod leave;

use enter::Entering;
use leave::{Leaving, Own};

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
/// use curator_recipes::DistributedDoubleBarrier;
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
    /// use curator_recipes::DistributedDoubleBarrier;
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
    /// let mut barrier = curator_recipes::DistributedDoubleBarrier::new(&fw, "/b", 1)?;
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
    /// [`CuratorError::AlreadyHeld`] if this member is inside already; the error of a request
    /// the retry policy gave up on; [`CuratorError::SessionExpired`] if the session ended
    /// meanwhile (our node went with it); [`CuratorError::OwnNodeLost`] if someone else deleted
    /// our node; [`CuratorError::ConnectionLoss`] on a suspension
    /// under the `Standard` error policy; [`CuratorError::Closed`]. After an error our node is
    /// deleted in the background: the member is out, and may enter again.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let mut barrier = curator_recipes::DistributedDoubleBarrier::new(&fw, "/b", 4)?;
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
    /// let mut barrier = curator_recipes::DistributedDoubleBarrier::new(&fw, "/b", 4)?;
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
    /// [`CuratorError::NotHeld`] without an enter; [`CuratorError::OwnNodeLost`] if our node
    /// was deleted by someone else; [`CuratorError::SessionExpired`] if our session ended while
    /// we were inside (we were out of the barrier from then on);
    /// [`CuratorError::ConnectionLoss`] on a suspension under the `Standard` error policy; the
    /// error of a request the retry policy gave up on; [`CuratorError::Closed`]. After an
    /// error our node is deleted, and `leave` may be called
    /// again to wait for the others.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let mut barrier = curator_recipes::DistributedDoubleBarrier::new(&fw, "/b", 2)?;
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
    /// let mut barrier = curator_recipes::DistributedDoubleBarrier::new(&fw, "/b", 2)?;
    /// barrier.enter().await?;
    /// let all_out = barrier.leave_timeout(Duration::from_secs(10)).await?;
    /// # drop(all_out); Ok(()) }
    /// ```
    pub async fn leave_timeout(&mut self, max_wait: Duration) -> Result<bool> {
        self.leave_within(Some(max_wait)).await
    }

    /// Runs `call` (`enter` or `leave`, for the metrics) under a deadline `max_wait` from now
    /// (none if absent; one too long to count is a wait without end): `Ok(false)` when the
    /// deadline ends it.
    async fn within<F: std::future::Future<Output = Result<()>>>(
        name: &'static str,
        max_wait: Option<Duration>,
        call: F,
    ) -> Result<bool> {
        let at = max_wait.map(|d| deadline::deadline_after(tokio::time::Instant::now(), d));
        let result = match at {
            Some(at) => deadline::with_deadline(at, call).await,
            None => call.await,
        };
        let ended = match result {
            Ok(()) => Ok(true),
            Err(CuratorError::Timeout { .. }) if at.is_some() => Ok(false),
            Err(err) => Err(err),
        };
        super::record_wait(name, &ended);
        ended
    }

    async fn enter_within(&mut self, max_wait: Option<Duration>) -> Result<bool> {
        if let Member::Inside { node, .. } = &self.member {
            tracing::debug!(path = %self.path, node = %node, "enter while inside");
            return Err(CuratorError::AlreadyHeld {
                path: self.path.clone(),
                reason: "this member is inside the double barrier already: leave first",
            });
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
        let entered = Self::within("enter", max_wait, async {
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
                return Err(CuratorError::NotHeld { path: self.path.clone(), what: "the double barrier" });
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
        let left = Self::within("leave", max_wait, leaving.run()).await?;
        if left {
            self.member = Member::Out;
        }
        Ok(left)
    }
}
