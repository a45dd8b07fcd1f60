//! [`PathChildrenCache`]: the children of one node, with Curator's API and events, but one
//! request per change instead of a re-list of the parent.
//!
//! ```no_run
//! # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
//! use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
//!
//! let members = PathChildrenCache::new(&fw, "/cluster/members", true)?;
//! members.add_listener(|event: &PathChildrenCacheEvent| match event {
//!     PathChildrenCacheEvent::ChildAdded(m) => tracing::info!(member = m.name(), "joined"),
//!     PathChildrenCacheEvent::ChildRemoved(m) => tracing::info!(member = m.name(), "left"),
//!     PathChildrenCacheEvent::Initialized(initial) => tracing::info!(count = initial.len(), "loaded"),
//!     _ => {}
//! });
//! members.start(StartMode::PostInitializedEvent)?;
//! members.wait_initialized().await?;
//! for member in members.current_data() {
//!     tracing::info!(path = %member.path, "member");
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;

use curator_core::LifeState;
use curator_core::{CuratorError, CuratorFramework, Result};
use curator_core::{EventStream, ListenerId};

use crate::child_data::ChildData;
use crate::engine::{descendants, EngineConfig, EngineEvent, Scope, Shared};
use crate::shell::{CacheShell, ConnectionChange, Translated};

/// How [`PathChildrenCache::start`] treats the children present at start (Curator's
/// `PathChildrenCache.StartMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum StartMode {
    /// Each child found by the first load is reported as `ChildAdded`.
    #[default]
    Normal,
    /// No events for the children found by the first load (Curator primes the cache before its
    /// `start` returns: wait with [`PathChildrenCache::wait_initialized`]); any failure of that
    /// load closes the cache.
    BuildInitialCache,
    /// `ChildAdded` for each child found by the first load, then `Initialized` with
    /// all of them.
    PostInitializedEvent,
}

/// The kind of a [`PathChildrenCacheEvent`], for matching without the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathChildrenCacheEventType {
    /// See [`PathChildrenCacheEvent::ChildAdded`].
    ChildAdded,
    /// See [`PathChildrenCacheEvent::ChildUpdated`].
    ChildUpdated,
    /// See [`PathChildrenCacheEvent::ChildRemoved`].
    ChildRemoved,
    /// See [`PathChildrenCacheEvent::Initialized`].
    Initialized,
    /// See [`PathChildrenCacheEvent::ConnectionSuspended`].
    ConnectionSuspended,
    /// See [`PathChildrenCacheEvent::ConnectionReconnected`].
    ConnectionReconnected,
    /// See [`PathChildrenCacheEvent::ConnectionLost`].
    ConnectionLost,
}

/// A change seen by a [`PathChildrenCache`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PathChildrenCacheEvent {
    /// A child appeared.
    ChildAdded(Arc<ChildData>),
    /// A child's data (or stat) changed; this is the new state.
    ChildUpdated(Arc<ChildData>),
    /// A child went away; this is its last cached state.
    ChildRemoved(Arc<ChildData>),
    /// With [`StartMode::PostInitializedEvent`]: the first load is done; these are the
    /// children it found, ordered by path.
    Initialized(Vec<Arc<ChildData>>),
    /// The connection is suspended: the cache may miss changes until it reconnects.
    ConnectionSuspended,
    /// Connected again (to the same or a new session); the cache catches up and reports what
    /// changed meanwhile.
    ConnectionReconnected,
    /// The session was lost; a new one follows, and the cache catches up on it.
    ConnectionLost,
}

impl PathChildrenCacheEvent {
    /// The kind of event.
    pub fn kind(&self) -> PathChildrenCacheEventType {
        match self {
            Self::ChildAdded(_) => PathChildrenCacheEventType::ChildAdded,
            Self::ChildUpdated(_) => PathChildrenCacheEventType::ChildUpdated,
            Self::ChildRemoved(_) => PathChildrenCacheEventType::ChildRemoved,
            Self::Initialized(_) => PathChildrenCacheEventType::Initialized,
            Self::ConnectionSuspended => PathChildrenCacheEventType::ConnectionSuspended,
            Self::ConnectionReconnected => PathChildrenCacheEventType::ConnectionReconnected,
            Self::ConnectionLost => PathChildrenCacheEventType::ConnectionLost,
        }
    }

    /// The child concerned, for child events.
    pub fn data(&self) -> Option<&Arc<ChildData>> {
        match self {
            Self::ChildAdded(d) | Self::ChildUpdated(d) | Self::ChildRemoved(d) => Some(d),
            _ => None,
        }
    }
}

/// A cache of the children of one node (not of deeper nodes), with Curator's API and events.
///
/// Built on the same engine as [`CuratorCache`](crate::CuratorCache): one persistent recursive
/// watch on the parent, one getData per added or changed child, nothing for a removal, and a
/// multi-read load at start and after reconnecting. The parent need not exist: the cache makes
/// it, as a container, when it starts (see
/// [`PathChildrenCacheBuilder::create_parent_containers`]). Dropping the cache closes it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// # fw.block_until_connected(std::time::Duration::from_secs(10)).await?;
/// use curator_cache::{PathChildrenCache, PathChildrenCacheEvent, StartMode};
///
/// let cache = PathChildrenCache::builder(&fw, "/members").cache_data(true).build()?;
/// cache.add_listener(|event: &PathChildrenCacheEvent| tracing::info!(kind = ?event.kind(), "members"));
/// let mut events = cache.events();
/// cache.start(StartMode::PostInitializedEvent)?; // makes /members (a container) if missing
/// let Some(PathChildrenCacheEvent::Initialized(initial)) = events.next().await else { panic!("no Initialized") };
/// assert!(initial.is_empty());
///
/// fw.create().for_path("/members/a", b"10.0.0.1".to_vec()).await?;
/// let Some(PathChildrenCacheEvent::ChildAdded(child)) = events.next().await else { panic!("no ChildAdded") };
/// assert_eq!((child.name(), child.data()), ("a", Some(&b"10.0.0.1"[..])));
/// assert!(cache.current_data_for("/members/a").is_some());
/// fw.delete().for_path("/members/a").await?;
/// assert!(matches!(events.next().await, Some(PathChildrenCacheEvent::ChildRemoved(_))));
/// assert!(cache.current_data().is_empty());
/// cache.close().await;
/// # Ok(()) }
/// ```
pub struct PathChildrenCache {
    shell: CacheShell<PathChildrenCacheEvent>,
}

impl std::fmt::Debug for PathChildrenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shell.debug("PathChildrenCache", f)
    }
}

/// Builder of a [`PathChildrenCache`].
#[derive(Debug, Clone)]
pub struct PathChildrenCacheBuilder {
    fw: CuratorFramework,
    path: String,
    cache_data: bool,
    create_parent_containers: bool,
}

impl PathChildrenCacheBuilder {
    /// Whether data is kept (default `true`); without, children carry stats only.
    pub fn cache_data(mut self, cache_data: bool) -> Self {
        self.cache_data = cache_data;
        self
    }

    /// Whether the cache makes its path, and the missing parents, as containers when it
    /// starts (default `true`, as Curator's PathChildrenCache, which calls `EnsureContainers` on
    /// its path). Curator's cache also makes the path again when it finds it gone; this one
    /// makes it at start only: a path deleted on purpose stays deleted until someone makes it
    /// again, and the cache follows it then.
    pub fn create_parent_containers(mut self, create: bool) -> Self {
        self.create_parent_containers = create;
        self
    }

    /// Checks the path and builds the cache (not started).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for a path
    /// ZooKeeper would refuse.
    pub fn build(self) -> Result<PathChildrenCache> {
        let config = EngineConfig {
            scope: Scope { root: self.path, max_depth: 1, selector: None },
            cache_data: self.cache_data,
            create_path: self.create_parent_containers,
            kind: curator_core::metrics::cache::PATH_CHILDREN_CACHE,
            what: "PathChildrenCache",
        };
        Ok(PathChildrenCache { shell: CacheShell::new(&self.fw, config, true)? })
    }
}

fn children_of(shared: &Shared, root: &str) -> Vec<Arc<ChildData>> {
    descendants(&shared.nodes(), root).map(|(_, node)| node.clone()).collect()
}

impl PathChildrenCache {
    /// A cache of the children of `path`, keeping their data if `cache_data`.
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for a path
    /// ZooKeeper would refuse.
    pub fn new(fw: &CuratorFramework, path: &str, cache_data: bool) -> Result<Self> {
        Self::builder(fw, path).cache_data(cache_data).build()
    }

    /// A builder of a cache of the children of `path`.
    pub fn builder(fw: &CuratorFramework, path: &str) -> PathChildrenCacheBuilder {
        PathChildrenCacheBuilder {
            fw: fw.clone(),
            path: path.to_string(),
            cache_data: true,
            create_parent_containers: true,
        }
    }

    /// Starts the cache (Curator's `PathChildrenCache.start(mode)`). Sync: the first load is
    /// the cache's task's; [`wait_initialized`](Self::wait_initialized) waits for it. With
    /// [`StartMode::BuildInitialCache`] the children found by the first load are not reported,
    /// and any failure of that load closes the cache (Curator's start throws it); in the other
    /// modes only a refusal no retry mends closes it.
    ///
    /// # Errors
    /// [`AlreadyStarted`](curator_core::CuratorError::AlreadyStarted),
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed), [`NoRuntime`](curator_core::CuratorError::NoRuntime)
    /// outside a tokio runtime, [`Closed`](curator_core::CuratorError::Closed) on a closed
    /// framework, each naming `PathChildrenCache` (module
    /// [`Lifecycle`](curator_core::Lifecycle)): nothing started then.
    pub fn start(&self, mode: StartMode) -> Result<()> {
        let shared = self.shell.core().shared.clone();
        let root = self.shell.core().root().to_string();
        let mut passing = mode != StartMode::BuildInitialCache;
        self.shell.start(mode == StartMode::BuildInitialCache, move |event| {
            Translated::Event(match event {
                EngineEvent::Created(node) if passing && node.path != root => PathChildrenCacheEvent::ChildAdded(node),
                EngineEvent::Changed(_, node) if passing && node.path != root => {
                    PathChildrenCacheEvent::ChildUpdated(node)
                }
                EngineEvent::Deleted(node) if passing && node.path != root => {
                    PathChildrenCacheEvent::ChildRemoved(node)
                }
                EngineEvent::Initialized => {
                    passing = true;
                    if mode != StartMode::PostInitializedEvent {
                        return Translated::Nothing;
                    }
                    PathChildrenCacheEvent::Initialized(children_of(&shared, &root))
                }
                EngineEvent::Connection(state) => match ConnectionChange::of(&state) {
                    Some(ConnectionChange::Suspended) => PathChildrenCacheEvent::ConnectionSuspended,
                    Some(ConnectionChange::Reconnected) => PathChildrenCacheEvent::ConnectionReconnected,
                    Some(ConnectionChange::Lost) => PathChildrenCacheEvent::ConnectionLost,
                    None => return Translated::Nothing,
                },
                _ => return Translated::Nothing,
            })
        })
    }

    /// Waits until the first load is done: the outcome of [`start`](Self::start) (the `ready`
    /// of [`Lifecycle`](curator_core::Lifecycle)).
    ///
    /// # Errors
    /// A first load refused for good (`NoAuth` when the path's ACL refuses reading it, see
    /// [`CuratorError::is_permanent`](curator_core::CuratorError::is_permanent)) or, with
    /// [`StartMode::BuildInitialCache`], any failure of the first load: the cache is closed
    /// then ([`state`](Self::state) `Closed`, listener streams ended).
    /// [`NotStarted`](curator_core::CuratorError::NotStarted) before `start`,
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) if the cache is closed
    /// first, [`Closed`](curator_core::CuratorError::Closed) if its framework is.
    pub async fn wait_initialized(&self) -> Result<()> {
        self.shell.wait_initialized().await
    }

    /// Where the cache is in its life: `Closed` after [`close`](Self::close) and after a
    /// refused first load.
    pub fn state(&self) -> LifeState {
        self.shell.state()
    }

    /// The cached children, ordered by path.
    pub fn current_data(&self) -> Vec<Arc<ChildData>> {
        children_of(&self.shell.core().shared, self.shell.core().root())
    }

    /// The cached child at the full path `full_path`, if any.
    pub fn current_data_for(&self, full_path: &str) -> Option<Arc<ChildData>> {
        if full_path == self.shell.core().root() {
            return None;
        }
        self.shell.core().shared.nodes().get(full_path).cloned()
    }

    /// Drops the cached data of the child at the full path `full_path`, keeping the child and
    /// its stat, if its version is `if_version` (or whatever it is, with `None`); whether data
    /// was dropped (Curator's `clearDataBytes`). For a reader that keeps what it parsed from
    /// the data and does not need the bytes any more, as [`ServiceCache`] does: a change of the
    /// node brings its new data (and a `ChildUpdated` event), and a later load after a
    /// reconnection or [`rebuild`](Self::rebuild) reads the data again. The version guards
    /// against dropping a newer version than the one that was read.
    ///
    /// [`ServiceCache`]: https://docs.rs/curator-discovery
    pub fn clear_data_bytes(&self, full_path: &str, if_version: Option<i32>) -> bool {
        if full_path == self.shell.core().root() {
            return false;
        }
        self.shell.core().shared.clear_data(full_path, if_version)
    }

    /// Forgets every child at once, without events (Curator's `clear()`); the next load or
    /// change fills the cache again.
    pub fn clear(&self) {
        self.shell.core().shared.clear();
    }

    /// Forgets every child without events, then loads them again, reporting each as
    /// `ChildAdded`. Returns once the load is done.
    ///
    /// # Errors
    /// The load's error, or [`NotStarted`](curator_core::CuratorError::NotStarted) or
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) when the cache does not run.
    pub async fn clear_and_refresh(&self) -> Result<()> {
        self.shell.core().clear_and_refresh().await
    }

    /// Loads every child again and replaces the cache without any event. Returns once done.
    ///
    /// # Errors
    /// The load's error, or [`NotStarted`](curator_core::CuratorError::NotStarted) or
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) when the cache does not run.
    pub async fn rebuild(&self) -> Result<()> {
        self.shell.core().rebuild().await
    }

    /// Reads the child at the full path `full_path` again from the server and replaces it in
    /// the cache (or drops it if it is gone), without any event (Curator's `rebuildNode`).
    /// Returns once done. The read is sent after the reads of the changes seen before, so the
    /// cache then holds the child as the server had it when this was called, or later. While
    /// the cache is catching up (after a reconnection, say), it waits for that load instead,
    /// which reads every child.
    ///
    /// # Errors
    /// `InvalidPath` for a malformed path, `InvalidArgument` if `full_path` is not a child of the
    /// cache's path, [`NotStarted`](curator_core::CuratorError::NotStarted) or
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) when the cache does not run, or the read's error.
    pub async fn rebuild_node(&self, full_path: &str) -> Result<()> {
        curator_core::path::validate(full_path)?;
        let core = self.shell.core();
        if core.scope().depth(full_path) != Some(1) {
            return Err(CuratorError::InvalidArgument {
                path: full_path.to_string(),
                reason: format!("not a child of the cache's path {}", core.root()),
            });
        }
        core.rebuild_node(full_path).await
    }

    /// Stops the cache and its watch, and clears it (Curator's `close`); listener streams end
    /// after the events already queued. Idempotent: a second call, or one on a cache never
    /// started (which can then no longer start), does nothing more. Dropping the cache does
    /// the same.
    pub async fn close(&self) {
        self.shell.close();
    }

    /// Adds a callback listener; it runs on the blocking pool, in event order.
    pub fn add_listener(&self, listener: impl Fn(&PathChildrenCacheEvent) + Send + Sync + 'static) -> ListenerId {
        self.shell.add_listener(Arc::new(listener))
    }

    /// Removes a listener. False if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.shell.remove_listener(id)
    }

    /// An ordered stream of the events from now on (before `start`: all of them).
    pub fn events(&self) -> EventStream<PathChildrenCacheEvent> {
        self.shell.events()
    }
}
