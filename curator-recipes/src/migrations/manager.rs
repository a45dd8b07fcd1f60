//! [`MigrationManager`]: applies a [`MigrationSet`]'s unapplied migrations once, under the
//! set's lock. Design: docs/architecture.md section 8.8.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use curator_core::{path, CreateMode, CuratorError, CuratorFramework, Result};
use futures::future::BoxFuture;
use tracing::Instrument;

use super::set::{Migration, MigrationSet};
use crate::InterProcessSemaphoreMutex;

/// The prefix of a meta node's name (`<meta path>/<set id>/meta-<sequence>`), as Curator's.
pub const MIGRATION_META_NAME: &str = "meta-";

/// What a migration filter is given: the set being applied and the hashes of the migrations
/// already applied, in the order they were applied. See [`MigrationManager::with_filter`].
#[derive(Debug, Clone)]
pub struct AppliedMigrations {
    fw: CuratorFramework,
    set: MigrationSet,
    meta_path: String,
    hashes: Vec<Vec<u8>>,
}

impl AppliedMigrations {
    /// The set being applied.
    pub fn set(&self) -> &MigrationSet {
        &self.set
    }

    /// The set's meta path (`<meta path>/<set id>`), whose `meta-` children are `hashes`.
    pub fn meta_path(&self) -> &str {
        &self.meta_path
    }

    /// The recorded hashes of the applied migrations, oldest first.
    pub fn hashes(&self) -> &[Vec<u8>] {
        &self.hashes
    }

    /// The default filter: the migrations after the applied ones, once the applied ones are
    /// checked to be the set's first migrations, unchanged (same hashes, same order).
    /// [`BadData`](CuratorError::BadData) on the set's meta path when more migrations were
    /// applied than the set has, or when one of them changed (Curator's `MigrationException`).
    pub fn unapplied(&self) -> Result<Vec<Migration>> {
        let migrations = self.set.migrations();
        if self.hashes.len() > migrations.len() {
            return Err(self.bad(format!(
                "{} migrations were applied, the set has {}",
                self.hashes.len(),
                migrations.len()
            )));
        }
        for (i, (migration, recorded)) in migrations.iter().zip(&self.hashes).enumerate() {
            if migration.hash(&self.fw) != *recorded {
                return Err(self.bad(format!("migration {i} ({:?}) changed since it was applied", migration.id())));
            }
        }
        Ok(migrations[self.hashes.len()..].to_vec())
    }

    fn bad(&self, what: String) -> CuratorError {
        CuratorError::BadData {
            path: self.meta_path.clone(),
            reason: format!("migration set {:?}: {what}", self.set.id()),
        }
    }
}

/// What [`MigrationManager::migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrationReport {
    /// The ids of the migrations this call applied, in order (empty when there was nothing to do).
    pub applied: Vec<String>,
    /// How many migrations of the set had been applied before.
    pub already_applied: usize,
}

type Filter = Arc<dyn Fn(AppliedMigrations) -> BoxFuture<'static, Result<Vec<Migration>>> + Send + Sync>;

/// Applies [`MigrationSet`]s: each migration once, whatever the number of processes migrating
/// at once (Curator's `MigrationManager`).
///
/// [`migrate`](Self::migrate) takes the set's lock (an [`InterProcessSemaphoreMutex`] at
/// `<lock path>/<set id>`), reads the hashes of the applied migrations (the data of the
/// `meta-<sequence>` children of `<meta path>/<set id>`), checks them against the set, and
/// applies the rest in one transaction, with a new meta node for each and a check that the
/// lock is still held: all of them or nothing, and only by the holder. A set that grew since
/// is resumed: only the new migrations run. Node names, layout and the 32-byte SHA-256 in each
/// meta node are Curator's; what is hashed is not (Curator hashes the text of its request
/// records), so a set applied by a Java `MigrationManager` reads here as changed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::{Migration, MigrationManager, MigrationOp, MigrationSet};
///
/// let manager = MigrationManager::new(&fw, "/migrations/locks", "/migrations/meta", Duration::from_secs(30))?;
/// let first = Migration::new("parents", vec![MigrationOp::create("/app", b"".to_vec())]);
/// let set = MigrationSet::new("app", vec![first.clone()])?;
/// assert_eq!(manager.migrate(&set).await?.applied, ["parents"]);
/// assert!(manager.migrate(&set).await?.applied.is_empty()); // once
///
/// // Later: the set grows; only the new migration runs.
/// let second = Migration::new("config", vec![MigrationOp::create("/app/config", b"v2".to_vec())]);
/// let set = MigrationSet::new("app", vec![first, second])?;
/// assert_eq!(manager.migrate(&set).await?.applied, ["config"]);
/// # fw.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MigrationManager {
    fw: CuratorFramework,
    lock_path: String,
    meta_path: String,
    lock_max_wait: Duration,
    filter: Option<Filter>,
}

impl std::fmt::Debug for MigrationManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MigrationManager")
            .field("lock_path", &self.lock_path)
            .field("meta_path", &self.meta_path)
            .field("lock_max_wait", &self.lock_max_wait)
            .field("filter", &self.filter.is_some())
            .finish_non_exhaustive()
    }
}

impl MigrationManager {
    /// A manager whose set locks are under `lock_path` and meta nodes under `meta_path`, waiting
    /// at most `lock_max_wait` for a set's lock. [`InvalidPath`](CuratorError::InvalidPath) for
    /// a bad path. Missing nodes are created as containers when needed.
    pub fn new(fw: &CuratorFramework, lock_path: &str, meta_path: &str, lock_max_wait: Duration) -> Result<Self> {
        path::validate(lock_path)?;
        path::validate(meta_path)?;
        Ok(Self {
            fw: fw.clone(),
            lock_path: lock_path.to_string(),
            meta_path: meta_path.to_string(),
            lock_max_wait,
            filter: None,
        })
    }

    /// Replaces the default filter (Curator's overridable `filter`): given the applied
    /// migrations, it returns those to apply now, in order, or an error that ends the migrate
    /// (nothing applied). It runs under the set's lock. [`AppliedMigrations::unapplied`] is the
    /// default, for a filter that adds to it.
    pub fn with_filter<F, Fut>(mut self, filter: F) -> Self
    where
        F: Fn(AppliedMigrations) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<Migration>>> + Send + 'static,
    {
        self.filter = Some(Arc::new(move |applied| Box::pin(filter(applied))));
        self
    }

    /// Applies the set's unapplied migrations, once across every process (see the type's docs).
    ///
    /// Errors: [`Timeout`](CuratorError::Timeout) on the lock's path when the lock was not
    /// acquired within the manager's wait; [`BadData`](CuratorError::BadData) when an applied
    /// migration changed (see [`AppliedMigrations::unapplied`]); an operation's own error when
    /// it fails (nothing of this call applied); [`OwnNodeLost`](CuratorError::OwnNodeLost) when
    /// the lock was lost before the commit (nothing applied) and
    /// [`OutcomeUnknown`](CuratorError::OutcomeUnknown) when the commit's reply was lost. After
    /// any error, calling again is safe: what was applied is recorded with it.
    pub async fn migrate(&self, set: &MigrationSet) -> Result<MigrationReport> {
        let lock_path = path::make_path(&self.lock_path, set.id());
        let span = tracing::debug_span!("migrate", set = %set.id(), path = %lock_path);
        async {
            let lock = InterProcessSemaphoreMutex::new(&self.fw, &lock_path)?;
            if !lock.acquire_timeout(self.lock_max_wait).await? {
                tracing::debug!("the set's lock was not acquired in time");
                return Err(CuratorError::Timeout { path: lock_path.clone() });
            }
            let result = self.migrate_locked(&lock, set).await;
            if let Err(err) = lock.release().await {
                // The lease is ephemeral: a failed release ends with the session at the latest.
                tracing::debug!(%err, "releasing the set's lock failed");
            }
            result
        }
        .instrument(span)
        .await
    }

    async fn migrate_locked(&self, lock: &InterProcessSemaphoreMutex, set: &MigrationSet) -> Result<MigrationReport> {
        let held = lock.held().ok_or_else(|| CuratorError::IllegalState("the migration lock is not held".into()))?;
        let meta_path = path::make_path(&self.meta_path, set.id());
        let applied = AppliedMigrations {
            fw: self.fw.clone(),
            set: set.clone(),
            hashes: self.read_hashes(&meta_path).await?,
            meta_path,
        };
        let already_applied = applied.hashes.len();
        let meta_path = applied.meta_path.clone();
        let to_apply = match &self.filter {
            Some(filter) => filter(applied).await?,
            None => applied.unapplied()?,
        };
        if to_apply.is_empty() {
            tracing::debug!(already_applied, "nothing to apply");
            return Ok(MigrationReport { applied: Vec::new(), already_applied });
        }
        self.fw.create_containers(&meta_path).await?;
        let meta_node = path::make_path(&meta_path, MIGRATION_META_NAME);
        let mut tx = held.transaction();
        for migration in &to_apply {
            for op in migration.ops() {
                tx = op.add_to(tx);
            }
            tx = tx.create(&meta_node, migration.hash(&self.fw), CreateMode::PersistentSequential);
        }
        tx.commit().await?;
        let applied: Vec<String> = to_apply.iter().map(|m| m.id().to_string()).collect();
        tracing::info!(?applied, already_applied, "migrations applied");
        Ok(MigrationReport { applied, already_applied })
    }

    /// The data of the `meta-` children of `meta_path`, in sequence order (none when it does
    /// not exist).
    async fn read_hashes(&self, meta_path: &str) -> Result<Vec<Vec<u8>>> {
        let mut names = match self.fw.get_children().for_path(meta_path).await {
            Ok(names) => names,
            Err(CuratorError::NoNode { .. }) => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        names.retain(|name| name.starts_with(MIGRATION_META_NAME));
        // Same prefix, ten-digit sequence numbers: the name order is the creation order.
        names.sort();
        let mut hashes = Vec::with_capacity(names.len());
        for name in names {
            hashes.push(self.fw.get_data().for_path(&path::make_path(meta_path, &name)).await?);
        }
        Ok(hashes)
    }
}
