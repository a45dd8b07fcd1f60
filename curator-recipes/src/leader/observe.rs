//! [`LeaderObserver`]: the current leader of an election, for processes that do not take part.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use curator_cache::{ChildData, PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::{path, CuratorError, CuratorFramework, Result};
use curator_core::{Lifecycle, Readiness};
use tokio::sync::{oneshot, watch};

use crate::sequential::order::contenders;
use crate::sequential::{LEADER_LATCH_NAME, MUTEX_LOCK_NAME};

/// The leader of an election, as an observer sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The id the leader announced (its node's data as UTF-8; invalid bytes are replaced).
    pub id: String,
    /// The leader's fencing token: the czxid of its node, as its
    /// [`Leadership::fencing_token`](crate::sequential::HeldNode::fencing_token) says.
    pub token: i64,
    /// The full path of the leader's node.
    pub path: String,
}

/// Follows the leader of the election at `path` without taking part (past Curator: etcd's
/// `Election.Observe`): a [`LeaderLatch`](super::LeaderLatch)'s (`latch-` nodes) or a
/// mutex-based election's, such as a `LeaderSelector`'s (`lock-` nodes). The leader is the node
/// with the lowest sequence number among both kinds; it is updated on every change, from a
/// [`PathChildrenCache`] of `path` (one persistent watch; one read per new node, none per
/// deletion). The path need not exist yet: it is followed once someone makes it; the observer
/// makes nothing.
///
/// Its life is every started thing's ([`Lifecycle`](curator_core::Lifecycle)):
/// [`new`](Self::new) makes it latent, [`start`](Self::start) starts following,
/// [`ready`](Self::ready) waits for the first read of the election, [`close`](Self::close)
/// stops.
///
/// The first value comes once the cache has loaded. Between a leader's node going and the next
/// one being seen, the observer may show the next in line before that one has learnt it leads:
/// the observer reads the tree, not the participants' minds.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use curator_core::CuratorFramework;
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use curator_recipes::{LeaderLatch, LeaderObserver};
///
/// let mut observer = LeaderObserver::new(&fw, "/services/indexer/leader")?;
/// observer.start()?;
/// observer.ready().await?; // the election was read (nobody takes part yet)
/// let latch = LeaderLatch::new(&fw, "/services/indexer/leader", "indexer-1")?;
/// latch.start()?;
/// let term = latch.await_leadership().await?;
/// while observer.current().map(|l| l.token) != Some(term.fencing_token()) {
///     observer.changed().await.expect("the observer runs");
/// }
/// assert_eq!(observer.current().map(|l| l.id), Some("indexer-1".to_string()));
/// observer.close().await;
/// latch.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LeaderObserver {
    fw: CuratorFramework,
    path: String,
    /// Started, it keeps the sender whose drop (on close, or with the observer) ends the task
    /// that waits for the first read.
    lifecycle: Lifecycle<oneshot::Sender<()>>,
    cache: Arc<PathChildrenCache>,
    /// The sender of the leader shown, until `start` hands it to the relay (or `close` drops it).
    publish: Mutex<Option<watch::Sender<Option<Leader>>>>,
    leader: watch::Receiver<Option<Leader>>,
}

impl LeaderObserver {
    /// An observer of the election at `path`, latent: nothing is read before
    /// [`start`](Self::start).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for a path ZooKeeper would refuse.
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        path::validate(path)?;
        let cache = PathChildrenCache::builder(fw, path).create_parent_containers(false).build()?;
        let (publish, leader) = watch::channel(None);
        Ok(Self {
            fw: fw.clone(),
            path: path.to_string(),
            lifecycle: Lifecycle::new("LeaderObserver"),
            cache: Arc::new(cache),
            publish: Mutex::new(Some(publish)),
            leader,
        })
    }

    /// Starts following the election: spawns the task that starts the observer's cache and
    /// reports its first read to [`ready`](Self::ready). Sync: nothing is awaited.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] (outside a tokio runtime) or [`CuratorError::Closed`] (a
    /// closed framework), as for every started thing (module
    /// [`Lifecycle`](curator_core::Lifecycle), naming `LeaderObserver`); nothing changes then.
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.fw, |started| {
            let Some(publish) = self.publish.lock().unwrap_or_else(PoisonError::into_inner).take() else {
                // Only a close takes it, and a closed observer does not start.
                return Err(CuratorError::AlreadyClosed { what: self.lifecycle.what() });
            };
            // Ends when the cache closes (its event stream ends), which drops the sender.
            started.relay(self.cache.events(), follow(self.path.clone(), publish));
            let (stop, stopped) = oneshot::channel();
            started.spawn(first_read(self.cache.clone(), self.path.clone(), started.readiness(), stopped));
            Ok(stop)
        })
    }

    /// Waits until the election was first read, when [`current`](Self::current) starts to
    /// tell. The first read refused for good ([`CuratorError::is_permanent`]: `NoAuth` when
    /// `path`'s ACL refuses reading it) is returned at once, and the observer is closed by
    /// then; a read that failed otherwise is tried again (the cache's retries) until it is in.
    ///
    /// # Errors
    /// That refusal; [`CuratorError::NotStarted`] before [`start`](Self::start);
    /// [`CuratorError::AlreadyClosed`] if the observer was closed before the first read.
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// The leader as last seen; `None` when nobody takes part, and before the first load.
    pub fn current(&self) -> Option<Leader> {
        self.leader.borrow().clone()
    }

    /// Waits for the leader to change and returns the new one (`Some(None)`: nobody leads
    /// now). Changes that come faster than they are read are merged: the latest is returned.
    /// `None` once the observer is closed.
    pub async fn changed(&mut self) -> Option<Option<Leader>> {
        self.leader.changed().await.ok()?;
        Some(self.leader.borrow_and_update().clone())
    }

    /// Stops following: the cache and its watch are closed, and [`changed`](Self::changed)
    /// ends. Idempotent, as every close ([`Lifecycle`](curator_core::Lifecycle)):
    /// closing again, or closing an observer never started, does nothing.
    pub async fn close(&self) {
        // Dropping what the start kept ends the first read's task.
        drop(self.lifecycle.close());
        drop(self.publish.lock().unwrap_or_else(PoisonError::into_inner).take());
        self.cache.close().await;
    }
}

/// The relay's work: keeps the children by name from the cache's events and, once loaded,
/// publishes the leader among them when it changes.
fn follow(base: String, publish: watch::Sender<Option<Leader>>) -> impl FnMut(PathChildrenCacheEvent) + Send + 'static {
    let mut children: BTreeMap<String, Arc<ChildData>> = BTreeMap::new();
    let mut loaded = false;
    move |event| {
        match event {
            PathChildrenCacheEvent::ChildAdded(child) | PathChildrenCacheEvent::ChildUpdated(child) => {
                children.insert(child.name().to_string(), child);
            }
            PathChildrenCacheEvent::ChildRemoved(child) => {
                children.remove(child.name());
            }
            PathChildrenCacheEvent::Initialized(all) => {
                children = all.into_iter().map(|c| (c.name().to_string(), c)).collect();
                loaded = true;
            }
            _ => return,
        }
        if loaded {
            let now = leader_of(&children);
            publish.send_if_modified(|shown| {
                if *shown == now {
                    return false;
                }
                tracing::debug!(path = %base, leader = ?now, "leader observed");
                *shown = now;
                true
            });
        }
    }
}

/// The observer's task: starts the cache and waits for its first read, reported to
/// `readiness` (a refusal closes the observer, then the cache, which ends the relay). Ends
/// early when `stopped` resolves (the observer closed or dropped).
async fn first_read(cache: Arc<PathChildrenCache>, path: String, readiness: Readiness, stopped: oneshot::Receiver<()>) {
    let first = async {
        cache.start(StartMode::PostInitializedEvent)?;
        cache.wait_initialized().await
    };
    tokio::select! {
        _ = stopped => {}
        outcome = first => match outcome {
            Ok(()) => readiness.ready(),
            Err(err) => {
                tracing::warn!(path = %path, error = %err, "leader observer: the first read was refused; the observer ends");
                readiness.refused(err);
                cache.close().await;
            }
        },
    }
}

/// The leader among `children` (by name): the contender with the lowest sequence number.
fn leader_of(children: &BTreeMap<String, Arc<ChildData>>) -> Option<Leader> {
    let names: Vec<String> = children.keys().cloned().collect();
    let first = contenders(&names, &[LEADER_LATCH_NAME, MUTEX_LOCK_NAME]).into_iter().next()?;
    let child = children.get(&first.name)?;
    Some(Leader {
        id: String::from_utf8_lossy(child.data().unwrap_or_default()).into_owned(),
        token: child.stat().czxid,
        path: child.path().to_string(),
    })
}
