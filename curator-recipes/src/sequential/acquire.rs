//! [`Acquire`]: one acquire of a contender group, as a state machine with one method per
//! phase.
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
//! Decide  : order contenders by the sequence number after the node name, then ask the
//!           predicate:  Hold -> done.
//!                       Wait(nodes, then) -> getData+watch each node, and exists+watch our
//!                         own node (pipelined); wait until they are deleted. then = Hold: hold
//!                         without listing again (lower sequence numbers never come back),
//!                         unless our own node's watch fired first or the connection changed
//!                         meanwhile (List); then = Recheck: List.
//!                         Any other watch event (a Session event on disconnection, a data
//!                         change) means "re-check": List.
//!                       Wait under Leases(n) with at most LINE_LIMIT nodes ahead, and a
//!                         listener on the group's line watch registered before this listing
//!                         (module `line`): wait on the line instead: AllGone -> hold,
//!                         Recheck -> List, Probe (LINE_PROBE went by) -> List, and the next
//!                         Decide stops the line if its listing lacks a node the line still
//!                         had ahead. No listener (the watch is off): today's wait, and the
//!                         group's second such wait starts the watch for the next acquires.
//!                         Over LINE_LIMIT: today's wait, and the line is stopped.
//!                       Missing (our node is not listed: its session is gone) -> Find.
//! Resume  : (ContenderGroup::resume) an acquire that goes on with a node of ours from an
//!           earlier one (a leader's, kept through a suspension) starts at List with it; its
//!           protected prefix is taken from the node's name, and the cleanup knows its path.
//!           A node from an older session goes to Find from List, as any other.
//! ```
//!
//! Every phase runs on the session current at that moment; a phase whose node belongs to an
//! older session goes to Find. A failed phase names the phase to retry with, and the
//! framework's [`RetryLoop`](curator_core::RetryLoop) decides whether to; a phase that
//! moved on starts a new failure streak (waiting in the queue is not failing). Dropping the
//! acquire at any point leaves its [`Cleanup`] behind, which deletes our node (by its path when
//! known, else by its protected prefix), if one may exist: the cleanup is armed when a create
//! is sent, and disarmed again when the server refuses it (a definite answer: no node was made)
//! and no earlier create may have made one. So an acquire refused with `NoAuth` leaves no
//! cleanup to fail on the same refusal.

use curator_core::deadline;
use curator_core::make_parents;
use curator_core::zk;
use curator_core::{path, CuratorError, CuratorFramework, Result, Session};
use futures::stream::{FuturesUnordered, StreamExt};

use super::cleanup::{Cleanup, NodeReporter};
use super::line::{Line, LineEnd, Listener, LINE_LIMIT};
use super::names::{prefix_of, protected_prefix, sequence_in, Contender};
use super::node::{LockNode, NodeKind};
use super::order::{contenders, AfterWatch, Predicate, Verdict};

/// How many times in a row creating the container parents may still leave the create without a
/// parent (the server reaps empty containers) before giving up.
const MAX_PARENT_ATTEMPTS: u32 = 5;

/// The phases of one acquire (see the module docs).
enum Phase {
    Create,
    Find,
    List(LockNode),
    Decide(LockNode, Vec<String>),
}

/// What a phase led to.
enum Step {
    Next(Phase),
    Held(Granted),
}

/// A watch on our own node, armed while waiting: it fires when the node is deleted.
pub(crate) type NodeWatch = std::pin::Pin<Box<dyn std::future::Future<Output = zk::WatchedEvent> + Send>>;

/// What an acquire ends with: the node that holds and, when the grant came from a wait, the
/// watch on it armed then (the hold's monitor takes it over instead of sending its own).
pub(crate) struct Granted {
    pub(crate) node: LockNode,
    pub(crate) watch: Option<NodeWatch>,
    /// The `recipe` label of the hold's metrics (`curator_core::metrics::recipe`).
    pub(crate) recipe: &'static str,
}

/// A phase's outcome: on failure, the error and the phase to retry with.
type PhaseResult = std::result::Result<Step, (CuratorError, Phase)>;

/// What one wait on watched nodes ended with.
enum WaitEnd {
    AllGone(Option<NodeWatch>),
    Recheck,
}

/// Where an acquire contends: what it reads of its contender group, borrowed from the group
/// (which builds it, so that this file needs nothing of the group's).
pub(super) struct Contest<'a> {
    pub(super) fw: &'a CuratorFramework,
    /// The path whose children are the contenders.
    pub(super) base_path: &'a str,
    /// The name in our nodes' names, after the protected prefix.
    pub(super) node_name: &'static str,
    /// The names after which sequence numbers are read.
    pub(super) sort_names: &'static [&'static str],
    /// The `recipe` label of the metrics.
    pub(super) recipe: &'static str,
    /// The group's line watch (module `line`).
    pub(super) line: &'a Line,
}

/// One acquire in progress: what every phase needs.
pub(super) struct Acquire<'a> {
    fw: &'a CuratorFramework,
    base_path: &'a str,
    sort_names: &'static [&'static str],
    /// The path to create: `P/_c_<uuid>-<name>` (the server appends the sequence number).
    create_path: String,
    /// Our protected prefix `_c_<uuid>-`.
    prefix: String,
    data: &'a [u8],
    kind: NodeKind,
    predicate: Predicate,
    /// The `recipe` label of the metrics (the group's).
    recipe: &'static str,
    cleanup: Cleanup,
    parent_attempts: u32,
    /// Told the path of our node whenever it becomes known (a latch's `our_path()` while it
    /// waits in line).
    report: Option<NodeReporter>,
    /// A node of ours to go on with (a resumed acquire starts at List with it).
    resume: Option<LockNode>,
    /// The group's line watch, and our listener on it, registered before the listing that the
    /// next Decide reads (`Predicate::Leases` only).
    line: &'a Line,
    listener: Option<Listener>,
    /// The listener of a wait on the line that ended with a probe, kept (armed) until the next
    /// Decide checks its listing against it.
    probed: Option<Listener>,
}

impl<'a> Acquire<'a> {
    /// A new acquire in `group` (nothing is sent yet).
    pub(super) fn new(group: Contest<'a>, data: &'a [u8], kind: NodeKind, predicate: Predicate) -> Self {
        Self::with_prefix(group, data, kind, predicate, protected_prefix())
    }

    /// An acquire that goes on with `node`, a sequential node of ours in `group` from an
    /// earlier acquire (nothing is sent yet): it starts by listing the contenders. Should the
    /// node be gone, the new one gets the same protected prefix.
    pub(super) fn resuming(group: Contest<'a>, node: LockNode, data: &'a [u8], predicate: Predicate) -> Self {
        // Our nodes always have a protected prefix; a node without one is deleted by its path.
        let prefix = prefix_of(node.name()).map_or_else(protected_prefix, str::to_string);
        let mut acquire = Self::with_prefix(group, data, NodeKind::Sequential, predicate, prefix);
        acquire.cleanup.known(&node.path);
        acquire.resume = Some(node);
        acquire
    }

    fn with_prefix(group: Contest<'a>, data: &'a [u8], kind: NodeKind, predicate: Predicate, prefix: String) -> Self {
        let Contest { fw, base_path, node_name, sort_names, recipe, line } = group;
        // Nothing to delete until a create is sent (or a node of ours is known).
        let mut cleanup = Cleanup::new(fw, base_path, &prefix);
        cleanup.disarm();
        Self {
            fw,
            base_path,
            sort_names,
            create_path: kind.create_path(base_path, &prefix, node_name),
            recipe,
            cleanup,
            prefix,
            data,
            kind,
            predicate,
            parent_attempts: 0,
            report: None,
            resume: None,
            line,
            listener: None,
            probed: None,
        }
    }

    /// Tells `report` the path of our node whenever it becomes known; if the acquire is
    /// abandoned, its cleanup clears it once the node is deleted.
    pub(super) fn reporting(mut self, report: NodeReporter) -> Self {
        self.cleanup.reporting(report.clone());
        self.report = Some(report);
        self
    }

    /// Our node exists at `path`: the cleanup deletes that one, and the reporter is told.
    fn known(&mut self, path: &str) {
        self.cleanup.known(path);
        if let Some(report) = &self.report {
            report.send_replace(Some(path.to_string()));
        }
    }

    /// Runs the phases until our node holds (or the retry policy gives up).
    pub(super) async fn run(mut self) -> Result<Granted> {
        let started = std::time::Instant::now();
        let mut retry = self.fw.retry_loop();
        let mut phase = match self.resume.take() {
            Some(node) => {
                self.known(&node.path);
                Phase::List(node)
            }
            None => Phase::Create,
        };
        loop {
            phase = match self.step(phase).await {
                Ok(Step::Next(next)) => {
                    retry.reset();
                    next
                }
                Ok(Step::Held(granted)) => {
                    self.cleanup.disarm();
                    tracing::debug!(path = %granted.node.path, czxid = granted.node.czxid, "lock held");
                    curator_core::metrics::lock_granted(self.recipe, started);
                    return Ok(granted);
                }
                // Under a timed acquire's deadline the retry loop gives up at it (with Timeout).
                Err((err, next)) => {
                    retry.on_error(err).await?;
                    next
                }
            };
        }
    }

    /// Runs one phase on the current session.
    async fn step(&mut self, phase: Phase) -> PhaseResult {
        let session = self.fw.session().await.map_err(|e| (e, Phase::Find))?;
        if !matches!(phase, Phase::Decide(..)) {
            // Registered again before this phase's listing, if it sends one.
            self.listener = None;
        }
        match phase {
            Phase::Create => self.create(&session).await,
            Phase::Find => self.find(&session).await,
            Phase::List(node) => self.list(&session, node).await,
            Phase::Decide(node, children) => self.decide(&session, node, children).await,
        }
    }

    /// Create: our node and, pipelined behind it, the first listing.
    async fn create(&mut self, session: &Session) -> PhaseResult {
        if let NodeKind::Fixed { generation, .. } = self.kind {
            if !session.is_generation(generation) {
                let reason = "the write lock's session is gone, and its node with it: the read lock cannot be \
                              taken under it; release the write lock first";
                let lost = CuratorError::OwnNodeLost { path: self.create_path.clone(), reason: reason.into() };
                return Err((lost, Phase::Create));
            }
        }
        // Stored as the framework stores data: compressed under `enable_compression()`
        // (docs/architecture.md section 3.10); a provider's error sends nothing.
        let data = self.fw.encode_data(&self.create_path, self.data).map_err(|e| (e, Phase::Create))?;
        // From here our node may exist, unless the server says that this create made none.
        let armed_before = self.cleanup.is_armed();
        self.cleanup.arm();
        let client = session.client();
        self.listener = self.listen(session);
        let acl = self.fw.acl_for_path(&self.create_path);
        tracing::debug!(path = %self.create_path, "create (pipelined with getChildren {})", self.base_path);
        // Both requests are sent here, in this order, before either is awaited; a create the
        // framework's schema set refuses sends neither, and made no node.
        let create = match session.create(&self.create_path, &data, self.kind.mode(), &acl) {
            Ok(create) => create,
            Err(refused) => {
                self.listener = None;
                if !armed_before {
                    self.cleanup.disarm();
                }
                return Err((refused, Phase::Create));
            }
        };
        let list = client.list_children(self.base_path);
        let (created, listed) = futures::join!(create, list);
        match created {
            Ok((stat, sequence)) => {
                let (path, sequence) = self.kind.created(&self.create_path, sequence.into_i64());
                let node = LockNode::ours(path, sequence, &stat, self.kind, session);
                self.known(&node.path);
                match listed {
                    Ok(children) => Ok(Step::Next(Phase::Decide(node, children))),
                    Err(e) => Err((CuratorError::from_zk(self.base_path, e), Phase::List(node))),
                }
            }
            Err(zk::Error::NoNode) if self.parent_attempts < MAX_PARENT_ATTEMPTS => {
                if !armed_before {
                    self.cleanup.disarm();
                }
                self.parent_attempts += 1;
                make_parents(self.fw, client, &self.create_path, self.fw.use_container_parents())
                    .await
                    .map_err(|e| (e, Phase::Create))?;
                Ok(Step::Next(Phase::Create))
            }
            Err(e) => {
                let err = CuratorError::from_zk(&self.create_path, e);
                // Outcome unknown: our node may exist; look for it before creating again.
                let next = if err.is_retryable() { Phase::Find } else { Phase::Create };
                if !err.outcome_unknown() && !armed_before {
                    // Refused (NoAuth, ...): this create made no node, nor did an earlier one.
                    self.cleanup.disarm();
                }
                Err((err, next))
            }
        }
    }

    /// Find: after an unknown outcome, our node by its protected prefix.
    async fn find(&mut self, session: &Session) -> PhaseResult {
        let client = session.client();
        tracing::debug!(path = %self.base_path, prefix = %self.prefix, "getChildren (find our node)");
        let children = match client.list_children(self.base_path).await {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(Step::Next(Phase::Create)),
            Err(e) => return Err((CuratorError::from_zk(self.base_path, e), Phase::Find)),
        };
        let Some(name) = children.iter().find(|c| c.starts_with(&self.prefix)).cloned() else {
            return Ok(Step::Next(Phase::Create));
        };
        let found = path::make_path(self.base_path, &name);
        tracing::debug!(path = %found, "exists (our node from an earlier attempt?)");
        let stat = match client.check_stat(&found).await {
            Ok(Some(stat)) => stat,
            Ok(None) => return Ok(Step::Next(Phase::Create)),
            Err(e) => return Err((CuratorError::from_zk(&found, e), Phase::Find)),
        };
        match sequence_in(&name, self.sort_names) {
            Some(sequence) if stat.ephemeral_owner == session.id() => {
                let node = LockNode::ours(found, sequence, &stat, self.kind, session);
                self.known(&node.path);
                Ok(Step::Next(Phase::Decide(node, children)))
            }
            _ => {
                // Left by an older session of ours: it is going; do not wait for it.
                tracing::debug!(path = %found, "delete (our node from an old session)");
                let delete = session.delete(&found, None).map_err(|refused| (refused, Phase::Find))?;
                match delete.await {
                    Ok(()) | Err(zk::Error::NoNode) => Ok(Step::Next(Phase::Create)),
                    Err(e) => Err((CuratorError::from_zk(&found, e), Phase::Find)),
                }
            }
        }
    }

    /// List: the contenders again, after a wait ended with "re-check".
    async fn list(&mut self, session: &Session, node: LockNode) -> PhaseResult {
        if !session.is_generation(node.generation) {
            return Ok(Step::Next(Phase::Find));
        }
        tracing::debug!(path = %self.base_path, "getChildren");
        self.listener = self.listen(session);
        match session.client().list_children(self.base_path).await {
            Ok(children) => Ok(Step::Next(Phase::Decide(node, children))),
            Err(zk::Error::NoNode) => Ok(Step::Next(Phase::Find)),
            Err(e) => Err((CuratorError::from_zk(self.base_path, e), Phase::List(node))),
        }
    }

    /// Decide: ask the predicate about one listing; hold, or wait for the nodes it names.
    async fn decide(&mut self, session: &Session, node: LockNode, children: Vec<String>) -> PhaseResult {
        if !session.is_generation(node.generation) {
            return Ok(Step::Next(Phase::Find));
        }
        if let Some(name) = self.probed.take().and_then(|probed| probed.missing(&children)) {
            tracing::debug!(path = %self.base_path, node = %name, "the line missed a deletion (another watch of \
                this session on the path replaced it, ZOOKEEPER-4466): stopping it");
            self.line.stop(self.base_path, "missed a deletion");
        }
        let sorted = contenders(&children, self.sort_names);
        match self.predicate.decide(&sorted, node.name()) {
            Verdict::Hold => Ok(Step::Held(Granted { node, watch: None, recipe: self.recipe })),
            Verdict::Missing => {
                tracing::debug!(path = %node.path, "our node is not among the children");
                Ok(Step::Next(Phase::Find))
            }
            Verdict::Wait { .. } if deadline::passed() => {
                Err((CuratorError::Timeout { path: self.base_path.to_string() }, Phase::List(node)))
            }
            Verdict::Wait { nodes, then } => {
                if let Some(listener) = self.on_line(session, &node, &sorted) {
                    let end = deadline::until(self.base_path, async { Ok(listener.wait(self.fw).await) }).await;
                    return match end {
                        Ok(LineEnd::AllGone) => Ok(Step::Held(Granted { node, watch: None, recipe: self.recipe })),
                        Ok(LineEnd::Recheck) => Ok(Step::Next(Phase::List(node))),
                        Ok(LineEnd::Probe) => {
                            self.probed = Some(listener);
                            Ok(Step::Next(Phase::List(node)))
                        }
                        Err(e) => Err((e, Phase::List(node))),
                    };
                }
                match deadline::until(self.base_path, self.wait_for(session, &node.path, &nodes, then)).await {
                    Ok(WaitEnd::AllGone(watch)) if then == AfterWatch::Hold => {
                        Ok(Step::Held(Granted { node, watch, recipe: self.recipe }))
                    }
                    Ok(_) => Ok(Step::Next(Phase::List(node))),
                    Err(e) => Err((e, Phase::List(node))),
                }
            }
        }
    }

    /// A listener on the line for a `Leases` acquire, if the group's watch is on for `session`
    /// (registered before the listing that follows).
    fn listen(&self, session: &Session) -> Option<Listener> {
        matches!(self.predicate, Predicate::Leases(_)).then(|| self.line.listen(session)).flatten()
    }

    /// The listener armed for this wait, when it may wait on the line (module `line`): a
    /// `Leases(n)` acquire with at most `LINE_LIMIT` nodes ahead, whose listener was registered
    /// before this listing. With few enough nodes ahead and no listener, counts toward starting
    /// the watch for the group's next acquires (`Line::start`; this wait is today's). With more,
    /// stops the line at once (the herd: every session that started it would take it).
    fn on_line(&mut self, session: &Session, node: &LockNode, sorted: &[Contender]) -> Option<Listener> {
        let listener = self.listener.take();
        let Predicate::Leases(n) = self.predicate else { return None };
        // Counted before any name is copied: with a long line, most waits are over the limit.
        let before = sorted.iter().take_while(|c| c.name != node.name()).count();
        if before > LINE_LIMIT {
            self.line.stop(self.base_path, "more nodes ahead than LINE_LIMIT");
            return None;
        }
        match listener {
            Some(l) => {
                let ahead = sorted[..before].iter().map(|c| c.name.clone()).collect();
                l.arm(session, ahead, node.name(), node.sequence, n.max(1)).then_some(l)
            }
            None => {
                self.line.start(self.fw, session, self.base_path, self.sort_names);
                None
            }
        }
    }

    /// Watches every node in `names` (requests pipelined) and waits until all are deleted, or
    /// until another event calls for a re-check.
    ///
    /// When the wait may end in a hold without listing again (`then` is Hold), the grant is
    /// confirmed on the live session (docs/architecture.md section 8.3): an exists+watch on our
    /// own node goes out with the others. Events on one connection come in
    /// zxid order, so if our node went first (our session was closed while this connection
    /// still delivered events, or someone deleted it), its event is already here when the last
    /// watched node's deletion is, and the wait ends with "re-check" instead of a hold on a node
    /// that no longer exists. After a reconnection the server replays deletions in no
    /// particular order, so a wait that saw the connection change re-checks as well.
    async fn wait_for(&self, session: &Session, own: &str, names: &[String], then: AfterWatch) -> Result<WaitEnd> {
        let client = session.client();
        let connection = self.fw.connection_state_watch().borrow().seq;
        let paths: Vec<String> = names.iter().map(|n| path::make_path(self.base_path, n)).collect();
        let confirm = then == AfterWatch::Hold;
        let own_request = async {
            if confirm {
                tracing::debug!(path = %own, "exists+watch (our own node, to confirm the grant)");
                Some(client.check_and_watch_stat(own).await)
            } else {
                None
            }
        };
        for p in &paths {
            tracing::debug!(path = %p, "getData+watch (waiting for its deletion)");
        }
        let requests: Vec<_> = paths.iter().map(|p| client.get_and_watch_data(p)).collect();
        // join! polls in order: the exists goes out first, the others right behind it.
        let (own_answer, answers) = futures::join!(own_request, futures::future::join_all(requests));
        let mut own_event: NodeWatch = match own_answer {
            Some(Ok((Some(_), watcher))) => Box::pin(watcher.changed()),
            Some(Ok((None, _))) => {
                tracing::debug!(path = %own, "our node is gone: re-check");
                return Ok(WaitEnd::Recheck);
            }
            Some(Err(e)) => return Err(CuratorError::from_zk(own, e)),
            None => Box::pin(std::future::pending()),
        };
        let mut watchers = FuturesUnordered::new();
        for (answer, p) in answers.into_iter().zip(&paths) {
            match answer {
                Ok((_, _, watcher)) => watchers.push(watcher.changed()),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(CuratorError::from_zk(p, e)),
            }
        }
        // The wait also ends when the framework gives up this session (presumed lost while a
        // connection may still deliver its events) or closes: every acquire ends.
        let mut liveness = self.fw.liveness(session.generation());
        let session_gone = async move { liveness.ended().await };
        tokio::pin!(session_gone);
        loop {
            let event = tokio::select! {
                biased;
                _ = &mut session_gone => {
                    tracing::debug!(path = %own, "the session was given up during the wait: re-check");
                    return Ok(WaitEnd::Recheck);
                }
                event = &mut own_event => {
                    tracing::debug!(path = %own, event = ?event.event_type, state = ?event.session_state, "our node's watch fired: re-check");
                    return Ok(WaitEnd::Recheck);
                }
                event = watchers.next() => event,
            };
            let Some(event) = event else { break };
            match event.event_type {
                zk::EventType::NodeDeleted => tracing::debug!(path = %event.path, "watched node deleted"),
                other => {
                    tracing::debug!(path = %event.path, event = ?other, state = ?event.session_state, "watch fired: re-check");
                    return Ok(WaitEnd::Recheck);
                }
            }
        }
        // Every event before the last deletion has been dispatched by now: ours among them if
        // our node went first.
        if let Some(event) = futures::FutureExt::now_or_never(&mut own_event) {
            tracing::debug!(path = %own, event = ?event.event_type, "our node's watch fired with the last deletion: re-check");
            return Ok(WaitEnd::Recheck);
        }
        if confirm && self.fw.connection_state_watch().borrow().seq != connection {
            tracing::debug!(path = %own, "the connection changed during the wait: re-check");
            return Ok(WaitEnd::Recheck);
        }
        Ok(WaitEnd::AllGone(confirm.then_some(own_event)))
    }
}
