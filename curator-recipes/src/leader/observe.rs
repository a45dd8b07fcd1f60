//! [`LeaderObserver`]: the current leader of an election, for processes that do not take part.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use curator_cache::{ChildData, PathChildrenCache, PathChildrenCacheEvent, StartMode};
use curator_core::{path, CuratorError, CuratorFramework, Result};
use curator_core::{Lifecycle, Readiness};
use futures::Stream;
use tokio::sync::{oneshot, watch};

use super::proclaim::{decode, PROCLAIMED_NODE_NAME};

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

/// What an observer of an election shows for its current leader: who leads, and the value it
/// proclaimed in its term ([`Leadership::proclaim`](super::Leadership::proclaim)), as
/// [`LeaderObserver::observe`] yields it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Proclamation {
    /// The leader; its [`token`](Leader::token) is the term's fencing token.
    pub leader: Leader,
    /// The value the leader proclaimed in this term; `None` until it proclaims (a value written
    /// in an earlier term, by this leader or another, is not shown).
    pub value: Option<Vec<u8>>,
    /// The zxid of the write that proclaimed [`value`](Self::value) (the value node's mzxid);
    /// 0 while there is none. It grows with every proclaim, so the same value proclaimed again
    /// is a new `Proclamation`.
    pub revision: i64,
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
    /// The senders of the leader shown and of its proclamation, until `start` hands them to the
    /// relay (or `close` drops them).
    publish: Mutex<Option<Publish>>,
    leader: watch::Receiver<Option<Leader>>,
    proclaimed: watch::Receiver<Option<Proclamation>>,
}

/// Where the relay publishes: the leader, and the leader with its proclaimed value.
#[derive(Debug)]
struct Publish {
    leader: watch::Sender<Option<Leader>>,
    proclaimed: watch::Sender<Option<Proclamation>>,
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
        let (publish_proclaimed, proclaimed) = watch::channel(None);
        let publish = Publish { leader: publish, proclaimed: publish_proclaimed };
        Ok(Self {
            fw: fw.clone(),
            path: path.to_string(),
            lifecycle: Lifecycle::new("LeaderObserver"),
            cache: Arc::new(cache),
            publish: Mutex::new(Some(publish)),
            leader,
            proclaimed,
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

    /// The leaders of the election and the values they proclaim, as a [`Stream`] (etcd's
    /// `Election.Observe`): the current leader with its value first (once the election was
    /// first read and someone leads), then a new [`Proclamation`] for every new leader (its
    /// `value` `None` until it proclaims) and every value it proclaims
    /// ([`Leadership::proclaim`](super::Leadership::proclaim)). While nobody leads nothing is
    /// yielded; the next leader is. It ends when the observer is closed (or was never started
    /// and is closed).
    ///
    /// It follows the observer's one cache of the election, so it survives disconnections and
    /// new sessions (the cache reads the election again). ZooKeeper's notifications carry no
    /// data: a value written over before the cache read it is never seen, and values that come
    /// faster than the stream is polled merge into the latest; what is yielded is always in the
    /// order written. Each call makes a stream of its own.
    ///
    /// The example is [`Leadership::proclaim`](super::Leadership::proclaim)'s.
    pub fn observe(&self) -> impl Stream<Item = Proclamation> + Send + 'static {
        let mut proclaimed = self.proclaimed.clone();
        // The current one is yielded first, if any.
        proclaimed.mark_changed();
        futures::stream::unfold(proclaimed, |mut proclaimed| async move {
            loop {
                proclaimed.changed().await.ok()?;
                let now = proclaimed.borrow_and_update().clone();
                if let Some(now) = now {
                    return Some((now, proclaimed));
                }
            }
        })
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
fn follow(base: String, publish: Publish) -> impl FnMut(PathChildrenCacheEvent) + Send + 'static {
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
            let proclaimed = now.clone().map(|leader| proclamation_of(leader, &children));
            publish.leader.send_if_modified(|shown| {
                if *shown == now {
                    return false;
                }
                tracing::debug!(path = %base, leader = ?now, "leader observed");
                *shown = now;
                true
            });
            publish.proclaimed.send_if_modified(|shown| {
                if *shown == proclaimed {
                    return false;
                }
                tracing::debug!(path = %base, proclaimed = ?proclaimed, "proclamation observed");
                *shown = proclaimed;
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

/// `leader` with the value it proclaimed in its term, from the value node among `children`.
fn proclamation_of(leader: Leader, children: &BTreeMap<String, Arc<ChildData>>) -> Proclamation {
    let node = children.get(PROCLAIMED_NODE_NAME);
    let value = node
        .and_then(|node| decode(node.data()?))
        .filter(|(token, _)| *token == leader.token)
        .map(|(_, value)| value.to_vec());
    let revision = match (&value, node) {
        (Some(_), Some(node)) => node.stat().mzxid,
        _ => 0,
    };
    Proclamation { leader, value, revision }
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
