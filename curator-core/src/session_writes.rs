//! The writes a recipe sends on a [`Session`] itself rather than through the fluent builders
//! (to pipeline them, or to read zookeeper-client's own errors), checked against the
//! framework's [`SchemaSet`](crate::SchemaSet) before anything is sent, with the same check and
//! the same [`SchemaViolation`](CuratorError::SchemaViolation) as the builders
//! (docs/architecture.md section 18).
//!
//! Each method checks, then sends at once, as the raw client does: what it returns is the
//! request already on its way (requests made back to back are still pipelined in order), with
//! zookeeper-client's own error. A refused write is an `Err` before any future exists. The
//! library crates above curator-core send their creates, data writes and deletes only through
//! these methods: their `clippy.toml` forbids the raw client's.

use std::future::Future;

use zookeeper_client as zk;

use crate::error::{CuratorError, Result};
use crate::framework::Session;
use crate::ops::CreateMode;
use crate::schema_set::{check_against, SchemaOp};

/// The create mode of the schema check for zookeeper-client's `mode` (which has no TTL modes).
fn mode_of(mode: zk::CreateMode) -> CreateMode {
    match mode {
        zk::CreateMode::Persistent => CreateMode::Persistent,
        zk::CreateMode::PersistentSequential => CreateMode::PersistentSequential,
        zk::CreateMode::Ephemeral => CreateMode::Ephemeral,
        zk::CreateMode::EphemeralSequential => CreateMode::EphemeralSequential,
        zk::CreateMode::Container => CreateMode::Container,
    }
}

impl Session {
    /// Creates `path` with `data` in `mode` under `acl`, once the framework's schema set allows
    /// it (checked with the path as given: for a sequential node, before its number, as the
    /// builders check it). The raw client's `create`, checked.
    ///
    /// # Errors
    /// [`CuratorError::SchemaViolation`] if the schema of `path` refuses the create: nothing is
    /// sent.
    pub fn create<'a>(
        &'a self,
        path: &'a str,
        data: &[u8],
        mode: zk::CreateMode,
        acl: &[zk::Acl],
    ) -> Result<impl Future<Output = std::result::Result<(zk::Stat, zk::CreateSequence), zk::Error>> + Send + 'a> {
        self.check(path, SchemaOp::Create(mode_of(mode), data))?;
        Ok(self.client.create(path, data, &mode.with_acls(zk::Acls::new(acl))))
    }

    /// Writes `data` to `path` (at `version`, if given), once the schema set allows it. The raw
    /// client's `set_data`, checked.
    ///
    /// # Errors
    /// [`CuratorError::SchemaViolation`] if the schema of `path` refuses the data: nothing is
    /// sent.
    pub fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<impl Future<Output = std::result::Result<zk::Stat, zk::Error>> + Send> {
        self.check(path, SchemaOp::SetData(data))?;
        Ok(self.client.set_data(path, data, version))
    }

    /// Deletes `path` (at `version`, if given), once the schema set allows it. The raw client's
    /// `delete`, checked.
    ///
    /// # Errors
    /// [`CuratorError::SchemaViolation`] if the schema of `path` says it cannot be deleted:
    /// nothing is sent.
    pub fn delete(
        &self,
        path: &str,
        version: Option<i32>,
    ) -> Result<impl Future<Output = std::result::Result<(), zk::Error>> + Send> {
        self.check(path, SchemaOp::Delete)?;
        Ok(self.client.delete(path, version))
    }

    /// A multi of writes on this session whose every create, data write and delete is checked
    /// as it is added. The raw client's `new_multi_writer`, checked.
    pub fn multi(&self) -> SessionMulti<'_> {
        SessionMulti { session: self, writer: self.client.new_multi_writer() }
    }

    fn check(&self, path: &str, op: SchemaOp<'_>) -> Result<()> {
        check_against(self.schemas.as_deref(), path, op)
    }
}

/// A multi of writes on a [`Session`], each checked against the framework's schema set as it is
/// added (see [`Session::multi`]); committed with [`commit`](Self::commit).
pub struct SessionMulti<'a> {
    session: &'a Session,
    writer: zk::MultiWriter<'a>,
}

impl std::fmt::Debug for SessionMulti<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionMulti").finish_non_exhaustive()
    }
}

impl<'a> SessionMulti<'a> {
    /// Adds a version check of `path` (nothing for a schema to refuse).
    ///
    /// # Errors
    /// zookeeper-client's refusal of the path, as a [`CuratorError`].
    pub fn add_check_version(&mut self, path: &str, version: i32) -> Result<()> {
        self.writer.add_check_version(path, version).map_err(|e| CuratorError::from_zk(path, e))
    }

    /// Adds a create, as [`Session::create`] checks it.
    ///
    /// # Errors
    /// [`CuratorError::SchemaViolation`] if the schema refuses it (nothing is added), or
    /// zookeeper-client's refusal of the path or mode.
    pub fn add_create(&mut self, path: &str, data: &[u8], mode: zk::CreateMode, acl: &[zk::Acl]) -> Result<()> {
        self.session.check(path, SchemaOp::Create(mode_of(mode), data))?;
        let options = mode.with_acls(zk::Acls::new(acl));
        self.writer.add_create(path, data, &options).map_err(|e| CuratorError::from_zk(path, e))
    }

    /// Adds a data write, as [`Session::set_data`] checks it.
    ///
    /// # Errors
    /// [`CuratorError::SchemaViolation`] if the schema refuses it (nothing is added), or
    /// zookeeper-client's refusal of the path.
    pub fn add_set_data(&mut self, path: &str, data: &[u8], version: Option<i32>) -> Result<()> {
        self.session.check(path, SchemaOp::SetData(data))?;
        self.writer.add_set_data(path, data, version).map_err(|e| CuratorError::from_zk(path, e))
    }

    /// Adds a delete, as [`Session::delete`] checks it.
    ///
    /// # Errors
    /// [`CuratorError::SchemaViolation`] if the schema refuses it (nothing is added), or
    /// zookeeper-client's refusal of the path.
    pub fn add_delete(&mut self, path: &str, version: Option<i32>) -> Result<()> {
        self.session.check(path, SchemaOp::Delete)?;
        self.writer.add_delete(path, version).map_err(|e| CuratorError::from_zk(path, e))
    }

    /// Sends the multi: every operation added, applied together or not at all.
    pub fn commit(
        &mut self,
    ) -> impl Future<Output = std::result::Result<Vec<zk::MultiWriteResult>, zk::MultiWriteError>> + Send + 'a {
        self.writer.commit()
    }
}
