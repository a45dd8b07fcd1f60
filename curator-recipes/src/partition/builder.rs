//! [`SetPartitionerBuilder`]: the settings of a [`SetPartitioner`], checked once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use curator_core::{path, CuratorError, CuratorFramework, Result};

use super::partitioner::SetPartitioner;
use super::split::{round_robin, SplitFn};
use super::state::{PARTITION_LOCKS_NODE, PARTITION_PARTY_NODE};

/// Builder of a [`SetPartitioner`]; see [`SetPartitioner::builder`].
#[derive(Clone)]
pub struct SetPartitionerBuilder {
    pub(crate) fw: CuratorFramework,
    pub(crate) path: String,
    pub(crate) id: String,
    pub(crate) partitions: Vec<String>,
    pub(crate) settle: Duration,
    pub(crate) split: SplitFn,
    pub(crate) payload: Option<Vec<u8>>,
}

impl std::fmt::Debug for SetPartitionerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetPartitionerBuilder")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("partitions", &self.partitions)
            .field("settle", &self.settle)
            .finish_non_exhaustive()
    }
}

impl SetPartitionerBuilder {
    pub(crate) fn new(fw: &CuratorFramework, path: &str, id: &str, partitions: Vec<String>) -> Self {
        Self {
            fw: fw.clone(),
            path: path.to_string(),
            id: id.to_string(),
            partitions,
            settle: SetPartitioner::DEFAULT_SETTLE,
            split: Arc::new(round_robin),
            payload: None,
        }
    }

    /// How long the group must stay unchanged (no join, no leave) before the set is split
    /// (kazoo's `time_boundary`; default [`SetPartitioner::DEFAULT_SETTLE`]): from 1 ms to [`SetPartitioner::MAX_SETTLE`].
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// How the set is split (kazoo's `partition_func`; default [`round_robin`]).
    pub fn split(mut self, split: impl Fn(&str, &[String], &[String]) -> Vec<String> + Send + Sync + 'static) -> Self {
        self.split = Arc::new(split);
        self
    }

    /// This member's payload in the group (default: this host's address, as
    /// [`GroupMember`](crate::GroupMember)'s).
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    /// Checks the settings and makes the partitioner, latent: nothing is sent before
    /// [`start`](SetPartitioner::start).
    ///
    /// # Errors
    /// [`CuratorError::InvalidPath`] for an invalid path; [`CuratorError::InvalidArgument`] for
    /// an empty set, a partition named twice, a partition name or member id that is not one
    /// node name, or a settle time outside 1 ms ..= [`SetPartitioner::MAX_SETTLE`];
    /// [`CuratorError::DataTooLarge`] for a payload over the framework's limit.
    pub fn build(self) -> Result<SetPartitioner> {
        path::validate(&self.path)?;
        let refuse = |reason: String| Err(CuratorError::InvalidArgument { path: self.path.clone(), reason });
        if self.settle < Duration::from_millis(1) || self.settle > SetPartitioner::MAX_SETTLE {
            return refuse(format!(
                "the settle time is from 1 ms to {} s, not {:?}",
                SetPartitioner::MAX_SETTLE.as_secs(),
                self.settle
            ));
        }
        if self.partitions.is_empty() {
            return refuse("the set to partition is empty".to_string());
        }
        let mut seen = BTreeSet::new();
        for name in &self.partitions {
            check_name(&self.path, name)?;
            if !seen.insert(name.as_str()) {
                return refuse(format!("partition {name:?} is named twice"));
            }
        }
        SetPartitioner::new(self)
    }
}

/// The path of the group's node, `P/party`.
pub(crate) fn party_path(base: &str) -> String {
    path::make_path(base, PARTITION_PARTY_NODE)
}

/// The lock path of partition `name`, `P/locks/<name>`.
pub(crate) fn lock_path(base: &str, name: &str) -> String {
    path::make_path(&path::make_path(base, PARTITION_LOCKS_NODE), name)
}

/// A partition name must be one node name: it is the last segment of its lock's path.
fn check_name(base: &str, name: &str) -> Result<()> {
    let refuse = |reason: &str| {
        Err(CuratorError::InvalidArgument { path: base.to_string(), reason: format!("partition {name:?}: {reason}") })
    };
    if name.is_empty() {
        return refuse("empty");
    }
    if name.contains(path::SEPARATOR) {
        return refuse("contains '/' (a partition name must be one node name)");
    }
    match path::validate(&lock_path(base, name)) {
        Err(CuratorError::InvalidPath { reason, .. }) => refuse(reason),
        other => other,
    }
}
