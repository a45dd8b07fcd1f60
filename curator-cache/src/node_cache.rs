//! [`NodeCache`]: one node, which may not exist yet, may be deleted and created again.
//!
//! ```no_run
//! # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
//! use curator_cache::{NodeCache, NodeCacheEvent};
//!
//! let config = NodeCache::new(&fw, "/config/feature-flags")?;
//! config.add_listener(|event: &NodeCacheEvent| {
//!     if let NodeCacheEvent::NodeChanged(node) = event {
//!         tracing::info!(exists = node.is_some(), "flags changed");
//!     }
//! });
//! config.start(true)?;
//! config.wait_initialized().await?; // the first read is done
//! let flags = config.current_data().and_then(|n| n.data.clone()).unwrap_or_default();
//! # let _ = flags;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use curator_core::LifeState;
use curator_core::{CuratorFramework, Result};
use curator_core::{EventStream, ListenerId};

use crate::child_data::ChildData;
use crate::engine::{EngineConfig, EngineEvent, Scope};
use crate::shell::{CacheShell, ConnectionChange, Translated};

/// A change seen by a [`NodeCache`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum NodeCacheEvent {
    /// The node was created, changed or deleted: this is its state now (`None`: it does not
    /// exist). Curator's `nodeChanged()`.
    NodeChanged(Option<Arc<ChildData>>),
    /// The connection is suspended.
    ConnectionSuspended,
    /// Connected again; the cache catches up.
    ConnectionReconnected,
    /// The session was lost; the cache catches up on the next one.
    ConnectionLost,
}

/// A cache of one node, on a persistent (non-recursive) watch: one getData per change. The
/// node need not exist. Dropping the cache closes it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// # fw.block_until_connected(std::time::Duration::from_secs(10)).await?;
/// use curator_cache::{NodeCache, NodeCacheEvent};
///
/// let cache = NodeCache::new(&fw, "/config/limits")?;
/// let mut events = cache.events();
/// cache.start(true)?; // true: read the node before start's outcome is reported
/// cache.wait_initialized().await?;
/// assert!(cache.current_data().is_none()); // not there yet
///
/// fw.create().creating_parents_if_needed().for_path("/config/limits", b"10".to_vec()).await?;
/// while let Some(event) = events.next().await {
///     if let NodeCacheEvent::NodeChanged(Some(node)) = event {
///         assert_eq!(node.data(), Some(&b"10"[..]));
///         break;
///     }
/// }
/// assert!(cache.current_data().is_some());
/// cache.close().await;
/// # Ok(()) }
/// ```
pub struct NodeCache {
    shell: CacheShell<NodeCacheEvent>,
}

impl std::fmt::Debug for NodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shell.debug("NodeCache", f)
    }
}

impl NodeCache {
    /// A cache of the node at `path`.
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`](curator_core::CuratorError::InvalidPath) for a path
    /// ZooKeeper would refuse.
    pub fn new(fw: &CuratorFramework, path: &str) -> Result<Self> {
        let config = EngineConfig {
            scope: Scope { root: path.to_string(), max_depth: 0, selector: None },
            cache_data: true,
            create_path: false,
            kind: curator_core::metrics::cache::NODE_CACHE,
            what: "NodeCache",
        };
        Ok(Self { shell: CacheShell::new(fw, config, true)? })
    }

    /// Starts the cache (Curator's `NodeCache.start(buildInitial)`). Sync: the node is read by
    /// the cache's task; [`wait_initialized`](Self::wait_initialized) waits for that first
    /// read. With `build_initial`, the node's state at the first read is not reported, and any
    /// failure of that read closes the cache (Curator's `start(true)` throws it); without, the
    /// first read reports `NodeChanged` if the node exists, and only a refusal no retry mends
    /// closes the cache.
    ///
    /// # Errors
    /// [`AlreadyStarted`](curator_core::CuratorError::AlreadyStarted),
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed), [`NoRuntime`](curator_core::CuratorError::NoRuntime)
    /// outside a tokio runtime, [`Closed`](curator_core::CuratorError::Closed) on a closed
    /// framework, each naming `NodeCache` ([`Lifecycle`](curator_core::Lifecycle)):
    /// nothing started then.
    pub fn start(&self, build_initial: bool) -> Result<()> {
        let mut passing = !build_initial;
        self.shell.start(build_initial, move |event| {
            Translated::Event(match event {
                EngineEvent::Created(node) | EngineEvent::Changed(_, node) if passing => {
                    NodeCacheEvent::NodeChanged(Some(node))
                }
                EngineEvent::Deleted(_) if passing => NodeCacheEvent::NodeChanged(None),
                EngineEvent::Initialized => {
                    passing = true;
                    return Translated::Nothing;
                }
                EngineEvent::Connection(state) => match ConnectionChange::of(&state) {
                    Some(ConnectionChange::Suspended) => NodeCacheEvent::ConnectionSuspended,
                    Some(ConnectionChange::Reconnected) => NodeCacheEvent::ConnectionReconnected,
                    Some(ConnectionChange::Lost) => NodeCacheEvent::ConnectionLost,
                    None => return Translated::Nothing,
                },
                _ => return Translated::Nothing,
            })
        })
    }

    /// Waits until the node was first read: the outcome of [`start`](Self::start) (the
    /// `ready` of [`Lifecycle`](curator_core::Lifecycle)).
    ///
    /// # Errors
    /// A first read refused for good (`NoAuth` when the path's ACL refuses reading it, see
    /// [`CuratorError::is_permanent`](curator_core::CuratorError::is_permanent)) or, when
    /// started with `build_initial`, any failure of the first read: the cache is closed then
    /// ([`state`](Self::state) `Closed`, listener streams ended).
    /// [`NotStarted`](curator_core::CuratorError::NotStarted) before `start`,
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) if the cache is closed
    /// first, [`Closed`](curator_core::CuratorError::Closed) if its framework is.
    pub async fn wait_initialized(&self) -> Result<()> {
        self.shell.wait_initialized().await
    }

    /// Where the cache is in its life: `Closed` after [`close`](Self::close) and after a
    /// refused first read.
    pub fn state(&self) -> LifeState {
        self.shell.state()
    }

    /// The node as last read, or `None` if it does not exist (or was not read yet).
    pub fn current_data(&self) -> Option<Arc<ChildData>> {
        self.shell.core().shared.nodes().get(self.shell.core().root()).cloned()
    }

    /// The path of the node.
    pub fn path(&self) -> &str {
        self.shell.core().root()
    }

    /// Reads the node again and replaces the cached state without an event.
    ///
    /// # Errors
    /// The read's error, or [`NotStarted`](curator_core::CuratorError::NotStarted) or
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed) when the cache does not run.
    pub async fn rebuild(&self) -> Result<()> {
        self.shell.core().rebuild().await
    }

    /// Stops the cache and its watch (Curator's `close`); listener streams end after the events
    /// already queued. Idempotent: a second call, or one on a cache never started (which can
    /// then no longer start), does nothing more. Dropping the cache does the same.
    pub async fn close(&self) {
        self.shell.close();
    }

    /// Adds a callback listener; it runs on the blocking pool, in event order.
    pub fn add_listener(&self, listener: impl Fn(&NodeCacheEvent) + Send + Sync + 'static) -> ListenerId {
        self.shell.add_listener(Arc::new(listener))
    }

    /// Removes a listener. False if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.shell.remove_listener(id)
    }

    /// An ordered stream of the events from now on (before `start`: all of them).
    pub fn events(&self) -> EventStream<NodeCacheEvent> {
        self.shell.events()
    }
}
