//! Transactions: several writes and checks applied atomically (ZooKeeper `multi`).
//!
//! ```no_run
//! # async fn f(client: curator_core::CuratorFramework) -> curator_core::Result<()> {
//! use curator_core::CreateMode;
//! let results = client
//!     .transaction()
//!     .create("/a", b"1".to_vec(), CreateMode::Persistent)
//!     .set_data("/b", b"2".to_vec(), None)
//!     .check("/c", 3)
//!     .delete("/d", None)
//!     .commit()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Each create can have its own TTL, ACL and compression, and each data write its own
//! compression ([`TransactionCreate`], [`TransactionSetData`], as Curator's
//! `transactionOp().create().withTtl(..).withACL(..).compressed()`).
//!
//! A transaction can be guarded by a hold (a lock, a lease, a leadership): see
//! [`TransactionBuilder::guarded_by`] and module `guarded`.

mod rebuild;
mod run;

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::{CuratorError, Result};
pub use crate::event::TransactionResult;
use crate::framework::CuratorFramework;
use crate::ops::guarded::{Guard, TransactionGuard};
use crate::ops::{check_acl, check_request_len, check_ttl, check_version, op_len, CreateMode, Pending};
use crate::path;
use crate::schema_set::SchemaOp;
use crate::write_tag::WriteTag;
use run::{Proof, Runs, Work};

#[derive(Debug, Clone)]
enum Op {
    Create { path: String, data: Vec<u8>, options: TransactionCreate },
    Delete { path: String, version: Option<i32> },
    SetData { path: String, data: Vec<u8>, options: TransactionSetData },
    Check { path: String, version: i32 },
}

/// How a create in a transaction is made: its mode, and its own TTL, ACL and compression
/// (Curator's `TransactionCreateBuilder2`: `withMode`, `withTtl`, `withACL`, `compressed`).
/// Given to [`TransactionBuilder::create_with`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_core::zk::Acls;
/// use curator_core::{CreateMode, TransactionCreate};
///
/// fw.transaction()
///     .create_with("/report", b"a long report".to_vec(), TransactionCreate::new(CreateMode::Persistent).compressed())
///     .create_with("/public", Vec::new(), TransactionCreate::default().with_acl(Acls::anyone_read().to_vec()))
///     .create_with(
///         "/session-marker",
///         Vec::new(),
///         TransactionCreate::new(CreateMode::PersistentWithTtl).with_ttl(Duration::from_secs(60)),
///     )
///     .commit()
///     .await?;
/// assert_eq!(fw.get_data().decompressed().for_path("/report").await?, b"a long report");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct TransactionCreate {
    mode: CreateMode,
    ttl: Option<Duration>,
    acl: Option<Vec<zk::Acl>>,
    /// `None`: the framework's default (`enable_compression`).
    compression: Option<bool>,
}

impl TransactionCreate {
    /// A create in `mode` (the default: [`CreateMode::Persistent`]).
    pub fn new(mode: CreateMode) -> Self {
        Self { mode, ..Self::default() }
    }
    /// The TTL of a [`PersistentWithTtl`](CreateMode::PersistentWithTtl) or
    /// [`PersistentSequentialWithTtl`](CreateMode::PersistentSequentialWithTtl) node (needs the
    /// server's `extendedTypesEnabled`); checked at commit as `create().with_ttl` checks it.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// The node's ACL, instead of the framework's ACL provider's (not empty).
    pub fn with_acl(mut self, acl: Vec<zk::Acl>) -> Self {
        self.acl = Some(acl);
        self
    }
    /// Compress the data with the framework's
    /// [`CompressionProvider`](crate::CompressionProvider) (gzip by default) before sending it;
    /// read it back with `get_data().decompressed()`. With gzip and without curator-core's
    /// `compression` feature the commit fails with [`CuratorError::InvalidArgument`].
    pub fn compressed(mut self) -> Self {
        self.compression = Some(true);
        self
    }
    /// Send the data as it is, even on a framework with
    /// [`enable_compression`](crate::CuratorFrameworkBuilder::enable_compression).
    pub fn uncompressed(mut self) -> Self {
        self.compression = Some(false);
        self
    }
}

/// How a data write in a transaction is made: its expected version and its compression
/// (Curator's `TransactionSetDataBuilder`: `withVersion`, `compressed`). Given to
/// [`TransactionBuilder::set_data_with`].
#[derive(Debug, Clone, Default)]
pub struct TransactionSetData {
    version: Option<i32>,
    /// `None`: the framework's default (`enable_compression`).
    compression: Option<bool>,
}

impl TransactionSetData {
    /// A write whatever the node's version.
    pub fn new() -> Self {
        Self::default()
    }
    /// Write only if the node has `version`.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }
    /// Compress the data (gzip) before sending it, as [`TransactionCreate::compressed`].
    pub fn compressed(mut self) -> Self {
        self.compression = Some(true);
        self
    }
    /// Send the data as it is, as [`TransactionCreate::uncompressed`].
    pub fn uncompressed(mut self) -> Self {
        self.compression = Some(false);
        self
    }
}

impl Op {
    fn path(&self) -> &str {
        match self {
            Op::Create { path, .. } | Op::Delete { path, .. } | Op::SetData { path, .. } | Op::Check { path, .. } => {
                path
            }
        }
    }
}

/// Builder of a transaction. See [`CuratorFramework::transaction`].
#[derive(Debug, Clone)]
pub struct TransactionBuilder {
    fw: CuratorFramework,
    ops: Vec<Op>,
    guard: Option<Guard>,
    evidence: Evidence,
}

/// What decides a transaction whose reply was lost (docs/architecture.md section 4.4): one of
/// [`TransactionBuilder::with_write_tag`], [`decided_by_data`](TransactionBuilder::decided_by_data),
/// [`decided_by_delete`](TransactionBuilder::decided_by_delete), or none.
#[derive(Debug, Clone, Default)]
enum Evidence {
    #[default]
    None,
    Tag(WriteTag),
    Data {
        path: String,
        found: Option<(i64, i32)>,
    },
    Delete {
        path: String,
        czxid: i64,
    },
}

impl CuratorFramework {
    /// Starts a transaction: every operation is applied, or none (one ZooKeeper multi).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::{CreateMode, TransactionResult};
    ///
    /// fw.create().for_path("/from", b"job".to_vec()).await?;
    /// let results = fw
    ///     .transaction()
    ///     .create("/to", b"job".to_vec(), CreateMode::Persistent)
    ///     .delete("/from", None)
    ///     .commit()
    ///     .await?;
    /// assert!(matches!(&results[0], TransactionResult::Create { path } if path == "/to"));
    /// assert!(fw.check_exists().for_path("/from").await?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn transaction(&self) -> TransactionBuilder {
        TransactionBuilder { fw: self.clone(), ops: Vec::new(), guard: None, evidence: Evidence::None }
    }
}

impl TransactionBuilder {
    /// Adds a create (ACLs from the framework's provider).
    pub fn create(self, path: &str, data: impl Into<Vec<u8>>, mode: CreateMode) -> Self {
        self.create_with(path, data, TransactionCreate::new(mode))
    }
    /// Adds a create with its own TTL, ACL or compression: see [`TransactionCreate`].
    pub fn create_with(mut self, path: &str, data: impl Into<Vec<u8>>, options: TransactionCreate) -> Self {
        self.ops.push(Op::Create { path: path.into(), data: data.into(), options });
        self
    }
    /// Adds a delete.
    pub fn delete(mut self, path: &str, version: Option<i32>) -> Self {
        self.ops.push(Op::Delete { path: path.into(), version });
        self
    }
    /// Adds a data write.
    pub fn set_data(self, path: &str, data: impl Into<Vec<u8>>, version: Option<i32>) -> Self {
        self.set_data_with(path, data, TransactionSetData { version, compression: None })
    }
    /// Adds a data write with its own compression: see [`TransactionSetData`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::TransactionSetData;
    ///
    /// fw.create().for_path("/doc", Vec::new()).await?;
    /// fw.transaction().set_data_with("/doc", b"text".to_vec(), TransactionSetData::new().with_version(0).compressed()).commit().await?;
    /// assert_eq!(fw.get_data().decompressed().for_path("/doc").await?, b"text");
    /// # Ok(()) }
    /// ```
    pub fn set_data_with(mut self, path: &str, data: impl Into<Vec<u8>>, options: TransactionSetData) -> Self {
        self.ops.push(Op::SetData { path: path.into(), data: data.into(), options });
        self
    }
    /// Adds a version check.
    pub fn check(mut self, path: &str, version: i32) -> Self {
        self.ops.push(Op::Check { path: path.into(), version });
        self
    }

    /// Guards the transaction by a hold: it commits only while the hold's node exists, on the
    /// session that made it (replaces an earlier guard). The check (`check(node, -1)`: the
    /// node's existence, whatever its version, since its name is unique to the hold and its
    /// data may change, as a revocation request changes it) goes first in the same multi, so
    /// it costs no extra round trip, and is not among the results.
    ///
    /// Nothing is sent, and the commit fails with the guard's error, when the hold already
    /// knows it may be lost, or when the session is no longer the one its node was made on.
    /// When the server refuses the check, the guard marks the hold lost and the commit fails
    /// with the guard's error (for curator-recipes' holds,
    /// [`OwnNodeLost`](CuratorError::OwnNodeLost) with the hold's node path; nothing was
    /// written). After a lost reply the guard proves nothing about the write (it says the hold
    /// held, not that the multi was applied): the commit ends with
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown), under either
    /// [`ErrorPolicy`](crate::ErrorPolicy), unless a [`WriteTag`] decides
    /// ([`with_write_tag`](Self::with_write_tag)). Nothing is sent twice.
    /// A guard of another framework or namespace is
    /// [`InvalidArgument`](CuratorError::InvalidArgument) (nothing sent). Most callers use the
    /// hold's own `transaction()` (curator-recipes' `HeldNode`), which is this on the hold's
    /// framework. Design: docs/architecture.md section 8.7.
    pub fn guarded_by(mut self, guard: Arc<dyn TransactionGuard>) -> Self {
        self.guard = Some(Guard(guard));
        self
    }

    /// Carries `tag` (replaces an earlier one): its operation goes last in the same multi (no
    /// extra request), so that after a lost reply the tag decides whether the transaction was
    /// applied, exactly: `Ok` with its results read back if it was, sent again if it was not,
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown) only if the tag was changed by someone
    /// else or reaped meanwhile (module `write_tag`). Without a tag, a lost reply is
    /// `OutcomeUnknown`. The tag's operation is not among the results.
    ///
    /// Results read back after a lost reply: a create's path (for a sequential create, the child
    /// of its parent made by the transaction's zxid; if it is gone already, the outcome is
    /// reported unknown, as its name cannot be known), a delete's and a check's path, and a data
    /// write's stat: exact when no write came after it; otherwise its `mzxid` is the
    /// transaction's, its `version` the one the write made when it named one (else -1: not
    /// known), its other fields as read. A tag of another framework or namespace is
    /// [`InvalidArgument`](CuratorError::InvalidArgument) (nothing sent). Writes carrying one
    /// tag run one at a time: the commit waits for the tag.
    pub fn with_write_tag(mut self, tag: &WriteTag) -> Self {
        self.evidence = Evidence::Tag(tag.clone());
        self
    }

    /// Declares that the data one of the transaction's operations writes at `path` (a create's
    /// or a data write's; the last one, if several) is unique to it: it holds an id that no
    /// other write, by any client, ever puts in that node. Then, after a lost reply, the node
    /// holding exactly that data proves the transaction applied (its results are read back, as
    /// for a [write tag](Self::with_write_tag)); `found`, the node's stat as read when the
    /// transaction was made (for a transaction that writes that node at that stat's version),
    /// still matching (same czxid, same version) proves it was not (it is sent again);
    /// anything else is [`OutcomeUnknown`](CuratorError::OutcomeUnknown). Replaces any other
    /// evidence. A path no operation writes is [`InvalidArgument`](CuratorError::InvalidArgument)
    /// (nothing sent). Data that is not unique makes this unsound.
    pub fn decided_by_data(mut self, path: &str, found: Option<&zk::Stat>) -> Self {
        self.evidence = Evidence::Data { path: path.to_string(), found: found.map(|s| (s.czxid, s.version)) };
        self
    }

    /// Declares that the transaction deletes the node made at zxid `czxid` at `path` (its
    /// `Stat::czxid`). Then, after a lost reply, that node still there proves the transaction
    /// was not applied (it is sent again); gone, it proves nothing (another client may have
    /// deleted it): [`OutcomeUnknown`](CuratorError::OutcomeUnknown). Replaces any other
    /// evidence. A path no operation deletes is [`InvalidArgument`](CuratorError::InvalidArgument)
    /// (nothing sent).
    pub fn decided_by_delete(mut self, path: &str, czxid: i64) -> Self {
        self.evidence = Evidence::Delete { path: path.to_string(), czxid };
        self
    }

    /// The data the last operation writing `path` writes, as it will be sent.
    fn written_data(&self, path: &str) -> Option<&[u8]> {
        self.ops.iter().rev().find_map(|op| match op {
            Op::Create { path: p, data, .. } | Op::SetData { path: p, data, .. } if p == path => Some(data.as_slice()),
            _ => None,
        })
    }

    /// Compresses the data of the operations whose compression (their own, else the
    /// framework's default) is on.
    fn compress_data(&mut self) -> Result<()> {
        for op in &mut self.ops {
            let (path, data, compression) = match op {
                Op::Create { path, data, options } => (path, data, options.compression),
                Op::SetData { path, data, options } => (path, data, options.compression),
                Op::Delete { .. } | Op::Check { .. } => continue,
            };
            *data = self.fw.encode_data_if(compression, path, std::mem::take(data))?;
        }
        Ok(())
    }

    /// Checks every operation, and the size of the whole request (`acls` are the creates' ACLs,
    /// empty for the other operations).
    fn validate(&self, acls: &[Vec<zk::Acl>]) -> Result<()> {
        let mut len = 0;
        for (op, acl) in self.ops.iter().zip(acls) {
            let data_len = match op {
                Op::Create { data, .. } | Op::SetData { data, .. } => data.len(),
                Op::Delete { .. } | Op::Check { .. } => 0,
            };
            len += op_len(&self.fw, op.path(), data_len, acl);
            match op {
                Op::Create { path, data, options } => {
                    let mode = &options.mode;
                    if mode.is_sequential() {
                        path::validate_sequential(path)?
                    } else {
                        path::validate(path)?
                    }
                    check_ttl(path, *mode, options.ttl)?;
                    self.fw.check_data(path, data)?;
                    check_acl(path, acl)?;
                    self.fw.check_schema(path, SchemaOp::Create(*mode, data))?;
                }
                Op::Delete { path, version } => {
                    path::validate(path)?;
                    check_version(path, *version)?;
                    self.fw.check_schema(path, SchemaOp::Delete)?;
                }
                Op::SetData { path, data, options } => {
                    path::validate(path)?;
                    check_version(path, options.version)?;
                    self.fw.check_data(path, data)?;
                    self.fw.check_schema(path, SchemaOp::SetData(data))?;
                }
                Op::Check { path, version } => {
                    path::validate(path)?;
                    check_version(path, Some(*version))?;
                }
            }
        }
        if let Some(guard) = &self.guard {
            guard.check_framework(&self.fw)?;
            path::validate(guard.path())?;
            len += op_len(&self.fw, guard.path(), 0, &[]);
        }
        match &self.evidence {
            Evidence::None => {}
            Evidence::Tag(tag) => {
                let own = tag.framework();
                if !(own.same_connection(&self.fw) && own.namespace() == self.fw.namespace()) {
                    return Err(CuratorError::InvalidArgument {
                        path: tag.path(),
                        reason: "the write tag belongs to another framework or namespace".into(),
                    });
                }
                let tag_path = tag.path();
                // The tag's first write makes it, later ones write it: both must pass the schema
                // set, as every write the framework sends.
                self.fw.check_schema(&tag_path, SchemaOp::Create(CreateMode::Persistent, &[]))?;
                self.fw.check_schema(&tag_path, SchemaOp::SetData(&[]))?;
                len += op_len(&self.fw, &tag_path, 0, &self.fw.acl_for_path(&tag_path));
            }
            Evidence::Data { path, .. } => {
                if self.written_data(path).is_none() {
                    return Err(CuratorError::InvalidArgument {
                        path: path.clone(),
                        reason: "decided_by_data names a node no operation of the transaction writes".into(),
                    });
                }
            }
            Evidence::Delete { path, .. } => {
                if !self.ops.iter().any(|op| matches!(op, Op::Delete { path: p, .. } if p == path)) {
                    return Err(CuratorError::InvalidArgument {
                        path: path.clone(),
                        reason: "decided_by_delete names a node no operation of the transaction deletes".into(),
                    });
                }
            }
        }
        let first = self.ops.first().map_or("/", Op::path);
        check_request_len(&self.fw, first, len)
    }

    /// Commits the operations atomically; resolves to one result per operation. A failed
    /// operation fails the whole transaction with that operation's error (and path); a guarded
    /// transaction's refused check fails it as [`guarded_by`](Self::guarded_by) says.
    ///
    /// Applied once, or reported as unknown: after a lost reply (the connection died under the
    /// request), nothing is sent again on a guess. Its evidence decides whether it was applied:
    /// a [`WriteTag`] ([`with_write_tag`](Self::with_write_tag), exact), data unique to it
    /// ([`decided_by_data`](Self::decided_by_data)), or a node it deletes
    /// ([`decided_by_delete`](Self::decided_by_delete)); when applied, its results are read
    /// back. Without evidence, or when it cannot tell, the transaction fails with
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown) (docs/architecture.md section 4.4).
    pub fn commit(self) -> Pending<Vec<TransactionResult>> {
        self.run(Runs::WithRetry)
    }

    /// One attempt, outside the framework's retry loop, for a caller that runs a loop of its
    /// own (a recipe under its own retry policy). It ends with the attempt's answer, except
    /// after a lost reply: its evidence (as for [`commit`](Self::commit)) then decides, on the
    /// next session (for as long as the framework is open), and the transaction ends `Ok` if it
    /// was applied, with the connection error if it was not, or with
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown); without evidence it ends with
    /// `OutcomeUnknown`. So a retryable error always means that nothing was applied: send it
    /// again. A tag found gone or out of step is read again and the error is the tag's, with
    /// its path: nothing was written.
    pub fn commit_once(self) -> Pending<Vec<TransactionResult>> {
        self.run(Runs::Once)
    }

    fn run(mut self, runs: Runs) -> Pending<Vec<TransactionResult>> {
        let first = self.ops.first().map(|o| o.path().to_string()).unwrap_or_else(|| "/".into());
        // A create's own ACL, else the provider's, asked once per create with the full path,
        // namespace included.
        let acls: Vec<Vec<zk::Acl>> = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Create { options: TransactionCreate { acl: Some(acl), .. }, .. } => acl.clone(),
                Op::Create { path, .. } => self.fw.acl_for_path(path),
                _ => Vec::new(),
            })
            .collect();
        // Data is checked (size, schema) as it will be sent: compressed, if asked.
        if let Err(err) = self.compress_data().and_then(|()| self.validate(&acls)) {
            return Pending::failed(&self.fw, CuratorEventType::Transaction, &first, err);
        }
        let data = match &self.evidence {
            Evidence::Data { path, .. } => self.written_data(path).map(<[u8]>::to_vec).unwrap_or_default(),
            _ => Vec::new(),
        };
        let Self { fw, ops, guard, evidence } = self;
        let path = first.clone();
        let fw2 = fw.clone();
        Pending::new(&fw, CuratorEventType::Transaction, &path, async move {
            if ops.is_empty() {
                return Ok(Vec::new());
            }
            // A hold already known lost refuses at once, also while disconnected: the retry loop
            // would first wait for a connection (up to its timeout) only to refuse then.
            if let Some(guard) = &guard {
                guard.held()?;
            }
            let proof = match evidence {
                Evidence::None => Proof::None,
                Evidence::Tag(tag) => Proof::Tag(tag.lock().await),
                Evidence::Data { path, found } => Proof::Data { path, data, found },
                Evidence::Delete { path, czxid } => Proof::Delete { path, czxid },
            };
            Work { fw: fw2, first, ops, acls, guard, proof }.run(runs).await
        })
    }
}
