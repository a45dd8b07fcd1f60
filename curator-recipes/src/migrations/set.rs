//! What a migration is: operations ([`MigrationOp`]), a named list of them ([`Migration`]),
//! and an ordered, named list of migrations ([`MigrationSet`]).

use std::sync::Arc;

use curator_core::{path, CreateMode, CuratorError, Result, TransactionBuilder};
use sha2::{Digest, Sha256};

/// One write of a [`Migration`]: what a transaction ([`TransactionBuilder`]) takes.
///
/// Curator's migrations list `CuratorOp`s made with `transactionOp()`; each maps to one of these
/// (`create().forPath(p, d)` is [`MigrationOp::create`], `setData()` is [`MigrationOp::set_data`],
/// and so on). Being plain data, a migration can be hashed, to tell when an applied one changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MigrationOp {
    /// Creates `path` with `data` (ACLs from the framework's provider).
    Create {
        /// The node's path (a prefix for the sequential modes).
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// The kind of node (TTL modes are refused by transactions).
        mode: CreateMode,
    },
    /// Deletes `path`, at `version` when given.
    Delete {
        /// The node's path.
        path: String,
        /// The version it must have, or any.
        version: Option<i32>,
    },
    /// Writes `data` to `path`, at `version` when given.
    SetData {
        /// The node's path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The version it must have, or any.
        version: Option<i32>,
    },
    /// Fails the migration unless `path` is at `version`.
    Check {
        /// The node's path.
        path: String,
        /// The version it must have.
        version: i32,
    },
}

impl MigrationOp {
    /// A persistent node at `path` with `data`.
    pub fn create(path: &str, data: impl Into<Vec<u8>>) -> Self {
        Self::Create { path: path.to_string(), data: data.into(), mode: CreateMode::Persistent }
    }

    /// A node of kind `mode` at `path` with `data`.
    pub fn create_with_mode(path: &str, data: impl Into<Vec<u8>>, mode: CreateMode) -> Self {
        Self::Create { path: path.to_string(), data: data.into(), mode }
    }

    /// Deletes `path`, whatever its version.
    pub fn delete(path: &str) -> Self {
        Self::Delete { path: path.to_string(), version: None }
    }

    /// Writes `data` to `path`, whatever its version.
    pub fn set_data(path: &str, data: impl Into<Vec<u8>>) -> Self {
        Self::SetData { path: path.to_string(), data: data.into(), version: None }
    }

    /// Fails the migration unless `path` is at `version`.
    pub fn check(path: &str, version: i32) -> Self {
        Self::Check { path: path.to_string(), version }
    }

    /// The operation's path.
    pub fn path(&self) -> &str {
        match self {
            Self::Create { path, .. }
            | Self::Delete { path, .. }
            | Self::SetData { path, .. }
            | Self::Check { path, .. } => path,
        }
    }

    /// Adds this operation to `tx`.
    pub(crate) fn add_to(&self, tx: TransactionBuilder) -> TransactionBuilder {
        match self {
            Self::Create { path, data, mode } => tx.create(path, data.clone(), *mode),
            Self::Delete { path, version } => tx.delete(path, *version),
            Self::SetData { path, data, version } => tx.set_data(path, data.clone(), *version),
            Self::Check { path, version } => tx.check(path, *version),
        }
    }

    /// Feeds the operation to `digest`: its path, ZooKeeper's operation code in decimal (as
    /// Curator does), then a description of the rest of the request (ours).
    fn digest(&self, digest: &mut Sha256) {
        digest.update(self.path().as_bytes());
        let (code, rest) = match self {
            Self::Create { data, mode, .. } => {
                let code = if *mode == CreateMode::Container { 19 } else { 1 };
                (code, format!("data={};mode={mode:?}", hex(data)))
            }
            Self::Delete { version, .. } => (2, format!("version={}", version.unwrap_or(-1))),
            Self::SetData { data, version, .. } => (5, format!("data={};version={}", hex(data), version.unwrap_or(-1))),
            Self::Check { version, .. } => (13, format!("version={version}")),
        };
        digest.update(code.to_string().as_bytes());
        digest.update(rest.as_bytes());
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// One step of a [`MigrationSet`]: operations applied together, in one transaction, once.
///
/// Once applied, a migration must not change: its hash is recorded, and a set whose applied
/// migrations hash differently is refused (see [`MigrationManager`](crate::MigrationManager)).
/// The id names the migration in logs and reports; only the operations are hashed (as in
/// Curator, where a migration is its list of operations), so renaming one is harmless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    id: String,
    ops: Arc<[MigrationOp]>,
}

impl Migration {
    /// A migration named `id` applying `ops` in order.
    pub fn new(id: impl Into<String>, ops: Vec<MigrationOp>) -> Self {
        Self { id: id.into(), ops: ops.into() }
    }

    /// The migration's name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[MigrationOp] {
        &self.ops
    }

    /// The SHA-256 hash of the operations, recorded in the migration's meta node once applied.
    pub fn hash(&self) -> Vec<u8> {
        let mut digest = Sha256::new();
        for op in self.ops.iter() {
            op.digest(&mut digest);
        }
        digest.finalize().to_vec()
    }
}

/// An ordered list of [`Migration`]s under an id: applied in order, each once, by
/// [`MigrationManager::migrate`](crate::MigrationManager::migrate).
///
/// A set grows by appending migrations: a process with the longer set applies only the new
/// ones. The id is one node name: the set's lock and meta nodes are under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationSet {
    id: String,
    migrations: Arc<[Migration]>,
}

impl MigrationSet {
    /// The set `id` of `migrations`, in the order they are applied.
    /// [`InvalidArgument`](CuratorError::InvalidArgument) when `id` is not one valid node name.
    pub fn new(id: &str, migrations: Vec<Migration>) -> Result<Self> {
        let as_path = format!("/{id}");
        let valid = !id.is_empty() && !id.contains('/') && path::validate(&as_path).is_ok();
        if !valid {
            return Err(CuratorError::InvalidArgument {
                path: as_path,
                reason: format!("a migration set's id must be one node name, not {id:?}"),
            });
        }
        Ok(Self { id: id.to_string(), migrations: migrations.into() })
    }

    /// The set's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The migrations, in order.
    pub fn migrations(&self) -> &[Migration] {
        &self.migrations
    }
}
