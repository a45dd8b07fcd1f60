//! [`PersistentTtlNode`]: a TTL node that lives while its process touches it.

use std::time::Duration;

use curator_core::lifecycle::Lifecycle;
use curator_core::{path, CreateMode, CuratorError, CuratorFramework, Result};
use tokio::sync::oneshot;

use super::persistent_node::PersistentNode;

/// The name of the child a [`PersistentTtlNode`] touches (Curator's default).
pub const TOUCH_NODE_NAME: &str = "touch";

/// A node that exists while its process is alive, without an ephemeral node's tie to one
/// session (Curator's `PersistentTtlNode`).
///
/// The node `P` is a [`PersistentNode`] in `PersistentWithTtl` mode. The server deletes a TTL
/// node once it has had no children and no change for the TTL, so this recipe keeps a child,
/// `P/touch` (also a TTL node), and sets its data every `TTL / touch_factor`. While it does,
/// `P` always has a child; once the process stops touching, `P/touch` expires after the TTL
/// and `P` after another TTL or so (the server checks TTLs periodically). Closing the node
/// stops the touching and leaves both to expire, as Curator does.
///
/// Needs a server with `extendedTypesEnabled=true` (`curator_test::TestingServer` enables
/// it); otherwise creates fail and [`last_error`](Self::last_error) says why.
///
/// ```no_run
/// # async fn f(fw: curator_core::CuratorFramework) -> curator_core::Result<()> {
/// use std::time::Duration;
/// use curator_recipes::nodes::PersistentTtlNode;
///
/// let node = PersistentTtlNode::builder(&fw, "/workers/w-7", Duration::from_secs(30))
///     .data(b"busy".to_vec())
///     .start()?;
/// node.wait_for_initial_create(Duration::from_secs(10)).await;
/// // ... the node stays while this process runs; after close() it expires.
/// node.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PersistentTtlNode {
    node: Option<PersistentNode>,
    /// Started by the builder's `start`, keeping the sender whose drop stops the toucher.
    lifecycle: Lifecycle<oneshot::Sender<()>>,
}

/// Builder of a [`PersistentTtlNode`]; see [`PersistentTtlNode::builder`].
#[derive(Debug, Clone)]
pub struct PersistentTtlNodeBuilder {
    fw: CuratorFramework,
    path: String,
    ttl: Duration,
    data: Vec<u8>,
    child: String,
    touch_factor: u32,
    parents: bool,
}

impl PersistentTtlNodeBuilder {
    /// The node's data (default: empty).
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    /// The name of the touched child (default [`TOUCH_NODE_NAME`]).
    pub fn child_name(mut self, name: &str) -> Self {
        self.child = name.to_string();
        self
    }

    /// Touches `factor` times per TTL (default 2, as Curator).
    pub fn touch_factor(mut self, factor: u32) -> Self {
        self.touch_factor = factor;
        self
    }

    /// Create missing parents as containers (default `true`).
    pub fn creating_parents(mut self, parents: bool) -> Self {
        self.parents = parents;
        self
    }

    /// Checks the settings and starts: the node is created in the background and touched from
    /// then on.
    ///
    /// # Errors
    /// A typed error, and nothing is created: [`CuratorError::InvalidPath`] for an invalid path
    /// or child name; [`CuratorError::InvalidArgument`] for a TTL ZooKeeper cannot take (under
    /// 1 ms or over [`MAX_TTL`](curator_core::ops::MAX_TTL)) or a zero touch factor;
    /// [`CuratorError::DataTooLarge`] for data over the framework's limit;
    /// [`CuratorError::NoRuntime`] outside a tokio runtime; [`CuratorError::Closed`] on a closed
    /// framework.
    pub fn start(self) -> Result<PersistentTtlNode> {
        curator_core::ops::check_ttl_value(&self.path, self.ttl)?;
        if self.touch_factor == 0 {
            return Err(CuratorError::InvalidArgument {
                path: self.path,
                reason: "the touch factor must not be zero".into(),
            });
        }
        let child_path = path::make_path(&self.path, &self.child);
        path::validate(&child_path)?;
        if self.child.contains('/') || self.child.is_empty() {
            return Err(CuratorError::InvalidPath { path: child_path, reason: "the child name must be one node name" });
        }
        // At least 1 ms (a zero interval would panic in tokio), at most 34 years: never zero.
        let every = (self.ttl / self.touch_factor).max(Duration::from_millis(1));
        let lifecycle = Lifecycle::new("PersistentTtlNode");
        let mut node = None;
        // The lifecycle checks the runtime and the framework before anything starts.
        lifecycle.start(&self.fw, |started| {
            node = Some(
                PersistentNode::builder(&self.fw, &self.path)
                    .mode(CreateMode::PersistentWithTtl)
                    .ttl(self.ttl)
                    .data(self.data)
                    .creating_parents(self.parents)
                    .keep_on_close()
                    .start()?,
            );
            let (stop, stopped) = oneshot::channel();
            started.spawn(touch_forever(self.fw.clone(), child_path, self.ttl, every, stopped));
            Ok(stop)
        })?;
        Ok(PersistentTtlNode { node, lifecycle })
    }
}

impl PersistentTtlNode {
    /// A builder for a TTL node at `path` that lives `ttl` after the last touch.
    pub fn builder(fw: &CuratorFramework, path: &str, ttl: Duration) -> PersistentTtlNodeBuilder {
        PersistentTtlNodeBuilder {
            fw: fw.clone(),
            path: path.to_string(),
            ttl,
            data: Vec::new(),
            child: TOUCH_NODE_NAME.to_string(),
            touch_factor: 2,
            parents: true,
        }
    }

    /// Waits up to `timeout` for the node's first create; true once done.
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> bool {
        match &self.node {
            Some(node) => node.wait_for_initial_create(timeout).await,
            None => false,
        }
    }

    /// Sets the node's data (see [`PersistentNode::set_data`]).
    pub fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        match &self.node {
            Some(node) => node.set_data(data),
            None => Err(CuratorError::AlreadyClosed { what: "PersistentTtlNode" }),
        }
    }

    /// The node's data.
    pub fn data(&self) -> Vec<u8> {
        self.node.as_ref().map(PersistentNode::data).unwrap_or_default()
    }

    /// The last error that retrying cannot fix (see [`PersistentNode::last_error`]).
    pub fn last_error(&self) -> Option<CuratorError> {
        self.node.as_ref().and_then(PersistentNode::last_error)
    }

    /// Stops touching and keeping the node; the node and its child expire after the TTL.
    pub async fn close(mut self) {
        self.lifecycle.close();
        if let Some(node) = self.node.take() {
            node.close().await;
        }
    }
}

impl Drop for PersistentTtlNode {
    /// Stops touching; see [`close`](Self::close).
    fn drop(&mut self) {
        self.lifecycle.close();
    }
}

/// Sets the child's data every `every`, creating it (a TTL node) when missing. Failures are
/// left to the next touch: the parent may not be there yet, or the connection may be down. Ends
/// once `stopped` resolves (the node closed: its sender was dropped) or the framework closed.
async fn touch_forever(
    fw: CuratorFramework,
    child: String,
    ttl: Duration,
    every: Duration,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = ticks.tick() => {}
        }
        if fw.is_closed() {
            return;
        }
        tracing::debug!(path = %child, "persistent TTL node: touch");
        let touched = match fw.set_data().for_path(&child, Vec::new()).await {
            Err(CuratorError::NoNode { .. }) => fw
                .create()
                .or_set_data()
                .with_mode(CreateMode::PersistentWithTtl)
                .with_ttl(ttl)
                .for_path(&child, Vec::new())
                .await
                .map(drop),
            other => other.map(drop),
        };
        if let Err(err) = touched {
            tracing::debug!(path = %child, error = %err, "persistent TTL node: touch failed; trying again at the next");
        }
    }
}
