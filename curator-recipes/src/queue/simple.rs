//! [`SimpleDistributedQueue`]: Curator's `SimpleDistributedQueue` (and ZooKeeper's own queue
//! recipe), one item of raw bytes per node `P/qn-<seq>`.
//!
//! ```text
//! offer : create P/qn- (persistent sequential; P and its parents made as containers)
//! take  : List  : getChildren(P) -> the qn- children, ordered by sequence number
//!         Claim : each item, head first: getData + delete(version 0), pipelined
//!                   delete ok  -> the data read just before is ours: return it
//!                   NoNode     -> another taker had it: next item
//!                   BadVersion -> the node was written to: getData, then delete at that version
//!         nothing claimed, the listing had no watch -> List again, with a watch:
//!                   getChildren+watch(P), or exists+watch(P) when P is missing
//!         nothing claimed, the listing had a watch  -> Wait: the watch fires, or the
//!                   connection is back after a cut or a new session -> List
//! ```
//!
//! **At most once.** An item is ours only if our delete removed its node, so no two takers
//! get one item. A take whose delete's reply is lost asks again (getData + delete at version
//! 0): the node still there is the same item (a sequential name is not made again while `P`
//! stands), so our delete was not applied and this one decides; the node gone, the take cannot
//! tell whether its delete or another taker's removed it: it moves on, and the item may be
//! lost. Such takes are counted ([`SimpleDistributedQueue::uncertain_takes`]) and logged, and a
//! take that fails while its delete is in doubt fails with an error whose
//! [`outcome_unknown`](CuratorError::outcome_unknown) holds (counted too).
//!
//! **Offers are made at most once too.** An offer whose create's reply is lost is never sent
//! again (a sequential create leaves nothing only it could have left, docs/architecture.md
//! section 4.4): it fails with [`CuratorError::OutcomeUnknown`] (or the connection error, if
//! the retry policy gives up first), and the item is in the queue once or not at all, never
//! twice.
//!
//! **Cancel safety.** A take holds nothing while it waits: dropping it then drops its watch
//! (zookeeper-client removes it from the server). A take dropped while its delete is on the
//! wire leaves the answer to a background task (tracked, so that `close()` waits for it), which
//! offers the item again, at the tail, if the delete went through.
//!
//! **A reaped parent** (CURATOR-308): `P` is a container, which the server deletes once its
//! last item is taken. A waiter whose `P` is gone watches for `P` to be made again (by the
//! next offer) and waits; it neither fails nor spins, and it creates nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curator_core::deadline;
use curator_core::{path, ConnectionState, ConnectionStateEvent, CreateMode, CuratorError, CuratorFramework};
use curator_core::{Result, Session, Watch};
use tokio::sync::watch;

/// The name of every item node before its sequence number: `P/qn-0000000042`. Curator's and
/// ZooKeeper's queue recipes use it too; children of `P` without it are not items.
pub const QUEUE_NODE_PREFIX: &str = "qn-";

/// A queue of byte strings in ZooKeeper, Curator's `SimpleDistributedQueue`: producers
/// [`offer`](Self::offer) items, consumers [`take`](Self::take) them in the order they were
/// offered, each item to one consumer at most.
///
/// Each item is a persistent sequential node `P/qn-<seq>` holding the item's bytes; `P` and its
/// missing parents are made as containers by the first offer. Java clients using Curator's
/// `SimpleDistributedQueue` (or ZooKeeper's queue recipe) on the same path share the queue.
/// Items are ordered by their sequence number; children of `P` that are not `qn-` nodes are
/// ignored, as Curator does.
///
/// Delivery is at most once, and an offer adds its item at most once: the module's docs say
/// when an item can be lost, and how it is told.
/// The error policy plays no part: a queue holds nothing while it waits. Waiting rides out
/// disconnections and new sessions; requests run under the framework's retry policy, and a
/// take fails with the error of a request that policy gave up on.
///
/// Clones share the handle (and its [`uncertain_takes`](Self::uncertain_takes) count).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::SimpleDistributedQueue;
///
/// let queue = SimpleDistributedQueue::new(&fw, "/jobs/thumbnails")?;
/// let consumer = queue.clone();
/// let taking = tokio::spawn(async move { consumer.take().await }); // waits for an item
///
/// queue.offer(b"photo-1.jpg".to_vec()).await?;
/// queue.offer(b"photo-2.jpg".to_vec()).await?;
/// assert_eq!(taking.await??, b"photo-1.jpg");
/// assert_eq!(queue.peek().await?.as_deref(), Some(&b"photo-2.jpg"[..]));
/// assert_eq!(queue.poll(Duration::from_secs(1)).await?.as_deref(), Some(&b"photo-2.jpg"[..]));
/// assert_eq!(queue.poll(Duration::from_millis(50)).await?, None); // empty
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SimpleDistributedQueue {
    fw: CuratorFramework,
    path: String,
    uncertain: Arc<AtomicU64>,
}

/// The requests of one claim, already sent: the future gives the item if our delete removed
/// its node.
type Sent = Pin<Box<dyn Future<Output = Result<Vec<u8>>> + Send>>;

/// The items found by one listing, head first, and the watch it set, if it set one.
struct Listing {
    items: Vec<String>,
    watch: Option<Watch>,
}

impl SimpleDistributedQueue {
    /// A queue on `path` (nothing is sent yet).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] if `path` is not a valid ZooKeeper path.
    ///
    /// ```
    /// # fn f(fw: &curator_core::CuratorFramework) {
    /// use curator_recipes::SimpleDistributedQueue;
    /// assert!(SimpleDistributedQueue::new(fw, "/app/queue").is_ok());
    /// assert!(SimpleDistributedQueue::new(fw, "app/queue").is_err()); // not absolute
    /// # }
    /// ```
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        path::validate(path)?;
        Ok(Self { fw: fw.clone(), path: path.to_string(), uncertain: Arc::new(AtomicU64::new(0)) })
    }

    /// The queue's path `P`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Adds `data` at the tail of the queue and returns the path of its node (Curator's
    /// `offer`, which returns `true`). `P` and its missing parents are made as containers.
    ///
    /// # Errors
    /// [`CuratorError::DataTooLarge`] for data over the framework's limit (nothing is sent), or
    /// the error of a create the retry policy gave up on. A create whose reply was lost is not
    /// sent again: the offer fails with [`CuratorError::OutcomeUnknown`] (or the connection
    /// error, if the retry policy gave up first; either way
    /// [`outcome_unknown`](CuratorError::outcome_unknown) holds), and the item may be in the
    /// queue, once.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let queue = curator_recipes::SimpleDistributedQueue::new(&fw, "/app/queue")?;
    /// let node = queue.offer(b"job 1".to_vec()).await?;
    /// assert!(node.starts_with("/app/queue/qn-"));
    /// # Ok(()) }
    /// ```
    pub async fn offer(&self, data: impl Into<Vec<u8>>) -> Result<String> {
        let node = self.create_item(data.into()).await?;
        curator_core::metrics::queue_put(curator_core::metrics::queue::SIMPLE, 1);
        Ok(node)
    }

    /// Creates the node of an item: an offer's, or a dropped take's offered again (not a put).
    async fn create_item(&self, data: Vec<u8>) -> Result<String> {
        let prefix = path::make_path(&self.path, QUEUE_NODE_PREFIX);
        tracing::debug!(path = %prefix, "queue offer: create (persistent sequential, parents as containers)");
        let create =
            self.fw.create().creating_parent_containers_if_needed().with_mode(CreateMode::PersistentSequential);
        create.for_path(&prefix, data).await
    }

    /// Removes the head of the queue and returns it, waiting for an item if the queue is empty
    /// (also while `P` does not exist). Dropping the future loses no item (see the module's
    /// docs).
    ///
    /// # Errors
    /// The error of a request the retry policy gave up on, or [`CuratorError::Closed`] when
    /// the framework closes. Under `enable_compression()`, an item whose data does not
    /// decompress is [`CuratorError::BadData`] with its path (it is taken by then).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let queue = curator_recipes::SimpleDistributedQueue::new(&fw, "/app/queue")?;
    /// loop {
    ///     let job = queue.take().await?;
    ///     tracing::info!(bytes = job.len(), "took a job");
    /// }
    /// # }
    /// ```
    pub async fn take(&self) -> Result<Vec<u8>> {
        self.take_waiting().await
    }

    /// Removes the head of the queue and returns it, waiting at most `timeout` for an item:
    /// `None` if none came in time. `Duration::ZERO` looks once and does not wait (Curator's
    /// `poll()` without arguments).
    ///
    /// # Errors
    /// As [`take`](Self::take).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use std::time::Duration;
    /// let queue = curator_recipes::SimpleDistributedQueue::new(&fw, "/app/queue")?;
    /// match queue.poll(Duration::from_secs(3)).await? {
    ///     Some(job) => tracing::info!(bytes = job.len(), "took a job"),
    ///     None => tracing::info!("no job within 3 s"),
    /// }
    /// let now = queue.poll(Duration::ZERO).await?; // the head if there is one, without waiting
    /// # Ok(()) }
    /// ```
    pub async fn poll(&self, timeout: Duration) -> Result<Option<Vec<u8>>> {
        if timeout.is_zero() {
            return self.take_now().await;
        }
        // A wait too long to count (`Duration::MAX`) is a wait without end.
        let at = deadline::deadline_after(tokio::time::Instant::now(), timeout);
        match deadline::with_deadline(at, self.take_waiting()).await {
            Ok(data) => Ok(Some(data)),
            Err(CuratorError::Timeout { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Removes the head of the queue and returns it, without waiting (Curator's `remove`).
    ///
    /// # Errors
    /// [`CuratorError::NoNode`] on the path `P/qn-` when the queue is empty (Curator throws
    /// `NoSuchElementException`); otherwise as [`take`](Self::take).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use curator_core::CuratorError;
    /// let queue = curator_recipes::SimpleDistributedQueue::new(&fw, "/app/queue")?;
    /// match queue.remove().await {
    ///     Ok(job) => tracing::info!(bytes = job.len(), "took a job"),
    ///     Err(CuratorError::NoNode { .. }) => tracing::info!("the queue is empty"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn remove(&self) -> Result<Vec<u8>> {
        self.take_now().await?.ok_or_else(|| self.empty())
    }

    /// The head of the queue, left in place, or `None` if the queue is empty (Curator's
    /// `peek`).
    ///
    /// # Errors
    /// The error of a read the retry policy gave up on.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let queue = curator_recipes::SimpleDistributedQueue::new(&fw, "/app/queue")?;
    /// if let Some(next) = queue.peek().await? {
    ///     tracing::info!(bytes = next.len(), "next job");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self) -> Result<Option<Vec<u8>>> {
        for name in self.list(false).await?.items {
            let node = path::make_path(&self.path, &name);
            tracing::debug!(path = %node, "queue peek: getData");
            match self.fw.get_data().for_path(&node).await {
                Ok(data) => return Ok(Some(data)),
                // Taken meanwhile: the next one is the head now.
                Err(CuratorError::NoNode { .. }) => continue,
                Err(err) => return Err(err),
            }
        }
        Ok(None)
    }

    /// The head of the queue, left in place (Curator's `element`).
    ///
    /// # Errors
    /// [`CuratorError::NoNode`] on the path `P/qn-` when the queue is empty (Curator throws
    /// `NoSuchElementException`); otherwise as [`peek`](Self::peek).
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// let queue = curator_recipes::SimpleDistributedQueue::new(&fw, "/app/queue")?;
    /// let head = queue.element().await?;
    /// # Ok(()) }
    /// ```
    pub async fn element(&self) -> Result<Vec<u8>> {
        self.peek().await?.ok_or_else(|| self.empty())
    }

    /// How many takes through this handle (or a clone) may have deleted an item's node without
    /// knowing it: the delete's reply was lost (or cut short by a deadline), and when tried
    /// again the node was gone, deleted by this take or by another, or the take failed before
    /// it could ask again (its error's [`outcome_unknown`](CuratorError::outcome_unknown)
    /// holds). Each is an item that may be lost (delivery is at most once); each is also logged
    /// as a warning. A delete whose reply was lost and whose node was still there when asked
    /// again is not counted: it was not applied.
    pub fn uncertain_takes(&self) -> u64 {
        self.uncertain.load(Ordering::Relaxed)
    }

    /// The error of `remove` and `element` on an empty queue.
    fn empty(&self) -> CuratorError {
        CuratorError::NoNode { path: path::make_path(&self.path, QUEUE_NODE_PREFIX) }
    }

    /// One look: the head, taken, or `None` if no item could be taken.
    async fn take_now(&self) -> Result<Option<Vec<u8>>> {
        for name in self.list(false).await?.items {
            if let Some(data) = self.claim(&name).await? {
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    /// The loop of the module's diagram.
    async fn take_waiting(&self) -> Result<Vec<u8>> {
        let mut states = self.fw.connection_state_watch();
        states.borrow_and_update();
        // The first look goes without a watch: on a queue with items, a watch left unfired
        // would cost a RemoveWatches request when dropped (`curator_core::let_fire`).
        let mut watched = false;
        loop {
            let listing = self.list(watched).await?;
            for name in &listing.items {
                if let Some(data) = self.claim(name).await? {
                    if let Some(watch) = listing.watch {
                        // Our delete of the item, a child of `P`, fired the listing's watch.
                        watch.let_fire().await;
                    }
                    return Ok(data);
                }
            }
            if !watched {
                watched = true;
                continue;
            }
            watched = false;
            // No watch: `P` was made again between the listing and the exists: look again.
            if let Some(watch) = listing.watch {
                deadline::until(&self.path, self.wait(watch, &mut states)).await?;
            }
        }
    }

    /// Waits for the listing's watch to fire, or for the connection to come back after a
    /// disconnection or on a new session.
    async fn wait(&self, watch: Watch, states: &mut watch::Receiver<ConnectionStateEvent>) -> Result<()> {
        tracing::debug!(path = %self.path, "queue take: waiting for an item");
        let fired = tokio::select! {
            event = watch.changed() => event,
            back = connected_again(states) => return back,
        };
        tracing::debug!(path = %self.path, event = ?fired.event_type, state = ?fired.session_state, "queue watch fired");
        if fired.session_state.is_terminated() {
            // The watch's session is over: look again once the framework has the next one.
            connected_again(states).await?;
        }
        Ok(())
    }

    /// Lists `P`'s items, with a watch if `watched`. A missing `P` is an empty queue; with
    /// `watched`, its creation is watched instead.
    async fn list(&self, watched: bool) -> Result<Listing> {
        let listed = if watched {
            tracing::debug!(path = %self.path, "queue list: getChildren+watch");
            self.fw.get_children().for_path_and_watch(&self.path).await.map(|(c, _, w)| (c, Some(w)))
        } else {
            tracing::debug!(path = %self.path, "queue list: getChildren");
            self.fw.get_children().for_path(&self.path).await.map(|c| (c, None))
        };
        match listed {
            Ok((children, watch)) => Ok(Listing { items: self.items(children), watch }),
            Err(CuratorError::NoNode { .. }) if watched => {
                // Never made yet, or a container the server reaped once empty (CURATOR-308):
                // wait for the next offer to make it again.
                tracing::debug!(path = %self.path, "queue list: the queue's node is missing: exists+watch");
                let (stat, watch) = self.fw.check_exists().for_path_and_watch(&self.path).await?;
                Ok(Listing { items: Vec::new(), watch: stat.is_none().then_some(watch) })
            }
            Err(CuratorError::NoNode { .. }) => Ok(Listing { items: Vec::new(), watch: None }),
            Err(err) => Err(err),
        }
    }

    /// The items among `children`, head first.
    fn items(&self, children: Vec<String>) -> Vec<String> {
        let (items, ignored) = queue_items(children);
        if ignored > 0 {
            tracing::warn!(path = %self.path, ignored, "children of the queue's node that are not queue items are ignored");
        }
        items
    }

    /// Takes the item `name` if it is still there: its data if our delete removed its node,
    /// `None` if it was gone (taken by another).
    async fn claim(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let node = path::make_path(&self.path, name);
        let unknown = AtomicBool::new(false);
        let claimed = self
            .fw
            .call_with_retry("queue_take", &node, |session, _| {
                let (node, unknown) = (&node, &unknown);
                async move {
                    let result = self.claim_on(&session, node).await;
                    if result.as_ref().is_err_and(CuratorError::outcome_unknown) {
                        unknown.store(true, Ordering::Relaxed);
                    }
                    result
                }
            })
            .await;
        let unknown = unknown.load(Ordering::Relaxed);
        match claimed {
            Ok(data) => {
                curator_core::metrics::queue_taken(curator_core::metrics::queue::SIMPLE);
                // Decoded as `offer` encoded it (section 3.10). The item is taken by now: data
                // that does not decompress is BadData with its path, and the item is gone.
                self.fw.decode_data(&node, data).map(Some)
            }
            Err(CuratorError::NoNode { .. }) if !unknown => Ok(None),
            Err(err) => {
                if unknown && (err.outcome_unknown() || matches!(err, CuratorError::NoNode { .. })) {
                    self.uncertain.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(path = %node, error = %err, "queue take: the delete's reply was lost and the node is gone or unknown: the item may be lost (at most once)");
                }
                match err {
                    CuratorError::NoNode { .. } => Ok(None),
                    err => Err(err),
                }
            }
        }
    }

    /// One attempt of [`claim`](Self::claim) on one session.
    async fn claim_on(&self, session: &Session, node: &str) -> Result<Vec<u8>> {
        let client = session.client();
        tracing::debug!(path = %node, "queue take: getData + delete(version 0), pipelined");
        match self.in_flight(node, send_claim(session, node)?).answer().await {
            Err(CuratorError::BadVersion { .. }) => {}
            other => return other,
        }
        // Written to since it was made (neither our queue nor Curator's does): read it, then
        // delete it at the version read.
        loop {
            tracing::debug!(path = %node, "queue take: getData (the node was changed)");
            let (data, stat) = client.get_data(node).await.map_err(|e| CuratorError::from_zk(node, e))?;
            tracing::debug!(path = %node, version = stat.version, "queue take: delete at the version read");
            let delete = session.delete(node, Some(stat.version))?;
            let owned = node.to_string();
            let sent: Sent =
                Box::pin(async move { delete.await.map(|()| data).map_err(|e| CuratorError::from_zk(&owned, e)) });
            match self.in_flight(node, sent).answer().await {
                Err(CuratorError::BadVersion { .. }) => continue,
                other => return other,
            }
        }
    }

    fn in_flight(&self, node: &str, sent: Sent) -> InFlight {
        InFlight { sent, answered: false, queue: self.clone(), node: node.to_string() }
    }
}

/// Sends the claim of `node`: getData, then a delete at version 0 (a node no one wrote to since
/// it was made), on one session. Both leave now, in this order (zookeeper-client sends a
/// request when its future is made), and the server answers them in order: if the delete
/// succeeds, the data read just before is the data of the node it deleted. A delete the
/// framework's schema set refuses is not sent (the read before it is).
fn send_claim(session: &Session, node: &str) -> Result<Sent> {
    let read = session.client().get_data(node);
    let delete = session.delete(node, Some(0))?;
    let node = node.to_string();
    Ok(Box::pin(async move {
        let deleted = delete.await;
        let read = read.await;
        let from_zk = |e| CuratorError::from_zk(&node, e);
        deleted.map_err(from_zk)?;
        read.map(|(data, _)| data).map_err(from_zk)
    }))
}

/// A claim whose requests are on the wire. Dropped before its answer (the take was dropped),
/// it leaves the answer to a tracked background task, which offers the item again, at the
/// tail of the queue, if our delete removed its node: a dropped take loses no item.
struct InFlight {
    sent: Sent,
    /// The answer was had: nothing is left to the drop.
    answered: bool,
    queue: SimpleDistributedQueue,
    node: String,
}

impl InFlight {
    /// The claim's answer. It takes the claim, so it is had at most once; the drop sees
    /// whether it was.
    async fn answer(mut self) -> Result<Vec<u8>> {
        let answer = (&mut self.sent).await;
        self.answered = true;
        answer
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        // A future that owns nothing stands in for the one handed to the background task.
        let sent = std::mem::replace(&mut self.sent, Box::pin(std::future::pending()));
        let (queue, node) = (self.queue.clone(), std::mem::take(&mut self.node));
        self.queue.fw.spawn_background(async move {
            let data = match sent.await {
                Ok(data) => data,
                Err(err) => {
                    tracing::debug!(path = %node, error = %err, "dropped queue take: its delete did not take the item");
                    return;
                }
            };
            tracing::info!(path = %node, "dropped queue take had deleted its item: offering it again");
            match queue.create_item(data).await {
                Ok(again) => {
                    curator_core::metrics::queue_reoffered();
                    tracing::info!(path = %node, again = %again, "item offered again after a dropped take")
                }
                Err(err) if err.outcome_unknown() => tracing::error!(path = %node, error = %err, "item of a dropped take offered again with its reply lost: in the queue once, or lost"),
                Err(err) => tracing::error!(path = %node, error = %err, "item of a dropped take could not be offered again: lost"),
            }
        });
    }
}

/// Waits for the next transition to a connected state (a reconnection, or a new session).
async fn connected_again(states: &mut watch::Receiver<ConnectionStateEvent>) -> Result<()> {
    loop {
        states.changed().await.map_err(|_| CuratorError::Closed)?;
        match states.borrow_and_update().state {
            ConnectionState::Closed => return Err(CuratorError::Closed),
            state if state.is_connected() => return Ok(()),
            _ => {}
        }
    }
}

/// The queue items among `children`, head first (ordered by the sequence number after
/// [`QUEUE_NODE_PREFIX`], as numbers: `qn-10` after `qn-9`; a `qn-` name without a number
/// last, by name), and how many children were not items (no `qn-` prefix).
fn queue_items(mut children: Vec<String>) -> (Vec<String>, usize) {
    let all = children.len();
    children.retain(|c| c.starts_with(QUEUE_NODE_PREFIX));
    let ignored = all - children.len();
    path::sort_by_sequence(&mut children, QUEUE_NODE_PREFIX);
    (children, ignored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(all: &[&str]) -> Vec<String> {
        all.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn items_are_ordered_by_sequence_number_and_others_ignored() {
        let children =
            names(&["qn-0000000010", "lock-0000000001", "qn-9", "qn-0000000002", "qn-x", "_c_qn-0000000001"]);
        let (items, ignored) = queue_items(children);
        assert_eq!(items, names(&["qn-0000000002", "qn-9", "qn-0000000010", "qn-x"]));
        assert_eq!(ignored, 2);
    }
}
