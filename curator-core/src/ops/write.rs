//! Writes other than create and delete: `set_data()`, `set_acl()`, `sync()`.

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::CuratorError;
use crate::framework::CuratorFramework;
use crate::ops::{check_version, compress, Pending};
use crate::path;

/// Builder of a data write. See [`CuratorFramework::set_data`].
#[derive(Debug, Clone)]
pub struct SetDataBuilder {
    fw: CuratorFramework,
    version: Option<i32>,
    idempotent: bool,
    compressed: bool,
}

/// Builder of an ACL write. See [`CuratorFramework::set_acl`].
#[derive(Debug, Clone)]
pub struct SetAclBuilder {
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
    pub fn set_data(&self) -> SetDataBuilder {
        SetDataBuilder { fw: self.clone(), version: None, idempotent: false, compressed: false }
    }
    /// Starts an ACL write.
    pub fn set_acl(&self) -> SetAclBuilder {
        SetAclBuilder { fw: self.clone(), version: None, acl: zk::Acls::anyone_all().to_vec() }
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
    /// After an unknown outcome, a `BadVersion` whose node holds our data at the next version
    /// counts as success.
    pub fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }
    /// Gzip the data before storing it.
    pub fn compressed(mut self) -> Self {
        self.compressed = true;
        self
    }

    /// Writes `data` to `path`; resolves to the new stat.
    pub fn for_path(self, path: &str, data: impl Into<Vec<u8>>) -> Pending<zk::Stat> {
        let data = data.into();
        let data = if self.compressed { compress(&data) } else { data };
        let checked = path::validate(path)
            .and_then(|_| check_version(path, self.version))
            .and_then(|_| self.fw.check_data(path, &data));
        if let Err(err) = checked {
            return Pending::failed(&self.fw, CuratorEventType::SetData, path, err);
        }
        let (fw, owned, version, idempotent) = (self.fw.clone(), path.to_string(), self.version, self.idempotent);
        Pending::new(&self.fw, CuratorEventType::SetData, path, async move {
            fw.call_with_retry("set_data", &owned, |session, attempt| {
                let (path, data) = (&owned, &data);
                async move {
                    let client = session.client();
                    match client.set_data(path, data, version).await {
                        Ok(stat) => Ok(stat),
                        Err(zk::Error::BadVersion) if idempotent && attempt > 0 => {
                            let (current, stat) =
                                client.get_data(path).await.map_err(|e| CuratorError::from_zk(path, e))?;
                            if version.is_some_and(|v| stat.version == v + 1) && current == *data {
                                Ok(stat)
                            } else {
                                Err(CuratorError::BadVersion { path: path.clone() })
                            }
                        }
                        Err(err) => Err(CuratorError::from_zk(path, err)),
                    }
                }
            })
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
    /// The ACLs to set.
    pub fn with_acl(mut self, acl: Vec<zk::Acl>) -> Self {
        self.acl = acl;
        self
    }

    /// Sets the ACLs of `path`; resolves to the new stat.
    pub fn for_path(self, path: &str) -> Pending<zk::Stat> {
        if let Err(err) = path::validate(path).and_then(|_| check_version(path, self.version)) {
            return Pending::failed(&self.fw, CuratorEventType::SetAcl, path, err);
        }
        let (fw, owned, version, acl) = (self.fw.clone(), path.to_string(), self.version, self.acl);
        Pending::new(&self.fw, CuratorEventType::SetAcl, path, async move {
            fw.call_with_retry("set_acl", &owned, |session, _| {
                let (path, acl) = (&owned, &acl);
                async move { session.client().set_acl(path, acl, version).await.map_err(|e| CuratorError::from_zk(path, e)) }
            })
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
