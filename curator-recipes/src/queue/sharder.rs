//! [`QueueSharder`]: Curator's `QueueSharder`, one queue spread over shards, each a
//! [`DistributedQueue`] under the sharder's path, and a leader that adds a shard when one grows
//! past the threshold. docs/architecture.md section 17.4.
//!
//! ```text
//! start ─► the sharder's task (tracked, spawn_background):
//!   first step : create Q as a container (and its parents); getChildren(Q): start a queue on
//!                each Q/<child>; none: a new shard Q/queue-<uuid>          ─► ready()
//!                (refused: the shards started are closed, the sharder closes)
//!              ─► start the LeaderLatch on the leader path
//!   every check: getChildren(Q); for each shard Q/s: a queue if we have none, exists(Q/s):
//!                  numChildren >= threshold      ─► not preferred; remember "one is full"
//!                  numChildren <= threshold / 2  ─► preferred
//!                one is full, we lead, fewer than max_queues shards ─► a new shard
//!                Q/queue-<uuid> (its queue's start creates it; the others find it next check)
//!   close      : stop the task ─► close the latch, then every shard's queue
//! queue()      : a random preferred shard, else a random shard
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use curator_core::{path, CuratorError, CuratorFramework, LifeState, Lifecycle, Readiness, Result};
use tokio::sync::{oneshot, watch};

use super::distributed::DistributedQueue;
use super::sharder_policies::QueueSharderPolicies;
use crate::leader::LeaderLatch;

/// The name prefix of a shard: `Q/queue-<uuid>` (Curator's `QueueSharder.QUEUE_PREFIX`, with
/// `UUID.randomUUID()` after it), so that Java and Rust sharders share one tree.
pub const QUEUE_SHARD_PREFIX: &str = "queue-";

/// Makes the queue of one shard: Curator's `QueueAllocator`. Given the framework and the
/// shard's path, it returns a queue (not started) on that path.
type Allocator<T> = Box<dyn Fn(&CuratorFramework, &str) -> Result<DistributedQueue<T>> + Send + Sync>;

/// What a started sharder keeps for its close: its task's stop and its end.
type Run = (watch::Sender<bool>, oneshot::Receiver<()>);

/// The shards known, by path, and those preferred for puts.
struct Shards<T> {
    queues: BTreeMap<String, Arc<DistributedQueue<T>>>,
    preferred: BTreeSet<String>,
}

/// What the handle and the task share.
struct Inner<T> {
    fw: CuratorFramework,
    queue_path: String,
    policies: QueueSharderPolicies,
    allocator: Allocator<T>,
    shards: Mutex<Shards<T>>,
    latch: LeaderLatch,
}

/// A queue spread over shards (Curator's `QueueSharder`): ZooKeeper handles a queue of many
/// thousands of nodes badly, so puts go to one of several [`DistributedQueue`]s under one path,
/// and the leader among the sharders on that path adds a shard when one holds more nodes than
/// the threshold ([`QueueSharderPolicies`]). Items keep their order within a shard only.
///
/// Node layout (Curator's, so that a Java `QueueSharder` shares the tree): the shards are the
/// children of the queue path `Q`, `Q/queue-<uuid>` ([`QUEUE_SHARD_PREFIX`]), each a
/// `DistributedQueue` path with its own `queue-<seq>` items; `Q` is a container; the leader is
/// chosen by a [`LeaderLatch`] on the leader path, which must lie outside `Q` (every child of
/// `Q` is taken for a shard).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::{DistributedQueue, QueueSharder, QueueSharderPolicies, StringSerializer};
///
/// let policies = QueueSharderPolicies::builder()
///     .new_queue_threshold(1000)
///     .threshold_check(Duration::from_secs(10))
///     .build()?;
/// // Curator's QueueAllocator: the queue of one shard, not started.
/// let sharder = QueueSharder::new(&fw, "/jobs/shards", "/jobs/shards-leader", policies, |fw, path| {
///     DistributedQueue::builder(fw, path, StringSerializer).build()
/// })?;
/// sharder.start()?;
/// sharder.ready().await?; // the first shard exists
/// sharder.queue()?.put(&"render page 3".to_string()).await?;
/// assert_eq!(sharder.shard_qty(), 1);
/// assert!(sharder.queue_paths()[0].starts_with("/jobs/shards/queue-"));
/// sharder.close().await;
/// # Ok(()) }
/// ```
pub struct QueueSharder<T> {
    inner: Arc<Inner<T>>,
    lifecycle: Lifecycle<Run>,
}

impl<T> std::fmt::Debug for QueueSharder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSharder")
            .field("queue_path", &self.inner.queue_path)
            .field("policies", &self.inner.policies)
            .finish_non_exhaustive()
    }
}

impl<T> Inner<T> {
    fn shards(&self) -> MutexGuard<'_, Shards<T>> {
        self.shards.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Send + Sync + 'static> QueueSharder<T> {
    /// A sharder, not started, of the queue on `queue_path`, led by a latch on `leader_path`;
    /// `allocator` makes the queue of each shard (Curator's `QueueAllocator`: given the
    /// framework and the shard's path, a queue on that path, not started; the sharder starts
    /// and closes it).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for a path that is not a valid ZooKeeper path;
    /// [`CuratorError::InvalidArgument`] for a leader path equal to the queue path or under it.
    pub fn new<F>(
        fw: &CuratorFramework,
        queue_path: &str,
        leader_path: &str,
        policies: QueueSharderPolicies,
        allocator: F,
    ) -> Result<Self>
    where
        F: Fn(&CuratorFramework, &str) -> Result<DistributedQueue<T>> + Send + Sync + 'static,
    {
        path::validate(queue_path)?;
        path::validate(leader_path)?;
        let under = queue_path == "/" || leader_path.starts_with(&format!("{queue_path}/"));
        if leader_path == queue_path || under {
            let reason =
                format!("the leader path must lie outside the queue path {queue_path:?}: its children are the shards");
            return Err(CuratorError::InvalidArgument { path: leader_path.to_string(), reason });
        }
        let latch = LeaderLatch::builder(fw, leader_path).build()?;
        let shards = Mutex::new(Shards { queues: BTreeMap::new(), preferred: BTreeSet::new() });
        let inner = Inner {
            fw: fw.clone(),
            queue_path: queue_path.to_string(),
            policies,
            allocator: Box::new(allocator),
            shards,
            latch,
        };
        Ok(Self { inner: Arc::new(inner), lifecycle: Lifecycle::new("QueueSharder") })
    }

    /// The queue path, whose children are the shards.
    pub fn path(&self) -> &str {
        &self.inner.queue_path
    }

    /// Starts the sharder (Curator's `start`): its task makes the queue path, starts a queue on
    /// each shard found, or on a new one if there is none (see [`ready`](Self::ready)), then
    /// joins the election and checks the shards' sizes every
    /// [`threshold_check`](QueueSharderPolicies::threshold_check). Returns at once.
    ///
    /// # Errors
    /// The lifecycle's ([`Lifecycle`]): `AlreadyStarted`, `AlreadyClosed`, `NoRuntime`,
    /// `Closed` (a closed framework); nothing is sent then.
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.inner.fw, |started| {
            let readiness = started.readiness();
            let (stop_tx, stop_rx) = watch::channel(false);
            let (done_tx, done_rx) = oneshot::channel();
            let inner = self.inner.clone();
            // Tracked: the framework's close waits for the shards' queues to close.
            self.inner.fw.spawn_background(async move {
                run(&inner, readiness, stop_rx).await;
                let _ = done_tx.send(());
            });
            Ok((stop_tx, done_rx))
        })
    }

    /// Waits for the start's first step: `Ok` once the queue path and the first shards'
    /// queues are made, so that [`queue`](Self::queue) has a shard to give.
    ///
    /// # Errors
    /// The first step's error (a shard's queue refused, the allocator's error, the paths'
    /// create once the retry policy gave up): the sharder is closed then (Curator's `start`
    /// throws it); `NotStarted`; `AlreadyClosed` when closed before.
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// Where the sharder is in its life.
    pub fn state(&self) -> LifeState {
        self.lifecycle.state()
    }

    /// Stops checking the shards, leaves the election and closes every shard's queue (each
    /// close as [`DistributedQueue::close`]). The shards stay, with their items. Idempotent.
    pub async fn close(&self) {
        if let Some((stop, done)) = self.lifecycle.close() {
            let _ = stop.send(true);
            let _ = done.await;
        }
    }

    /// One of the shards' queues, to put in (Curator's `getQueue`): a random one of those
    /// preferred (a new shard, or one at half the threshold or less at the last check), else a
    /// random one. Which one is not to be relied on.
    ///
    /// # Errors
    /// `NotStarted` before [`start`](Self::start); `AlreadyClosed` after
    /// [`close`](Self::close); [`CuratorError::IllegalState`] between `start` and the end of
    /// its first step ([`ready`](Self::ready)), when there is no shard yet.
    pub fn queue(&self) -> Result<Arc<DistributedQueue<T>>> {
        self.lifecycle.with_started(|_| ())?;
        let shards = self.inner.shards();
        let preferred: Vec<&String> = shards.preferred.iter().filter(|p| shards.queues.contains_key(*p)).collect();
        let keys: Vec<&String> = if preferred.is_empty() { shards.queues.keys().collect() } else { preferred };
        if keys.is_empty() {
            let reason =
                format!("QueueSharder on {:?}: no shard yet; await ready() after start()", self.inner.queue_path);
            return Err(CuratorError::IllegalState(reason));
        }
        let pick = (uuid::Uuid::new_v4().as_u128() % keys.len() as u128) as usize;
        Ok(shards.queues[keys[pick]].clone())
    }

    /// How many shards this sharder has a queue on (Curator's `getShardQty`); after
    /// [`close`](Self::close), how many it had.
    pub fn shard_qty(&self) -> usize {
        self.inner.shards().queues.len()
    }

    /// The paths of the shards this sharder has a queue on (Curator's `getQueuePaths`), sorted.
    pub fn queue_paths(&self) -> Vec<String> {
        self.inner.shards().queues.keys().cloned().collect()
    }

    /// Whether this sharder leads, and so adds the shards (its [`LeaderLatch`]'s
    /// `has_leadership`).
    pub fn has_leadership(&self) -> bool {
        self.inner.latch.has_leadership()
    }
}

/// The sharder's task: the first step, then a check every `threshold_check` until stopped or
/// the framework closes; then the latch and the queues are closed.
async fn run<T: Send + Sync + 'static>(inner: &Inner<T>, readiness: Readiness, mut stop: watch::Receiver<bool>) {
    let first = tokio::select! {
        first = initial_shards(inner) => Some(first),
        _ = stop.wait_for(|stop| *stop) => None,
    };
    match first {
        Some(Ok(())) => {
            readiness.ready();
            if let Err(err) = inner.latch.start() {
                tracing::warn!(path = %inner.queue_path, error = %err, "queue sharder: the leader latch did not start");
            }
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(inner.policies.threshold_check()) => {}
                    _ = stop.wait_for(|stop| *stop) => break,
                    _ = inner.fw.closing() => break,
                }
                tokio::select! {
                    _ = check_threshold(inner) => {}
                    _ = stop.wait_for(|stop| *stop) => break,
                }
            }
        }
        Some(Err(err)) => {
            tracing::debug!(path = %inner.queue_path, error = %err, "queue sharder: the first step failed; closing");
            readiness.refused(err);
        }
        None => {}
    }
    inner.latch.close().await;
    let queues: Vec<_> = inner.shards().queues.values().cloned().collect();
    for queue in queues {
        queue.close().await;
    }
}

/// The first step (Curator's `getInitialQueues`): the queue path, a queue on each shard found,
/// a new shard if none.
async fn initial_shards<T: Send + Sync + 'static>(inner: &Inner<T>) -> Result<()> {
    tracing::debug!(path = %inner.queue_path, "queue sharder: create the queue path (containers)");
    inner.fw.create_containers(&inner.queue_path).await?;
    tracing::debug!(path = %inner.queue_path, "queue sharder: getChildren (the shards)");
    let children = inner.fw.get_children().for_path(&inner.queue_path).await?;
    for child in &children {
        add_shard(inner, &path::make_path(&inner.queue_path, child)).await?;
    }
    if children.is_empty() {
        add_shard(inner, &new_shard_path(inner)).await?;
    }
    Ok(())
}

/// A new shard's path: `Q/queue-<uuid>`.
fn new_shard_path<T>(inner: &Inner<T>) -> String {
    path::make_path(&inner.queue_path, &format!("{QUEUE_SHARD_PREFIX}{}", uuid::Uuid::new_v4()))
}

/// Starts a queue on the shard `shard` unless we have one (Curator's `addNewQueueIfNeeded`);
/// once its path exists, the shard is preferred. The queue is known from its start on, so that
/// the task's end closes it even if the sharder stops while its path is being made.
async fn add_shard<T: Send + Sync + 'static>(inner: &Inner<T>, shard: &str) -> Result<()> {
    if inner.shards().queues.contains_key(shard) {
        return Ok(());
    }
    let queue = (inner.allocator)(&inner.fw, shard)?;
    if queue.path() != shard {
        let reason = format!("the allocator made a queue on {:?}, not on the shard's path", queue.path());
        return Err(CuratorError::InvalidArgument { path: shard.to_string(), reason });
    }
    queue.start()?;
    let queue = Arc::new(queue);
    inner.shards().queues.insert(shard.to_string(), queue.clone());
    if let Err(err) = queue.ready().await {
        // Refused: its queue closed itself; a later check may try the shard again.
        inner.shards().queues.remove(shard);
        return Err(err);
    }
    inner.shards().preferred.insert(shard.to_string());
    Ok(())
}

/// One check of the shards' sizes (Curator's `checkThreshold`); errors are logged, and the next
/// check tries again.
async fn check_threshold<T: Send + Sync + 'static>(inner: &Inner<T>) {
    if let Err(err) = try_check_threshold(inner).await {
        tracing::warn!(path = %inner.queue_path, error = %err, "queue sharder: checking the shards' sizes failed");
    }
}

async fn try_check_threshold<T: Send + Sync + 'static>(inner: &Inner<T>) -> Result<()> {
    let threshold = inner.policies.new_queue_threshold();
    tracing::debug!(path = %inner.queue_path, "queue sharder: getChildren (check)");
    let children = inner.fw.get_children().for_path(&inner.queue_path).await?;
    let mut full = None;
    for child in &children {
        let shard = path::make_path(&inner.queue_path, child);
        add_shard(inner, &shard).await?;
        tracing::debug!(path = %shard, "queue sharder: exists (the shard's size)");
        let Some(stat) = inner.fw.check_exists().for_path(&shard).await? else { continue };
        let size = usize::try_from(stat.num_children).unwrap_or(0);
        let mut shards = inner.shards();
        if size >= threshold {
            full = Some(size);
            shards.preferred.remove(&shard);
        } else if size <= threshold / 2 {
            shards.preferred.insert(shard);
        }
    }
    let Some(size) = full else { return Ok(()) };
    if !inner.latch.has_leadership() {
        return Ok(());
    }
    let (count, max) = (inner.shards().queues.len(), inner.policies.max_queues());
    if count < max {
        tracing::info!(path = %inner.queue_path, size, threshold, "queue sharder: a shard is over the threshold; adding one");
        add_shard(inner, &new_shard_path(inner)).await?;
    } else {
        tracing::warn!(path = %inner.queue_path, max, "queue sharder: the most shards are made; consider raising max_queues");
    }
    Ok(())
}
