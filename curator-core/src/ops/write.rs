//! Writes other than create and delete: `set_data()`, `set_acl()`, `sync()`.

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::CuratorError;
use crate::framework::CuratorFramework;
use crate::ops::outcome::{decide_unique_data, no_evidence};
use crate::ops::{check_acl, check_request_len, check_version, op_len, Pending};
use crate::path;
use crate::schema_set::SchemaOp;

/// Builder of a data write. See [`CuratorFramework::set_data`].
#[derive(Debug, Clone)]
pub struct SetDataBuilder {
    fw: CuratorFramework,
    version: Option<i32>,
    /// `unique_data()`: the data holds an id no other write uses (module `outcome`).
    unique: bool,
    /// `None`: the framework's default (`enable_compression`).
    compressed: Option<bool>,
}

/// Builder of an ACL write, before its ACL is given. See [`CuratorFramework::set_acl`].
#[derive(Debug, Clone)]
pub struct SetAclBuilder {
    fw: CuratorFramework,
    version: Option<i32>,
}

/// Builder of an ACL write whose ACL is given: the only one with `for_path`.
#[derive(Debug, Clone)]
pub struct SetAclWithAcl {
    fw: CuratorFramework,
    version: Option<i32>,
    acl: Vec<zk::Acl>,
}

/// Builder of a sync. See [`CuratorFramework::sync`].
#[derive(Debug, Clone)]
pub struct SyncBuilder {
    fw: CuratorFramework,
}

impl CuratorFramework {
    /// Starts a data write.
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
    /// let (_, stat) = fw.get_data().for_path_with_stat("/limits").await?;
    /// // Compare and set: only if nobody wrote since our read.
    /// let stat = fw.set_data().with_version(stat.version).for_path("/limits", b"20".to_vec()).await?;
    /// assert_eq!(stat.version, 1);
    /// let stale = fw.set_data().with_version(0).for_path("/limits", b"30".to_vec()).await;
    /// assert!(matches!(stale, Err(CuratorError::BadVersion { .. })));
    /// # Ok(()) }
    /// ```
    pub fn set_data(&self) -> SetDataBuilder {
        SetDataBuilder { fw: self.clone(), version: None, unique: false, compressed: None }
    }
    /// Starts an ACL write. The ACL must be given ([`SetAclBuilder::with_acl`]) before the path,
    /// as in Curator: there is no default to open a node to the world by mistake.
    ///
    /// ```no_run
    /// # async fn f(client: curator_core::CuratorFramework) -> curator_core::Result<()> {
    /// use curator_core::zk::Acls;
    /// client.set_acl().with_acl(Acls::anyone_read().to_vec()).for_path("/config").await?;
    /// # Ok(()) }
    /// ```
    pub fn set_acl(&self) -> SetAclBuilder {
        SetAclBuilder { fw: self.clone(), version: None }
    }
    /// Starts a sync: after it, reads on this session see every write the leader had
    /// committed when the sync was processed.
    pub fn sync(&self) -> SyncBuilder {
        SyncBuilder { fw: self.clone() }
    }
}

impl SetDataBuilder {
    /// Write only if the node has this version.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }
    /// Declares that the data is unique to this write: it holds an id that no other write,
    /// by any client, ever puts in this node (a fresh UUID, as a timed lease's record does). Then
    /// a write whose reply was lost is decided by reading the node: holding exactly this data, it
    /// was applied; at the version the write named, it was not (and is sent again); anything
    /// else is [`OutcomeUnknown`](CuratorError::OutcomeUnknown). Without it, a lost reply is
    /// `OutcomeUnknown` at once: equal bytes written by another client would prove nothing
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

    /// Writes `data` to `path`; resolves to the new stat.
    ///
    /// Applied once, or reported as unknown: after a lost reply (the connection died under the
    /// request) the write is not sent again on a guess; it ends with
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown) unless its data is
    /// [unique](Self::unique_data) (docs/architecture.md section 4.4). For a write decided
    /// exactly whatever its data, carry a [`WriteTag`](crate::WriteTag) in a
    /// [`transaction`](CuratorFramework::transaction).
    pub fn for_path(self, path: &str, data: impl Into<Vec<u8>>) -> Pending<zk::Stat> {
        let data = data.into();
        let data = match self.fw.encode_data_if(self.compressed, path, data) {
            Ok(data) => data,
            Err(err) => return Pending::failed(&self.fw, CuratorEventType::SetData, path, err),
        };
        let checked = path::validate(path)
            .and_then(|_| check_version(path, self.version))
            .and_then(|_| self.fw.check_data(path, &data))
            .and_then(|_| self.fw.check_schema(path, SchemaOp::SetData(&data)))
            .and_then(|_| check_request_len(&self.fw, path, op_len(&self.fw, path, data.len(), &[])));
        if let Err(err) = checked {
            return Pending::failed(&self.fw, CuratorEventType::SetData, path, err);
        }
        let (fw, owned, version, unique) = (self.fw.clone(), path.to_string(), self.version, self.unique);
        Pending::new(&self.fw, CuratorEventType::SetData, path, async move {
            let (path, data) = (&owned, &data);
            fw.write_with_retry(
                "set_data",
                path,
                |session, flight| async move {
                    let sent = session.client().set_data(path, data, version).await;
                    flight.seen(sent).map_err(|e| CuratorError::from_zk(path, e))
                },
                |session, _| async move {
                    if !unique {
                        return Ok(no_evidence("a data write without unique data"));
                    }
                    decide_unique_data(&session, path, data, version.map(|v| (v, None))).await
                },
            )
            .await
        })
    }
}

impl SetAclBuilder {
    /// Write only if the node's ACL has this version.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }
    /// The ACL to set (not empty).
    pub fn with_acl(self, acl: Vec<zk::Acl>) -> SetAclWithAcl {
        SetAclWithAcl { fw: self.fw, version: self.version, acl }
    }
}

impl SetAclWithAcl {
    /// Write only if the node's ACL has this version.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// Sets the ACL of `path`; resolves to the new stat. An empty ACL is refused with
    /// [`CuratorError::InvalidAcl`] before anything is sent. A write whose reply was lost is
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown), never sent twice.
    pub fn for_path(self, path: &str) -> Pending<zk::Stat> {
        let checked = path::validate(path)
            .and_then(|_| check_version(path, self.version))
            .and_then(|_| check_acl(path, &self.acl))
            .and_then(|_| check_request_len(&self.fw, path, op_len(&self.fw, path, 0, &self.acl)));
        if let Err(err) = checked {
            return Pending::failed(&self.fw, CuratorEventType::SetAcl, path, err);
        }
        let (fw, owned, version, acl) = (self.fw.clone(), path.to_string(), self.version, self.acl);
        Pending::new(&self.fw, CuratorEventType::SetAcl, path, async move {
            let (path, acl) = (&owned, &acl);
            fw.write_with_retry(
                "set_acl",
                path,
                |session, flight| async move {
                    let sent = session.client().set_acl(path, acl, version).await;
                    flight.seen(sent).map_err(|e| CuratorError::from_zk(path, e))
                },
                |_, _| async move { Ok(no_evidence("an ACL write")) },
            )
            .await
        })
    }
}

impl SyncBuilder {
    /// Syncs `path`.
    pub fn for_path(self, path: &str) -> Pending<()> {
        if let Err(err) = path::validate(path) {
            return Pending::failed(&self.fw, CuratorEventType::Sync, path, err);
        }
        let (fw, owned) = (self.fw.clone(), path.to_string());
        Pending::new(&self.fw, CuratorEventType::Sync, path, async move {
            fw.call_with_retry("sync", &owned, |session, _| {
                let path = &owned;
                async move { session.client().sync(path).await.map_err(|e| CuratorError::from_zk(path, e)) }
            })
            .await
        })
    }
}
