//! [`CuratorFramework`]: one logical client over a sequence of ZooKeeper sessions.
//!
//! A `zookeeper_client::Client` whose session expired is dead for good. The framework keeps a
//! *session manager* task that owns the current client, turns its session events into
//! [`ConnectionState`] transitions, and opens a new session when the old one is lost. Operations
//! wait for a connection (up to the connection timeout), run one retry loop under the
//! [`RetryPolicy`], and always use whichever session is current.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::Instrument;
use zookeeper_client as zk;

use crate::builder::Config;
use crate::builder::CuratorFrameworkBuilder;
use crate::error::{CuratorError, Result};
use crate::event::{CuratorEvent, UnhandledError};
use crate::listeners::Listeners;
use crate::ops::ordered::Queue;
use crate::path;
use crate::retry::RetryPolicy;
pub use crate::shared::Session;
use crate::shared::{SessionSlot, Shared};
use crate::state::{ConnectionState, ConnectionStateEvent, ErrorPolicy};

mod retry;
mod states;
mod wait;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Latent,
    Started,
    Closed,
}

/// How lifecycle errors name the framework ("the framework is not started").
const FRAMEWORK: &str = "the framework";

#[derive(Debug)]
struct Namespace {
    path: String,
    ensured: AtomicBool,
}

impl Namespace {
    /// `"app"` or `"/app"` as `/app`; none for an absent or empty namespace.
    fn parse(namespace: Option<&str>) -> Result<Option<Arc<Namespace>>> {
        match namespace.map(|n| n.trim_matches('/')) {
            None | Some("") => Ok(None),
            Some(ns) => {
                let full = format!("/{ns}");
                path::validate(&full)?;
                Ok(Some(Arc::new(Namespace { path: full, ensured: AtomicBool::new(false) })))
            }
        }
    }
}

pub(crate) struct Inner {
    /// What the session manager shares with the framework (module `shared`). The framework
    /// holds the only lasting strong reference.
    shared: Arc<Shared>,
    lifecycle: Mutex<Lifecycle>,
    manager: Mutex<Option<tokio::task::JoinHandle<crate::session::Leftover>>>,
    pending_background: watch::Sender<usize>,
    pub(crate) listeners: Listeners<CuratorEvent>,
    pub(crate) unhandled: Listeners<UnhandledError>,
    /// Background operations, sent in the order they were submitted.
    pub(crate) background: Queue,
    /// The watches the framework holds for `watched()` and `using_watcher()`, for `remove_all()`.
    pub(crate) held_watches: crate::ops::remove_watch::HeldWatches,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("config", &self.shared.config).finish_non_exhaustive()
    }
}

/// One logical ZooKeeper client: connection states, retries, new sessions after expiry, and
/// Curator's fluent operations. Cheap to clone; clones share everything.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// use curator_core::{CuratorFramework, CreateMode};
///
/// let client = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// client.start()?;
/// let path = client
///     .create()
///     .creating_parents_if_needed()
///     .with_protection()
///     .with_mode(CreateMode::EphemeralSequential)
///     .for_path("/a/b", b"data".to_vec())
///     .await?;
/// assert!(path.starts_with("/a/_c_"));
/// client.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CuratorFramework {
    pub(crate) inner: Arc<Inner>,
    namespace: Option<Arc<Namespace>>,
}

impl CuratorFramework {
    /// A builder with Curator's defaults.
    pub fn builder() -> CuratorFrameworkBuilder {
        CuratorFrameworkBuilder::default()
    }

    /// A framework that is not started yet, from checked options.
    pub(crate) fn new(config: Config, namespace: Option<&str>) -> Result<Self> {
        let namespace = Namespace::parse(namespace)?;
        let inner = Inner {
            shared: Arc::new(Shared::new(config)),
            lifecycle: Mutex::new(Lifecycle::Latent),
            manager: Mutex::new(None),
            pending_background: watch::channel(0).0,
            listeners: Listeners::new(),
            unhandled: Listeners::new(),
            background: Queue::default(),
            held_watches: Default::default(),
        };
        Ok(CuratorFramework { inner: Arc::new(inner), namespace })
    }

    /// Starts the session manager on the current tokio runtime. Connecting happens in the
    /// background; see [`block_until_connected`](Self::block_until_connected).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = curator_test::TestingServer::start().await?;
    /// use std::time::Duration;
    /// use curator_core::{ConnectionState, CuratorError, CuratorFramework};
    ///
    /// let fw = CuratorFramework::builder().connect_string(server.connect_string()).build()?;
    /// fw.start()?; // sync: no I/O is awaited
    /// assert!(matches!(fw.start(), Err(CuratorError::AlreadyStarted { .. })));
    /// fw.block_until_connected(Duration::from_secs(10)).await?;
    /// assert_eq!(fw.connection_state(), ConnectionState::Connected);
    /// fw.close().await; // ends the session: its ephemeral nodes go
    /// assert!(matches!(fw.start(), Err(CuratorError::Closed)));
    /// # Ok(()) }
    /// ```
    pub fn start(&self) -> Result<()> {
        let mut lifecycle = self.inner.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
        match *lifecycle {
            Lifecycle::Started => return Err(CuratorError::AlreadyStarted { what: FRAMEWORK }),
            Lifecycle::Closed => return Err(CuratorError::Closed),
            Lifecycle::Latent => {}
        }
        let handle = tokio::runtime::Handle::try_current().map_err(|_| CuratorError::NoRuntime { what: FRAMEWORK })?;
        let shared = Arc::downgrade(&self.inner.shared);
        let shutdown = self.inner.shared.shutdown();
        self.inner.shared.hub.start(handle.clone());
        self.inner.listeners.start(handle.clone());
        self.inner.unhandled.start(handle.clone());
        let task = handle.spawn(crate::session::run(shared, shutdown));
        *self.inner.manager.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        *lifecycle = Lifecycle::Started;
        Ok(())
    }

    /// Waits until connected, at most `timeout`. The error says why no connection was had:
    /// [`NotStarted`](CuratorError::NotStarted) at once if the framework is not started,
    /// [`Closed`](CuratorError::Closed) once it is closed, [`NotConnected`](CuratorError::NotConnected)
    /// with the last failure after `timeout`, and at once `Tls` (with the `tls` feature) or
    /// [`AuthFailed`](CuratorError::AuthFailed) when the latest attempt to open a session failed
    /// so (docs/architecture.md section 3.1).
    pub async fn block_until_connected(&self, timeout: Duration) -> Result<()> {
        self.check_started()?;
        let mut rx = self.inner.shared.hub.watch();
        let mut fatal = self.inner.shared.fatal();
        let wait = async move {
            tokio::select! {
                // A connection or a close wins over a recorded failure.
                biased;
                r = rx.wait_for(|e| e.state.is_connected() || e.state == ConnectionState::Closed) => {
                    r.map(|e| e.state.is_connected()).map_err(|_| CuratorError::Closed)
                }
                Ok(err) = fatal.wait_for(Option::is_some) => Err(err.clone().unwrap_or(CuratorError::Closed)),
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Err(err)) => Err(err),
            Ok(_) => Err(CuratorError::Closed),
            Err(_) => {
                let last = self.inner.shared.last_connect_error();
                Err(CuratorError::NotConnected {
                    detail: format!(
                        "could not connect to {} within {timeout:?}{}",
                        self.config().ensemble.current(),
                        last.map(|e| format!(": {e}")).unwrap_or_default()
                    ),
                })
            }
        }
    }

    /// Closes the framework: waits (bounded) for pending guaranteed deletes, ends the session at
    /// once so that its ephemeral nodes go, and stops every background task. Idempotent.
    pub async fn close(&self) {
        {
            let mut lifecycle = self.inner.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
            if *lifecycle == Lifecycle::Closed {
                return;
            }
            *lifecycle = Lifecycle::Closed;
        }
        let mut pending = self.inner.pending_background.subscribe();
        let drained = tokio::time::timeout(self.config().max_close_wait, pending.wait_for(|n| *n == 0)).await.is_ok();
        if !drained {
            let left = *pending.borrow();
            tracing::warn!(pending = left, "closing with background operations still pending");
        }
        let shared = &self.inner.shared;
        let old = shared.close_session();
        shared.shut_down();
        let manager = self.inner.manager.lock().unwrap_or_else(|e| e.into_inner()).take();
        let leftover = match manager {
            Some(task) => task.await.ok(),
            None => None,
        };
        if let Some(session) = old {
            self.end_session(session).await;
        }
        // The manager's watches go once the session has ended: no RemoveWatches for them.
        drop(leftover);
        shared.hub.publish(ConnectionStateEvent {
            state: ConnectionState::Closed,
            at: Instant::now(),
            new_session: false,
            ..shared.hub.current()
        });
        shared.hub.close_streams();
        self.inner.listeners.close();
        self.inner.unhandled.close();
    }

    /// Ends `session` on the server: dropping the last clone of its client sends CloseSession.
    /// Waits (bounded) for that. A clone kept elsewhere keeps the session open until it is
    /// dropped, which is why [`Session`] must not be held across long waits. With the ensemble
    /// tracker on, clients are detached (module `ensemble`) and a client re-established on the
    /// session closes it instead, whoever still holds a clone (`session::Closer`).
    async fn end_session(&self, session: Session) {
        if !self.config().ensemble.enabled() {
            return crate::session::end_attached(session.client).await;
        }
        match crate::session::Closer::new(self.config()) {
            Ok(closer) => closer.end(session.client).await,
            Err(err) => tracing::warn!(error = %err, "could not close the session (it expires on the server)"),
        }
    }

    /// Resolves once [`close`](Self::close) is about to end the session (after it has waited
    /// for pending background work), and at once if it already has. A task that keeps a clone
    /// of a session's client across waits (a cache pipelining its reads) must drop it then:
    /// the session ends only once every clone is dropped.
    pub async fn closing(&self) {
        let mut shutdown = self.inner.shared.shutdown();
        let _ = shutdown.wait_for(|closing| *closing).await;
    }

    /// Resolves once the client of [`Session::epoch`] `epoch` is no longer the framework's
    /// current one: its session was lost or moved to another client (module
    /// docs/architecture.md section 3.7), or the framework closed. A task that keeps a clone of a
    /// session's client across waits (a cache pipelining its reads) must drop it then: a moved
    /// session's old client, kept alive, could reconnect to a server that left the ensemble but
    /// still serves, and take the session back from the new client.
    pub async fn client_gone(&self, epoch: u64) {
        let mut rx = self.inner.shared.session();
        let _ = rx.wait_for(|slot| !matches!(slot, SessionSlot::Live(s) if s.epoch == epoch)).await;
    }

    /// True once [`close`](Self::close) has begun.
    pub fn is_closed(&self) -> bool {
        *self.inner.lifecycle.lock().unwrap_or_else(|e| e.into_inner()) == Lifecycle::Closed
    }

    /// A handle that does not keep the framework alive (for listeners the framework owns).
    pub(crate) fn downgrade(&self) -> WeakFramework {
        WeakFramework { inner: Arc::downgrade(&self.inner), namespace: self.namespace.clone() }
    }

    /// The connect string the next connection uses: the builder's, or, with the ensemble
    /// tracker on, the servers of the ensemble's latest configuration (Curator's
    /// `getCurrentConfig`, as a connect string; docs/architecture.md section 3.7).
    pub fn current_connect_string(&self) -> String {
        self.config().ensemble.current()
    }

    /// The error policy locks and leaders use.
    pub fn error_policy(&self) -> ErrorPolicy {
        self.config().error_policy
    }

    /// The retry policy of this framework.
    pub fn retry_policy(&self) -> &Arc<dyn RetryPolicy> {
        &self.config().retry_policy
    }

    /// The connection timeout.
    pub fn connection_timeout(&self) -> Duration {
        self.config().connection_timeout
    }

    /// The data creates use when given none.
    pub fn default_data(&self) -> &[u8] {
        &self.config().default_data
    }

    /// The ACLs the framework's provider gives the node at `path` (recipes use it for the nodes
    /// they create). `path` is relative to this handle's namespace; the provider is asked with
    /// the full path, namespace included, as in Curator.
    pub fn acl_for_path(&self, path: &str) -> Vec<zk::Acl> {
        let full = self.namespace().map(|ns| path::make_path(ns, path));
        self.config().acl_provider.acl_for_path(full.as_deref().unwrap_or(path))
    }

    /// Whether `creating_parent_containers_if_needed` makes containers (true by default) or
    /// plain persistent nodes.
    pub fn use_container_parents(&self) -> bool {
        self.config().use_container_parents
    }

    /// Runs `work` in the background as part of this framework: [`close`](Self::close) waits
    /// (a bounded time) for it to finish. For cleanups a recipe must not lose, such as deleting
    /// the node of an abandoned acquire.
    pub fn spawn_background<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let ticket = self.track_background();
        crate::task::spawn_detached(async move {
            let _ticket = ticket;
            work.await;
        });
    }

    /// The `framework` label of this framework's connection-state gauge (docs/operations.md
    /// section 6): the builder's [`metrics_name`](CuratorFrameworkBuilder::metrics_name), or
    /// its connect string followed by its namespace.
    pub fn metrics_name(&self) -> &str {
        &self.inner.shared.config.metrics_name
    }

    /// Whether `other` is a handle on the same framework (the same connection and sessions),
    /// whatever its namespace.
    pub(crate) fn same_connection(&self, other: &CuratorFramework) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The namespace (`/app`), if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_ref().map(|n| n.path.as_str())
    }

    /// A handle on the same connection whose paths are under `namespace` (or under none).
    pub fn using_namespace(&self, namespace: Option<&str>) -> Result<CuratorFramework> {
        let namespace = Namespace::parse(namespace)?;
        Ok(CuratorFramework { inner: self.inner.clone(), namespace })
    }

    /// Waits (up to the connection timeout, or the task's [deadline](crate::retry::deadline) if
    /// earlier) for a connected session and returns it, rooted at this handle's namespace.
    /// Recipes use it to pipeline requests on one session.
    pub async fn session(&self) -> Result<Session> {
        self.session_for("").await
    }

    pub(crate) async fn session_for(&self, op_path: &str) -> Result<Session> {
        let root = self.live_session(op_path).await?;
        let Some(ns) = &self.namespace else { return Ok(root) };
        if !ns.ensured.load(Ordering::Acquire) {
            let acl = self.config().acl_provider.as_ref();
            match crate::parents::ensure_namespace(&root.client, &ns.path, acl).await {
                Ok(()) => ns.ensured.store(true, Ordering::Release),
                Err(err) => {
                    tracing::debug!(namespace = %ns.path, error = %err, "could not ensure namespace");
                    if err.is_retryable() {
                        return Err(err);
                    }
                }
            }
        }
        let client = root.client.clone().chroot(ns.path.as_str()).map_err(|_| CuratorError::InvalidPath {
            path: ns.path.clone(),
            reason: "namespace is not a valid chroot",
        })?;
        Ok(Session { client, ..root })
    }

    /// Fails at once with [`NotStarted`](CuratorError::NotStarted) before
    /// [`start`](Self::start); waiting for a connection that nothing is opening would only
    /// end in a misleading timeout.
    fn check_started(&self) -> Result<()> {
        match *self.inner.lifecycle.lock().unwrap_or_else(|e| e.into_inner()) {
            Lifecycle::Latent => Err(CuratorError::NotStarted { what: FRAMEWORK }),
            Lifecycle::Closed | Lifecycle::Started => Ok(()),
        }
    }

    /// Runs `attempt` under the retry policy: once, and again while the error is retryable and
    /// the policy allows. Each attempt gets the current session and the attempt number (0 for
    /// the first), so that an attempt after an unknown outcome can look for its own earlier work.
    /// An attempt still running when [`close`](Self::close) ends the session is cut short with
    /// [`Closed`](CuratorError::Closed) (its request may or may not have been applied).
    pub async fn call_with_retry<T, F, Fut>(&self, op: &'static str, path: &str, mut attempt: F) -> Result<T>
    where
        F: FnMut(Session, u32) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let span = tracing::debug_span!("zk", op, path);
        async {
            let started = std::time::Instant::now();
            let mut retry = self.retry_loop();
            let mut shutdown = self.inner.shared.shutdown();
            loop {
                let result = match self.session_for(path).await {
                    Ok(session) => tokio::select! {
                        biased;
                        r = attempt(session, retry.retries()) => r,
                        _ = shutdown.wait_for(|closing| *closing) => Err(CuratorError::Closed),
                    },
                    Err(err) => Err(err),
                };
                match result {
                    Ok(value) => {
                        tracing::debug!(retries = retry.retries(), "ok");
                        crate::metrics::operation_done(op, started, None);
                        return Ok(value);
                    }
                    Err(err) => {
                        let kind = crate::metrics::error_kind(&err);
                        match retry.on_error(err).await {
                            Ok(()) => crate::metrics::operation_retried(op, kind),
                            Err(err) => {
                                crate::metrics::operation_done(op, started, Some(&err));
                                return Err(err);
                            }
                        }
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Checks data against the framework's `max_data_len`:
    /// [`DataTooLarge`](CuratorError::DataTooLarge) past it. For recipes that keep data to
    /// write later, so that bad input fails when it is given.
    pub fn check_data(&self, path: &str, data: &[u8]) -> Result<()> {
        let max = self.config().max_data_len;
        if data.len() > max {
            return Err(CuratorError::DataTooLarge { path: path.to_string(), len: data.len(), max });
        }
        Ok(())
    }

    /// Counts a background operation that `close()` should wait for (bounded).
    pub(crate) fn track_background(&self) -> BackgroundTicket {
        self.inner.pending_background.send_modify(|n| *n += 1);
        BackgroundTicket { inner: self.inner.clone() }
    }

    /// Whether creates and data writes compress, and data reads decompress, unless told
    /// `uncompressed()` / `undecompressed()`
    /// ([`enable_compression`](CuratorFrameworkBuilder::enable_compression)).
    pub fn compression_enabled(&self) -> bool {
        self.config().compression_enabled
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.shared.config
    }
}

impl CuratorFrameworkBuilder {
    /// Checks the options and builds a framework that is not started yet. Bad options are an
    /// [`InvalidArgument`](CuratorError::InvalidArgument) saying which; TLS certificates or keys
    /// that cannot be read are a `CuratorError::Tls` error (with the `tls` feature).
    ///
    /// ```
    /// use std::time::Duration;
    /// use curator_core::{CuratorError, CuratorFramework};
    ///
    /// let fw = CuratorFramework::builder().connect_string("127.0.0.1:2181").build()?; // no I/O
    /// assert!(!fw.is_closed());
    /// match CuratorFramework::builder().connect_string("127.0.0.1:2181").connection_timeout(Duration::ZERO).build() {
    ///     Err(CuratorError::InvalidArgument { reason, .. }) => assert!(reason.contains("connection timeout")),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), CuratorError>(())
    /// ```
    pub fn build(self) -> Result<CuratorFramework> {
        let (config, namespace) = self.into_config()?;
        CuratorFramework::new(config, namespace.as_deref())
    }
}

/// A [`CuratorFramework`] that does not keep it alive.
#[derive(Debug, Clone)]
pub(crate) struct WeakFramework {
    inner: std::sync::Weak<Inner>,
    namespace: Option<Arc<Namespace>>,
}

impl WeakFramework {
    pub(crate) fn upgrade(&self) -> Option<CuratorFramework> {
        Some(CuratorFramework { inner: self.inner.upgrade()?, namespace: self.namespace.clone() })
    }
}

/// Held while a background operation runs; `close()` waits (bounded) for none to be left.
pub(crate) struct BackgroundTicket {
    inner: Arc<Inner>,
}

impl Drop for BackgroundTicket {
    fn drop(&mut self) {
        self.inner.pending_background.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The framework and what it hands out may move between tasks and threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<CuratorFramework>();
    send_sync::<Session>();
    send_sync::<crate::PersistentWatch>();
};
