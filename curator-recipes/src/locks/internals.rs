//! The lock core shared by every lock recipe (Curator's `LockInternals`): a lock name, a rule
//! deciding "mine, or which nodes to wait for" ([`Predicate`]), and one acquire algorithm.
//!
//! # The algorithm (one screen)
//!
//! ```text
//! Create  : send create(P/_c_<uuid>-<name>, ephemeral sequential) and, right behind it on the
//!           same session, getChildren(P). ZooKeeper answers in order, so the listing already
//!           shows our node: 2 round trips when uncontended.
//!           NoNode -> create the container parents, then Create again.
//!           outcome unknown (connection lost) -> Find.
//! Find    : list P and look for our protected prefix. Found on this session -> Decide with it;
//!           found from an older session -> delete it, Create; not found -> Create.
//! List    : getChildren(P) -> Decide.
//! Decide  : order contenders by the sequence number after the lock name, then ask the
//!           predicate:  Hold -> done.
//!                       Wait(nodes, then) -> getData+watch each node (pipelined); wait until
//!                         they are deleted. then = Hold: hold without listing again (lower
//!                         sequence numbers never come back); then = Recheck: List.
//!                         Any other watch event (a Session event on disconnection, a data
//!                         change) means "re-check": List.
//!                       Missing (our node is not listed: its session is gone) -> Find.
//! ```
//!
//! Every phase runs on the session current at that moment; a phase whose node belongs to an
//! older session goes to Find. Failures whose outcome is unknown are retried under the
//! framework's retry policy. Dropping the acquire future at any point leaves a [`Cleanup`]
//! behind that deletes our node (by its path when known, else by its protected prefix).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use curator_core::background::spawn_detached;
use curator_core::ops::create::make_parents;
use curator_core::zk;
use curator_core::{
    path, ConnectionState, ConnectionStateEvent, CuratorError, CuratorFramework, ErrorPolicy, Result, Session,
};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::watch;
use tracing::Instrument;

/// The lock name of [`InterProcessMutex`](super::InterProcessMutex) nodes: `P/_c_<uuid>-lock-<seq>`.
pub const MUTEX_LOCK_NAME: &str = "lock-";
/// The lock name of read-lock nodes: `P/_c_<uuid>-__READ__<seq>`.
pub const READ_LOCK_NAME: &str = "__READ__";
/// The lock name of write-lock nodes: `P/_c_<uuid>-__WRIT__<seq>`.
pub const WRITE_LOCK_NAME: &str = "__WRIT__";
/// The data a [`Revoker`](super::Revoker) writes into a holder's node.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";
/// Child of a semaphore's path holding the mutex that serialises lease takers.
pub const SEMAPHORE_LOCK_PARENT: &str = "locks";
/// Child of a semaphore's path holding the leases.
pub const SEMAPHORE_LEASE_PARENT: &str = "leases";
/// The lock name of lease nodes: `P/leases/_c_<uuid>-lease-<seq>`.
pub const LEASE_NAME: &str = "lease-";
/// A waiter with at most this many nodes to outlast watches all of them and holds once all are
/// gone, instead of watching one and listing again after its deletion (DESIGN.md section 8).
pub const WATCH_ALL_LIMIT: usize = 8;

/// One node under the lock path with a sequence number, as ordered by the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender {
    pub(crate) name: String,
    pub(crate) sequence: i64,
}

impl Contender {
    pub(crate) fn is_writer(&self) -> bool {
        self.name.contains(WRITE_LOCK_NAME)
    }
}

/// The contenders among `children`: names with a sequence number after one of `lock_names`,
/// ordered by that number (then by name). Other children are ignored.
pub(crate) fn contenders(children: &[String], lock_names: &[&str]) -> Vec<Contender> {
    let mut out: Vec<Contender> = children
        .iter()
        .filter_map(|name| {
            lock_names
                .iter()
                .find_map(|ln| path::sequence_after(name, ln))
                .map(|sequence| Contender { name: name.clone(), sequence })
        })
        .collect();
    out.sort_by(|a, b| (a.sequence, &a.name).cmp(&(b.sequence, &b.name)));
    out
}

/// What a waiter does once every watched node is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterWatch {
    /// Hold the lock: the watched nodes were all that stood before us.
    Hold,
    /// List the children again and decide.
    Recheck,
}

/// The predicate's answer for one listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// We hold the lock.
    Hold,
    /// Wait for these nodes (names) to be deleted.
    Wait { nodes: Vec<String>, then: AfterWatch },
    /// Our node is not among the children.
    Missing,
}

/// Decides, from the ordered contenders, whether a node holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Predicate {
    /// The first `n` contenders hold (mutex and write lock: 1).
    Leases(usize),
    /// A reader holds when no write node is before it, or at once when this handle holds the
    /// write lock (`holds_write`).
    Read { holds_write: bool },
}

impl Predicate {
    pub(crate) fn decide(self, sorted: &[Contender], ours: &str) -> Verdict {
        let Some(index) = sorted.iter().position(|c| c.name == ours) else { return Verdict::Missing };
        match self {
            Predicate::Leases(n) => {
                let n = n.max(1);
                if index < n {
                    return Verdict::Hold;
                }
                // The first `blocking` contenders must go before we are within the first n.
                let blocking = index + 1 - n;
                if blocking <= WATCH_ALL_LIMIT {
                    // A write node's holder may add, before deleting it, a read node with the
                    // same (lower) sequence (Curator 5.5's downgrade): after a write node goes,
                    // list again. Lock and read nodes are always sequential: they never come back.
                    let watched = &sorted[..blocking];
                    let then =
                        if watched.iter().any(Contender::is_writer) { AfterWatch::Recheck } else { AfterWatch::Hold };
                    Verdict::Wait { nodes: names(watched), then }
                } else {
                    Verdict::Wait { nodes: vec![sorted[index - n].name.clone()], then: AfterWatch::Recheck }
                }
            }
            Predicate::Read { holds_write: true } => Verdict::Hold,
            Predicate::Read { holds_write: false } => {
                // Only writers queued before us matter; writers after us wait for us.
                let writers: Vec<&Contender> = sorted[..index].iter().filter(|c| c.is_writer()).collect();
                match writers.first() {
                    None => Verdict::Hold,
                    Some(_) if writers.len() <= WATCH_ALL_LIMIT => Verdict::Wait {
                        nodes: writers.iter().map(|c| c.name.clone()).collect(),
                        then: AfterWatch::Hold,
                    },
                    Some(first) => Verdict::Wait { nodes: vec![first.name.clone()], then: AfterWatch::Recheck },
                }
            }
        }
    }
}

fn names(cs: &[Contender]) -> Vec<String> {
    cs.iter().map(|c| c.name.clone()).collect()
}

/// A lock node this process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockNode {
    /// Full path of the node (relative to the framework's namespace).
    pub path: String,
    /// Its sequence number.
    pub sequence: i64,
    /// The zxid that created it.
    pub czxid: i64,
    /// The fencing token: `czxid`, except for a read node taken under the write lock (a
    /// downgrade), which continues that hold and carries the write node's token, so that
    /// tokens keep growing with acquisition order among holds that exclude each other.
    pub fencing_token: i64,
    /// The framework session generation it was created on.
    pub generation: u64,
    /// The ZooKeeper session that owns it.
    pub session_id: i64,
}

impl LockNode {
    /// Our node at `path`, as its stat and the session it was found on describe it.
    fn ours(path: String, sequence: i64, stat: &zk::Stat, kind: NodeKind, session: &Session) -> Self {
        LockNode {
            path,
            sequence,
            czxid: stat.czxid,
            fencing_token: kind.token(stat.czxid),
            generation: session.generation(),
            session_id: session.id(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        path::node_name(&self.path)
    }
}

/// How to create a node for one acquire.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NodeKind {
    /// Ephemeral sequential `P/_c_<uuid>-<name><seq>`.
    Sequential,
    /// Ephemeral `P/_c_<uuid>-<name><seq>` with a given sequence (Curator 5.5's read node taken
    /// under the write lock), to be created on session `generation` only, with the write
    /// node's fencing token.
    Fixed { sequence: i64, generation: u64, token: i64 },
}

impl NodeKind {
    fn token(self, czxid: i64) -> i64 {
        match self {
            NodeKind::Sequential => czxid,
            NodeKind::Fixed { token, .. } => token,
        }
    }
}

/// The shared lock core: where the lock lives and how its nodes are named and ordered.
#[derive(Debug, Clone)]
pub(crate) struct LockInternals {
    fw: CuratorFramework,
    base_path: String,
    lock_name: &'static str,
    /// Names after which the sequence number is read, for ordering.
    sort_names: &'static [&'static str],
}

/// The phases of one acquire (see the module docs).
enum Phase {
    Create,
    Find,
    List(LockNode),
    Decide(LockNode, Vec<String>),
}

/// What one wait on watched nodes ended with.
enum WaitEnd {
    AllGone,
    Recheck,
}

/// How many times in a row creating the container parents may still leave the create without a
/// parent (the server reaps empty containers) before giving up.
const MAX_PARENT_ATTEMPTS: u32 = 5;

impl LockInternals {
    /// Validates `base_path` and builds the core. Nothing is sent.
    pub(crate) fn new(
        fw: &CuratorFramework,
        base_path: &str,
        lock_name: &'static str,
        sort_names: &'static [&'static str],
    ) -> Result<Self> {
        path::validate(base_path)?;
        Ok(Self { fw: fw.clone(), base_path: base_path.to_string(), lock_name, sort_names })
    }

    pub(crate) fn framework(&self) -> &CuratorFramework {
        &self.fw
    }

    pub(crate) fn base_path(&self) -> &str {
        &self.base_path
    }

    /// The children of the lock path that are contenders, ordered, as full paths.
    pub(crate) async fn participant_nodes(&self, filter: Option<&str>) -> Result<Vec<String>> {
        let base = self.base_path.clone();
        let children = self
            .fw
            .call_with_retry("lock-participants", &base, |session, _| {
                let base = base.clone();
                async move {
                    tracing::debug!(path = %base, "getChildren");
                    match session.client().list_children(&base).await {
                        Ok(c) => Ok(c),
                        Err(zk::Error::NoNode) => Ok(Vec::new()),
                        Err(e) => Err(CuratorError::from_zk(&base, e)),
                    }
                }
            })
            .await?;
        Ok(contenders(&children, self.sort_names)
            .into_iter()
            .filter(|c| filter.map_or(true, |f| c.name.contains(f)))
            .map(|c| path::make_path(&self.base_path, &c.name))
            .collect())
    }

    /// Acquires under `predicate` with node data `data`. Returns the node once held. Cancel
    /// safe: dropping the future deletes whatever node it made.
    pub(crate) async fn acquire(&self, data: &[u8], kind: NodeKind, predicate: Predicate) -> Result<LockNode> {
        let span = tracing::debug_span!("lock_acquire", path = %self.base_path, lock = self.lock_name);
        self.acquire_inner(data, kind, predicate).instrument(span).await
    }

    async fn acquire_inner(&self, data: &[u8], kind: NodeKind, predicate: Predicate) -> Result<LockNode> {
        let id = uuid::Uuid::new_v4();
        let prefix = path::protected_name(&id, "");
        let base = match kind {
            NodeKind::Sequential => path::make_path(&self.base_path, &format!("{prefix}{}", self.lock_name)),
            NodeKind::Fixed { sequence, .. } => path::make_path(
                &self.base_path,
                &format!("{prefix}{}{}", self.lock_name, path::format_sequence(sequence)),
            ),
        };
        let mut cleanup = Cleanup::new(&self.fw, &self.base_path, &prefix);
        let mut started = Instant::now();
        let mut retries = 0u32;
        let mut parent_attempts = 0u32;
        let mut phase = Phase::Create;
        loop {
            let step =
                self.step(phase, &base, &prefix, data, kind, predicate, &mut cleanup, &mut parent_attempts).await;
            phase = match step {
                Ok(Step::Next(next)) => {
                    // Each failure streak gets the whole retry policy (waiting is not failing).
                    retries = 0;
                    started = Instant::now();
                    next
                }
                Ok(Step::Held(node)) => {
                    cleanup.disarm();
                    tracing::debug!(path = %node.path, czxid = node.czxid, "lock held");
                    return Ok(node);
                }
                Err((err, next)) if self.fw.retry_policy().allow_retry_on(&err) && !self.fw.is_closed() => {
                    match self.fw.retry_policy().allow_retry(retries, started.elapsed()) {
                        Some(sleep) => {
                            tracing::debug!(path = %self.base_path, error = %err, retries, "lock: retrying");
                            tokio::time::sleep(sleep).await;
                            retries += 1;
                            next
                        }
                        None => return Err(err),
                    }
                }
                Err((err, _)) => return Err(err),
            };
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn step(
        &self,
        phase: Phase,
        base: &str,
        prefix: &str,
        data: &[u8],
        kind: NodeKind,
        predicate: Predicate,
        cleanup: &mut Cleanup,
        parent_attempts: &mut u32,
    ) -> std::result::Result<Step, (CuratorError, Phase)> {
        let session = self.fw.session().await.map_err(|e| (e, Phase::Find))?;
        let client = session.client();
        match phase {
            Phase::Create => {
                if let NodeKind::Fixed { generation, .. } = kind {
                    if generation != session.generation() {
                        let reason = "the write lock's session is gone: cannot take the read lock under it";
                        return Err((CuratorError::IllegalState(reason.into()), Phase::Create));
                    }
                }
                let mode = match kind {
                    NodeKind::Sequential => zk::CreateMode::EphemeralSequential,
                    NodeKind::Fixed { .. } => zk::CreateMode::Ephemeral,
                };
                let acl = self.fw.acl_for_path(base);
                let options = mode.with_acls(zk::Acls::new(&acl));
                tracing::debug!(path = %base, "create (pipelined with getChildren {})", self.base_path);
                // Both requests are sent here, in this order, before either is awaited.
                let create = client.create(base, data, &options);
                let list = client.list_children(&self.base_path);
                let (created, listed) = futures::join!(create, list);
                match created {
                    Ok((stat, sequence)) => {
                        let (path, sequence) = match kind {
                            NodeKind::Sequential => {
                                let seq = sequence.into_i64();
                                (format!("{base}{}", path::format_sequence(seq)), seq)
                            }
                            NodeKind::Fixed { sequence, .. } => (base.to_string(), sequence),
                        };
                        let node = LockNode::ours(path, sequence, &stat, kind, &session);
                        cleanup.known(&node.path);
                        match listed {
                            Ok(children) => Ok(Step::Next(Phase::Decide(node, children))),
                            Err(e) => Err((CuratorError::from_zk(&self.base_path, e), Phase::List(node))),
                        }
                    }
                    Err(zk::Error::NoNode) if *parent_attempts < MAX_PARENT_ATTEMPTS => {
                        *parent_attempts += 1;
                        make_parents(&self.fw, client, base, self.fw.use_container_parents())
                            .await
                            .map_err(|e| (e, Phase::Create))?;
                        Ok(Step::Next(Phase::Create))
                    }
                    Err(e) => {
                        let err = CuratorError::from_zk(base, e);
                        // Outcome unknown: our node may exist; look for it before creating again.
                        let next = if err.is_retryable() { Phase::Find } else { Phase::Create };
                        Err((err, next))
                    }
                }
            }
            Phase::Find => {
                tracing::debug!(path = %self.base_path, prefix, "getChildren (find our node)");
                let children = match client.list_children(&self.base_path).await {
                    Ok(c) => c,
                    Err(zk::Error::NoNode) => return Ok(Step::Next(Phase::Create)),
                    Err(e) => return Err((CuratorError::from_zk(&self.base_path, e), Phase::Find)),
                };
                let Some(name) = children.iter().find(|c| c.starts_with(prefix)).cloned() else {
                    return Ok(Step::Next(Phase::Create));
                };
                let found = path::make_path(&self.base_path, &name);
                tracing::debug!(path = %found, "exists (our node from an earlier attempt?)");
                let stat = match client.check_stat(&found).await {
                    Ok(Some(stat)) => stat,
                    Ok(None) => return Ok(Step::Next(Phase::Create)),
                    Err(e) => return Err((CuratorError::from_zk(&found, e), Phase::Find)),
                };
                let sequence = self.sort_names.iter().find_map(|ln| path::sequence_after(&name, ln));
                match sequence {
                    Some(sequence) if stat.ephemeral_owner == session.id() => {
                        let node = LockNode::ours(found, sequence, &stat, kind, &session);
                        cleanup.known(&node.path);
                        Ok(Step::Next(Phase::Decide(node, children)))
                    }
                    _ => {
                        // Left by an older session of ours: it is going; do not wait for it.
                        tracing::debug!(path = %found, "delete (our node from an old session)");
                        match client.delete(&found, None).await {
                            Ok(()) | Err(zk::Error::NoNode) => Ok(Step::Next(Phase::Create)),
                            Err(e) => Err((CuratorError::from_zk(&found, e), Phase::Find)),
                        }
                    }
                }
            }
            Phase::List(node) => {
                if node.generation != session.generation() {
                    return Ok(Step::Next(Phase::Find));
                }
                tracing::debug!(path = %self.base_path, "getChildren");
                match client.list_children(&self.base_path).await {
                    Ok(children) => Ok(Step::Next(Phase::Decide(node, children))),
                    Err(zk::Error::NoNode) => Ok(Step::Next(Phase::Find)),
                    Err(e) => Err((CuratorError::from_zk(&self.base_path, e), Phase::List(node))),
                }
            }
            Phase::Decide(node, children) => {
                if node.generation != session.generation() {
                    return Ok(Step::Next(Phase::Find));
                }
                let sorted = contenders(&children, self.sort_names);
                match predicate.decide(&sorted, node.name()) {
                    Verdict::Hold => Ok(Step::Held(node)),
                    Verdict::Missing => {
                        tracing::debug!(path = %node.path, "our node is not among the children");
                        Ok(Step::Next(Phase::Find))
                    }
                    Verdict::Wait { nodes, then } => match self.wait_for(&session, &nodes).await {
                        Ok(WaitEnd::AllGone) if then == AfterWatch::Hold => Ok(Step::Held(node)),
                        Ok(_) => Ok(Step::Next(Phase::List(node))),
                        Err(e) => Err((e, Phase::List(node))),
                    },
                }
            }
        }
    }

    /// Watches every node in `names` (requests pipelined) and waits until all are deleted, or
    /// until another event calls for a re-check.
    async fn wait_for(&self, session: &Session, names: &[String]) -> Result<WaitEnd> {
        let client = session.client();
        let paths: Vec<String> = names.iter().map(|n| path::make_path(&self.base_path, n)).collect();
        for p in &paths {
            tracing::debug!(path = %p, "getData+watch (waiting for its deletion)");
        }
        let requests: Vec<_> = paths.iter().map(|p| client.get_and_watch_data(p)).collect();
        let answers = futures::future::join_all(requests).await;
        let mut watchers = FuturesUnordered::new();
        for (answer, p) in answers.into_iter().zip(&paths) {
            match answer {
                Ok((_, _, watcher)) => watchers.push(watcher.changed()),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(CuratorError::from_zk(p, e)),
            }
        }
        while let Some(event) = watchers.next().await {
            match event.event_type {
                zk::EventType::NodeDeleted => tracing::debug!(path = %event.path, "watched node deleted"),
                other => {
                    tracing::debug!(path = %event.path, event = ?other, state = ?event.session_state, "watch fired: re-check");
                    return Ok(WaitEnd::Recheck);
                }
            }
        }
        Ok(WaitEnd::AllGone)
    }
}

enum Step {
    Next(Phase),
    Held(LockNode),
}

/// Deletes an abandoned acquire's node when dropped while armed: by its path once known, else
/// every child of the lock path with our protected prefix (the create's outcome is unknown).
pub(crate) struct Cleanup {
    fw: CuratorFramework,
    parent: String,
    prefix: String,
    path: Option<String>,
    armed: bool,
}

impl Cleanup {
    pub(crate) fn new(fw: &CuratorFramework, parent: &str, prefix: &str) -> Self {
        Self { fw: fw.clone(), parent: parent.to_string(), prefix: prefix.to_string(), path: None, armed: true }
    }

    pub(crate) fn known(&mut self, path: &str) {
        self.path = Some(path.to_string());
    }

    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let fw = self.fw.clone();
        let parent = std::mem::take(&mut self.parent);
        let prefix = std::mem::take(&mut self.prefix);
        let known = self.path.take();
        self.fw.spawn_background(async move {
            tracing::debug!(parent = %parent, prefix = %prefix, path = ?known, "abandoned acquire: deleting our node");
            let result = match known {
                Some(p) => fw.delete().guaranteed().quietly().for_path(&p).await,
                None => fw.delete_protected(&parent, &prefix, None).await,
            };
            if let Err(err) = result {
                if !matches!(err, CuratorError::Closed) {
                    fw.report_unhandled(&format!("could not delete an abandoned lock node under {parent}"), &err);
                }
            }
        });
    }
}

/// Why a held lock may no longer be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockLost {
    /// The connection was suspended (an error under [`ErrorPolicy::Standard`]): another client
    /// may hold the lock once our session expires.
    Suspended,
    /// The session that owns our node is gone, and the node with it.
    SessionLost,
    /// Our node was deleted by someone else.
    NodeDeleted,
    /// The framework was closed.
    Closed,
    /// We released the lock.
    Released,
}

impl std::fmt::Display for LockLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            LockLost::Suspended => "the connection was suspended",
            LockLost::SessionLost => "the session was lost",
            LockLost::NodeDeleted => "the lock node was deleted",
            LockLost::Closed => "the framework was closed",
            LockLost::Released => "the lock was released",
        };
        f.write_str(text)
    }
}

/// Whether the connection event `now`, seen after `at_hold`, means the lock may be lost.
fn judge(
    policy: ErrorPolicy,
    generation: u64,
    at_hold: &ConnectionStateEvent,
    now: &ConnectionStateEvent,
) -> Option<LockLost> {
    if now.generation != generation && now.generation != 0 {
        return Some(LockLost::SessionLost);
    }
    match now.state {
        ConnectionState::Lost => Some(LockLost::SessionLost),
        ConnectionState::Closed => Some(LockLost::Closed),
        ConnectionState::Suspended if policy == ErrorPolicy::Standard => Some(LockLost::Suspended),
        // Every transition after a connected hold passed through a suspension.
        _ if policy == ErrorPolicy::Standard && now.seq != at_hold.seq => Some(LockLost::Suspended),
        _ if now.new_session && now.seq != at_hold.seq => Some(LockLost::SessionLost),
        _ => None,
    }
}

/// One hold of one lock node, shared by the guards of a reentrant handle.
#[derive(Debug)]
pub(crate) struct Hold {
    fw: CuratorFramework,
    node: LockNode,
    at_hold: ConnectionStateEvent,
    lost: watch::Sender<Option<LockLost>>,
    monitoring: AtomicBool,
}

impl Hold {
    pub(crate) fn new(fw: &CuratorFramework, node: LockNode) -> Arc<Self> {
        let at_hold = fw.connection_state_watch().borrow().clone();
        let hold = Arc::new(Self {
            fw: fw.clone(),
            node,
            at_hold,
            lost: watch::channel(None).0,
            monitoring: AtomicBool::new(false),
        });
        hold.check_connection();
        hold
    }

    pub(crate) fn node(&self) -> &LockNode {
        &self.node
    }

    fn mark(&self, reason: LockLost) {
        self.lost.send_if_modified(|slot| {
            if slot.is_none() {
                if reason == LockLost::Released {
                    tracing::debug!(path = %self.node.path, "hold ended: released");
                } else {
                    tracing::warn!(path = %self.node.path, %reason, "lock may be lost");
                }
                *slot = Some(reason);
                true
            } else {
                false
            }
        });
    }

    fn check_connection(&self) {
        let now = self.fw.connection_state_watch().borrow().clone();
        if let Some(reason) = judge(self.fw.error_policy(), self.node.generation, &self.at_hold, &now) {
            self.mark(reason);
        }
    }

    pub(crate) fn lost_reason(&self) -> Option<LockLost> {
        self.check_connection();
        *self.lost.borrow()
    }

    pub(crate) fn is_held(&self) -> bool {
        self.lost_reason().is_none()
    }

    /// A receiver that turns `Some` when the lock may be lost; starts the monitor (one watch on
    /// our node, and the connection state) on first use.
    pub(crate) fn lost_watch(self: &Arc<Self>) -> watch::Receiver<Option<LockLost>> {
        if !self.monitoring.swap(true, Ordering::AcqRel) {
            let weak = Arc::downgrade(self);
            let rx = self.lost.subscribe();
            spawn_detached(monitor(weak, rx, self.fw.clone(), self.node.clone(), self.at_hold.clone()));
        }
        self.lost.subscribe()
    }

    /// Deletes our node (guaranteed: continues in the background after a connection loss).
    pub(crate) async fn release(&self) -> Result<()> {
        self.mark(LockLost::Released);
        tracing::debug!(path = %self.node.path, "delete (release)");
        match self.fw.delete().guaranteed().quietly().for_path(&self.node.path).await {
            Ok(()) | Err(CuratorError::Closed) => Ok(()),
            Err(e) if e.is_retryable() => {
                // The guaranteed delete continues in the background; a lost session took the
                // node anyway.
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Releases in the background (a guard dropped without `release`).
    pub(crate) fn release_in_background(self: Arc<Self>) {
        self.mark(LockLost::Released);
        let fw = self.fw.clone();
        fw.spawn_background(async move {
            if let Err(err) = self.release().await {
                self.fw.report_unhandled(&format!("could not release lock node {}", self.node.path), &err);
            }
        });
    }
}

/// Watches the connection and our node until the lock is lost or released.
async fn monitor(
    hold: std::sync::Weak<Hold>,
    mut lost: watch::Receiver<Option<LockLost>>,
    fw: CuratorFramework,
    node: LockNode,
    at_hold: ConnectionStateEvent,
) {
    let mut conn = fw.connection_state_watch();
    let policy = fw.error_policy();
    let mark = |reason| {
        if let Some(h) = hold.upgrade() {
            h.mark(reason)
        }
    };
    loop {
        if lost.borrow_and_update().is_some() {
            return;
        }
        let now = conn.borrow_and_update().clone();
        if let Some(reason) = judge(policy, node.generation, &at_hold, &now) {
            mark(reason);
            return;
        }
        // Arm a watch on our node, on its own session.
        let watcher = if now.state.is_connected() {
            match fw.session().await {
                Ok(s) if s.generation() != node.generation => {
                    mark(LockLost::SessionLost);
                    return;
                }
                Ok(s) => {
                    tracing::debug!(path = %node.path, "exists+watch (lock monitor)");
                    match s.client().check_and_watch_stat(&node.path).await {
                        Ok((None, _)) => {
                            mark(LockLost::NodeDeleted);
                            return;
                        }
                        Ok((Some(_), w)) => Some(w),
                        Err(_) => None,
                    }
                }
                Err(CuratorError::Closed) => {
                    mark(LockLost::Closed);
                    return;
                }
                Err(_) => None,
            }
        } else {
            None
        };
        match watcher {
            Some(w) => {
                tokio::select! {
                    r = lost.changed() => if r.is_err() { return },
                    r = conn.changed() => if r.is_err() { mark(LockLost::Closed); return },
                    ev = w.changed() => {
                        if ev.event_type == zk::EventType::NodeDeleted {
                            mark(LockLost::NodeDeleted);
                            return;
                        }
                    }
                }
            }
            None => {
                tokio::select! {
                    r = lost.changed() => if r.is_err() { return },
                    r = conn.changed() => if r.is_err() { mark(LockLost::Closed); return },
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        }
    }
}

/// Watches a holder's node for [`REVOKE_MESSAGE`] and calls `on_revoke` each time it is
/// written, until the hold ends.
pub(crate) fn watch_revocation(hold: &Arc<Hold>, on_revoke: Arc<dyn Fn() + Send + Sync>) {
    let weak = Arc::downgrade(hold);
    let mut lost = hold.lost.subscribe();
    let fw = hold.fw.clone();
    let node = hold.node.clone();
    spawn_detached(async move {
        loop {
            if lost.borrow_and_update().is_some() || weak.upgrade().is_none() {
                return;
            }
            let session = match fw.session().await {
                Ok(s) if s.generation() == node.generation => s,
                _ => return,
            };
            tracing::debug!(path = %node.path, "getData+watch (revocation)");
            let watcher = match session.client().get_and_watch_data(&node.path).await {
                Ok((data, _, w)) => {
                    if data == REVOKE_MESSAGE {
                        let f = on_revoke.clone();
                        drop(tokio::task::spawn_blocking(move || f()));
                    }
                    w
                }
                Err(zk::Error::NoNode) => return,
                Err(_) => {
                    tokio::select! {
                        r = lost.changed() => if r.is_err() { return },
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    }
                    continue;
                }
            };
            tokio::select! {
                r = lost.changed() => if r.is_err() { return },
                ev = watcher.changed() => if ev.event_type == zk::EventType::NodeDeleted { return },
            }
        }
    });
}

/// Names of `children` among `sorted` that are in `set` (test helper for predicates).
#[cfg(test)]
fn names_in(sorted: &[Contender], set: &std::collections::HashSet<&str>) -> Vec<String> {
    sorted.iter().filter(|c| set.contains(c.name.as_str())).map(|c| c.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn kids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn guards_may_move_between_tasks() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<crate::locks::LockGuard>();
        send_sync::<crate::locks::MultiLockGuard>();
        send_sync::<crate::locks::Lease>();
        send_sync::<crate::locks::InterProcessMutex>();
        send_sync::<crate::locks::InterProcessReadWriteLock>();
        send_sync::<crate::locks::InterProcessSemaphoreV2>();
        send_sync::<crate::locks::InterProcessSemaphoreMutex>();
    }

    #[test]
    fn orders_by_sequence_not_name_and_ignores_garbage() {
        let c = contenders(
            &kids(&["_c_b-lock-0000000010", "_c_a-lock-0000000002", "junk", "lock-", "x-lock-12a"]),
            &[MUTEX_LOCK_NAME],
        );
        assert_eq!(names(&c), kids(&["_c_a-lock-0000000002", "_c_b-lock-0000000010"]));
    }

    #[test]
    fn mutex_predicate() {
        let mut all = Vec::new();
        for i in 0..20 {
            all.push(format!("_c_{i}-lock-{}", path::format_sequence(i)));
        }
        let c = contenders(&all, &[MUTEX_LOCK_NAME]);
        assert_eq!(Predicate::Leases(1).decide(&c, &all[0]), Verdict::Hold);
        assert_eq!(
            Predicate::Leases(1).decide(&c, &all[3]),
            Verdict::Wait { nodes: kids(&[&all[0], &all[1], &all[2]]), then: AfterWatch::Hold }
        );
        assert_eq!(
            Predicate::Leases(1).decide(&c, &all[15]),
            Verdict::Wait { nodes: vec![all[14].clone()], then: AfterWatch::Recheck }
        );
        assert_eq!(Predicate::Leases(1).decide(&c, "nope"), Verdict::Missing);
        assert_eq!(Predicate::Leases(3).decide(&c, &all[2]), Verdict::Hold);
        let set: HashSet<&str> = [all[0].as_str()].into_iter().collect();
        assert_eq!(
            Predicate::Leases(3).decide(&c, &all[3]),
            Verdict::Wait { nodes: names_in(&c, &set), then: AfterWatch::Hold }
        );
    }

    #[test]
    fn read_predicate_waits_only_for_earlier_writers() {
        let all = kids(&[
            "_c_1-__READ__0000000001",
            "_c_2-__WRIT__0000000002",
            "_c_3-__READ__0000000003",
            "_c_4-__WRIT__0000000004",
        ]);
        let c = contenders(&all, &[READ_LOCK_NAME, WRITE_LOCK_NAME]);
        let read = Predicate::Read { holds_write: false };
        assert_eq!(read.decide(&c, &all[0]), Verdict::Hold);
        // The kazoo 2.8 bug: the reader must not wait for the writer queued after it.
        assert_eq!(read.decide(&c, &all[2]), Verdict::Wait { nodes: vec![all[1].clone()], then: AfterWatch::Hold });
        assert_eq!(Predicate::Read { holds_write: true }.decide(&c, &all[2]), Verdict::Hold);
        // A writer must be first among all nodes; after a write node goes it lists again (a
        // downgrade may have added a read node with that node's sequence).
        assert_eq!(
            Predicate::Leases(1).decide(&c, &all[3]),
            Verdict::Wait { nodes: kids(&[&all[0], &all[1], &all[2]]), then: AfterWatch::Recheck }
        );
        let readers_only = kids(&["_c_1-__READ__0000000001", "_c_2-__WRIT__0000000002"]);
        let c = contenders(&readers_only, &[READ_LOCK_NAME, WRITE_LOCK_NAME]);
        assert_eq!(
            Predicate::Leases(1).decide(&c, &readers_only[1]),
            Verdict::Wait { nodes: vec![readers_only[0].clone()], then: AfterWatch::Hold }
        );
    }
}
