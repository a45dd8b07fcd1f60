//! [`TreeCache`]: a node and its descendants down to a depth, chosen by a selector, with
//! Curator's `TreeCache` events.
//!
//! ```no_run
//! # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
//! use curator_cache::{TreeCache, TreeCacheEvent, TreeCacheSelector};
//!
//! struct SkipLocks;
//! impl TreeCacheSelector for SkipLocks {
//!     fn traverse_children(&self, path: &str) -> bool {
//!         !path.ends_with("/locks")
//!     }
//! }
//!
//! let tree = TreeCache::builder(&fw, "/app").max_depth(3).selector(SkipLocks).build()?;
//! let mut events = tree.events();
//! tree.start()?;
//! while let Some(event) = events.next().await {
//!     if matches!(event, TreeCacheEvent::Initialized) {
//!         break;
//!     }
//! }
//! let children = tree.current_children("/app").unwrap_or_default();
//! tracing::info!(count = children.len(), "top level");
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use curator_core::LifeState;
use curator_core::{ConnectionState, CuratorFramework, Result};
use curator_core::{EventStream, ListenerId};

use crate::child_data::{ChildData, TreeCacheSelector};
use crate::engine::{descendants, EngineConfig, EngineEvent, Scope};
use crate::shell::{CacheShell, ConnectionChange, Translated};

/// A change seen by a [`TreeCache`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TreeCacheEvent {
    /// A node appeared (or was in place at the first load).
    NodeAdded(Arc<ChildData>),
    /// A node's data (or stat) changed; this is the new state.
    NodeUpdated(Arc<ChildData>),
    /// A node went away; this is its last cached state.
    NodeRemoved(Arc<ChildData>),
    /// The first load is done; every node present then was reported as `NodeAdded` before.
    ///
    /// Sent again after `ConnectionLost`, once the cache loaded on the new session and reported
    /// what changed meanwhile (as Curator's TreeCache, which clears its "initialized" flag on
    /// LOST): the cache is whole again. Not sent again after a reconnection to the same
    /// session.
    Initialized,
    /// The connection is suspended.
    ConnectionSuspended,
    /// Connected again (to the same session, or to a new one after `ConnectionLost`); the cache
    /// catches up and reports what changed meanwhile. Not sent for the framework's first
    /// connection, as Curator's TreeCache does not.
    ConnectionReconnected,
    /// The session was lost; the cache catches up on the next one.
    ConnectionLost,
}

/// Builder of a [`TreeCache`].
pub struct TreeCacheBuilder {
    fw: CuratorFramework,
    path: String,
    cache_data: bool,
    max_depth: usize,
    selector: Option<Arc<dyn TreeCacheSelector>>,
    create_parent_containers: bool,
}

impl std::fmt::Debug for TreeCacheBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeCacheBuilder")
            .field("path", &self.path)
            .field("cache_data", &self.cache_data)
            .field("max_depth", &self.max_depth)
            .field("create_parent_containers", &self.create_parent_containers)
            .finish_non_exhaustive()
    }
}

impl TreeCacheBuilder {
    /// Whether data is kept (default `true`).
    pub fn cache_data(mut self, cache_data: bool) -> Self {
        self.cache_data = cache_data;
        self
    }
    /// How deep to cache: 0 is the root only, 1 the root and its children (default: no limit).
    pub fn max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = max_depth;
        self
    }
    /// Which nodes to cache (default: all).
    pub fn selector(mut self, selector: impl TreeCacheSelector) -> Self {
        self.selector = Some(Arc::new(selector));
        self
    }
    /// Whether the cache makes its path, and the missing parents, as containers when it starts
    /// (default `false`; Curator's `setCreateParentNodes`).
    pub fn create_parent_containers(mut self, create: bool) -> Self {
        self.create_parent_containers = create;
        self
    }
    /// Checks the path and builds the cache (not started).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`](curator_core::CuratorError::InvalidPath) for a path
    /// ZooKeeper would refuse.
    pub fn build(self) -> Result<TreeCache> {
        let config = EngineConfig {
            scope: Scope { root: self.path, max_depth: self.max_depth, selector: self.selector },
            cache_data: self.cache_data,
            create_path: self.create_parent_containers,
            kind: curator_core::metrics::cache::TREE_CACHE,
            what: "TreeCache",
        };
        Ok(TreeCache { shell: CacheShell::new(&self.fw, config, true)? })
    }
}

/// A cache of a node and its descendants (to a depth, as a selector chooses) with Curator's
/// `TreeCache` events, on one persistent recursive watch. The root need not exist. Dropping
/// the cache closes it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// # fw.block_until_connected(std::time::Duration::from_secs(10)).await?;
/// use curator_cache::{TreeCache, TreeCacheEvent};
///
/// fw.create().creating_parents_if_needed().for_path("/app/a/deep", Vec::new()).await?;
/// let cache = TreeCache::builder(&fw, "/app").max_depth(1).build()?; // /app and its children
/// let mut events = cache.events();
/// cache.start()?;
/// cache.wait_initialized().await?;
/// assert!(cache.current_data("/app/a").is_some());
/// assert!(cache.current_data("/app/a/deep").is_none()); // deeper than max_depth
///
/// fw.create().for_path("/app/b", Vec::new()).await?;
/// while let Some(event) = events.next().await {
///     // NodeAdded for each node of the first load, then Initialized, then the new node.
///     if matches!(&event, TreeCacheEvent::NodeAdded(node) if node.path() == "/app/b") {
///         break;
///     }
/// }
/// assert_eq!(cache.current_children("/app").map(|children| children.len()), Some(2));
/// cache.close().await;
/// # Ok(()) }
/// ```
pub struct TreeCache {
    shell: CacheShell<TreeCacheEvent>,
}

impl std::fmt::Debug for TreeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shell.debug("TreeCache", f)
    }
}

impl TreeCache {
    /// A cache of `path` and everything below it.
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`](curator_core::CuratorError::InvalidPath) for a path
    /// ZooKeeper would refuse.
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        Self::builder(fw, path).build()
    }

    /// A builder of a cache of `path`.
    pub fn builder(fw: &CuratorFramework, path: &str) -> TreeCacheBuilder {
        TreeCacheBuilder {
            fw: fw.clone(),
            path: path.to_string(),
            cache_data: true,
            max_depth: usize::MAX,
            selector: None,
            create_parent_containers: false,
        }
    }

    /// Starts the cache (Curator's `TreeCache.start`). Sync: the first load and what follows
    /// are the cache's task's; [`wait_initialized`](Self::wait_initialized) waits for the first
    /// load.
    ///
    /// # Errors
    /// [`AlreadyStarted`](curator_core::CuratorError::AlreadyStarted),
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed), [`NoRuntime`](curator_core::CuratorError::NoRuntime)
    /// outside a tokio runtime, [`Closed`](curator_core::CuratorError::Closed) on a closed
    /// framework, each naming `TreeCache` ([`Lifecycle`](curator_core::Lifecycle)): nothing
    /// started then. A refused first load is reported by
    /// [`wait_initialized`](Self::wait_initialized).
    pub fn start(&self) -> Result<()> {
        self.shell.start(false, |event| {
            Translated::Event(match event {
                EngineEvent::Created(node) => TreeCacheEvent::NodeAdded(node),
                EngineEvent::Changed(_, node) => TreeCacheEvent::NodeUpdated(node),
                EngineEvent::Deleted(node) => TreeCacheEvent::NodeRemoved(node),
                // Again after a lost session, once caught up, as Curator's TreeCache.
                EngineEvent::Initialized | EngineEvent::Recovered => TreeCacheEvent::Initialized,
                // The framework's first connection is not a reconnection: Curator's TreeCache
                // reports nothing on CONNECTED (it loads, and says `Initialized` when done).
                EngineEvent::Connection(state) if state.state == ConnectionState::Connected => {
                    return Translated::Nothing
                }
                EngineEvent::Connection(state) => match ConnectionChange::of(&state) {
                    Some(ConnectionChange::Suspended) => TreeCacheEvent::ConnectionSuspended,
                    Some(ConnectionChange::Reconnected) => TreeCacheEvent::ConnectionReconnected,
                    Some(ConnectionChange::Lost) => TreeCacheEvent::ConnectionLost,
                    None => return Translated::Nothing,
                },
            })
        })
    }

    /// Waits until the first load is done: the outcome of [`start`](Self::start) (the `ready`
    /// of [`Lifecycle`](curator_core::Lifecycle)).
    ///
    /// # Errors
    /// A first load refused for good (`NoAuth` when the path's ACL refuses reading it, see
    /// [`CuratorError::is_permanent`](curator_core::CuratorError::is_permanent)): the cache is
    /// closed then ([`state`](Self::state) `Closed`, listener streams ended); other failures
    /// are retried and this waits on. [`NotStarted`](curator_core::CuratorError::NotStarted)
    /// before `start`, [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) if the
    /// cache is closed first, [`Closed`](curator_core::CuratorError::Closed) if its framework
    /// is.
    pub async fn wait_initialized(&self) -> Result<()> {
        self.shell.wait_initialized().await
    }

    /// Where the cache is in its life: `Closed` after [`close`](Self::close) and after a
    /// refused first load.
    pub fn state(&self) -> LifeState {
        self.shell.state()
    }

    /// The cached node at `full_path`, if any.
    pub fn current_data(&self, full_path: &str) -> Option<Arc<ChildData>> {
        self.shell.core().shared.nodes().get(full_path).cloned()
    }

    /// The cached children of `full_path` by name, or `None` if that node is not cached.
    pub fn current_children(&self, full_path: &str) -> Option<BTreeMap<String, Arc<ChildData>>> {
        let core = self.shell.core();
        let nodes = core.shared.nodes();
        nodes.get(full_path)?;
        let depth = core.scope().depth(full_path)?;
        Some(
            descendants(&nodes, full_path)
                .filter(|(path, _)| core.scope().depth(path) == Some(depth + 1))
                .map(|(_, node)| (node.name().to_string(), node.clone()))
                .collect(),
        )
    }

    /// The number of cached nodes (the root included when it exists).
    pub fn size(&self) -> usize {
        self.shell.core().shared.nodes().len()
    }

    /// Stops the cache and its watch, and clears it (Curator's `close`); listener streams end
    /// after the events already queued. Idempotent: a second call, or one on a cache never
    /// started (which can then no longer start), does nothing more. Dropping the cache does
    /// the same.
    pub async fn close(&self) {
        self.shell.close();
    }

    /// Adds a callback listener; it runs on the blocking pool, in event order.
    pub fn add_listener(&self, listener: impl Fn(&TreeCacheEvent) + Send + Sync + 'static) -> ListenerId {
        self.shell.add_listener(Arc::new(listener))
    }

    /// Removes a listener. False if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.shell.remove_listener(id)
    }

    /// An ordered stream of the events from now on (before `start`: all of them).
    pub fn events(&self) -> EventStream<TreeCacheEvent> {
        self.shell.events()
    }
}
