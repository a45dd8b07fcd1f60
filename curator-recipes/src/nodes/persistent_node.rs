//! [`PersistentNode`]: a node that stays in place as long as its handle lives.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_core::{path, CreateMode, CuratorError, CuratorFramework, Result};
use curator_core::{EventStream, ListenerId, Listeners};
use curator_core::{LifeState, Lifecycle};
use tokio::sync::{watch, Notify};

use super::keeper;
use super::shared::{lock, Config, DataSlot, Shared};

/// Keeps a node in place "no matter what" (Curator's `PersistentNode`): it is created in the
/// background, created again when someone deletes it or when the session that owned it ends,
/// and deleted when the node is closed or dropped. The data given with
/// [`set_data`](Self::set_data) is kept across re-creates.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// # let fw = curator_core::CuratorFramework::builder().connect_string(server.connect_string()).build()?;
/// # fw.start()?;
/// use std::time::Duration;
/// use curator_core::CreateMode;
/// use curator_recipes::PersistentNode;
///
/// let node = PersistentNode::builder(&fw, "/services/web/instance-1")
///     .mode(CreateMode::Ephemeral)
///     .data(b"10.0.0.7:8080".to_vec())
///     .build()?;
/// node.start()?;
/// node.ready().await?; // created, or refused for good (NoAuth...): then closed
/// if node.wait_for_initial_create(Duration::from_secs(10)).await {
///     tracing::info!(path = ?node.actual_path(), "registered");
/// }
/// node.set_data(b"10.0.0.7:8081".to_vec())?; // written now, and after every re-create
/// node.close().await; // deletes the node
/// # Ok(()) }
/// ```
///
/// # What it does when the node is in the way
/// A create that finds the node already there looks at who owns it:
/// - a node of the current session (an earlier attempt whose reply was lost), or any node in a
///   persistent mode, is adopted, and its data is set to ours if it differs (Curator adopts too);
/// - an ephemeral node of an *earlier session of this `PersistentNode`* is deleted and created
///   again at once. This is the outage case: a server that restarts after the session timeout
///   brings back the old session, and its node, for another session timeout; Curator waits
///   for it to expire, so the member is missing meanwhile, while this node is back as soon as
///   the client has a session again;
/// - an ephemeral node of any other session is left alone: it is someone else's (another
///   process given the same path). The node waits for it to go, then creates its own, so the
///   path is never held twice.
///
/// # After a lost reply
/// No write is sent again on a guess (docs/architecture.md sections 4.4 and 13). A create whose
/// reply was lost is decided by its protected name ([`protection`](PersistentNodeBuilder::protection)),
/// by its data when declared [unique](PersistentNodeBuilder::unique_data) (a sequential node's
/// first create: found among its parent's children), or, at a path known before the reply, by
/// looking at the node there (as when it is in the way, above). An unprotected sequential
/// node's first create with neither is not made again while the node it may have made can
/// stand: an ephemeral one waits for the end of that session, a persistent one is refused with
/// [`CuratorError::OutcomeUnknown`]. A data write whose reply was lost is looked at again (our
/// data there: written; otherwise written again). The close deletes the node it made by its
/// `czxid`, and a node whose identity it does not know only if it would adopt it: never another
/// session's ephemeral node.
///
/// # Differences from Curator
/// - A first create refused for good ([`CuratorError::is_permanent`]: no permission, a bad
///   ACL) closes the node, and [`ready`](Self::ready) returns the refusal; Curator only logs
///   it and tries again after the next reconnection.
/// - A reconnection on the same session checks the node with one request and leaves a node
///   that is still ours alone, instead of writing its data again.
/// - Dropping the handle closes it: the node is deleted in the background (a guaranteed
///   delete, which [`CuratorFramework::close`] waits for, a bounded time). Closing the
///   framework stops the node too; the session's end takes an ephemeral node with it.
/// - Later errors that retrying cannot fix (no permission, a missing parent without parent
///   creation) are kept in [`last_error`](Self::last_error), and the node tries again after the
///   next connection change or [`set_data`](Self::set_data), as Curator does after a
///   reconnection.
pub struct PersistentNode {
    shared: Arc<Shared>,
    /// Started by `start`; closed by `close`, the drop, or a refused first create. Shared with
    /// the recipes built on the node, which wait for its first outcome in a task of their own.
    lifecycle: Arc<Lifecycle>,
    /// The keeper's end signal, handed to the keeper by `start` (dropped by a close before
    /// any start, so that the close does not wait for a keeper that never ran).
    finish: Mutex<Option<watch::Sender<bool>>>,
    /// Turns true when the keeper's task has ended (its sender is dropped if the task panics).
    finished: watch::Receiver<bool>,
}

impl std::fmt::Debug for PersistentNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentNode")
            .field("path", &self.shared.config.path)
            .field("mode", &self.shared.config.mode)
            .field("actual_path", &self.actual_path())
            .finish_non_exhaustive()
    }
}

/// Builder of a [`PersistentNode`]; see [`PersistentNode::builder`].
#[derive(Debug, Clone)]
pub struct PersistentNodeBuilder {
    fw: CuratorFramework,
    config: Config,
    data: Vec<u8>,
}

impl PersistentNodeBuilder {
    /// The create mode (default `Ephemeral`). After the first create, a sequential node is
    /// created again under the name it got, in the mode without the sequence.
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Protected names (`_c_<uuid>-<name>`, Curator's `withProtection`): a create whose reply
    /// was lost is found by its name. Recommended with sequential modes, whose name is not known
    /// until the reply comes (or [`unique_data`](Self::unique_data), which keeps the name).
    pub fn protection(mut self, protected: bool) -> Self {
        self.config.protected = protected;
        self
    }

    /// Declares the node's data unique: the data given to the builder and to every
    /// [`set_data`](PersistentNode::set_data) holds an id that no other write, by any client,
    /// puts in this node or in another child of its parent (a service instance's JSON, with its
    /// id and registration time). The data is then the evidence of a create whose reply was lost
    /// (docs/architecture.md sections 4.4 and 13):
    /// - a sequential node's first create, which leaves no name to look for without
    ///   [`protection`](Self::protection), is found among its parent's children by its data (an
    ///   ephemeral one on the current session): that node is kept, and published as created;
    ///   none there, the node is created again;
    /// - a create at a known path is decided by the node's data, as the core's
    ///   [`unique_data`](curator_core::CreateBuilder::unique_data) decides it.
    ///
    /// Data taken with [`adopt_data`](PersistentNode::adopt_data) is another client's, so no
    /// evidence. Data that is not unique makes this unsound: a node of the same data under the
    /// same parent could be taken for ours.
    ///
    /// Without it or protection, an unprotected sequential node whose first create lost its
    /// reply is not created again while a node that create may have made can stand: an
    /// ephemeral one until the session that may hold it has ended; a persistent one never (its
    /// first create is then refused with [`CuratorError::OutcomeUnknown`]).
    pub fn unique_data(mut self) -> Self {
        self.config.unique = true;
        self
    }

    /// The TTL, for the `PersistentWithTtl` and `PersistentSequentialWithTtl` modes (servers
    /// with `extendedTypesEnabled`).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config.ttl = Some(ttl);
        self
    }

    /// Create missing parents as containers (default `true`, as Curator's
    /// `useParentCreation`).
    pub fn creating_parents(mut self, parents: bool) -> Self {
        self.config.parents = parents;
        self
    }

    /// The node's first data (default: empty).
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    pub(crate) fn keep_on_close(mut self) -> Self {
        self.config.delete_on_close = false;
        self
    }

    /// Checks the settings and makes the node, latent: nothing is sent before
    /// [`start`](PersistentNode::start).
    ///
    /// # Errors
    /// A typed error: [`CuratorError::InvalidPath`] for an invalid path (a sequential mode
    /// allows a trailing `/`); [`CuratorError::InvalidArgument`] for a TTL mode without a TTL
    /// (or a TTL without a TTL mode) or a TTL ZooKeeper cannot take (under 1 ms or over
    /// [`MAX_TTL`](curator_core::MAX_TTL)); [`CuratorError::DataTooLarge`] for data over
    /// the framework's limit.
    pub fn build(self) -> Result<PersistentNode> {
        let config = self.config;
        if config.mode.is_sequential() {
            path::validate_sequential(&config.path)?;
        } else {
            path::validate(&config.path)?;
        }
        if config.path == "/" && !config.protected {
            return Err(CuratorError::InvalidPath { path: config.path, reason: "cannot keep the root node" });
        }
        let reason = match (config.mode.is_ttl(), config.ttl) {
            (true, None) => Some(format!("{:?} needs a TTL", config.mode)),
            (false, Some(_)) => Some(format!("a TTL needs a TTL mode, not {:?}", config.mode)),
            _ => None,
        };
        if let Some(reason) = reason {
            return Err(CuratorError::InvalidArgument { path: config.path, reason });
        }
        if let Some(ttl) = config.ttl {
            curator_core::check_ttl_value(&config.path, ttl)?;
        }
        self.fw.check_data(&config.path, &self.data)?;
        let shared = Arc::new(Shared {
            fw: self.fw,
            config,
            data: Mutex::new(DataSlot { bytes: self.data, version: 0, written: 0, written_zxid: 0, theirs: false }),
            actual: Mutex::new(None),
            last_error: watch::channel(None).0,
            created: Listeners::new(),
            initial: watch::channel(false).0,
            closing: watch::channel(false).0,
            wake: Notify::new(),
        });
        let (finish, finished) = watch::channel(false);
        Ok(PersistentNode {
            shared,
            lifecycle: Arc::new(Lifecycle::new("PersistentNode")),
            finish: Mutex::new(Some(finish)),
            finished,
        })
    }
}

impl PersistentNode {
    /// A builder for a node at `path`: ephemeral, unprotected, empty data, parents created.
    pub fn builder(fw: &CuratorFramework, path: &str) -> PersistentNodeBuilder {
        PersistentNodeBuilder {
            fw: fw.clone(),
            config: Config {
                path: path.to_string(),
                mode: CreateMode::Ephemeral,
                protected: false,
                unique: false,
                ttl: None,
                parents: true,
                delete_on_close: true,
            },
            data: Vec::new(),
        }
    }

    /// Starts keeping the node (Curator's `start`), in a task of its own that creates it (in
    /// the background: see [`ready`](Self::ready)), puts it back whenever it goes, and deletes
    /// it on close. Returns at once.
    ///
    /// # Errors
    /// [`CuratorError::AlreadyStarted`], [`CuratorError::AlreadyClosed`],
    /// [`CuratorError::NoRuntime`] outside a tokio runtime, [`CuratorError::Closed`] on a
    /// closed framework ([`Lifecycle`](curator_core::Lifecycle)); nothing is sent then.
    pub fn start(&self) -> Result<()> {
        self.lifecycle.start(&self.shared.fw, |started| {
            self.shared.created.start(started.handle().clone());
            let readiness = started.readiness();
            let finish = lock(&self.finish).take();
            // The node's own task, not `spawn_background`: the framework's close waits for that
            // kind of work, and the keeper runs as long as the handle lives. Its final delete
            // is a guaranteed delete, which the framework does track.
            let keeper = keeper::run(self.shared.clone(), readiness);
            started.spawn(async move {
                keeper.await;
                if let Some(finish) = finish {
                    let _ = finish.send(true);
                }
            });
            Ok(())
        })
    }

    /// Waits for the outcome of the first attempt to place the node: `Ok` once it was created
    /// or adopted, or once an attempt failed in a way retrying may mend (the node goes on
    /// trying in the background: see [`last_error`](Self::last_error)).
    ///
    /// # Errors
    /// The refusal of the first create, which closed the node
    /// ([`CuratorError::is_permanent`]: [`CuratorError::NoAuth`] for an ACL that refuses the
    /// client, [`CuratorError::InvalidAcl`]...; Curator only logs it);
    /// [`CuratorError::Closed`] when the framework closed first (the node closes with it);
    /// [`CuratorError::NotStarted`] before [`start`](Self::start);
    /// [`CuratorError::AlreadyClosed`] when closed before a first outcome.
    pub async fn ready(&self) -> Result<()> {
        self.lifecycle.ready().await
    }

    /// As [`ready`](Self::ready), a future that does not borrow the node: for the recipes
    /// built on it, which wait for it in a task of their own.
    pub(crate) fn first_outcome(&self) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        let lifecycle = self.lifecycle.clone();
        async move { lifecycle.ready().await }
    }

    /// Where the node is in its life: [`LifeState::Closed`] after [`close`](Self::close) or a
    /// refused first create.
    pub fn state(&self) -> LifeState {
        self.lifecycle.state()
    }

    /// Waits up to `timeout` for the first create (or adoption) of the node; true once done.
    /// False at once when the node is closed before it was first created.
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> bool {
        let mut initial = self.shared.initial.subscribe();
        let mut closing = self.shared.closing.subscribe();
        let mut finished = self.finished.clone();
        let created = async {
            let made = async { initial.wait_for(|done| *done).await.is_ok() };
            let closed = async { closing.wait_for(|closed| *closed).await.is_ok() };
            tokio::select! {
                made = made => made,
                // Closed: a create in flight is finished before the keeper ends, so wait for the
                // keeper and then look.
                _ = closed => {
                    let _ = finished.wait_for(|done| *done).await.is_ok();
                    let created = *self.shared.initial.borrow();
                    created
                }
            }
        };
        tokio::time::timeout(timeout, created).await.unwrap_or(false)
    }

    /// The node's full path (with its sequence number or protected prefix), once it was first
    /// created; `None` before.
    pub fn actual_path(&self) -> Option<String> {
        self.shared.actual_path()
    }

    /// The data the node is kept with.
    pub fn data(&self) -> Vec<u8> {
        lock(&self.shared.data).bytes.clone()
    }

    /// Sets the node's data: written at once in the background if the node is there, and used
    /// for every later re-create. Fails with
    /// [`DataTooLarge`](CuratorError::DataTooLarge) (and changes nothing) past the framework's
    /// limit, [`NotStarted`](CuratorError::NotStarted) before [`start`](Self::start), or
    /// [`AlreadyClosed`](CuratorError::AlreadyClosed) after [`close`](Self::close).
    pub fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        let data = data.into();
        self.shared.fw.check_data(&self.shared.config.path, &data)?;
        self.lifecycle.with_started(|()| ())?;
        {
            let mut slot = lock(&self.shared.data);
            slot.bytes = data;
            slot.version += 1;
            slot.theirs = false;
        }
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Takes `data` as the node's data without writing it: for data the node holds already
    /// because another client wrote it there (a service discovery's watched registration
    /// follows such edits). Every later re-create uses it, as after [`set_data`](Self::set_data).
    ///
    /// `mzxid` is the zxid of the write that put `data` in the node (its `Stat::mzxid`, as the
    /// read that found it returned). Nothing changes, and the result is `false`:
    /// - if a `set_data` of ours is not written yet: that write is on its way and replaces the
    ///   other client's edit;
    /// - if `data` is not newer than our last write (`mzxid` not above that write's): it is data
    ///   of ours, or data our write went over, as a watch's read can report after our next write
    ///   was answered.
    ///
    /// # Errors
    /// As [`set_data`](Self::set_data).
    pub fn adopt_data(&self, data: impl Into<Vec<u8>>, mzxid: i64) -> Result<bool> {
        let data = data.into();
        self.shared.fw.check_data(&self.shared.config.path, &data)?;
        self.lifecycle.with_started(|()| ())?;
        let mut slot = lock(&self.shared.data);
        if slot.version != slot.written || mzxid <= slot.written_zxid {
            return Ok(false);
        }
        tracing::debug!(path = %self.shared.config.path, "persistent node: adopting data written by another client");
        slot.bytes = data;
        slot.theirs = true;
        Ok(true)
    }

    /// The last error that retrying cannot fix (no permission, a missing parent with parent
    /// creation off), cleared by the next successful create. The node tries again after the
    /// next connection change or `set_data`, unless the error refused its first create for
    /// good: then it is closed (see [`ready`](Self::ready)).
    pub fn last_error(&self) -> Option<CuratorError> {
        self.shared.last_error.borrow().clone()
    }

    /// Resolves with the node's error once it is one no retry mends
    /// ([`CuratorError::is_permanent`]: no permission to create it, say); pending while there is
    /// none. Such an error on the first create closes the node (as [`ready`](Self::ready) says);
    /// after the node was first made, the keeper goes on trying (at the next connection
    /// change). For a caller that waits for the create and must not wait out a refusal
    /// (service discovery's `register`).
    pub async fn refused(&self) -> CuratorError {
        let mut error = self.shared.last_error.subscribe();
        let found = error.wait_for(|e| e.as_ref().is_some_and(CuratorError::is_permanent)).await.map(|e| e.clone());
        match found {
            Ok(Some(err)) => err,
            // The keeper is gone, and with it any refusal to come.
            Ok(None) | Err(_) => std::future::pending().await,
        }
    }

    /// Calls `listener` with the node's path after each time this node creates it, as Curator's
    /// `PersistentNodeListener.nodeCreated`: the creates [`created_events`](Self::created_events)
    /// publishes (not a node adopted, nor one found still in place).
    pub fn add_created_listener(&self, listener: impl Fn(&str) + Send + Sync + 'static) -> ListenerId {
        self.shared.created.add_callback(Arc::new(move |path: &String| listener(path)))
    }

    /// Removes a listener added with [`add_created_listener`](Self::add_created_listener).
    pub fn remove_created_listener(&self, id: ListenerId) -> bool {
        self.shared.created.remove(id)
    }

    /// The paths of the creates to come, as a stream: a stream taken once
    /// [`ready`](Self::ready) or [`wait_for_initial_create`](Self::wait_for_initial_create)
    /// returned after the first create does not get that create.
    ///
    /// # What is published
    /// One event for each node a create request of this node made, once it is known to have
    /// made it:
    /// - the first create, also when its reply was lost and the node was found by evidence only
    ///   that request could leave (its protected `_c_<uuid>-` name, on this session; or, with
    ///   [`unique_data`](PersistentNodeBuilder::unique_data), its data: docs/architecture.md,
    ///   sections 4.4 and 13). That request made the node, once, and no event told it before;
    /// - each create after the node went: deleted by someone, or gone with its session (one
    ///   that expired, or that the client presumed lost because the server stayed silent for
    ///   most of a session timeout, a server restart that long included): the node is made
    ///   again, under its name, on the new session.
    ///
    /// Nothing for a node that was there already: a node at the path that is adopted (a
    /// persistent node, or our own ephemeral met by a create), and our node found still in
    /// place after a reconnection on the same session, which is checked with one request and
    /// not created again. A create at the node's known path whose reply was lost and that then
    /// meets its node cannot tell it from such a node (a fixed path carries no evidence of its
    /// own): it is adopted, without an event, as Curator's `PersistentNode` does not call
    /// `nodeCreated` for a node its create found there.
    pub fn created_events(&self) -> EventStream<String> {
        self.shared.created.stream()
    }

    /// Stops keeping the node and deletes it with a guaranteed delete. Connected, it returns
    /// once the node is deleted (or after the connection timeout); not connected, at once. A
    /// delete that cannot finish goes on in the background until the node is gone, its
    /// session has ended or the framework closes. A create in flight is finished first, so
    /// that its outcome is known.
    ///
    /// Takes `&self`, so that a node shared between tasks (an `Arc`) can be closed while
    /// another task still uses it (a service registration still waiting for its create): every
    /// caller returns once the node is closed as described. Idempotent; a node never started
    /// has nothing to delete.
    pub async fn close(&self) {
        self.close_in_background();
        // Never started: no keeper will say it ended.
        drop(lock(&self.finish).take());
        let mut finished = self.finished.clone();
        // An error means the keeper's task ended without saying so (it panicked): closed too.
        let _ = finished.wait_for(|done| *done).await;
    }
}

impl PersistentNode {
    /// Closes the node without waiting: the keeper deletes it in the background (the drop's
    /// close, also for the recipes built on the node).
    pub(crate) fn close_in_background(&self) {
        self.lifecycle.close();
        self.shared.close();
    }
}

impl Drop for PersistentNode {
    /// Closes the node in the background (see [`close`](Self::close)).
    fn drop(&mut self) {
        self.close_in_background();
    }
}
