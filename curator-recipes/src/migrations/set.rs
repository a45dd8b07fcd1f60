//! What a migration is: operations ([`MigrationOp`]), a named list of them ([`Migration`]),
//! and an ordered, named list of migrations ([`MigrationSet`]).

use std::sync::Arc;

use curator_core::zk::{Acl, Permission};
use curator_core::{path, CreateMode, CuratorError, CuratorFramework, Result, TransactionBuilder};
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

    /// Feeds the operation to `digest` as Curator does (`CuratorMultiTransactionRecord
    /// .addToDigest`), so that a set applied by Java reads here as unchanged: the operation's
    /// path with the framework's namespace, ZooKeeper's operation code in decimal, then the text
    /// jute gives the request record (`Record.toString()`: its CSV form, ending in a newline).
    fn digest(&self, fw: &CuratorFramework, digest: &mut Sha256) {
        // The namespace as the framework keeps it (`/ns`), before the operation's path.
        let full = match fw.namespace().map(|ns| format!("/{}", ns.trim_start_matches('/'))) {
            Some(ns) if self.path() == "/" => ns,
            Some(ns) => format!("{ns}{}", self.path()),
            None => self.path().to_string(),
        };
        let at = csv_string(&full);
        let (code, record) = match self {
            Self::Create { data, mode, .. } => {
                let code = if *mode == CreateMode::Container { 19 } else { 1 };
                let acls = fw.acl_for_path(self.path());
                (code, format!("{at},{},{},{}\n", csv_buffer(data), csv_acls(&acls), create_flags(*mode)))
            }
            Self::Delete { version, .. } => (2, format!("{at},{}\n", version.unwrap_or(-1))),
            Self::SetData { data, version, .. } => {
                (5, format!("{at},{},{}\n", csv_buffer(data), version.unwrap_or(-1)))
            }
            Self::Check { version, .. } => (13, format!("{at},{version}\n")),
        };
        digest.update(full.as_bytes());
        digest.update(code.to_string().as_bytes());
        digest.update(record.as_bytes());
    }
}

/// ZooKeeper's `CreateMode` flags, as a create request carries them.
fn create_flags(mode: CreateMode) -> i32 {
    match mode {
        CreateMode::Persistent => 0,
        CreateMode::Ephemeral => 1,
        CreateMode::PersistentSequential => 2,
        CreateMode::EphemeralSequential => 3,
        CreateMode::Container => 4,
        CreateMode::PersistentWithTtl => 5,
        CreateMode::PersistentSequentialWithTtl => 6,
        _ => 0,
    }
}

/// Jute's CSV form of a string: a quote, then the text with `\0`, newline, return, `,`, `}`
/// and `%` written as `%00`, `%0A`, `%0D`, `%2C`, `%7D` and `%25`.
fn csv_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\0' => out.push_str("%00"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            ',' => out.push_str("%2C"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

/// Jute's CSV form of bytes: nothing for none, else `#` and each byte as Java's
/// `Integer.toHexString` writes the signed byte (`0`, `7f`, `ffffff80`).
fn csv_buffer(data: &[u8]) -> String {
    if data.is_empty() {
        return String::new();
    }
    let mut out = String::from("#");
    for &b in data {
        out.push_str(&format!("{:x}", b as i8 as i32));
    }
    out
}

/// Jute's CSV form of an ACL list: `v{s{31,s{'world,'anyone}},...}`.
fn csv_acls(acls: &[Acl]) -> String {
    let each: Vec<String> = acls
        .iter()
        .map(|acl| {
            let perms =
                [Permission::READ, Permission::WRITE, Permission::CREATE, Permission::DELETE, Permission::ADMIN]
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| acl.permission().has(**p))
                    .map(|(bit, _)| 1 << bit)
                    .sum::<i32>();
            format!("s{{{perms},s{{{},{}}}}}", csv_string(acl.scheme()), csv_string(acl.id()))
        })
        .collect();
    format!("v{{{}}}", each.join(","))
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

    /// The SHA-256 hash of the operations as `fw` sends them (its namespace and ACLs count),
    /// recorded in the migration's meta node once applied: the bytes Curator's
    /// `MigrationManager` computes for the same operations, so Rust and Java agree on which
    /// migrations of a set were applied (checked against Curator 5.4 in
    /// `tests/tests/migrations_interop.rs`, with and without a namespace).
    pub fn hash(&self, fw: &CuratorFramework) -> Vec<u8> {
        let mut digest = Sha256::new();
        for op in self.ops.iter() {
            op.digest(fw, &mut digest);
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
