//! A [`ModeledFramework`]'s writes as operations of a transaction (Curator's `createOp`,
//! `updateOp`, `deleteOp`, `checkExistsOp`): each adds one operation to a core
//! [`TransactionBuilder`] and gives it back, so a transaction mixes modeled and raw operations,
//! and one guarded by a hold (`TransactionBuilder::guarded_by`, or curator-recipes'
//! `HeldNode::transaction()`) writes a model only while the hold holds.

use curator_core::{CuratorError, Result, TransactionBuilder};

use crate::modeled::ModeledFramework;
use crate::spec::CreateOption;

impl<T: Send + Sync + 'static> ModeledFramework<T> {
    /// Adds the create of the node with `model` to `tx`, in the spec's create mode. A
    /// transaction's create takes its ACL from the framework's provider, makes no parents,
    /// compresses nothing and cannot make a TTL node: a spec with an ACL, a TTL or
    /// [`CreateOption::Compress`] is [`CuratorError::InvalidArgument`] here.
    ///
    /// ```no_run
    /// # async fn f(config: curator_modeled::ModeledFramework<String>) -> curator_core::Result<()> {
    /// let tx = config.framework().transaction();
    /// let tx = config.child("a")?.create_in(tx, &"one".to_string())?;
    /// let tx = config.child("b")?.create_in(tx, &"two".to_string())?;
    /// tx.commit().await?; // both, or neither
    /// # Ok(()) }
    /// ```
    pub fn create_in(&self, tx: TransactionBuilder, model: &T) -> Result<TransactionBuilder> {
        let path = self.full_path()?;
        let spec = self.spec();
        let refused = if spec.acl().is_some() {
            Some("a transaction's create takes the framework's ACL, not the spec's")
        } else if spec.ttl().is_some() {
            Some("TTL nodes are not supported in transactions")
        } else if spec.has_create_option(CreateOption::Compress) {
            Some("a transaction does not compress")
        } else {
            None
        };
        if let Some(reason) = refused {
            return Err(CuratorError::InvalidArgument { path, reason: reason.into() });
        }
        let data = self.encode(&path, model)?;
        Ok(tx.create(&path, data, spec.create_mode()))
    }

    /// Adds the write of `model` to the existing node to `tx`, at `version` (`None`: any).
    /// A spec with [`CreateOption::Compress`] is [`CuratorError::InvalidArgument`] here.
    pub fn set_in(&self, tx: TransactionBuilder, model: &T, version: Option<i32>) -> Result<TransactionBuilder> {
        let path = self.full_path()?;
        if self.spec().has_create_option(CreateOption::Compress) {
            return Err(CuratorError::InvalidArgument { path, reason: "a transaction does not compress".into() });
        }
        let data = self.encode(&path, model)?;
        Ok(tx.set_data(&path, data, version))
    }

    /// Adds the delete of the node to `tx`, at `version` (`None`: any).
    pub fn delete_in(&self, tx: TransactionBuilder, version: Option<i32>) -> Result<TransactionBuilder> {
        Ok(tx.delete(&self.full_path()?, version))
    }

    /// Adds a check that the node exists at `version` (`-1`: any) to `tx`.
    pub fn check_in(&self, tx: TransactionBuilder, version: i32) -> Result<TransactionBuilder> {
        Ok(tx.check(&self.full_path()?, version))
    }
}
