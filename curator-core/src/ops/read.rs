//! Reads: `check_exists()`, `get_data()`, `get_children()`, `get_acl()`, `get_config()`, each
//! with optional one-shot watches (`watched()`, `using_watcher()`, or a [`Watch`] returned with
//! the result; dropping or [removing](Watch::remove) a returned watch removes it from the
//! server), and `create_containers()`.

use std::sync::Arc;

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::CuratorError;
use crate::framework::CuratorFramework;
use crate::ops::remove_watch::WatcherType;
use crate::ops::{Pending, Watch, WatchTarget};
use crate::path;
use crate::schema_set::SchemaOp;

/// Validates `path` (and, for a read of a node, whether it sets a watch against the schema of
/// the path: `watching`), then runs `read` under the retry policy with the session's client.
fn read_op<T, F, Fut>(
    fw: &CuratorFramework,
    kind: CuratorEventType,
    op: &'static str,
    path: &str,
    watching: Option<bool>,
    read: F,
) -> Pending<T>
where
    T: Send + 'static,
    F: Fn(zk::Client, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = std::result::Result<T, zk::Error>> + Send,
{
    read_op_with(fw, kind, op, path, watching, move |client, path| {
        let fut = read(client, path.clone());
        async move { fut.await.map_err(|e| CuratorError::from_zk(&path, e)) }
    })
}

/// As [`read_op`], for reads that also do framework work (creating parents) and so fail with
/// a [`CuratorError`] of their own.
fn read_op_with<T, F, Fut>(
    fw: &CuratorFramework,
    kind: CuratorEventType,
    op: &'static str,
    path: &str,
    watching: Option<bool>,
    read: F,
) -> Pending<T>
where
    T: Send + 'static,
    F: Fn(zk::Client, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = crate::Result<T>> + Send,
{
    let schema = |()| watching.map_or(Ok(()), |w| fw.check_schema(path, SchemaOp::Watch(w)));
    if let Err(err) = path::validate(path).and_then(schema) {
        return Pending::failed(fw, kind, path, err);
    }
    let (fw2, owned) = (fw.clone(), path.to_string());
    Pending::new(fw, kind, path, async move {
        fw2.call_with_retry(op, &owned, |session, _| read(session.client().clone(), owned.clone())).await
    })
}

macro_rules! watch_options {
    () => {
        /// Set a one-shot watch whose event goes to the framework's listeners as
        /// [`CuratorEventType::Watched`].
        pub fn watched(mut self) -> Self {
            self.watch = WatchTarget::Listeners;
            self
        }
        /// Set a one-shot watch whose event goes to `watcher` (on the blocking pool).
        pub fn using_watcher(mut self, watcher: impl Fn(zk::WatchedEvent) + Send + Sync + 'static) -> Self {
            self.watch = WatchTarget::Callback(Arc::new(watcher));
            self
        }
    };
}

/// Builder of an exists check. See [`CuratorFramework::check_exists`].
#[derive(Clone)]
pub struct ExistsBuilder {
    fw: CuratorFramework,
    watch: WatchTarget,
    parent_containers: bool,
}

/// Builder of a read of the ensemble's configuration. See [`CuratorFramework::get_config`].
#[derive(Clone)]
pub struct GetConfigBuilder {
    fw: CuratorFramework,
    watch: WatchTarget,
}

/// Builder of a data read. See [`CuratorFramework::get_data`].
#[derive(Clone)]
pub struct GetDataBuilder {
    fw: CuratorFramework,
    watch: WatchTarget,
    /// `None`: the framework's default (`enable_compression`).
    decompressed: Option<bool>,
}

/// Builder of a children listing. See [`CuratorFramework::get_children`].
#[derive(Clone)]
pub struct GetChildrenBuilder {
    fw: CuratorFramework,
    watch: WatchTarget,
}

/// Builder of an ACL read. See [`CuratorFramework::get_acl`].
#[derive(Clone)]
pub struct GetAclBuilder {
    fw: CuratorFramework,
}

impl CuratorFramework {
    /// Starts an exists check: the node's stat, or `None`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// assert!(fw.check_exists().for_path("/app").await?.is_none());
    /// fw.create().for_path("/app", Vec::new()).await?;
    /// let stat = fw.check_exists().for_path("/app").await?.expect("created");
    /// assert_eq!(stat.version, 0);
    /// # Ok(()) }
    /// ```
    pub fn check_exists(&self) -> ExistsBuilder {
        ExistsBuilder { fw: self.clone(), watch: WatchTarget::None, parent_containers: false }
    }
    /// Starts a read of the ensemble's dynamic configuration (the node `/zookeeper/config`, as
    /// Curator's `getConfig()`): the `server.N=...` lines and the config version.
    pub fn get_config(&self) -> GetConfigBuilder {
        GetConfigBuilder { fw: self.clone(), watch: WatchTarget::None }
    }
    /// Creates `path` and its missing ancestors as container nodes (Curator's
    /// `createContainers`): the server deletes each once it has had children and has none
    /// left. Nodes that exist are left as they are.
    ///
    /// ```no_run
    /// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// fw.create_containers("/app/locks").await?;
    /// assert!(fw.check_exists().for_path("/app/locks").await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn create_containers(&self, path: &str) -> crate::Result<()> {
        path::validate(path)?;
        if path == "/" {
            return Ok(());
        }
        let below = path::make_path(path, "x");
        self.call_with_retry("create_containers", path, |session, _| {
            let (fw, below) = (self.clone(), below.clone());
            async move { crate::ops::create::make_parents(&fw, session.client(), &below, true).await }
        })
        .await
    }
    /// Starts a data read.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::CuratorError;
    ///
    /// fw.create().for_path("/limits", b"10".to_vec()).await?;
    /// assert_eq!(fw.get_data().for_path("/limits").await?, b"10");
    /// // Curator's usingWatcher/watched: a one-shot watch, here a future to await.
    /// let (data, stat, watch) = fw.get_data().for_path_and_watch("/limits").await?;
    /// assert_eq!((data.as_slice(), stat.version), (&b"10"[..], 0));
    /// fw.set_data().for_path("/limits", b"20".to_vec()).await?;
    /// assert_eq!(watch.changed().await.path, "/limits");
    /// assert!(matches!(fw.get_data().for_path("/missing").await, Err(CuratorError::NoNode { .. })));
    /// # Ok(()) }
    /// ```
    pub fn get_data(&self) -> GetDataBuilder {
        GetDataBuilder { fw: self.clone(), watch: WatchTarget::None, decompressed: None }
    }
    /// Starts a children listing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// for name in ["b", "a"] {
    ///     fw.create().creating_parents_if_needed().for_path(&format!("/jobs/{name}"), Vec::new()).await?;
    /// }
    /// let mut children = fw.get_children().for_path("/jobs").await?; // names, in no set order
    /// children.sort();
    /// assert_eq!(children, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn get_children(&self) -> GetChildrenBuilder {
        GetChildrenBuilder { fw: self.clone(), watch: WatchTarget::None }
    }
    /// Starts an ACL read.
    pub fn get_acl(&self) -> GetAclBuilder {
        GetAclBuilder { fw: self.clone() }
    }
}

impl ExistsBuilder {
    watch_options!();

    /// Before the check, create the missing parents of the path as container nodes (Curator's
    /// `creatingParentContainersIfNeeded`): a recipe's base path can be made ready this way.
    pub fn creating_parent_containers_if_needed(mut self) -> Self {
        self.parent_containers = true;
        self
    }

    /// The stat of `path`, or `None` if it does not exist.
    pub fn for_path(self, path: &str) -> Pending<Option<zk::Stat>> {
        let Self { fw, watch, parent_containers } = self;
        let fw2 = fw.clone();
        read_op_with(&fw, CuratorEventType::Exists, "exists", path, Some(watch.is_some()), move |client, path| {
            let (fw, watch) = (fw2.clone(), watch.clone());
            async move {
                if parent_containers {
                    crate::ops::create::make_parents(&fw, &client, &path, true).await?;
                }
                let from_zk = |e| CuratorError::from_zk(&path, e);
                if !watch.is_some() {
                    return client.check_stat(&path).await.map_err(from_zk);
                }
                let (stat, watcher) = client.check_and_watch_stat(&path).await.map_err(from_zk)?;
                watch.deliver(&fw, &path, WatcherType::Data, watcher);
                Ok(stat)
            }
        })
    }

    /// The stat of `path` (or `None`) and a watch for its creation, deletion or change.
    pub fn for_path_and_watch(self, path: &str) -> Pending<(Option<zk::Stat>, Watch)> {
        read_op(&self.fw, CuratorEventType::Exists, "exists", path, Some(true), |client, path| async move {
            let (stat, watcher) = client.check_and_watch_stat(&path).await?;
            Ok((stat, Watch::new(watcher, &path, WatcherType::Data)))
        })
    }
}

impl GetDataBuilder {
    watch_options!();

    /// Decompress the data with the framework's
    /// [`CompressionProvider`](crate::CompressionProvider) (it was written `compressed()`);
    /// data that is not compressed is [`CuratorError::BadData`]. With gzip and without
    /// curator-core's `compression` feature the read fails with
    /// [`CuratorError::InvalidArgument`].
    pub fn decompressed(mut self) -> Self {
        self.decompressed = Some(true);
        self
    }
    /// The data as stored, also on a framework with
    /// [`enable_compression`](crate::CuratorFrameworkBuilder::enable_compression) (Curator's
    /// `undecompressed()`).
    pub fn undecompressed(mut self) -> Self {
        self.decompressed = Some(false);
        self
    }

    /// The data of `path`.
    pub fn for_path(self, path: &str) -> Pending<Vec<u8>> {
        let fw = self.fw.clone();
        let inner = self.for_path_with_stat(path);
        Pending::new(&fw, CuratorEventType::GetData, path, async move { inner.await.map(|(data, _)| data) })
    }

    /// The data and stat of `path`.
    pub fn for_path_with_stat(self, path: &str) -> Pending<(Vec<u8>, zk::Stat)> {
        let Self { fw, watch, decompressed } = self;
        let decompressed = decompressed.unwrap_or(fw.compression_enabled());
        let fw2 = fw.clone();
        let pending =
            read_op(&fw, CuratorEventType::GetData, "get_data", path, Some(watch.is_some()), move |client, path| {
                let (fw, watch) = (fw2.clone(), watch.clone());
                async move {
                    if !watch.is_some() {
                        return client.get_data(&path).await;
                    }
                    let (data, stat, watcher) = client.get_and_watch_data(&path).await?;
                    watch.deliver(&fw, &path, WatcherType::Data, watcher);
                    Ok((data, stat))
                }
            });
        if !decompressed {
            return pending;
        }
        let (owned, fw2) = (path.to_string(), fw.clone());
        Pending::new(&fw, CuratorEventType::GetData, path, async move {
            let (data, stat) = pending.await?;
            Ok((fw2.decode_data_if(Some(true), &owned, data)?, stat))
        })
    }

    /// The data and stat of `path`, and a watch for its deletion or change.
    ///
    /// Data that does not decompress is [`CuratorError::BadData`], as from
    /// [`for_path`](Self::for_path); the watch set by the read is then removed.
    pub fn for_path_and_watch(self, path: &str) -> Pending<(Vec<u8>, zk::Stat, Watch)> {
        let decompressed = self.decompressed.unwrap_or(self.fw.compression_enabled());
        let pending = read_op(
            &self.fw,
            CuratorEventType::GetData,
            "get_data",
            path,
            Some(true),
            move |client, path| async move {
                let (data, stat, watcher) = client.get_and_watch_data(&path).await?;
                Ok((data, stat, Watch::new(watcher, &path, WatcherType::Data)))
            },
        );
        if !decompressed {
            return pending;
        }
        // After the retry loop: data that does not decompress is the caller's answer, not an
        // error to retry.
        let (owned, fw) = (path.to_string(), self.fw.clone());
        Pending::new(&self.fw, CuratorEventType::GetData, path, async move {
            let (data, stat, watch) = pending.await?;
            Ok((fw.decode_data_if(Some(true), &owned, data)?, stat, watch))
        })
    }
}

impl GetChildrenBuilder {
    watch_options!();

    /// The names of the children of `path` (not sorted).
    pub fn for_path(self, path: &str) -> Pending<Vec<String>> {
        let fw = self.fw.clone();
        let inner = self.for_path_with_stat(path);
        Pending::new(&fw, CuratorEventType::Children, path, async move { inner.await.map(|(c, _)| c) })
    }

    /// The children of `path` and its stat.
    pub fn for_path_with_stat(self, path: &str) -> Pending<(Vec<String>, zk::Stat)> {
        let Self { fw, watch } = self;
        let fw2 = fw.clone();
        read_op(&fw, CuratorEventType::Children, "get_children", path, Some(watch.is_some()), move |client, path| {
            let (fw, watch) = (fw2.clone(), watch.clone());
            async move {
                if !watch.is_some() {
                    return client.get_children(&path).await;
                }
                let (children, stat, watcher) = client.get_and_watch_children(&path).await?;
                watch.deliver(&fw, &path, WatcherType::Children, watcher);
                Ok((children, stat))
            }
        })
    }

    /// The children of `path`, its stat, and a watch for a change of children or deletion.
    pub fn for_path_and_watch(self, path: &str) -> Pending<(Vec<String>, zk::Stat, Watch)> {
        read_op(&self.fw, CuratorEventType::Children, "get_children", path, Some(true), |client, path| async move {
            let (children, stat, watcher) = client.get_and_watch_children(&path).await?;
            Ok((children, stat, Watch::new(watcher, &path, WatcherType::Children)))
        })
    }
}

impl GetAclBuilder {
    /// The ACLs and stat of `path`.
    pub fn for_path(self, path: &str) -> Pending<(Vec<zk::Acl>, zk::Stat)> {
        read_op(&self.fw, CuratorEventType::GetAcl, "get_acl", path, None, |client, path| async move {
            client.get_acl(&path).await
        })
    }
}

impl GetConfigBuilder {
    watch_options!();

    /// The configuration's bytes (`server.N=host:port:port:role;client` lines and `version=`)
    /// and the stat of `/zookeeper/config`. A standalone server without dynamic
    /// reconfiguration may return it empty.
    pub fn for_ensemble(self) -> Pending<(Vec<u8>, zk::Stat)> {
        let Self { fw, watch } = self;
        let fw2 = fw.clone();
        read_op(&fw, CuratorEventType::GetConfig, "getConfig", CONFIG_NODE, None, move |client, path| {
            let (fw, watch) = (fw2.clone(), watch.clone());
            async move {
                if !watch.is_some() {
                    return client.get_config().await;
                }
                let (data, stat, watcher) = client.get_and_watch_config().await?;
                watch.deliver(&fw, &path, WatcherType::Data, watcher);
                Ok((data, stat))
            }
        })
    }
}

/// Where ZooKeeper keeps the ensemble's dynamic configuration.
const CONFIG_NODE: &str = "/zookeeper/config";
