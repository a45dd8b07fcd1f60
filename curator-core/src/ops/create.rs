//! `create()`: parents, protection, modes (container, TTL), ACLs, what an existing node means
//! (`or_set_data`, `if_missing`), unique data, compression; lost replies are the core's
//! (module `outcome`).
//!
//! Protection (`with_protection`) prefixes the node's name with `_c_<uuid>-`. When a create's
//! outcome is unknown (the connection died under it), the next attempt first looks for a child
//! with that prefix: found on our session, it is ours and is returned; found from an older
//! session, it is deleted and the create runs again. If the create finally fails, or its future
//! is dropped while the outcome is unknown, the node is looked for and deleted in the background.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::{CuratorError, Result};
use crate::framework::{CuratorFramework, Session};
use crate::ops::outcome::{decide_unique_data, find_protected, no_evidence, InFlight, Verdict};
use crate::ops::{check_acl, check_request_len, check_ttl, check_version, op_len, CreateMode, Pending};
use crate::path;
use crate::schema_set::SchemaOp;

/// What a create does when the node exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnExists {
    /// Fails with `NodeExists`.
    Fail,
    /// Sets its data, if it has this version (-1: any): `or_set_data`.
    SetData(i32),
    /// Succeeds with it: `if_missing`.
    Keep,
}

/// How missing parents are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parents {
    Fail,
    Persistent,
    Containers,
}

/// Builder of a create. See [`CuratorFramework::create`].
#[derive(Debug, Clone)]
pub struct CreateBuilder {
    fw: CuratorFramework,
    parents: Parents,
    protected: bool,
    mode: CreateMode,
    ttl: Option<Duration>,
    acl: Option<Vec<zk::Acl>>,
    /// Whether missing parents get `acl` too (else the framework's ACL provider's).
    acl_to_parents: bool,
    exists: OnExists,
    /// `unique_data()`: the data holds an id no other write uses (module `outcome`).
    unique: bool,
    /// `None`: the framework's default (`enable_compression`).
    compressed: Option<bool>,
}

impl CuratorFramework {
    /// Starts a create.
    ///
    /// ```no_run
    /// # async fn f(client: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use curator_core::CreateMode;
    /// let path = client
    ///     .create()
    ///     .creating_parents_if_needed()
    ///     .with_protection()
    ///     .with_mode(CreateMode::EphemeralSequential)
    ///     .for_path("/a/b", b"data".to_vec())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn create(&self) -> CreateBuilder {
        CreateBuilder {
            fw: self.clone(),
            parents: Parents::Fail,
            protected: false,
            mode: CreateMode::Persistent,
            ttl: None,
            acl: None,
            acl_to_parents: false,
            exists: OnExists::Fail,
            unique: false,
            compressed: None,
        }
    }
}

impl CreateBuilder {
    /// Create missing parents as persistent nodes.
    pub fn creating_parents_if_needed(mut self) -> Self {
        self.parents = Parents::Persistent;
        self
    }
    /// Create missing parents as containers (persistent nodes if the framework disables
    /// container parents).
    pub fn creating_parent_containers_if_needed(mut self) -> Self {
        self.parents = Parents::Containers;
        self
    }
    /// Protect the name with `_c_<uuid>-` so that a create whose reply was lost finds its node
    /// instead of making a second one.
    pub fn with_protection(mut self) -> Self {
        self.protected = true;
        self
    }
    /// The node's mode.
    pub fn with_mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }
    /// The TTL of a `PersistentWithTtl` or `PersistentSequentialWithTtl` node.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// ACLs of the node (parents get the framework's ACL provider's): Curator's
    /// `withACL(acl)`, which is [`with_acl_and_parents(acl, false)`](Self::with_acl_and_parents).
    pub fn with_acl(self, acl: Vec<zk::Acl>) -> Self {
        self.with_acl_and_parents(acl, false)
    }
    /// ACLs of the node, and, when `apply_to_parents` is true, of the parents this create makes
    /// (with [`creating_parents_if_needed`](Self::creating_parents_if_needed) or
    /// [`creating_parent_containers_if_needed`](Self::creating_parent_containers_if_needed));
    /// when false, the parents get the framework's ACL provider's, as with
    /// [`with_acl`](Self::with_acl). Curator's `withACL(acl, applyToParents)`. Parents that exist
    /// keep theirs, and so does the namespace's node. An empty list is refused with
    /// [`CuratorError::InvalidAcl`] before anything is sent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::zk::{Acl, AuthId, Permission};
    ///
    /// let acl = vec![Acl::new(Permission::READ | Permission::CREATE, AuthId::anyone())];
    /// fw.create().creating_parents_if_needed().with_acl_and_parents(acl.clone(), true).for_path("/app/jobs", Vec::new()).await?;
    /// assert_eq!(fw.get_acl().for_path("/app").await?.0, acl);
    /// assert_eq!(fw.get_acl().for_path("/app/jobs").await?.0, acl);
    /// # Ok(()) }
    /// ```
    pub fn with_acl_and_parents(mut self, acl: Vec<zk::Acl>, apply_to_parents: bool) -> Self {
        self.acl = Some(acl);
        self.acl_to_parents = apply_to_parents;
        self
    }
    /// If the node exists, set its data instead of failing (whatever its version).
    pub fn or_set_data(self) -> Self {
        self.or_set_data_with_version(-1)
    }
    /// If the node exists, set its data only if it has `version` (-1: any), as Curator's
    /// `orSetData(version)`: a node at another version fails the create with
    /// [`CuratorError::BadVersion`]. A version below -1 is refused with
    /// [`CuratorError::InvalidArgument`] before anything is sent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::CuratorError;
    ///
    /// fw.create().for_path("/config", b"v0".to_vec()).await?;
    /// // The node exists at version 0: its data is set.
    /// let (_, stat) = fw.create().or_set_data_with_version(0).for_path_with_stat("/config", b"v1".to_vec()).await?;
    /// assert_eq!(stat.version, 1);
    /// // Someone wrote since version 0 was read: refused.
    /// let stale = fw.create().or_set_data_with_version(0).for_path("/config", b"v2".to_vec()).await;
    /// assert!(matches!(stale, Err(CuratorError::BadVersion { .. })));
    /// # Ok(()) }
    /// ```
    pub fn or_set_data_with_version(mut self, version: i32) -> Self {
        self.exists = OnExists::SetData(version);
        self
    }
    /// Makes the node unless it exists: an existing node, whoever made it, is success (its path
    /// and stat; replaces [`or_set_data`](Self::or_set_data)). Such a create never makes a
    /// second node, so after a lost reply it is simply sent again (docs/architecture.md section
    /// 4.4): what it promises is that the node exists, not that this call made it. For nodes
    /// that any participant may make (a recipe's parent, a shared seed). With a sequential mode
    /// or [`with_protection`](Self::with_protection) (whose names never exist already) it is
    /// [`InvalidArgument`](CuratorError::InvalidArgument), before anything is sent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// fw.create().if_missing().for_path("/shared", b"seed".to_vec()).await?;
    /// fw.create().if_missing().for_path("/shared", b"other".to_vec()).await?; // exists: fine
    /// assert_eq!(fw.get_data().for_path("/shared").await?, b"seed");
    /// # Ok(()) }
    /// ```
    pub fn if_missing(mut self) -> Self {
        self.exists = OnExists::Keep;
        self
    }
    /// Declares that the data is unique to this create: it holds an id that no other write, by
    /// any client, ever puts in this node (a fresh UUID, as a timed lease's record does). Then
    /// a create whose reply was lost is decided by reading the node: holding exactly this data,
    /// it was applied (and so was an [`or_set_data`](Self::or_set_data) write); otherwise the
    /// outcome is [`OutcomeUnknown`](CuratorError::OutcomeUnknown). Without it (or
    /// [`with_protection`](Self::with_protection)), a lost reply is `OutcomeUnknown` at once
    /// (docs/architecture.md section 4.4). Data that is not unique makes this unsound.
    pub fn unique_data(mut self) -> Self {
        self.unique = true;
        self
    }
    /// Compress the data with the framework's
    /// [`CompressionProvider`](crate::CompressionProvider) (gzip by default) before storing it.
    /// With gzip and without curator-core's `compression` feature the operation fails with
    /// [`CuratorError::InvalidArgument`].
    pub fn compressed(mut self) -> Self {
        self.compressed = Some(true);
        self
    }
    /// Store the data as it is, also on a framework with
    /// [`enable_compression`](crate::CuratorFrameworkBuilder::enable_compression) (Curator's
    /// `uncompressed()`).
    pub fn uncompressed(mut self) -> Self {
        self.compressed = Some(false);
        self
    }

    /// Creates `path` with `data`; resolves to the path created (sequence number and protection
    /// prefix included, relative to the namespace).
    ///
    /// Applied once, or reported as unknown: a create whose reply was lost (the connection died
    /// under it) is decided by its protected name ([`with_protection`](Self::with_protection)),
    /// by its [unique data](Self::unique_data), or, for [`if_missing`](Self::if_missing), simply
    /// sent again; any other create (a fixed path, a sequential one) ends with
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown) and is never sent twice: a second
    /// sequential node, or a `NodeExists` for a create that was applied, cannot happen
    /// (docs/architecture.md section 4.4).
    pub fn for_path(self, path: &str, data: impl Into<Vec<u8>>) -> Pending<String> {
        let fw = self.fw.clone();
        let with_stat = self.for_path_with_stat(path, data);
        Pending::new(&fw, CuratorEventType::Create, path, async move { with_stat.await.map(|(p, _)| p) })
    }

    /// As [`for_path`](Self::for_path), with the framework's default data.
    pub fn for_path_with_default_data(self, path: &str) -> Pending<String> {
        let data = self.fw.default_data().to_vec();
        self.for_path(path, data)
    }

    /// As [`for_path`](Self::for_path), also returning the new node's stat.
    pub fn for_path_with_stat(self, path: &str, data: impl Into<Vec<u8>>) -> Pending<(String, zk::Stat)> {
        let fw = self.fw.clone();
        match self.into_op(path, data.into()) {
            Ok(op) => Pending::new(&fw, CuratorEventType::Create, path, async move { op.run().await }),
            Err(err) => Pending::failed(&fw, CuratorEventType::Create, path, err),
        }
    }

    fn into_op(self, path: &str, data: Vec<u8>) -> Result<CreateOp> {
        if self.mode.is_sequential() {
            path::validate_sequential(path)?;
        } else {
            path::validate(path)?;
        }
        // A protected create of "/" is fine: as in Curator, "/" splits into the parent "/" and an
        // empty name, so the node is `/_c_<uuid>-` (docs/architecture.md section 7). So is a
        // sequential one: ZooKeeper makes `/<sequence>` (`create_in_root`).
        if path == "/" && !self.protected && !self.mode.is_sequential() {
            return Err(CuratorError::InvalidPath { path: path.into(), reason: "cannot create the root" });
        }
        check_ttl(path, self.mode, self.ttl)?;
        if let OnExists::SetData(version) = self.exists {
            check_version(path, Some(version))?;
        }
        if self.exists == OnExists::Keep && (self.protected || self.mode.is_sequential()) {
            return Err(CuratorError::InvalidArgument {
                path: path.into(),
                reason: "if_missing() names a node that may exist: not a sequential or protected create".into(),
            });
        }
        let data = self.fw.encode_data_if(self.compressed, path, data)?;
        self.fw.check_data(path, &data)?;
        self.fw.check_schema(path, SchemaOp::Create(self.mode, &data))?;
        let (parent, node) = path::parent_and_node(path);
        let protection = self.protected.then(uuid::Uuid::new_v4);
        let full_path = match &protection {
            Some(id) => path::make_path(parent, &path::protected_name(id, node)),
            None => path.to_string(),
        };
        // As Curator, the provider is asked with the path as sent: namespace and protection
        // prefix included.
        let parents_acl = self.acl.as_ref().filter(|_| self.acl_to_parents).cloned();
        let acl = self.acl.unwrap_or_else(|| self.fw.acl_for_path(&full_path));
        check_acl(path, &acl)?;
        check_request_len(&self.fw, path, op_len(&self.fw, &full_path, data.len(), &acl))?;
        let parents = match self.parents {
            Parents::Containers if !self.fw.config().use_container_parents => Parents::Persistent,
            p => p,
        };
        Ok(CreateOp {
            fw: self.fw,
            path: path.to_string(),
            parent: parent.to_string(),
            full_path,
            protection,
            mode: self.mode,
            ttl: self.ttl,
            acl,
            parents_acl,
            data,
            parents,
            exists: self.exists,
            unique: self.unique,
            attempted_on: Arc::new(AtomicU64::new(0)),
        })
    }
}

struct CreateOp {
    fw: CuratorFramework,
    path: String,
    parent: String,
    full_path: String,
    protection: Option<uuid::Uuid>,
    mode: CreateMode,
    ttl: Option<Duration>,
    acl: Vec<zk::Acl>,
    /// The ACL of the parents this create makes (`with_acl_and_parents(acl, true)`), else the
    /// provider's.
    parents_acl: Option<Vec<zk::Acl>>,
    data: Vec<u8>,
    parents: Parents,
    exists: OnExists,
    unique: bool,
    /// The session generation of the latest attempt (0: none yet). An ephemeral orphan can only
    /// belong to that session: earlier ones have ended, and their nodes with them.
    attempted_on: Arc<AtomicU64>,
}

impl CreateOp {
    async fn run(self) -> Result<(String, zk::Stat)> {
        let mut orphan = self.protection.map(|id| OrphanGuard {
            fw: self.fw.clone(),
            parent: self.parent.clone(),
            prefix: protected_prefix(&id),
            ephemeral: self.mode.is_ephemeral(),
            attempted_on: self.attempted_on.clone(),
            armed: true,
        });
        let this = &self;
        let result = self
            .fw
            .write_with_retry(
                "create",
                &self.path,
                |session, flight| async move { this.attempt(session, &flight).await },
                |session, _| async move { this.decide(&session).await },
            )
            .await;
        if let Some(guard) = orphan.as_mut() {
            // Only an unknown outcome can leave a node behind.
            guard.armed = matches!(&result, Err(e) if e.outcome_unknown());
        }
        result
    }

    /// Whether an attempt whose reply was lost was applied (module `outcome`): by the protected
    /// name, or by unique data; otherwise nothing tells.
    async fn decide(&self, session: &Session) -> Result<Verdict<(String, zk::Stat)>> {
        // Sending it again cannot make a second node, and an existing node is success.
        if self.exists == OnExists::Keep {
            return Ok(Verdict::NotApplied);
        }
        if let Some(id) = &self.protection {
            return find_protected(session, &self.parent, &protected_prefix(id), self.mode.is_ephemeral()).await;
        }
        if self.unique && !self.mode.is_sequential() {
            return Ok(match decide_unique_data(session, &self.full_path, &self.data, None).await? {
                Verdict::Applied(stat) => Verdict::Applied((self.full_path.clone(), stat)),
                Verdict::NotApplied => Verdict::NotApplied,
                Verdict::Unknown(reason) => Verdict::Unknown(reason),
            });
        }
        Ok(no_evidence("a create that is neither protected nor of unique data"))
    }

    async fn attempt(&self, session: Session, flight: &InFlight) -> Result<(String, zk::Stat)> {
        self.attempted_on.store(session.generation(), Ordering::Release);
        let client = session.client();
        let mut options = self.mode.to_zk().with_acls(zk::Acls::new(&self.acl));
        if let Some(ttl) = self.ttl {
            options = options.with_ttl(ttl);
        }
        if self.full_path == "/" {
            return self.create_in_root(client, &options, flight).await;
        }
        let mut made_parents = false;
        loop {
            match flight.seen(client.create(&self.full_path, &self.data, &options).await) {
                Ok((stat, sequence)) => {
                    let created = if self.mode.is_sequential() {
                        format!("{}{}", self.full_path, path::format_sequence(sequence.into_i64()))
                    } else {
                        self.full_path.clone()
                    };
                    tracing::debug!(path = %created, "created");
                    return Ok((created, stat));
                }
                Err(zk::Error::NoNode) if self.parents != Parents::Fail && !made_parents => {
                    let containers = self.parents == Parents::Containers;
                    make_parents_with(&self.fw, client, &self.full_path, containers, self.parents_acl.as_deref())
                        .await?;
                    made_parents = true;
                }
                Err(zk::Error::NodeExists) if self.exists == OnExists::Keep => {
                    tracing::debug!(path = %self.full_path, "node exists: kept");
                    match client.check_stat(&self.full_path).await {
                        Ok(Some(stat)) => return Ok((self.full_path.clone(), stat)),
                        // Deleted since: make it.
                        Ok(None) => continue,
                        Err(err) => return Err(CuratorError::from_zk(&self.full_path, err)),
                    }
                }
                Err(zk::Error::NodeExists) if matches!(self.exists, OnExists::SetData(_)) => {
                    let version = match self.exists {
                        OnExists::SetData(v) if v != -1 => Some(v),
                        _ => None,
                    };
                    tracing::debug!(path = %self.full_path, ?version, "node exists: setData");
                    let stat = flight
                        .seen(client.set_data(&self.full_path, &self.data, version).await)
                        .map_err(|e| CuratorError::from_zk(&self.full_path, e))?;
                    return Ok((self.full_path.clone(), stat));
                }
                Err(err) => return Err(CuratorError::from_zk(&self.full_path, err)),
            }
        }
    }

    /// An unprotected sequential create of `/`: a sequential child of the root, `/<sequence>`,
    /// as ZooKeeper makes it; in a namespace, of the namespace's node, which plays the root's
    /// part. zookeeper-client refuses to create its root path, and a client rooted at the
    /// namespace would send the namespace's own path (making `/ns<sequence>`, outside the
    /// namespace): so the request names the parent with a trailing `/` (`/ns/`, or `/` alone),
    /// on the session's client rooted at the server's root, in a transaction of one, which
    /// zookeeper-client sends as it is.
    async fn create_in_root(
        &self,
        client: &zk::Client,
        options: &zk::CreateOptions<'_>,
        flight: &InFlight,
    ) -> Result<(String, zk::Stat)> {
        let parent = match client.path() {
            "/" => "/".to_string(),
            namespace => format!("{namespace}/"),
        };
        let root = client
            .clone()
            .chroot("/")
            .map_err(|_| CuratorError::InvalidPath { path: "/".into(), reason: "no client at the server's root" })?;
        let mut writer = root.new_multi_writer();
        writer.add_create(&parent, &self.data, options).map_err(|e| CuratorError::from_zk(&parent, e))?;
        let created = match flight.seen_multi(writer.commit().await) {
            Ok(mut results) if results.len() == 1 => results.remove(0),
            Ok(results) => {
                let detail = format!("a transaction of one create answered with {} results", results.len());
                return Err(CuratorError::Zk { path: parent, source: zk::Error::UnexpectedError(detail) });
            }
            Err(err) => return Err(CuratorError::from_zk(&parent, err.into())),
        };
        let zk::MultiWriteResult::Create { path: made, mut stat } = created else {
            let detail = "a create in a transaction answered as another operation".to_string();
            return Err(CuratorError::Zk { path: parent, source: zk::Error::UnexpectedError(detail) });
        };
        // Servers with ZOOKEEPER-4026 answer a create in a transaction without its stat.
        if stat.is_invalid() {
            if let Some(read) = root.check_stat(&made).await.map_err(|e| CuratorError::from_zk(&made, e))? {
                stat = read;
            }
        }
        let created = format!("/{}", made.strip_prefix(parent.as_str()).unwrap_or(&made));
        tracing::debug!(path = %made, "created (sequential child of the root)");
        Ok((created, stat))
    }
}

/// `_c_<uuid>-`
fn protected_prefix(id: &uuid::Uuid) -> String {
    path::protected_name(id, "")
}

/// Creates every missing ancestor of `full_path` on `client`'s session (persistent nodes, or
/// containers when `containers` is set), with the ACL provider's ACLs for their full paths
/// (namespace included). Existing ones are fine, and only the deepest existing one needs to
/// let us create in it. Recipes that create their nodes on a raw client use it for Curator's
/// `creatingParentContainersIfNeeded`.
pub async fn make_parents(fw: &CuratorFramework, client: &zk::Client, full_path: &str, containers: bool) -> Result<()> {
    make_parents_with(fw, client, full_path, containers, None).await
}

/// As [`make_parents`], with `acl` for every parent made when given (`with_acl_and_parents`).
async fn make_parents_with(
    fw: &CuratorFramework,
    client: &zk::Client,
    full_path: &str,
    containers: bool,
    acl: Option<&[zk::Acl]>,
) -> Result<()> {
    let mode = if containers { zk::CreateMode::Container } else { zk::CreateMode::Persistent };
    let acl_for = |p: &str| acl.map_or_else(|| fw.acl_for_path(p), <[zk::Acl]>::to_vec);
    crate::parents::create_missing(client, &path::ancestors(full_path), mode, acl_for).await
}

/// Deletes, in the background, the node of a protected create whose outcome stayed unknown
/// (it failed for good, or its future was dropped).
struct OrphanGuard {
    fw: CuratorFramework,
    parent: String,
    prefix: String,
    ephemeral: bool,
    attempted_on: Arc<AtomicU64>,
    armed: bool,
}

impl Drop for OrphanGuard {
    fn drop(&mut self) {
        let generation = self.attempted_on.load(Ordering::Acquire);
        // No attempt reached a session: nothing was sent, nothing can be left.
        if !self.armed || generation == 0 {
            return;
        }
        let owner = self.ephemeral.then_some(generation);
        let (fw, parent, prefix) = (self.fw.clone(), self.parent.clone(), self.prefix.clone());
        self.fw.spawn_background(async move {
            if let Err(err) = fw.delete_protected(&parent, &prefix, owner).await {
                fw.report_unhandled(&format!("could not delete the orphan of a protected create under {parent}"), &err);
            }
        });
    }
}

impl CuratorFramework {
    /// Deletes every child of `parent` whose name starts with `prefix` (a protected prefix): the
    /// cleanup of a protected create whose outcome is unknown, which recipes also use when an
    /// acquire is abandoned.
    ///
    /// It does not depend on the user's retry policy: it retries every retryable error
    /// ([`cleanup_retry_loop`](Self::cleanup_retry_loop)) until the nodes are gone, the
    /// framework closes, or — for an ephemeral node, `owner` being the generation of the session
    /// that may have created it — that session has ended (its node went with it).
    pub async fn delete_protected(&self, parent: &str, prefix: &str, owner: Option<u64>) -> Result<()> {
        let mut retry = self.cleanup_retry_loop();
        loop {
            let attempt = async {
                let session = self.session_for(parent).await?;
                if owner.is_some_and(|g| g != session.generation()) {
                    tracing::debug!(parent, prefix, "the session of the orphan has ended: nothing to delete");
                    return Ok(());
                }
                let client = session.client();
                tracing::debug!(path = parent, prefix, "getChildren (orphan cleanup)");
                let children = match client.list_children(parent).await {
                    Ok(c) => c,
                    Err(zk::Error::NoNode) => return Ok(()),
                    Err(err) => return Err(CuratorError::from_zk(parent, err)),
                };
                for child in children.iter().filter(|c| c.starts_with(prefix)) {
                    let node = path::make_path(parent, child);
                    tracing::debug!(path = %node, "delete (orphan)");
                    match client.delete(&node, None).await {
                        Ok(()) | Err(zk::Error::NoNode) => tracing::info!(path = %node, "deleted orphan"),
                        Err(err) => return Err(CuratorError::from_zk(&node, err)),
                    }
                }
                Ok(())
            };
            match attempt.await {
                Ok(()) => return Ok(()),
                Err(err) => retry.on_error(err).await?,
            }
        }
    }
}
