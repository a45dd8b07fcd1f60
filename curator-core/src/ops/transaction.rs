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

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::{CuratorError, Result};
pub use crate::event::TransactionResult;
use crate::framework::{CuratorFramework, Session};
use crate::ops::guarded::{Guard, TransactionGuard};
use crate::ops::outcome::{no_evidence, InFlight, Verdict};
use crate::ops::{check_acl, check_request_len, check_ttl, check_version, op_len, CreateMode, Pending};
use crate::path;
use crate::schema_set::SchemaOp;
use crate::write_tag::{TagLock, WriteTag};

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
    tag: Option<WriteTag>,
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
        TransactionBuilder { fw: self.clone(), ops: Vec::new(), guard: None, tag: None }
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
        self.tag = Some(tag.clone());
        self
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
        if let Some(tag) = &self.tag {
            let own = tag.framework();
            if !(own.same_connection(&self.fw) && own.namespace() == self.fw.namespace()) {
                return Err(CuratorError::InvalidArgument {
                    path: tag.path(),
                    reason: "the write tag belongs to another framework or namespace".into(),
                });
            }
            let tag_path = tag.path();
            len += op_len(&self.fw, &tag_path, 0, &self.fw.acl_for_path(&tag_path));
        }
        let first = self.ops.first().map_or("/", Op::path);
        check_request_len(&self.fw, first, len)
    }

    /// Commits the operations atomically; resolves to one result per operation. A failed
    /// operation fails the whole transaction with that operation's error (and path); a guarded
    /// transaction's refused check fails it as [`guarded_by`](Self::guarded_by) says.
    ///
    /// Applied once, or reported as unknown: after a lost reply (the connection died under the
    /// request), nothing is sent again on a guess. With a [`WriteTag`] the tag decides whether
    /// the transaction was applied (its results are then read back: see
    /// [`with_write_tag`](Self::with_write_tag)); without one, the transaction fails with
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown), since no other evidence proves it
    /// (docs/architecture.md section 4.4).
    pub fn commit(self) -> Pending<Vec<TransactionResult>> {
        self.run(Runs::WithRetry)
    }

    /// One attempt, outside the framework's retry loop, for a caller that runs a loop of its
    /// own (a recipe under its own retry policy). It ends with the attempt's answer, except
    /// after a lost reply: with a [`WriteTag`] the tag then decides, on the next session (for as
    /// long as the framework is open), and the transaction ends `Ok` if it was applied, with the
    /// connection error if it was not, or with [`OutcomeUnknown`](CuratorError::OutcomeUnknown);
    /// without a tag it ends with `OutcomeUnknown`. So a retryable error always means that
    /// nothing was applied: send it again. A tag found gone or out of step is read again and the
    /// error is the tag's, with its path: nothing was written.
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
        let Self { fw, ops, guard, tag } = self;
        let path = first.clone();
        let work = Work { fw: fw.clone(), first, ops, acls, guard };
        Pending::new(&fw, CuratorEventType::Transaction, &path, async move {
            if work.ops.is_empty() {
                return Ok(Vec::new());
            }
            // A hold already known lost refuses at once, also while disconnected: the retry loop
            // would first wait for a connection (up to its timeout) only to refuse then.
            if let Some(guard) = &work.guard {
                guard.held()?;
            }
            let lock = match &tag {
                Some(tag) => Some(tag.lock().await),
                None => None,
            };
            match runs {
                Runs::WithRetry => work.with_retry(lock.as_ref()).await,
                Runs::Once => work.once(lock.as_ref()).await,
            }
        })
    }
}

/// How a commit runs: under the framework's retry loop, or one attempt.
#[derive(Debug, Clone, Copy)]
enum Runs {
    WithRetry,
    Once,
}

/// A validated transaction, ready to send.
struct Work {
    fw: CuratorFramework,
    first: String,
    ops: Vec<Op>,
    acls: Vec<Vec<zk::Acl>>,
    guard: Option<Guard>,
}

impl Work {
    fn op_name(&self) -> &'static str {
        if self.guard.is_some() {
            "guarded_transaction"
        } else {
            "transaction"
        }
    }

    /// Under the retry loop, which owns lost replies (module `outcome`).
    async fn with_retry(&self, lock: Option<&TagLock>) -> Result<Vec<TransactionResult>> {
        self.fw
            .write_with_retry(
                self.op_name(),
                &self.first,
                |session, flight| async move {
                    let mut resent = false;
                    loop {
                        match self.attempt(&session, &flight, lock).await {
                            // The tag was reaped while idle (or its parent made again): nothing
                            // was written; the tag was read again, so send once more at once.
                            Err(Failed::Tag(_)) if !resent => resent = true,
                            Err(Failed::Tag(err) | Failed::Other(err)) => return Err(err),
                            Ok(results) => return Ok(results),
                        }
                    }
                },
                |session, doubt| async move { self.decide(&session, doubt.sent, lock).await },
            )
            .await
    }

    /// One attempt; after a lost reply with a tag, decided under the cleanup loop.
    async fn once(&self, lock: Option<&TagLock>) -> Result<Vec<TransactionResult>> {
        let span = tracing::debug_span!("zk", op = self.op_name(), path = %self.first);
        async {
            let session = self.fw.session_for(&self.first).await?;
            let flight = Arc::new(InFlight::default());
            let sent = Instant::now();
            let err = match self.attempt(&session, &flight, lock).await {
                Ok(results) => return Ok(results),
                Err(Failed::Tag(err) | Failed::Other(err)) => err,
            };
            drop(session);
            if !flight.lost() {
                return Err(err);
            }
            let Some(lock) = lock else {
                return Err(CuratorError::OutcomeUnknown {
                    path: self.first.clone(),
                    reason: format!(
                        "its reply was lost ({err}), and a transaction without a write tag leaves nothing to tell"
                    ),
                });
            };
            let mut retry = self.fw.cleanup_retry_loop();
            loop {
                let decided = async {
                    let session = self.fw.session_for(&self.first).await?;
                    self.decide(&session, sent, Some(lock)).await
                };
                match decided.await {
                    Ok(Verdict::Applied(results)) => return Ok(results),
                    Ok(Verdict::NotApplied) => return Err(err),
                    Ok(Verdict::Unknown(reason)) => {
                        return Err(CuratorError::OutcomeUnknown { path: self.first.clone(), reason })
                    }
                    Err(e) => retry.on_error(e).await?,
                }
            }
        }
        .instrument(span)
        .await
    }

    /// One attempt on `session`: the guard's session first, then the multi.
    async fn attempt(
        &self,
        session: &Session,
        flight: &InFlight,
        lock: Option<&TagLock>,
    ) -> std::result::Result<Vec<TransactionResult>, Failed> {
        if let Some(guard) = &self.guard {
            guard.before_attempt(session).map_err(Failed::Other)?;
        }
        let result = commit_once(session.client(), self.guard.as_ref(), &self.ops, &self.acls, lock, flight).await;
        match (&result, lock) {
            (Ok(_), Some(lock)) => lock.written(),
            (Err(Failed::Tag(_)), Some(lock)) => lock.learn(session).await.map_err(Failed::Other)?,
            _ => {}
        }
        result
    }

    /// Whether the attempt whose reply was lost (sent at `sent`) was applied: only a write tag
    /// can tell (module `outcome`).
    async fn decide(
        &self,
        session: &Session,
        sent: Instant,
        lock: Option<&TagLock>,
    ) -> Result<Verdict<Vec<TransactionResult>>> {
        let Some(lock) = lock else { return Ok(no_evidence("a transaction without a write tag")) };
        let (verdict, seen) = lock.decide(session, sent).await?;
        // The results are read back before the tag's state is recorded: if that fails, the
        // next try decides again from the same state.
        let verdict = match verdict {
            Verdict::Applied(zxid) => rebuild::results(session, &self.ops, zxid).await?,
            Verdict::NotApplied => Verdict::NotApplied,
            Verdict::Unknown(reason) => Verdict::Unknown(reason),
        };
        lock.settle(seen);
        Ok(verdict)
    }
}

/// How an attempt failed: on the write tag's operation (nothing written: the tag is out of
/// step), or otherwise.
enum Failed {
    Tag(CuratorError),
    Other(CuratorError),
}

/// One attempt: the multi of `ops`, after `guard`'s check if there is one and before the write
/// tag's operation if there is one (the last), with its request's answer noted in `flight`.
async fn commit_once(
    client: &zk::Client,
    guard: Option<&Guard>,
    ops: &[Op],
    acls: &[Vec<zk::Acl>],
    tag: Option<&TagLock>,
    flight: &InFlight,
) -> std::result::Result<Vec<TransactionResult>, Failed> {
    let paths: Vec<&str> = ops.iter().map(Op::path).collect();
    tracing::debug!(guard = guard.map(Guard::path), tag = tag.map(|t| t.tag().path()), ?paths, "multi");
    let mut writer = client.new_multi_writer();
    if let Some(guard) = guard {
        writer
            .add_check_version(guard.path(), -1)
            .map_err(|e| Failed::Other(CuratorError::from_zk(guard.path(), e)))?;
    }
    for (op, acl) in ops.iter().zip(acls) {
        let added = match op {
            Op::Create { path, data, options } => {
                let mut create = options.mode.to_zk().with_acls(zk::Acls::new(acl));
                if let Some(ttl) = options.ttl {
                    create = create.with_ttl(ttl);
                }
                writer.add_create(path, data, &create)
            }
            Op::Delete { path, version } => writer.add_delete(path, *version),
            Op::SetData { path, data, options } => writer.add_set_data(path, data, options.version),
            Op::Check { path, version } => writer.add_check_version(path, *version),
        };
        added.map_err(|e| Failed::Other(CuratorError::from_zk(op.path(), e)))?;
    }
    if let Some(tag) = tag {
        tag.add_op(&mut writer).map_err(Failed::Other)?;
    }
    // The guard's check, if any, is operation 0; the tag's, if any, the last.
    let skip = usize::from(guard.is_some());
    let results = match flight.seen_multi(writer.commit().await) {
        Ok(results) => results,
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            if let (Some(guard), true) = (guard, index < skip) {
                return Err(Failed::Other(match source {
                    zk::Error::NoNode | zk::Error::BadVersion => guard.refused(),
                    other => CuratorError::from_zk(guard.path(), other),
                }));
            }
            return Err(match (ops.get(index - skip), tag) {
                (Some(op), _) => Failed::Other(CuratorError::from_zk(op.path(), source)),
                (None, Some(tag)) => {
                    tracing::debug!(tag = %tag.tag().path(), error = %source, "write tag out of step: nothing written");
                    Failed::Tag(CuratorError::from_zk(&tag.tag().path(), source))
                }
                (None, None) => Failed::Other(CuratorError::from_zk("/", source)),
            });
        }
        Err(zk::MultiWriteError::RequestFailed { source }) => {
            return Err(Failed::Other(CuratorError::from_zk(ops[0].path(), source)))
        }
    };
    Ok(ops
        .iter()
        .zip(results.into_iter().skip(skip))
        .map(|(op, result)| match result {
            zk::MultiWriteResult::Create { path, .. } => TransactionResult::Create { path },
            zk::MultiWriteResult::SetData { stat } => TransactionResult::SetData { path: op.path().to_string(), stat },
            zk::MultiWriteResult::Delete => TransactionResult::Delete { path: op.path().to_string() },
            _ => TransactionResult::Check { path: op.path().to_string() },
        })
        .collect())
}
