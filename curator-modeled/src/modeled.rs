//! [`ModeledFramework`]: typed reads and writes of the nodes a [`ModelSpec`] describes
//! (Curator's x-async `ModeledFramework`). Design: docs/architecture.md section 19.

use std::fmt;

use curator_core::zk::Stat;
use curator_core::{CuratorError, CuratorFramework, Result, ZPath};

use crate::spec::{CreateOption, DeleteOption, ModelSpec};
use crate::znode::ZNode;

/// Typed reads and writes of the node (or, with a parameterized path, the nodes) a
/// [`ModelSpec`] describes, over a [`CuratorFramework`] (Curator's x-async `ModeledFramework`).
/// Cheap to clone; every method is `async` and its future is `Send`, so a write runs in the
/// background by spawning it (`tokio::spawn`, or [`CuratorFramework::spawn_background`] to have
/// the framework's `close` wait for it).
///
/// Every operation goes to the spec's resolved path: one with an unresolved parameter is
/// [`CuratorError::InvalidArgument`] (nothing sent); [`resolved`](Self::resolved),
/// [`child`](Self::child) and [`with_path`](Self::with_path) give clients at other paths.
/// A model that does not serialize is `InvalidArgument`, node data that does not deserialize
/// [`CuratorError::BadData`] with the node's path; ZooKeeper's errors are core's.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use curator_core::{CuratorFramework, ZPath};
/// use curator_modeled::{ModelSpec, ModeledFramework};
/// use curator_test::TestingServer;
///
/// #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Counter { name: String, hits: u64 }
///
/// let server = TestingServer::start().await?; // a real ZooKeeper on a free port
/// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// fw.start()?;
/// fw.block_until_connected(Duration::from_secs(10)).await?;
///
/// let spec = ModelSpec::<Counter>::json(ZPath::parse_with_ids("/counters/{name}")?).build()?;
/// let counters = ModeledFramework::new(&fw, spec);
/// let home = counters.resolved(["home"])?;
/// home.set(&Counter { name: "home".into(), hits: 0 }).await?;
/// // Compare-and-set: re-read and retried until no other writer came between.
/// let now = home.update(|mut c| { c.hits += 1; c }).await?;
/// assert_eq!(now.model.hits, 1);
/// assert_eq!(home.read().await?, Counter { name: "home".into(), hits: 1 });
/// fw.close().await;
/// # Ok(()) }
/// ```
pub struct ModeledFramework<T> {
    fw: CuratorFramework,
    spec: ModelSpec<T>,
}

impl<T> Clone for ModeledFramework<T> {
    fn clone(&self) -> Self {
        ModeledFramework { fw: self.fw.clone(), spec: self.spec.clone() }
    }
}

impl<T> fmt::Debug for ModeledFramework<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModeledFramework").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> ModeledFramework<T> {
    /// A client of the models `spec` describes, over `fw`.
    pub fn new(fw: &CuratorFramework, spec: ModelSpec<T>) -> Self {
        ModeledFramework { fw: fw.clone(), spec }
    }

    /// The framework.
    pub fn framework(&self) -> &CuratorFramework {
        &self.fw
    }
    /// The spec.
    pub fn spec(&self) -> &ModelSpec<T> {
        &self.spec
    }

    /// This client at `path` (same serializer and options; Curator's `withPath`).
    pub fn with_path(&self, path: ZPath) -> Self {
        ModeledFramework { fw: self.fw.clone(), spec: self.spec.with_path(path) }
    }
    /// This client at the spec's path with its first parameters given `values` (see
    /// [`ZPath::resolved`]).
    pub fn resolved<I, S>(&self, values: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(self.with_path(self.spec.path().resolved(values)?))
    }
    /// This client at the child `name` of the spec's path.
    pub fn child(&self, name: &str) -> Result<Self> {
        Ok(self.with_path(self.spec.path().child(name)?))
    }
    /// This client at the parent of the spec's path (the root has none: `InvalidPath`).
    pub fn parent(&self) -> Result<Self> {
        Ok(self.with_path(self.spec.path().parent()?))
    }

    /// The full path the operations go to.
    pub fn full_path(&self) -> Result<String> {
        self.spec.path().full_path()
    }

    /// `model`'s node data; a model that does not serialize is `InvalidArgument`.
    pub(crate) fn encode(&self, path: &str, model: &T) -> Result<Vec<u8>> {
        self.spec
            .serializer()
            .serialize(model)
            .map_err(|reason| CuratorError::InvalidArgument { path: path.to_string(), reason })
    }

    /// The model in the data of node `path`; data that does not deserialize is `BadData`.
    pub(crate) fn decode(&self, path: &str, bytes: &[u8]) -> Result<T> {
        self.spec
            .serializer()
            .deserialize(bytes)
            .map_err(|reason| CuratorError::BadData { path: path.to_string(), reason })
    }

    /// Writes `model` to the node: creates it with the spec's mode, ACL, TTL and options, or
    /// with [`CreateOption::SetDataIfExists`] (a default) writes its data if it exists.
    /// Resolves to the node's path (with its sequence number in a sequential mode).
    pub async fn set(&self, model: &T) -> Result<String> {
        let path = self.full_path()?;
        let data = self.encode(&path, model)?;
        tracing::debug!(path = %path, "modeled set");
        let spec = &self.spec;
        let mut create = self.fw.create().with_mode(spec.create_mode());
        if spec.has_create_option(CreateOption::CreateParentsAsContainers) {
            create = create.creating_parent_containers_if_needed();
        } else if spec.has_create_option(CreateOption::CreateParentsIfNeeded) {
            create = create.creating_parents_if_needed();
        }
        if spec.has_create_option(CreateOption::SetDataIfExists) {
            create = create.or_set_data();
        }
        if spec.has_create_option(CreateOption::Compress) {
            create = create.compressed();
        }
        if let Some(acl) = spec.acl() {
            create = create.with_acl(acl.to_vec());
        }
        if let Some(ttl) = spec.ttl() {
            create = create.with_ttl(ttl);
        }
        create.for_path(&path, data).await
    }

    /// Writes `model` to the existing node if its version is `version` (compare-and-set; a
    /// version of `-1` matches any). Another version is [`CuratorError::BadVersion`], a missing
    /// node [`CuratorError::NoNode`]. Resolves to the node's new stat.
    pub async fn set_version(&self, model: &T, version: i32) -> Result<Stat> {
        let path = self.full_path()?;
        let data = self.encode(&path, model)?;
        tracing::debug!(path = %path, version, "modeled set at a version");
        self.write(&path, data, Some(version)).await
    }

    /// Writes `model` to the existing node, whatever its version (Curator's `update`); a
    /// missing node is [`CuratorError::NoNode`].
    pub async fn set_existing(&self, model: &T) -> Result<Stat> {
        let path = self.full_path()?;
        let data = self.encode(&path, model)?;
        tracing::debug!(path = %path, "modeled set of an existing node");
        self.write(&path, data, None).await
    }

    async fn write(&self, path: &str, data: Vec<u8>, version: Option<i32>) -> Result<Stat> {
        let mut set = self.fw.set_data();
        if let Some(version) = version {
            set = set.with_version(version);
        }
        if self.spec.has_create_option(CreateOption::Compress) {
            set = set.compressed();
        }
        set.for_path(path, data).await
    }

    /// Updates the node by compare-and-set: reads the model and its version, writes `change`'s
    /// result at that version, and when another writer came between (`BadVersion`) reads again
    /// and calls `change` again, until a write succeeds; so no concurrent update is lost, and
    /// `change` may be called more than once. A write whose reply was lost is not sent again on
    /// a guess (another client may write the same bytes at the same version): the update ends
    /// with [`CuratorError::OutcomeUnknown`], so `change` is never applied twice
    /// (docs/architecture.md section 4.4); read the node to see where it stands. A missing node
    /// is [`CuratorError::NoNode`]. Resolves to the node as written.
    pub async fn update<F>(&self, mut change: F) -> Result<ZNode<T>>
    where
        F: FnMut(T) -> T + Send,
    {
        let path = self.full_path()?;
        loop {
            let current = self.read_znode().await?;
            let model = change(current.model);
            let data = self.encode(&path, &model)?;
            tracing::debug!(path = %path, version = current.stat.version, "modeled update");
            match self.write(&path, data, Some(current.stat.version)).await {
                Ok(stat) => return Ok(ZNode { path: current.path, stat, model }),
                Err(CuratorError::BadVersion { .. }) => {
                    tracing::debug!(path = %path, "modeled update raced another writer; reading again");
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Reads the model.
    pub async fn read(&self) -> Result<T> {
        Ok(self.read_znode().await?.model)
    }

    /// Reads the model with its node's path and stat (Curator's `readAsZNode`).
    pub async fn read_znode(&self) -> Result<ZNode<T>> {
        let path = self.full_path()?;
        tracing::debug!(path = %path, "modeled read");
        let mut get = self.fw.get_data();
        if self.spec.has_create_option(CreateOption::Compress) {
            get = get.decompressed();
        }
        let (data, stat) = get.for_path_with_stat(&path).await?;
        let model = self.decode(&path, &data)?;
        Ok(ZNode { path: self.spec.path().clone(), stat, model })
    }

    /// Deletes the node, any version, with the spec's delete options.
    pub async fn delete(&self) -> Result<()> {
        self.delete_at(None).await
    }

    /// Deletes the node if its version is `version` ([`CuratorError::BadVersion`] otherwise).
    pub async fn delete_version(&self, version: i32) -> Result<()> {
        self.delete_at(Some(version)).await
    }

    async fn delete_at(&self, version: Option<i32>) -> Result<()> {
        let path = self.full_path()?;
        tracing::debug!(path = %path, ?version, "modeled delete");
        let spec = &self.spec;
        let mut delete = self.fw.delete();
        if let Some(version) = version {
            delete = delete.with_version(version);
        }
        if spec.has_delete_option(DeleteOption::Quietly) {
            delete = delete.quietly();
        }
        if spec.has_delete_option(DeleteOption::Guaranteed) {
            delete = delete.guaranteed();
        }
        if spec.has_delete_option(DeleteOption::DeletingChildrenIfNeeded) {
            delete = delete.deleting_children_if_needed();
        }
        delete.for_path(&path).await
    }

    /// The node's stat, or `None` if it does not exist.
    pub async fn exists(&self) -> Result<Option<Stat>> {
        let path = self.full_path()?;
        tracing::debug!(path = %path, "modeled exists");
        self.fw.check_exists().for_path(&path).await
    }

    /// The paths of the node's children, sorted.
    pub async fn children(&self) -> Result<Vec<ZPath>> {
        let path = self.full_path()?;
        tracing::debug!(path = %path, "modeled children");
        let mut names = self.fw.get_children().for_path(&path).await?;
        names.sort();
        names.iter().map(|name| self.spec.path().child(name)).collect()
    }

    /// The models of the node's children, sorted by path. A child deleted between the listing
    /// and its read is left out; a child whose data does not deserialize is
    /// [`CuratorError::BadData`] with its path.
    pub async fn children_as_znodes(&self) -> Result<Vec<ZNode<T>>> {
        let mut nodes = Vec::new();
        for child in self.children().await? {
            match self.with_path(child).read_znode().await {
                Ok(node) => nodes.push(node),
                Err(CuratorError::NoNode { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(nodes)
    }
}
