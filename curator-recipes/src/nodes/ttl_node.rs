//! [`PersistentTtlNode`]: a TTL node that lives while its process touches it.

use std::time::Duration;

use curator_core::{path, CreateMode, CuratorError, CuratorFramework, Result};
use curator_core::{LifeState, Lifecycle};
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
/// stops the touching and leaves both to expire, as Curator does. A touch that fails (a lost
/// reply included, which is not sent again by the framework) is tried again after a short
/// backoff (50 ms doubling to 2 s, at most the touch interval), not at the next interval.
///
/// Needs a server with `extendedTypesEnabled=true` (`curator_test::TestingServer` enables
/// it); otherwise creates fail and [`last_error`](Self::last_error) says why.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_recipes::PersistentTtlNode;
///
/// let node = PersistentTtlNode::builder(&fw, "/workers/w-7", Duration::from_secs(30))
///     .data(b"busy".to_vec())
///     .build()?;
/// node.start()?;
/// node.ready().await?; // created, or refused for good (NoAuth...): then closed
/// // ... the node stays while this process runs; after close() it expires.
/// node.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PersistentTtlNode {
    fw: CuratorFramework,
    node: PersistentNode,
    child_path: String,
    ttl: Duration,
    /// How often the child is touched.
    every: Duration,
    /// Started by `start`, keeping the sender whose drop stops the toucher.
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

    /// Checks the settings and makes the node, latent: nothing is sent before
    /// [`start`](PersistentTtlNode::start).
    ///
    /// # Errors
    /// A typed error: [`CuratorError::InvalidPath`] for an invalid path or child name;
    /// [`CuratorError::InvalidArgument`] for a TTL ZooKeeper cannot take (under 1 ms or over
    /// [`MAX_TTL`](curator_core::MAX_TTL)) or a zero touch factor;
    /// [`CuratorError::DataTooLarge`] for data over the framework's limit.
    pub fn build(self) -> Result<PersistentTtlNode> {
        curator_core::check_ttl_value(&self.path, self.ttl)?;
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
        let node = PersistentNode::builder(&self.fw, &self.path)
            .mode(CreateMode::PersistentWithTtl)
            .ttl(self.ttl)
            .data(self.data)
            .creating_parents(self.parents)
            .keep_on_close()
            .build()?;
        Ok(PersistentTtlNode {
            fw: self.fw,
            node,
            child_path,
            ttl: self.ttl,
            every,
            lifecycle: Lifecycle::new("PersistentTtlNode"),
        })
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

    /// Starts keeping the node (Curator's `start`): it is created in the background (see
    /// [`ready`](Self::ready)) and its child touched from then on. Returns at once.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] outside a tokio runtime, [`CuratorError::Closed`] on a
    /// closed framework ([`Lifecycle`](curator_core::Lifecycle)); nothing is sent then.
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.fw, |started| {
            self.node.start()?;
            let readiness = started.readiness();
            let first = self.node.first_outcome();
            // The node's first outcome is this one's: a refused first create closes both.
            started.spawn(async move { readiness.report(first.await) });
            let (stop, stopped) = oneshot::channel();
            started.spawn(touch_forever(self.fw.clone(), self.child_path.clone(), self.ttl, self.every, stopped));
            Ok(stop)
        })
    }

    /// Waits for the outcome of the node's first create (see [`PersistentNode::ready`]).
    ///
    /// # Errors
    /// The refusal of the first create, which closed the node
    /// ([`CuratorError::is_permanent`]: [`CuratorError::NoAuth`] for an ACL that refuses the
    /// client...); [`CuratorError::NotStarted`] before [`start`](Self::start);
    /// [`CuratorError::AlreadyClosed`] when closed before a first outcome.
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// Where the node is in its life: [`LifeState::Closed`] after [`close`](Self::close) or a
    /// refused first create.
    pub fn state(&self) -> LifeState {
        self.lifecycle.state()
    }

    /// Waits up to `timeout` for the node's first create; true once done.
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> bool {
        self.node.wait_for_initial_create(timeout).await
    }

    /// Sets the node's data (see [`PersistentNode::set_data`]).
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`], the lifecycle variants naming `PersistentTtlNode`.
    pub fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        self.lifecycle.with_started(|_| ())?;
        self.node.set_data(data)
    }

    /// The node's data.
    pub fn data(&self) -> Vec<u8> {
        self.node.data()
    }

    /// The last error that retrying cannot fix (see [`PersistentNode::last_error`]).
    pub fn last_error(&self) -> Option<CuratorError> {
        self.node.last_error()
    }

    /// Stops touching and keeping the node; the node and its child expire after the TTL.
    /// Idempotent; returns once the keeper has ended.
    pub async fn close(&self) {
        self.lifecycle.close();
        self.node.close().await;
    }
}

impl Drop for PersistentTtlNode {
    /// Stops touching; see [`close`](Self::close). (The node's own drop stops keeping it.)
    fn drop(&mut self) {
        self.lifecycle.close();
    }
}

/// Sets the child's data every `every`, creating it (a TTL node) when missing. A touch that
/// fails (the parent not there yet, the connection down, or a reply lost: the core ends a
/// data write whose reply was lost with `OutcomeUnknown` and does not send it again) is tried
/// again on the framework's cleanup backoff (50 ms doubling to 2 s, at most `every`), not a
/// whole interval later: a touch applied twice only refreshes the child twice, while one
/// skipped leaves the child untouched for up to twice the interval (the whole TTL, with the
/// default factor of 2), so that it could expire. Ends once `stopped` resolves (the node
/// closed: its sender was dropped) or the framework closed.
async fn touch_forever(
    fw: CuratorFramework,
    child: String,
    ttl: Duration,
    every: Duration,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut retry = fw.cleanup_retry_loop();
    let mut next = tokio::time::Instant::now() + every;
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        if fw.is_closed() {
            return;
        }
        match touch(&fw, &child, ttl).await {
            Ok(()) => {
                retry.reset();
                next = tokio::time::Instant::now() + every;
            }
            Err(err) => {
                let Some(pause) = retry.next_pause_after_failure() else { return };
                let pause = pause.min(every);
                tracing::debug!(path = %child, error = %err, ?pause, "persistent TTL node: touch failed; trying again");
                next = tokio::time::Instant::now() + pause;
            }
        }
    }
}

/// One touch: sets the child's data, or makes the child when it is missing.
async fn touch(fw: &CuratorFramework, child: &str, ttl: Duration) -> Result<()> {
    tracing::debug!(path = %child, "persistent TTL node: touch");
    match fw.set_data().for_path(child, Vec::new()).await {
        Err(CuratorError::NoNode { .. }) => {
            tracing::debug!(path = %child, "persistent TTL node: create the touched child");
            fw.create()
                .or_set_data()
                .with_mode(CreateMode::PersistentWithTtl)
                .with_ttl(ttl)
                .for_path(child, Vec::new())
                .await
                .map(drop)
        }
        other => other.map(drop),
    }
}
