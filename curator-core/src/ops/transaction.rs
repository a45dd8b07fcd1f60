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

use zookeeper_client as zk;

use crate::background::CuratorEventType;
use crate::error::{CuratorError, Result};
pub use crate::event::TransactionResult;
use crate::framework::CuratorFramework;
use crate::ops::{check_acl, check_request_len, check_version, op_len, CreateMode, Pending};
use crate::path;

#[derive(Debug, Clone)]
enum Op {
    Create { path: String, data: Vec<u8>, mode: CreateMode },
    Delete { path: String, version: Option<i32> },
    SetData { path: String, data: Vec<u8>, version: Option<i32> },
    Check { path: String, version: i32 },
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
        TransactionBuilder { fw: self.clone(), ops: Vec::new() }
    }
}

impl TransactionBuilder {
    /// Adds a create (ACLs from the framework's provider).
    pub fn create(mut self, path: &str, data: impl Into<Vec<u8>>, mode: CreateMode) -> Self {
        self.ops.push(Op::Create { path: path.into(), data: data.into(), mode });
        self
    }
    /// Adds a delete.
    pub fn delete(mut self, path: &str, version: Option<i32>) -> Self {
        self.ops.push(Op::Delete { path: path.into(), version });
        self
    }
    /// Adds a data write.
    pub fn set_data(mut self, path: &str, data: impl Into<Vec<u8>>, version: Option<i32>) -> Self {
        self.ops.push(Op::SetData { path: path.into(), data: data.into(), version });
        self
    }
    /// Adds a version check.
    pub fn check(mut self, path: &str, version: i32) -> Self {
        self.ops.push(Op::Check { path: path.into(), version });
        self
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
                Op::Create { path, data, mode } => {
                    if mode.is_sequential() {
                        path::validate_sequential(path)?
                    } else {
                        path::validate(path)?
                    }
                    if mode.is_ttl() {
                        return Err(CuratorError::InvalidArgument {
                            path: path.clone(),
                            reason: "TTL nodes are not supported in transactions".into(),
                        });
                    }
                    self.fw.check_data(path, data)?;
                    check_acl(path, acl)?;
                }
                Op::Delete { path, version } => {
                    path::validate(path)?;
                    check_version(path, *version)?;
                }
                Op::SetData { path, data, version } => {
                    path::validate(path)?;
                    check_version(path, *version)?;
                    self.fw.check_data(path, data)?;
                }
                Op::Check { path, version } => {
                    path::validate(path)?;
                    check_version(path, Some(*version))?;
                }
            }
        }
        let first = self.ops.first().map_or("/", Op::path);
        check_request_len(&self.fw, first, len)
    }

    /// Commits the operations atomically; resolves to one result per operation. A failed
    /// operation fails the whole transaction with that operation's error (and path).
    pub fn commit(self) -> Pending<Vec<TransactionResult>> {
        let first = self.ops.first().map(|o| o.path().to_string()).unwrap_or_else(|| "/".into());
        // The provider is asked once per create, with the full path, namespace included.
        let acls: Vec<Vec<zk::Acl>> = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Create { path, .. } => self.fw.acl_for_path(path),
                _ => Vec::new(),
            })
            .collect();
        if let Err(err) = self.validate(&acls) {
            return Pending::failed(&self.fw, CuratorEventType::Transaction, &first, err);
        }
        let Self { fw, ops } = self;
        let fw2 = fw.clone();
        let path = first.clone();
        Pending::new(&fw, CuratorEventType::Transaction, &path, async move {
            if ops.is_empty() {
                return Ok(Vec::new());
            }
            fw2.call_with_retry("transaction", &first, |session, _| {
                let (ops, acls) = (&ops, &acls);
                async move { commit_once(session.client(), ops, acls).await }
            })
            .await
        })
    }
}

async fn commit_once(client: &zk::Client, ops: &[Op], acls: &[Vec<zk::Acl>]) -> Result<Vec<TransactionResult>> {
    let mut writer = client.new_multi_writer();
    for (op, acl) in ops.iter().zip(acls) {
        let added = match op {
            Op::Create { path, data, mode } => {
                writer.add_create(path, data, &mode.to_zk().with_acls(zk::Acls::new(acl)))
            }
            Op::Delete { path, version } => writer.add_delete(path, *version),
            Op::SetData { path, data, version } => writer.add_set_data(path, data, *version),
            Op::Check { path, version } => writer.add_check_version(path, *version),
        };
        added.map_err(|e| CuratorError::from_zk(op.path(), e))?;
    }
    let results = match writer.commit().await {
        Ok(results) => results,
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            let path = ops.get(index).map(Op::path).unwrap_or("/");
            return Err(CuratorError::from_zk(path, source));
        }
        Err(zk::MultiWriteError::RequestFailed { source }) => return Err(CuratorError::from_zk(ops[0].path(), source)),
    };
    Ok(ops
        .iter()
        .zip(results)
        .map(|(op, result)| match result {
            zk::MultiWriteResult::Create { path, .. } => TransactionResult::Create { path },
            zk::MultiWriteResult::SetData { stat } => TransactionResult::SetData { path: op.path().to_string(), stat },
            zk::MultiWriteResult::Delete => TransactionResult::Delete { path: op.path().to_string() },
            _ => TransactionResult::Check { path: op.path().to_string() },
        })
        .collect())
}
