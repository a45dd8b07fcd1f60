//! [`observe`]: the current leader of an election, for processes that do not take part.

use std::collections::BTreeMap;
use std::sync::Arc;

use curator_cache::{ChildData, PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::lifecycle::Lifecycle;
#[cfg(doc)]
use curator_core::CuratorError;
use curator_core::{path, CuratorFramework, Result};
use futures::FutureExt;
use tokio::sync::watch;

use crate::sequential::order::contenders;
use crate::sequential::{LEADER_LATCH_NAME, MUTEX_LOCK_NAME};

/// The leader of an election, as an observer sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The id the leader announced (its node's data as UTF-8; invalid bytes are replaced).
    pub id: String,
    /// The leader's fencing token: the czxid of its node, as its
    /// [`Leadership::fencing_token`](crate::sequential::HeldNode::fencing_token)(crate::sequential::HeldNode::fencing_token) says.
    pub token: i64,
    /// The full path of the leader's node.
    pub path: String,
}

/// Follows the leader of the election at `path` without taking part (past Curator: etcd's
/// `Election.Observe`). See [`observe`].
#[derive(Debug)]
pub struct LeaderObserver {
    /// Started by [`observe`], which returns the observer started; closed by `close`.
    lifecycle: Lifecycle,
    cache: PathChildrenCache,
    leader: watch::Receiver<Option<Leader>>,
}

/// Follows the leader of the election at `path`: a [`LeaderLatch`](super::LeaderLatch)'s
/// (`latch-` nodes) or a mutex-based election's, such as a
/// `LeaderSelector`'s (`lock-` nodes). The leader is the node with the
/// lowest sequence number among both kinds; it is updated on every change, from a
/// [`PathChildrenCache`] of `path` (one persistent watch; one read per new node, none per
/// deletion). The path need not exist yet: it is followed once someone makes it; the observer
/// makes nothing.
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
/// use curator_recipes::leader::{observe, LeaderLatch};
///
/// let mut observer = observe(&fw, "/services/indexer/leader")?;
/// let latch = LeaderLatch::new(&fw, "/services/indexer/leader", "indexer-1")?;
/// latch.start().await?;
/// let term = latch.await_leadership().await?;
/// while observer.current().map(|l| l.token) != Some(term.fencing_token()) {
///     observer.changed().await.expect("the observer runs");
/// }
/// assert_eq!(observer.current().map(|l| l.id), Some("indexer-1".to_string()));
/// observer.close().await;
/// latch.close().await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`CuratorError::InvalidPath`] for a path ZooKeeper would refuse;
/// [`CuratorError::NoRuntime`] outside a tokio runtime; [`CuratorError::Closed`] on a closed
/// framework (the lifecycle of every started thing, module
/// [`lifecycle`](curator_core::lifecycle), naming `LeaderObserver`).
pub fn observe(fw: &CuratorFramework, path: &str) -> Result<LeaderObserver> {
    path::validate(path)?;
    let cache = PathChildrenCache::builder(fw, path).create_parent_containers(false).build()?;
    let (tx, leader) = watch::channel(None);
    let lifecycle = Lifecycle::new("LeaderObserver");
    lifecycle.start(fw, |started| {
        let base = path.to_string();
        let mut children: BTreeMap<String, Arc<ChildData>> = BTreeMap::new();
        let mut loaded = false;
        // Ends when the cache closes (its event stream ends), which drops the sender.
        started.relay(cache.events(), move |event| {
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
                tx.send_if_modified(|shown| {
                    if *shown == now {
                        return false;
                    }
                    tracing::debug!(path = %base, leader = ?now, "leader observed");
                    *shown = now;
                    true
                });
            }
        });
        Ok(())
    })?;
    if let Err(err) = cache.start(StartMode::PostInitializedEvent) {
        lifecycle.close();
        // The cache's close awaits nothing: it is done at its first poll (and ends the relay).
        let _ = cache.close().now_or_never();
        return Err(err);
    }
    Ok(LeaderObserver { lifecycle, cache, leader })
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

impl LeaderObserver {
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

    /// Waits until the election was first read, when [`current`](Self::current) starts to
    /// tell. Returns at once with the refusal of that read when it is one no retry mends
    /// ([`CuratorError::is_permanent`]: `NoAuth` when `path`'s ACL refuses reading it): the
    /// observer's cache closes then, and it shows nobody.
    ///
    /// # Errors
    /// That refusal; [`CuratorError::Closed`] if the observer's cache closes first.
    pub async fn wait_initialized(&self) -> Result<()> {
        self.cache.wait_initialized().await
    }

    /// Stops following: the cache and its watch are closed.
    pub async fn close(self) {
        self.lifecycle.close();
        self.cache.close().await;
    }
}
