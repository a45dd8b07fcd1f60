//! [`CuratorCache`]: Curator 5's cache of a node and everything below it, on one persistent
//! recursive watch, with connection events besides.
//!
//! ```no_run
//! # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
//! use curator_cache::{CuratorCache, CuratorCacheListenerBuilder, CuratorCacheOption};
//!
//! let cache = CuratorCache::build(&fw, "/config", &[CuratorCacheOption::DoNotClearOnClose])?;
//! cache.add_listener(
//!     CuratorCacheListenerBuilder::new()
//!         .for_creates(|node| tracing::info!(path = %node.path, "created"))
//!         .for_changes(|old, new| tracing::info!(path = %new.path, from = old.stat.version, to = new.stat.version, "changed"))
//!         .for_deletes(|old| tracing::info!(path = %old.path, "deleted"))
//!         .for_initialized(|| tracing::info!("loaded"))
//!         .build(),
//! );
//! cache.start()?;
//! cache.wait_initialized().await?;
//! if let Some(node) = cache.get("/config/db/url") {
//!     tracing::info!(size = cache.size(), data = ?node.data, "have it");
//! }
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use curator_core::{ConnectionStateEvent, CuratorFramework, Result};

use crate::child_data::{ChildData, TreeCacheSelector};
use crate::engine::{EngineConfig, EngineEvent, Scope};
use crate::shell::{CacheShell, Translated};
use curator_core::LifeState;
use curator_core::{EventStream, ListenerId};

/// Options of a [`CuratorCache`] (Curator's `CuratorCache.Options`, plus not caching data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CuratorCacheOption {
    /// Cache only the node itself, not its children (a plain persistent watch on it).
    SingleNodeCache,
    /// Keep stats but not data: [`ChildData::data`] is `None` in the cache and in events.
    DoNotCacheData,
    /// Keep the cached nodes after [`CuratorCache::close`] (they are cleared by default).
    DoNotClearOnClose,
    /// Make the cache's path, and its missing parents, as containers when the cache starts
    /// (Curator's CuratorCache has no such option; its TreeCache's `setCreateParentNodes` does
    /// this). By default the path is left alone and the cache fills when it appears.
    CreateParentContainers,
}

/// A change seen by a [`CuratorCache`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CuratorCacheEvent {
    /// A node appeared (or was in place when the cache loaded).
    Created(Arc<ChildData>),
    /// A node's data (or stat) changed.
    Changed {
        /// The node as cached before.
        old: Arc<ChildData>,
        /// The node as it is now.
        new: Arc<ChildData>,
    },
    /// A node went away.
    Deleted(Arc<ChildData>),
    /// The first load is done; every node present then was reported as `Created` before this.
    Initialized,
    /// The framework's connection changed state (Curator's cache has no such event).
    ConnectionStateChanged(ConnectionStateEvent),
}

/// Receives a [`CuratorCache`]'s events, in order, on the blocking pool. Any
/// `Fn(&CuratorCacheEvent)` closure is one; [`CuratorCacheListenerBuilder`] makes one from
/// per-kind callbacks, as Curator's `CuratorCacheListener.builder()`.
pub trait CuratorCacheListener: Send + Sync + 'static {
    /// Called with each event.
    fn event(&self, event: &CuratorCacheEvent);
}

impl<F> CuratorCacheListener for F
where
    F: Fn(&CuratorCacheEvent) + Send + Sync + 'static,
{
    fn event(&self, event: &CuratorCacheEvent) {
        self(event)
    }
}

type NodeFn = Box<dyn Fn(&ChildData) + Send + Sync>;
type ChangeFn = Box<dyn Fn(&ChildData, &ChildData) + Send + Sync>;
type CreateOrChangeFn = Box<dyn Fn(Option<&ChildData>, &ChildData) + Send + Sync>;
type InitFn = Box<dyn Fn() + Send + Sync>;
type StateFn = Box<dyn Fn(&ConnectionStateEvent) + Send + Sync>;

/// Builds a [`CuratorCacheListener`] from callbacks for each kind of event.
#[derive(Default)]
pub struct CuratorCacheListenerBuilder {
    creates: Vec<NodeFn>,
    changes: Vec<ChangeFn>,
    creates_and_changes: Vec<CreateOrChangeFn>,
    deletes: Vec<NodeFn>,
    initialized: Vec<InitFn>,
    states: Vec<StateFn>,
    all: Vec<Box<dyn CuratorCacheListener>>,
    after_initialized: bool,
}

impl std::fmt::Debug for CuratorCacheListenerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuratorCacheListenerBuilder")
            .field("after_initialized", &self.after_initialized)
            .finish_non_exhaustive()
    }
}

impl CuratorCacheListenerBuilder {
    /// A builder with no callbacks yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Calls `listener` with every event.
    pub fn for_all(mut self, listener: impl CuratorCacheListener) -> Self {
        self.all.push(Box::new(listener));
        self
    }
    /// Calls `f` with each created node.
    pub fn for_creates(mut self, f: impl Fn(&ChildData) + Send + Sync + 'static) -> Self {
        self.creates.push(Box::new(f));
        self
    }
    /// Calls `f` with the old and the new node on each change.
    pub fn for_changes(mut self, f: impl Fn(&ChildData, &ChildData) + Send + Sync + 'static) -> Self {
        self.changes.push(Box::new(f));
        self
    }
    /// Calls `f` on creates (old is `None`) and changes.
    pub fn for_creates_and_changes(
        mut self,
        f: impl Fn(Option<&ChildData>, &ChildData) + Send + Sync + 'static,
    ) -> Self {
        self.creates_and_changes.push(Box::new(f));
        self
    }
    /// Calls `f` with each deleted node as it was last cached.
    pub fn for_deletes(mut self, f: impl Fn(&ChildData) + Send + Sync + 'static) -> Self {
        self.deletes.push(Box::new(f));
        self
    }
    /// Calls `f` once the first load is done.
    pub fn for_initialized(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.initialized.push(Box::new(f));
        self
    }
    /// Calls `f` with each connection-state transition of the framework.
    pub fn for_connection_states(mut self, f: impl Fn(&ConnectionStateEvent) + Send + Sync + 'static) -> Self {
        self.states.push(Box::new(f));
        self
    }
    /// Node events before the cache is initialized are not passed on (the initial load's
    /// creates are skipped); `for_initialized` and connection callbacks still are.
    pub fn after_initialized(mut self) -> Self {
        self.after_initialized = true;
        self
    }
    /// The listener.
    pub fn build(self) -> impl CuratorCacheListener {
        BuiltListener { parts: self, active: AtomicBool::new(false) }
    }
}

struct BuiltListener {
    parts: CuratorCacheListenerBuilder,
    active: AtomicBool,
}

impl CuratorCacheListener for BuiltListener {
    fn event(&self, event: &CuratorCacheEvent) {
        let p = &self.parts;
        let node_event = matches!(
            event,
            CuratorCacheEvent::Created(_) | CuratorCacheEvent::Changed { .. } | CuratorCacheEvent::Deleted(_)
        );
        if matches!(event, CuratorCacheEvent::Initialized) {
            self.active.store(true, Ordering::Release);
        } else if node_event && p.after_initialized && !self.active.load(Ordering::Acquire) {
            return;
        }
        match event {
            CuratorCacheEvent::Created(node) => {
                p.creates.iter().for_each(|f| f(node));
                p.creates_and_changes.iter().for_each(|f| f(None, node));
            }
            CuratorCacheEvent::Changed { old, new } => {
                p.changes.iter().for_each(|f| f(old, new));
                p.creates_and_changes.iter().for_each(|f| f(Some(old), new));
            }
            CuratorCacheEvent::Deleted(node) => p.deletes.iter().for_each(|f| f(node)),
            CuratorCacheEvent::Initialized => p.initialized.iter().for_each(|f| f()),
            CuratorCacheEvent::ConnectionStateChanged(state) => p.states.iter().for_each(|f| f(state)),
        }
        p.all.iter().for_each(|l| l.event(event));
    }
}

/// Builder of a [`CuratorCache`].
pub struct CuratorCacheBuilder {
    fw: CuratorFramework,
    path: String,
    options: Vec<CuratorCacheOption>,
    selector: Option<Arc<dyn TreeCacheSelector>>,
}

impl std::fmt::Debug for CuratorCacheBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuratorCacheBuilder")
            .field("path", &self.path)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl CuratorCacheBuilder {
    /// Adds options.
    pub fn with_options(mut self, options: &[CuratorCacheOption]) -> Self {
        self.options.extend_from_slice(options);
        self
    }
    /// Caches only the nodes `selector` accepts (see [`TreeCacheSelector`]).
    pub fn with_selector(mut self, selector: impl TreeCacheSelector) -> Self {
        self.selector = Some(Arc::new(selector));
        self
    }
    /// Checks the path and builds the cache (not started).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`](curator_core::CuratorError::InvalidPath) for a path
    /// ZooKeeper would refuse.
    pub fn build(self) -> Result<CuratorCache> {
        let has = |o| self.options.contains(&o);
        let config = EngineConfig {
            scope: Scope {
                root: self.path.clone(),
                max_depth: if has(CuratorCacheOption::SingleNodeCache) { 0 } else { usize::MAX },
                selector: self.selector.clone(),
            },
            cache_data: !has(CuratorCacheOption::DoNotCacheData),
            create_path: has(CuratorCacheOption::CreateParentContainers),
            kind: curator_core::metrics::cache::CURATOR_CACHE,
            what: "CuratorCache",
        };
        let shell = CacheShell::new(&self.fw, config, !has(CuratorCacheOption::DoNotClearOnClose))?;
        Ok(CuratorCache { shell })
    }
}

/// A cache of a node and every node below it (or of the node only, with
/// [`CuratorCacheOption::SingleNodeCache`]), kept current by one persistent recursive watch:
/// one getData per created or changed node, nothing for a deletion, a multi-read load at start
/// and after the connection was lost.
///
/// The path need not exist: the cache fills when it appears. Dropping the cache closes it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// # fw.block_until_connected(std::time::Duration::from_secs(10)).await?;
/// use curator_cache::{CuratorCache, CuratorCacheEvent, CuratorCacheListenerBuilder, CuratorCacheOption};
///
/// fw.create().creating_parents_if_needed().for_path("/config/limits", b"10".to_vec()).await?;
/// let cache = CuratorCache::build(&fw, "/config", &[CuratorCacheOption::DoNotClearOnClose])?;
/// let listener = CuratorCacheListenerBuilder::new()
///     .for_changes(|old, new| tracing::info!(path = new.path(), old = ?old.data(), new = ?new.data(), "changed"))
///     .build();
/// cache.add_listener(listener); // runs on the blocking pool, in order
/// let mut events = cache.events();
/// cache.start()?;
/// cache.wait_initialized().await?; // the first load is in
/// assert_eq!(cache.size(), 2); // /config and /config/limits
/// fw.set_data().for_path("/config/limits", b"20".to_vec()).await?;
/// while let Some(event) = events.next().await {
///     // The first load's Created events and Initialized come first.
///     if let CuratorCacheEvent::Changed { new, .. } = event {
///         assert_eq!(new.data(), Some(&b"20"[..]));
///         break;
///     }
/// }
/// cache.close().await;
/// assert_eq!(cache.get("/config/limits").and_then(|n| n.data.clone()), Some(b"20".to_vec()));
/// # Ok(()) }
/// ```
pub struct CuratorCache {
    shell: CacheShell<CuratorCacheEvent>,
}

impl std::fmt::Debug for CuratorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shell.debug("CuratorCache", f)
    }
}

impl CuratorCache {
    /// A cache of `path` with `options`.
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`](curator_core::CuratorError::InvalidPath) for a path
    /// ZooKeeper would refuse.
    pub fn build(fw: &CuratorFramework, path: &str, options: &[CuratorCacheOption]) -> Result<Self> {
        Self::builder(fw, path).with_options(options).build()
    }

    /// A builder of a cache of `path`.
    pub fn builder(fw: &CuratorFramework, path: &str) -> CuratorCacheBuilder {
        CuratorCacheBuilder { fw: fw.clone(), path: path.to_string(), options: Vec::new(), selector: None }
    }

    /// Starts the cache (Curator's `CuratorCache.start`). Sync: the first load, then following
    /// changes, are the cache's task's. Listeners added before hear the initial load as `Created` events, then `Initialized`.
    ///
    /// # Errors
    /// [`AlreadyStarted`](curator_core::CuratorError::AlreadyStarted),
    /// [`AlreadyClosed`](curator_core::CuratorError::AlreadyClosed), [`NoRuntime`](curator_core::CuratorError::NoRuntime)
    /// outside a tokio runtime, [`Closed`](curator_core::CuratorError::Closed) on a closed
    /// framework, each naming `CuratorCache` ([`Lifecycle`](curator_core::Lifecycle)): nothing
    /// started then. A refused first load is reported by
    /// [`wait_initialized`](Self::wait_initialized).
    pub fn start(&self) -> Result<()> {
        self.shell.start(false, |event| match event {
            EngineEvent::Created(node) => Translated::Event(CuratorCacheEvent::Created(node)),
            EngineEvent::Changed(old, new) => Translated::Event(CuratorCacheEvent::Changed { old, new }),
            EngineEvent::Deleted(node) => Translated::Event(CuratorCacheEvent::Deleted(node)),
            // Listeners added later hear it first, so that `after_initialized` works for them too.
            EngineEvent::Initialized => Translated::Greeting(CuratorCacheEvent::Initialized),
            EngineEvent::Connection(state) => Translated::Event(CuratorCacheEvent::ConnectionStateChanged(state)),
            // Curator's CuratorCache says "initialized" once; the catch-up's events were sent.
            EngineEvent::Recovered => Translated::Nothing,
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

    /// Whether the first load is done.
    pub fn is_initialized(&self) -> bool {
        self.shell.core().is_initialized()
    }

    /// Stops the cache and its watch (Curator's `close`), and clears it unless
    /// [`CuratorCacheOption::DoNotClearOnClose`]; listener streams end after the events already
    /// queued. Idempotent: a second call, or one on a cache never started (which can then no
    /// longer start), does nothing more. Dropping the cache does the same.
    pub async fn close(&self) {
        self.shell.close();
    }

    /// The cached node at `path`, if any.
    pub fn get(&self, path: &str) -> Option<Arc<ChildData>> {
        self.shell.core().shared.nodes().get(path).cloned()
    }

    /// The number of cached nodes (the root included when it exists).
    pub fn size(&self) -> usize {
        self.shell.core().shared.nodes().len()
    }

    /// Every cached node, ordered by path.
    pub fn entries(&self) -> Vec<Arc<ChildData>> {
        self.shell.core().shared.nodes().values().cloned().collect()
    }

    /// An iterator over a snapshot of the cached nodes, ordered by path (Curator's `stream()`).
    pub fn stream(&self) -> impl Iterator<Item = Arc<ChildData>> {
        self.entries().into_iter()
    }

    /// Adds a listener; it hears events from now on (before `start`: all of them). A listener
    /// added once the cache is initialized first hears `Initialized`.
    pub fn add_listener(&self, listener: impl CuratorCacheListener) -> ListenerId {
        self.shell.add_listener(Arc::new(move |event: &CuratorCacheEvent| listener.event(event)))
    }

    /// Removes a listener. False if it was not there.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.shell.remove_listener(id)
    }

    /// An ordered stream of the events from now on (before `start`: all of them).
    pub fn events(&self) -> EventStream<CuratorCacheEvent> {
        self.shell.events()
    }
}
