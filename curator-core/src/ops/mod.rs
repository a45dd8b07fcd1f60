//! Curator's fluent operations. Each builder ends in [`Pending`], which is awaited in the
//! foreground or sent to the background with [`Pending::in_background`].

pub mod create;
pub mod delete;
pub(crate) mod guarded;
pub(crate) mod ordered;
pub(crate) mod outcome;
pub mod read;
pub mod reconfig;
pub mod remove_watch;
pub mod transaction;
pub mod watch;
pub mod write;

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::background::{BackgroundCallback, CuratorEvent, CuratorEventType, EventData};
use crate::error::{CuratorError, Result};
use crate::framework::CuratorFramework;

pub use crate::task::BoxFuture;

/// The kind of node a create makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CreateMode {
    /// Lives until deleted.
    #[default]
    Persistent,
    /// Persistent, with a ten-digit sequence number appended to the name.
    PersistentSequential,
    /// Deleted when the session that created it ends.
    Ephemeral,
    /// Ephemeral, with a sequence number.
    EphemeralSequential,
    /// Deleted by the server some time after its last child is deleted.
    Container,
    /// Persistent, deleted by the server when it has had no children and no change for the TTL
    /// (set with `with_ttl`; needs `extendedTypesEnabled` on the server).
    PersistentWithTtl,
    /// Persistent sequential with a TTL.
    PersistentSequentialWithTtl,
}

impl CreateMode {
    /// True for the sequential modes.
    pub fn is_sequential(self) -> bool {
        matches!(self, Self::PersistentSequential | Self::EphemeralSequential | Self::PersistentSequentialWithTtl)
    }

    /// True for the ephemeral modes.
    pub fn is_ephemeral(self) -> bool {
        matches!(self, Self::Ephemeral | Self::EphemeralSequential)
    }

    /// True for the TTL modes.
    pub fn is_ttl(self) -> bool {
        matches!(self, Self::PersistentWithTtl | Self::PersistentSequentialWithTtl)
    }

    pub(crate) fn to_zk(self) -> zk::CreateMode {
        match self {
            Self::Persistent | Self::PersistentWithTtl => zk::CreateMode::Persistent,
            Self::PersistentSequential | Self::PersistentSequentialWithTtl => zk::CreateMode::PersistentSequential,
            Self::Ephemeral => zk::CreateMode::Ephemeral,
            Self::EphemeralSequential => zk::CreateMode::EphemeralSequential,
            Self::Container => zk::CreateMode::Container,
        }
    }
}

/// An operation ready to run: `.await` it, or hand it to the background.
#[must_use = "an operation does nothing until awaited or sent to the background"]
pub struct Pending<T> {
    fw: CuratorFramework,
    kind: CuratorEventType,
    path: String,
    future: BoxFuture<Result<T>>,
    /// Sends nothing to the server (bad input, `locally()`): in the background it neither
    /// waits for a session nor queues behind operations that do.
    local: bool,
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("kind", &self.kind).field("path", &self.path).finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Pending<T> {
    pub(crate) fn new(
        fw: &CuratorFramework,
        kind: CuratorEventType,
        path: &str,
        future: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Self {
        Self { fw: fw.clone(), kind, path: path.to_string(), future: Box::pin(future), local: false }
    }

    /// A pending operation that fails at once (bad input found while building it).
    pub(crate) fn failed(fw: &CuratorFramework, kind: CuratorEventType, path: &str, err: CuratorError) -> Self {
        Self::new(fw, kind, path, async move { Err(err) }).sending_nothing()
    }

    /// Marks an operation that sends nothing to the server (a removal `locally()`): sent to
    /// the background, it runs at once instead of waiting for a session.
    pub(crate) fn sending_nothing(mut self) -> Self {
        self.local = true;
        self
    }
}

impl<T: EventData + Send + 'static> Pending<T> {
    /// Runs the operation in the background and calls `callback` with its event (success or
    /// failure) on the blocking pool.
    ///
    /// **Order.** Background operations reach the server in the order they were submitted,
    /// as Curator's do. With a session at hand (connected, the namespace, if any, made) and no
    /// earlier background operation still waiting for one, the operation's first request is
    /// queued on the session before this returns: everything issued after it, in the
    /// foreground or the background, reaches the server after it (add a watch in the
    /// background, then write: the watch is in place for the write). Otherwise (no session
    /// yet, a suspended connection, or earlier background operations still waiting) it waits
    /// behind those, up to the connection timeout from now, and goes out when a session can
    /// take it: still after every background operation submitted before it, but a foreground
    /// operation issued meanwhile may reach the server first. An operation that sends nothing
    /// (a removal `locally()`, bad input) waits for nothing: its callback comes at once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// # fw.start()?;
    /// use curator_core::CuratorEventType;
    ///
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// fw.create().for_path("/jobs", Vec::new()).in_background(move |_fw, event| {
    ///     let _ = tx.send((event.event_type, event.path, event.error.is_none()));
    /// });
    /// assert_eq!(rx.recv().await, Some((CuratorEventType::Create, "/jobs".to_string(), true)));
    /// # Ok(()) }
    /// ```
    pub fn in_background(self, callback: impl Fn(&CuratorFramework, CuratorEvent) + Send + Sync + 'static) {
        self.spawn(Some(Arc::new(callback)));
    }

    /// Runs the operation in the background and delivers its event to the framework's
    /// [`CuratorListener`](crate::background::CuratorListener)s (errors nobody receives go to
    /// the unhandled-error listeners). It reaches the server in the order
    /// [`in_background`](Self::in_background) says.
    pub fn in_background_to_listeners(self) {
        self.spawn(None);
    }

    /// Sends the operation behind earlier background operations of the framework: they reach
    /// the server in the order they were submitted, and, with a session at hand, before
    /// whatever is issued after this returns (module `ordered`). One that sends nothing runs at
    /// once.
    fn spawn(self, callback: Option<BackgroundCallback>) {
        let Pending { fw, kind, path, future, local } = self;
        let ready = (!local).then(|| fw.session_ready(&path));
        let (queue, queue_path) = (fw.clone(), path.clone());
        let run = Box::pin(async move {
            let result = future.await;
            let mut event = CuratorEvent::new(kind, &path);
            match &result {
                Ok(value) => value.fill(&mut event),
                Err(err) => {
                    event.result_code = err.code();
                    event.error = Some(err.clone());
                }
            }
            fw.deliver(event, callback);
        });
        match ready {
            Some(ready) => {
                let connected = queue.connection_state().is_connected();
                queue.inner.background.submit(&queue_path, connected, ready, run);
            }
            None => {
                tracing::trace!(path = %queue_path, "background operation that sends nothing: run at once");
                ordered::start(run);
            }
        }
    }
}

impl CuratorFramework {
    /// A background operation's wait for its turn in the queue (module `ordered`): until a
    /// session can take its request. The operation waits for a session itself (up to the
    /// connection timeout) and reports any error; waiting here as well only keeps its place in
    /// line. Bounded by its own connection timeout from now (its submission), so that a queue
    /// built up during an outage does not add up waits.
    fn session_ready(&self, path: &str) -> BoxFuture<()> {
        let (fw, path) = (self.clone(), path.to_string());
        let limit = crate::retry::deadline::deadline_after(tokio::time::Instant::now(), fw.connection_timeout());
        Box::pin(async move {
            if tokio::time::timeout_at(limit, fw.session_for(&path)).await.is_err() {
                tracing::debug!(path = %path, "background operation goes on without a connection");
            }
        })
    }
}

/// What operations hand out may move between tasks and threads.
const _: () = {
    const fn send<T: Send>() {}
    send::<Pending<String>>();
};

impl<T: Send + 'static> IntoFuture for Pending<T> {
    type Output = Result<T>;
    type IntoFuture = BoxFuture<Result<T>>;

    fn into_future(self) -> Self::IntoFuture {
        self.future
    }
}

/// Who hears a one-shot watch set by a read.
#[derive(Clone, Default)]
pub(crate) enum WatchTarget {
    #[default]
    None,
    /// `.watched()`: the framework's listeners get a `Watched` event.
    Listeners,
    /// `.using_watcher(f)`.
    Callback(Arc<dyn Fn(zk::WatchedEvent) + Send + Sync>),
}

impl WatchTarget {
    pub(crate) fn is_some(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// Waits for the watch in a task of its own and tells whoever asked, unless
    /// [`remove_all`](crate::WatchesBuilder::remove_all) ends it first (then the watcher is
    /// dropped, which removes it, and nobody is told).
    pub(crate) fn deliver(
        &self,
        fw: &CuratorFramework,
        path: &str,
        kind: remove_watch::WatcherType,
        watcher: zk::OneshotWatcher,
    ) {
        let (fw, path, target) = (fw.clone(), path.to_string(), self.clone());
        let mut held = fw.hold_watch(&path, kind);
        crate::task::spawn_detached(async move {
            // Ended by `remove_all`: the watcher went with the future; the `Ack` goes now.
            let Ok(event) = held.until_removed(watcher.changed()).await else { return };
            // Fired: no longer there for `remove_all` to find.
            drop(held);
            tracing::debug!(path = %path, event = ?event.event_type, state = ?event.session_state, "watch fired");
            match target {
                WatchTarget::None => {}
                WatchTarget::Listeners => {
                    let mut e = CuratorEvent::new(CuratorEventType::Watched, &path);
                    e.watched_event = Some(event);
                    fw.deliver(e, None);
                }
                WatchTarget::Callback(f) => crate::listeners::call_user(move || f(event)),
            }
        });
    }
}

/// A one-shot watch returned by the `for_path_and_watch` reads. Removed from the server when
/// dropped before it fired, or with [`watches().remove(watch)`](crate::WatchesBuilder::remove)
/// to hear the server's answer.
#[derive(Debug)]
pub struct Watch {
    inner: zk::OneshotWatcher,
    path: String,
    kind: remove_watch::WatcherType,
}

impl Watch {
    pub(crate) fn new(inner: zk::OneshotWatcher, path: &str, kind: remove_watch::WatcherType) -> Self {
        Self { inner, path: path.to_string(), kind }
    }

    /// The path the watch was set on (relative to the framework's namespace).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// [`Data`](remove_watch::WatcherType::Data) for a watch set by `check_exists` or
    /// `get_data`, [`Children`](remove_watch::WatcherType::Children) for one set by
    /// `get_children`.
    pub fn watcher_type(&self) -> remove_watch::WatcherType {
        self.kind
    }

    pub(crate) fn into_raw(self) -> zk::OneshotWatcher {
        self.inner
    }

    /// Waits for the watch to fire: a change of the node, or a session event (disconnection or
    /// expiry), after which the watch is gone.
    pub async fn changed(self) -> zk::WatchedEvent {
        self.inner.changed().await
    }

    /// Removes the watch from the server (zookeeper-client sends a RemoveWatches request, unless
    /// the watch fired already).
    pub fn remove(self) {
        drop(self.inner);
    }

    /// Ends a watch we no longer want that a request of ours has fired or is about to fire,
    /// without a RemoveWatches request: see [`watch::let_fire`]. True if it fired.
    pub async fn let_fire(self) -> bool {
        watch::let_fire(self.inner.changed()).await
    }
}

impl EventData for (Vec<u8>, zk::Stat, Watch) {
    fn fill(&self, event: &mut CuratorEvent) {
        event.data = Some(self.0.clone());
        event.stat = Some(self.1);
    }
}
impl EventData for (Option<zk::Stat>, Watch) {
    fn fill(&self, event: &mut CuratorEvent) {
        event.stat = self.0;
    }
}
impl EventData for (Vec<String>, zk::Stat, Watch) {
    fn fill(&self, event: &mut CuratorEvent) {
        event.children = Some(self.0.clone());
        event.stat = Some(self.1);
    }
}

/// Bytes counted for each operation of a request besides its path, data and ACLs, rounded up:
/// a multi header (9), length prefixes (3 x 4), a version or flags (4) and a TTL (8).
const OP_FIXED_LEN: usize = 40;

/// Bytes counted for each ACL entry besides its scheme and id: the permissions and two length
/// prefixes.
const ACL_FIXED_LEN: usize = 12;

/// The size counted for one operation of a request on `path` (relative to `fw`'s namespace)
/// with `data_len` bytes of data and `acl`: what
/// [`max_request_len`](crate::CuratorFrameworkBuilder::max_request_len) bounds.
pub(crate) fn op_len(fw: &CuratorFramework, path: &str, data_len: usize, acl: &[zk::Acl]) -> usize {
    let namespace = fw.namespace().map_or(0, str::len);
    let acl: usize = acl.iter().map(|a| ACL_FIXED_LEN + a.scheme().len() + a.id().len()).sum();
    OP_FIXED_LEN + namespace + path.len() + data_len + acl
}

/// Refuses a request of `len` bytes (the sum of [`op_len`] over its operations) larger than
/// the framework sends: the server would close the connection, the retry loop would send it
/// again, and every lock of the framework would report lost.
pub(crate) fn check_request_len(fw: &CuratorFramework, path: &str, len: usize) -> Result<()> {
    let max = fw.config().max_request_len;
    if len > max {
        tracing::debug!(path = %crate::error::ShortPath(path), len, max, "request too large: not sent");
        return Err(CuratorError::DataTooLarge { path: path.to_string(), len, max });
    }
    Ok(())
}

/// Refuses an empty ACL list (the server would answer `InvalidAcl`) before anything is sent.
pub(crate) fn check_acl(path: &str, acl: &[zk::Acl]) -> Result<()> {
    if acl.is_empty() {
        return Err(CuratorError::InvalidAcl { path: path.to_string() });
    }
    Ok(())
}

/// Checks an expected version given by the user (-1 means any).
pub(crate) fn check_version(path: &str, version: Option<i32>) -> Result<()> {
    match version {
        Some(v) if v < -1 => {
            Err(CuratorError::InvalidArgument { path: path.to_string(), reason: format!("bad version {v}") })
        }
        _ => Ok(()),
    }
}

/// The longest TTL ZooKeeper takes: 2^40 - 1 ms (about 34 years).
pub const MAX_TTL: Duration = Duration::from_millis(0x00FF_FFFF_FFFF);

/// Checks a TTL as ZooKeeper counts it, in whole milliseconds from 1 ms to [`MAX_TTL`]:
/// [`InvalidArgument`](CuratorError::InvalidArgument) (on `path`) otherwise. Less than 1 ms
/// would go out as 0 ms, which the client sends as no TTL at all: a node that never expires.
/// `create().with_ttl` checks with it, and so do recipes that keep a TTL to create with later
/// (`PersistentNode`, `PersistentTtlNode`), when it is given.
pub fn check_ttl_value(path: &str, ttl: Duration) -> Result<()> {
    let bad = |reason: &str| Err(CuratorError::InvalidArgument { path: path.to_string(), reason: reason.into() });
    if ttl.is_zero() {
        bad("the TTL must be positive")
    } else if ttl < Duration::from_millis(1) {
        bad("the TTL must be at least 1 ms (ZooKeeper counts it in milliseconds)")
    } else if ttl > MAX_TTL {
        bad("the TTL is too long (ZooKeeper's limit is 2^40 - 1 ms)")
    } else {
        Ok(())
    }
}

/// Checks a TTL given by the user.
pub(crate) fn check_ttl(path: &str, mode: CreateMode, ttl: Option<Duration>) -> Result<()> {
    let bad = |reason: &str| Err(CuratorError::InvalidArgument { path: path.to_string(), reason: reason.into() });
    match (mode.is_ttl(), ttl) {
        (true, None) => bad("a TTL mode needs with_ttl()"),
        (true, Some(t)) => check_ttl_value(path, t),
        (false, Some(_)) => bad("with_ttl() needs a TTL mode"),
        _ => Ok(()),
    }
}
