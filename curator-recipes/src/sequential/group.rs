//! [`ContenderGroup`]: where a recipe's contenders live and how their nodes are named and
//! ordered (Curator's `LockInternals`, without the lock).

use curator_core::metrics::recipe;
use curator_core::{path, zk, CuratorError, CuratorFramework, Result};
use tracing::Instrument;

use super::acquire::{Acquire, Contest, Granted};
use super::cleanup::NodeReporter;
use super::line::Line;
use super::names::{LEADER_LATCH_NAME, READ_LOCK_NAME, WRITE_LOCK_NAME};
use super::node::{LockNode, NodeKind};
use super::order::{contenders, Predicate};

/// The contenders under one path: our nodes are `base_path/_c_<uuid>-<node_name><seq>`, and
/// every child with a sequence number after one of `sort_names` is ordered with them.
#[derive(Debug, Clone)]
pub(crate) struct ContenderGroup {
    fw: CuratorFramework,
    base_path: String,
    node_name: &'static str,
    /// Names after which the sequence number is read, for ordering.
    sort_names: &'static [&'static str],
    /// The `recipe` label of its metrics (`curator_core::metrics::recipe`).
    recipe: &'static str,
    /// The line watch its `Leases` waiters may wait on (module `line`), shared by clones.
    line: Line,
}

impl ContenderGroup {
    /// Validates `base_path` and builds the group. Nothing is sent.
    pub(crate) fn new(
        fw: &CuratorFramework,
        base_path: &str,
        node_name: &'static str,
        sort_names: &'static [&'static str],
    ) -> Result<Self> {
        path::validate(base_path)?;
        let recipe = match node_name {
            READ_LOCK_NAME => recipe::READ,
            WRITE_LOCK_NAME => recipe::WRITE,
            LEADER_LATCH_NAME => recipe::LEADER_LATCH,
            _ => recipe::MUTEX,
        };
        Ok(Self {
            fw: fw.clone(),
            base_path: base_path.to_string(),
            node_name,
            sort_names,
            recipe,
            line: Line::default(),
        })
    }

    /// The same group, its metrics labelled `recipe` (a value of `curator_core::metrics::recipe`)
    /// instead of the kind its node name says.
    pub(crate) fn labelled(mut self, recipe: &'static str) -> Self {
        self.recipe = recipe;
        self
    }

    /// The `recipe` label of the group's metrics.
    pub(crate) fn recipe(&self) -> &'static str {
        self.recipe
    }

    /// The framework the nodes are made with.
    pub(crate) fn framework(&self) -> &CuratorFramework {
        &self.fw
    }

    /// The path whose children are the contenders.
    pub(crate) fn base_path(&self) -> &str {
        &self.base_path
    }

    /// What an acquire in this group reads of it.
    fn contest(&self) -> Contest<'_> {
        Contest {
            fw: &self.fw,
            base_path: &self.base_path,
            node_name: self.node_name,
            sort_names: self.sort_names,
            recipe: self.recipe,
            line: &self.line,
        }
    }

    /// The children of the base path that are contenders, ordered, as full paths; only those
    /// whose name contains `filter`, when given.
    pub(crate) async fn participant_nodes(&self, filter: Option<&str>) -> Result<Vec<String>> {
        let base = self.base_path.clone();
        let children = self
            .fw
            .call_with_retry("lock-participants", &base, |session, _| {
                let base = base.clone();
                async move {
                    tracing::debug!(path = %base, "getChildren");
                    match session.client().list_children(&base).await {
                        Ok(c) => Ok(c),
                        Err(zk::Error::NoNode) => Ok(Vec::new()),
                        Err(e) => Err(CuratorError::from_zk(&base, e)),
                    }
                }
            })
            .await?;
        Ok(contenders(&children, self.sort_names)
            .into_iter()
            .filter(|c| filter.is_none_or(|f| c.name.contains(f)))
            .map(|c| path::make_path(&self.base_path, &c.name))
            .collect())
    }

    /// Creates our node with `data` and waits until `predicate` says it holds; returns it.
    /// Cancel safe: dropping the future deletes whatever node it made.
    pub(crate) async fn acquire(&self, data: &[u8], kind: NodeKind, predicate: Predicate) -> Result<Granted> {
        let span = tracing::debug_span!("lock_acquire", path = %self.base_path, lock = self.node_name);
        Acquire::new(self.contest(), data, kind, predicate).run().instrument(span).await
    }

    /// As [`acquire`](Self::acquire), telling `ours` the path of our node as soon as it is
    /// known (and again if the acquire has to make a new one). Dropped, the acquire's cleanup
    /// clears `ours` once it has deleted the node.
    pub(crate) async fn acquire_reporting(
        &self,
        data: &[u8],
        kind: NodeKind,
        predicate: Predicate,
        ours: NodeReporter,
    ) -> Result<Granted> {
        let span = tracing::debug_span!("lock_acquire", path = %self.base_path, lock = self.node_name);
        Acquire::new(self.contest(), data, kind, predicate).reporting(ours).run().instrument(span).await
    }

    /// Goes on with `node`, a sequential node of ours from an earlier acquire in this group that
    /// was given up while its session may live on (a leader whose connection was suspended):
    /// lists the contenders and waits until `predicate` says it holds, as
    /// [`acquire_reporting`](Self::acquire_reporting) does after its create. If the node's
    /// session is gone, or the node is, the acquire makes a new node (deleting the old one if
    /// it is still there). Cancel safe: dropping the future deletes our node.
    pub(crate) async fn resume(
        &self,
        node: LockNode,
        data: &[u8],
        predicate: Predicate,
        ours: NodeReporter,
    ) -> Result<Granted> {
        let span =
            tracing::debug_span!("lock_acquire", path = %self.base_path, lock = self.node_name, resume = %node.path);
        Acquire::resuming(self.contest(), node, data, predicate).reporting(ours).run().instrument(span).await
    }
}
