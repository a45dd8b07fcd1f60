//! [`LeaderLatch`]: Curator's leader latch, on the sequential-node core.
//!
//! A latch that is started runs one task (module `run`, one function per phase) that goes
//! through the phases of `run::Phase`: join the line (the core's acquire, with `Predicate::Leader`), lead
//! (until the term may be lost, the latch steps down or closes), wait for the connection with
//! our node kept (after a suspension), wait after a failed join, done.
//! The handle talks to it through commands and reads what it publishes: its [`Status`], our
//! node's path, and the listener events.

use std::sync::Arc;
use std::time::Duration;

use curator_core::{Callback, EventStream, ListenerId, Listeners};
use curator_core::{CuratorError, CuratorFramework, Result};
use curator_core::{LifeState, Lifecycle};
use tokio::sync::{mpsc, oneshot, watch};

use super::leadership::Leadership;
use super::participant::{read_leader, read_participants, validate_participant_id, Participant};
use crate::sequential::cleanup::NodeReporter;
use crate::sequential::{ContenderGroup, LockLost, LEADER_LATCH_NAME};

mod run;

/// Whether closing a latch tells its listeners that leadership ended (Curator's
/// `LeaderLatch.CloseMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CloseMode {
    /// Closing publishes nothing, even when the latch leads (the default, as in Curator).
    #[default]
    Silent,
    /// Closing a latch that leads publishes [`LatchEvent::NotLeader`] with
    /// [`LockLost::Released`].
    NotifyLeader,
}

/// What a [`LeaderLatch`] tells its listeners, in order: `IsLeader` and `NotLeader`
/// alternate, starting with `IsLeader` (never two `IsLeader` without a `NotLeader` between).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum LatchEvent {
    /// This latch became the leader: the term and its fencing token.
    IsLeader(Leadership),
    /// The term is over, or may be: the reason ([`LockLost::Released`] for a
    /// [`step_down`](LeaderLatch::step_down) or a close with [`CloseMode::NotifyLeader`]).
    NotLeader(LockLost),
}

/// The life of a [`LeaderLatch`] (Curator's `LeaderLatch.State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LatchState {
    /// Built, not started.
    Latent,
    /// Started: taking part in the election.
    Started,
    /// Closed: out of the election for good.
    Closed,
}

/// What the latch's task is doing, as the handle sees it.
#[derive(Debug, Clone)]
enum Status {
    /// Not started.
    Latent,
    /// In line (or on the way there).
    Joining,
    /// Leading, with this term.
    Leading(Leadership),
    /// A join failed; the task tries again after the connection comes back (or a pause).
    Retrying,
    /// The task ended (the latch or the framework was closed, or the first join was refused
    /// for good: [`LeaderLatch::ready`] reports that).
    Ended,
}

/// What the handle asks of the task; each command is answered once it is carried out.
#[derive(Debug)]
enum Command {
    StepDown(oneshot::Sender<()>),
    Close(CloseMode, oneshot::Sender<()>),
}

/// What the handle and its task share.
#[derive(Debug)]
struct Shared {
    group: ContenderGroup,
    id: Arc<str>,
    events: Listeners<LatchEvent>,
    status: watch::Sender<Status>,
    /// The path of our node, once known (also while waiting in line).
    ours: NodeReporter,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    close_mode: CloseMode,
    /// Started, it keeps the sender of commands to the task; dropping it (with the last
    /// handle) closes the latch silently.
    lifecycle: Lifecycle<mpsc::UnboundedSender<Command>>,
}

/// A leader latch, wire compatible with Curator 5.x's `LeaderLatch`: the first in line leads.
///
/// ```text
///  start ─► join: create P/_c_<uuid>-latch-<seq> (ephemeral sequential, data = our id)
///                 + getChildren(P), pipelined (the lock algorithm's Create and List)
///        ─► first in line? no  ─► getData+watch on the node(s) ahead; when one goes, list again
///                          yes ─► lead: IsLeader(Leadership), fencing token = our node's czxid
///  lead ─► lost() resolves (Suspended under Standard, SessionLost, NodeDeleted, Closed)
///          or step_down() (Released) ─► NotLeader(reason), then
///            after a suspension: keep the node, wait for the connection; on the same session
///                                getChildren(P) again with it (still first: lead again)
///            otherwise: guaranteed delete of our node, join again at the end of the line
///  close / drop ─► guaranteed delete of our node (NotLeader only with CloseMode::NotifyLeader)
/// ```
///
/// Each participant's node holds its id (UTF-8), and the first in line leads until it closes,
/// [steps down](Self::step_down) or may have lost its term. Rust and Java latches on one path
/// elect one leader between them. See `docs/architecture.md`, section 15.1 (and section 8 for
/// the join, the core's acquire).
///
/// Past Curator, a term of leadership is a [`Leadership`]: a fencing token (the czxid of our
/// node, growing from one leader to the next) to stamp writes with, and
/// [`lost`](crate::sequential::HeldNode::lost), which resolves before anyone else can be made leader.
///
/// Leadership is given up as the framework's
/// [`ErrorPolicy`](curator_core::ErrorPolicy) says, as the locks do: under `Standard` on a
/// suspension, under `Session` when the session is lost. The latch then publishes
/// [`LatchEvent::NotLeader`] with the reason *first*. After a suspension it keeps its node and
/// waits for the connection, as Curator 5.4+ does: back on the same session, it checks its
/// place again with that node, and if it is still first (so nobody else led meanwhile) it
/// leads again, a new [`Leadership`] with the same node and fencing token. When the session
/// was lost (or the node is gone), it deletes its node (a guaranteed delete, as Curator does on
/// a new session) and joins again at the end of the line, with a new node.
/// A node left by a session that is no longer ours never makes us leader (Curator 5.7's
/// CURATOR-696 rule): the core decides only on a node of the current session, and a term whose
/// session changed before it was announced is given back unannounced.
///
/// Closing or dropping the latch (the last clone) leaves no node behind; a node whose create
/// was in flight is found and deleted by its protected prefix.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{LatchEvent, LeaderLatch};
///
/// let latch = LeaderLatch::builder(&fw, "/services/indexer/leader")
///     .id("indexer-1")
///     .listener(|event: &LatchEvent| match event {
///         LatchEvent::IsLeader(term) => tracing::info!(token = term.fencing_token(), "leading"),
///         LatchEvent::NotLeader(reason) => tracing::info!(%reason, "not leading"),
///         _ => {} // the enum is non_exhaustive
///     })
///     .build()?;
/// latch.start()?;
/// latch.ready().await?; // our node exists (or the server refused it: the latch is closed)
/// let term = latch.await_leadership().await?; // alone on the path: at once
/// assert!(latch.has_leadership());
/// assert_eq!(latch.leader().await?.map(|p| p.id), Some("indexer-1".to_string()));
/// // Stamp writes with term.fencing_token(); stop when term.lost() resolves.
/// assert!(term.fencing_token() > 0);
/// latch.close().await;
/// assert!(!latch.has_leadership());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LeaderLatch {
    inner: Arc<Inner>,
}

/// Builder of a [`LeaderLatch`]; see [`LeaderLatch::builder`].
pub struct LeaderLatchBuilder {
    fw: CuratorFramework,
    path: String,
    /// `None`: not set, Curator's empty id.
    id: Option<String>,
    close_mode: CloseMode,
    listeners: Vec<Callback<LatchEvent>>,
}

impl std::fmt::Debug for LeaderLatchBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLatchBuilder")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("close_mode", &self.close_mode)
            .field("listeners", &self.listeners.len())
            .finish_non_exhaustive()
    }
}

impl LeaderLatchBuilder {
    /// The participant id, written as our node's data. Left unset, it is empty, as in Curator
    /// (and not checked); one set here must be one node name, as every participant id is
    /// (checked by [`build`](Self::build)).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// How [`close`](LeaderLatch::close) treats the listeners (default [`CloseMode::Silent`]).
    pub fn close_mode(mut self, mode: CloseMode) -> Self {
        self.close_mode = mode;
        self
    }

    /// A listener in place from the start (see [`LeaderLatch::add_listener`]).
    pub fn listener(mut self, listener: impl Fn(&LatchEvent) + Send + Sync + 'static) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// Checks the path and the id and builds the latch (not started; nothing is sent).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for a path ZooKeeper would refuse;
    /// [`CuratorError::InvalidArgument`] for an id that was set and is not one node name (empty,
    /// with a `/`, a NUL...: the check every participant id gets);
    /// [`CuratorError::DataTooLarge`] for an id longer than the framework's data limit.
    pub fn build(self) -> Result<LeaderLatch> {
        let group = ContenderGroup::new(&self.fw, &self.path, LEADER_LATCH_NAME, &[LEADER_LATCH_NAME])?;
        let set = self.id.is_some();
        let id = self.id.unwrap_or_default();
        self.fw.check_data(&self.path, id.as_bytes())?;
        if set {
            validate_participant_id(&self.path, &id)?;
        }
        let events = Listeners::new();
        for listener in self.listeners {
            events.add_callback(listener);
        }
        let shared = Arc::new(Shared {
            group,
            id: Arc::from(id),
            events,
            status: watch::channel(Status::Latent).0,
            ours: Arc::new(watch::channel(None).0),
        });
        Ok(LeaderLatch {
            inner: Arc::new(Inner { shared, close_mode: self.close_mode, lifecycle: Lifecycle::new("LeaderLatch") }),
        })
    }
}

impl LeaderLatch {
    /// A latch on `path` for participant `id` (checked as every participant id: see
    /// [`LeaderLatchBuilder::id`]; for Curator's default empty id, use
    /// [`builder`](Self::builder) without an id), closing silently. Nothing is sent before
    /// [`start`](Self::start).
    ///
    /// # Errors
    /// As [`LeaderLatchBuilder::build`].
    pub fn new(fw: &CuratorFramework, path: &str, id: impl Into<String>) -> Result<Self> {
        Self::builder(fw, path).id(id).build()
    }

    /// A builder for a latch on `path` (id unset: empty, [`CloseMode::Silent`], no listener).
    pub fn builder(fw: &CuratorFramework, path: &str) -> LeaderLatchBuilder {
        LeaderLatchBuilder {
            fw: fw.clone(),
            path: path.to_string(),
            id: None,
            close_mode: CloseMode::Silent,
            listeners: Vec::new(),
        }
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Joins the election: starts the latch's task, which makes our node and waits in line
    /// (Curator's `LeaderLatch.start()`). Sync: it sends nothing itself; [`ready`](Self::ready)
    /// tells when our node exists, or that the server refused it.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] (outside a tokio runtime) or [`CuratorError::Closed`] (a
    /// closed framework), as for every started thing (module
    /// [`Lifecycle`](curator_core::Lifecycle)); nothing changes then.
    pub fn start(&self) -> Result<()> {
        let shared = self.inner.shared.clone();
        self.inner.lifecycle.start(shared.group.framework(), |started| {
            let (tx, rx) = mpsc::unbounded_channel();
            shared.events.start(started.handle().clone());
            shared.status.send_replace(Status::Joining);
            tracing::debug!(path = %shared.group.base_path(), id = %shared.id, "leader latch started");
            // The task lives as long as the latch and ends by itself when the latch or the
            // framework closes. The deletes it makes are tracked by the framework.
            started.spawn(run::run(shared.clone(), rx, started.readiness()));
            Ok(tx)
        })
    }

    /// Waits for the first outcome of [`start`](Self::start): `Ok` once our node exists (so
    /// that latches started and made ready one after another are in line in that order), or
    /// once the first attempt to make it failed in a way worth trying again (no connection
    /// within the retry policy, say: the latch keeps trying in the background, as Curator's
    /// does, and leads once it can). A first attempt refused for good (no permission to create
    /// our node, an ACL the server refuses) is returned, and the latch is closed by then; the
    /// framework's unhandled-error listeners hear it too, as they hear a later attempt's
    /// refusal (Curator's hear it, CURATOR-365, and its latch never leads).
    ///
    /// # Errors
    /// The refusal of the first attempt ([`CuratorError::is_permanent`]: `NoAuth`,
    /// `InvalidAcl`...); [`CuratorError::NotStarted`] before `start`;
    /// [`CuratorError::AlreadyClosed`] if the latch was closed before a first outcome.
    pub async fn ready(&self) -> Result<()> {
        self.inner.lifecycle.ready().await
    }

    /// The latch's state.
    pub fn state(&self) -> LatchState {
        match self.inner.lifecycle.state() {
            LifeState::Latent => LatchState::Latent,
            LifeState::Started => LatchState::Started,
            _ => LatchState::Closed,
        }
    }

    /// Whether this latch leads now: started, and its term still holds (judging the connection
    /// now, so a suspension under `ErrorPolicy::Standard` makes it false at once). Costs no
    /// request.
    pub fn has_leadership(&self) -> bool {
        self.leadership().is_some()
    }

    /// The current term, while this latch leads (see [`has_leadership`](Self::has_leadership)).
    pub fn leadership(&self) -> Option<Leadership> {
        if self.state() != LatchState::Started {
            return None;
        }
        match &*self.shared().status.borrow() {
            Status::Leading(term) if term.is_held() => Some(term.clone()),
            _ => None,
        }
    }

    /// Waits until this latch leads and returns the term (at once if it leads already).
    ///
    /// # Errors
    /// [`CuratorError::NotStarted`] before [`start`](Self::start);
    /// [`CuratorError::AlreadyClosed`] once the latch is closed, [`CuratorError::Closed`] once its
    /// framework is, also while waiting.
    pub async fn await_leadership(&self) -> Result<Leadership> {
        let mut status = self.shared().status.subscribe();
        loop {
            match self.state() {
                LatchState::Latent => return Err(CuratorError::NotStarted { what: "LeaderLatch" }),
                LatchState::Closed => return Err(CuratorError::AlreadyClosed { what: "LeaderLatch" }),
                LatchState::Started => {}
            }
            match &*status.borrow_and_update() {
                Status::Leading(term) if term.is_held() => return Ok(term.clone()),
                Status::Ended => return Err(CuratorError::Closed),
                _ => {}
            }
            if status.changed().await.is_err() {
                return Err(CuratorError::Closed);
            }
        }
    }

    /// As [`await_leadership`](Self::await_leadership), giving up after `timeout`
    /// (`Ok(None)`). `Duration::ZERO` asks without waiting.
    ///
    /// # Errors
    /// As [`await_leadership`](Self::await_leadership).
    pub async fn await_leadership_timeout(&self, timeout: Duration) -> Result<Option<Leadership>> {
        match tokio::time::timeout(timeout, self.await_leadership()).await {
            Ok(result) => result.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Calls `listener` with every [`LatchEvent`] from now on, in order, on the blocking pool
    /// (the framework's one listener queue). To hear the first `IsLeader` for sure, add it
    /// before [`start`](Self::start) (or give it to the builder).
    pub fn add_listener(&self, listener: impl Fn(&LatchEvent) + Send + Sync + 'static) -> ListenerId {
        self.shared().events.add_callback(Arc::new(listener))
    }

    /// Removes a listener; false if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.shared().events.remove(id)
    }

    /// The events from now on, as a stream; it ends once the latch is closed.
    pub fn events(&self) -> EventStream<LatchEvent> {
        self.shared().events.stream()
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.inner.shared.id
    }

    /// The path of our node while we have one (in line or leading), `None` before it is made
    /// and after the latch closes. For reference only: the latch replaces it after a step down
    /// or when the node or its session is lost (a suspension alone keeps it).
    pub fn our_path(&self) -> Option<String> {
        self.shared().ours.borrow().clone()
    }

    /// The participants, in line order (the leader first), read from the server: one listing
    /// and one pipelined round of reads of their ids. It may disagree for a moment with
    /// [`has_leadership`](Self::has_leadership), which is local.
    ///
    /// # Errors
    /// The listing's or the reads' error once the retry policy gives up; under
    /// `enable_compression()`, [`CuratorError::BadData`](curator_core::CuratorError::BadData)
    /// for an id that does not decompress.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        read_participants(&self.shared().group).await
    }

    /// The current leader, read from the server (`None` when nobody takes part; Curator
    /// returns a participant with an empty id instead).
    ///
    /// # Errors
    /// As [`participants`](Self::participants).
    pub async fn leader(&self) -> Result<Option<Participant>> {
        read_leader(&self.shared().group).await
    }

    fn commands(&self) -> Result<mpsc::UnboundedSender<Command>> {
        self.inner.lifecycle.with_started(mpsc::UnboundedSender::clone)
    }

    /// Gives up leadership without leaving the election: publishes
    /// [`LatchEvent::NotLeader`] ([`LockLost::Released`]), deletes our node and joins again at
    /// the end of the line with a new one (when alone, this latch leads again at once, with a
    /// new term and a larger token). Returns once the old node is deleted. A latch that does not
    /// lead keeps its place.
    ///
    /// # Errors
    /// [`CuratorError::NotStarted`] or [`CuratorError::AlreadyClosed`] ([`Lifecycle`](curator_core::Lifecycle)).
    pub async fn step_down(&self) -> Result<()> {
        let commands = self.commands()?;
        let (tx, rx) = oneshot::channel();
        if commands.send(Command::StepDown(tx)).is_err() {
            return Err(CuratorError::Closed);
        }
        rx.await.map_err(|_| CuratorError::Closed)
    }

    /// Leaves the election with the builder's [`CloseMode`]: see [`close_with`](Self::close_with)
    /// (Curator's `LeaderLatch.close()`).
    pub async fn close(&self) {
        self.close_with(self.inner.close_mode).await;
    }

    /// Leaves the election (Curator's `LeaderLatch.close(CloseMode)`): a leader publishes
    /// [`LatchEvent::NotLeader`] first if `mode` is [`CloseMode::NotifyLeader`], then our node
    /// is deleted (guaranteed: without a connection the delete goes on in the background), then
    /// the listeners end. Returns once the node is deleted, or its delete was left to the
    /// background.
    ///
    /// Idempotent, as every close ([`Lifecycle`](curator_core::Lifecycle)): closing a
    /// latch that is closed, or was never started, does nothing. (Curator's throws
    /// `IllegalStateException` for both.)
    pub async fn close_with(&self, mode: CloseMode) {
        let Some(commands) = self.inner.lifecycle.close() else {
            self.shared().events.close();
            return;
        };
        let (tx, rx) = oneshot::channel();
        if commands.send(Command::Close(mode, tx)).is_ok() {
            // Err: the task had ended already (the framework was closed).
            let _ = rx.await;
        }
        self.shared().events.close();
    }
}
