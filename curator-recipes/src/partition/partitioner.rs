//! [`SetPartitioner`]: the handle, its lifecycle and its calls; the work is the task's
//! (`task.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use curator_core::{CuratorError, CuratorFramework, EventStream, LifeState, Lifecycle, Listeners, Result};
use tokio::sync::{mpsc, oneshot, watch};

use super::builder::{lock_path, party_path, SetPartitionerBuilder};
use super::state::{HeldPartition, PartitionState};
use super::task::{Command, Task};
use crate::locks::InterProcessMutex;
use crate::nodes::GroupMember;

/// What a started partitioner keeps: the way to its task.
struct Control {
    commands: mpsc::UnboundedSender<Command>,
    done: watch::Receiver<bool>,
}

/// Partitioning of a set over a group (kazoo's `SetPartitioner`): the members of the group at
/// `P` divide the set's partitions among themselves, and each partition a member takes is a
/// lock it holds, so no partition is ever held by two members at once.
///
/// The members join the group `P/party` (a [`GroupMember`], node `P/party/<id>`); once the group
/// has not changed for the settle time, each member computes the same split (by default
/// [`round_robin`](super::round_robin) over the sorted ids) and takes each of its partitions'
/// locks, an [`InterProcessMutex`] at `P/locks/<partition>`. When the group changes, every
/// member is told to [`release_set`](Self::release_set), and the set is split again once the
/// group settles. Its [`states`](Self::states) are a stream of [`PartitionState`]s.
///
/// Past kazoo: each partition held carries its lock's fencing token and guarded writes
/// ([`HeldPartition`]), and a partition that may be lost is told ([`PartitionState::Release`] or
/// [`PartitionState::Failure`]) before anyone else can be granted it (the locks' lost notice).
/// Dropping or closing never leaves a node behind. Design: docs/architecture.md section 21.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::{PartitionState, SetPartitioner};
///
/// let partitioner = SetPartitioner::builder(&fw, "/work/queues", "worker-1", ["q1", "q2", "q3"])
///     .settle(Duration::from_millis(200))
///     .build()?;
/// let mut states = partitioner.states();
/// partitioner.start()?;
/// while let Some(state) = states.next().await {
///     match state {
///         PartitionState::Acquired(held) => {
///             // Alone in the group: every partition, each with its fencing token.
///             assert_eq!(held.len(), 3);
///             assert!(held.iter().all(|p| p.fencing_token() > 0));
///             break;
///         }
///         PartitionState::Release(_) => partitioner.release_set().await?,
///         PartitionState::Failure(err) => return Err(err.into()),
///         _ => {}
///     }
/// }
/// partitioner.close().await; // gives the partitions back and leaves the group
/// # Ok(()) }
/// ```
pub struct SetPartitioner {
    fw: CuratorFramework,
    lifecycle: Lifecycle<Control>,
    /// Moved into the task at start.
    task: Mutex<Option<Task>>,
    states: Arc<Listeners<PartitionState>>,
    current: watch::Receiver<PartitionState>,
    path: String,
    id: String,
}

impl std::fmt::Debug for SetPartitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetPartitioner").field("path", &self.path).field("id", &self.id).finish_non_exhaustive()
    }
}

impl SetPartitioner {
    /// How long the group must stay unchanged before a split, by default: kazoo's
    /// `time_boundary` default, 30 s.
    pub const DEFAULT_SETTLE: std::time::Duration = std::time::Duration::from_secs(30);

    /// The longest settle time accepted: one hour.
    pub const MAX_SETTLE: std::time::Duration = std::time::Duration::from_secs(3600);

    /// A builder for member `id` of the partitioner at `path`, over the set `partitions`
    /// (each a node name, none twice).
    pub fn builder<I, S>(fw: &CuratorFramework, path: &str, id: &str, partitions: I) -> SetPartitionerBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        SetPartitionerBuilder::new(fw, path, id, partitions.into_iter().map(Into::into).collect())
    }

    pub(crate) fn new(b: SetPartitionerBuilder) -> Result<Self> {
        let mut member = GroupMember::builder(&b.fw, &party_path(&b.path), &b.id);
        if let Some(payload) = b.payload {
            member = member.payload(payload);
        }
        let member = member.build()?;
        let mut sorted = b.partitions;
        sorted.sort();
        let locks = sorted
            .iter()
            .map(|name| Ok((name.clone(), InterProcessMutex::new(&b.fw, &lock_path(&b.path, name))?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        let states = Arc::new(Listeners::new());
        let (current_tx, current) = watch::channel(PartitionState::Allocating);
        let task = Task::new(
            b.fw.clone(),
            b.id.clone(),
            b.path.clone(),
            member,
            locks,
            b.settle,
            b.split,
            states.clone(),
            current_tx,
        );
        Ok(Self {
            fw: b.fw,
            lifecycle: Lifecycle::new("SetPartitioner"),
            task: Mutex::new(Some(task)),
            states,
            current,
            path: b.path,
            id: b.id,
        })
    }

    /// Joins the group and starts allocating, in the background; returns at once.
    /// [`ready`](Self::ready) gives the outcome of the first registration.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] outside a tokio runtime, [`CuratorError::Closed`] on a
    /// closed framework ([`Lifecycle`]); nothing is sent then.
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.fw, |started| {
            let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
            let Some(task) = task else {
                return Err(CuratorError::AlreadyStarted { what: "SetPartitioner" });
            };
            self.states.start(started.handle().clone());
            let (commands, receiver) = mpsc::unbounded_channel();
            let (done_tx, done) = watch::channel(false);
            started.spawn(task.run(receiver, started.readiness(), done_tx));
            Ok(Control { commands, done })
        })
    }

    /// Waits for the outcome of the first registration in the group (as
    /// [`GroupMember::ready`]).
    ///
    /// # Errors
    /// The refusal of the first registration, which closed the partitioner;
    /// [`CuratorError::NotStarted`]; [`CuratorError::AlreadyClosed`].
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// Where the partitioner is in its life.
    pub fn state(&self) -> LifeState {
        self.lifecycle.state()
    }

    /// The partition state now ([`PartitionState::Allocating`] before start).
    pub fn partition_state(&self) -> PartitionState {
        self.current.borrow().clone()
    }

    /// The partition states from now on, in order, as a stream; it ends when the partitioner
    /// is closed. Ask for it before [`start`](Self::start) to see every state.
    pub fn states(&self) -> EventStream<PartitionState> {
        self.states.stream()
    }

    /// Waits until this member holds its share (kazoo's `wait_for_acquire`), and returns it.
    ///
    /// # Errors
    /// The error of a [`PartitionState::Failure`]; [`CuratorError::AlreadyClosed`] once closed.
    pub async fn wait_for_acquire(&self) -> Result<Vec<HeldPartition>> {
        let mut current = self.current.clone();
        let state = current
            .wait_for(|s| s.is_acquired() || s.is_failure())
            .await
            .map_err(|_| CuratorError::AlreadyClosed { what: "SetPartitioner" })?
            .clone();
        match state {
            PartitionState::Acquired(held) => Ok(held),
            PartitionState::Failure(err) => Err(err),
            _ => Err(CuratorError::AlreadyClosed { what: "SetPartitioner" }),
        }
    }

    /// Gives back every partition held (kazoo's `release_set`), then allocates again once the
    /// group settles. Call it on [`PartitionState::Release`]; in any other state it gives back
    /// what is held and starts the allocation over.
    ///
    /// # Errors
    /// The error of a [`PartitionState::Failure`]; [`CuratorError::NotStarted`],
    /// [`CuratorError::AlreadyClosed`]; an error deleting a lock node.
    pub async fn release_set(&self) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.lifecycle.with_started(|c| c.commands.send(Command::Release(reply)))?.map_err(|_| self.closed())?;
        answer.await.map_err(|_| self.closed())?
    }

    fn closed(&self) -> CuratorError {
        CuratorError::AlreadyClosed { what: "SetPartitioner" }
    }

    /// Gives back every partition and leaves the group (kazoo's `finish`); returns once the
    /// lock nodes and this member's node are deleted (or their delete left to the framework's
    /// tracked background work). Idempotent.
    pub async fn close(&self) {
        if let Some(control) = self.lifecycle.close() {
            let Control { commands, mut done } = control;
            drop(commands);
            let _ = done.wait_for(|d| *d).await;
        }
        self.states.close();
    }
}

impl Drop for SetPartitioner {
    /// Closes in the background: the task gives the partitions back and leaves the group.
    fn drop(&mut self) {
        drop(self.lifecycle.close());
        self.states.close();
    }
}
