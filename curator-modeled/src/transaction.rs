//! A [`ModeledFramework`]'s writes as operations of a transaction (Curator's `createOp`,
//! `updateOp`, `deleteOp`, `checkExistsOp`): each adds one operation to a core
//! [`TransactionBuilder`] and gives it back, so a transaction mixes modeled and raw operations,
//! and one guarded by a hold (`TransactionBuilder::guarded_by`, or curator-recipes'
//! `HeldNode::transaction()`) writes a model only while the hold holds.

use curator_core::{Result, TransactionBuilder, TransactionCreate, TransactionSetData};

use crate::modeled::ModeledFramework;
use crate::spec::CreateOption;

impl<T: Send + Sync + 'static> ModeledFramework<T> {
    /// Adds the create of the node with `model` to `tx`, with the spec's create mode, ACL, TTL
    /// and compression ([`CreateOption::Compress`]), as Curator's `createOp`. A transaction
    /// makes no parents: the spec's parent options play no part here.
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
        let mut options = TransactionCreate::new(spec.create_mode());
        if let Some(acl) = spec.acl() {
            options = options.with_acl(acl.to_vec());
        }
        if let Some(ttl) = spec.ttl() {
            options = options.with_ttl(ttl);
        }
        if spec.has_create_option(CreateOption::Compress) {
            options = options.compressed();
        }
        let data = self.encode(&path, model)?;
        Ok(tx.create_with(&path, data, options))
    }

    /// Adds the write of `model` to the existing node to `tx`, at `version` (`None`: any).
    /// Compressed with [`CreateOption::Compress`].
    pub fn set_in(&self, tx: TransactionBuilder, model: &T, version: Option<i32>) -> Result<TransactionBuilder> {
        let path = self.full_path()?;
        let mut options = TransactionSetData::new();
        if let Some(version) = version {
            options = options.with_version(version);
        }
        if self.spec().has_create_option(CreateOption::Compress) {
            options = options.compressed();
        }
        let data = self.encode(&path, model)?;
        Ok(tx.set_data_with(&path, data, options))
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
