//! [`InterProcessSemaphoreV2`] (counting semaphore with leases) and
//! [`InterProcessSemaphoreMutex`] (a non-reentrant mutex built on it).

use std::sync::Mutex;
use std::time::Duration;

use curator_core::deadline;
use curator_core::{path, zk, CreateMode, CuratorError, CuratorFramework, Result};

use super::guard::Owner;
use super::mutex::InterProcessMutex;

use crate::sequential::acquire::Granted;
use crate::sequential::names::sequence_in;
use crate::sequential::{HeldNode, Hold, LockNode, LEASE_NAME, SEMAPHORE_LEASE_PARENT, SEMAPHORE_LOCK_PARENT};
use crate::shared::{CountReader, SharedCount};

/// A distributed counting semaphore, wire compatible with Curator's `InterProcessSemaphoreV2`.
///
/// ```text
///  acquire ─► hold the mutex P/locks (the lock algorithm: create ephemeral sequential
///             P/locks/_c_<uuid>-lock-<seq> + getChildren(P/locks) pipelined; wait on
///             getData+watch of one node ahead)
///          ─► create P/leases/_c_<uuid>-lease-<seq> (ephemeral sequential, protected,
///             container parents), on the mutex node's session
///          ─► getChildren(P/leases)+watch ─► ours listed, at most max_leases children: granted
///                                         └► more: wait for the watch (or a new shared count)
///                                         └► ours missing, or made on another session than
///                                            the mutex's: delete it, release, start over
///          ─► release the mutex: delete P/locks/<ours> ─► Lease
///  release / drop the Lease ─► guaranteed delete of P/leases/<ours>
/// ```
///
/// Lease nodes are made only while the mutex is held, so at most one taker waits for room at a
/// time (Curator's invariant). A lease is granted while the number of children of `P/leases`
/// is at most `max_leases`, fixed or following a [`SharedCount`]
/// ([`with_shared_count`](Self::with_shared_count)). See `docs/architecture.md`, section 8 (the
/// mutex's phases; 8.6 for the semaphore's invariant and timed acquires) and section 5 (the
/// node layout).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::InterProcessSemaphoreV2;
///
/// let semaphore = InterProcessSemaphoreV2::new(&fw, "/pool", 3)?;
/// let leases = semaphore.acquire_many(2).await?; // all or nothing
/// assert_eq!(semaphore.participant_nodes().await?.len(), 2);
/// for lease in leases {
///     lease.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct InterProcessSemaphoreV2 {
    fw: CuratorFramework,
    locks_path: String,
    leases_path: String,
    limit: Limit,
    node_data: Mutex<Option<Vec<u8>>>,
}

/// How many leases a semaphore grants.
#[derive(Debug, Clone)]
enum Limit {
    /// A number given at construction.
    Fixed(usize),
    /// A shared count's value at each check; a count below 0 grants none.
    Shared(CountReader),
}

impl Limit {
    /// The number of leases now; for a shared count, its value is marked seen, so that
    /// [`changed`](Self::changed) waits for the next.
    fn now(&mut self) -> Result<usize> {
        match self {
            Limit::Fixed(max) => Ok(*max),
            Limit::Shared(count) => Ok(usize::try_from(count.count()?).unwrap_or(0)),
        }
    }

    /// Waits until the number may have changed: never for a fixed number.
    async fn changed(&mut self) {
        match self {
            Limit::Fixed(_) => std::future::pending().await,
            Limit::Shared(count) => count.changed().await,
        }
    }
}

impl InterProcessSemaphoreV2 {
    /// A semaphore on `path` with `max_leases` leases (at least 1).
    ///
    /// `path` need not exist: the first acquire creates it, its `locks` and `leases` children, and its missing parents as
    /// container nodes, as Curator does, and the server deletes an empty container about a
    /// minute after it was last used (`znode.container.checkIntervalMs`, 60 s by default). So
    /// data stored on a lock path the lock created is lost once the lock is freed: create the
    /// node yourself first (an existing node is never turned into a container), or build the
    /// framework with [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents).
    /// See [Lock paths are containers](crate#lock-paths-are-containers).
    pub fn new(fw: &CuratorFramework, path: &str, max_leases: usize) -> Result<Self> {
        if max_leases == 0 {
            return Err(CuratorError::InvalidArgument {
                path: path.to_string(),
                reason: "max_leases must be at least 1".into(),
            });
        }
        Self::with_limit(fw, path, Limit::Fixed(max_leases))
    }

    /// A semaphore on `path` granting as many leases as `count` holds (Curator's constructor
    /// taking a `SharedCountReader`): every process sizing its semaphore from the same count
    /// agrees on the number, and changing the count resizes them all. A taker waiting for
    /// room checks again whenever the count changes, so raising it lets waiters in at once;
    /// lowering it takes no lease back, it only holds new takers until enough are returned.
    /// A count of 0 or less grants no lease; a count node holding something else than 4 bytes
    /// fails the acquires that check it with [`BadData`](CuratorError::BadData).
    ///
    /// The count is read from `count`'s local copy, so start it first. The semaphore follows
    /// it until the count is closed or dropped, then keeps the last value.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_recipes::InterProcessSemaphoreV2;
    /// use curator_recipes::SharedCount;
    ///
    /// let size = SharedCount::new(&fw, "/pool-size", 1)?; // 1 if the node is new
    /// size.start()?;
    /// size.ready().await?;
    /// let semaphore = InterProcessSemaphoreV2::with_shared_count(&fw, "/pool", &size)?;
    /// let first = semaphore.acquire().await?;
    /// size.set(2).await?; // every semaphore sized by /pool-size now grants 2
    /// let second = semaphore.acquire().await?;
    /// # first.release().await?;
    /// # second.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_shared_count(fw: &CuratorFramework, path: &str, count: &SharedCount) -> Result<Self> {
        Self::with_limit(fw, path, Limit::Shared(count.reader()))
    }

    fn with_limit(fw: &CuratorFramework, path: &str, limit: Limit) -> Result<Self> {
        path::validate(path)?;
        Ok(Self {
            fw: fw.clone(),
            locks_path: path::make_path(path, SEMAPHORE_LOCK_PARENT),
            leases_path: path::make_path(path, SEMAPHORE_LEASE_PARENT),
            limit,
            node_data: Mutex::new(None),
        })
    }

    /// The number of leases granted now: the fixed number, or the shared count's value (0
    /// when it is below 0).
    pub fn max_leases(&self) -> Result<usize> {
        self.limit.clone().now()
    }

    /// Data for later lease nodes (default: the framework's default data, the local address).
    pub fn set_node_data(&self, data: Option<Vec<u8>>) {
        *self.node_data.lock().unwrap_or_else(|e| e.into_inner()) = data;
    }

    /// The names of the current lease nodes (as Curator: children of `P/leases`).
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        match self.fw.get_children().for_path(&self.leases_path).await {
            Err(CuratorError::NoNode { .. }) => Ok(Vec::new()),
            other => other,
        }
    }

    /// Waits for one lease. Bind it (`let lease = semaphore.acquire().await?;`): it is held
    /// until its [`release`](Lease::release) or its drop; a bare `semaphore.acquire().await?;`
    /// returns it at once.
    pub async fn acquire(&self) -> Result<Lease> {
        self.acquire_one().await
    }

    /// Waits for `qty` leases, all or nothing: on failure (or when the future is dropped) the
    /// leases already taken are returned.
    pub async fn acquire_many(&self, qty: usize) -> Result<Vec<Lease>> {
        if qty == 0 {
            return Err(CuratorError::InvalidArgument {
                path: self.leases_path.clone(),
                reason: "qty must be at least 1".into(),
            });
        }
        let mut leases = Vec::with_capacity(qty);
        for _ in 0..qty {
            // On error, `leases` is dropped and every lease in it deleted.
            leases.push(self.acquire_one().await?);
        }
        Ok(leases)
    }

    /// As [`acquire_many`](Self::acquire_many), giving up after `timeout` (`Ok(None)`).
    pub async fn acquire_timeout(&self, qty: usize, timeout: Duration) -> Result<Option<Vec<Lease>>> {
        super::within(timeout, self.acquire_many(qty)).await
    }

    /// One lease, Curator's way: hold the mutex `P/locks`, create the lease, wait until it is
    /// among the first `max_leases`, release the mutex.
    ///
    /// Lease nodes are only ever created under a live hold of the mutex, so at most one taker
    /// waits at a time and the count can fall to `max_leases`. When the lease goes with its
    /// session, or was made on a session other than the mutex node's (the mutex went with its
    /// session first), the taker starts over *from the mutex*, under the retry policy as for any
    /// session loss. Taking another lease without the mutex let two takers wait at once, each
    /// counting the other: with one lease, both waited forever (found by the chaos suite).
    async fn acquire_one(&self) -> Result<Lease> {
        let base = path::make_path(&self.leases_path, LEASE_NAME);
        let mut retry = self.fw.retry_loop();
        loop {
            // A handle per acquire: concurrent takers in this process must exclude each other too.
            let mutex = InterProcessMutex::new(&self.fw, &self.locks_path)?;
            let guard = mutex.acquire().await?;
            let result = self.take_lease(&base, guard.node().generation).await;
            guard.release().await?;
            match result? {
                Some(lease) => return Ok(lease),
                None => {
                    let vanished = CuratorError::SessionExpired { path: base.clone() };
                    // Giving up still reports the missing lease node.
                    if retry.on_error(vanished).await.is_err() {
                        return Err(CuratorError::NoNode { path: base });
                    }
                }
            }
        }
    }

    /// Creates our lease `base` (`P/leases/lease-`) while holding the mutex (whose node is of
    /// session `generation`) and waits for room. `None` when the lease or the mutex went with a
    /// session: start over.
    async fn take_lease(&self, base: &str, generation: u64) -> Result<Option<Lease>> {
        let data = self.node_data.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let data = data.unwrap_or_else(|| self.fw.default_data().to_vec());
        // The session the lease is meant for: the mutex's. Taken before the create, so that
        // nothing is awaited between the create and the lease that deletes its node if dropped
        // (an error or a deadline there left the node behind, a lease counted forever).
        let session = self.fw.session().await?;
        tracing::debug!(path = %base, "create lease");
        let (created, stat) = self
            .fw
            .create()
            .creating_parent_containers_if_needed()
            .with_protection()
            .with_mode(CreateMode::EphemeralSequential)
            .for_path_with_stat(base, data)
            .await?;
        let sequence = sequence_in(path::node_name(&created), &[LEASE_NAME]).unwrap_or(0);
        let node = LockNode::created_on(created, sequence, &stat, &session);
        let granted = Granted { node, watch: None, recipe: curator_core::metrics::recipe::LEASE };
        let lease = Lease { held: HeldNode::new(Hold::new(&self.fw, granted)), armed: true };
        let owned = stat.ephemeral_owner == session.id() && session.is_generation(generation);
        if !owned {
            tracing::debug!(path = %lease.path(), "lease made on another session than the mutex: start over");
            return Ok(None);
        }
        // On `false` or an error, dropping the lease deletes it.
        Ok(self.wait_for_room(&lease).await?.then_some(lease))
    }

    /// Lists the leases (with a watch) until ours is within the limit, checking again when the
    /// leases or the limit change. `Ok(false)` when our node is not listed.
    async fn wait_for_room(&self, lease: &Lease) -> Result<bool> {
        let ours = lease.node_name().to_string();
        let leases_path = self.leases_path.clone();
        let mut limit = self.limit.clone();
        loop {
            // Read before the listing: a change after it wakes the wait below.
            let max = limit.now()?;
            let listing = self.fw.call_with_retry("semaphore-list", &leases_path, |session, _| {
                let leases_path = leases_path.clone();
                async move {
                    tracing::debug!(path = %leases_path, "getChildren+watch");
                    session
                        .client()
                        .list_and_watch_children(&leases_path)
                        .await
                        .map_err(|e| CuratorError::from_zk(&leases_path, e))
                }
            });
            let (children, watcher) = listing.await?;
            tracing::debug!(path = %leases_path, ours = %ours, leases = children.len(), max, "leases listed");
            if !children.contains(&ours) {
                tracing::debug!(path = %leases_path, ours = %ours, "our lease is not listed: its session is gone");
                return Ok(false);
            }
            if children.len() <= max {
                return Ok(true);
            }
            // A timed acquire stops waiting at its deadline (`curator_core::deadline`).
            let wake = async {
                tokio::select! {
                    event = watcher.changed() => Ok(Some(event)),
                    () = limit.changed() => Ok(None),
                }
            };
            let Some(event) = deadline::until(&leases_path, wake).await? else {
                tracing::debug!(path = %leases_path, ours = %ours, "lease count changed");
                continue;
            };
            tracing::debug!(path = %leases_path, ours = %ours, event = ?event.event_type, state = ?event.session_state, "leases changed");
            if event.event_type == zk::EventType::Session && event.session_state.is_terminated() {
                return Ok(false);
            }
        }
    }
}

/// One lease of an [`InterProcessSemaphoreV2`]: its node. Release it with
/// [`release`](Self::release); dropping it releases in the background.
///
/// It dereferences to [`HeldNode`]: like a [`LockGuard`](super::LockGuard), it has a fencing
/// token and says when it may be lost ([`is_held`](HeldNode::is_held),
/// [`lost`](HeldNode::lost)), judged by the same rules.
#[must_use = "bind the lease: `let lease = semaphore.acquire().await?;` holds it until `lease.release()` or its drop; \
              a bare `semaphore.acquire().await?;` or `let _ = ...` drops it and returns the lease at once"]
#[derive(Debug)]
pub struct Lease {
    held: HeldNode,
    armed: bool,
}

impl std::ops::Deref for Lease {
    type Target = HeldNode;

    fn deref(&self) -> &HeldNode {
        &self.held
    }
}

impl Lease {
    /// The lease node's data.
    pub async fn data(&self) -> Result<Vec<u8>> {
        self.held.hold().framework().get_data().for_path(self.path()).await
    }

    /// Returns the lease (deletes its node; a node already gone is fine).
    ///
    /// As with [`LockGuard::release`](super::LockGuard::release), giving up on the future or
    /// dropping the lease is safe: the delete goes on in the background until the node is gone.
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        self.held.hold().release().await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.armed {
            self.held.hold().clone().release_in_background();
        }
    }
}

/// A non-reentrant distributed mutex, wire compatible with Curator's
/// `InterProcessSemaphoreMutex`: an [`InterProcessSemaphoreV2`] with one lease.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::InterProcessSemaphoreMutex;
///
/// let mutex = InterProcessSemaphoreMutex::new(&fw, "/single")?;
/// mutex.acquire().await?;
/// assert!(mutex.acquire().await.is_err()); // not reentrant
/// mutex.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct InterProcessSemaphoreMutex {
    /// The mutex's path, as given.
    path: String,
    semaphore: InterProcessSemaphoreV2,
    /// The lease held through this handle, and the task that acquired it.
    lease: Mutex<Option<(Owner, Lease)>>,
}

impl InterProcessSemaphoreMutex {
    /// A mutex on `path`.
    ///
    /// `path` need not exist: the first acquire creates it, its `locks` and `leases` children, and its missing parents as
    /// container nodes, as Curator does, and the server deletes an empty container about a
    /// minute after it was last used (`znode.container.checkIntervalMs`, 60 s by default). So
    /// data stored on a lock path the lock created is lost once the lock is freed: create the
    /// node yourself first (an existing node is never turned into a container), or build the
    /// framework with [`use_container_parents(false)`](curator_core::CuratorFrameworkBuilder::use_container_parents).
    /// See [Lock paths are containers](crate#lock-paths-are-containers).
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        let semaphore = InterProcessSemaphoreV2::new(fw, path, 1)?;
        Ok(Self { path: path.to_string(), semaphore, lease: Mutex::new(None) })
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(Owner, Lease)>> {
        self.lease.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until held. [`CuratorError::AlreadyHeld`] at once if this task already holds it
    /// through this handle (it is not reentrant); other tasks sharing the handle wait their
    /// turn, as other processes do.
    pub async fn acquire(&self) -> Result<()> {
        let owner = Owner::current();
        if self.slot().as_ref().is_some_and(|(o, _)| *o == owner) {
            return Err(CuratorError::AlreadyHeld {
                path: self.path.clone(),
                reason: "an InterProcessSemaphoreMutex is not reentrant: release it first",
            });
        }
        let lease = self.semaphore.acquire().await?;
        if let Some((_, stale)) = self.slot().replace((owner, lease)) {
            // Only a lease whose node vanished (its session was lost) can still be here.
            tracing::debug!(path = %stale.path(), "replacing a vanished lease");
        }
        Ok(())
    }

    /// As [`acquire`](Self::acquire), giving up after `timeout` (`Ok(false)`).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        Ok(super::within(timeout, self.acquire()).await?.is_some())
    }

    /// Releases. [`CuratorError::NotHeld`] when not held through this handle.
    pub async fn release(&self) -> Result<()> {
        let lease = self.slot().take();
        match lease {
            Some((_, lease)) => lease.release().await,
            None => Err(CuratorError::NotHeld { path: self.path.clone(), what: "the semaphore mutex" }),
        }
    }

    /// Whether this handle holds the mutex.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.slot().is_some()
    }

    /// The fencing token of the held lease.
    pub fn fencing_token(&self) -> Option<i64> {
        self.slot().as_ref().map(|(_, lease)| lease.fencing_token())
    }

    /// The held lease's node, while this handle holds the mutex: for guarded writes
    /// ([`HeldNode::transaction`], [`HeldNode::set_data`]) and to watch for its loss. The lease
    /// stays with the handle; its [`release`](Self::release) ends the hold for this copy too.
    pub fn held(&self) -> Option<HeldNode> {
        self.slot().as_ref().map(|(_, lease)| HeldNode::clone(lease))
    }
}
