//! [`CachedModeledFramework`]: a [`ModeledFramework`] whose reads are answered from a
//! [`CuratorCache`] of its subtree, with typed events (Curator's `CachedModeledFramework`).
//! Design: docs/architecture.md section 19.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use curator_cache::{ChildData, CuratorCache, CuratorCacheEvent, EventStream};
use curator_core::{CuratorError, Result, ZPath};

use crate::modeled::ModeledFramework;
use crate::znode::ZNode;

/// A [`ModeledFramework`] with a [`CuratorCache`] of the subtree at its spec's path: reads of
/// a cached node decode the cached data (no request), a miss reads through to ZooKeeper, and
/// [`events`](Self::events) are typed. Writes are the modeled client's (through `Deref`): they
/// go to ZooKeeper, and the cache sees them as any change.
///
/// A node with empty data holds no model (a parent made for its children): the cached views
/// and the events leave it out, as Curator does since CURATOR-609; a node whose data does not
/// deserialize is `BadData` in a read and left out of the events, with a warning.
///
/// [`child`](Self::child) and [`with_path`](Self::with_path) give clients below, sharing the
/// cache; the cache is closed when [`close`](Self::close) is called or the last of them is
/// dropped. The modeled client's `resolved` and `parent` (through `Deref`) give uncached
/// clients: a parameter's value or a parent may lie outside the cached subtree.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use curator_core::{CuratorFramework, ZPath};
/// use curator_modeled::{CachedModeledFramework, ModelSpec, ModeledCacheEvent, ModeledFramework};
/// use curator_test::TestingServer;
///
/// let server = TestingServer::start().await?;
/// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// fw.start()?;
/// fw.block_until_connected(Duration::from_secs(10)).await?;
///
/// let spec = ModelSpec::<Vec<String>>::json(ZPath::parse("/teams")?).build()?;
/// let teams = CachedModeledFramework::new(ModeledFramework::new(&fw, spec))?;
/// let mut events = teams.events();
/// teams.start()?;
/// teams.child("red")?.set(&vec!["ann".to_string()]).await?;
/// loop {
///     match events.next().await {
///         Some(ModeledCacheEvent::Added(node)) => {
///             assert_eq!(node.model, ["ann"]);
///             break;
///         }
///         Some(_) => continue, // Initialized
///         None => panic!("the cache closed"),
///     }
/// }
/// assert_eq!(teams.child("red")?.read().await?, ["ann"]); // from the cache
/// teams.close().await;
/// fw.close().await;
/// # Ok(()) }
/// ```
pub struct CachedModeledFramework<T> {
    modeled: ModeledFramework<T>,
    /// The cache's root path.
    root: ZPath,
    cache: Arc<CuratorCache>,
}

impl<T> Clone for CachedModeledFramework<T> {
    fn clone(&self) -> Self {
        CachedModeledFramework { modeled: self.modeled.clone(), root: self.root.clone(), cache: self.cache.clone() }
    }
}

impl<T> fmt::Debug for CachedModeledFramework<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedModeledFramework")
            .field("modeled", &self.modeled)
            .field("root", &self.root.to_string())
            .finish_non_exhaustive()
    }
}

impl<T> Deref for CachedModeledFramework<T> {
    type Target = ModeledFramework<T>;
    fn deref(&self) -> &ModeledFramework<T> {
        &self.modeled
    }
}

impl<T: Send + Sync + 'static> CachedModeledFramework<T> {
    /// A cached client over `modeled`, caching the subtree at its spec's path (which must be
    /// resolved: a parameter is [`CuratorError::InvalidArgument`]). Call [`start`](Self::start).
    pub fn new(modeled: ModeledFramework<T>) -> Result<Self> {
        let path = modeled.full_path()?;
        let cache = CuratorCache::build(modeled.framework(), &path, &[])?;
        let root = modeled.spec().path().clone();
        Ok(CachedModeledFramework { modeled, root, cache: Arc::new(cache) })
    }

    /// Starts the cache (its first load runs in the background).
    pub fn start(&self) -> Result<()> {
        self.cache.start()
    }
    /// Waits for the cache's first load.
    pub async fn wait_initialized(&self) -> Result<()> {
        self.cache.wait_initialized().await
    }
    /// Closes the cache (for every client sharing it); the event streams end.
    pub async fn close(&self) {
        self.cache.close().await
    }
    /// The cache.
    pub fn cache(&self) -> &CuratorCache {
        &self.cache
    }
    /// The uncached modeled client at this client's path.
    pub fn modeled(&self) -> &ModeledFramework<T> {
        &self.modeled
    }

    /// The cached client at `path`, sharing this one's cache; a path outside the cache's
    /// subtree is [`CuratorError::InvalidArgument`].
    pub fn with_path(&self, path: ZPath) -> Result<Self> {
        if !path.starts_with(&self.root) {
            return Err(CuratorError::InvalidArgument {
                path: path.to_string(),
                reason: format!("outside the cache's subtree {}", self.root),
            });
        }
        Ok(CachedModeledFramework {
            modeled: self.modeled.with_path(path),
            root: self.root.clone(),
            cache: self.cache.clone(),
        })
    }
    /// The cached client at the child `name` of this one's path, sharing the cache.
    pub fn child(&self, name: &str) -> Result<Self> {
        self.with_path(self.modeled.spec().path().child(name)?)
    }

    /// The model of the cached node `data`: `None` for a node with no data (none cached, or
    /// empty), an error for data that does not deserialize.
    fn decode(&self, data: &ChildData) -> Option<Result<ZNode<T>>> {
        let bytes = data.data().filter(|d| !d.is_empty())?;
        Some(self.decode_bytes(data, bytes))
    }

    fn decode_bytes(&self, data: &ChildData, bytes: &[u8]) -> Result<ZNode<T>> {
        let model = self.modeled.decode(data.path(), bytes)?;
        Ok(ZNode { path: ZPath::parse(data.path())?, stat: *data.stat(), model })
    }

    /// The cached model at this client's path: `None` if the cache holds no model there.
    pub fn current(&self) -> Result<Option<ZNode<T>>> {
        let path = self.modeled.full_path()?;
        self.cache.get(&path).and_then(|data| self.decode(&data)).transpose()
    }

    /// The cached models of this path's children, ordered by path, and the children whose
    /// data is not a model, reported apart: a node someone else wrote does not hide the others
    /// ([`CachedChildren`]). Children with no data (parents) are in neither.
    ///
    /// # Errors
    /// [`CuratorError::InvalidArgument`] if this client's path has unresolved parameters.
    pub fn current_children(&self) -> Result<CachedChildren<T>> {
        let path = self.modeled.full_path()?;
        let prefix = if path == "/" { path.clone() } else { format!("{path}/") };
        let children = self.cache.entries().into_iter().filter(|d| {
            d.path().strip_prefix(prefix.as_str()).is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
        });
        let mut found = CachedChildren { models: Vec::new(), unreadable: Vec::new() };
        for decoded in children.filter_map(|data| self.decode(&data)) {
            match decoded {
                Ok(node) => found.models.push(node),
                Err(err) => {
                    tracing::debug!(error = %err, "modeled cache: a child that is not a model, reported apart");
                    found.unreadable.push(err);
                }
            }
        }
        Ok(found)
    }

    /// The model at this client's path: from the cache, or on a miss from ZooKeeper.
    pub async fn read(&self) -> Result<T> {
        Ok(self.read_znode().await?.model)
    }

    /// The model with its path and stat: from the cache, or on a miss from ZooKeeper.
    pub async fn read_znode(&self) -> Result<ZNode<T>> {
        match self.current()? {
            Some(node) => Ok(node),
            None => self.modeled.read_znode().await,
        }
    }

    /// The models of this path's children: from the cache once it is loaded and holds this
    /// node, else from ZooKeeper. As the uncached client's, a child whose data is not a model
    /// fails the whole read with its [`BadData`](CuratorError::BadData); use
    /// [`current_children`](Self::current_children) to have the others and the bad ones apart.
    pub async fn children_as_znodes(&self) -> Result<Vec<ZNode<T>>> {
        let path = self.modeled.full_path()?;
        if self.cache.is_initialized() && self.cache.get(&path).is_some() {
            let children = self.current_children()?;
            return match children.unreadable.into_iter().next() {
                Some(bad) => Err(bad),
                None => Ok(children.models),
            };
        }
        self.modeled.children_as_znodes().await
    }

    /// A stream of typed events of the cached nodes at and below this client's path, from now
    /// on (before [`start`](Self::start): the first load's too).
    pub fn events(&self) -> ModeledCacheEvents<T> {
        ModeledCacheEvents { client: self.clone(), inner: self.cache.events() }
    }
}

/// The cached children of a path ([`CachedModeledFramework::current_children`]): the models,
/// and apart from them the children whose data does not decode as the model.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CachedChildren<T> {
    /// The children that hold a model, ordered by path.
    pub models: Vec<ZNode<T>>,
    /// The children whose data is not a model, ordered by path: each a
    /// [`BadData`](CuratorError::BadData) naming the child's path and why it did not decode.
    pub unreadable: Vec<CuratorError>,
}

/// A typed event of a [`CachedModeledFramework`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModeledCacheEvent<T> {
    /// A node now holds a model (it was created, or its data became a model).
    Added(ZNode<T>),
    /// A node's model changed.
    Updated {
        /// Before.
        old: ZNode<T>,
        /// After.
        new: ZNode<T>,
    },
    /// A node no longer holds a model (it was deleted, or its data emptied): the last model.
    Removed(ZNode<T>),
    /// The cache's first load is done (its nodes came before as `Added`).
    Initialized,
}

/// An ordered stream of [`ModeledCacheEvent`]s; see [`CachedModeledFramework::events`].
/// Connection changes are not among them (the framework's `connection_state_stream` has them;
/// the cache loads again after a reconnection and reports what changed meanwhile).
pub struct ModeledCacheEvents<T> {
    client: CachedModeledFramework<T>,
    inner: EventStream<CuratorCacheEvent>,
}

impl<T> fmt::Debug for ModeledCacheEvents<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModeledCacheEvents").field("client", &self.client).finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> ModeledCacheEvents<T> {
    /// The next event; `None` once the cache is closed.
    pub async fn next(&mut self) -> Option<ModeledCacheEvent<T>> {
        loop {
            let event = self.inner.next().await?;
            if let Some(typed) = self.typed(event) {
                return Some(typed);
            }
        }
    }

    /// The model of a node in scope, or `None` (out of scope, no model, or data that does not
    /// deserialize, with a warning).
    fn model(&self, data: &ChildData) -> Option<ZNode<T>> {
        let path = ZPath::parse(data.path()).ok()?;
        if !path.starts_with(self.client.modeled.spec().path()) {
            return None;
        }
        match self.client.decode(data)? {
            Ok(node) => Some(node),
            Err(err) => {
                tracing::warn!(path = %data.path(), error = %err, "a cached node's data is not a model; no event");
                None
            }
        }
    }

    fn typed(&self, event: CuratorCacheEvent) -> Option<ModeledCacheEvent<T>> {
        match event {
            CuratorCacheEvent::Created(data) => self.model(&data).map(ModeledCacheEvent::Added),
            CuratorCacheEvent::Changed { old, new } => match (self.model(&old), self.model(&new)) {
                (Some(old), Some(new)) => Some(ModeledCacheEvent::Updated { old, new }),
                (None, Some(new)) => Some(ModeledCacheEvent::Added(new)),
                (Some(old), None) => Some(ModeledCacheEvent::Removed(old)),
                (None, None) => None,
            },
            CuratorCacheEvent::Deleted(data) => self.model(&data).map(ModeledCacheEvent::Removed),
            CuratorCacheEvent::Initialized => Some(ModeledCacheEvent::Initialized),
            _ => None,
        }
    }
}
